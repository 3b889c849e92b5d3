/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* File data: read, write, fallocate, truncate, fsync.
 *
 * Data never goes through the journal: it is written to the volume directly (the LUNs are
 * open O_DIRECT), before the metadata that exposes it is committed.  New blocks start
 * unwritten (they read as zeros) and become written only after their data is on the volume,
 * so a crash never shows another file's old data.  Lock order: an inode's io lock, then
 * fs->lock.  I/O inside written extents that is 512-byte aligned runs with the io lock shared,
 * in parallel with other such I/O to the same file; anything that allocates, converts or frees
 * blocks, or must read-modify-write a partial sector, holds it exclusive. */
#include "cfs/internal.h"

#include <errno.h>
#include <linux/falloc.h>
#include <stdlib.h>
#include <string.h>

#define SECTOR CVM_IO_ALIGN

/* One contiguous piece of a file range. */
struct piece {
	uint64_t off;  /* file offset */
	uint64_t len;
	uint64_t pblk_byte; /* volume byte offset of `off`, 0 for a hole */
	bool unwritten;
};

struct plan {
	struct piece *v;
	size_t n, cap;
	bool all_written; /* no holes, nothing unwritten */
};

static int plan_add(struct plan *p, struct piece pc)
{
	if (cfs_reserve((void **)&p->v, &p->cap, p->n + 1, sizeof *p->v))
		return -ENOMEM;
	p->v[p->n++] = pc;
	return 0;
}

/* Map [off, off+len) through the extent map (fs->lock held). */
static int plan_range(struct cfs_fs *fs, struct cfs_inode *ip, uint64_t off, uint64_t len,
		      struct plan *p)
{
	uint64_t bs = fs->bs, pos = off, end = off + len;
	p->n = 0;
	p->all_written = true;
	while (pos < end) {
		uint64_t lblk = pos / bs;
		uint32_t i = cfs_ext_find(ip, lblk);
		struct piece pc = {.off = pos};
		if (i < ip->next && ip->ext[i].lblk <= lblk) {
			const struct cfs_dextent *e = &ip->ext[i];
			uint64_t ext_end = (e->lblk + e->len) * bs;
			pc.len = (ext_end < end ? ext_end : end) - pos;
			pc.pblk_byte = (e->pblk + (lblk - e->lblk)) * bs + pos % bs;
			pc.unwritten = e->flags & CFS_EXT_UNWRITTEN;
			p->all_written &= !pc.unwritten;
		} else {
			uint64_t next = i < ip->next ? ip->ext[i].lblk * bs : UINT64_MAX;
			pc.len = (next < end ? next : end) - pos;
			p->all_written = false;
		}
		int rc = plan_add(p, pc);
		if (rc)
			return rc;
		pos += pc.len;
	}
	return 0;
}

/* I/O of at least this size goes through libaio, so its pieces on different LUNs move at
 * once instead of one after another. */
#define AIO_MIN_BYTES (128u << 10)

static struct cvm_aio *aio_get(struct cfs_fs *fs)
{
	struct cvm_aio *a = NULL;
	pthread_mutex_lock(&fs->aio_lock);
	if (fs->aio_vol != fs->vol) { /* grown: no I/O in flight, the old contexts go */
		while (fs->aio_nfree)
			cvm_aio_destroy(fs->aio_free[--fs->aio_nfree]);
		fs->aio_vol = fs->vol;
	}
	if (fs->aio_nfree)
		a = fs->aio_free[--fs->aio_nfree];
	pthread_mutex_unlock(&fs->aio_lock);
	if (!a && cvm_aio_create(fs->vol, 4, &a))
		a = NULL;
	return a;
}

static void aio_put(struct cfs_fs *fs, struct cvm_aio *a)
{
	pthread_mutex_lock(&fs->aio_lock);
	if (fs->aio_nfree < CFS_AIO_POOL)
		fs->aio_free[fs->aio_nfree++] = a;
	else
		cvm_aio_destroy(a);
	pthread_mutex_unlock(&fs->aio_lock);
}

static void aio_done(void *arg, int64_t result) { *(int64_t *)arg = result; }

/* Volume I/O with an aligned buffer (fs->vol_lock held shared). */
static int vol_rw(struct cfs_fs *fs, enum cvm_op op, void *buf, uint64_t len, uint64_t at)
{
	struct cvm_aio *a = len >= AIO_MIN_BYTES ? aio_get(fs) : NULL;
	if (!a)
		return op == CVM_READ ? cvm_volume_read(fs->vol, buf, len, at)
				      : cvm_volume_write(fs->vol, buf, len, at);
	int64_t result = -EIO;
	int rc = cvm_aio_submit(a, op, buf, len, at, aio_done, &result);
	while (!rc && (rc = cvm_aio_poll(a, 1, NULL)) == 0)
		;
	aio_put(fs, a);
	if (rc < 0)
		return rc;
	return result < 0 ? (int)result : 0;
}

static int bounce(void **buf, uint64_t len)
{
	return posix_memalign(buf, 4096, len ? len : SECTOR) ? -ENOMEM : 0;
}

