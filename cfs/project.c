/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Project ids, as XFS and ext4 have them for project quotas: one per hosted company.  A
 * directory given an id and the inherit flag (chattr +P -p ID, xfs_io chproj) passes both on
 * to every file and directory made in it, so a whole tree is one project.  A name given in
 * such a directory to an inode of another project (link, rename) is refused with EXDEV, as
 * ext4 and XFS refuse it: mv then copies, and the copy takes the directory's project.
 *
 * The ids are the ro_compat feature 'project': a release that does not know it could make
 * files that do not inherit, so it may only read the filesystem. */
#include "cfs/internal.h"

#include <errno.h>
#include <linux/fs.h>
#include <sys/stat.h>

bool cfs_project_on(const struct cfs_fs *fs)
{
	return fs->sb.features[CFS_RO_COMPAT] & CFS_FEAT_PROJECT;
}

static bool passes_on(const struct cfs_fs *fs, const struct cfs_inode *dir)
{
	return cfs_project_on(fs) && (dir->d.flags & FS_PROJINHERIT_FL);
}

void cfs_project_inherit(const struct cfs_fs *fs, const struct cfs_inode *dir,
			 struct cfs_inode *ip)
{
	if (!passes_on(fs, dir))
		return;
	ip->d.projid = dir->d.projid;
	if (S_ISDIR(ip->d.mode))
		ip->d.flags |= FS_PROJINHERIT_FL;
}

int cfs_project_may_name(const struct cfs_fs *fs, const struct cfs_inode *dir,
			 const struct cfs_inode *ip)
{
	return passes_on(fs, dir) && dir->d.projid != ip->d.projid ? -EXDEV : 0;
}
