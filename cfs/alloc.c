/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Allocation groups: each has a header block with its bitmap (bit set = used).  A node starts
 * looking in the groups of its own part of the volume, so nodes rarely want the same group.
 * Blocks freed by the running transaction are not handed out again until it is committed:
 * otherwise a crash could leave the old owner pointing at a block a new owner has written. */
#include "cfs/internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

bool cfs_bit_get(const uint8_t *bitmap, uint64_t bit)
{
	return bitmap[bit / 8] >> (bit % 8) & 1;
}

void cfs_bit_set(uint8_t *bitmap, uint64_t bit, bool on)
{
	if (on)
		bitmap[bit / 8] |= (uint8_t)(1u << (bit % 8));
	else
		bitmap[bit / 8] &= (uint8_t)~(1u << (bit % 8));
}

void cfs_bits_set(uint8_t *bitmap, uint64_t bit, uint32_t n, bool on)
{
	for (; n && bit % 8; bit++, n--)
		cfs_bit_set(bitmap, bit, on);
	memset(bitmap + bit / 8, on ? 0xff : 0, n / 8);
	bit += n / 8 * 8;
	for (n %= 8; n; bit++, n--)
		cfs_bit_set(bitmap, bit, on);
}

/* Are the 64 bits from at (a multiple of 64) all whole's? */
static bool word_is(const uint8_t *bitmap, uint64_t at, uint64_t whole)
{
	uint64_t word;
	memcpy(&word, bitmap + at / 8, sizeof word);
	return word == whole;
}

uint32_t cfs_bits_run(const uint8_t *bitmap, uint64_t bit, uint32_t max, bool on)
{
	uint64_t whole = on ? UINT64_MAX : 0;
	uint32_t n = 0;
	while (n < max) {
		uint64_t at = bit + n;
		if (at % 64 == 0 && max - n >= 64 && word_is(bitmap, at, whole))
			n += 64;
		else if (at % 8 == 0 && max - n >= 8 && bitmap[at / 8] == (uint8_t)whole)
			n += 8;
		else if (cfs_bit_get(bitmap, at) == on)
			n++;
		else
			break;
	}
	return n;
}

void cfs_agh_format(uint8_t *block, uint32_t bs, uint32_t index, uint64_t start,
		    uint32_t nblocks, uint32_t used_at_start)
{
	cfs_block_init(block, bs, start, CFS_B_AGH, index);
	struct cfs_dagh *g = (void *)block;
	g->start = start;
	g->nblocks = nblocks;
	g->nfree = nblocks - used_at_start;
	cfs_bits_set(block + CFS_AGH_BITMAP_OFF, 0, used_at_start, true);
}

void cfs_agh_take(uint8_t *block, uint64_t blk, uint32_t n)
{
	struct cfs_dagh *g = (void *)block;
	cfs_bits_set(block + CFS_AGH_BITMAP_OFF, (uint32_t)(blk - g->start), n, true);
	g->nfree -= n;
}

/* The group's header; without its glock (agglock.c) only as a hint, which keeps it fresh.
 * Such a hint may meet a header that another node's grow has just made longer (the last
 * group grows first) before this node took the grow in: -EAGAIN, not damage. */
static int read_agh(struct cfs_fs *fs, uint32_t ag, struct cfs_buf **b)
{
	bool hint = !cfs_group_is_ours(fs, ag);
	int rc = cfs_bread_flags(fs, fs->ags[ag].start, CFS_B_AGH, ag, hint ? CFS_BREAD_RACY : 0, b);
	if (rc)
		return rc;
	const struct cfs_dagh *g = (const void *)(*b)->data;
	if (hint && g->start == fs->ags[ag].start && g->nblocks > fs->ags[ag].nblocks &&
	    ag == fs->sb.nags - 1)
		return -EAGAIN;
	const char *why;
	if (cfs_agh_verify(&fs->sb, (*b)->data, ag, !(*b)->checked, &why)) {
		cfs_log(fs, "block %llu (group %u header): %s: EIO",
			(unsigned long long)fs->ags[ag].start, ag, why);
		return -EIO;
	}
	(*b)->checked = true;
	fs->ags[ag].nfree = g->nfree;
	return 0;
}