/* Read volume bytes [at, at+len) into dst, whatever their alignment. */
static int vol_read(struct cfs_fs *fs, uint64_t at, void *dst, uint64_t len)
{
	if ((at | len | (uintptr_t)dst) % SECTOR == 0) /* cfsd's read buffers are aligned */
		return vol_rw(fs, CVM_READ, dst, len, at);
	uint64_t a0 = at & ~(uint64_t)(SECTOR - 1), a1 = (at + len + SECTOR - 1) & ~(uint64_t)(SECTOR - 1);
	void *b;
	int rc = bounce(&b, a1 - a0);
	if (!rc)
		rc = vol_rw(fs, CVM_READ, b, a1 - a0, a0);
	if (!rc)
		memcpy(dst, (uint8_t *)b + (at - a0), len);
	free(b);
	return rc;
}

/* Write src to volume bytes [at, at+len): partial sectors are read, patched and written
 * (the caller holds the io lock exclusive for those). */
static int vol_write(struct cfs_fs *fs, uint64_t at, const void *src, uint64_t len)
{
	if ((at | len | (uintptr_t)src) % SECTOR == 0) /* cfsd's WRITE data is page-aligned */
		return vol_rw(fs, CVM_WRITE, (void *)src, len, at);
	uint64_t a0 = at & ~(uint64_t)(SECTOR - 1), a1 = (at + len + SECTOR - 1) & ~(uint64_t)(SECTOR - 1);
	void *b;
	int rc = bounce(&b, a1 - a0);
	if (rc)
		return rc;
	if (a0 != at)
		rc = cvm_volume_read(fs->vol, b, SECTOR, a0);
	if (!rc && a1 != at + len && (a1 - SECTOR != a0 || a0 == at))
		rc = cvm_volume_read(fs->vol, (uint8_t *)b + (a1 - a0 - SECTOR), SECTOR, a1 - SECTOR);
	if (!rc) {
		memcpy((uint8_t *)b + (at - a0), src, len);
		rc = vol_rw(fs, CVM_WRITE, b, a1 - a0, a0);
	}
	free(b);
	return rc;
}

/* Write into unwritten blocks: whole blocks, zeros around the data. */
static int write_unwritten(struct cfs_fs *fs, const struct piece *pc, const uint8_t *src)
{
	uint64_t bs = fs->bs;
	uint64_t head = pc->off % bs, total = (head + pc->len + bs - 1) / bs * bs;
	if (total == pc->len && (uintptr_t)src % SECTOR == 0)
		return vol_rw(fs, CVM_WRITE, (void *)src, total, pc->pblk_byte);
	void *b;
	int rc = bounce(&b, total);
	if (rc)
		return rc;
	memset(b, 0, total);
	memcpy((uint8_t *)b + head, src, pc->len);
	rc = vol_rw(fs, CVM_WRITE, b, total, pc->pblk_byte - head);
	free(b);
	return rc;
}

int cfs_file_hold(struct cfs_fs *fs, uint64_t ino, int mode, int imode, struct cfs_inode **ip)
{
	int rc = cfs_meta_hold(fs, mode, imode);
	if (rc)
		return rc;
	struct cfs_inode *got; /* *ip stays the caller's (its I/O lock is held) on failure */
	rc = cfs_iget(fs, ino, &got);
	if (!rc && !got->nopen)
		rc = -EBADF;
	if (!rc)
		rc = cfs_iglock_hold(fs, got->ino); /* for the I/O without fs->lock */
	if (rc)
		cfs_glock_unhold(fs, &fs->meta);
	else
		*ip = got;
	return rc;
}

/* Both glocks in mode. */
static int open_inode_locked(struct cfs_fs *fs, uint64_t ino, int mode, struct cfs_inode **ip)
{
	return cfs_file_hold(fs, ino, mode, mode, ip);
}

void cfs_file_unhold(struct cfs_fs *fs, struct cfs_inode *ip)
{
	cfs_iglock_unhold(fs, ip->ino);
	cfs_glock_unhold(fs, &fs->meta);
}

/* Which in-memory inode to take the I/O lock of, before fs->lock (the lock order): an open
 * file stays in memory.  Whether it is still current is open_inode_locked's to say. */
static struct cfs_inode *open_inode(struct cfs_fs *fs, uint64_t ino, int *err)
{
	pthread_mutex_lock(&fs->lock);
	struct cfs_inode *ip = cfs_icache_find(fs, ino);
	if (ip && !ip->nopen)
		ip = NULL;
	pthread_mutex_unlock(&fs->lock);
	*err = ip ? 0 : -EBADF;
	return ip;
}

int cfs_open(struct cfs_fs *fs, uint64_t ino, int flags)
{
	int rc = cfs_op_begin(fs, false);
	if (rc)
		return rc;
	struct cfs_inode *ip;
	if (!(rc = cfs_iget(fs, ino, &ip))) {
		if (!(rc = cfs_iflags_may_open(ip, flags)))
			ip->nopen++;
		else
			cfs_iput_check(fs, ip);
	}
	cfs_op_end(fs);
	return rc;
}

bool cfs_keep_cache(struct cfs_fs *fs, uint64_t ino)
{
	pthread_mutex_lock(&fs->lock);
	struct cfs_inode *ip = cfs_icache_find(fs, ino);
	/* One node: nobody else changes the file.  A cluster: nobody did if its glock stayed. */
	bool keep = !fs->cluster || (ip && ip->kcache_epoch == ip->lock_gone);
	if (ip) {
		ip->kcache_epoch = ip->lock_gone;
		ip->kernel_pages = true;
	}
	pthread_mutex_unlock(&fs->lock);
	return keep;
}

