/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The check of a mounted filesystem (fsck.cfs -n on a mounted volume; cfsd runs it).
 *
 * It walks the tree from the root as a reader does, one object per operation, under the same
 * glocks a reader takes (an inode's PR, the group's for its header), so that nothing of any
 * node's is held for longer than one inode's or one directory's check.  In each operation it
 * reads what it checks from the LUNs (cfs_bcache_fresh: a clean cached block is read again;
 * a dirty one, newer here than there, is taken as it is) and verifies it with the verifiers
 * the daemon and fsck share:
 *   - every inode: its fields, inline xattrs, extent map and overflow chain, its xattr block,
 *     the type its entry gives it, a directory's parent, a link count of 0 under a name;
 *   - every directory: its blocks and their entries (names, buckets, counts), the count its
 *     inode keeps, a directory reached twice;
 *   - every block an inode uses (its own, its extents, overflow and xattr blocks) marked in
 *     its group's bitmap; where another node holds the group, the header here is a hint, so
 *     a block it calls free is confirmed with the group fetched first;
 *   - every group header against its bitmap, the group fetched first.
 *   - every directory's link count against its subdirectories, in its listing's operation;
 *   - every file's link count against the names the walk met, a count that differs counted
 *     again until a count sees the tree hold still (check_links.c);
 *   - every block a group marks in use that the walk did not meet, settled by reading again
 *     what could own it while the group holds still (check_leaks.c).
 * What only a frozen filesystem can tell is left to fsck.cfs offline: quota usage, the
 * journals.  A suspicion
 * that the tree changed under (an entry gone, an inode freed) is looked at again in one
 * operation before it counts. */
#include "cfs/check_leaks.h"
#include "cfs/check_links.h"
#include "cfs/internal.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

struct todo { /* a directory to list */
	uint64_t ino;
	char *path;
	bool orphans; /* a slot's orphan directory: unlinked inodes, not descended into */
};

struct entry {
	char *name;
	uint64_t ino;
	uint8_t type;
};

struct check {
	struct cfs_fs *fs;
	const struct cfs_check_opts *o;
	struct cfs_check_progress *p;
	struct todo *todo;
	size_t ntodo, todo_cap;
	struct seen { uint64_t ino, from; } *seen; /* directories: a cfs_table_slot table */
	size_t seen_cap, nseen;
	struct timespec started;
	struct cfs_links *links; /* the names met of each file */
	struct cfs_leaks *leaks; /* the blocks met in use, and the inodes read */
	uint64_t reread;         /* inodes read again by the confirmation of leaks */
	bool damaged_inode;      /* one the walk could not read */
	char said[512]; /* what cfs_log said in the operation in hand */
	bool quiet;       /* problems only counted in quieted, not said (list_dir_sure) */
	uint64_t quieted;
	/* the directory being listed */
	struct entry *ents;
	size_t nents, ents_cap;
	uint64_t *blocks; /* its overflow blocks */
	size_t nblocks, blocks_cap;
	const char *path;
	int error; /* of the listing's callbacks */
};

