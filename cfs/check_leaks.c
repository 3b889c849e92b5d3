/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Blocks marked in use that nothing uses, for the check of a mounted filesystem.
 *
 * The check's walk notes each block it met in use and each inode it read.  A block its group
 * marks in use that the walk did not meet is a suspect: leaked, or taken by a file after the
 * walk read that file, or by a file the walk never reached (made after its directory was
 * listed, or moved across the walk).  A round settles suspects:
 *   1. each group's bitmap is read with its glock held here: the suspects still in use, and
 *      the group's change count (struct cfs_ag: blocks taken or freed here, and grants given
 *      up, after which another node may have changed it);
 *   2. every inode known is read again, each in an operation of its own: the blocks it uses
 *      are met, and are no suspects;
 *   3. each group's blocks in use that were not met are looked at, under the group's glock
 *      (so that what another node made there is on the LUNs): an inode, or an extent, xattr
 *      or directory block naming its inode, is an owner to read as in step 2; every block
 *      looked at counts as met.  Again until a pass finds no owner;
 *   4. a group whose change count held since step 1 keeps its suspects: they belong to
 *      nothing.
 * Why step 4 is sure: a suspect was in use at step 1 and its group changed nothing since, so
 * an owner it had then held it throughout and was alive throughout.  That owner was read in
 * step 2 or 3 (the suspect would be met), or its inode block was in use and not met during
 * the last pass of step 3, which would have found it.  A group that changed is tried again in
 * the next round; what no round settles is "unconfirmed". */
#include "cfs/check_leaks.h"

#include "cfs/internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LOOK_PER_OP 64u    /* blocks looked at in one operation (fs->lock is held) */
#define LOOK_MAX (1u << 20) /* blocks looked at in a round; past it the round settles nothing */
#define PASSES_MAX 8u      /* of step 3 in a round */
#define NAMED_MAX 8u       /* blocks named in a group's line */

struct cfs_leaks {
	uint64_t blocks;
	uint64_t *met;      /* blocks of what was read, and blocks looked at */
	uint64_t *inodes;   /* blocks read as inodes */
	uint64_t *suspects; /* in use, of nothing read */
};

static bool bit(const uint64_t *v, uint64_t i)
{
	return v[i / 64] >> (i % 64) & 1;
}

static void bit_set(uint64_t *v, uint64_t i, bool on)
{
	if (on)
		v[i / 64] |= 1ull << (i % 64);
	else
		v[i / 64] &= ~(1ull << (i % 64));
}

struct cfs_leaks *cfs_leaks_new(uint64_t blocks)
{
	struct cfs_leaks *l = calloc(1, sizeof *l);
	if (!l)
		return NULL;
	l->blocks = blocks;
	size_t words = blocks / 64 + 1;
	l->met = calloc(words, sizeof *l->met);
	l->inodes = calloc(words, sizeof *l->inodes);
	l->suspects = calloc(words, sizeof *l->suspects);
	if (!l->met || !l->inodes || !l->suspects) {
		cfs_leaks_free(l);
		return NULL;
	}
	return l;
}

void cfs_leaks_free(struct cfs_leaks *l)
{
	if (!l)
		return;
	free(l->met);
	free(l->inodes);
	free(l->suspects);
	free(l);
}

void cfs_leaks_met(struct cfs_leaks *l, uint64_t blk, uint64_t len)
{
	for (; len && blk < l->blocks; blk++, len--)
		bit_set(l->met, blk, true);
}

void cfs_leaks_inode(struct cfs_leaks *l, uint64_t ino)
{
	if (ino < l->blocks)
		bit_set(l->inodes, ino, true);
}

/* What an owner read again uses: met, and no suspect. */
static void owned(struct cfs_leaks *l, uint64_t blk, uint64_t len)
{
	for (; len && blk < l->blocks; blk++, len--) {
		bit_set(l->met, blk, true);
		bit_set(l->suspects, blk, false);
	}
}

struct round {
	struct cfs_fs *fs;
	struct cfs_leaks *l;
	struct cfs_leaks_confirm *c;
	uint32_t nags;
	uint64_t *changes; /* each group's at step 1; UINT64_MAX: not held here then */
	bool *computed;    /* its suspects found (the first step 1 that held it) */
	uint64_t loads;    /* fs->ags_loads at step 1 */
	uint64_t looked;
	bool unsure; /* a group could not be held, or too much to look at: nothing settles */
	uint64_t *dirs; /* directories whose overflow blocks step 3 found */
	size_t ndirs, dirs_cap;
};

