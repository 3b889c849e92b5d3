/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Extent maps: a sorted array of non-overlapping extents per inode, in memory while the inode
 * is; cfs_iwrite stores it in the inode block and its overflow chain. */
#include "cfs/internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static uint64_t ext_end(const struct cfs_dextent *e) { return e->lblk + e->len; }

uint32_t cfs_ext_find(const struct cfs_inode *ip, uint64_t lblk)
{
	uint32_t lo = 0, hi = ip->next;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (ext_end(&ip->ext[mid]) <= lblk)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

uint64_t cfs_ext_bmap(const struct cfs_inode *ip, uint64_t lblk, bool *unwritten)
{
	uint32_t i = cfs_ext_find(ip, lblk);
	if (i == ip->next || ip->ext[i].lblk > lblk)
		return 0;
	*unwritten = ip->ext[i].flags & CFS_EXT_UNWRITTEN;
	return ip->ext[i].pblk + (lblk - ip->ext[i].lblk);
}

static int make_room(struct cfs_inode *ip, uint32_t at)
{
	if (ip->next == ip->ext_cap) {
		uint32_t cap = ip->ext_cap ? ip->ext_cap * 2 : 16;
		struct cfs_dextent *v = realloc(ip->ext, cap * sizeof *v);
		if (!v)
			return -ENOMEM;
		ip->ext = v;
		ip->ext_cap = cap;
	}
	memmove(&ip->ext[at + 1], &ip->ext[at], (ip->next - at) * sizeof *ip->ext);
	ip->next++;
	return 0;
}

static bool mergeable(const struct cfs_dextent *a, const struct cfs_dextent *b)
{
	return ext_end(a) == b->lblk && a->pblk + a->len == b->pblk && a->flags == b->flags &&
	       (uint64_t)a->len + b->len <= UINT32_MAX;
}

/* Join neighbours that continue each other, over [from, to]. */
static void merge_range(struct cfs_inode *ip, uint32_t from, uint32_t to)
{
	if (from > 0)
		from--;
	for (uint32_t i = from; i + 1 < ip->next && i <= to;) {
		if (mergeable(&ip->ext[i], &ip->ext[i + 1])) {
			ip->ext[i].len += ip->ext[i + 1].len;
			memmove(&ip->ext[i + 1], &ip->ext[i + 2],
				(ip->next - i - 2) * sizeof *ip->ext);
			ip->next--;
			if (to)
				to--;
		} else {
			i++;
		}
	}
}

int cfs_ext_insert(struct cfs_inode *ip, const struct cfs_dextent *e)
{
	uint32_t at = cfs_ext_find(ip, e->lblk);
	if (at < ip->next && ip->ext[at].lblk < ext_end(e))
		return -EEXIST; /* overlaps: a bug in the caller */
	int rc = make_room(ip, at);
	if (rc)
		return rc;
	ip->ext[at] = *e;
	merge_range(ip, at, at + 1);
	return 0;
}

/* Make x an extent boundary. */
static int split_at(struct cfs_inode *ip, uint64_t x)
{
	uint32_t i = cfs_ext_find(ip, x);
	if (i == ip->next || ip->ext[i].lblk >= x)
		return 0;
	int rc = make_room(ip, i + 1);
	if (rc)
		return rc;
	uint32_t head = (uint32_t)(x - ip->ext[i].lblk);
	ip->ext[i + 1] = ip->ext[i];
	ip->ext[i].len = head;
	ip->ext[i + 1].lblk += head;
	ip->ext[i + 1].pblk += head;
	ip->ext[i + 1].len -= head;
	return 0;
}

_Thread_local bool cfs_op_may_yield;

/* A change spread over many groups would outgrow the journal: commit on the way, each time
 * with the inode saying what the groups say (internal.h, cfs_op_may_yield). */
static int commit_if_large(struct cfs_fs *fs, struct cfs_inode *ip)
{
	if (fs->txn.n <= fs->txn.limit / 2)
		return 0;
	int rc = cfs_iwrite(fs, ip);
	if (rc || !cfs_op_may_yield)
		return rc ? rc : cfs_journal_commit(fs);
	ip->pins++;
	rc = cfs_journal_sync(fs);
	ip->pins--;
	return rc;
}

#define PUNCH_BATCH 64u

int cfs_ext_punch(struct cfs_fs *fs, struct cfs_inode *ip, uint64_t lblk, uint64_t count)
{
	uint64_t end = lblk + count < lblk ? UINT64_MAX : lblk + count;
	int rc = split_at(ip, lblk);
	if (!rc && end != UINT64_MAX)
		rc = split_at(ip, end);
	uint32_t first = cfs_ext_find(ip, lblk);
	while (!rc && first < ip->next && ip->ext[first].lblk < end) {
		uint32_t n = 0, freed;
		while (first + n < ip->next && ip->ext[first + n].lblk < end && n < PUNCH_BATCH)
			n++;
		rc = cfs_free_extents(fs, &ip->ext[first], n, &freed);
		uint32_t last = first + freed;
		for (uint32_t i = first; i < last; i++)
			ip->d.nblocks -= ip->ext[i].len;
		memmove(&ip->ext[first], &ip->ext[last], (ip->next - last) * sizeof *ip->ext);
		ip->next -= last - first;
		if (!rc)
			rc = commit_if_large(fs, ip);
		first = cfs_ext_find(ip, lblk);
	}
	return rc;
}

/* Clear the unwritten flag over [lblk, end), its ends made extent boundaries first. */
static int mark(struct cfs_inode *ip, uint64_t lblk, uint64_t end)
{
	int rc = split_at(ip, lblk);
	if (!rc)
		rc = split_at(ip, end);
	for (uint32_t i = cfs_ext_find(ip, lblk); !rc && i < ip->next && ip->ext[i].lblk < end; i++)
		ip->ext[i].flags &= ~CFS_EXT_UNWRITTEN;
	return rc;
}

int cfs_ext_mark_written(struct cfs_inode *ip, uint64_t lblk, uint64_t count)
{
	int rc = mark(ip, lblk, lblk + count);
	if (!rc)
		merge_range(ip, cfs_ext_find(ip, lblk), cfs_ext_find(ip, lblk + count));
	return rc;
}

static bool inside(const struct cfs_inode *ip, uint32_t i, uint64_t lblk)
{
	return i < ip->next && ip->ext[i].lblk < lblk;
}

/* Blocks of the overflow chain a map of n extents needs. */
static uint64_t chain_blocks(const struct cfs_fs *fs, uint64_t n)
{
	uint64_t inl = CFS_INODE_EXTENTS(fs->bs), per = CFS_EXTB_EXTENTS(fs->bs);
	return n > inl ? (n - inl + per - 1) / per : 0;
}

int cfs_ext_mark_kept_written(const struct cfs_fs *fs, struct cfs_inode *ip, uint64_t lblk,
			      uint64_t count)
{
	uint64_t end = lblk + count;
	unsigned splits = inside(ip, cfs_ext_find(ip, lblk), lblk) +
			  inside(ip, cfs_ext_find(ip, end), end);
	if (chain_blocks(fs, ip->next + splits) != chain_blocks(fs, ip->next))
		return -ENOSPC;
	int rc = mark(ip, lblk, end);
	ip->ext_unjoined |= !rc;
	return rc;
}

void cfs_ext_join(struct cfs_inode *ip)
{
	if (!ip->ext_unjoined)
		return;
	uint32_t n = 0;
	for (uint32_t i = 0; i < ip->next; i++)
		if (n && mergeable(&ip->ext[n - 1], &ip->ext[i]))
			ip->ext[n - 1].len += ip->ext[i].len;
		else
			ip->ext[n++] = ip->ext[i];
	ip->next = n;
	ip->ext_unjoined = false;
}

int cfs_ext_chain_groups(struct cfs_fs *fs, const struct cfs_inode *ip, uint32_t *v, unsigned *n)
{
	int rc = 0;
	for (uint64_t blk = ip->d.ext_next; blk && !rc;) {
		struct cfs_buf *b;
		if (!(rc = cfs_bread(fs, blk, CFS_B_EXTENTS, ip->ino, &b)) &&
		    !(rc = cfs_group_set_add(fs, blk, v, n)))
			blk = ((const struct cfs_dextb *)b->data)->next;
	}
	return rc;
}

int cfs_ext_reserve(struct cfs_fs *fs, struct cfs_inode *ip, uint64_t off, uint64_t len)
{
	if (cfs_may_allocate(fs))
		return 0;
	/* Room for the data, and for the extent blocks of a map that many extents longer. */
	uint64_t lblk = off / fs->bs, count = (off + len + fs->bs - 1) / fs->bs - lblk;
	uint64_t per = CFS_EXTB_EXTENTS(fs->bs), inl = CFS_INODE_EXTENTS(fs->bs);
	uint64_t extents = ip->next + count + 2; /* + 2: a fill in the middle splits one */
	uint64_t need = count + (extents > inl ? (extents - inl + per - 1) / per : 0);
	/* Merged extents shorten the map: what it frees must be in the reserved group. */
	uint32_t v[CFS_OP_GROUPS_MAX];
	unsigned n = 0;
	int rc = cfs_ext_chain_groups(fs, ip, v, &n);
	if (rc || n > 1 || need > UINT32_MAX)
		return rc ? rc : -ENOSPC;
	if ((rc = cfs_quota_granted(fs, &ip->d, ip->ino, need, 0)))
		return rc;
	uint32_t i = cfs_ext_find(ip, lblk);
	uint64_t goal = i > 0 ? ip->ext[i - 1].pblk + ip->ext[i - 1].len : ip->ino;
	return cfs_alloc_reserve(fs, goal, (uint32_t)need, n ? (int64_t)v[0] : -1, false);
}

int cfs_ext_reserve_frees(struct cfs_fs *fs, struct cfs_inode *ip, uint64_t lblk, uint64_t end)
{
	if (cfs_may_allocate(fs))
		return 0;
	uint32_t v[CFS_OP_GROUPS_MAX];
	unsigned n = 0;
	int rc = cfs_quota_granted(fs, &ip->d, ip->ino, 0, 0); /* what it frees goes there */
	/* An extent lies in one group (group headers part them), also the piece freed of it. */
	for (uint32_t i = cfs_ext_find(ip, lblk); i < ip->next && ip->ext[i].lblk < end && !rc; i++)
		rc = cfs_group_set_add(fs, ip->ext[i].pblk, v, &n);
	if (!rc)
		rc = cfs_ext_chain_groups(fs, ip, v, &n);
	return rc ? rc : cfs_group_reserve_set(fs, v, n);
}

/* The ranges a fill added, to give back if it cannot finish. */
struct filled {
	struct cfs_dextent *v;
	size_t n, cap;
};

/* Room made for one more range before its blocks are taken. */
static void filled_add(struct filled *f, uint64_t lblk, uint32_t len)
{
	if (f->n && f->v[f->n - 1].lblk + f->v[f->n - 1].len == lblk)
		f->v[f->n - 1].len += len;
	else
		f->v[f->n++] = (struct cfs_dextent){.lblk = lblk, .len = len};
}

/* A refused fill keeps none of what it allocated (each range was a hole before it): a
 * refused fallocate or write leaves the space free, not held past the end of a file. */
static void fill_undo(struct cfs_fs *fs, struct cfs_inode *ip, const struct filled *f)
{
	for (size_t i = f->n; i-- > 0;) {
		int rc = cfs_ext_punch(fs, ip, f->v[i].lblk, f->v[i].len);
		if (rc)
			cfs_log(fs, "inode %llu: blocks %llu-%llu of a refused allocation kept: %s",
				(unsigned long long)ip->ino, (unsigned long long)f->v[i].lblk,
				(unsigned long long)(f->v[i].lblk + f->v[i].len - 1), strerror(-rc));
	}
}

/* At most want blocks of data that the inode's quotas let it take now, with room for the
 * map blocks one more extent may need: -EDQUOT if none. */
static int quota_clamp(struct cfs_fs *fs, struct cfs_inode *ip, uint64_t *want)
{
	uint64_t room, map = chain_blocks(fs, ip->next + 2) - chain_blocks(fs, ip->next);
	int rc = cfs_quota_room(fs, ip, *want + map, &room);
	if (rc || room == UINT64_MAX)
		return rc;
	if (room <= map)
		return -EDQUOT;
	*want = *want < room - map ? *want : room - map;
	return 0;
}

static int fill_holes(struct cfs_fs *fs, struct cfs_inode *ip, uint64_t lblk, uint64_t end,
		      struct filled *f)
{
	for (uint64_t pos = lblk; pos < end;) {
		uint32_t i = cfs_ext_find(ip, pos);
		if (i < ip->next && ip->ext[i].lblk <= pos) {
			pos = ext_end(&ip->ext[i]);
			continue;
		}
		uint64_t hole_end = i < ip->next && ip->ext[i].lblk < end ? ip->ext[i].lblk : end;
		uint64_t goal = i > 0 ? ip->ext[i - 1].pblk + ip->ext[i - 1].len : ip->ino;
		uint64_t want = hole_end - pos;
		uint64_t pblk;
		uint32_t got;
		if (cfs_reserve((void **)&f->v, &f->cap, f->n + 1, sizeof *f->v))
			return -ENOMEM;
		int rc = quota_clamp(fs, ip, &want);
		if (rc)
			return rc;
		rc = cfs_alloc_data(fs, goal, pos, want > (1u << 20) ? 1u << 20 : (uint32_t)want,
					&pblk, &got);
		if (rc)
			return rc;
		struct cfs_dextent e = {pos, pblk, got, CFS_EXT_UNWRITTEN};
		if ((rc = cfs_ext_insert(ip, &e))) {
			cfs_free(fs, pblk, got);
			return rc;
		}
		ip->d.nblocks += got;
		filled_add(f, pos, got);
		pos += got;
		if ((rc = commit_if_large(fs, ip)))
			return rc;
	}
	return 0;
}

int cfs_ext_fill(struct cfs_fs *fs, struct cfs_inode *ip, uint64_t lblk, uint64_t count)
{
	struct filled f = {0};
	int rc = fill_holes(fs, ip, lblk, lblk + count, &f);
	if (rc)
		fill_undo(fs, ip, &f);
	free(f.v);
	return rc;
}
