/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* fsck: check (and with repair, fix) a CFS filesystem that no node has mounted.
 *
 *   1. superblock and its backup
 *   2. journals: a transaction not yet home is replayed (repair) or read over the disk (check)
 *   3. orphans: unlinked inodes a dead daemon left are freed (repair) or counted in
 *   4. the tree from the root: every inode, extent map, xattr block and directory block is
 *      read and verified and its blocks marked in a bitmap of our own; entries pointing at
 *      damaged or missing inodes, second links to directories, wrong ".." and entry counts
 *   5. lost inodes: inode blocks in use that no entry reached are taken in (and, with
 *      repair, linked into /lost+found once the bitmaps are right)
 *   6. every group's bitmap and free count against the blocks marked
 *   7. link counts against the entries found
 *   8. quotas: every id's usage against what the inodes found hold
 * Repairs go through the journal of slot 0 like any metadata change, so an interrupted fsck
 * leaves a consistent filesystem; the journals are cleared at the end. */
#include "cfs/internal.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct node { /* what the walk learned of one inode */
	uint64_t ino;
	uint32_t links, subdirs;
	uint32_t nlink_disk;
	bool is_dir;
};

enum fix_kind { FIX_REMOVE, FIX_TYPE, FIX_REHOME };
struct fix { /* an entry to mend once the walk is over */
	enum fix_kind kind;
	uint64_t dir;
	char name[CFS_NAME_MAX + 1]; /* its bytes (FIX_REHOME: may hold '/' or NUL), len long */
	uint8_t len;
	uint64_t ino;
	uint8_t type;    /* FIX_TYPE: the type it gets */
	uint64_t bucket; /* FIX_REHOME: where it is */
};

struct fsck {
	struct cfs_fs *fs;
	struct qcount *counts; /* usage per (type, id) found by the walk: open addressing */
	size_t counts_cap, ncounts;
	bool counts_lost;
	/* fsck -n: record files found damaged, which the check of usage must not read (a repair
	 * drops what is damaged first) */
	bool records_damaged[CFS_QUOTA_TYPES], changes_damaged[CFS_MAX_SLOTS];
	bool super_changed; /* quota inodes made or dropped: the superblock is written at the end */
	bool repair;
	cfs_print_fn print;
	void *arg;
	cfs_progress_fn progress;
	struct cfs_fsck_report *r;
	uint8_t *used;
	/* Blocks marked by a file's extents: a metadata block found in one is the metadata's
	 * (stolen), and the extent goes once the walk is over (drop_stealing_extents). */
	uint8_t *in_extent;
	uint64_t *stolen;
	size_t nstolen, stolen_cap;
	/* A file's extents over blocks another claimed first: which claim is wrong is settled
	 * once the walk is over (settle_claims). */
	struct contested { uint64_t ino, lblk; } *contested;
	size_t ncontested, contested_cap;
	struct node *nodes; /* open addressing on ino */
	size_t nodes_cap, nnodes;
	uint64_t *queue;
	size_t qhead, qlen, qcap;
	struct fix *fixes;
	size_t nfixes, fixes_cap;
	uint64_t cur_dir; /* being walked */
	uint32_t cur_entries;
	bool adopting; /* an inode no entry reached is being taken in (its ".." is not checked) */
	struct lost *lost; /* those taken in: they go into /lost+found (link_lost) */
	size_t nlost, lost_cap;
};