static int begin(struct cfs_fs *fs)
{
	int rc = cfs_op_begin(fs, false);
	if (!rc)
		cfs_bcache_fresh(true, NULL, 0);
	return rc;
}

static void end(struct cfs_fs *fs)
{
	cfs_bcache_fresh(false, NULL, 0);
	cfs_op_end(fs);
}

static int stopped(const struct round *r)
{
	return r->c->stop && *r->c->stop ? -ECANCELED : 0;
}

/* Begin an operation holding group g's glock here (on a cluster: fetched first, in an
 * operation of its own); *held false if another node took it back at once. */
static int begin_in_group(struct round *r, uint32_t g, bool *held)
{
	struct cfs_fs *fs = r->fs;
	int rc;
	if (fs->cluster) {
		if ((rc = cfs_op_begin(fs, false)))
			return rc;
		rc = cfs_group_fetch(fs, g, true);
		cfs_op_end(fs);
		if (rc)
			return rc;
	}
	if ((rc = begin(fs)))
		return rc;
	*held = cfs_group_is_ours(fs, g) && fs->ags_loads == r->loads;
	return 0;
}

/* Step 1 for group g. */
static int snapshot(struct round *r, uint32_t g)
{
	struct cfs_fs *fs = r->fs;
	bool held;
	int rc = begin_in_group(r, g, &held);
	if (rc)
		return rc;
	const uint8_t *bm;
	if (!held || (rc = cfs_group_bitmap(fs, g, &bm))) {
		r->changes[g] = UINT64_MAX;
		end(fs);
		return rc == -EIO ? 0 : rc; /* a damaged header: said by the group check */
	}
	r->changes[g] = fs->ags[g].changes;
	uint64_t start = fs->ags[g].start;
	for (uint32_t i = 1; i < fs->ags[g].nblocks; i++) { /* bit 0: the header */
		uint64_t blk = start + i;
		bool used = cfs_bit_get(bm, i);
		if (!r->computed[g])
			bit_set(r->l->suspects, blk, used && !bit(r->l->met, blk));
		else if (!used)
			bit_set(r->l->suspects, blk, false);
	}
	r->computed[g] = true;
	end(fs);
	return 0;
}

/* Inode ino read again in an operation of its own: what it uses is owned. */
static int read_owner(struct round *r, uint64_t ino)
{
	struct cfs_fs *fs = r->fs;
	int rc = begin(fs);
	if (rc)
		return rc;
	struct cfs_inode *ip, c = {0};
	if (!(rc = cfs_iget_entry(fs, ino, &ip))) {
		if (!(rc = cfs_inode_read_copy(fs, ino, &c))) {
			owned(r->l, ino, 1);
			for (uint32_t i = 0; i < c.next; i++)
				owned(r->l, c.ext[i].pblk, c.ext[i].len);
			for (uint64_t blk = c.d.ext_next; blk;) {
				struct cfs_buf *b;
				owned(r->l, blk, 1);
				if (cfs_bread(fs, blk, CFS_B_EXTENTS, ino, &b))
					break; /* read and verified by cfs_inode_read_copy just now */
				blk = ((const struct cfs_dextb *)b->data)->next;
			}
			if (c.d.xattr_block)
				owned(r->l, c.d.xattr_block, 1);
		}
		cfs_inode_copy_free(&c);
		cfs_iput_check(fs, ip);
	}
	end(fs);
	if (rc == -ESTALE || rc == -ENOENT)
		bit_set(r->l->inodes, ino, false); /* not an inode any more */
	if (r->c->read)
		r->c->read(r->c->arg);
	return rc == -ESTALE || rc == -ENOENT || rc == -EIO ? 0 : rc; /* EIO: the walk said it */
}

static void on_dir_block(void *arg, uint64_t blkno)
{
	owned(arg, blkno, 1);
}

static int on_dir_entry(void *arg, const char *name, size_t len, uint64_t ino, uint8_t type,
			const uint64_t *misplaced)
{
	(void)arg, (void)name, (void)len, (void)ino, (void)type, (void)misplaced;
	return 0;
}

static void on_dir_damaged(void *arg, uint64_t bucket, uint64_t blkno, uint64_t prev)
{
	(void)arg, (void)bucket, (void)blkno, (void)prev; /* said by the walk */
}

