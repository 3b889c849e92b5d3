/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Extended attributes (user, trusted, security, and the POSIX ACLs the kernel keeps as
 * system.posix_acl_*): an entry list in the inode's inline area, then in one xattr block.
 * Entry: name length (1), reserved (1), value length (2), name, value. */
#include "cfs/internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>

#define XATTRB_USED_OFF 32u
#define XATTRB_DATA_OFF 40u

struct area {
	uint8_t *p;
	uint32_t used, cap;
	struct cfs_buf *b; /* NULL: inline */
};

int cfs_xattr_block_verify(const struct cfs_fs *fs, const struct cfs_buf *b)
{
	uint32_t used;
	memcpy(&used, b->data + XATTRB_USED_OFF, 4);
	return used > fs->bs - XATTRB_DATA_OFF ? -EIO : cfs_xattrs_verify(b->data + XATTRB_DATA_OFF, used);
}

static int areas(struct cfs_fs *fs, struct cfs_inode *ip, struct area a[2], int *n)
{
	a[0] = (struct area){ip->xattr, ip->d.xattr_len, CFS_INODE_XATTR_LEN, NULL};
	*n = 1;
	if (!ip->d.xattr_block)
		return 0;
	struct cfs_buf *b;
	int rc = cfs_bread(fs, ip->d.xattr_block, CFS_B_XATTR, ip->ino, &b);
	if (rc)
		return rc;
	uint32_t used;
	memcpy(&used, b->data + XATTRB_USED_OFF, 4);
	if (cfs_xattr_block_verify(fs, b)) {
		cfs_log(fs, "block %llu (inode %llu): damaged xattr block: EIO",
			(unsigned long long)b->blkno, (unsigned long long)ip->ino);
		return -EIO;
	}
	a[1] = (struct area){b->data + XATTRB_DATA_OFF, used, fs->bs - XATTRB_DATA_OFF, b};
	*n = 2;
	return 0;
}

static void store_used(struct cfs_inode *ip, struct area *a)
{
	if (a->b)
		memcpy(a->b->data + XATTRB_USED_OFF, &a->used, 4);
	else
		ip->d.xattr_len = a->used;
}

/* Offset of the entry called name in the area, or -1.  -EIO if the area is damaged. */
static int64_t find(const struct area *a, const char *name, size_t nlen)
{
	for (uint32_t o = 0; o < a->used;) {
		uint8_t l = a->p[o];
		uint16_t vl;
		memcpy(&vl, a->p + o + 2, 2);
		if (l == 0 || o + CFS_XATTR_FIXED + l + vl > a->used)
			return -EIO;
		if (l == nlen && !memcmp(a->p + o + CFS_XATTR_FIXED, name, nlen))
			return o;
		o += CFS_XATTR_FIXED + l + vl;
	}
	return -1;
}

static int locate(struct cfs_fs *fs, struct cfs_inode *ip, const char *name, struct area a[2],
		  int *n, int *which, uint32_t *off)
{
	int rc = areas(fs, ip, a, n);
	if (rc)
		return rc;
	size_t nlen = strlen(name);
	for (int i = 0; i < *n; i++) {
		int64_t o = find(&a[i], name, nlen);
		if (o == -EIO) {
			cfs_log(fs, "inode %llu: damaged xattr %s: EIO", (unsigned long long)ip->ino,
				a[i].b ? "block" : "area");
			return -EIO;
		}
		if (o >= 0) {
			*which = i;
			*off = (uint32_t)o;
			return 0;
		}
	}
	return -ENODATA;
}

int cfs_xattr_get(struct cfs_fs *fs, struct cfs_inode *ip, const char *name, void *value,
		  size_t size)
{
	struct area a[2];
	int n, w;
	uint32_t o;
	int rc = locate(fs, ip, name, a, &n, &w, &o);
	if (rc)
		return rc;
	uint8_t l = a[w].p[o];
	uint16_t vl;
	memcpy(&vl, a[w].p + o + 2, 2);
	if (size == 0)
		return vl;
	if (size < vl)
		return -ERANGE;
	memcpy(value, a[w].p + o + CFS_XATTR_FIXED + l, vl);
	return vl;
}

static void cut(struct cfs_inode *ip, struct area *a, uint32_t o)
{
	uint16_t vl;
	memcpy(&vl, a->p + o + 2, 2);
	uint32_t sz = CFS_XATTR_FIXED + a->p[o] + vl;
	memmove(a->p + o, a->p + o + sz, a->used - o - sz);
	memset(a->p + a->used - sz, 0, sz);
	a->used -= sz;
	store_used(ip, a);
}