static void say(struct fsck *k, bool problem, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void say(struct fsck *k, bool problem, const char *fmt, ...)
{
	char line[600];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	if (problem)
		k->r->problems++;
	if (k->print)
		k->print(k->arg, line);
}

static const char *fixed(struct fsck *k)
{
	if (!k->repair)
		return "";
	k->r->repaired++;
	return ": fixed";
}

/* ---- the bitmap of blocks in use, as the walk finds them ---- */
/* Blocks a repair allocates where the walk has been (a mended directory's new overflow
 * block): fs->taken. */
static void repair_took(void *arg, uint64_t blkno, uint32_t len)
{
	struct fsck *k = arg;
	cfs_bits_set(k->used, blkno, len, true);
}

static bool mark(struct fsck *k, uint64_t blk, uint32_t len, uint64_t owner, const char *what)
{
	const struct cfs_dsuper *sb = &k->fs->sb;
	if (blk < sb->ag_start || blk + len > sb->total_blocks || blk + len < blk) {
		say(k, true, "inode %" PRIu64 ": %s at blocks %" PRIu64 "+%" PRIu32
			     " lies outside the filesystem", owner, what, blk, len);
		return false;
	}
	uint32_t unused = cfs_bits_run(k->used, blk, len, false);
	if (unused < len) {
		say(k, true, "inode %" PRIu64 ": %s block %" PRIu64
			     " is also used by another object", owner, what, blk + unused);
		return false;
	}
	cfs_bits_set(k->used, blk, len, true);
	return true;
}

/* A metadata block (an inode's, its extent map's or xattr block's, a directory's overflow):
 * one a file's extent marked already is the metadata's, and that extent is wrong. */
static void mark_meta(struct fsck *k, uint64_t blk, uint64_t owner, const char *what)
{
	if (blk < k->fs->sb.total_blocks && cfs_bit_get(k->in_extent, blk) &&
	    !cfs_reserve((void **)&k->stolen, &k->stolen_cap, k->nstolen + 1, sizeof *k->stolen)) {
		cfs_bit_set(k->in_extent, blk, false);
		k->stolen[k->nstolen++] = blk;
		say(k, true, "inode %" PRIu64 ": %s block %" PRIu64 " lies in another file's extent "
			     "too: the extent %s", owner, what, blk, k->repair ? "goes" : "would go");
		return;
	}
	mark(k, blk, 1, owner, what);
}

/* ---- nodes ---- */
static struct node *node_find(struct fsck *k, uint64_t ino, bool add)
{
	if (add && (k->nnodes + 1) * 2 > k->nodes_cap) {
		size_t cap = k->nodes_cap ? k->nodes_cap * 2 : 4096;
		struct node *v = calloc(cap, sizeof *v);
		if (!v)
			return NULL;
		for (size_t i = 0; i < k->nodes_cap; i++)
			if (k->nodes[i].ino) {
				size_t j = (k->nodes[i].ino * 0x9E3779B97F4A7C15ull) & (cap - 1);
				while (v[j].ino)
					j = (j + 1) & (cap - 1);
				v[j] = k->nodes[i];
			}
		free(k->nodes);
		k->nodes = v;
		k->nodes_cap = cap;
	}
	if (!k->nodes_cap)
		return NULL;
	size_t j = (ino * 0x9E3779B97F4A7C15ull) & (k->nodes_cap - 1);
	while (k->nodes[j].ino && k->nodes[j].ino != ino)
		j = (j + 1) & (k->nodes_cap - 1);
	if (k->nodes[j].ino == ino)
		return &k->nodes[j];
	if (!add)
		return NULL;
	k->nnodes++;
	k->nodes[j].ino = ino;
	return &k->nodes[j];
}

static int queue_push(struct fsck *k, uint64_t ino)
{
	if (cfs_reserve((void **)&k->queue, &k->qcap, k->qlen + 1, sizeof *k->queue))
		return -ENOMEM;
	k->queue[k->qlen++] = ino;
	return 0;
}

static int fix_add(struct fsck *k, enum fix_kind kind, const char *name, size_t len,
		   uint64_t ino, uint8_t type, uint64_t bucket)
{
	if (cfs_reserve((void **)&k->fixes, &k->fixes_cap, k->nfixes + 1, sizeof *k->fixes))
		return -ENOMEM;
	struct fix *f = &k->fixes[k->nfixes++];
	*f = (struct fix){kind, k->cur_dir, "", (uint8_t)len, ino, type, bucket};
	memcpy(f->name, name, len);
	return 0;
}

/* ---- usage per quota id, as the walk finds it ---- */
struct qcount {
	uint64_t key; /* (type + 1) << 32 | id; 0: a free slot */
	uint64_t bytes, inodes;
	bool recorded; /* a record of it was seen */
	/* what the slots' change files hold of it (quota_grant.c) */
	bool changed;
	int64_t delta_bytes, delta_inodes;
	uint64_t grant_bytes, grant_inodes;
};

static struct qcount *count_slot(struct fsck *k, uint64_t key)
{
	if ((k->ncounts + 1) * 2 > k->counts_cap) {
		size_t cap = k->counts_cap ? k->counts_cap * 2 : 256;
		struct qcount *v = calloc(cap, sizeof *v);
		if (!v)
			return NULL;
		for (size_t i = 0; i < k->counts_cap; i++)
			if (k->counts[i].key) {
				size_t j = (k->counts[i].key * 0x9E3779B97F4A7C15ull) & (cap - 1);
				while (v[j].key)
					j = (j + 1) & (cap - 1);
				v[j] = k->counts[i];
			}
		free(k->counts);
		k->counts = v;
		k->counts_cap = cap;
	}
	size_t j = (key * 0x9E3779B97F4A7C15ull) & (k->counts_cap - 1);
	while (k->counts[j].key && k->counts[j].key != key)
		j = (j + 1) & (k->counts_cap - 1);
	if (!k->counts[j].key) {
		k->counts[j].key = key;
		k->ncounts++;
	}
	return &k->counts[j];
}

static uint64_t count_key(unsigned type, uint32_t id)
{
	return (uint64_t)(type + 1) << 32 | id;
}

/* What the inode holds (or, as a repair changes it, blocks more and inodes more), for its
 * ids (quota.c charges the same). */
static void count_change(struct fsck *k, const struct cfs_inode *ip, int64_t blocks,
			 int64_t inodes)
{
	struct cfs_fs *fs = k->fs;
	if (!cfs_quota_on(fs) || cfs_quota_exempt(fs, ip->ino))
		return;
	uint32_t id[CFS_QUOTA_TYPES] = {ip->d.uid, ip->d.gid, ip->d.projid};
	unsigned types = cfs_project_on(fs) ? CFS_QUOTA_TYPES : CFS_QUOTA_PROJECT;
	for (unsigned t = 0; t < types; t++) {
		struct qcount *c = count_slot(k, count_key(t, id[t]));
		if (!c) { /* the check of the quotas fails at its end */
			k->counts_lost = true;
			return;
		}
		c->bytes += (uint64_t)(blocks * (int64_t)fs->bs);
		c->inodes += (uint64_t)inodes;
	}
}

static void count_usage(struct fsck *k, const struct cfs_inode *ip)
{
	count_change(k, ip, (int64_t)ip->d.nblocks, 1);
}

/* ---- one inode's blocks ---- */
static void mark_inode(struct fsck *k, struct cfs_inode *ip)
{
	struct cfs_fs *fs = k->fs;
	count_usage(k, ip);
	mark_meta(k, ip->ino, ip->ino, "inode");
	for (uint64_t blk = ip->d.ext_next; blk;) {
		struct cfs_buf *b;
		if (cfs_bread(fs, blk, CFS_B_EXTENTS, ip->ino, &b))
			break; /* cfs_iget read it a moment ago */
		mark_meta(k, blk, ip->ino, "extent map");
		blk = ((struct cfs_dextb *)b->data)->next;
	}
	if (ip->d.xattr_block) {
		struct cfs_buf *b;
		if (cfs_bread(fs, ip->d.xattr_block, CFS_B_XATTR, ip->ino, &b) ||
		    cfs_xattr_block_verify(fs, b)) {
			say(k, true, "inode %" PRIu64 ": xattr block %" PRIu64 " is damaged%s", ip->ino,
			    ip->d.xattr_block, fixed(k));
			if (k->repair) {
				ip->d.xattr_block = 0;
				cfs_iwrite(fs, ip);
			}
		} else {
			mark_meta(k, ip->d.xattr_block, ip->ino, "xattr");
		}
	}
	bool changed = false;
	for (uint32_t i = 0; i < ip->next;) {
		const struct cfs_dextent *e = &ip->ext[i];
		bool file = !S_ISDIR(ip->d.mode); /* a directory's extents are its buckets */
		if (mark(k, e->pblk, e->len, ip->ino, "data")) {
			if (file)
				cfs_bits_set(k->in_extent, e->pblk, e->len, true);
			i++;
			continue;
		}
		if (file && e->pblk + e->len <= k->fs->sb.total_blocks && e->pblk + e->len > e->pblk &&
		    !cfs_reserve((void **)&k->contested, &k->contested_cap, k->ncontested + 1,
				 sizeof *k->contested)) {
			k->contested[k->ncontested++] = (struct contested){ip->ino, e->lblk};
			i++;
			continue;
		}
		say(k, false, "inode %" PRIu64 ": the extent at file block %" PRIu64 " %s", ip->ino,
		    e->lblk, k->repair ? "is dropped" : "would be dropped");
		if (!k->repair) {
			i++;
			continue;
		}
		memmove(&ip->ext[i], &ip->ext[i + 1], (ip->next - i - 1) * sizeof *e);
		ip->next--;
		changed = true;
		k->r->repaired++;
	}
	if (changed)
		cfs_iwrite(fs, ip);
}

/* ---- directories ---- */
static void dir_block(void *arg, uint64_t blkno)
{
	struct fsck *k = arg;
	mark_meta(k, blkno, k->cur_dir, "directory overflow");
}

static void dir_damaged(void *arg, uint64_t bucket, uint64_t blkno, uint64_t prev)
{
	struct fsck *k = arg;
	say(k, true, "directory inode %" PRIu64 ": bucket %" PRIu64 ", block %" PRIu64 " is "
		     "damaged; the entries from it on are lost%s", k->cur_dir, bucket, blkno,
	    fixed(k));
	struct cfs_inode *dir;
	if (k->repair && !cfs_iget(k->fs, k->cur_dir, &dir))
		cfs_dir_cut_chain(k->fs, dir, bucket, prev);
}

static void dir_count(void *arg, struct cfs_buf *b, uint32_t entries)
{
	struct fsck *k = arg;
	struct cfs_ddirb *h = (void *)b->data;
	say(k, true, "directory inode %" PRIu64 ": block %" PRIu64 " counts %" PRIu32 " entries, "
		     "holds %" PRIu32 "%s", k->cur_dir, b->blkno, h->count, entries, fixed(k));
	if (k->repair) {
		h->count = entries;
		cfs_bdirty(k->fs, b);
	}
}

/* An inode whose fields cfs_inode_verify refuses, set to what they can be (type: S_IFMT bits
 * its entry gives, or 0; parent: a directory's).  The mended block goes to the cache: with
 * repair dirty, else only for this check to go on as the repair will. */
static int mend_inode(struct fsck *k, uint64_t ino, uint32_t type, uint64_t parent)
{
	struct cfs_fs *fs = k->fs;
	struct cfs_buf *b;
	uint8_t *copy = malloc(fs->bs);
	const char *what = NULL;
	int rc = copy ? cfs_bread(fs, ino, CFS_B_INODE, ino, &b) : -ENOMEM;
	if (!rc) {
		memcpy(copy, b->data, fs->bs);
		rc = cfs_inode_mend(&fs->sb, copy, type, parent, &what);
	}
	if (!rc && what) {
		say(k, true, "inode %" PRIu64 ": %s %s%s", ino, what,
		    k->repair ? "set to what it can be" : "would be set to what it can be",
		    fixed(k));
		memcpy(b->data, copy, fs->bs);
		if (k->repair)
			cfs_bdirty(fs, b);
	}
	free(copy);
	return rc ? rc : what ? 0 : -EIO;
}

/* Is this inode one the walk may take in?  Reads and verifies it, mended if it can be. */
static int visit_inode(struct fsck *k, uint64_t ino, uint32_t type, uint64_t parent,
		       struct cfs_inode **out)
{
	int rc = cfs_iget(k->fs, ino, out);
	if (rc == -EIO && !mend_inode(k, ino, type, parent))
		rc = cfs_iget(k->fs, ino, out);
	if (!rc && (*out)->d.nlink == 0 && (*out)->d.mode == 0)
		rc = -ESTALE;
	return rc;
}

/* The S_IFMT bits of a directory entry's type, 0 if it is none. */
static uint32_t entry_type(uint8_t type)
{
	uint32_t mode = (uint32_t)type << 12;
	return !(mode & ~(uint32_t)S_IFMT) && cfs_ftype_valid(mode) ? mode : 0;
}

static int dir_entry(void *arg, const char *name, size_t len, uint64_t ino, uint8_t type,
		     const uint64_t *misplaced)
{
	struct fsck *k = arg;
	k->cur_entries++;
	struct node *n = node_find(k, ino, false);
	if (n && n->is_dir) {
		say(k, true, "directory inode %" PRIu64 ": entry '%.*s' is a second link to "
			     "directory %" PRIu64 "%s", k->cur_dir, (int)len, name, ino, fixed(k));
		return fix_add(k, FIX_REMOVE, name, len, ino, 0, misplaced ? *misplaced : 0);
	}
	if (n) {
		n->links++;
		return 0;
	}
	struct cfs_inode *ip;
	int rc = visit_inode(k, ino, entry_type(type), k->cur_dir, &ip);
	if (rc) {
		say(k, true, "directory inode %" PRIu64 ": entry '%.*s' points at inode %" PRIu64
			     " which is %s%s", k->cur_dir, (int)len, name, ino,
		    rc == -ESTALE ? "not an inode" : "damaged", fixed(k));
		if (rc == -ENOMEM)
			return rc;
		return fix_add(k, FIX_REMOVE, name, len, ino, 0, misplaced ? *misplaced : 0);
	}
	if (!(n = node_find(k, ino, true)))
		return -ENOMEM;
	n->links = 1;
	n->is_dir = S_ISDIR(ip->d.mode);
	n->nlink_disk = ip->d.nlink;
	uint8_t want = (uint8_t)((ip->d.mode & S_IFMT) >> 12);
	if (misplaced) {
		say(k, true, "directory inode %" PRIu64 ": entry '%.*s' is in the wrong bucket or "
			     "badly named (lookups miss it)%s", k->cur_dir, (int)len, name, fixed(k));
		rc = fix_add(k, FIX_REHOME, name, len, ino, want, *misplaced);
	} else if (type != want) {
		say(k, true, "directory inode %" PRIu64 ": entry '%.*s' has the wrong type%s",
		    k->cur_dir, (int)len, name, fixed(k));
		rc = fix_add(k, FIX_TYPE, name, len, ino, want, 0);
	}
	if (rc)
		return rc;
	mark_inode(k, ip);
	uint32_t unknown = cfs_iflags_unknown(ip->d.flags);
	if (unknown) {
		say(k, true, "inode %" PRIu64 ": unknown inode flags %#x%s", ino, unknown, fixed(k));
		if (k->repair) {
			ip->d.flags &= ~unknown;
			cfs_iwrite(k->fs, ip);
		}
	}
	if (n->is_dir) {
		struct node *parent = node_find(k, k->cur_dir, false);
		if (parent)
			parent->subdirs++;
		if (ip->d.parent != k->cur_dir && !k->adopting) {
			say(k, true, "directory inode %" PRIu64 ": its '..' is %" PRIu64 ", should be "
				     "%" PRIu64 "%s", ino, ip->d.parent, k->cur_dir, fixed(k));
			if (k->repair) {
				ip->d.parent = k->cur_dir;
				cfs_iwrite(k->fs, ip);
			}
		}
		rc = queue_push(k, ino);
	}
	cfs_iforget(k->fs, ip);
	return rc;
}

static int walk_dir(struct fsck *k, uint64_t ino)
{
	struct cfs_inode *dir;
	int rc = cfs_iget(k->fs, ino, &dir);
	if (rc)
		return 0; /* reported by whoever pointed at it */
	k->cur_dir = ino;
	k->cur_entries = 0;
	struct cfs_dir_check cb = {dir_block, dir_entry, dir_damaged, dir_count, k};
	rc = cfs_dir_check(k->fs, dir, &cb);
	if (!rc && (cfs_iget(k->fs, ino, &dir) == 0) && dir->d.dir_entries != k->cur_entries) {
		say(k, true, "directory inode %" PRIu64 ": says %" PRIu64 " entries, has %u%s", ino,
		    dir->d.dir_entries, k->cur_entries, fixed(k));
		if (k->repair) {
			dir->d.dir_entries = k->cur_entries;
			cfs_iwrite(k->fs, dir);
		}
	}
	if (!cfs_iget(k->fs, ino, &dir))
		cfs_iforget(k->fs, dir);
	if (k->repair && k->fs->txn.n > k->fs->txn.limit / 2)
		rc = rc ? rc : cfs_journal_commit(k->fs);
	return rc;
}

/* The root or a slot's orphan directory (*ino, in the superblock), where a walk starts.  One
 * damaged beyond mending is made anew, empty: what it named is lost, and freed. */
static int add_root(struct fsck *k, uint64_t *ino, bool orphan_dir)
{
	struct cfs_inode *ip;
	int rc = visit_inode(k, *ino, S_IFDIR, *ino, &ip);
	if (rc == -ENOMEM)
		return rc;
	if (rc || !S_ISDIR(ip->d.mode)) {
		say(k, true, "%s directory inode %" PRIu64 " is damaged beyond mending: %s",
		    orphan_dir ? "an orphan" : "the root", *ino,
		    k->repair ? "made anew, empty (what it held is lost: restore it from a backup)"
			      : "it would be made anew, empty, and what it held lost");
		if (!k->repair)
			return 0;
		k->fs->taken = NULL; /* its blocks are marked as the walk's, below */
		rc = cfs_system_dir_new(k->fs, orphan_dir ? 0700 : 0755, ino);
		k->fs->taken = repair_took;
		if (rc || (rc = cfs_iget(k->fs, *ino, &ip)))
			return rc;
		k->super_changed = true;
		k->r->repaired++;
	}
	uint64_t at = *ino;
	struct node *n = node_find(k, at, true);
	if (!n)
		return -ENOMEM;
	n->is_dir = true;
	n->nlink_disk = ip->d.nlink;
	n->links = 0; /* no entry names the root or an orphan directory */
	mark_inode(k, ip);
	cfs_iforget(k->fs, ip);
	return queue_push(k, at);
}

/* The directories queued, and those they hold. */
static int walk_queue(struct fsck *k)
{
	int rc = 0;
	while (!rc && k->qhead < k->qlen) {
		rc = walk_dir(k, k->queue[k->qhead++]);
		/* Between directories, none of the cache's blocks is in use: what the walk read
		 * stays in memory up to the cache's bound, not all of it (a million inodes' blocks
		 * would be 4 GiB). */
		cfs_bcache_trim(k->fs);
		if (k->progress && k->qhead % 256 == 0)
			k->progress(k->arg, "directories", k->qhead, k->qlen);
	}
	return rc;
}

static int walk_tree(struct fsck *k)
{
	int rc = add_root(k, &k->fs->sb.root_ino, false);
	return rc ? rc : walk_queue(k);
}

/* ---- lost+found: inodes no entry reaches ---- */
/* What a damaged directory named, or a root made anew held, is still on the disk: inode
 * blocks marked in use that the walk did not reach.  Each is walked like an entry's inode
 * (its blocks are then kept) and, with repair, linked into /lost+found as #INODE once the
 * bitmaps are right, as e2fsck's passes 3 and 4 do.  A directory whose ".." is another such
 * directory is reached through that one; a chain of them that loops is cut where the scan
 * meets it.  A group whose header is damaged has no bitmap to tell a live inode from a freed
 * one (a freed inode block keeps its last contents): what only it held is not looked for. */
struct lost {
	uint64_t ino, parent, size; /* size and uid: what the output names it by */
	uint32_t uid;
	uint8_t type; /* DT_* */
};

#define LOST_READ 64 /* blocks read at once when a group's blocks are looked through */

/* Is block blk (its bytes in blk_data) an inode that still has names (not a freed one)? */
static bool lost_inode_at(struct fsck *k, const uint8_t *blk_data, uint64_t blk,
			  struct lost *out)
{
	const struct cfs_bhdr *h = (const void *)blk_data;
	if (h->magic != CFS_MAGIC || h->type != CFS_B_INODE || h->blkno != blk || h->owner != blk)
		return false;
	struct cfs_inode *ip;
	if (cfs_iget(k->fs, blk, &ip))
		return false; /* a damaged inode nothing names: freed with the bitmaps */
	bool alive = ip->d.nlink > 0;
	*out = (struct lost){blk, ip->d.parent, ip->d.size, ip->d.uid,
			     (uint8_t)((ip->d.mode & S_IFMT) >> 12)};
	cfs_iforget(k->fs, ip);
	return alive;
}

/* The blocks of group g its bitmap says are in use and the walk did not reach, LOST_READ at
 * a time: those that are inodes with names, into *found. */
static int scan_group(struct fsck *k, uint32_t g, uint8_t *buf, struct lost **found, size_t *n,
		      size_t *cap)
{
	struct cfs_fs *fs = k->fs;
	uint64_t start = cfs_ag_first(&fs->sb, g);
	uint32_t nblocks = cfs_ag_size(&fs->sb, g);
	struct cfs_buf *b;
	const char *why;
	if (cfs_bread(fs, start, CFS_B_AGH, g, &b) || cfs_agh_verify(&fs->sb, b->data, g, true, &why))
		return 0;
	const uint8_t *bm = b->data + CFS_AGH_BITMAP_OFF;
	for (uint32_t i = 1; i < nblocks; i += LOST_READ) {
		uint32_t len = nblocks - i < LOST_READ ? nblocks - i : LOST_READ, want = 0;
		for (uint32_t j = i; j < i + len; j++)
			want += cfs_bit_get(bm, j) && !cfs_bit_get(k->used, start + j);
		if (!want)
			continue;
		if (cvm_volume_read(fs->vol, buf, (size_t)len * fs->bs, (start + i) * fs->bs))
			continue; /* unreadable: reported as leaked blocks */
		for (uint32_t j = i; j < i + len; j++) {
			struct lost l;
			if (!cfs_bit_get(bm, j) || cfs_bit_get(k->used, start + j) ||
			    !lost_inode_at(k, buf + (size_t)(j - i) * fs->bs, start + j, &l))
				continue;
			if (cfs_reserve((void **)found, cap, *n + 1, sizeof **found))
				return -ENOMEM;
			(*found)[(*n)++] = l;
		}
	}
	return 0;
}

static int lost_cmp(const void *a, const void *b)
{
	uint64_t x = ((const struct lost *)a)->ino, y = ((const struct lost *)b)->ino;
	return (x > y) - (x < y);
}

/* Take in one inode nothing reached (with what it holds), as an entry of /lost+found would
 * name it. */
static int adopt(struct fsck *k, const struct lost *l)
{
	say(k, true, "inode %" PRIu64 " (%s of %" PRIu64 " bytes, owner %" PRIu32 ") is in no "
		     "directory: %s /lost+found as #%" PRIu64, l->ino,
	    l->type == DT_DIR ? "a directory" : "a file", l->size, l->uid,
	    k->repair ? "put in" : "it would go to", l->ino);
	k->r->repaired += k->repair;
	char name[24];
	int len = snprintf(name, sizeof name, "#%" PRIu64, l->ino);
	k->cur_dir = 0; /* /lost+found's entries are counted when they are made */
	k->adopting = true;
	int rc = dir_entry(k, name, (size_t)len, l->ino, l->type, NULL);
	k->adopting = false;
	if (!rc && k->repair && cfs_reserve((void **)&k->lost, &k->lost_cap, k->nlost + 1,
					    sizeof *k->lost))
		rc = -ENOMEM;
	if (!rc && k->repair)
		k->lost[k->nlost++] = *l;
	return rc ? rc : walk_queue(k);
}

static int find_lost(struct fsck *k)
{
	struct cfs_fs *fs = k->fs;
	struct lost *found = NULL;
	size_t n = 0, cap = 0;
	uint8_t *buf;
	if (posix_memalign((void **)&buf, 4096, (size_t)LOST_READ * fs->bs))
		return -ENOMEM;
	int rc = 0;
	for (uint32_t g = 0; g < fs->sb.nags && !rc; g++) {
		rc = scan_group(k, g, buf, &found, &n, &cap);
		cfs_bcache_trim(fs);
	}
	free(buf);
	if (n)
		qsort(found, n, sizeof *found, lost_cmp);
	/* Directories whose parent is not lost too, then the rest of them (a loop of them is
	 * cut where the scan meets it), then files their walks did not reach. */
	for (int pass = 0; pass < 3 && !rc; pass++)
		for (size_t i = 0; i < n && !rc; i++) {
			const struct lost *l = &found[i], key = {.ino = l->parent};
			const struct lost *parent = bsearch(&key, found, n, sizeof *found, lost_cmp);
			bool dir = l->type == DT_DIR;
			if (cfs_bit_get(k->used, l->ino) || dir != (pass < 2) ||
			    (pass == 0 && parent && parent != l && parent->type == DT_DIR))
				continue;
			rc = adopt(k, l);
		}
	free(found);
	return rc;
}

/* Which of two claims on a block is wrong, once the walk is over (as e2fsck's passes 1B-1D
 * look again for the owners of blocks claimed twice; only when some were).  First an extent
 * holding a block metadata claimed (mark_meta) goes, its other blocks free again; then an
 * extent over blocks another extent claimed first keeps them if they are free now, else goes. */
static bool holds_stolen(const struct fsck *k, const struct cfs_dextent *e, uint64_t *blk)
{
	for (size_t i = 0; i < k->nstolen; i++)
		if (k->stolen[i] >= e->pblk && k->stolen[i] - e->pblk < e->len) {
			*blk = k->stolen[i];
			return true;
		}
	return false;
}

static bool is_stolen(const struct fsck *k, uint64_t blk)
{
	for (size_t i = 0; i < k->nstolen; i++)
		if (k->stolen[i] == blk)
			return true;
	return false;
}

/* Take extent i out of ip's map (the caller writes the inode). */
static void drop_extent(struct fsck *k, struct cfs_inode *ip, uint32_t i)
{
	memmove(&ip->ext[i], &ip->ext[i + 1], (ip->next - i - 1) * sizeof *ip->ext);
	ip->next--;
	k->r->repaired++;
}

static int drop_stealing_extents(struct fsck *k, uint64_t ino)
{
	struct cfs_inode *ip;
	if (cfs_iget(k->fs, ino, &ip))
		return 0; /* said by the walk */
	bool changed = false;
	uint64_t blk;
	for (uint32_t i = 0; i < ip->next;) {
		const struct cfs_dextent *e = &ip->ext[i];
		if (!holds_stolen(k, e, &blk)) {
			i++;
			continue;
		}
		say(k, false, "inode %" PRIu64 ": the extent at file block %" PRIu64 " holds block "
			      "%" PRIu64 ", another object's: %s", ino, e->lblk, blk,
		    k->repair ? "dropped" : "would be dropped");
		for (uint64_t b = e->pblk; b < e->pblk + e->len; b++)
			if (!is_stolen(k, b)) /* what the walk counted for it is free again */
				cfs_bit_set(k->used, b, false);
		if (!k->repair) {
			i++;
			continue;
		}
		drop_extent(k, ip, i);
		changed = true;
	}
	int rc = changed ? cfs_iwrite(k->fs, ip) : 0;
	cfs_iput_check(k->fs, ip);
	return rc;
}

static int settle_contested(struct fsck *k, const struct contested *c)
{
	struct cfs_inode *ip;
	if (cfs_iget(k->fs, c->ino, &ip))
		return 0;
	uint32_t i = cfs_ext_find(ip, c->lblk);
	int rc = 0;
	if (i < ip->next && ip->ext[i].lblk == c->lblk) {
		const struct cfs_dextent *e = &ip->ext[i];
		if (cfs_bits_run(k->used, e->pblk, e->len, false) == e->len) {
			cfs_bits_set(k->used, e->pblk, e->len, true);
			say(k, false, "inode %" PRIu64 ": the extent at file block %" PRIu64 " keeps its "
				      "blocks (the other claim on them went)%s", c->ino, e->lblk, fixed(k));
		} else {
			say(k, false, "inode %" PRIu64 ": the extent at file block %" PRIu64 " %s",
			    c->ino, e->lblk, k->repair ? "is dropped" : "would be dropped");
			if (k->repair) {
				drop_extent(k, ip, i);
				rc = cfs_iwrite(k->fs, ip);
			}
		}
	}
	cfs_iput_check(k->fs, ip);
	return rc;
}

static int settle_claims(struct fsck *k)
{
	int rc = 0;
	for (size_t n = 0; !rc && k->nstolen && n < k->nodes_cap; n++)
		if (k->nodes[n].ino && !k->nodes[n].is_dir)
			rc = drop_stealing_extents(k, k->nodes[n].ino);
	for (size_t i = 0; !rc && i < k->ncontested; i++)
		rc = settle_contested(k, &k->contested[i]);
	return rc;
}

/* ---- orphans: inodes whose last name went while they were open ---- */
struct orphans {
	struct fsck *k;
	uint64_t *ino;
	size_t n, cap;
};

static void orphan_block(void *arg, uint64_t blkno)
{
	struct orphans *o = arg;
	mark(o->k, blkno, 1, o->k->cur_dir, "orphan directory overflow");
}

static void orphan_damaged(void *arg, uint64_t bucket, uint64_t blkno, uint64_t prev)
{
	struct orphans *o = arg;
	dir_damaged(o->k, bucket, blkno, prev);
}

static void orphan_count(void *arg, struct cfs_buf *b, uint32_t entries)
{
	struct orphans *o = arg;
	dir_count(o->k, b, entries);
}

/* An orphan's entry is named by its inode number, which is all the check needs of it. */
static int orphan_entry(void *arg, const char *name, size_t len, uint64_t ino, uint8_t type,
			const uint64_t *misplaced)
{
	(void)name, (void)len, (void)type, (void)misplaced;
	struct orphans *o = arg;
	if (cfs_reserve((void **)&o->ino, &o->cap, o->n + 1, sizeof *o->ino))
		return -ENOMEM;
	o->ino[o->n++] = ino;
	return 0;
}

static int check_orphans(struct fsck *k, uint32_t slot)
{
	struct cfs_fs *fs = k->fs;
	struct cfs_inode *dir;
	struct orphans o = {.k = k};
	int rc = add_root(k, &fs->sb.orphan_dir[slot], true);
	uint64_t dino = fs->sb.orphan_dir[slot];
	k->qhead = k->qlen; /* its entries are not a tree to walk */
	if (rc || cfs_iget(fs, dino, &dir))
		return rc;
	k->cur_dir = dino;
	struct cfs_dir_check cb = {orphan_block, orphan_entry, orphan_damaged, orphan_count, &o};
	rc = cfs_dir_check(fs, dir, &cb);
	for (size_t i = 0; i < o.n && !rc; i++) {
		struct cfs_inode *ip;
		if (visit_inode(k, o.ino[i], 0, 0, &ip)) {
			say(k, true, "orphan inode %" PRIu64 " of slot %u is damaged%s", o.ino[i], slot,
			    fixed(k));
			if (k->repair) {
				char name[17];
				snprintf(name, sizeof name, "%016" PRIx64, o.ino[i]);
				rc = cfs_iget(fs, dino, &dir) ? 0 : cfs_dir_remove(fs, dir, name);
				if (!rc)
					rc = cfs_iwrite(fs, dir);
			}
			continue;
		}
		if (k->repair) {
			/* Off the list; its blocks, not marked, are freed with the bitmaps. */
			ip->in_orphans = true;
			fs->slot = slot;
			rc = cfs_orphan_remove(fs, ip);
			fs->slot = 0;
			say(k, false, "orphan inode %" PRIu64 " of slot %u: %s", o.ino[i], slot,
			    ip->d.nlink ? "still linked, taken off the orphan list" : "freed");
			cfs_iforget(fs, ip);
			continue;
		}
		say(k, false, "orphan inode %" PRIu64 " of slot %u: freed at that slot's next mount",
		    o.ino[i], slot);
		struct node *n = node_find(k, o.ino[i], true);
		if (!n)
			return -ENOMEM;
		n->is_dir = S_ISDIR(ip->d.mode);
		n->nlink_disk = ip->d.nlink;
		n->links = ip->d.nlink; /* whatever names it still has are counted by the walk */
		mark_inode(k, ip);
		cfs_iforget(fs, ip);
	}
	free(o.ino);
	if (!rc && k->repair)
		rc = cfs_journal_commit(fs);
	return rc;
}

/* /lost+found, made if it is not there (or is not a directory: then lost+found.1, .2 ...). */
static int lost_found_dir(struct fsck *k, struct cfs_inode *root, struct cfs_inode **out)
{
	struct cfs_fs *fs = k->fs;
	char name[32] = "lost+found";
	for (int i = 1;; i++) {
		uint64_t ino;
		uint8_t type;
		int rc = cfs_dir_lookup(fs, root, name, &ino, &type);
		if (!rc && type == DT_DIR && node_find(k, ino, false))
			return cfs_iget(fs, ino, out);
		if (rc != -ENOENT && i < 10) {
			snprintf(name, sizeof name, "lost+found.%d", i);
			continue;
		}
		if (rc != -ENOENT)
			return rc ? rc : -EEXIST;
		break;
	}
	struct cfs_inode *ip;
	int rc = cfs_ialloc(fs, root->ino, S_IFDIR | 0700, 0, 0, &ip);
	if (rc)
		return rc;
	ip->d.nlink = 2;
	ip->d.parent = root->ino;
	uint64_t root_blocks = root->d.nblocks;
	if (!(rc = cfs_dir_init(fs, ip)) && !(rc = cfs_iwrite(fs, ip)) &&
	    !(rc = cfs_dir_add(fs, root, name, ip->ino, DT_DIR))) {
		root->d.nlink++;
		rc = cfs_iwrite(fs, root);
	}
	struct node *n = rc ? NULL : node_find(k, ip->ino, true); /* may move the table: first */
	struct node *rn = node_find(k, root->ino, false);
	if (!rc && (!rn || !n))
		rc = -ENOMEM;
	if (!rc) {
		rn->subdirs++;
		rn->nlink_disk++;
		*n = (struct node){.ino = ip->ino, .links = 1, .nlink_disk = 2, .is_dir = true};
		count_usage(k, ip);
		count_change(k, root, (int64_t)(root->d.nblocks - root_blocks), 0);
		say(k, false, "made /%s", name);
		*out = ip;
	}
	return rc;
}

/* With repair, once the bitmaps are right: what find_lost took in gets its entry. */
static int link_lost(struct fsck *k)
{
	struct cfs_fs *fs = k->fs;
	struct cfs_inode *root, *dir;
	int rc = k->nlost ? cfs_iget(fs, fs->sb.root_ino, &root) : 0;
	if (!k->nlost || rc || (rc = lost_found_dir(k, root, &dir)))
		return rc;
	struct node *dn = node_find(k, dir->ino, false);
	uint64_t blocks = dir->d.nblocks;
	for (size_t i = 0; i < k->nlost && !rc; i++) {
		const struct lost *l = &k->lost[i];
		char name[32];
		snprintf(name, sizeof name, "#%" PRIu64, l->ino);
		for (int n = 1; (rc = cfs_dir_add(fs, dir, name, l->ino, l->type)) == -EEXIST; n++)
			snprintf(name, sizeof name, "#%" PRIu64 ".%d", l->ino, n);
		struct cfs_inode *ip;
		if (!rc && l->type == DT_DIR && !(rc = cfs_iget(fs, l->ino, &ip))) {
			ip->d.parent = dir->ino;
			dir->d.nlink++;
			dn->subdirs++;
			dn->nlink_disk++;
			rc = cfs_iwrite(fs, ip);
			cfs_iforget(fs, ip);
		}
		if (!rc)
			rc = cfs_iwrite(fs, dir);
		if (!rc && fs->txn.n > fs->txn.limit / 2)
			rc = cfs_journal_commit(fs);
	}
	count_change(k, dir, (int64_t)(dir->d.nblocks - blocks), 0);
	return rc;
}

/* ---- after the walk ---- */
static int apply_fixes(struct fsck *k)
{
	int rc = 0;
	for (size_t i = 0; i < k->nfixes && !rc; i++) {
		struct fix *f = &k->fixes[i];
		struct cfs_inode *dir;
		if (cfs_iget(k->fs, f->dir, &dir))
			continue;
		char name[CFS_NAME_MAX + 1];
		if (f->kind == FIX_REHOME) {
			rc = cfs_dir_rehome(k->fs, dir, f->bucket, f->name, f->len, name);
			if (!rc)
				say(k, false, "directory inode %" PRIu64 ": entry '%.*s' is now '%s'",
				    f->dir, (int)f->len, f->name, name);
		} else if (f->kind == FIX_TYPE) {
			rc = cfs_dir_replace(k->fs, dir, f->name, f->ino, f->type);
		} else {
			rc = cfs_dir_remove_bytes(k->fs, dir, f->bucket, f->name, f->len);
		}
		if (rc == -ENOENT) { /* gone with an earlier fix (a damaged block cut off) */
			rc = 0;
			continue;
		}
		if (!rc)
			rc = cfs_iwrite(k->fs, dir);
		if (!rc && k->fs->txn.n > k->fs->txn.limit / 2)
			rc = cfs_journal_commit(k->fs);
	}
	return rc;
}

static int check_links(struct fsck *k)
{
	int rc = 0;
	for (size_t i = 0; i < k->nodes_cap && !rc; i++) {
		struct node *n = &k->nodes[i];
		if (!n->ino)
			continue;
		bool special = n->ino == k->fs->sb.root_ino;
		for (uint32_t s = 0; s < k->fs->sb.nslots; s++)
			special |= n->ino == k->fs->sb.orphan_dir[s];
		uint32_t want = n->is_dir ? 2 + n->subdirs : n->links;
		if (!special) {
			k->r->inodes++;
			k->r->directories += n->is_dir;
			k->r->files += !n->is_dir;
		}
		if (want == n->nlink_disk)
			continue;
		say(k, true, "inode %" PRIu64 ": link count %u, should be %u%s", n->ino, n->nlink_disk,
		    want, fixed(k));
		struct cfs_inode *ip;
		if (k->repair && !cfs_iget(k->fs, n->ino, &ip)) {
			ip->d.nlink = want;
			rc = cfs_iwrite(k->fs, ip);
			cfs_iforget(k->fs, ip);
		}
		if (!rc && k->repair && k->fs->txn.n > k->fs->txn.limit / 2)
			rc = cfs_journal_commit(k->fs);
	}
	return rc;
}

/* What a block marked in use but reached from nothing holds: its header says which kind of
 * block it was and whose, which tells a leak's cause. */
static void describe_leaked(struct fsck *k, uint64_t blk)
{
	struct cfs_fs *fs = k->fs;
	static const char *const kinds[] = {"?", "superblock", "group header", "inode",
					   "directory bucket", "directory overflow",
					   "extent map", "xattr block", "journal descriptor",
					   "journal commit"};
	uint8_t *b;
	if (posix_memalign((void **)&b, 4096, fs->bs))
		return;
	const struct cfs_bhdr *h = (const void *)b;
	if (cvm_volume_read(fs->vol, b, fs->bs, blk * fs->bs))
		say(k, false, "  block %" PRIu64 ": unreadable", blk);
	else if (h->magic != CFS_MAGIC || h->blkno != blk)
		say(k, false, "  block %" PRIu64 ": data (no metadata header)", blk);
	else
		say(k, false, "  block %" PRIu64 ": %s of %" PRIu64, blk,
		    h->type < sizeof kinds / sizeof *kinds ? kinds[h->type] : "?", h->owner);
	free(b);
}

static int check_group(struct fsck *k, uint32_t g)
{
	struct cfs_fs *fs = k->fs;
	uint64_t start = cfs_ag_first(&fs->sb, g);
	uint32_t nblocks = cfs_ag_size(&fs->sb, g);
	struct cfs_buf *b;
	mark(k, start, 1, 0, "group header");
	const char *why = "checksum or identity";
	int rc = cfs_bread(fs, start, CFS_B_AGH, g, &b);
	if (!rc && cfs_agh_verify(&fs->sb, b->data, g, true, &why))
		rc = -EIO;
	if (rc) {
		say(k, true, "group %u: header block %" PRIu64 " is damaged (%s)%s", g, start, why,
		    fixed(k));
		if (!k->repair)
			return 0;
		if ((rc = cfs_bnew(fs, start, CFS_B_AGH, g, &b)))
			return rc;
		cfs_agh_format(b->data, fs->bs, g, start, nblocks, 0);
	}
	struct cfs_dagh *h = (void *)b->data;
	uint8_t *bm = b->data + CFS_AGH_BITMAP_OFF;
	uint32_t leaked = 0, lost = 0, nfree = 0;
	for (uint32_t i = 0; i < nblocks; i++) {
		bool want = cfs_bit_get(k->used, start + i), have = cfs_bit_get(bm, i);
		nfree += !want;
		leaked += have && !want;
		lost += want && !have;
	}
	if (lost)
		say(k, true, "group %u: %u blocks in use are marked free%s", g, lost, fixed(k));
	if (leaked) {
		say(k, true, "group %u: %u blocks marked in use belong to nothing%s", g, leaked,
		    fixed(k));
		for (uint32_t i = 0, shown = 0; i < nblocks && shown < 8; i++)
			if (cfs_bit_get(bm, i) && !cfs_bit_get(k->used, start + i)) {
				describe_leaked(k, start + i);
				shown++;
			}
	}
	if (!lost && !leaked && h->nfree != nfree)
		say(k, true, "group %u: free count %u, should be %u%s", g, h->nfree, nfree, fixed(k));
	k->r->blocks_used += nblocks - nfree;
	if (k->repair && (lost || leaked || h->nfree != nfree || h->nblocks != nblocks)) {
		for (uint32_t i = 0; i < nblocks; i++)
			cfs_bit_set(bm, i, cfs_bit_get(k->used, start + i));
		h->nfree = nfree;
		h->nblocks = nblocks;
		cfs_bdirty(fs, b);
		if (fs->txn.n > fs->txn.limit / 2)
			return cfs_journal_commit(fs);
	}
	return 0;
}

/* ---- quotas ---- */
/* The record blocks of a quota inode or a slot's change file (named what), each checked; a
 * damaged one is dropped from it with repair (what it held is counted again, or lost: said). */
static int check_record_blocks(struct fsck *k, struct cfs_inode *ip, const char *what,
			       const char *lost, bool *damaged)
{
	for (uint32_t i = 0; i < ip->next;) {
		const struct cfs_dextent *e = &ip->ext[i];
		bool bad = false;
		for (uint32_t j = 0; j < e->len && !bad; j++) {
			struct cfs_buf *b;
			bad = cfs_bread(k->fs, e->pblk + j, CFS_B_QUOTA, ip->ino, &b) != 0;
		}
		if (!bad) {
			i++;
			continue;
		}
		say(k, true, "the %s %" PRIu64 ": record block at file block %" PRIu64 " is damaged: "
			     "%s%s", what, ip->ino, e->lblk, lost, fixed(k));
		if (!k->repair) {
			*damaged = true;
			i++;
			continue;
		}
		ip->d.nblocks -= e->len; /* not marked: the groups take them back */
		memmove(&ip->ext[i], &ip->ext[i + 1], (ip->next - i - 1) * sizeof *e);
		ip->next--;
		int rc = cfs_iwrite(k->fs, ip);
		if (rc)
			return rc;
	}
	mark_inode(k, ip);
	return 0;
}

/* A quota inode (*ino) or change file, its blocks marked as its own before the walk (the
 * groups would take them back otherwise).  Without the feature, one left by an interrupted
 * 'cfs tune -O ^quota' goes (repair) or is kept for now. */
static int mark_record_file(struct fsck *k, uint64_t *ino, const char *what, const char *lost,
			    const char *damaged, bool *found_damaged)
{
	struct cfs_fs *fs = k->fs;
	struct cfs_inode *ip;
	if (!*ino)
		return 0;
	if (!cfs_quota_on(fs) && k->repair) {
		say(k, false, "the %s %" PRIu64 " of a filesystem without quotas: freed", what, *ino);
		*ino = 0;
		k->super_changed = true;
		return 0;
	}
	if (visit_inode(k, *ino, S_IFREG, 0, &ip) || !S_ISREG(ip->d.mode)) {
		say(k, true, "the %s %" PRIu64 " is damaged: %s%s", what, *ino, damaged,
		    k->repair ? ": dropped, usage counted from the files" : "");
		if (k->repair) {
			k->r->repaired++;
			*ino = 0;
			k->super_changed = true;
		}
		*found_damaged = !k->repair;
		return 0;
	}
	return check_record_blocks(k, ip, what, lost, found_damaged);
}

static int mark_quota_inode(struct fsck *k, unsigned t)
{
	char what[40];
	snprintf(what, sizeof what, "%s quota inode", cfs_quota_type_name(t));
	return mark_record_file(k, &k->fs->sb.quota_ino[t], what,
				"the limits of the ids it holds are lost", "its limits are lost",
				&k->records_damaged[t]);
}

static int mark_change_file(struct fsck *k, uint32_t slot)
{
	char what[48];
	snprintf(what, sizeof what, "quota grants of slot %u: inode", slot);
	return mark_record_file(k, &k->fs->sb.quota_slot_ino[slot], what,
				"the usage counts again", "the usage counts again",
				&k->changes_damaged[slot]);
}

/* A quota inode made anew, after the groups are right (it allocates). */
static int make_quota_inode(struct fsck *k, unsigned t)
{
	struct cfs_fs *fs = k->fs;
	struct cfs_inode *ip;
	int rc = cfs_ialloc(fs, 0, S_IFREG | 0600, 0, 0, &ip);
	if (rc)
		return rc;
	ip->d.nlink = 1;
	if ((rc = cfs_iwrite(fs, ip)))
		return rc;
	fs->sb.quota_ino[t] = ip->ino;
	k->super_changed = true;
	say(k, false, "the %s quota inode is %" PRIu64 ": usage counted from the files",
	    cfs_quota_type_name(t), ip->ino);
	return 0;
}

/* What a slot's change file holds of an id, added to its count's entry. */
static int gather_change(void *arg, unsigned type, uint32_t id, struct cfs_dquot_change *c,
			 struct cfs_buf *b)
{
	(void)b;
	struct qcount *n = count_slot(arg, count_key(type, id));
	if (!n)
		return -ENOMEM;
	n->changed = true;
	n->delta_bytes += c->delta_bytes;
	n->delta_inodes += c->delta_inodes;
	n->grant_bytes += c->grant_bytes == CFS_QUOTA_UNLIMITED ? 0 : c->grant_bytes;
	n->grant_inodes += c->grant_inodes == CFS_QUOTA_UNLIMITED ? 0 : c->grant_inodes;
	return 0;
}

/* With repair, after the records took the counts: the change files hold nothing. */
static int clear_change(void *arg, unsigned type, uint32_t id, struct cfs_dquot_change *c,
			struct cfs_buf *b)
{
	(void)type, (void)id;
	memset(c, 0, sizeof *c);
	cfs_bdirty(arg, b);
	return 0;
}

static uint64_t plus(uint64_t v, int64_t d)
{
	return d < 0 && (uint64_t)-d > v ? 0 : v + (uint64_t)d;
}

/* One id's usage as recorded (with every slot's unfolded charges) against its count. */
static int compare_usage(struct fsck *k, unsigned type, uint32_t id, const struct cfs_dquot *q,
			 struct qcount *n)
{
	static const struct cfs_dquot none;
	q = q ? q : &none;
	uint64_t bytes = plus(q->used_bytes, n->delta_bytes);
	uint64_t inodes = plus(q->used_inodes, n->delta_inodes);
	bool usage_ok = bytes == n->bytes && inodes == n->inodes;
	bool grants_ok = q->granted_bytes == n->grant_bytes && q->granted_inodes == n->grant_inodes;
	if (!usage_ok)
		say(k, true, "%s quota of id %u: %" PRIu64 " bytes and %" PRIu64 " inodes recorded, "
			     "the files hold %" PRIu64 " bytes and %" PRIu64 " inodes%s",
		    cfs_quota_type_name(type), id, bytes, inodes, n->bytes, n->inodes, fixed(k));
	else if (!grants_ok)
		say(k, true, "%s quota of id %u: %" PRIu64 " bytes and %" PRIu64 " inodes granted, "
			     "the nodes' grants hold %" PRIu64 " and %" PRIu64 "%s",
		    cfs_quota_type_name(type), id, q->granted_bytes, q->granted_inodes,
		    n->grant_bytes, n->grant_inodes, fixed(k));
	bool fold = k->repair && (n->changed || q->granted_bytes || q->granted_inodes);
	if (!k->repair || (usage_ok && grants_ok && !fold))
		return 0;
	int rc = cfs_quota_set_usage(k->fs, type, id, n->bytes, n->inodes);
	if (!rc && k->fs->txn.n > k->fs->txn.limit / 2)
		rc = cfs_journal_commit(k->fs);
	return rc;
}

struct quota_compare {
	struct fsck *k;
	unsigned type;
};

static int compare_record(void *arg, uint32_t id, const struct cfs_dquot *q)
{
	struct quota_compare *c = arg;
	struct qcount *n = count_slot(c->k, count_key(c->type, id));
	if (!n)
		return -ENOMEM;
	n->recorded = true;
	return compare_usage(c->k, c->type, id, q, n);
}

/* After the groups: every id's usage against the records, both ways; then, with repair,
 * every node's grants folded into the records (an offline filesystem holds none). */
static int check_quotas(struct fsck *k)
{
	struct cfs_fs *fs = k->fs;
	if (!cfs_quota_on(fs))
		return 0;
	if (k->counts_lost) {
		say(k, true, "quotas: out of memory counting usage: not checked");
		return -ENOMEM;
	}
	int rc = 0;
	unsigned types = cfs_project_on(fs) ? CFS_QUOTA_TYPES : CFS_QUOTA_PROJECT;
	for (unsigned t = 0; t < CFS_QUOTA_TYPES && !rc; t++) {
		if (fs->sb.quota_ino[t])
			continue;
		if (!k->repair) {
			say(k, true, "the filesystem has quotas but no %s quota inode",
			    cfs_quota_type_name(t));
			continue;
		}
		rc = make_quota_inode(k, t);
	}
	/* What is damaged is not read (fsck -n; a repair dropped it): usage is compared with
	 * what a repair will write, and cannot be while a change file is damaged. */
	bool changes_read = true;
	for (uint32_t s = 0; s < fs->sb.nslots && !rc; s++) {
		changes_read &= !k->changes_damaged[s];
		rc = k->changes_damaged[s] ? 0 : cfs_quota_changes_each(fs, s, gather_change, k);
	}
	for (unsigned t = 0; t < types && !rc; t++) {
		if (!fs->sb.quota_ino[t] || k->records_damaged[t] || !changes_read)
			continue;
		struct quota_compare c = {k, t};
		rc = cfs_quota_each(fs, t, compare_record, &c);
		/* Usage no record has: ids whose records say nothing yet. */
		for (size_t i = 0; i < k->counts_cap && !rc; i++) {
			struct qcount *n = &k->counts[i];
			if (n->key && !n->recorded && (n->key >> 32) == t + 1)
				rc = compare_usage(k, t, (uint32_t)n->key, NULL, n);
		}
	}
	for (uint32_t s = 0; s < fs->sb.nslots && !rc && k->repair; s++)
		rc = cfs_quota_changes_each(fs, s, clear_change, fs);
	return rc;
}

/* ---- setup ---- */
/* May this release check (or repair) it?  An interrupted tune is no reason not to: it is one
 * of the things fsck puts right. */
static int check_format(struct fsck *k, struct cvm_volume *vol, const struct cfs_dsuper *sb)
{
	struct cfs_dsuper untuned = *sb;
	cfs_feature_tuning(&untuned, NULL, false);
	bool read_only;
	int rc = cfs_features_check(&untuned, cvm_volume_config(vol)->name, k->repair, &read_only);
	if (rc) {
		say(k, true, "%s", cfs_last_error());
		return rc;
	}
	char list[256];
	cfs_features_describe(sb, list, sizeof list);
	say(k, false, "format %u, features: %s", sb->format ? sb->format : CFS_FORMAT,
	    list[0] ? list : "none");
	return 0;
}

/* A tune changes nothing but the superblock before its in-progress bit goes: the bit goes. */
static int roll_back_tune(struct fsck *k, struct cvm_volume *vol, struct cfs_dsuper *sb)
{
	if (!(sb->features[CFS_INCOMPAT] & CFS_FEAT_TUNING))
		return 0;
	say(k, true, "an interrupted 'cfs tune': %s", k->repair ? "rolled back (run it again)"
							: "rolled back if repaired, or run it again");
	cfs_feature_tuning(sb, NULL, false);
	int rc = k->repair ? cfs_super_write(vol, sb) : 0;
	if (!rc && k->repair)
		k->r->repaired++;
	return rc;
}

static int check_super(struct fsck *k, struct cvm_volume *vol, struct cfs_dsuper *sb)
{
	bool backup;
	int rc = cfs_super_read(vol, sb, &backup);
	if (rc) {
		say(k, true, "%s", cfs_last_error());
		return rc;
	}
	if ((rc = check_format(k, vol, sb)))
		return rc;
	uint8_t *b;
	if (posix_memalign((void **)&b, 4096, sb->block_size))
		return -ENOMEM;
	const char *why = NULL;
	bool bad_copy = backup;
	if (!backup && (cvm_volume_read(vol, b, sb->block_size, sb->block_size) ||
			cfs_block_verify(b, sb->block_size, 1, CFS_B_SUPER, 0, &why) ||
			memcmp(b + sizeof(struct cfs_bhdr), (uint8_t *)sb + sizeof(struct cfs_bhdr),
			       sizeof *sb - sizeof(struct cfs_bhdr))))
		bad_copy = true;
	free(b);
	if (bad_copy) {
		say(k, true, "the %s superblock is damaged or differs%s",
		    backup ? "primary" : "backup", fixed(k));
		if (k->repair && (rc = cfs_super_write(vol, sb)))
			return rc;
	}
	return roll_back_tune(k, vol, sb);
}

static int check_journals(struct fsck *k)
{
	struct cfs_fs *fs = k->fs;
	uint8_t *cur;
	if (posix_memalign((void **)&cur, 4096, fs->bs))
		return -ENOMEM;
	int rc = 0;
	uint64_t max_seq = 0;
	for (uint32_t s = 0; s < fs->sb.nslots && !rc; s++) {
		struct cfs_jlog log;
		if ((rc = cfs_journal_read(fs->vol, &fs->sb, s, &log))) {
			if (rc == -EPROTONOSUPPORT)
				say(k, true, "%s", cfs_last_error());
			break;
		}
		max_seq = log.next_seq > max_seq ? log.next_seq : max_seq;
		uint32_t n = log.count;
		const uint8_t *img = log.images;
		bool home = true;
		for (uint32_t i = 0; i < n && !rc; i++) {
			rc = cvm_volume_read(fs->vol, cur, fs->bs, log.targets[i] * fs->bs);
			home &= !rc && !memcmp(cur, img + (size_t)i * fs->bs, fs->bs);
		}
		if (n && !home) {
			say(k, false, "slot %u: the journal holds transactions %" PRIu64 " to %" PRIu64
				      " (%u blocks) not yet in place: %s", s, log.first_seq,
			    log.last_seq, n, k->repair ? "replayed" : "checked as if replayed");
			for (uint32_t i = 0; i < n && !rc; i++)
				rc = k->repair ? cvm_volume_write(fs->vol, img + (size_t)i * fs->bs,
								  fs->bs, log.targets[i] * fs->bs)
					       : cfs_bcache_preload(fs, log.targets[i],
								    img + (size_t)i * fs->bs);
		}
		cfs_jlog_free(&log);
	}
	free(cur);
	fs->jseq = max_seq;
	return rc ? rc : k->repair ? cvm_volume_flush(fs->vol) : 0;
}

static void fsck_free(struct fsck *k)
{
	struct cfs_fs *fs = k->fs;
	if (fs) {
		cfs_icache_destroy(fs);
		cfs_bcache_destroy(fs);
		free(fs->ags);
		free(fs->pending_free);
		cfs_journal_free(fs);
		if (fs->lockfd >= 0)
			close(fs->lockfd);
		free(fs);
	}
	free(k->used);
	free(k->in_extent);
	free(k->stolen);
	free(k->contested);
	free(k->counts);
	free(k->nodes);
	free(k->queue);
	free(k->fixes);
	free(k->lost);
}

static int fsck_open(struct fsck *k, struct cvm_volume *vol)
{
	struct cfs_fs *fs = k->fs = calloc(1, sizeof *fs);
	if (!fs)
		return -ENOMEM;
	fs->lockfd = -1;
	fs->vol = vol;
	fs->who = "fsck.cfs";
	fs->checking = true;
	fs->taken = repair_took;
	fs->taken_arg = k;
	fs->ro = !k->repair;
	int rc = cfs_volume_claim(vol, true, &fs->lockfd);
	if (rc) {
		say(k, false, "%s", cfs_last_error());
		return rc;
	}
	if ((rc = check_super(k, vol, &fs->sb)))
		return rc;
	fs->bs = fs->sb.block_size;
	fs->txn.limit = cfs_journal_limit(&fs->sb);
	fs->ihash = calloc(CFS_ICACHE_BUCKETS, sizeof *fs->ihash);
	k->used = calloc((fs->sb.total_blocks + 7) / 8, 1);
	k->in_extent = calloc((fs->sb.total_blocks + 7) / 8, 1);
	if (!fs->ihash || !k->used || !k->in_extent || (rc = cfs_bcache_init(fs)))
		return rc ? rc : -ENOMEM;
	if ((rc = check_journals(k)))
		return rc;
	/* Repairs go through slot 0's journal: a log of their own, after the one replayed. */
	if (k->repair && (rc = cfs_journal_empty(fs)))
		return rc;
	return cfs_alloc_load(fs);
}

int cfs_fsck(struct cvm_volume *vol, bool repair, cfs_print_fn print, void *arg,
	     cfs_progress_fn progress, struct cfs_fsck_report *report)
{
	struct fsck k = {.repair = repair, .print = print, .arg = arg, .progress = progress,
			 .r = report};
	memset(report, 0, sizeof *report);
	int rc = fsck_open(&k, vol);
	for (uint32_t s = 0; !rc && s < k.fs->sb.nslots; s++)
		if (k.fs->sb.slot_journal[s]) /* a slot added while mounted: its journal is in a group */
			mark(&k, k.fs->sb.slot_journal[s], k.fs->sb.journal_blocks, s, "journal");
	for (uint32_t s = 0; !rc && s < k.fs->sb.nslots; s++)
		rc = check_orphans(&k, s);
	for (unsigned t = 0; !rc && t < CFS_QUOTA_TYPES; t++)
		rc = mark_quota_inode(&k, t);
	for (uint32_t s = 0; !rc && s < k.fs->sb.nslots; s++)
		rc = mark_change_file(&k, s);
	if (!rc)
		rc = walk_tree(&k);
	if (!rc)
		rc = find_lost(&k);
	if (!rc)
		rc = settle_claims(&k);
	if (!rc && repair)
		rc = apply_fixes(&k);
	for (uint32_t g = 0; !rc && g < k.fs->sb.nags; g++) {
		rc = check_group(&k, g);
		if (progress && (g % 64 == 0 || g + 1 == k.fs->sb.nags))
			progress(arg, "allocation groups", g + 1, k.fs->sb.nags);
	}
	if (!rc && repair) /* its blocks are taken from bitmaps that are right now */
		rc = link_lost(&k);
	if (!rc)
		rc = check_links(&k);
	if (!rc)
		rc = check_quotas(&k);
	if (!rc && repair)
		rc = cfs_journal_commit(k.fs);
	if (!rc && repair) /* the repairs in place */
		rc = cfs_journal_empty(k.fs);
	/* No old transaction may be replayed over them. */
	for (uint32_t s = 0; !rc && repair && s < k.fs->sb.nslots; s++)
		rc = cfs_journal_clear(vol, &k.fs->sb, s, k.fs->jseq);
	if (!rc && repair)
		rc = cvm_volume_flush(vol);
	if (!rc && k.super_changed) /* after what it names is on the LUNs */
		rc = cfs_super_write(vol, &k.fs->sb);
	fsck_free(&k);
	return rc;
}