static void problem(struct check *k, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void problem(struct check *k, const char *fmt, ...)
{
	if (k->quiet) {
		k->quieted++;
		return;
	}
	char line[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	k->p->problems++;
	cfs_log(k->fs, "check: %s", line);
	if (k->o->problem)
		k->o->problem(k->o->arg, line);
}

/* Why the last call failed: what the daemon logged, or the errno. */
static const char *why(const struct check *k, int rc)
{
	return k->said[0] ? k->said : strerror(-rc);
}

static int begin(struct check *k)
{
	int rc = cfs_op_begin(k->fs, false);
	if (!rc)
		cfs_bcache_fresh(true, k->said, sizeof k->said);
	return rc;
}

static void end(struct check *k)
{
	cfs_bcache_fresh(false, NULL, 0);
	cfs_op_end(k->fs);
}

/* Keep to o->rate inodes a second, and stop when asked. */
static int pace(struct check *k)
{
	if (k->o->progress)
		k->o->progress(k->o->arg, k->p);
	if (k->o->stop && *k->o->stop)
		return -ECANCELED;
	if (!k->o->rate)
		return 0;
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	double done = (double)(now.tv_sec - k->started.tv_sec) +
		      (double)(now.tv_nsec - k->started.tv_nsec) / 1e9;
	double due = (double)(k->p->inodes + k->p->directories + k->reread) / (double)k->o->rate;
	if (due > done) {
		double s = due - done;
		nanosleep(&(struct timespec){(time_t)s, (long)((s - (double)(time_t)s) * 1e9)}, NULL);
	}
	return 0;
}

/* The directory (by ino) a directory was first reached from, 0 if it was not reached yet;
 * records from, if not. */
static int reached_from(struct check *k, uint64_t ino, uint64_t from, uint64_t *first)
{
	bool added;
	struct seen *s = cfs_table_slot((void **)&k->seen, &k->seen_cap, &k->nseen, sizeof *s, ino,
					&added);
	if (!s)
		return -ENOMEM;
	*first = added ? 0 : s->from;
	if (added)
		s->from = from;
	return 0;
}

static int todo_push(struct check *k, uint64_t ino, const char *path, bool orphans)
{
	int rc = cfs_reserve((void **)&k->todo, &k->todo_cap, k->ntodo + 1, sizeof *k->todo);
	char *copy = rc ? NULL : strdup(path);
	if (!copy)
		return -ENOMEM;
	k->todo[k->ntodo++] = (struct todo){ino, copy, orphans};
	return 0;
}

/* The blocks [blk, blk + len) an inode uses are marked in use: 0, a problem said, or
 * -EAGAIN with *ag the group to fetch before asking again. */
static int marked(struct check *k, uint64_t blk, uint64_t len, const char *what,
		  const char *path, uint64_t ino, uint32_t *ag)
{
	uint64_t unmarked;
	k->said[0] = '\0';
	cfs_leaks_met(k->leaks, blk, len);
	int rc = cfs_blocks_marked(k->fs, blk, len, &unmarked);
	if (rc == -EAGAIN)
		*ag = cfs_ag_of(k->fs, unmarked);
	else if (rc == -ENOENT)
		problem(k, "%s (inode %" PRIu64 "): its %s at block %" PRIu64 " is free in its "
			   "group's bitmap (another file may be given it)", path, ino, what, unmarked);
	else if (rc)
		problem(k, "%s (inode %" PRIu64 "): the group of block %" PRIu64 ": %s", path, ino,
			blk, why(k, rc));
	return rc == -EAGAIN ? rc : 0;
}

struct marking {
	struct check *k;
	const char *path;
	uint64_t ino;
	uint32_t *ag;
};

static int mark_run(void *arg, uint64_t blk, uint64_t len, const char *what)
{
	struct marking *m = arg;
	return marked(m->k, blk, len, what, m->path, m->ino, m->ag);
}

static int blocks_marked(struct check *k, const struct cfs_inode *c, const char *path,
			 uint32_t *ag)
{
	struct marking m = {k, path, c->ino, ag};
	return cfs_inode_copy_blocks(k->fs, c, mark_run, &m);
}

/* What an inode says of its name, for the caller to hold against the entry. */
struct relation {
	uint32_t mode, nlink;
	uint64_t parent;
	struct timespec ctime;
};

/* One inode, named path, in one operation: itself, its xattrs and that its blocks are
 * marked; *rel what it says of its name.  -ESTALE: it is not in use (the caller looks
 * whether its entry still is); -EAGAIN: a group to fetch (*ag) before asking again;
 * -EIO: damaged (said). */
static int check_inode(struct check *k, uint64_t ino, const char *path, struct relation *rel,
		       uint32_t *ag)
{
	int rc = begin(k);
	if (rc)
		return rc;
	struct cfs_inode *ip, c = {0};
	k->said[0] = '\0';
	rc = cfs_iget_entry(k->fs, ino, &ip);
	if (!rc) {
		k->said[0] = '\0';
		rc = cfs_inode_read_copy(k->fs, ino, &c);
	}
	if (rc == -EIO) {
		problem(k, "%s (inode %" PRIu64 "): %s", path, ino, why(k, rc));
		cfs_leaks_met(k->leaks, ino, 1); /* its own block; what it uses is unknown */
		k->damaged_inode = true;
	}
	if (rc) {
		cfs_iput_check(k->fs, ip);
		end(k);
		return rc;
	}
	*rel = (struct relation){c.d.mode, c.d.nlink, c.d.parent, {c.d.ctime, c.d.ctime_ns}};
	cfs_leaks_inode(k->leaks, ino);
	if (c.d.xattr_block) {
		k->said[0] = '\0';
		int x = cfs_xattr_list(k->fs, ip, NULL, 0);
		if (x < 0)
			problem(k, "%s (inode %" PRIu64 "): xattr block %" PRIu64 ": %s", path, ino,
				c.d.xattr_block, why(k, x));
	}
	rc = blocks_marked(k, &c, path, ag);
	if (rc != -EAGAIN) {
		if (S_ISDIR(c.d.mode))
			k->p->directories++;
		else
			k->p->inodes++;
	}
	cfs_inode_copy_free(&c);
	cfs_iput_check(k->fs, ip);
	end(k);
	return rc;
}

/* Fetch group ag (its glock EX here) in an operation of its own, holding nothing else. */
static int fetch_group(struct check *k, uint32_t ag)
{
	int rc = cfs_op_begin(k->fs, false);
	if (rc)
		return rc;
	rc = cfs_group_fetch(k->fs, ag, true);
	cfs_op_end(k->fs);
	return rc;
}

/* check_inode, once more after fetching the group a hint called a block of it free in. */
static int check_inode_sure(struct check *k, uint64_t ino, const char *path,
			    struct relation *rel)
{
	uint32_t ag = 0;
	int rc = check_inode(k, ino, path, rel, &ag);
	if (rc == -EAGAIN && !(rc = fetch_group(k, ag)))
		rc = check_inode(k, ino, path, rel, &ag);
	if (rc == -EAGAIN) { /* the group went back meanwhile: not confirmed either way */
		k->p->unconfirmed++;
		rc = 0;
	}
	return rc;
}

/* What is wrong between entry e of directory dir and what its inode says, NULL if nothing.
 * dir 0: an orphan directory's entry, which says DT_REG whatever it names (cfs_orphan_add: a
 * directory removed while the kernel knows it is one too). */
static const char *mismatch(const struct entry *e, uint64_t dir, const struct relation *rel)
{
	if (dir && e->type && (uint32_t)e->type << 12 != (rel->mode & S_IFMT))
		return "its entry's type is not the inode's";
	if (dir && rel->nlink == 0)
		return "a name, and a link count of 0";
	if (dir && S_ISDIR(rel->mode) && rel->parent != dir)
		return "a directory whose parent is another than the directory naming it";
	return NULL;
}

/* The entry and its inode looked at again together, in one operation (the listing and
 * the inode's check were two: a rename, unlink or new name may have come between).  *still:
 * the entry names ino yet; then *type is the type it gives now (the inode may have been freed
 * and made anew under the same name: an orphan directory names its entries by inode), *irc
 * says how its inode read (-ESTALE: not in use) and *rel what it says. */
static int look_again(struct check *k, uint64_t dir_ino, const char *name, uint64_t ino,
		      bool *still, uint8_t *type, int *irc, struct relation *rel)
{
	int rc = cfs_op_begin(k->fs, false);
	if (rc)
		return rc;
	struct cfs_inode *dir, *ip = NULL;
	uint64_t now = 0;
	*still = false;
	if (!(rc = cfs_iget_entry(k->fs, dir_ino, &dir)) &&
	    !(rc = cfs_dir_lookup(k->fs, dir, name, &now, type)) && now == ino) {
		*still = true;
		dir->pins++; /* the inode's glock may be waited for with fs->lock let go */
		*irc = cfs_iget_entry(k->fs, ino, &ip);
		dir->pins--;
		if (!*irc)
			*rel = (struct relation){ip->d.mode, ip->d.nlink, ip->d.parent,
						 {ip->d.ctime, ip->d.ctime_ns}};
	}
	cfs_iput_check(k->fs, ip);
	cfs_iput_check(k->fs, dir);
	cfs_op_end(k->fs);
	return rc == -ENOENT || rc == -ESTALE || rc == -EIO ? 0 : rc;
}

static int check_entry(struct check *k, const struct todo *t, const struct entry *e)
{
	char path[4096];
	snprintf(path, sizeof path, "%s%s%s", t->path, strcmp(t->path, "/") ? "/" : "", e->name);
	uint64_t dir = t->orphans ? 0 : t->ino;
	struct relation rel = {0};
	int rc = check_inode_sure(k, e->ino, path, &rel);
	if (rc == -EIO)
		return 0; /* said */
	if (rc && rc != -ESTALE)
		return rc;
	const char *wrong = rc == -ESTALE ? "names an inode not in use" : mismatch(e, dir, &rel);
	bool still = true;
	if (wrong) {
		int irc = 0;
		struct entry now = *e;
		if ((rc = look_again(k, t->ino, e->name, e->ino, &still, &now.type, &irc, &rel)))
			return rc;
		wrong = irc == -ESTALE ? wrong : irc ? NULL : mismatch(&now, dir, &rel);
	}
	if (wrong && still)
		problem(k, "%s (inode %" PRIu64 "): %s", path, e->ino, wrong);
	if (wrong || !still || t->orphans)
		return 0;
	if (!S_ISDIR(rel.mode))
		return cfs_links_met(k->links, e->ino, rel.nlink, &rel.ctime);
	uint64_t first;
	if ((rc = reached_from(k, e->ino, t->ino, &first)))
		return rc;
	if (!first)
		return todo_push(k, e->ino, path, false);
	if (first == t->ino) /* both names in one listing: not a rename meanwhile */
		problem(k, "%s (inode %" PRIu64 "): a directory with two names in one directory",
			path, e->ino);
	return 0;
}

/* ---- listing a directory (one operation) ---- */
static void on_block(void *arg, uint64_t blkno)
{
	struct check *k = arg;
	if (cfs_reserve((void **)&k->blocks, &k->blocks_cap, k->nblocks + 1, sizeof *k->blocks))
		k->error = -ENOMEM;
	else
		k->blocks[k->nblocks++] = blkno;
}

static int on_entry(void *arg, const char *name, size_t len, uint64_t ino, uint8_t type,
		    const uint64_t *misplaced)
{
	struct check *k = arg;
	if (misplaced) {
		problem(k, "%s: an entry of %zu bytes naming inode %" PRIu64 " in bucket %" PRIu64
			   " that lookups do not search (or a name the kernel refuses)", k->path, len,
			ino, *misplaced);
		return 0;
	}
	char *copy = strndup(name, len);
	if (!copy || cfs_reserve((void **)&k->ents, &k->ents_cap, k->nents + 1, sizeof *k->ents)) {
		free(copy);
		return k->error = -ENOMEM;
	}
	k->ents[k->nents++] = (struct entry){copy, ino, type};
	return 0;
}

static void on_damaged(void *arg, uint64_t bucket, uint64_t blkno, uint64_t prev)
{
	struct check *k = arg;
	problem(k, "%s: directory block %" PRIu64 " (bucket %" PRIu64 ", after block %" PRIu64
		   "): %s: the names from there on are lost to lookups", k->path, blkno, bucket, prev,
		k->said[0] ? k->said : "damaged");
}

static void on_count(void *arg, struct cfs_buf *b, uint32_t entries)
{
	struct check *k = arg;
	problem(k, "%s: directory block %" PRIu64 " counts other than its %u entries", k->path,
		b->blkno, entries);
}

static void entries_free(struct check *k)
{
	for (size_t i = 0; i < k->nents; i++)
		free(k->ents[i].name);
	k->nents = k->nblocks = 0;
}

/* A directory's link count against its listing, in the listing's operation: 2 and one for
 * each subdirectory's "..".  (A file's count would need every directory listed at one
 * moment, which only the offline check has.)  The count as the LUNs hold it, as
 * check_inode reads an inode. */
static int check_subdirs(struct check *k, const struct todo *t)
{
	uint64_t subdirs = 0;
	for (size_t i = 0; i < k->nents; i++)
		subdirs += k->ents[i].type == DT_DIR;
	struct cfs_inode c = {0};
	int rc = cfs_inode_read_copy(k->fs, t->ino, &c);
	if (rc == -EIO || rc == -ESTALE)
		return 0; /* said when it was checked as an entry, or gone since */
	if (!rc && c.d.nlink != 2 + subdirs)
		problem(k, "%s (inode %" PRIu64 "): link count %" PRIu32 ", should be %" PRIu64
			   " (2 and its %" PRIu64 " subdirectories)", t->path, t->ino, c.d.nlink,
			2 + subdirs, subdirs);
	cfs_inode_copy_free(&c);
	return rc;
}

static int list_dir(struct check *k, const struct todo *t)
{
	int rc = begin(k);
	if (rc)
		return rc;
	struct cfs_inode *dir;
	k->path = t->path;
	k->error = 0;
	k->said[0] = '\0';
	if ((rc = cfs_iget_entry(k->fs, t->ino, &dir))) {
		if (rc == -EIO)
			problem(k, "%s (inode %" PRIu64 "): %s", t->path, t->ino, why(k, rc));
		end(k);
		return rc == -EIO || rc == -ESTALE ? 0 : rc; /* removed since it was seen */
	}
	if (!S_ISDIR(dir->d.mode)) { /* removed since it was seen, its block a new file's now */
		cfs_iput_check(k->fs, dir);
		end(k);
		return 0;
	}
	struct cfs_dir_check cb = {on_block, on_entry, on_damaged, on_count, k};
	rc = cfs_dir_check(k->fs, dir, &cb);
	rc = rc ? rc : k->error;
	if (!rc && dir->d.dir_entries != k->nents)
		problem(k, "%s (inode %" PRIu64 "): says %" PRIu64 " entries, has %zu", t->path,
			t->ino, dir->d.dir_entries, k->nents);
	if (!rc && !t->orphans)
		rc = check_subdirs(k, t);
	uint32_t ag = 0;
	for (size_t i = 0; !rc && i < k->nblocks; i++)
		if (marked(k, k->blocks[i], 1, "directory block", t->path, t->ino, &ag) == -EAGAIN)
			k->p->unconfirmed++; /* confirmed when the directory is checked as an entry */
	cfs_iput_check(k->fs, dir);
	end(k);
	return rc;
}

/* list_dir, and once more if it found a problem, after fetching the group of the
 * directory's inode: on a cluster another node may have removed the directory meanwhile and
 * given its blocks to a file, while this node's hint of that group still called the inode in
 * use (the fetch makes it current: the inode then reads as not in use). */
static int list_dir_sure(struct check *k, const struct todo *t)
{
	k->quiet = true;
	k->quieted = 0;
	int rc = list_dir(k, t);
	k->quiet = false;
	if (rc || !k->quieted)
		return rc;
	entries_free(k);
	if (k->fs->cluster && (rc = fetch_group(k, cfs_ag_of(k->fs, t->ino))))
		return rc;
	return list_dir(k, t);
}

static int walk(struct check *k)
{
	int rc = 0;
	while (!rc && k->ntodo) {
		struct todo t = k->todo[--k->ntodo];
		rc = list_dir_sure(k, &t);
		for (size_t i = 0; !rc && i < k->nents; i++)
			if (!(rc = check_entry(k, &t, &k->ents[i])))
				rc = pace(k);
		entries_free(k);
		free(t.path);
	}
	return rc;
}

/* An inode the superblock names; list: a directory to list (orphans: a slot's orphans). */
static int check_system(struct check *k, uint64_t ino, const char *what, bool list,
			bool orphans)
{
	struct relation rel;
	int rc = check_inode_sure(k, ino, what, &rel);
	if (rc == -ESTALE)
		problem(k, "%s (inode %" PRIu64 "): named by the superblock, not in use", what, ino);
	if (rc == -EIO || rc == -ESTALE)
		return 0; /* said */
	uint64_t first;
	if (!rc && list && !orphans)
		rc = reached_from(k, ino, ino, &first);
	return rc || !list ? rc : todo_push(k, ino, what, orphans);
}

static int check_groups(struct check *k)
{
	struct cfs_fs *fs = k->fs;
	k->p->groups_total = fs->sb.nags;
	int rc = 0;
	for (uint32_t g = 0; !rc && g < fs->sb.nags; g++) {
		/* On a cluster the header is the group glock's: fetched, it is current here. */
		if (fs->cluster && (rc = fetch_group(k, g)))
			break;
		if ((rc = begin(k)))
			break;
		k->said[0] = '\0';
		int bad = cfs_group_is_ours(fs, g) ? cfs_group_check(fs, g) : -EAGAIN;
		end(k);
		if (bad == -EAGAIN)
			k->p->unconfirmed++; /* another node took it back at once */
		else if (bad)
			problem(k, "allocation group %u (header block %" PRIu64 "): %s", g,
				cfs_ag_first(&fs->sb, g), why(k, bad));
		k->p->groups = g + 1;
		rc = pace(k);
	}
	return rc;
}

static void said_problem(void *arg, const char *line)
{
	problem(arg, "%s", line);
}

static void reread(void *arg)
{
	struct check *k = arg;
	k->reread++;
	pace(k);
}

/* The blocks in use that the walk did not meet, settled (check_leaks.c). */
static int check_leaks(struct check *k)
{
	struct cfs_leaks_confirm c = {.tries = 3, .stop = k->o->stop, .problem = said_problem,
				      .read = reread, .arg = k, .damaged = k->damaged_inode};
	int rc = cfs_leaks_confirm(k->fs, k->leaks, &c);
	k->p->unconfirmed += c.unconfirmed;
	return rc;
}

/* The files whose names met differ from their link counts, counted again. */
static int check_links(struct check *k)
{
	struct cfs_links_confirm c = {.tries = 3, .stop = k->o->stop, .problem = said_problem,
				      .arg = k};
	int rc = cfs_links_confirm(k->fs, k->links, &c);
	k->p->unconfirmed += c.unconfirmed;
	return rc;
}

int cfs_check_mounted(struct cfs_fs *fs, const struct cfs_check_opts *o,
		      struct cfs_check_progress *p)
{
	struct check k = {.fs = fs, .o = o, .p = p};
	memset(p, 0, sizeof *p);
	clock_gettime(CLOCK_MONOTONIC, &k.started);
	k.links = cfs_links_new(fs->sb.total_blocks);
	k.leaks = cfs_leaks_new(fs->sb.total_blocks);
	if (!k.links || !k.leaks) {
		cfs_links_free(k.links);
		cfs_leaks_free(k.leaks);
		return -ENOMEM;
	}
	/* The root, the slots' orphan directories and the quota files, named by the
	 * superblock rather than by entries. */
	int rc = check_system(&k, fs->sb.root_ino, "/", true, false);
	for (uint32_t s = 0; !rc && s < fs->sb.nslots; s++) {
		char what[48];
		snprintf(what, sizeof what, "(orphans of slot %u)", s);
		rc = check_system(&k, fs->sb.orphan_dir[s], what, true, true);
		snprintf(what, sizeof what, "(quota grants of slot %u)", s);
		if (!rc && fs->sb.quota_slot_ino[s])
			rc = check_system(&k, fs->sb.quota_slot_ino[s], what, false, false);
	}
	for (unsigned t = 0; !rc && t < CFS_QUOTA_TYPES; t++)
		if (fs->sb.quota_ino[t])
			rc = check_system(&k, fs->sb.quota_ino[t], "(quota records)", false, false);
	if (!rc)
		rc = walk(&k);
	if (!rc)
		rc = check_links(&k);
	if (!rc)
		rc = check_groups(&k);
	if (!rc)
		rc = check_leaks(&k);
	cfs_links_free(k.links);
	cfs_leaks_free(k.leaks);
	for (size_t i = 0; i < k.ntodo; i++)
		free(k.todo[i].path);
	entries_free(&k);
	free(k.todo);
	free(k.seen);
	free(k.ents);
	free(k.blocks);
	return rc;
}
