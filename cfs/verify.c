/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What a metadata block's fields may hold, one function per structure, for cfsd and
 * fsck.cfs alike: a block that passes its checksum may still have been written wrong by a
 * bug, and what the daemon refuses with EIO fsck must find (and what fsck calls clean the
 * daemon must serve).  Fields are checked against each other and against the superblock. */
#include "cfs/internal.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

static uint32_t bits_set(const uint8_t *bitmap, uint32_t n)
{
	uint32_t count = 0, i = 0;
	for (; i + 8 <= n; i += 8)
		count += (uint32_t)__builtin_popcount(bitmap[i / 8]);
	for (; i < n; i++)
		count += cfs_bit_get(bitmap, i);
	return count;
}

static bool in_volume(const struct cfs_dsuper *sb, uint64_t blk)
{
	return blk >= sb->ag_start && blk < sb->total_blocks;
}

#define NSEC_PER_SEC 1000000000u

bool cfs_ftype_valid(uint32_t mode)
{
	switch (mode & S_IFMT) {
	case S_IFREG: case S_IFDIR: case S_IFLNK: case S_IFCHR: case S_IFBLK: case S_IFIFO:
	case S_IFSOCK:
		return true;
	default:
		return false;
	}
}

static bool mode_valid(uint32_t mode)
{
	return !(mode & ~(uint32_t)(S_IFMT | 07777)) && cfs_ftype_valid(mode);
}

int cfs_inode_verify(const struct cfs_dsuper *sb, const struct cfs_dinode *d, const char **why)
{
	uint32_t inl = CFS_INODE_EXTENTS(sb->block_size), ns = NSEC_PER_SEC;
	if (d->mode == 0 && d->nlink == 0)
		return 0; /* a freed inode's block */
	if (!mode_valid(d->mode))
		*why = "mode is no file type";
	else if (d->size > CFS_MAX_FILE_BYTES)
		*why = "size beyond the largest file";
	else if (d->nblocks > sb->total_blocks)
		*why = "holds more blocks than the filesystem has";
	else if (d->atime_ns >= ns || d->mtime_ns >= ns || d->ctime_ns >= ns || d->btime_ns >= ns)
		*why = "a time's nanoseconds are a second or more";
	else if (d->xattr_len > CFS_INODE_XATTR_LEN || (d->xattr_block && !in_volume(sb, d->xattr_block)))
		*why = "xattr area outside its bounds";
	else if (d->nextents > (1u << 24) || (d->nextents > inl) != (d->ext_next != 0) ||
		 (d->ext_next && !in_volume(sb, d->ext_next)))
		*why = "extent count and overflow chain disagree";
	else if (S_ISDIR(d->mode) && (d->dir_level > 40 || d->dir_split >= (1ull << d->dir_level) ||
				      !in_volume(sb, d->parent)))
		*why = "directory geometry or parent out of range";
	else
		return 0;
	return -EIO;
}

int cfs_inode_mend(const struct cfs_dsuper *sb, uint8_t *block, uint32_t type, uint64_t parent,
		   const char **what)
{
	struct cfs_dinode *d = (void *)block;
	const struct cfs_dextent *ext = (const void *)(block + CFS_INODE_EXT_OFF);
	*what = NULL;
	if (!mode_valid(d->mode) || (type && (d->mode & S_IFMT) != type)) {
		if (!type)
			return -EIO;
		d->mode = type | (d->mode & 07777);
		*what = "its type and permissions";
	}
	if (d->size > CFS_MAX_FILE_BYTES) {
		d->size = 0;
		for (uint32_t i = 0; i < d->nextents && i < CFS_INODE_EXTENTS(sb->block_size); i++)
			d->size = (ext[i].lblk + ext[i].len) * sb->block_size;
		*what = "its size (now the end of its inline extents)";
	}
	if (d->nblocks > sb->total_blocks) {
		d->nblocks = 0;
		*what = "its block count";
	}
	uint32_t *nsec[] = {&d->atime_ns, &d->mtime_ns, &d->ctime_ns, &d->btime_ns};
	for (unsigned i = 0; i < 4; i++)
		if (*nsec[i] >= NSEC_PER_SEC) {
			*nsec[i] = 0;
			*what = "a time's nanoseconds";
		}
	if (d->xattr_len > CFS_INODE_XATTR_LEN) {
		d->xattr_len = 0;
		*what = "its inline xattrs (lost)";
	}
	if (d->xattr_block && !in_volume(sb, d->xattr_block)) {
		d->xattr_block = 0;
		*what = "its xattr block (lost)";
	}
	if (S_ISDIR(d->mode) && parent && !in_volume(sb, d->parent)) {
		d->parent = parent;
		*what = "its parent";
	}
	const char *why;
	return cfs_inode_verify(sb, d, &why);
}

int cfs_extents_verify(const struct cfs_dsuper *sb, const struct cfs_dextent *e, uint32_t n,
		       const char **why)
{
	for (uint32_t i = 0; i < n; i++, e++) {
		if (e->len == 0 || e->flags & ~CFS_EXT_UNWRITTEN)
			*why = "an extent is empty or has unknown flags";
		else if (!in_volume(sb, e->pblk) || e->pblk + e->len > sb->total_blocks)
			*why = "an extent lies outside the filesystem";
		else if (e->lblk + e->len < e->lblk ||
			 e->lblk + e->len > CFS_MAX_FILE_BYTES / sb->block_size + 1)
			*why = "an extent lies beyond the largest file";
		else if (i && e[-1].lblk + e[-1].len > e->lblk)
			*why = "extents overlap or are out of order";
		else
			continue;
		return -EIO;
	}
	return 0;
}

int cfs_xattrs_verify(const uint8_t *p, uint32_t used)
{
	for (uint32_t o = 0; o < used;) {
		uint16_t vl;
		memcpy(&vl, p + o + 2, 2);
		if (o + CFS_XATTR_FIXED > used || p[o] == 0 ||
		    o + CFS_XATTR_FIXED + p[o] + vl > used ||
		    memchr(p + o + CFS_XATTR_FIXED, '\0', p[o]))
			return -EIO;
		o += CFS_XATTR_FIXED + p[o] + vl;
	}
	return 0;
}

int cfs_agh_verify(const struct cfs_dsuper *sb, const uint8_t *block, uint32_t ag, bool bitmap,
		   const char **why)
{
	const struct cfs_dagh *g = (const void *)block;
	uint32_t n = cfs_ag_size(sb, ag);
	if (g->start != cfs_ag_first(sb, ag) || g->nblocks != n)
		*why = "geometry differs from the superblock";
	else if (bitmap && g->nfree != n - bits_set(block + CFS_AGH_BITMAP_OFF, n))
		*why = "free count differs from its bitmap";
	else
		return 0;
	return -EIO;
}