bool cfs_kernel_may_cache(struct cfs_fs *fs, uint64_t ino)
{
	pthread_mutex_lock(&fs->lock);
	struct cfs_inode *ip = cfs_icache_find(fs, ino);
	bool pages = ip && ip->kernel_pages;
	pthread_mutex_unlock(&fs->lock);
	return pages;
}

void cfs_set_reopen(struct cfs_fs *fs, cfs_reopen_fn fn, void *arg)
{
	pthread_mutex_lock(&fs->lock);
	fs->reopen = fn;
	fs->reopen_arg = arg;
	pthread_mutex_unlock(&fs->lock);
}

void cfs_set_kernel_caches(struct cfs_fs *fs, const struct cfs_kernel_caches *k)
{
	pthread_mutex_lock(&fs->lock);
	fs->kernel = k ? *k : (struct cfs_kernel_caches){0};
	pthread_mutex_unlock(&fs->lock);
}

/* Hold the metadata glock in mode and the inode's in imode, and read the inode again if
 * another node had it meanwhile; on failure nothing is held. */
static int relock_as(struct cfs_fs *fs, struct cfs_inode *ip, int mode, int imode)
{
	ip->pins++; /* fetching the glock may drop the caches */
	int rc = cfs_meta_hold(fs, mode, imode);
	if (!rc && (rc = cfs_irefresh(fs, ip)))
		cfs_glock_unhold(fs, &fs->meta);
	ip->pins--;
	return rc;
}

/* Both glocks in mode. */
static int relock(struct cfs_fs *fs, struct cfs_inode *ip, int mode)
{
	return relock_as(fs, ip, mode, mode);
}

/* Held so that the unlinked inode may be freed: the metadata glock PR, its glock EX and what
 * its free takes (cfs_ifree_reserve), or else the metadata glock EX. */
static int lock_to_free(struct cfs_fs *fs, struct cfs_inode *ip)
{
	for (unsigned tries = 0; fs->cluster && tries <= CFS_GROUP_FETCHES; tries++) {
		int rc = relock_as(fs, ip, CFSLOCK_PR, CFSLOCK_EX);
		if (rc || ip->d.nlink || !(rc = cfs_ifree_reserve(fs, ip)))
			return rc;
		cfs_glock_unhold(fs, &fs->meta);
		cfs_group_unreserve(fs);
		if (rc != -EAGAIN)
			break;
	}
	return relock(fs, ip, CFSLOCK_EX);
}

/* The inode as it is now, held: PR to look, and so that it may be freed if it is unlinked. */
static int lock_current(struct cfs_fs *fs, struct cfs_inode *ip)
{
	ip->pins++; /* the unhold between the two may let the glock go and drop the caches */
	int rc = relock(fs, ip, CFSLOCK_PR);
	if (!rc && ip->d.nlink == 0 && !fs->ro) {
		cfs_glock_unhold(fs, &fs->meta); /* never ask for EX while holding PR */
		rc = lock_to_free(fs, ip);
	}
	ip->pins--;
	return rc;
}

/* Stamp the times of writes made under the shared glock: under EX, the inode read again. */
static int stamp_pending_times(struct cfs_fs *fs, struct cfs_inode *ip)
{
	ip->pins++; /* the unhold may let the glock go and drop the caches */
	int rc = fs->ro ? -EROFS : relock_as(fs, ip, CFSLOCK_PR, CFSLOCK_EX); /* this inode alone */
	if (!rc && ip->d.nlink)
		cfs_itimes_catch_up(fs, ip);
	if (!rc)
		cfs_glock_unhold(fs, &fs->meta);
	ip->times_pending = false;
	ip->pins--;
	return rc == -ESTALE || rc == -EROFS ? 0 : rc;
}

/* The last reference to an inode is gone (fs->lock held): it leaves memory, and is freed if
 * nothing names it.  On a cluster that needs the current inode, so the glock: PR to look, EX
 * to free.  Without the glock (no quorum) it stays as it is: the unmount or the next mount of
 * this slot finishes it. */
static int put_last(struct cfs_fs *fs, struct cfs_inode *ip)
{
	if (!fs->cluster || ip->ino == fs->sb.root_ino)
		return cfs_iput_check(fs, ip);
	int rc = lock_current(fs, ip);
	if (rc && rc != -ESTALE) { /* ESTALE: another node freed it; it just leaves memory */
		cfs_log(fs, "inode %llu: last reference dropped without the metadata lock (%s)",
			(unsigned long long)ip->ino, strerror(-rc));
		return rc;
	}
	bool held = !rc;
	rc = cfs_iput_check(fs, ip);
	if (held)
		cfs_glock_unhold(fs, &fs->meta);
	return rc;
}

/* The last open here of a file another node may have unlinked meanwhile (we held its open
 * lock): if nobody names it and nobody else has it open, it is freed now.  The kernel may
 * keep its entry for long (it did not see the unlink), so this cannot wait for the forget. */
static int closed_last(struct cfs_fs *fs, struct cfs_inode *ip)
{
	int rc = lock_current(fs, ip);
	if (rc)
		return rc == -ESTALE ? 0 : rc;
	if (ip->d.nlink == 0 && !fs->ro)
		rc = cfs_iopen_unlinked(fs, ip);
	cfs_glock_unhold(fs, &fs->meta);
	return rc;
}

