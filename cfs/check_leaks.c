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
 *   2. the suspects are looked at: an inode among them, or a block of an inode's (directory,
 *      extent, xattr or quota block) naming it, is an owner to read, and the blocks an owner read uses are
 *      met and no suspects.  Most suspects are settled so (files made after the walk passed),
 *      and a round with none left ends here;
 *   3. every inode known is read again, each in an operation of its own;
 *   4. each group's blocks in use that were not met are looked at under the group's glock
 *      (so that what another node made there is on the LUNs), owners read as in step 2; every
 *      block looked at counts as met.  Again until a pass finds no owner;
 *   5. a group whose change count held since step 1 keeps its suspects: they belong to
 *      nothing.
 * Why step 5 is sure: a suspect was in use at step 1 and its group changed nothing since, so
 * an owner it had then held it throughout and was alive throughout.  That owner was read in
 * steps 2 to 4 (the suspect would be met), or its inode block was in use and not met during
 * the last pass of step 4, which would have found it.  A group that changed is tried again in
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
#define PASSES_MAX 8u      /* of step 4 in a round */
#define NAMED_MAX 8u       /* blocks named in a group's line */

struct cfs_leaks {
	uint64_t blocks;
	uint64_t *met;      /* blocks of what was read, and blocks looked at */
	uint64_t *inodes;   /* blocks read as inodes */
	uint64_t *suspects; /* in use, of nothing read */
	uint64_t nsuspects; /* bits set in suspects, from the last count on */
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
		if (bit(l->suspects, blk)) {
			bit_set(l->suspects, blk, false);
			l->nsuspects--;
		}
	}
}

static int owned_run(void *arg, uint64_t blk, uint64_t len, const char *what)
{
	(void)what;
	owned(arg, blk, len);
	return 0;
}

static uint64_t count_suspects(struct cfs_leaks *l)
{
	uint64_t n = 0;
	for (uint64_t w = 0; w < l->blocks / 64 + 1; w++)
		n += (uint64_t)__builtin_popcountll(l->suspects[w]);
	return l->nsuspects = n;
}

struct round {
	struct cfs_fs *fs;
	struct cfs_leaks *l;
	struct cfs_leaks_confirm *c;
	uint32_t nags;
	uint64_t *changes; /* each group's at step 1; UINT64_MAX: not held here then */
	bool *computed;    /* its suspects found (the first step 1 that held it) */
	uint64_t loads;    /* fs->ags_loads at step 1 */
	uint64_t looked; /* in this round */
	uint64_t reads, looked_all, first; /* for the log: inodes read, blocks looked at, suspects */
	bool unsure; /* a group could not be held, or too much to look at: nothing settles */
	uint64_t *queue; /* owners look_at found, to read */
	size_t nqueue, queue_cap;
	uint64_t *dirs; /* directories whose overflow blocks look_at found */
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
		if (!(rc = cfs_inode_read_copy(fs, ino, &c)))
			cfs_inode_copy_blocks(fs, &c, owned_run, r->l);
		cfs_inode_copy_free(&c);
		cfs_iput_check(fs, ip);
	}
	end(fs);
	bit_set(r->l->met, ino, true); /* also if it is no inode (any more): looked at */
	r->reads++;
	if (rc == -ESTALE || rc == -ENOENT)
		bit_set(r->l->inodes, ino, false);
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

/* Block blk looked at: an owner it names is queued (*found).  Looked at under its group's
 * glock (held: what another node made there is on the LUNs), it counts as met. */