static void on_dir_count(void *arg, struct cfs_buf *b, uint32_t entries)
{
	(void)arg, (void)b, (void)entries;
}

/* A directory's overflow blocks (which its inode does not list) owned, in one operation. */
static int read_dir_blocks(struct round *r, uint64_t ino)
{
	struct cfs_fs *fs = r->fs;
	int rc = begin(fs);
	if (rc)
		return rc;
	struct cfs_inode *dir;
	if (!(rc = cfs_iget_entry(fs, ino, &dir))) {
		if (S_ISDIR(dir->d.mode)) {
			struct cfs_dir_check cb = {on_dir_block, on_dir_entry, on_dir_damaged,
						   on_dir_count, r->l};
			rc = cfs_dir_check(fs, dir, &cb);
		}
		cfs_iput_check(fs, dir);
	}
	end(fs);
	return rc == -ESTALE || rc == -ENOENT || rc == -EIO ? 0 : rc;
}

/* Block blk, in use and not met, looked at: an owner it names is queued (*found). */
static int look_at(struct round *r, uint64_t blk, bool *found)
{
	struct cfs_bhdr h;
	int rc = cfs_bpeek(r->fs, blk, &h);
	bit_set(r->l->met, blk, true);
	r->looked++;
	if (rc == -ENODATA || rc == -EIO)
		return 0; /* data, or unreadable: nothing it names */
	if (rc)
		return rc;
	uint64_t owner = h.type == CFS_B_INODE ? blk : h.owner;
	if (h.type != CFS_B_INODE && h.type != CFS_B_EXTENTS && h.type != CFS_B_XATTR &&
	    h.type != CFS_B_DIROVF)
		return 0;
	if (owner >= r->l->blocks)
		return 0;
	if (h.type == CFS_B_DIROVF) {
		if (cfs_reserve((void **)&r->dirs, &r->dirs_cap, r->ndirs + 1, sizeof *r->dirs))
			return -ENOMEM;
		r->dirs[r->ndirs++] = owner;
	}
	if (!bit(r->l->inodes, owner) || h.type == CFS_B_DIROVF) {
		bit_set(r->l->inodes, owner, true);
		bit_set(r->l->met, owner, false); /* read it (below) */
		*found = true;
	}
	return 0;
}

/* One pass of step 3 over group g; *found: an owner to read. */
static int look_in_group(struct round *r, uint32_t g, bool *found)
{
	struct cfs_fs *fs = r->fs;
	uint64_t start = cfs_ag_first(&fs->sb, g);
	for (uint32_t i = 1;;) {
		bool held;
		int rc = begin_in_group(r, g, &held);
		if (rc)
			return rc;
		const uint8_t *bm = NULL;
		if (held && (rc = cfs_group_bitmap(fs, g, &bm)) == -EIO)
			rc = 0, held = false; /* a damaged header: no owner in it can be found */
		uint32_t n = fs->ags[g].nblocks;
		for (unsigned looked = 0; !rc && held && i < n && looked < LOOK_PER_OP; i++)
			if (cfs_bit_get(bm, i) && !bit(r->l->met, start + i)) {
				rc = look_at(r, start + i, found);
				looked++;
			}
		end(fs);
		if (rc || (rc = stopped(r)))
			return rc;
		if (!held || r->looked > LOOK_MAX)
			r->unsure = true;
		if (r->unsure || i >= n)
			return 0;
	}
}

/* Steps 2 and 3: every inode known read again, then what is in use and not met looked at,
 * until a pass finds no owner. */