int cfs_put(struct cfs_fs *fs, uint64_t ino, uint32_t opens, uint64_t lookups)
{
	/* No wait before the counts drop: a release must drop its count whatever the lock
	 * manager says. */
	pthread_mutex_lock(&fs->lock);
	struct cfs_inode *ip = cfs_icache_find(fs, ino);
	int rc = 0, times_rc = 0;
	if (ip) {
		ip->nopen = ip->nopen > opens ? ip->nopen - opens : 0;
		ip->nlookup = ip->nlookup > lookups ? ip->nlookup - lookups : 0;
		bool open_locked = ip->iopen_mode >= 0;
		if (opens && !ip->nopen && ip->times_pending)
			times_rc = stamp_pending_times(fs, ip);
		if (opens && !ip->nopen)
			cfs_iopen_closed(fs, ip);
		cfs_op_may_yield = true; /* the free of a big file */
		if (!ip->nopen && !ip->nlookup) {
			rc = put_last(fs, ip);
			pthread_cond_broadcast(&fs->put_wake);
		}
		else if (opens && !ip->nopen && open_locked)
			rc = closed_last(fs, ip);
		cfs_op_may_yield = false;
	}
	cfs_op_boundary(fs);
	return rc ? rc : times_rc;
}

int cfs_release(struct cfs_fs *fs, uint64_t ino)
{
	return cfs_put(fs, ino, 1, 0);
}

int64_t cfs_read(struct cfs_fs *fs, uint64_t ino, void *buf, uint64_t size, uint64_t off)
{
	int rc;
	struct cfs_inode *ip = open_inode(fs, ino, &rc);
	if (!ip)
		return rc;
	struct plan p = {0};
	pthread_rwlock_rdlock(&ip->io);
	pthread_mutex_lock(&fs->lock);
	rc = open_inode_locked(fs, ino, CFSLOCK_PR, &ip);
	bool held = !rc;
	uint64_t len = 0;
	if (!rc) {
		uint64_t fsize = ip->d.size;
		len = off >= fsize ? 0 : fsize - off < size ? fsize - off : size;
		rc = plan_range(fs, ip, off, len, &p);
	}
	/* Data kept behind (writebehind.c) is read with fs->lock held, which keeps a commit
	 * from writing it out between the volume's read and the copy over it. */
	bool kept = !rc && ip->wb;
	if (!kept) {
		pthread_mutex_unlock(&fs->lock);
		pthread_rwlock_rdlock(&fs->vol_lock);
	}
	for (size_t i = 0; i < p.n && !rc; i++) {
		uint8_t *dst = (uint8_t *)buf + (p.v[i].off - off);
		if (!p.v[i].pblk_byte || p.v[i].unwritten)
			memset(dst, 0, p.v[i].len);
		else
			rc = vol_read(fs, p.v[i].pblk_byte, dst, p.v[i].len);
	}
	if (kept) {
		if (!rc)
			cfs_wb_overlay(fs, ip, off, buf, len);
		pthread_mutex_unlock(&fs->lock);
	} else {
		pthread_rwlock_unlock(&fs->vol_lock);
	}
	/* The hold kept the glock under the mapping.  Only another node can take it: a local
	 * mount needs no second trip through fs->lock per read. */
	if (held && fs->cluster) {
		pthread_mutex_lock(&fs->lock);
		cfs_file_unhold(fs, ip);
		pthread_mutex_unlock(&fs->lock);
	}
	pthread_rwlock_unlock(&ip->io);
	free(p.v);
	if (rc)
		return rc;
	__atomic_add_fetch(&fs->stats.reads, 1, __ATOMIC_RELAXED);
	__atomic_add_fetch(&fs->stats.read_bytes, len, __ATOMIC_RELAXED);
	return (int64_t)len;
}

/* After the data is on the volume: convert, grow the size, stamp the times.  Says in
 * *commit whether the write may return only once the transaction holding this is durable. */
static int write_finish(struct cfs_fs *fs, struct cfs_inode *ip, const struct plan *p,
			uint64_t end, unsigned flags, bool changed_map, bool *commit)
{
	int rc = 0;
	uint64_t bs = fs->bs;
	for (size_t i = 0; p && i < p->n && !rc; i++)
		if (p->v[i].unwritten) {
			uint64_t first = p->v[i].off / bs;
			uint64_t last = (p->v[i].off + p->v[i].len + bs - 1) / bs;
			rc = cfs_ext_mark_written(ip, first, last - first);
		}
	bool grew = end > ip->d.size;
	if (grew)
		ip->d.size = end;
	cfs_itouch(ip, true, true);
	/* An overwrite changes only the times: they go with the next commit (a second at most),
	 * not one per write, also for O_SYNC, as Linux's filesystems do with lazytime. */
	if (!rc && (grew || changed_map))
		rc = cfs_iwrite(fs, ip);
	else
		cfs_itimes_later(fs, ip);
	/* O_DIRECT: data is on the LUNs already; what maps it must be too.  O_SYNC: and whatever
	 * else it changed (set-ID bits it took). */
	bool durable_map = flags & (CFS_W_SYNC | CFS_W_DSYNC | CFS_W_DIRECT);
	bool more = (flags & CFS_W_SYNC) && fs->txn.n;
	*commit = !rc && ((durable_map && (grew || changed_map)) || more);
	return rc;
}