/* The group's free count, read again: another node may have allocated in it. */
static void load_hint(struct cfs_fs *fs, uint32_t ag)
{
	if (!cfs_group_is_ours(fs, ag)) {
		cfs_bcache_drop_block(fs, fs->ags[ag].start);
		fs->ags[ag].hint_seq = fs->grants;
	}
	struct cfs_buf *b;
	int rc = read_agh(fs, ag, &b);
	if (rc == -EAGAIN) /* grown elsewhere: the count stays until the grow is taken in */
		cfs_bcache_drop_block(fs, fs->ags[ag].start);
	else if (rc)
		fs->ags[ag].nfree = 0; /* a damaged group hands out nothing; fsck.cfs rebuilds it */
	cfs_bcache_trim(fs);
}

int cfs_alloc_load(struct cfs_fs *fs)
{
	struct cfs_ag *ags = calloc(fs->sb.nags, sizeof *ags);
	if (!ags)
		return -ENOMEM;
	free(fs->ags);
	fs->ags = ags;
	fs->ags_n = fs->sb.nags;
	fs->ags_loads++;
	for (uint32_t i = 0; i < fs->sb.nags; i++) {
		ags[i].start = cfs_ag_first(&fs->sb, i);
		ags[i].nblocks = cfs_ag_size(&fs->sb, i);
	}
	for (uint32_t i = 0; i < fs->sb.nags; i++)
		load_hint(fs, i);
	fs->hints_ns = cfs_now_ns();
	return 0;
}

/* Other nodes allocate under their group glocks without this node hearing of it: statfs
 * reads their headers again, at most once a commit interval (what a header says on disk is
 * at most that old). */
#define HINTS_NS 1000000000ull

void cfs_alloc_refresh(struct cfs_fs *fs)
{
	uint64_t now = cfs_now_ns();
	if (!fs->cluster || now - fs->hints_ns < HINTS_NS || cfs_fenced(fs))
		return; /* fenced: no more reads of the LUNs, the counts stay as they were */
	for (uint32_t i = 0; i < fs->sb.nags; i++)
		if (!cfs_group_is_ours(fs, i))
			load_hint(fs, i);
	fs->hints_ns = now;
}

uint64_t cfs_free_blocks(struct cfs_fs *fs)
{
	uint64_t n = 0;
	for (uint32_t i = 0; i < fs->sb.nags; i++)
		n += fs->ags[i].nfree;
	return n;
}

/* The free run [blk, blk + n) cut before the first block a transaction not yet committed
 * freed.  0 if blk is one: *past is then the end of its freed range. */
static uint32_t cut_at_pending(const struct cfs_fs *fs, uint64_t blk, uint32_t n, uint64_t *past)
{
	for (size_t i = 0; i < fs->npending; i += 2) {
		uint64_t from = fs->pending_free[i], to = from + fs->pending_free[i + 1];
		if (to <= blk || from >= blk + n)
			continue;
		if (from <= blk) {
			*past = to;
			return 0;
		}
		n = (uint32_t)(from - blk);
	}
	return n;
}

/* Where a run may start: anywhere (align 1), or at a block that is phase modulo align, unless
 * it is the goal itself (a file continued where it ends). */
struct placement {
	uint64_t goal;
	uint32_t align, phase;
	uint64_t floor; /* no run starts below it in its group */
};

static const struct placement anywhere = {0, 1, 0, 0};

static uint32_t to_placement(const struct placement *pl, uint64_t blk)
{
	if (pl->align <= 1 || blk == pl->goal)
		return 0;
	return (uint32_t)((pl->phase + pl->align - blk % pl->align) % pl->align);
}

/* First run of usable blocks (free, and not freed by a transaction not yet committed) at or
 * after bit `from`, at most want long, starting as pl says. */