static int read_owners(struct round *r)
{
	struct cfs_fs *fs = r->fs;
	struct cfs_leaks *l = r->l;
	memset(l->met, 0, (l->blocks / 64 + 1) * sizeof *l->met);
	for (uint32_t g = 0; g < r->nags; g++)
		bit_set(l->met, cfs_ag_first(&fs->sb, g), true);
	for (uint32_t s = 0; s < fs->sb.nslots; s++)
		if (fs->sb.slot_journal[s]) /* a slot added while mounted: its journal is in a group */
			owned(l, fs->sb.slot_journal[s], fs->sb.journal_blocks);
	bool found = true;
	for (unsigned pass = 0; found && !r->unsure; pass++) {
		if (pass == PASSES_MAX) {
			r->unsure = true;
			break;
		}
		/* Read every inode not read in this round yet (met marks the ones read). */
		for (uint64_t w = 0; w < l->blocks / 64 + 1; w++)
			for (uint64_t v = l->inodes[w] & ~l->met[w]; v; v &= v - 1) {
				uint64_t ino = w * 64 + (uint64_t)__builtin_ctzll(v);
				int rc = read_owner(r, ino);
				if (rc || (rc = stopped(r)))
					return rc;
				bit_set(l->met, ino, true); /* also if it was no inode: looked at */
			}
		for (size_t i = 0; i < r->ndirs; i++) {
			int rc = read_dir_blocks(r, r->dirs[i]);
			if (rc)
				return rc;
		}
		r->ndirs = 0;
		found = false;
		for (uint32_t g = 0; g < r->nags && !r->unsure; g++) {
			int rc = look_in_group(r, g, &found);
			if (rc)
				return rc;
		}
	}
	return 0;
}

/* Step 4 for group g: its suspects said if its change count held. */
static int settle(struct round *r, uint32_t g, bool *settled)
{
	struct cfs_fs *fs = r->fs;
	uint64_t start = cfs_ag_first(&fs->sb, g), named[NAMED_MAX];
	uint64_t n = fs->sb.ag_blocks < r->l->blocks - start ? fs->sb.ag_blocks : r->l->blocks - start;
	uint32_t count = 0;
	*settled = false;
	for (uint64_t i = 1; i < n; i++)
		if (bit(r->l->suspects, start + i) && count++ < NAMED_MAX)
			named[count - 1] = start + i;
	if (!count)
		return 0;
	bool held;
	int rc = begin_in_group(r, g, &held);
	if (rc)
		return rc;
	*settled = held && r->changes[g] != UINT64_MAX && fs->ags[g].changes == r->changes[g];
	end(fs);
	if (!*settled)
		return 0;
	char list[NAMED_MAX * 21 + 8] = "", *p = list;
	for (uint32_t i = 0; i < count && i < NAMED_MAX; i++)
		p += snprintf(p, (size_t)(list + sizeof list - p), "%s%" PRIu64, i ? ", " : "",
			      named[i]);
	if (count > NAMED_MAX)
		snprintf(p, (size_t)(list + sizeof list - p), ", ...");
	char line[512];
	snprintf(line, sizeof line,
		 "allocation group %u: %u block%s marked in use belong%s to nothing%s (%s): "
		 "fsck.cfs -y unmounted frees them",
		 g, count, count == 1 ? "" : "s", count == 1 ? "s" : "",
		 r->c->damaged ? " readable (a damaged inode above may hold some)" : "", list);
	r->c->problem(r->c->arg, line);
	for (uint64_t i = 1; i < n; i++)
		bit_set(r->l->suspects, start + i, false);
	return 0;
}

static uint64_t suspects_left(const struct cfs_leaks *l)
{
	uint64_t n = 0;
	for (uint64_t w = 0; w < l->blocks / 64 + 1; w++)
		n += (uint64_t)__builtin_popcountll(l->suspects[w]);
	return n;
}

int cfs_leaks_confirm(struct cfs_fs *fs, struct cfs_leaks *l, struct cfs_leaks_confirm *c)
{
	struct round r = {.fs = fs, .l = l, .c = c, .nags = fs->ags_n};
	r.changes = calloc(r.nags, sizeof *r.changes);
	r.computed = calloc(r.nags, sizeof *r.computed);
	int rc = r.changes && r.computed ? 0 : -ENOMEM;
	for (unsigned round = 0; !rc && round < c->tries; round++) {
		r.loads = fs->ags_loads;
		r.looked = 0;
		r.unsure = false;
		r.nags = r.nags < fs->ags_n ? r.nags : fs->ags_n;
		for (uint32_t g = 0; !rc && g < r.nags; g++)
			if (!(rc = snapshot(&r, g)))
				rc = stopped(&r);
		if (rc || !suspects_left(l))
			break;
		if ((rc = read_owners(&r)) || r.unsure)
			continue;
		for (uint32_t g = 0; !rc && g < r.nags; g++) {
			bool settled;
			rc = settle(&r, g, &settled);
		}
		if (!rc && !suspects_left(l))
			break;
	}
	if (!rc)
		c->unconfirmed += suspects_left(l);
	free(r.changes);
	free(r.computed);
	free(r.dirs);
	return rc;
}
