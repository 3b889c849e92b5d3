/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Direct reads and writes whose LUN I/O the caller submits itself (cfsd's io_uring data
 * threads and /dev/fuse's asynchronous direct I/O, which keep many requests in flight instead
 * of one blocked thread each).
 *
 * Only what needs no change of the block map goes this way: aligned I/O inside the file's
 * size, a write only into written blocks of a file without set-ID bits.  Everything else
 * returns -EAGAIN for the ordinary path (file.c), which allocates, converts and reports the
 * errors.  A thread with LUN I/O of its own in flight must never wait for fs->lock: grow
 * holds fs->lock while it waits for every I/O to let go of vol_lock, and that I/O would be
 * the waiting thread's to finish; so without may_wait the locks are tried, at the begin and
 * at the end (which lets the volume go first, and is tried again later if fs->lock is busy:
 * cfsd's completion thread of /dev/fuse's direct I/O hung there, tests/cluster/
 * test_cfs_grow_direct.sh).
 *
 * On a cluster the glocks are held as the ordinary path holds them for such I/O (cfs_read;
 * write_range's write in place under the shared glock: the metadata and inode glocks PR, the
 * pagecache lock CW) from begin to end, so another node's change of the file waits for the
 * I/O in flight, as for a read or write of the ordinary path.  Taking them may wait for other
 * nodes, so there only a caller that may wait goes this way, and O_SYNC and O_DSYNC writes
 * take the ordinary path. */
#include "cfs/internal.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* fs->lock as the caller may take it: waiting only when it has no LUN I/O in flight. */
static bool lock_fs(struct cfs_fs *fs, bool may_wait)
{
	if (may_wait) {
		pthread_mutex_lock(&fs->lock);
		return true;
	}
	return pthread_mutex_trylock(&fs->lock) == 0;
}

/* The LUN pieces of volume bytes [at, at+len), which land at buf_offset of the caller's
 * buffer. */
static int add_lun_pieces(struct cfs_fs *fs, uint64_t at, uint64_t len, uint64_t buf_offset,
			  struct cfs_direct_io *d)
{
	if (d->nranges == CFS_DIRECT_IO_PIECES)
		return -EAGAIN;
	/* A restripe moving the range now: the ordinary path waits for it. */
	int rc = cvm_volume_enter(fs->vol, at, len, false);
	if (rc)
		return rc == -EBUSY ? -EAGAIN : rc;
	d->range[d->nranges++] = (struct cfs_vol_range){at, len};
	struct cvm_volume_map_iter it;
	if ((rc = cvm_volume_map_begin(&it, fs->vol, at, len)))
		return rc;
	struct cvm_piece pc;
	while (cvm_volume_map_next(&it, &pc)) {
		if (d->n == CFS_DIRECT_IO_PIECES)
			return -EAGAIN;
		d->io[d->n++] = (struct cfs_lun_io){
			.lun = pc.lun,
			.fd = cvm_volume_lun_fd(fs->vol, pc.lun),
			.offset = pc.dev_offset,
			.len = pc.len,
			.buf_offset = buf_offset + pc.buf_offset,
		};
	}
	return 0;
}

static void leave_ranges(struct cfs_fs *fs, struct cfs_direct_io *d)
{
	while (d->nranges) {
		d->nranges--;
		cvm_volume_leave(fs->vol, d->range[d->nranges].at, d->range[d->nranges].len);
	}
}

/* Map [off, off+len) of ip (fs->lock and vol_lock held): written blocks to LUN pieces, a
 * read's holes and unwritten blocks zeroed in buf, a write's to -EAGAIN. */
static int map_range(struct cfs_fs *fs, struct cfs_inode *ip, bool write, uint8_t *buf,
		     uint64_t off, uint64_t len, struct cfs_direct_io *d)
{
	uint64_t bs = fs->bs, pos = off, end = off + len;
	while (pos < end) {
		uint64_t lblk = pos / bs, piece;
		uint32_t i = cfs_ext_find(ip, lblk);
		const struct cfs_dextent *e = i < ip->next ? &ip->ext[i] : NULL;
		if (e && e->lblk <= lblk) {
			uint64_t ext_end = (e->lblk + e->len) * bs;
			piece = (ext_end < end ? ext_end : end) - pos;
			if (!(e->flags & CFS_EXT_UNWRITTEN)) {
				uint64_t at = (e->pblk + (lblk - e->lblk)) * bs + pos % bs;
				int rc = add_lun_pieces(fs, at, piece, pos - off, d);
				if (rc)
					return rc;
				pos += piece;
				continue;
			}
		} else {
			uint64_t next = e ? e->lblk * bs : UINT64_MAX;
			piece = (next < end ? next : end) - pos;
		}
		if (write)
			return -EAGAIN; /* to allocate or convert */
		memset(buf + (pos - off), 0, piece);
		pos += piece;
	}
	return 0;
}