static uint32_t find_run(const struct cfs_fs *fs, const uint8_t *bm, uint64_t start,
			 uint32_t nblocks, uint32_t from, uint32_t want, const struct placement *pl,
			 uint32_t *len)
{
	if (pl->floor > start + from)
		from = pl->floor - start < nblocks ? (uint32_t)(pl->floor - start) : nblocks;
	for (uint32_t bit = from; bit < nblocks;) {
		bit += cfs_bits_run(bm, bit, nblocks - bit, true);
		if (bit >= nblocks)
			break;
		uint32_t skip = to_placement(pl, start + bit);
		if (skip) { /* over the free blocks before the next placed one, if they reach it */
			uint32_t free = cfs_bits_run(bm, bit, skip < nblocks - bit ? skip : nblocks - bit,
						     false);
			bit += free;
			if (free < skip || bit >= nblocks)
				continue;
		}
		uint32_t n = cfs_bits_run(bm, bit, want < nblocks - bit ? want : nblocks - bit, false);
		uint64_t past = start + bit + 1;
		if ((n = cut_at_pending(fs, start + bit, n, &past))) {
			*len = n;
			return bit;
		}
		bit = (uint32_t)(past - start);
	}
	return UINT32_MAX;
}

/* Mark len blocks from bit of group ag (header and bitmap in b) used. */
static uint64_t take_run(struct cfs_fs *fs, uint32_t ag, struct cfs_buf *b, uint32_t bit,
			 uint32_t len)
{
	struct cfs_dagh *g = (void *)b->data;
	cfs_bits_set(b->data + CFS_AGH_BITMAP_OFF, bit, len, true);
	g->nfree -= len;
	fs->ags[ag].nfree = g->nfree;
	fs->ags[ag].changes++;
	cfs_bdirty(fs, b);
	if (fs->taken)
		fs->taken(fs->taken_arg, g->start + bit, len);
	return g->start + bit;
}

/* Where alloc_in would take up to want blocks in group ag: header in *b, run at *bit. */
static int find_in(struct cfs_fs *fs, uint32_t ag, uint32_t from, uint32_t want,
		   const struct placement *pl, struct cfs_buf **b, uint32_t *bit, uint32_t *len)
{
	int rc = cfs_group_ensure(fs, ag);
	if (rc || (rc = read_agh(fs, ag, b)))
		return rc;
	const struct cfs_dagh *g = (const void *)(*b)->data;
	const uint8_t *bm = (*b)->data + CFS_AGH_BITMAP_OFF;
	*bit = find_run(fs, bm, g->start, g->nblocks, from, want, pl, len);
	if (*bit == UINT32_MAX && from)
		*bit = find_run(fs, bm, g->start, g->nblocks, 0, want, pl, len);
	return *bit == UINT32_MAX ? -ENOSPC : 0;
}

static int alloc_in(struct cfs_fs *fs, uint32_t ag, uint32_t from, uint32_t want,
		    const struct placement *pl, uint64_t *pblk, uint32_t *got)
{
	struct cfs_buf *b;
	uint32_t bit;
	int rc = find_in(fs, ag, from, want, pl, &b, &bit, got);
	if (!rc)
		*pblk = take_run(fs, ag, b, bit, *got);
	return rc;
}

/* The first group of this node's share of the volume, where it allocates by default. */
static uint32_t own_first_group(const struct cfs_fs *fs)
{
	return (uint32_t)((uint64_t)fs->slot * fs->sb.nags / fs->sb.nslots);
}

uint32_t cfs_ag_of(const struct cfs_fs *fs, uint64_t blk)
{
	if (blk < fs->sb.ag_start)
		return 0;
	uint64_t ag = (blk - fs->sb.ag_start) / fs->sb.ag_blocks;
	return ag < fs->sb.nags ? (uint32_t)ag : fs->sb.nags - 1;
}

bool cfs_block_in_use(struct cfs_fs *fs, uint64_t blk, uint64_t since)
{
	uint32_t ag = cfs_ag_of(fs, blk);
	struct cfs_buf *b;
	if (blk < fs->ags[ag].start)
		return true;
	/* Without the group's glock the header is a hint, and one read before the grant the
	 * caller holds over the block may predate what was freed or allocated before it. */
	if (!cfs_group_is_ours(fs, ag) && fs->ags[ag].hint_seq < since) {
		cfs_bcache_drop_block(fs, fs->ags[ag].start);
		fs->ags[ag].hint_seq = fs->grants;
	}
	if (read_agh(fs, ag, &b))
		return true;
	return cfs_bit_get(b->data + CFS_AGH_BITMAP_OFF, (uint32_t)(blk - fs->ags[ag].start));
}

