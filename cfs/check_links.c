/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Files' link counts against their names, for the check of a mounted filesystem.
 *
 * The check's walk meets every name of every file once (cfs_links_met), each in its own
 * operation while other nodes go on: a bit a block remembers the files of one link met once
 * (most files: the memory is the volume's blocks / 8 bytes), a record each of the others.
 * A count that differs from the link count there may be the walk's own: names came, went and
 * moved while it went on.  So the suspects are counted again by a walk of the names alone
 * (cfs_links_confirm), which is a count of the tree at one moment when every directory it
 * listed reads the same ctime after the walk as at its listing (a name added, removed or moved
 * changes its directory's ctime; nothing changed after any listing, so each held until the
 * last listing).  A suspect whose own ctime held over that walk kept its names over it (a
 * link, unlink or rename of it sets its ctime), so a count that differs there is a problem.
 * A walk that saw the tree change is done again, up to c->tries times; what none settles is
 * "unconfirmed". */
#include "cfs/check_links.h"

#include "cfs/internal.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define PATHS_KEPT 3 /* names of a suspect said in its line */

struct link_rec {
	uint64_t ino; /* 0: a free slot */
	uint32_t nlink, names;
	struct timespec ctime;
	bool changed;  /* met with another ctime at a later name */
	bool counting; /* (confirming) a suspect whose names the names walk counts */
	bool settled;  /* (confirming) counted in a walk of a still tree */
	char *paths[PATHS_KEPT];
};

struct cfs_links {
	uint64_t *once; /* a bit a block: a file of one link, met once */
	uint64_t blocks;
	struct link_rec *v; /* a cfs_table_slot table on ino */
	size_t cap, n;
};

struct cfs_links *cfs_links_new(uint64_t blocks)
{
	struct cfs_links *l = calloc(1, sizeof *l);
	if (l && !(l->once = calloc(blocks / 64 + 1, sizeof *l->once))) {
		free(l);
		return NULL;
	}
	if (l)
		l->blocks = blocks;
	return l;
}

static void paths_free(struct link_rec *r)
{
	for (unsigned i = 0; i < PATHS_KEPT; i++) {
		free(r->paths[i]);
		r->paths[i] = NULL;
	}
}

void cfs_links_free(struct cfs_links *l)
{
	if (!l)
		return;
	for (size_t i = 0; i < l->cap; i++)
		paths_free(&l->v[i]);
	free(l->v);
	free(l->once);
	free(l);
}

static struct link_rec *find(const struct cfs_links *l, uint64_t ino)
{
	return cfs_table_find(l->v, l->cap, sizeof *l->v, ino);
}

static bool same_time(const struct timespec *a, const struct timespec *b)
{
	return a->tv_sec == b->tv_sec && a->tv_nsec == b->tv_nsec;
}

int cfs_links_met(struct cfs_links *l, uint64_t ino, uint32_t nlink, const struct timespec *ctime)
{
	uint64_t bit = ino < l->blocks ? UINT64_C(1) << (ino % 64) : 0;
	uint64_t *word = bit ? &l->once[ino / 64] : NULL;
	struct link_rec *r = find(l, ino);
	if (!r && nlink == 1 && word && !(*word & bit)) {
		*word |= bit;
		return 0;
	}
	bool met_once = word && (*word & bit);
	if (!r) {
		bool added;
		if (!(r = cfs_table_slot((void **)&l->v, &l->cap, &l->n, sizeof *r, ino, &added)))
			return -ENOMEM;
		/* Met before with one link (no ctime kept): another count now is a change. */
		*r = (struct link_rec){.ino = ino, .nlink = nlink, .names = met_once, .ctime = *ctime,
				       .changed = met_once && nlink != 1};
		if (met_once)
			*word &= ~bit;
	} else if (r->nlink != nlink || !same_time(&r->ctime, ctime)) {
		r->changed = true;
	}
	r->names++;
	return 0;
}

/* Its names met differ from its link count, or its count changed during the walk; a walk
 * of the names alone counts it again (count_once), until settled. */
static bool suspect(const struct link_rec *r)
{
	return r->ino && !r->settled && (r->changed || r->names != r->nlink);
}

size_t cfs_links_suspects(const struct cfs_links *l)
{
	size_t n = 0;
	for (size_t i = 0; i < l->cap; i++)
		n += suspect(&l->v[i]);
	return n;
}

/* ---- counting the suspects' names again ---- */

struct listed { /* a directory the names walk listed, and its ctime then */
	uint64_t ino;
	struct timespec ctime;
};

struct names_walk {
	struct cfs_fs *fs;
	struct cfs_links *l;
	struct { uint64_t ino; char *path; } *todo;
	size_t ntodo, todo_cap;
	struct listed *listed;
	size_t nlisted, listed_cap;
	uint64_t *queued; /* directories queued (a cfs_table_slot table): a loop is listed once */
	size_t queued_cap, nqueued;
	const char *path; /* of the directory being listed */
};

static char *join(const char *dir, const char *name, size_t len)
{
	char *path;
	return asprintf(&path, "%s%s%.*s", dir, strcmp(dir, "/") ? "/" : "", (int)len, name) < 0
		       ? NULL : path;
}

/* Queue directory ino (path, taken) to be listed, unless it was. */
static int todo_push(struct names_walk *w, uint64_t ino, char *path)
{
	bool added = false;
	int rc = path && cfs_table_slot((void **)&w->queued, &w->queued_cap, &w->nqueued,
				       sizeof *w->queued, ino, &added) ? 0 : -ENOMEM;
	if (!rc && added)
		rc = cfs_reserve((void **)&w->todo, &w->todo_cap, w->ntodo + 1, sizeof *w->todo);
	if (rc || !added) {
		free(path);
		return rc;
	}
	w->todo[w->ntodo].ino = ino;
	w->todo[w->ntodo++].path = path;
	return 0;
}

static int on_name(void *arg, const char *name, size_t len, uint64_t ino, uint8_t type)
{
	struct names_walk *w = arg;
	if (type == DT_DIR)
		return todo_push(w, ino, join(w->path, name, len));
	struct link_rec *r = find(w->l, ino);
	if (!r || !r->counting)
		return 0;
	if (r->names < PATHS_KEPT)
		r->paths[r->names] = join(w->path, name, len); /* NULL: the line names fewer */
	r->names++;
	return 0;
}

/* List one directory in one operation: its suspects' names counted, its subdirectories
 * queued, its ctime kept.  One gone or damaged since the check's walk listed it (which said
 * so) is kept with no ctime: it counts as a change. */
static int list_names(struct names_walk *w, uint64_t ino, const char *path)
{
	int rc = cfs_reserve((void **)&w->listed, &w->listed_cap, w->nlisted + 1, sizeof *w->listed);
	if (rc || (rc = cfs_op_begin(w->fs, false)))
		return rc;
	struct listed *d = &w->listed[w->nlisted++];
	*d = (struct listed){ino, {-1, 0}};
	struct cfs_inode *dir;
	if (!(rc = cfs_iget_entry(w->fs, ino, &dir))) {
		if (S_ISDIR(dir->d.mode)) { /* else removed, its block a new file's: a change */
			d->ctime = (struct timespec){dir->d.ctime, dir->d.ctime_ns};
			w->path = path;
			rc = cfs_dir_walk(w->fs, dir, on_name, w);
		}
		cfs_iput_check(w->fs, dir);
	}
	cfs_op_end(w->fs);
	return rc == -ESTALE || rc == -ENOENT || rc == -EIO ? 0 : rc;
}

/* The ctime and link count of inode ino now, as the LUNs hold them (as the check's walk
 * read them: damage made behind the daemon's back is not in its cache), in an operation of
 * its own. */
static int read_now(struct cfs_fs *fs, uint64_t ino, struct timespec *ctime, uint32_t *nlink)
{
	int rc = cfs_op_begin(fs, false);
	if (rc)
		return rc;
	cfs_bcache_fresh(true, NULL, 0);
	struct cfs_inode *ip, c = {0};
	if (!(rc = cfs_iget_entry(fs, ino, &ip))) {
		if (!(rc = cfs_inode_read_copy(fs, ino, &c))) {
			*ctime = (struct timespec){c.d.ctime, c.d.ctime_ns};
			*nlink = c.d.nlink;
		}
		cfs_inode_copy_free(&c);
		cfs_iput_check(fs, ip);
	}
	cfs_bcache_fresh(false, NULL, 0);
	cfs_op_end(fs);
	return rc;
}

static bool gone(int rc)
{
	return rc == -ESTALE || rc == -ENOENT || rc == -EIO;
}

/* The ctime of directory ino now, from the in-memory inode under its glock (as its listing
 * took it: no read from the LUNs). */
static int dir_ctime_now(struct cfs_fs *fs, uint64_t ino, struct timespec *ctime)
{
	int rc = cfs_op_begin(fs, false);
	if (rc)
		return rc;
	struct cfs_inode *dir;
	if (!(rc = cfs_iget_entry(fs, ino, &dir))) {
		*ctime = (struct timespec){dir->d.ctime, dir->d.ctime_ns};
		cfs_iput_check(fs, dir);
	}
	cfs_op_end(fs);
	return rc;
}

/* Did any directory the walk listed change since its listing? */
static int tree_changed(struct names_walk *w, const volatile int *stop, bool *changed)
{
	*changed = false;
	for (size_t i = 0; i < w->nlisted && !*changed; i++) {
		if (stop && *stop)
			return -ECANCELED;
		struct timespec now;
		int rc = dir_ctime_now(w->fs, w->listed[i].ino, &now);
		if (rc && !gone(rc))
			return rc;
		*changed = rc || !same_time(&now, &w->listed[i].ctime);
	}
	return 0;
}

static int names_walk(struct names_walk *w, const volatile int *stop)
{
	int rc = todo_push(w, w->fs->sb.root_ino, strdup("/"));
	while (!rc && w->ntodo) {
		if (stop && *stop)
			return -ECANCELED;
		uint64_t ino = w->todo[--w->ntodo].ino;
		char *path = w->todo[w->ntodo].path; /* its slot is the next push's */
		rc = list_names(w, ino, path);
		free(path);
	}
	return rc;
}

static void names_walk_free(struct names_walk *w)
{
	for (size_t i = 0; i < w->ntodo; i++)
		free(w->todo[i].path);
	free(w->todo);
	free(w->listed);
	free(w->queued);
}

/* A suspect of a still tree: settled, said if its count is wrong. */
static void settle(struct link_rec *r, struct cfs_links_confirm *c)
{
	r->settled = true;
	if (r->names == r->nlink)
		return;
	const char *p[PATHS_KEPT];
	for (unsigned i = 0; i < PATHS_KEPT; i++)
		p[i] = r->paths[i] ? r->paths[i] : "";
	char line[1024];
	snprintf(line, sizeof line, "%s (inode %" PRIu64 "): link count %" PRIu32 ", but %" PRIu32
		 " name%s%s%s%s%s%s", r->paths[0] ? p[0] : "(no name)", r->ino, r->nlink, r->names,
		 r->names == 1 ? "" : "s", *p[1] ? " (also " : "", p[1], *p[1] && *p[2] ? ", " : "",
		 p[2], *p[1] ? ")" : "");
	c->problem(c->arg, line);
}

/* One count: each suspect read before, the names walk, the directories and the suspects
 * read again.  *left: suspects not settled. */
static int count_once(struct cfs_fs *fs, struct cfs_links *l, struct cfs_links_confirm *c,
		      size_t *left)
{
	for (size_t i = 0; i < l->cap; i++) {
		struct link_rec *r = &l->v[i];
		if (!(r->counting = suspect(r)))
			continue;
		paths_free(r);
		r->names = 0;
		r->changed = false;
		int rc = read_now(fs, r->ino, &r->ctime, &r->nlink);
		if (gone(rc)) { /* freed (or said damaged) since: nothing to count */
			r->settled = true;
			r->counting = false;
		} else if (rc) {
			return rc;
		}
	}
	struct names_walk w = {.fs = fs, .l = l};
	bool changed = false;
	int rc = names_walk(&w, c->stop);
	if (!rc)
		rc = tree_changed(&w, c->stop, &changed);
	names_walk_free(&w);
	*left = 0;
	for (size_t i = 0; !rc && i < l->cap; i++) {
		struct link_rec *r = &l->v[i];
		if (!r->counting)
			continue;
		r->counting = false;
		struct timespec now;
		uint32_t nlink;
		int got = read_now(fs, r->ino, &now, &nlink);
		if (gone(got))
			r->settled = true;
		else if (got)
			rc = got;
		else if (!changed && same_time(&now, &r->ctime) && nlink == r->nlink)
			settle(r, c);
		else {
			r->changed = true; /* a suspect still, for the next count */
			++*left;
		}
	}
	return rc;
}

int cfs_links_confirm(struct cfs_fs *fs, struct cfs_links *l, struct cfs_links_confirm *c)
{
	size_t left = cfs_links_suspects(l);
	for (unsigned t = 0; left && t < c->tries; t++) {
		int rc = count_once(fs, l, c, &left);
		if (rc)
			return rc;
	}
	c->unconfirmed = left;
	if (left)
		cfs_log(fs, "check: the link counts of %zu files not confirmed: their names or the "
			    "tree changed during each of %u counts (fsck.cfs -n unmounted checks them)",
			left, c->tries);
	return 0;
}