static int look_at(struct round *r, uint64_t blk, bool held, bool *found)
{
	struct cfs_bhdr h;
	int rc = cfs_bpeek(r->fs, blk, &h);
	if (held)
		bit_set(r->l->met, blk, true);
	r->looked++;
	if (rc == -ENODATA || rc == -EIO)
		return 0; /* data, or unreadable: nothing it names */
	if (rc)
		return rc;
	uint64_t owner = h.type == CFS_B_INODE ? blk : h.owner;
	if (h.type != CFS_B_INODE && h.type != CFS_B_BUCKET && h.type != CFS_B_DIROVF &&
	    h.type != CFS_B_EXTENTS && h.type != CFS_B_XATTR && h.type != CFS_B_QUOTA)
		return 0; /* not an inode's */
	if (owner >= r->l->blocks)
		return 0;
	if (h.type == CFS_B_DIROVF) {
		if (cfs_reserve((void **)&r->dirs, &r->dirs_cap, r->ndirs + 1, sizeof *r->dirs))
			return -ENOMEM;
		r->dirs[r->ndirs++] = owner;
	}
	if (!bit(r->l->inodes, owner) || !bit(r->l->met, owner) || h.type == CFS_B_DIROVF) {
		if (cfs_reserve((void **)&r->queue, &r->queue_cap, r->nqueue + 1, sizeof *r->queue))
			return -ENOMEM;
		r->queue[r->nqueue++] = owner;
		bit_set(r->l->inodes, owner, true);
		*found = true;
	}
	return 0;
}

/* The owners look_at queued, and the directories whose overflow blocks it met, read. */
static int read_queued(struct round *r)
{
	int rc = 0;
	for (size_t i = 0; !rc && i < r->nqueue; i++)
		if (!(rc = read_owner(r, r->queue[i])))
			rc = stopped(r);
	for (size_t i = 0; !rc && i < r->ndirs; i++)
		rc = read_dir_blocks(r, r->dirs[i]);
	r->nqueue = r->ndirs = 0;
	return rc;
}

/* Up to n blocks of group g from *i on that are in use and not met, in one operation
 * holding the group's glock: -EAGAIN if it could not be held. */
static int unmet_in_group(struct round *r, uint32_t g, uint32_t *i, uint64_t *v, unsigned *n)
{
	struct cfs_fs *fs = r->fs;
	bool held;
	int rc = begin_in_group(r, g, &held);
	if (rc)
		return rc;
	const uint8_t *bm = NULL;
	if (held && (rc = cfs_group_bitmap(fs, g, &bm)) == -EIO)
		rc = 0, held = false; /* a damaged header: no owner in it can be found */
	uint64_t start = fs->ags[g].start;
	unsigned want = *n;
	*n = 0;
	for (; !rc && held && *i < fs->ags[g].nblocks && *n < want; ++*i)
		if (cfs_bit_get(bm, *i) && !bit(r->l->met, start + *i))
			v[(*n)++] = start + *i;
	if (held && *i >= fs->ags[g].nblocks)
		*i = UINT32_MAX;
	end(fs);
	return rc ? rc : held ? 0 : -EAGAIN;
}

/* One pass of step 4 over group g; *found: an owner to read.  Each block is looked at in an
 * operation of its own (a read from the LUNs under fs->lock) while the group stays here. */
static int look_in_group(struct round *r, uint32_t g, bool *found)
{
	struct cfs_fs *fs = r->fs;
	uint64_t v[LOOK_PER_OP];
	for (uint32_t i = 1; i != UINT32_MAX && !r->unsure;) {
		unsigned n = LOOK_PER_OP;
		int rc = unmet_in_group(r, g, &i, v, &n);
		for (unsigned k = 0; !rc && k < n; k++) {
			if ((rc = begin(fs)))
				return rc;
			if (fs->cluster && !cfs_group_is_ours(fs, g))
				rc = -EAGAIN; /* taken back: what was made there may not be home */
			else
				rc = look_at(r, v[k], true, found);
			end(fs);
		}
		if (rc == -EAGAIN || r->looked > LOOK_MAX) {
			r->unsure = true;
			return 0;
		}
		if (rc || (rc = stopped(r)))
			return rc;
	}
	return 0;
}

/* The suspects looked at first: most name their owner (a file made after the walk passed,
 * an extent block) or belong to one, and once none is left no other inode needs reading.
 * Looked at without their group's glock, they do not count as met. */