int cfs_group_check(struct cfs_fs *fs, uint32_t ag)
{
	struct cfs_buf *b;
	return read_agh(fs, ag, &b);
}

int cfs_group_bitmap(struct cfs_fs *fs, uint32_t ag, const uint8_t **bitmap)
{
	struct cfs_buf *b;
	int rc = read_agh(fs, ag, &b);
	if (!rc)
		*bitmap = b->data + CFS_AGH_BITMAP_OFF;
	return rc;
}

int cfs_blocks_marked(struct cfs_fs *fs, uint64_t blk, uint64_t len, uint64_t *unmarked)
{
	while (len) {
		uint32_t ag = cfs_ag_of(fs, blk);
		const struct cfs_ag *a = &fs->ags[ag];
		if (blk < a->start || blk - a->start >= a->nblocks) {
			*unmarked = blk; /* in no group: a header or outside the volume */
			return -ENOENT;
		}
		uint32_t bit = (uint32_t)(blk - a->start);
		uint32_t n = len < a->nblocks - bit ? (uint32_t)len : a->nblocks - bit;
		struct cfs_buf *b;
		int rc = read_agh(fs, ag, &b);
		if (rc)
			return rc;
		uint32_t run = cfs_bits_run(b->data + CFS_AGH_BITMAP_OFF, bit, n, true);
		if (run < n) {
			*unmarked = blk + run;
			return cfs_group_is_ours(fs, ag) ? -ENOENT : -EAGAIN;
		}
		blk += n;
		len -= n;
	}
	return 0;
}

bool cfs_may_allocate(const struct cfs_fs *fs)
{
	return !fs->cluster || fs->meta.mode == CFSLOCK_EX;
}

/* Under the metadata glock PR: the group this operation reserved (agglock.c), and where in it
 * to start looking for goal. */
static uint32_t reserved_from(const struct cfs_fs *fs, uint64_t goal, uint32_t *from)
{
	int64_t reserved = cfs_group_reserved();
	uint32_t ag = reserved >= 0 ? (uint32_t)reserved : cfs_ag_of(fs, goal);
	uint64_t start = fs->ags[ag].start;
	*from = goal >= start && goal - start < fs->ags[ag].nblocks ? (uint32_t)(goal - start) : 0;
	return ag;
}

/* Where a new inode may go: not in the spans of group 0's first blocks, the root directory's
 * and the orphan directories' (on a cluster mkfs gives each its own span).  Another node
 * reading a file there takes the span's glock PR, and a rename over a file here, which puts
 * it on this node's orphan directory, then waits for that node to let go (a git clone after
 * another node read a tree converted the orphan directory's span so, and four spans of the
 * tree with it, convert_ahead).  The root's span is converted by a create in the root as it
 * is, but no file in it need be forgotten on the nodes that read it.  (One-node mounts, whose
 * inodes have no glocks, keep the rule too: it costs them a span of a 126 MiB group.) */
static struct placement inode_placement(const struct cfs_fs *fs)
{
	struct placement pl = anywhere;
	uint64_t last = fs->sb.root_ino;
	for (uint32_t s = 0; s < fs->sb.nslots; s++)
		last = fs->sb.orphan_dir[s] > last ? fs->sb.orphan_dir[s] : last;
	pl.floor = (last | (CFS_IGLOCK_SPAN - 1)) + 1;
	return pl;
}

bool cfs_system_span(const struct cfs_fs *fs, uint64_t blk)
{
	return blk < inode_placement(fs).floor;
}

int cfs_alloc_peek(struct cfs_fs *fs, uint64_t goal, uint64_t *pblk)
{
	uint32_t from, bit, len;
	uint32_t ag = reserved_from(fs, goal, &from);
	struct placement pl = inode_placement(fs);
	struct cfs_buf *b;
	int rc = find_in(fs, ag, from, 1, &pl, &b, &bit, &len);
	if (rc == -ENOSPC) /* room only there: better than none */
		rc = find_in(fs, ag, from, 1, &anywhere, &b, &bit, &len);
	if (!rc)
		*pblk = fs->ags[ag].start + bit;
	return rc;
}

