/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Inode flags (chattr(1), lsattr(1)): immutable and append-only, as Linux's own filesystems
 * keep them.  The kernel enforces them only for filesystems that put them in its inodes,
 * which FUSE does not, so every call that could change a flagged file checks here, whoever
 * asks (the kernel, ODM clients, the filesystem itself).  No-dump and no-atime are kept for
 * the tools that read them (CFS never updates atime on its own anyway).  The flags are
 * stored as Linux's FS_*_FL values in the inode's flags word. */
#include "cfs/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <sys/stat.h>

#define STICKY_FLAGS (FS_IMMUTABLE_FL | FS_APPEND_FL)
#define KNOWN_FLAGS (STICKY_FLAGS | FS_NODUMP_FL | FS_NOATIME_FL | FS_PROJINHERIT_FL)

uint32_t cfs_iflags_unknown(uint32_t flags) { return flags & ~(uint32_t)KNOWN_FLAGS; }

int cfs_iflags_may_change(const struct cfs_inode *ip)
{
	return ip->d.flags & STICKY_FLAGS ? -EPERM : 0;
}

/* fs/attr.c notify_change: an append-only file's times may be set to now, nothing else of it;
 * an immutable file's nothing. */
int cfs_iflags_may_setattr(const struct cfs_inode *ip, unsigned set)
{
	if (ip->d.flags & FS_IMMUTABLE_FL || !(ip->d.flags & FS_APPEND_FL))
		return cfs_iflags_may_change(ip);
	const unsigned touch = CFS_SET_ATIME | CFS_SET_MTIME | CFS_SET_CTIME | CFS_SET_CACHED_TIMES |
				CFS_SET_TIMES_NOW;
	bool chosen_times = (set & (CFS_SET_ATIME | CFS_SET_MTIME)) && !(set & CFS_SET_TIMES_NOW);
	return set & ~touch || chosen_times ? -EPERM : 0;
}

int cfs_iflags_may_write(const struct cfs_inode *ip, uint64_t off)
{
	if (ip->d.flags & FS_IMMUTABLE_FL)
		return -EPERM;
	/* Append-only: nothing already written may change. */
	return ip->d.flags & FS_APPEND_FL && off < ip->d.size ? -EPERM : 0;
}

int cfs_iflags_may_add_entry(const struct cfs_inode *dir)
{
	return dir->d.flags & FS_IMMUTABLE_FL ? -EPERM : 0;
}

int cfs_iflags_may_remove_entry(const struct cfs_inode *dir, const struct cfs_inode *victim)
{
	return (dir->d.flags | victim->d.flags) & STICKY_FLAGS ? -EPERM : 0;
}

/* The open(2) rules of fs/namei.c may_open. */
int cfs_iflags_may_open(const struct cfs_inode *ip, int flags)
{
	bool writes = (flags & O_ACCMODE) != O_RDONLY || (flags & O_TRUNC);
	if (!writes)
		return 0;
	if (ip->d.flags & FS_IMMUTABLE_FL)
		return -EPERM;
	if ((ip->d.flags & FS_APPEND_FL) && (!(flags & O_APPEND) || (flags & O_TRUNC)))
		return -EPERM;
	return 0;
}

int cfs_get_fsattr(struct cfs_fs *fs, uint64_t ino, uint32_t *flags, uint32_t *projid)
{
	int rc = cfs_op_begin(fs, false);
	if (rc)
		return rc;
	struct cfs_inode *ip;
	if (!(rc = cfs_iget(fs, ino, &ip))) {
		bool on = cfs_project_on(fs);
		*flags = ip->d.flags & KNOWN_FLAGS & (on ? UINT32_MAX : ~(uint32_t)FS_PROJINHERIT_FL);
		*projid = on ? ip->d.projid : 0;
		cfs_iput_check(fs, ip);
	}
	cfs_op_end(fs);
	return rc;
}

