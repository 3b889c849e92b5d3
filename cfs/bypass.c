/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Kernel bypass: the extent map ODM clients write through, and the unnamed files ODM creates.
 *
 * A client given a map writes straight to the LUNs, so the filesystem never sees those writes:
 * every block of the map must already be allocated *and written* on disk, with that state
 * committed.  Otherwise a hole would have no block, and an unwritten extent would read back
 * as zeros after the client's data landed.  So the map is made whole first by writing zeros
 * (never exposing another file's old blocks), then committed, then handed out. */
#include "cfs/internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define ZERO_CHUNK (1u << 20)

/* The first range of [0, end) (blocks) that is a hole or unwritten, or *count 0. */
static void first_unwritten(const struct cfs_inode *ip, uint64_t end, uint64_t *lblk,
			    uint64_t *count)
{
	uint64_t pos = 0;
	*count = 0;
	for (uint32_t i = 0; i < ip->next && pos < end; i++) {
		const struct cfs_dextent *e = &ip->ext[i];
		if (e->lblk > pos) /* a hole before this extent */
			break;
		if (e->flags & CFS_EXT_UNWRITTEN) {
			*lblk = pos;
			*count = (e->lblk + e->len < end ? e->lblk + e->len : end) - pos;
			return;
		}
		pos = e->lblk + e->len;
	}
	if (pos < end) {
		uint32_t i = cfs_ext_find(ip, pos);
		uint64_t next = i < ip->next ? ip->ext[i].lblk : end;
		*lblk = pos;
		*count = (next < end ? next : end) - pos;
	}
}

static int write_zeros(struct cfs_fs *fs, uint64_t ino, uint64_t off, uint64_t end)
{
	void *zeros;
	if (posix_memalign(&zeros, 4096, ZERO_CHUNK))
		return -ENOMEM;
	memset(zeros, 0, ZERO_CHUNK);
	int rc = 0;
	while (off < end && rc == 0) {
		uint64_t n = end - off < ZERO_CHUNK ? end - off : ZERO_CHUNK;
		/* Kept, the blocks would stay unwritten until the next commit. */
		int64_t w = cfs_write(fs, ino, zeros, n, off, CFS_W_THROUGH, NULL);
		rc = w < 0 ? (int)w : 0;
		off += n;
	}
	free(zeros);
	return rc;
}

static int regular_inode(struct cfs_fs *fs, uint64_t ino, struct cfs_inode **ip)
{
	int rc = cfs_iget(fs, ino, ip);
	if (!rc && !S_ISREG((*ip)->d.mode))
		rc = -EINVAL;
	if (!rc && !(*ip)->nopen)
		rc = -EBADF;
	if (!rc) /* clients write anywhere in what they map */
		rc = cfs_iflags_may_change(*ip);
	return rc;
}

/* Zero every hole and unwritten range below the size, one at a time (the map may change
 * while the lock is dropped for the writes). */
static int make_written(struct cfs_fs *fs, uint64_t ino)
{
	uint64_t last_lblk = UINT64_MAX;
	for (;;) {
		int rc = cfs_op_begin(fs, false);
		if (rc)
			return rc;
		struct cfs_inode *ip;
		uint64_t lblk = 0, count = 0, size = 0;
		rc = regular_inode(fs, ino, &ip);
		if (!rc) {
			size = ip->d.size;
			first_unwritten(ip, (size + fs->bs - 1) / fs->bs, &lblk, &count);
		}
		cfs_op_end(fs);
		if (rc || count == 0)
			return rc;
		if (lblk == last_lblk) { /* the zeros did not make it written: do not spin */
			cfs_log(fs, "inode %llu: block %llu stays unwritten after zeroing",
				(unsigned long long)ino, (unsigned long long)lblk);
			return -EIO;
		}
		last_lblk = lblk;
		uint64_t end = (lblk + count) * fs->bs;
		if ((rc = write_zeros(fs, ino, lblk * fs->bs, end < size ? end : size)))
			return rc;
	}
}

int cfs_bypass_map(struct cfs_fs *fs, uint64_t ino, struct cfs_bypass_map *map)
{
	memset(map, 0, sizeof *map);
	if (fs->ro)
		return -EROFS;
	/* Data kept behind lies in blocks still unwritten, which make_written would zero. */
	int rc = fs->wb_limit ? cfs_fsync(fs, ino) : 0;
	if (!rc)
		rc = make_written(fs, ino);
	if (!rc)
		rc = cfs_fsync(fs, ino); /* the written state must be on disk before clients write */
	if (rc || (rc = cfs_op_begin(fs, false)))
		return rc;
	struct cfs_inode *ip;
	rc = regular_inode(fs, ino, &ip);
	if (!rc) {
		map->size = ip->d.size;
		map->generation = ip->d.generation;
		map->ext = calloc(ip->next ? ip->next : 1, sizeof *map->ext);
		rc = map->ext ? 0 : -ENOMEM;
	}
	uint64_t bs = fs->bs;
	for (uint32_t i = 0; !rc && i < ip->next && ip->ext[i].lblk * bs < map->size; i++) {
		const struct cfs_dextent *e = &ip->ext[i];
		uint64_t off = e->lblk * bs, len = (uint64_t)e->len * bs;
		if (off + len > map->size)
			len = map->size - off;
		if (e->flags & CFS_EXT_UNWRITTEN) { /* changed since make_written: try again */
			rc = -EAGAIN;
			break;
		}
		map->ext[map->n++] = (struct cfs_bypass_extent){off, e->pblk * bs, len};
	}
	cfs_op_end(fs);
	if (rc) {
		free(map->ext);
		map->ext = NULL;
		map->n = 0;
	}
	return rc;
}

int cfs_bypass_resize(struct cfs_fs *fs, uint64_t ino, uint64_t size)
{
	struct stat st, attr = {.st_size = (off_t)size};
	int rc = cfs_getattr(fs, ino, &st);
	if (rc || (uint64_t)st.st_size == size)
		return rc;
	if ((uint64_t)st.st_size > size)
		return cfs_setattr(fs, ino, &attr, CFS_SET_SIZE, NULL, &st);
	/* Growing: allocate in one go (contiguous where possible), zeroed by the next map. */
	return cfs_fallocate(fs, ino, 0, (uint64_t)st.st_size, size - (uint64_t)st.st_size, NULL);
}