static int alloc_from(struct cfs_fs *fs, uint64_t goal, uint32_t want,
		      const struct placement *pl, uint64_t *pblk, uint32_t *got)
{
	uint32_t nags = fs->sb.nags;
	if (!cfs_may_allocate(fs)) {
		uint32_t from, ag = reserved_from(fs, goal, &from);
		return alloc_in(fs, ag, from, want, pl, pblk, got);
	}
	uint32_t first = goal ? cfs_ag_of(fs, goal) : own_first_group(fs);
	uint32_t from = goal ? (uint32_t)(goal - fs->ags[first].start) : 0;
	if (from >= fs->ags[first].nblocks)
		from = 0;
	for (uint32_t i = 0; i < nags; i++) {
		uint32_t ag = (first + i) % nags;
		if (fs->ags[ag].nfree == 0)
			continue;
		int rc = alloc_in(fs, ag, i == 0 ? from : 0, want, pl, pblk, got);
		if (rc != -ENOSPC)
			return rc;
	}
	return -ENOSPC;
}

/* Blocks of the group that the running transaction freed: not to be handed out yet. */
static uint64_t pending_in(const struct cfs_fs *fs, uint32_t ag)
{
	uint64_t n = 0, start = fs->ags[ag].start, end = start + fs->ags[ag].nblocks;
	for (size_t i = 0; i < fs->npending; i += 2)
		if (fs->pending_free[i] >= start && fs->pending_free[i] < end)
			n += fs->pending_free[i + 1];
	return n;
}

static uint64_t pending_in_all(const struct cfs_fs *fs)
{
	uint64_t n = 0;
	for (size_t i = 0; i < fs->npending; i += 2)
		n += fs->pending_free[i + 1];
	return n;
}

/* Room for need blocks in the group, as far as this node knows (exactly if it is ours). */
static bool room(struct cfs_fs *fs, uint32_t ag, uint32_t need)
{
	struct cfs_buf *b;
	if (cfs_group_is_ours(fs, ag) && read_agh(fs, ag, &b))
		return false;
	return fs->ags[ag].nfree >= need + pending_in(fs, ag);
}

/* Passed over by a reservation for a new inode: its room is all in spans other nodes use. */
static bool passed_over(const struct cfs_fs *fs, uint32_t ag, bool new_inode)
{
	uint64_t at = fs->ags[ag].inode_room_costly_ns;
	return new_inode && at && cfs_now_ns() - at < CFS_INODE_ROOM_COSTLY_NS;
}

/* A group this node has with room for need, from first on (n of them), or -1. */
static int64_t ours_with_room(struct cfs_fs *fs, uint32_t first, uint32_t n, uint32_t need,
			      bool new_inode)
{
	for (uint32_t i = 0; i < n; i++) {
		uint32_t ag = (first + i) % fs->sb.nags;
		if (cfs_group_is_ours(fs, ag) && room(fs, ag, need) && !passed_over(fs, ag, new_inode))
			return ag;
	}
	return -1;
}

int cfs_alloc_reserve(struct cfs_fs *fs, uint64_t goal, uint32_t need, int64_t only,
		      bool new_inode)
{
	uint32_t nags = fs->sb.nags, own = own_first_group(fs);
	uint32_t own_end = (uint32_t)((uint64_t)(fs->slot + 1) * nags / fs->sb.nslots);
	own_end = own_end > own ? own_end : own + 1; /* more slots than groups: they share */
	uint32_t first = only >= 0 ? (uint32_t)only : goal ? cfs_ag_of(fs, goal) : own;
	uint32_t n = only >= 0 ? 1 : nags;
	/* A group this node has, the goal's first: no message. */
	int64_t ag = ours_with_room(fs, first, n, need, new_inode);
	if (ag >= 0)
		return cfs_group_hold_cached(fs, (uint32_t)ag);
	/* One of this node's share of the volume, which others rarely want: waited for. */
	for (uint32_t a = own; a < own_end; a++)
		if ((only < 0 || a == (uint64_t)only) && room(fs, a, need) &&
		    !passed_over(fs, a, new_inode)) {
			int rc = cfs_group_fetch(fs, a, true);
			return rc ? rc : -EAGAIN;
		}
	/* Rather than another node's group, one of ours whose room costs lock round trips. */
	if (new_inode && (ag = ours_with_room(fs, first, n, need, false)) >= 0)
		return cfs_group_hold_cached(fs, (uint32_t)ag);
	/* Another node's share: only if nobody there holds it. */
	for (uint32_t i = 0; i < n; i++) {
		uint32_t a = (first + i) % nags;
		if ((a < own || a >= own_end) && room(fs, a, need))
			return cfs_group_fetch(fs, a, false) ? -ENOSPC : -EAGAIN;
	}
	return -ENOSPC;
}