/* Commit the journal if commit, and make every completed data write durable. */
static int sync_as(struct cfs_fs *fs, bool commit)
{
	pthread_mutex_lock(&fs->lock);
	uint64_t next = fs->jseq;
	int rc = commit ? cfs_journal_sync(fs) : 0;
	/* The flush of a commit closed since the call carried the data written before it. */
	bool flushed = fs->jdurable >= next;
	pthread_mutex_unlock(&fs->lock);
	pthread_rwlock_rdlock(&fs->vol_lock);
	if (!rc && !flushed)
		rc = cvm_volume_flush(fs->vol);
	pthread_rwlock_unlock(&fs->vol_lock);
	return rc;
}

/* The data of a write through: to the LUNs, each piece where the plan maps it. */
static int write_through(struct cfs_fs *fs, const struct plan *p, uint64_t off, const void *buf)
{
	int rc = 0;
	pthread_rwlock_rdlock(&fs->vol_lock);
	for (size_t i = 0; i < p->n && !rc; i++) {
		const uint8_t *src = (const uint8_t *)buf + (p->v[i].off - off);
		rc = p->v[i].unwritten ? write_unwritten(fs, &p->v[i], src)
				       : vol_write(fs, p->v[i].pblk_byte, src, p->v[i].len);
	}
	pthread_rwlock_unlock(&fs->vol_lock);
	return rc;
}

/* A write at off, or if append_at, at the end of the file as it is under the inode's glock EX
 * and its I/O lock exclusive (said in *append_at). */
static int64_t write_range(struct cfs_fs *fs, uint64_t ino, const void *buf, uint64_t size,
			   uint64_t off, unsigned flags, const struct cfs_cred *cr,
			   uint64_t *append_at)
{
	if (off + size < off || off + size > CFS_MAX_FILE_BYTES)
		return -EFBIG;
	if (fs->ro)
		return -EROFS;
	int rc;
	struct cfs_inode *ip = open_inode(fs, ino, &rc);
	if (!ip)
		return rc;
	if (size == 0)
		return 0;
	bool aligned = off % SECTOR == 0 && size % SECTOR == 0;
	bool behind = cfs_wb_wanted(fs, flags, size); /* kept under the inode's glock EX */
	bool exclusive = append_at != NULL; /* two appends here must not both see one end */
	bool shared_glock = false, held = false, commit = false;
	/* A direct write into written blocks may go under the glocks PR (shared_write.c); other
	 * writes under the metadata glock PR and their inode's EX, allocating in a group they
	 * reserve; the rest (no group to be had) under both EX. */
	bool try_shared = aligned && !append_at && !behind, try_inode_only = fs->cluster;
	unsigned fetches = 0; /* groups fetched for a reservation, each time to look again */
	struct plan p = {0};
	mode_t drop = 0;
	int caps = 0;
	for (;;) { /* I/O lock shared if nothing needs allocating or patching, else exclusive */
		if (exclusive)
			pthread_rwlock_wrlock(&ip->io);
		else
			pthread_rwlock_rdlock(&ip->io);
		pthread_mutex_lock(&fs->lock);
		shared_glock = try_shared && cfs_shared_write_begin(fs);
		int imode = shared_glock ? CFSLOCK_PR : CFSLOCK_EX;
		rc = cfs_file_hold(fs, ino, try_inode_only ? CFSLOCK_PR : CFSLOCK_EX, imode, &ip);
		held = !rc;
		if (!rc && append_at) {
			off = *append_at = ip->d.size;
			rc = off + size > CFS_MAX_FILE_BYTES ? -EFBIG : 0;
		}
		if (!rc && !(flags & CFS_W_CACHED))
			rc = cfs_iflags_may_write(ip, off);
		if (!rc && behind && !cfs_wb_may_keep(fs, ip, off, size))
			behind = false;
		/* A write through lands after what was kept, not under it: that is written out
		 * first, under the inode's glock EX (kept data means this node has it). */
		if (!rc && !behind && !shared_glock)
			rc = cfs_wb_flush(fs, ip);
		if (!rc)
			rc = plan_range(fs, ip, off, size, &p);
		drop = rc ? 0 : cfs_setid_drop_on_change(ip, cr);
		caps = rc ? 0 : cfs_setid_caps_go(fs, ip, cr);
		rc = caps < 0 ? caps : rc;
		bool in_place = !rc && aligned && p.all_written;
		bool keeps_inode = in_place && off + size <= ip->d.size && !drop && !caps;
		if (shared_glock && (ip->wb || !keeps_inode)) {
			cfs_shared_write_end(fs);
			try_shared = false; /* again, under the inode's glock EX */
		} else if (!shared_glock && try_inode_only && !rc && !p.all_written && exclusive) {
			int got = cfs_ext_reserve(fs, ip, off, size);
			if (got != -EAGAIN && got != -ENOSPC) {
				rc = got;
				break; /* reserved (or failed) */
			}
			if (got == -ENOSPC || ++fetches > CFS_GROUP_FETCHES)
				try_inode_only = false; /* again, under the metadata glock EX */
		} else if (rc || exclusive || in_place) {
			break;
		} else {
			exclusive = true;
		}
		if (held)
			cfs_file_unhold(fs, ip);
		cfs_group_unreserve(fs);
		pthread_mutex_unlock(&fs->lock);
		pthread_rwlock_unlock(&ip->io);
	}
	if (!rc && !shared_glock)
		cfs_itimes_catch_up(fs, ip);
	if (!rc && (flags & CFS_W_CACHED))
		ip->cached_data = true;
	if (!rc && (drop || caps)) { /* before the data, as the kernel's file_remove_privs */
		ip->d.mode &= ~drop;
		rc = caps ? cfs_setid_drop_caps(fs, ip) : 0;
		cfs_itouch(ip, false, true);
		int w = cfs_iwrite(fs, ip);
		rc = rc ? rc : w;
	}
	bool changed_map = false;
	if (!rc && !p.all_written) {
		uint64_t first = off / fs->bs, last = (off + size + fs->bs - 1) / fs->bs;
		rc = cfs_ext_fill(fs, ip, first, last - first);
		cfs_ext_join(ip); /* under this write's reservation, which write-outs lack */
		changed_map = true;
		if (!rc)
			rc = plan_range(fs, ip, off, size, &p);
		/* The new unwritten extents (a fill that ran out of space gave its own back, maybe
		 * after a commit on the way): what is allocated must be in the map that goes with
		 * the allocation. */
		int w = cfs_iwrite(fs, ip);
		if (w)
			cfs_log(fs, "inode %llu: %s", (unsigned long long)ip->ino, strerror(-w));
		rc = rc ? rc : w;
	}
	if (behind) {
		if (!rc)
			rc = cfs_wb_add(fs, ip, off, buf, size);
	} else {
		pthread_mutex_unlock(&fs->lock); /* the hold keeps the glock under the mapping */
		rc = rc ? rc : write_through(fs, &p, off, buf);
		pthread_mutex_lock(&fs->lock);
	}
	if (!rc && shared_glock)
		ip->times_pending = true; /* no inode write under PR */
	else if (!rc) /* kept blocks become written when their data is (writebehind.c) */
		rc = write_finish(fs, ip, behind ? NULL : &p, off + size, flags, changed_map,
				  &commit);
	if (!rc && behind && fs->wb_bytes > fs->wb_limit)
		rc = cfs_wb_flush(fs, NULL);
	if (shared_glock)
		cfs_shared_write_end(fs);
	if (held) {
		cfs_iglock_unhold_write(fs, ip->ino, !rc && (flags & CFS_W_MORE),
					cr ? cr->tid : 0);
		cfs_op_end(fs);
	} else {
		cfs_op_boundary(fs);
	}
	pthread_rwlock_unlock(&ip->io);
	free(p.v);
	/* As fsync does: the log is written outside fs->lock, with whatever other writers and
	 * fsyncs have to commit meanwhile, while other operations go on.  The commit's flush
	 * carries the data written above too, so an O_DSYNC append flushes once, not twice: the
	 * log may reach the disk before the data, as it may after a write without O_DSYNC, but
	 * the write is acknowledged only once the flush after both has returned. */
	if (!rc && (commit || (flags & (CFS_W_SYNC | CFS_W_DSYNC))))
		rc = sync_as(fs, commit);
	if (rc)
		return rc;
	__atomic_add_fetch(&fs->stats.writes, 1, __ATOMIC_RELAXED);
	__atomic_add_fetch(&fs->stats.write_bytes, size, __ATOMIC_RELAXED);
	return (int64_t)size;
}