static int suspects_first(struct round *r)
{
	struct cfs_leaks *l = r->l;
	bool found = false;
	for (uint64_t w = 0; w < l->blocks / 64 + 1; w++)
		for (uint64_t v = l->suspects[w]; v; v &= v - 1) {
			int rc = begin(r->fs);
			if (rc)
				return rc;
			rc = look_at(r, w * 64 + (uint64_t)__builtin_ctzll(v), false, &found);
			end(r->fs);
			if (rc || (rc = stopped(r)))
				return rc;
		}
	return read_queued(r);
}

/* Steps 2 to 4, done early once no suspect is left. */
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
	int rc = suspects_first(r);
	bool found = true;
	for (unsigned pass = 0; !rc && found && !r->unsure && l->nsuspects; pass++) {
		if (pass == PASSES_MAX) {
			r->unsure = true;
			break;
		}
		/* Every inode not read in this round yet (met marks the ones read). */
		for (uint64_t w = 0; !rc && w < l->blocks / 64 + 1 && l->nsuspects; w++)
			for (uint64_t v = l->inodes[w] & ~l->met[w]; !rc && v; v &= v - 1)
				if (!(rc = read_owner(r, w * 64 + (uint64_t)__builtin_ctzll(v))))
					rc = stopped(r);
		found = false;
		for (uint32_t g = 0; !rc && g < r->nags && !r->unsure && l->nsuspects; g++)
			rc = look_in_group(r, g, &found);
		if (!rc)
			rc = read_queued(r);
	}
	return rc;
}

/* Step 5 for group g: its suspects said if its change count held. */
static int settle(struct round *r, uint32_t g)
{
	struct cfs_fs *fs = r->fs;
	uint64_t start = cfs_ag_first(&fs->sb, g), named[NAMED_MAX];
	uint64_t n = fs->sb.ag_blocks < r->l->blocks - start ? fs->sb.ag_blocks : r->l->blocks - start;
	uint32_t count = 0;
	for (uint64_t i = 1; i < n; i++)
		if (bit(r->l->suspects, start + i) && count++ < NAMED_MAX)
			named[count - 1] = start + i;
	if (!count)
		return 0;
	bool held;
	int rc = begin_in_group(r, g, &held);
	if (rc)
		return rc;
	bool settled = held && r->changes[g] != UINT64_MAX && fs->ags[g].changes == r->changes[g];
	end(fs);
	if (!settled)
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

int cfs_leaks_confirm(struct cfs_fs *fs, struct cfs_leaks *l, struct cfs_leaks_confirm *c)
{
	struct round r = {.fs = fs, .l = l, .c = c, .nags = fs->ags_n};
	r.changes = calloc(r.nags, sizeof *r.changes);
	r.computed = calloc(r.nags, sizeof *r.computed);
	int rc = r.changes && r.computed ? 0 : -ENOMEM;
	unsigned rounds = 0;
	for (unsigned round = 0; !rc && round < c->tries; round++) {
		rounds++;
		r.looked_all += r.looked;
		r.loads = fs->ags_loads;
		r.looked = 0;
		r.unsure = false;
		r.nags = r.nags < fs->ags_n ? r.nags : fs->ags_n;
		for (uint32_t g = 0; !rc && g < r.nags; g++)
			if (!(rc = snapshot(&r, g)))
				rc = stopped(&r);
		if (rc || !count_suspects(l))
			break;
		r.first = r.first ? r.first : l->nsuspects;
		if ((rc = read_owners(&r)) || r.unsure)
			continue;
		for (uint32_t g = 0; !rc && g < r.nags; g++)
			rc = settle(&r, g);
		if (!rc && !count_suspects(l))
			break;
	}
	if (!rc) {
		c->unconfirmed += count_suspects(l);
		cfs_log(fs, "check: %" PRIu64 " blocks in use the walk did not meet; %u rounds read "
			"%" PRIu64 " inodes again and looked at %" PRIu64 " blocks; %" PRIu64
			" left unconfirmed", r.first, rounds, r.reads, r.looked_all + r.looked,
			l->nsuspects);
	}
	free(r.changes);
	free(r.computed);
	free(r.queue);
	free(r.dirs);
	return rc;
}