/* The inode that last lost its last name, if that was in the last second and the kernel still
 * holds it: its release and forget come on their own, a moment after the unlink was
 * answered, and free it.  fs->lock held. */
static bool removed_and_held(struct cfs_fs *fs)
{
	if (cfs_now_ns() - fs->unlinked_ns > 1000000000ull)
		return false;
	const struct cfs_inode *ip = cfs_icache_find(fs, fs->unlinked_ino);
	return ip && !ip->d.nlink && !ip->dead && (ip->nopen || ip->nlookup);
}

bool cfs_alloc_retry(struct cfs_fs *fs, int rc)
{
	if (rc != -ENOSPC)
		return false;
	pthread_mutex_lock(&fs->lock);
	bool waiting = fs->npending > 0 || removed_and_held(fs);
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 1;
	while (removed_and_held(fs) && !pthread_cond_timedwait(&fs->put_wake, &fs->lock, &until))
		;
	pthread_mutex_unlock(&fs->lock);
	return waiting && cfs_sync(fs) == 0;
}

bool cfs_free_above(const struct cfs_fs *fs, uint64_t n)
{
	uint64_t sum = 0;
	for (uint32_t i = 0; i < fs->sb.nags; i++)
		if ((sum += fs->ags[i].nfree) > n)
			return true;
	return false;
}

static int alloc_placed(struct cfs_fs *fs, uint64_t goal, uint32_t want,
			const struct placement *pl, uint64_t *pblk, uint32_t *got)
{
	/* Blocks freed but not yet committed count as free, yet none is handed out: without them
	 * the reserve would go to data. */
	uint64_t waiting = pending_in_all(fs);
	if (!cfs_free_above(fs, CFS_META_RESERVE + waiting + want)) { /* nearly full: count */
		uint64_t free = cfs_free_blocks(fs);
		free = free > waiting ? free - waiting : 0;
		if (free <= CFS_META_RESERVE)
			return -ENOSPC;
		want = (uint32_t)(free - CFS_META_RESERVE < want ? free - CFS_META_RESERVE : want);
	}
	int rc = alloc_from(fs, goal, want, pl, pblk, got);
	if (rc == -ENOSPC && pl->align > 1) /* no placed run left: any will do */
		rc = alloc_from(fs, goal, want, &anywhere, pblk, got);
	return rc;
}

int cfs_alloc(struct cfs_fs *fs, uint64_t goal, uint32_t want, uint64_t *pblk, uint32_t *got)
{
	return alloc_placed(fs, goal, want, &anywhere, pblk, got);
}

int cfs_alloc_inode(struct cfs_fs *fs, uint64_t goal, uint64_t *pblk)
{
	struct placement pl = inode_placement(fs);
	uint32_t got;
	int rc = alloc_placed(fs, goal, 1, &pl, pblk, &got);
	return rc == -ENOSPC ? alloc_placed(fs, goal, 1, &anywhere, pblk, &got) : rc;
}

int cfs_alloc_data(struct cfs_fs *fs, uint64_t goal, uint64_t lblk, uint32_t want,
		   uint64_t *pblk, uint32_t *got)
{
	uint32_t align = CFS_DATA_ALIGN_BYTES / fs->bs;
	struct placement pl = {.goal = goal, .align = align};
	if (align <= 1 || want < align)
		pl.align = 1;
	else
		pl.phase = (uint32_t)(lblk % align);
	return alloc_placed(fs, goal, want, &pl, pblk, got);
}

