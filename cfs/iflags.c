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
#define KNOWN_FLAGS (STICKY_FLAGS | FS_NODUMP_FL | FS_NOATIME_FL)

uint32_t cfs_iflags_unknown(uint32_t flags) { return flags & ~(uint32_t)KNOWN_FLAGS; }

int cfs_iflags_may_change(const struct cfs_inode *ip)
{
	return ip->d.flags & STICKY_FLAGS ? -EPERM : 0;
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

int cfs_get_iflags(struct cfs_fs *fs, uint64_t ino, uint32_t *flags)
{
	int rc = cfs_op_begin(fs, false);
	if (rc)
		return rc;
	struct cfs_inode *ip;
	if (!(rc = cfs_iget(fs, ino, &ip))) {
		*flags = ip->d.flags & KNOWN_FLAGS;
		cfs_iput_check(fs, ip);
	}
	cfs_op_end(fs);
	return rc;
}

/* fs/ioctl.c fileattr_set_prepare: the owner changes the flags, and only a caller with
 * CAP_LINUX_IMMUTABLE (root here; the kernel checked the capability before asking) the
 * immutable and append-only ones. */
static int may_set(const struct cfs_inode *ip, uint32_t flags, const struct cfs_cred *cr)
{
	if (cfs_iflags_unknown(flags))
		return -EOPNOTSUPP;
	bool root = !cr || cr->uid == 0;
	bool sticky_changes = (flags ^ ip->d.flags) & STICKY_FLAGS;
	return root || (cr->uid == ip->d.uid && !sticky_changes) ? 0 : -EPERM;
}

int cfs_set_iflags(struct cfs_fs *fs, uint64_t ino, uint32_t flags, const struct cfs_cred *cr)
{
	int rc = cfs_op_begin_inode(fs); /* this inode alone */
	if (rc)
		return rc;
	struct cfs_inode *ip;
	if (!(rc = cfs_iget(fs, ino, &ip))) {
		if (!(rc = may_set(ip, flags, cr)) && flags != ip->d.flags) {
			ip->d.flags = flags;
			cfs_itouch(ip, false, true);
			rc = cfs_iwrite(fs, ip);
		}
		cfs_iput_check(fs, ip);
	}
	cfs_op_end(fs);
	return rc;
}