/* Why this I/O must take the ordinary path, or 0 (fs->lock held). */
static int check(struct cfs_fs *fs, struct cfs_inode *ip, bool write, unsigned flags,
		 uint64_t off, uint64_t size)
{
	if (!ip || !ip->nopen || !S_ISREG(ip->d.mode) || fs->meta.mode < 0)
		return -EAGAIN;
	if (!write)
		return 0;
	/* On one node the times are stamped at begin, which a pending stamp must precede; on a
	 * cluster they are left pending (no inode write under the glock PR). */
	if (off + size > ip->d.size || ip->d.mode & (S_ISUID | S_ISGID) ||
	    (ip->times_pending && !fs->cluster))
		return -EAGAIN; /* the size to grow, set-ID bits that may go, times to stamp */
	if ((flags & CFS_W_SYNC) && fs->txn.n)
		return -EAGAIN; /* O_SYNC commits what is pending (file.c's write_finish) */
	return cfs_iflags_may_write(ip, off) ? -EAGAIN : 0;
}

/* On a cluster: the glocks for I/O of ino (see the top; fs->lock held, and may be let go
 * while waiting for other nodes).  *ip is the open inode, its I/O lock held by the caller. */
static int cluster_hold(struct cfs_fs *fs, uint64_t ino, bool write, struct cfs_inode **ip)
{
	if (write && !cfs_shared_write_begin(fs))
		return -EAGAIN; /* a normal mount somewhere: the glock EX, the ordinary path's */
	int rc = cfs_file_hold(fs, ino, CFSLOCK_PR, CFSLOCK_PR, ip);
	if (rc && write)
		cfs_shared_write_end(fs);
	return rc ? -EAGAIN : 0;
}

static void cluster_unhold(struct cfs_fs *fs, struct cfs_inode *ip, bool write)
{
	cfs_file_unhold(fs, ip);
	if (write)
		cfs_shared_write_end(fs);
}

int cfs_direct_io_begin(struct cfs_fs *fs, uint64_t ino, bool write, unsigned flags, void *buf,
			uint64_t size, uint64_t off, bool may_wait, struct cfs_direct_io *d)
{
	memset(d, 0, sizeof *d);
	if ((write && fs->ro) || !size || (off | size | (uintptr_t)buf) % CVM_IO_ALIGN ||
	    off + size < off || off + size > CFS_MAX_FILE_BYTES || cvm_volume_fenced(fs->vol) ||
	    (write && !cfs_lease_fresh(fs))) /* cfs_write waits for it */
		return -EAGAIN;
	if (fs->cluster && (!may_wait || (write && (flags & (CFS_W_SYNC | CFS_W_DSYNC)))))
		return -EAGAIN;
	if (!lock_fs(fs, may_wait))
		return -EAGAIN;
	struct cfs_inode *ip = cfs_icache_find(fs, ino);
	int rc = ip && ip->nopen && !ip->wb ? 0 : -EAGAIN; /* cfs_write puts kept data first */
	if (!rc && pthread_rwlock_tryrdlock(&ip->io))
		rc = -EAGAIN; /* an exclusive write, a truncate */
	bool held = !rc && fs->cluster;
	if (held && (rc = cluster_hold(fs, ino, write, &ip))) {
		pthread_rwlock_unlock(&ip->io);
		held = false;
	}
	if (!rc && (rc = check(fs, ip, write, flags, off, size)))
		pthread_rwlock_unlock(&ip->io);
	if (!rc && pthread_rwlock_tryrdlock(&fs->vol_lock)) {
		pthread_rwlock_unlock(&ip->io);
		rc = -EAGAIN; /* a grow */
	}
	if (rc && held)
		cluster_unhold(fs, ip, write);
	if (!rc) {
		d->fs = fs;
		d->ip = ip;
		d->write = write;
		d->flush = write && (flags & (CFS_W_SYNC | CFS_W_DSYNC));
		d->bytes = write || off + size <= ip->d.size ? size
			   : off >= ip->d.size		      ? 0
							      : ip->d.size - off;
		/* a read's last sector whole: the answer carries d->bytes of it */
		uint64_t len = (d->bytes + CVM_IO_ALIGN - 1) / CVM_IO_ALIGN * CVM_IO_ALIGN;
		rc = map_range(fs, ip, write, buf, off, len, d);
		if (rc) {
			leave_ranges(fs, d);
			pthread_rwlock_unlock(&fs->vol_lock);
			if (held)
				cluster_unhold(fs, ip, write);
			pthread_rwlock_unlock(&ip->io);
			d->n = 0;
		}
	}
	if (!rc && write && !fs->cluster) { /* stamped before the data goes, as file_modified() */
		cfs_itouch(ip, true, true);
		cfs_itimes_later(fs, ip);
	}
	pthread_mutex_unlock(&fs->lock);
	return rc;
}