int cfs_alloc_run(struct cfs_fs *fs, uint32_t want, uint64_t *pblk)
{
	if (!cfs_free_above(fs, CFS_META_RESERVE + (uint64_t)want))
		return -ENOSPC;
	for (uint32_t ag = 0; ag < fs->sb.nags; ag++) {
		if (fs->ags[ag].nfree < want)
			continue;
		struct cfs_buf *b;
		int rc = cfs_group_ensure(fs, ag);
		if (rc || (rc = read_agh(fs, ag, &b)))
			return rc;
		struct cfs_dagh *g = (void *)b->data;
		uint8_t *bm = b->data + CFS_AGH_BITMAP_OFF;
		uint32_t len = 0;
		for (uint32_t bit = 0;
		     (bit = find_run(fs, bm, g->start, g->nblocks, bit, want, &anywhere, &len)) !=
		     UINT32_MAX;
		     bit += len)
			if (len == want) {
				*pblk = take_run(fs, ag, b, bit, len);
				return 0;
			}
	}
	return -ENOSPC;
}

int cfs_alloc_meta(struct cfs_fs *fs, uint64_t goal, uint64_t *pblk)
{
	uint32_t got;
	return alloc_from(fs, goal, 1, &anywhere, pblk, &got);
}

static int add_pending(struct cfs_fs *fs, uint64_t pblk, uint32_t len)
{
	if (cfs_reserve((void **)&fs->pending_free, &fs->pending_cap, fs->npending + 2,
			sizeof *fs->pending_free))
		return -ENOMEM;
	fs->pending_free[fs->npending++] = pblk;
	fs->pending_free[fs->npending++] = len;
	return 0;
}

/* cfs_free without forgetting the cached blocks: *done, how many were freed. */
static int free_run(struct cfs_fs *fs, uint64_t pblk, uint32_t len, uint32_t *done)
{
	uint64_t first = pblk;
	int rc = 0;
	while (len && !rc) {
		uint32_t ag = cfs_ag_of(fs, pblk);
		struct cfs_ag *a = &fs->ags[ag];
		if (pblk < a->start || pblk >= a->start + a->nblocks || pblk == a->start) {
			cfs_log(fs, "free of block %llu: not a block a group hands out: EIO",
				(unsigned long long)pblk);
			rc = -EIO;
			break;
		}
		uint32_t bit = (uint32_t)(pblk - a->start);
		uint32_t n = a->nblocks - bit < len ? a->nblocks - bit : len;
		struct cfs_buf *b;
		if ((rc = cfs_group_ensure(fs, ag)) || (rc = read_agh(fs, ag, &b)))
			break;
		struct cfs_dagh *g = (void *)b->data;
		uint8_t *bm = b->data + CFS_AGH_BITMAP_OFF;
		uint32_t used = cfs_bits_run(bm, bit, n, true);
		if (used < n) {
			cfs_log(fs, "block %llu (group %u): freed but already free: EIO",
				(unsigned long long)pblk + used, ag);
			rc = -EIO;
			break;
		}
		cfs_bits_set(bm, bit, n, false);
		g->nfree += n;
		a->nfree = g->nfree;
		a->changes++;
		cfs_bdirty(fs, b);
		rc = add_pending(fs, pblk, n);
		pblk += n;
		len -= n;
	}
	*done = (uint32_t)(pblk - first);
	return rc;
}

int cfs_free(struct cfs_fs *fs, uint64_t pblk, uint32_t len)
{
	struct cfs_dextent freed = {.pblk = pblk};
	int rc = free_run(fs, pblk, len, &freed.len);
	cfs_bforget_extents(fs, &freed, 1);
	return rc;
}

int cfs_free_extents(struct cfs_fs *fs, const struct cfs_dextent *e, uint32_t n, uint32_t *freed)
{
	int rc = 0;
	uint32_t i = 0, done = 0;
	while (i < n && !(rc = free_run(fs, e[i].pblk, e[i].len, &done)))
		i++;
	/* a part of e[i] may have been freed before the failure */
	struct cfs_dextent part = {.pblk = i < n ? e[i].pblk : 0, .len = i < n ? done : 0};
	cfs_bforget_extents(fs, e, i);
	cfs_bforget_extents(fs, &part, 1);
	*freed = i;
	return rc;
}
