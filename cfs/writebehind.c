/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Write-behind (mount option writebehind, cfs(8)).
 *
 * FUSE's write-back cache takes writes without asking the daemon, so no cluster lock could
 * order them against another node's: a cluster mount's buffered writes come to cfsd one by one.
 * A one-node mount has the cache, which sends a file's dirty pages at its close and waits for
 * the answer.  Writes under 128 KiB are kept instead, under the inode's glock EX (the ceph-fuse
 * model: dirty data lives in the daemon under a capability, not in the kernel).  A kept write
 * allocates its blocks and changes size and map as a write through does, except that blocks it
 * allocates stay unwritten (they read as zeros); its data waits in memory, in whole blocks, for
 * the next commit.  Every commit first writes what is kept (in volume order, neighbours joined
 * into one I/O) and marks the blocks it filled written in the transaction it closes: what the
 * journal says is never ahead of the data (ext4's data=ordered), and a crash loses only what no
 * commit took yet.  Commits come from fsync, from the committer within a second, from a let-go
 * of a glock (another node wants the file: glock_sync commits first, GFS2's go_sync), and from
 * a write that finds more than the mount's bound kept.  What reads or changes the blocks
 * another way (direct I/O, SEEK_DATA, fallocate, ODM maps) writes the inode's kept data first;
 * a truncate drops what lies past the new end.
 *
 * A commit may come from any thread, holding no group glock, so its marking may neither free
 * nor add an extent block (a free there was refused, the map on the LUNs left unwritten under
 * data another node then read as zeros): extents it makes mergeable stay apart until the next
 * write that allocates joins them, and a write that would leave part of an unwritten extent
 * for the marking to split (a preallocated one) goes through instead of being kept.
 */
#include "cfs/internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define JOIN_MAX (1u << 20) /* neighbouring pieces joined into one write up to this */

/* Whole blocks of the file, [lblk, lblk + n), with room for cap. */
struct wb_run {
	uint64_t lblk, n, cap;
	uint8_t *data;
};

struct cfs_wb {
	struct wb_run *run; /* by lblk, neither overlapping nor adjoining */
	size_t nrun, cap;
	struct cfs_inode *next; /* fs->wb_dirty's list */
	bool changed; /* a write-out filled unwritten blocks: the inode is written after it */
};

/* A write this large gains little from being kept: it goes to the LUNs as one I/O, its
 * pieces on several LUNs at once (file.c's AIO_MIN_BYTES), where a write-out writes them one
 * after another under fs->lock.  Kept, a 256 MiB log in 1 MiB writes took 6.5x the time of a
 * one-node mount, written through 1.2x (bench/cluster/home.sh). */
#define KEEP_MAX_BYTES (128u << 10)

bool cfs_wb_wanted(const struct cfs_fs *fs, unsigned flags, uint64_t size)
{
	return fs->wb_limit && size < KEEP_MAX_BYTES &&
	       !(flags & (CFS_W_SYNC | CFS_W_DSYNC | CFS_W_DIRECT | CFS_W_THROUGH));
}

static uint8_t *blocks_new(const struct cfs_fs *fs, uint64_t n)
{
	void *p; /* the LUNs are open O_DIRECT */
	return posix_memalign(&p, 4096, n * fs->bs) ? NULL : p;
}

/* The extent holding lblk, NULL if none does. */
static const struct cfs_dextent *extent_at(const struct cfs_inode *ip, uint64_t lblk)
{
	uint32_t i = cfs_ext_find(ip, lblk);
	return i < ip->next && ip->ext[i].lblk <= lblk ? &ip->ext[i] : NULL;
}

/* The block as a read would find it now: a written block read, anything else zeros. */
static int load_block(struct cfs_fs *fs, const struct cfs_inode *ip, uint64_t lblk, uint8_t *dst)
{
	const struct cfs_dextent *e = extent_at(ip, lblk);
	if (!e || (e->flags & CFS_EXT_UNWRITTEN)) {
		memset(dst, 0, fs->bs);
		return 0;
	}
	int rc = cvm_volume_read(fs->vol, dst, fs->bs, (e->pblk + lblk - e->lblk) * fs->bs);
	if (rc)
		cfs_log(fs, "inode %llu: block %llu of the file could not be read to keep a write "
			"to part of it: %s", (unsigned long long)ip->ino, (unsigned long long)lblk,
			strerror(-rc));
	return rc;
}

static bool in_runs(const struct cfs_wb *wb, size_t i, size_t j, uint64_t lblk)
{
	for (; i < j; i++)
		if (lblk >= wb->run[i].lblk && lblk < wb->run[i].lblk + wb->run[i].n)
			return true;
	return false;
}

static struct cfs_wb *wb_of(struct cfs_fs *fs, struct cfs_inode *ip)
{
	if (!ip->wb && (ip->wb = calloc(1, sizeof *ip->wb))) {
		ip->wb->next = fs->wb_dirty;
		fs->wb_dirty = ip;
	}
	return ip->wb;
}

/* Runs [i, j) become `merged` (which is run i itself if it grew in place). */
static int replace_runs(struct cfs_wb *wb, size_t i, size_t j, const struct wb_run *merged)
{
	if (i == j) {
		if (cfs_reserve((void **)&wb->run, &wb->cap, wb->nrun + 1, sizeof *wb->run))
			return -ENOMEM;
		memmove(wb->run + i + 1, wb->run + i, (wb->nrun - i) * sizeof *wb->run);
		wb->nrun++;
	} else {
		for (size_t k = i; k < j; k++)
			if (wb->run[k].data != merged->data)
				free(wb->run[k].data);
		memmove(wb->run + i + 1, wb->run + j, (wb->nrun - j) * sizeof *wb->run);
		wb->nrun -= j - i - 1;
	}
	wb->run[i] = *merged;
	return 0;
}

int cfs_wb_add(struct cfs_fs *fs, struct cfs_inode *ip, uint64_t off, const void *src,
	       uint64_t size)
{
	uint64_t bs = fs->bs, b0 = off / bs, b1 = (off + size + bs - 1) / bs;
	struct cfs_wb *wb = wb_of(fs, ip);
	if (!wb)
		return -ENOMEM;
	size_t i = 0, j; /* the runs [i, j) the write overlaps or adjoins */
	while (i < wb->nrun && wb->run[i].lblk + wb->run[i].n < b0)
		i++;
	for (j = i; j < wb->nrun && wb->run[j].lblk <= b1; j++)
		;
	uint64_t lo = j > i && wb->run[i].lblk < b0 ? wb->run[i].lblk : b0;
	uint64_t hi = j > i && wb->run[j - 1].lblk + wb->run[j - 1].n > b1
			      ? wb->run[j - 1].lblk + wb->run[j - 1].n : b1;
	uint64_t had = 0;
	for (size_t k = i; k < j; k++)
		had += wb->run[k].n;
	/* One run that starts where the merged one does grows in place, or doubles (appends). */
	bool grows = j == i + 1 && wb->run[i].lblk == lo;
	struct wb_run merged = {.lblk = lo, .n = hi - lo, .cap = hi - lo};
	if (grows && wb->run[i].cap >= hi - lo) {
		merged.cap = wb->run[i].cap;
		merged.data = wb->run[i].data;
	} else {
		if (grows && 2 * wb->run[i].n > merged.cap)
			merged.cap = 2 * wb->run[i].n;
		if (!(merged.data = blocks_new(fs, merged.cap)))
			return -ENOMEM;
		for (size_t k = i; k < j; k++)
			memcpy(merged.data + (wb->run[k].lblk - lo) * bs, wb->run[k].data,
			       wb->run[k].n * bs);
	}
	/* The blocks the write fills only in part start as the volume has them. */
	int rc = 0;
	uint64_t edge[2] = {b0, b1 - 1};
	bool partial[2] = {off % bs != 0 || (b0 == b1 - 1 && (off + size) % bs != 0),
			   (off + size) % bs != 0 && b1 - 1 != b0};
	for (int e = 0; e < 2 && !rc; e++)
		if (partial[e] && !in_runs(wb, i, j, edge[e]))
			rc = load_block(fs, ip, edge[e], merged.data + (edge[e] - lo) * bs);
	if (!rc)
		rc = replace_runs(wb, i, j, &merged);
	if (rc) {
		if (merged.data != (j > i ? wb->run[i].data : NULL))
			free(merged.data);
		return rc;
	}
	memcpy(merged.data + (off - lo * bs), src, size);
	fs->wb_bytes += (hi - lo - had) * bs;
	fs->stats.behind_writes++;
	return 0;
}

/* Is [b, end) kept? */
static bool runs_cover(const struct cfs_wb *wb, uint64_t b, uint64_t end)
{
	for (size_t i = 0; b < end && i < wb->nrun && wb->run[i].lblk <= b; i++)
		if (b < wb->run[i].lblk + wb->run[i].n)
			b = wb->run[i].lblk + wb->run[i].n;
	return b >= end;
}

bool cfs_wb_may_keep(const struct cfs_fs *fs, const struct cfs_inode *ip, uint64_t off,
		     uint64_t size)
{
	uint64_t b0 = off / fs->bs, b1 = (off + size + fs->bs - 1) / fs->bs;
	const struct cfs_wb *wb = ip->wb;
	uint32_t i = cfs_ext_find(ip, b0 ? b0 - 1 : 0);
	for (; i < ip->next && ip->ext[i].lblk <= b1; i++) {
		const struct cfs_dextent *e = &ip->ext[i];
		uint64_t s = e->lblk, t = e->lblk + e->len;
		if (!(e->flags & CFS_EXT_UNWRITTEN))
			continue;
		/* What lies outside this write, before it and after it, must be kept already. */
		bool before = s >= b0 || (wb && runs_cover(wb, s, b0 < t ? b0 : t));
		bool after = t <= b1 || (wb && runs_cover(wb, s > b1 ? s : b1, t));
		if (!before || !after)
			return false;
	}
	return true;
}

void cfs_wb_overlay(const struct cfs_fs *fs, const struct cfs_inode *ip, uint64_t off,
		    void *buf, uint64_t len)
{
	if (!ip->wb)
		return;
	uint64_t end = off + len;
	for (size_t k = 0; k < ip->wb->nrun; k++) {
		const struct wb_run *r = &ip->wb->run[k];
		uint64_t rs = r->lblk * fs->bs, re = (r->lblk + r->n) * fs->bs;
		uint64_t a = rs > off ? rs : off, b = re < end ? re : end;
		if (a < b)
			memcpy((uint8_t *)buf + (a - off), r->data + (a - rs), b - a);
	}
}

/* ---- the flush ---- */

/* One run's blocks where one extent maps them. */
struct piece {
	uint64_t at, len; /* volume bytes */
	const uint8_t *src;
	struct cfs_inode *ip;
	uint64_t lblk;
	bool unwritten;
	int rc;
};

struct pieces {
	struct piece *v;
	size_t n, cap;
};

/* The pieces of a run.  A block nothing maps any more is not written (nothing frees a kept
 * block without dropping it first: logged if one ever is). */
static int run_pieces(struct cfs_fs *fs, struct cfs_inode *ip, const struct wb_run *r,
		      struct pieces *ps)
{
	uint64_t bs = fs->bs, end = r->lblk + r->n;
	for (uint64_t b = r->lblk; b < end;) {
		const struct cfs_dextent *e = extent_at(ip, b);
		if (!e) {
			uint32_t i = cfs_ext_find(ip, b); /* the next extent after the gap */
			uint64_t next = i < ip->next && ip->ext[i].lblk < end ? ip->ext[i].lblk : end;
			cfs_log(fs, "inode %llu: blocks %llu-%llu of the file were kept to be written "
				"but are not allocated: dropped", (unsigned long long)ip->ino,
				(unsigned long long)b, (unsigned long long)next - 1);
			b = next;
			continue;
		}
		uint64_t stop = e->lblk + e->len < end ? e->lblk + e->len : end;
		if (cfs_reserve((void **)&ps->v, &ps->cap, ps->n + 1, sizeof *ps->v))
			return -ENOMEM;
		ps->v[ps->n++] = (struct piece){.at = (e->pblk + b - e->lblk) * bs,
						.len = (stop - b) * bs,
						.src = r->data + (b - r->lblk) * bs, .ip = ip, .lblk = b,
						.unwritten = e->flags & CFS_EXT_UNWRITTEN};
		b = stop;
	}
	return 0;
}

static int by_volume_place(const void *a, const void *b)
{
	const struct piece *x = a, *y = b;
	return (x->at > y->at) - (x->at < y->at);
}

/* Pieces [i, j), which follow one another on the volume, in one write. */
static int write_joined(struct cfs_fs *fs, const struct piece *v, size_t i, size_t j)
{
	if (j == i + 1)
		return cvm_volume_write(fs->vol, v[i].src, v[i].len, v[i].at);
	uint64_t len = v[j - 1].at + v[j - 1].len - v[i].at;
	void *b;
	if (posix_memalign(&b, 4096, len))
		return -ENOMEM;
	for (size_t k = i; k < j; k++)
		memcpy((uint8_t *)b + (v[k].at - v[i].at), v[k].src, v[k].len);
	int rc = cvm_volume_write(fs->vol, b, len, v[i].at);
	free(b);
	return rc;
}

static void write_pieces(struct cfs_fs *fs, struct pieces *ps)
{
	if (!ps->n)
		return;
	qsort(ps->v, ps->n, sizeof *ps->v, by_volume_place);
	for (size_t i = 0, j; i < ps->n; i = j) {
		uint64_t len = ps->v[i].len;
		for (j = i + 1; j < ps->n && ps->v[j].at == ps->v[j - 1].at + ps->v[j - 1].len &&
				len + ps->v[j].len <= JOIN_MAX; j++)
			len += ps->v[j].len;
		int rc = fs->ro ? -EROFS : write_joined(fs, ps->v, i, j);
		for (size_t k = i; k < j; k++)
			ps->v[k].rc = rc;
		if (!rc)
			fs->stats.behind_flushed += len;
	}
}

/* What a piece's write did to its inode: its blocks written, or the error kept. */
static int settle_piece(struct cfs_fs *fs, const struct piece *p)
{
	if (p->rc) {
		if (!p->ip->wb_error)
			cfs_log(fs, "inode %llu: write-behind of %llu bytes at file offset %llu "
				"(volume byte %llu) failed: %s; fsync and close report it",
				(unsigned long long)p->ip->ino, (unsigned long long)p->len,
				(unsigned long long)p->lblk * fs->bs, (unsigned long long)p->at,
				strerror(-p->rc));
		p->ip->wb_error = p->rc == -EROFS ? -EIO : p->rc;
		return 0;
	}
	if (!p->unwritten)
		return 0;
	int rc = cfs_ext_mark_kept_written(fs, p->ip, p->lblk, p->len / fs->bs);
	/* Kept writes go through when they could come to this (cfs_wb_may_keep). */
	if (rc == -ENOSPC) {
		cfs_log(fs, "inode %llu: blocks %llu-%llu of the file were written out, but marking "
			"them written needs another extent block, which a write-out may not take: "
			"they read as zeros; fsync and close report EIO", (unsigned long long)p->ip->ino,
			(unsigned long long)p->lblk, (unsigned long long)(p->lblk + p->len / fs->bs - 1));
		p->ip->wb_error = -EIO;
		return 0;
	}
	p->ip->wb->changed |= !rc;
	return rc;
}

static void drop_kept(struct cfs_fs *fs, struct cfs_inode *ip)
{
	struct cfs_wb *wb = ip->wb;
	for (size_t k = 0; k < wb->nrun; k++) {
		fs->wb_bytes -= wb->run[k].n * fs->bs;
		free(wb->run[k].data);
	}
	free(wb->run);
	for (struct cfs_inode **p = &fs->wb_dirty; *p; p = &(*p)->wb->next)
		if (*p == ip) {
			*p = wb->next;
			break;
		}
	free(wb);
	ip->wb = NULL;
}

/* The inode after ip in a flush of only (NULL: of every inode with data kept). */
static struct cfs_inode *next_kept(const struct cfs_inode *ip, const struct cfs_inode *only)
{
	return only || !ip->wb ? NULL : ip->wb->next;
}

int cfs_wb_flush(struct cfs_fs *fs, struct cfs_inode *only)
{
	if (only ? !only->wb : !fs->wb_dirty)
		return 0;
	struct pieces ps = {0};
	int rc = 0;
	for (struct cfs_inode *ip = only ? only : fs->wb_dirty; ip && !rc; ip = next_kept(ip, only))
		for (size_t k = 0; ip->wb && k < ip->wb->nrun && !rc; k++)
			rc = run_pieces(fs, ip, &ip->wb->run[k], &ps);
	if (rc) { /* out of memory before any write: everything stays kept */
		free(ps.v);
		return rc;
	}
	write_pieces(fs, &ps);
	for (size_t k = 0; k < ps.n; k++) {
		int r = settle_piece(fs, &ps.v[k]);
		rc = rc ? rc : r;
	}
	/* Each changed inode written once. */
	for (struct cfs_inode *ip = only ? only : fs->wb_dirty, *next; ip; ip = next) {
		next = next_kept(ip, only);
		bool changed = ip->wb && ip->wb->changed;
		if (ip->wb)
			drop_kept(fs, ip);
		int w = changed ? cfs_iwrite(fs, ip) : 0;
		if (w) { /* the map here says written, the LUNs' does not: nothing may go on */
			char why[96];
			snprintf(why, sizeof why, "inode %llu's map after a write-out: %s",
				 (unsigned long long)ip->ino, strerror(-w));
			cfs_withdraw(fs, why);
		}
		rc = rc ? rc : w;
	}
	free(ps.v);
	return rc;
}

void cfs_wb_truncate(struct cfs_fs *fs, struct cfs_inode *ip, uint64_t size)
{
	struct cfs_wb *wb = ip->wb;
	if (!wb)
		return;
	uint64_t bs = fs->bs, keep = (size + bs - 1) / bs;
	while (wb->nrun && wb->run[wb->nrun - 1].lblk >= keep) {
		struct wb_run *r = &wb->run[--wb->nrun];
		fs->wb_bytes -= r->n * bs;
		free(r->data);
	}
	if (wb->nrun) {
		struct wb_run *r = &wb->run[wb->nrun - 1];
		if (r->lblk + r->n > keep) {
			fs->wb_bytes -= (r->lblk + r->n - keep) * bs;
			r->n = keep - r->lblk;
		}
		if (size % bs && size / bs >= r->lblk && size / bs < r->lblk + r->n)
			memset(r->data + (size - r->lblk * bs), 0, bs - size % bs);
	}
	if (!wb->nrun)
		drop_kept(fs, ip);
}

int cfs_wb_take_error(struct cfs_fs *fs, uint64_t ino)
{
	struct cfs_inode *ip = cfs_icache_find(fs, ino);
	int rc = ip ? ip->wb_error : 0;
	if (ip)
		ip->wb_error = 0;
	return rc;
}