int cfs_direct_io_may_submit(const struct cfs_direct_io *d)
{
	return d->write ? cvm_volume_may_write(d->fs->vol) : 0;
}

void cfs_direct_io_failed(const struct cfs_direct_io *d, unsigned piece, int err)
{
	const struct cfs_lun_io *p = &d->io[piece];
	cvm_volume_io_failed(d->fs->vol, p->lun, d->write ? "write" : "read", p->offset, p->len, err);
}

int cfs_direct_io_now(const struct cfs_direct_io *d, void *buf, uint64_t *moved)
{
	*moved = 0;
	int rc = cfs_direct_io_may_submit(d);
	if (rc)
		return rc;
	for (unsigned i = 0; i < d->n; i++) {
		const struct cfs_lun_io *piece = &d->io[i];
		char *at = (char *)buf + piece->buf_offset;
		ssize_t n = d->write ? pwrite(piece->fd, at, piece->len, (off_t)piece->offset)
				     : pread(piece->fd, at, piece->len, (off_t)piece->offset);
		int rc = n < 0 ? -errno : (uint64_t)n < piece->len ? -EIO : 0;
		if (rc) /* its log line may change errno */
			cfs_direct_io_failed(d, i, rc);
		if (n < 0)
			return rc;
		*moved += (uint64_t)n;
	}
	for (unsigned i = 0; d->flush && i < d->n; i++)
		if (fdatasync(d->io[i].fd)) {
			int rc = -errno;
			cvm_volume_io_failed(d->fs->vol, d->io[i].lun, "flush", 0, 0, rc);
			return rc;
		}
	return 0;
}

bool cfs_direct_io_end(struct cfs_direct_io *d, int result, uint64_t moved, bool may_wait,
		       int64_t *answer)
{
	struct cfs_fs *fs = d->fs;
	uint64_t given = 0;
	for (unsigned i = 0; i < d->n; i++)
		given += d->io[i].len;
	if (!result && moved != given)
		result = -EIO;
	if (!d->volume_let_go) { /* before fs->lock: a grow holds it while it waits for this */
		for (unsigned i = 0; d->write && i < d->n; i++) /* for the next fsync's flush */
			cvm_volume_written(fs->vol, d->io[i].lun);
		leave_ranges(fs, d);
		pthread_rwlock_unlock(&fs->vol_lock);
		d->volume_let_go = true;
	}
	if (fs->cluster) {
		if (!lock_fs(fs, may_wait))
			return false;
		if (d->write && !result)
			d->ip->times_pending = true; /* stamped at the file's next exclusive use */
		cluster_unhold(fs, d->ip, d->write); /* as cfs_read: nothing to commit */
		pthread_mutex_unlock(&fs->lock);
	}
	pthread_rwlock_unlock(&d->ip->io);
	if (result) {
		cfs_log(fs, "inode %llu: direct %s of %llu bytes (LUN %u, byte %llu on it): %s "
			"(%llu of %llu bytes moved)",
			(unsigned long long)d->ip->ino, d->write ? "write" : "read",
			(unsigned long long)d->bytes, d->n ? d->io[0].lun : 0,
			(unsigned long long)(d->n ? d->io[0].offset : 0), strerror(-result),
			(unsigned long long)moved, (unsigned long long)given);
		*answer = result;
		return true;
	}
	if (d->write) {
		__atomic_add_fetch(&fs->stats.writes, 1, __ATOMIC_RELAXED);
		__atomic_add_fetch(&fs->stats.write_bytes, d->bytes, __ATOMIC_RELAXED);
	} else {
		__atomic_add_fetch(&fs->stats.reads, 1, __ATOMIC_RELAXED);
		__atomic_add_fetch(&fs->stats.read_bytes, d->bytes, __ATOMIC_RELAXED);
	}
	*answer = (int64_t)d->bytes;
	return true;
}