int64_t cfs_write(struct cfs_fs *fs, uint64_t ino, const void *buf, uint64_t size,
		  uint64_t off, unsigned flags, const struct cfs_cred *cr)
{
	int64_t rc = write_range(fs, ino, buf, size, off, flags, cr, NULL);
	if (cfs_alloc_retry(fs, (int)(rc < 0 ? rc : 0)))
		rc = write_range(fs, ino, buf, size, off, flags, cr, NULL);
	return rc;
}

int64_t cfs_append(struct cfs_fs *fs, uint64_t ino, const void *buf, uint64_t size,
		   unsigned flags, const struct cfs_cred *cr, uint64_t *at)
{
	*at = 0;
	int64_t rc = write_range(fs, ino, buf, size, 0, flags, cr, at);
	if (cfs_alloc_retry(fs, (int)(rc < 0 ? rc : 0)))
		rc = write_range(fs, ino, buf, size, 0, flags, cr, at);
	return rc;
}

/* lseek's SEEK_DATA (hole false) and SEEK_HOLE from off < size: data is written blocks;
 * unwritten extents read as zeros and count as holes, as on ext4 and XFS. */
static int64_t seek_data_or_hole(const struct cfs_fs *fs, const struct cfs_inode *ip,
				 uint64_t off, bool hole)
{
	uint64_t bs = fs->bs, at = off;
	for (uint32_t i = cfs_ext_find(ip, off / bs); i < ip->next; i++) {
		const struct cfs_dextent *e = &ip->ext[i];
		uint64_t start = e->lblk * bs, end = (e->lblk + e->len) * bs;
		bool data = !(e->flags & CFS_EXT_UNWRITTEN);
		if (hole && (!data || start > at))
			break;
		if (hole)
			at = end;
		else if (data)
			return start > off ? (start < ip->d.size ? (int64_t)start : -ENXIO) : (int64_t)off;
	}
	if (!hole)
		return -ENXIO;
	return (int64_t)(at < ip->d.size ? at : ip->d.size);
}

