/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Set-user-ID and set-group-ID bits: which changes take them away, by the rules of Linux's own
 * filesystems (fs/attr.c setattr_should_drop_suidgid and setattr_prepare, chown_common,
 * posix_acl_update_mode), so that nobody keeps the privileges of a program they changed.
 * The kernel applies some of these rules itself before it asks us (buffered writes, truncate,
 * chown, chmod under default_permissions) but not all: a direct write, fallocate and an ACL
 * reach us with the bits still set.  Applying them here again is harmless. */
#include "cfs/internal.h"

#include <errno.h>
#include <sys/stat.h>

unsigned cfs_cred_privileges(const struct cfs_cred *cr, uint32_t gid)
{
	if (cr->privileges)
		return cr->privileges(cr, gid);
	return (cr->uid == 0 ? CFS_CRED_FSETID : 0) | (cr->gid == gid ? CFS_CRED_IN_GROUP : 0);
}

/* Set-group-ID without group execute marks a file for mandatory locking rather than granting
 * anything: it goes only for a caller outside the file's group. */
static mode_t sgid_to_drop(const struct cfs_inode *ip, unsigned priv)
{
	mode_t m = ip->d.mode;
	if (!(m & S_ISGID))
		return 0;
	return (m & S_IXGRP) || !(priv & (CFS_CRED_IN_GROUP | CFS_CRED_FSETID)) ? S_ISGID : 0;
}

mode_t cfs_setid_drop_on_change(const struct cfs_inode *ip, const struct cfs_cred *cr)
{
	if (!cr || !S_ISREG(ip->d.mode) || !(ip->d.mode & (S_ISUID | S_ISGID)))
		return 0;
	unsigned priv = cfs_cred_privileges(cr, ip->d.gid);
	if (priv & CFS_CRED_FSETID)
		return 0;
	return (ip->d.mode & S_ISUID) | sgid_to_drop(ip, priv);
}

mode_t cfs_setid_drop_on_chown(const struct cfs_inode *ip, const struct cfs_cred *cr)
{
	if (S_ISDIR(ip->d.mode) || !(ip->d.mode & (S_ISUID | S_ISGID)))
		return 0;
	unsigned priv = cr ? cfs_cred_privileges(cr, ip->d.gid) : CFS_CRED_FSETID;
	return (ip->d.mode & S_ISUID) | sgid_to_drop(ip, priv);
}

mode_t cfs_setid_chmod(mode_t mode, uint32_t gid, const struct cfs_cred *cr)
{
	if (!cr || !(mode & S_ISGID) ||
	    (cfs_cred_privileges(cr, gid) & (CFS_CRED_IN_GROUP | CFS_CRED_FSETID)))
		return mode;
	return mode & ~(mode_t)S_ISGID;
}

/* File capabilities go with any change of the file's data or owner, whoever makes it, as
 * Linux's cap_inode_killpriv takes them (a change by the filesystem itself keeps them).  The
 * kernel takes them itself before it asks us, but only from a file it has not marked S_NOSEC
 * (looked at once, nothing to take): with FUSE_HANDLE_KILLPRIV_V2 it marks files, so that
 * each write(2) is not preceded by a request for security.capability, and on a cluster
 * another node may give a marked file capabilities that this kernel never sees. */
static const char caps_name[] = "security.capability";

int cfs_setid_caps_go(struct cfs_fs *fs, struct cfs_inode *ip, const struct cfs_cred *cr)
{
	if (!cr || !S_ISREG(ip->d.mode) || (!ip->d.xattr_len && !ip->d.xattr_block))
		return 0;
	int rc = cfs_xattr_get(fs, ip, caps_name, NULL, 0);
	return rc >= 0 ? 1 : rc == -ENODATA ? 0 : rc;
}

int cfs_setid_drop_caps(struct cfs_fs *fs, struct cfs_inode *ip)
{
	int rc = cfs_xattr_remove(fs, ip, caps_name);
	return rc == -ENODATA ? 0 : rc;
}