int cfs_xattr_remove(struct cfs_fs *fs, struct cfs_inode *ip, const char *name)
{
	struct area a[2];
	int n, w;
	uint32_t o;
	int rc = locate(fs, ip, name, a, &n, &w, &o);
	if (rc)
		return rc;
	cut(ip, &a[w], o);
	if (a[w].b)
		cfs_bdirty(fs, a[w].b);
	return 0;
}

int cfs_xattr_set(struct cfs_fs *fs, struct cfs_inode *ip, const char *name,
		  const void *value, size_t size, int flags)
{
	size_t nlen = strlen(name);
	if (nlen == 0 || nlen > 255)
		return -ERANGE;
	if (size > fs->bs - XATTRB_DATA_OFF - CFS_XATTR_FIXED - nlen)
		return -E2BIG;
	struct area a[2];
	int n, w;
	uint32_t o;
	int rc = locate(fs, ip, name, a, &n, &w, &o);
	if (rc && rc != -ENODATA)
		return rc;
	if (!rc && (flags & XATTR_CREATE))
		return -EEXIST;
	if (rc == -ENODATA && (flags & XATTR_REPLACE))
		return -ENODATA;
	uint32_t sz = CFS_XATTR_FIXED + (uint32_t)nlen + (uint32_t)size;
	/* Room after taking the old value out? */
	uint32_t old = 0;
	if (!rc) {
		uint16_t vl;
		memcpy(&vl, a[w].p + o + 2, 2);
		old = CFS_XATTR_FIXED + a[w].p[o] + vl;
	}
	int dest = -1;
	for (int i = 0; i < n && dest < 0; i++)
		if (a[i].used - (!rc && w == i ? old : 0) + sz <= a[i].cap)
			dest = i;
	if (dest < 0 && n == 1 && !cfs_may_allocate(fs) && cfs_group_reserved() < 0)
		return -CFS_ENEEDMETA;
	if (dest < 0 && n == 1) {
		/* The inline area is full: the entry goes to a new xattr block. */
		uint64_t blk = 0, room;
		uint32_t got;
		struct cfs_buf *b;
		int arc = cfs_quota_room(fs, ip, 1, &room);
		if (!arc)
			arc = cfs_alloc(fs, ip->ino, 1, &blk, &got);
		if (arc || (arc = cfs_bnew(fs, blk, CFS_B_XATTR, ip->ino, &b)))
			return arc;
		ip->d.xattr_block = blk;
		ip->d.nblocks++;
		a[1] = (struct area){b->data + XATTRB_DATA_OFF, 0, fs->bs - XATTRB_DATA_OFF, b};
		n = 2;
		dest = 1;
	}
	if (dest < 0)
		return -ENOSPC;
	if (dest == 0 && !a[0].p) { /* the inode's first inline entry */
		if (!(ip->xattr = calloc(1, CFS_INODE_XATTR_LEN)))
			return -ENOMEM;
		a[0].p = ip->xattr;
	}
	if (!rc) {
		cut(ip, &a[w], o);
		if (a[w].b)
			cfs_bdirty(fs, a[w].b);
	}
	struct area *d = &a[dest];
	uint8_t *p = d->p + d->used;
	p[0] = (uint8_t)nlen;
	p[1] = 0;
	uint16_t vl = (uint16_t)size;
	memcpy(p + 2, &vl, 2);
	memcpy(p + CFS_XATTR_FIXED, name, nlen);
	memcpy(p + CFS_XATTR_FIXED + nlen, value, size);
	d->used += sz;
	store_used(ip, d);
	if (d->b)
		cfs_bdirty(fs, d->b);
	return 0;
}

int cfs_xattr_list(struct cfs_fs *fs, struct cfs_inode *ip, char *list, size_t size)
{
	struct area a[2];
	int n;
	int rc = areas(fs, ip, a, &n);
	if (rc)
		return rc;
	size_t total = 0;
	for (int i = 0; i < n; i++)
		for (uint32_t o = 0; o < a[i].used;) {
			uint8_t l = a[i].p[o];
			uint16_t vl;
			memcpy(&vl, a[i].p + o + 2, 2);
			if (l == 0 || o + CFS_XATTR_FIXED + l + vl > a[i].used)
				return -EIO;
			if (size) {
				if (total + l + 1 > size)
					return -ERANGE;
				memcpy(list + total, a[i].p + o + CFS_XATTR_FIXED, l);
				list[total + l] = '\0';
			}
			total += l + 1u;
			o += CFS_XATTR_FIXED + l + vl;
		}
	return (int)total;
}