int64_t cfs_seek_data(struct cfs_fs *fs, uint64_t ino, uint64_t off, bool hole)
{
	int rc;
	struct cfs_inode *ip = open_inode(fs, ino, &rc);
	if (!ip)
		return rc;
	pthread_rwlock_rdlock(&ip->io);
	pthread_mutex_lock(&fs->lock);
	rc = open_inode_locked(fs, ino, CFSLOCK_PR, &ip);
	if (!rc && ip->wb) /* kept data lies in blocks still unwritten, which count as holes */
		rc = cfs_wb_flush(fs, ip);
	int64_t at = rc ? rc : off >= ip->d.size ? -ENXIO : seek_data_or_hole(fs, ip, off, hole);
	if (!rc)
		cfs_file_unhold(fs, ip);
	pthread_mutex_unlock(&fs->lock);
	pthread_rwlock_unlock(&ip->io);
	return at;
}

/* Zero bytes [from, to) of the file that lie in written blocks (fs->lock and io held). */
static int zero_range(struct cfs_fs *fs, struct cfs_inode *ip, uint64_t from, uint64_t to)
{
	struct plan p = {0};
	int rc = from < to ? plan_range(fs, ip, from, to - from, &p) : 0;
	for (size_t i = 0; i < p.n && !rc; i++) {
		if (!p.v[i].pblk_byte || p.v[i].unwritten)
			continue;
		void *z = calloc(1, p.v[i].len);
		rc = z ? vol_write(fs, p.v[i].pblk_byte, z, p.v[i].len) : -ENOMEM;
		free(z);
	}
	free(p.v);
	return rc;
}

int cfs_truncate_locked(struct cfs_fs *fs, struct cfs_inode *ip, uint64_t size)
{
	uint64_t bs = fs->bs;
	int rc = 0;
	cfs_wb_truncate(fs, ip, size);
	if (size < ip->d.size) {
		/* What lies past the end of the last block must read as zeros if the file
		 * grows again. */
		uint64_t keep = (size + bs - 1) / bs;
		rc = zero_range(fs, ip, size, keep * bs < ip->d.size ? keep * bs : ip->d.size);
		if (!rc)
			rc = cfs_ext_punch(fs, ip, keep, UINT64_MAX - keep);
	}
	if (!rc) {
		ip->d.size = size;
		cfs_itouch(ip, true, true);
		rc = cfs_iwrite(fs, ip);
	}
	return rc;
}

/* Bytes [off, end) read as zeros after: whole blocks are freed, the edges zeroed. */
static int punch_hole(struct cfs_fs *fs, struct cfs_inode *ip, uint64_t off, uint64_t end)
{
	uint64_t bs = fs->bs, first = (off + bs - 1) / bs, last = end / bs;
	if (off >= end)
		return 0;
	if (first > last)
		return zero_range(fs, ip, off, end);
	int rc = zero_range(fs, ip, off, first * bs);
	if (!rc)
		rc = zero_range(fs, ip, last * bs, end);
	if (!rc && last > first)
		rc = cfs_ext_punch(fs, ip, first, last - first);
	return rc;
}

static int allocate_or_punch(struct cfs_fs *fs, struct cfs_inode *ip, int mode, uint64_t off,
			     uint64_t len)
{
	uint64_t bs = fs->bs;
	/* Past the end of the file there is nothing to zero: it reads as zeros already. */
	uint64_t end = off + len < ip->d.size ? off + len : ip->d.size;
	if (mode & FALLOC_FL_PUNCH_HOLE)
		return punch_hole(fs, ip, off, end);
	/* ZERO_RANGE: freed, then allocated again unwritten (reads as zeros). */
	int rc = mode & FALLOC_FL_ZERO_RANGE ? punch_hole(fs, ip, off, end) : 0;
	uint64_t first = off / bs, last = (off + len + bs - 1) / bs;
	if (!rc)
		rc = cfs_ext_fill(fs, ip, first, last - first);
	if (!rc && !(mode & FALLOC_FL_KEEP_SIZE) && off + len > ip->d.size)
		ip->d.size = off + len;
	return rc;
}

/* The groups a fallocate changes, under the metadata glock PR: the one it allocates in first
 * (cfs_alloc_reserve takes the operation's first group; a punch in the middle of an extent
 * makes the map one extent longer, which may need an extent block), then those a punch or
 * zeroing frees in. */
static int fallocate_reserve(struct cfs_fs *fs, struct cfs_inode *ip, int mode, uint64_t off,
			     uint64_t len)
{
	bool frees = mode & (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE);
	int rc = cfs_ext_reserve(fs, ip, off, mode & FALLOC_FL_PUNCH_HOLE ? 0 : len);
	if (!rc && frees)
		rc = cfs_ext_reserve_frees(fs, ip, off / fs->bs, (off + len + fs->bs - 1) / fs->bs);
	return rc;
}

/* Preallocation, punching and zeroing go under the metadata glock PR and the groups they
 * reserve, as writes and truncates do; what no set of groups can be had for, under both EX.
 * On failure nothing is held (fs->lock is). */