int cfs_get_iflags(struct cfs_fs *fs, uint64_t ino, uint32_t *flags)
{
	uint32_t projid;
	return cfs_get_fsattr(fs, ino, flags, &projid);
}

/* fs/ioctl.c fileattr_set_prepare: the owner changes the flags, and only a caller with
 * CAP_LINUX_IMMUTABLE (root here; the kernel checked the capability before asking) the
 * immutable and append-only ones.  A project id only root changes (ext4 and XFS let the
 * owner, who could then take a tenant's files out of its company's quota). */
static int may_set(struct cfs_fs *fs, const struct cfs_inode *ip, uint32_t flags,
		   uint32_t projid, const struct cfs_cred *cr)
{
	if (cfs_iflags_unknown(flags))
		return -EOPNOTSUPP;
	bool project_change = ((flags ^ ip->d.flags) & FS_PROJINHERIT_FL) || projid != ip->d.projid;
	if (project_change && !cfs_project_on(fs)) {
		cfs_log(fs, "inode %llu: project ids need the feature 'project' (cfs tune -O "
			"project, unmounted): not set", (unsigned long long)ip->ino);
		return -EOPNOTSUPP;
	}
	bool root = !cr || cr->uid == 0;
	bool sticky_changes = (flags ^ ip->d.flags) & STICKY_FLAGS;
	if (projid != ip->d.projid && !root)
		return -EPERM;
	return root || (cr->uid == ip->d.uid && !sticky_changes) ? 0 : -EPERM;
}

/* projid NULL: the inode's stays.  Under the metadata glock PR unless inode_only is false. */
static int set_attrs_as(struct cfs_fs *fs, uint64_t ino, uint32_t flags, const uint32_t *projid,
			const struct cfs_cred *cr, bool inode_only)
{
	int rc = inode_only ? cfs_op_begin_inode(fs) : cfs_op_begin(fs, true);
	if (rc)
		return rc;
	struct cfs_inode *ip;
	if (!(rc = cfs_iget(fs, ino, &ip))) {
		/* With the feature off, what the inode keeps of a project is not shown, and stays. */
		bool on = cfs_project_on(fs);
		uint32_t id = projid && (on || *projid) ? *projid : ip->d.projid;
		if (!on)
			flags |= ip->d.flags & FS_PROJINHERIT_FL;
		if (!S_ISDIR(ip->d.mode)) /* inherited only from directories, as ext4 keeps it */
			flags &= ~(uint32_t)FS_PROJINHERIT_FL;
		rc = may_set(fs, ip, flags, id, cr);
		if (!rc && id != ip->d.projid && cfs_quota_needs_meta_ex(fs))
			rc = -CFS_ENEEDMETA; /* the charge moves to another project */
		if (!rc && (flags != ip->d.flags || id != ip->d.projid)) {
			ip->d.flags = flags;
			ip->d.projid = id;
			cfs_itouch(ip, false, true);
			rc = cfs_iwrite(fs, ip);
		}
		cfs_iput_check(fs, ip);
	}
	cfs_op_end(fs);
	return rc;
}

static int set_attrs(struct cfs_fs *fs, uint64_t ino, uint32_t flags, const uint32_t *projid,
		     const struct cfs_cred *cr)
{
	int rc = set_attrs_as(fs, ino, flags, projid, cr, true); /* this inode alone */
	return rc == -CFS_ENEEDMETA ? set_attrs_as(fs, ino, flags, projid, cr, false) : rc;
}

int cfs_set_iflags(struct cfs_fs *fs, uint64_t ino, uint32_t flags, const struct cfs_cred *cr)
{
	return set_attrs(fs, ino, flags, NULL, cr);
}

int cfs_set_fsattr(struct cfs_fs *fs, uint64_t ino, uint32_t flags, uint32_t projid,
		   const struct cfs_cred *cr)
{
	return set_attrs(fs, ino, flags, &projid, cr);
}