static int fallocate_locked(struct cfs_fs *fs, uint64_t ino, int mode, uint64_t off,
			    uint64_t len, struct cfs_inode **ip)
{
	bool shared = fs->cluster;
	for (unsigned fetches = 0;; fetches++) {
		int rc = cfs_file_hold(fs, ino, shared ? CFSLOCK_PR : CFSLOCK_EX, CFSLOCK_EX, ip);
		if (rc || !shared)
			return rc;
		if (!(rc = fallocate_reserve(fs, *ip, mode, off, len)))
			return 0;
		cfs_file_unhold(fs, *ip);
		cfs_group_unreserve(fs);
		if (rc != -EAGAIN && rc != -ENOSPC)
			return rc;
		shared = rc == -EAGAIN && fetches < CFS_GROUP_FETCHES; /* else under EX */
	}
}

static int fallocate_once(struct cfs_fs *fs, uint64_t ino, int mode, uint64_t off,
			  uint64_t len, const struct cfs_cred *cr)
{
	if (mode & ~(FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE))
		return -EOPNOTSUPP;
	if ((mode & FALLOC_FL_PUNCH_HOLE) && (mode & FALLOC_FL_ZERO_RANGE))
		return -EINVAL;
	if ((mode & FALLOC_FL_PUNCH_HOLE) && !(mode & FALLOC_FL_KEEP_SIZE))
		return -EINVAL;
	if (len == 0 || off + len < off || off + len > CFS_MAX_FILE_BYTES)
		return len == 0 ? -EINVAL : -EFBIG;
	int rc;
	struct cfs_inode *ip = open_inode(fs, ino, &rc);
	if (!ip)
		return rc;
	if (fs->ro)
		return -EROFS;
	pthread_rwlock_wrlock(&ip->io);
	pthread_mutex_lock(&fs->lock);
	rc = fallocate_locked(fs, ino, mode, off, len, &ip);
	if (rc) {
		pthread_mutex_unlock(&fs->lock);
		pthread_rwlock_unlock(&ip->io);
		return rc;
	}
	/* Append-only files may grow, not lose what they hold. */
	if (mode & (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE))
		rc = cfs_iflags_may_change(ip);
	else
		rc = cfs_iflags_may_write(ip, UINT64_MAX);
	if (!rc) /* a punch would free blocks kept data is to go to */
		rc = cfs_wb_flush(fs, ip);
	int caps = rc ? 0 : cfs_setid_caps_go(fs, ip, cr);
	if (caps)
		rc = caps < 0 ? caps : cfs_setid_drop_caps(fs, ip);
	if (!rc) {
		ip->d.mode &= ~cfs_setid_drop_on_change(ip, cr);
		cfs_op_may_yield = true;
		rc = allocate_or_punch(fs, ip, mode, off, len);
		cfs_op_may_yield = false;
		cfs_itouch(ip, true, true);
		int w = cfs_iwrite(fs, ip);
		rc = rc ? rc : w;
	}
	cfs_iglock_unhold(fs, ip->ino);
	cfs_op_end(fs);
	pthread_rwlock_unlock(&ip->io);
	return rc;
}

int cfs_fallocate(struct cfs_fs *fs, uint64_t ino, int mode, uint64_t off, uint64_t len,
		  const struct cfs_cred *cr)
{
	int rc = fallocate_once(fs, ino, mode, off, len, cr);
	return cfs_alloc_retry(fs, rc) ? fallocate_once(fs, ino, mode, off, len, cr) : rc;
}

int cfs_sync(struct cfs_fs *fs)
{
	return sync_as(fs, true);
}

int cfs_write_error(struct cfs_fs *fs, uint64_t ino)
{
	pthread_mutex_lock(&fs->lock);
	int rc = cfs_wb_take_error(fs, ino);
	pthread_mutex_unlock(&fs->lock);
	return rc;
}

int cfs_fsync(struct cfs_fs *fs, uint64_t ino)
{
	/* One journal per node: committing it covers every inode, once the times of writes
	 * under the shared glock are in it, and the data kept behind goes first. */
	pthread_mutex_lock(&fs->lock);
	struct cfs_inode *ip = cfs_icache_find(fs, ino);
	int rc = ip && ip->times_pending ? stamp_pending_times(fs, ip) : 0;
	pthread_mutex_unlock(&fs->lock);
	rc = rc ? rc : cfs_sync(fs);
	int kept = cfs_write_error(fs, ino);
	return rc ? rc : kept;
}

int cfs_fdatasync(struct cfs_fs *fs, uint64_t ino)
{
	/* Sizes and maps go into the transaction when they change; only times wait outside.
	 * Kept overwrites of written blocks change neither: written out here, they need no
	 * commit (kept data in unwritten blocks is marked written into the transaction). */
	pthread_mutex_lock(&fs->lock);
	if (fs->txn.n == 0 && fs->wb_dirty && !fs->ro)
		(void)cfs_wb_flush(fs, NULL); /* out of memory: still kept, committed below */
	bool times_only = fs->txn.n == 0 && !fs->wb_dirty;
	pthread_mutex_unlock(&fs->lock);
	if (!times_only)
		return cfs_fsync(fs, ino);
	int rc = sync_as(fs, false), kept = cfs_write_error(fs, ino);
	return rc ? rc : kept;
}
