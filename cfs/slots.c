/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Node slots added to a mounted filesystem (GFS2's gfs2_jadd): more nodes than mkfs planned
 * for.  mkfs's journals lie in a row before the first group, so an added slot's journal is
 * journal_blocks blocks in a row taken from a group, named by the superblock's
 * slot_journal[] with the slot's new orphan directory.  One transaction per slot holds it
 * all (the group's bitmap, the empty journal's descriptor, the orphan directory, both
 * superblocks): a crash leaves the slot whole or not there.
 *
 * On a cluster this runs under the metadata glock EX.  The other nodes read the superblock
 * again when they next take the glock (cfs_growth_take_in), so they know the slot before a
 * node mounts with it. */
#include "cfs/internal.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

/* The new slot's journal: a row of blocks whose first holds an empty descriptor. */
static int new_journal(struct cfs_fs *fs, uint32_t slot, uint64_t *at)
{
	int rc = cfs_alloc_run(fs, fs->sb.journal_blocks, at);
	if (rc)
		return rc;
	struct cfs_buf *b;
	if ((rc = cfs_bnew(fs, *at, CFS_B_JDESC, slot, &b)))
		return rc;
	cfs_journal_anchor_init(b->data, 1, 0);
	return 0;
}

int cfs_system_dir_new(struct cfs_fs *fs, uint32_t perm, uint64_t *ino)
{
	struct cfs_inode *ip = NULL;
	cfs_making_system_inode = true; /* no quota counts it */
	int rc = cfs_ialloc(fs, 0, S_IFDIR | perm, 0, 0, &ip);
	if (!rc) {
		ip->d.nlink = 2;
		ip->d.parent = ip->ino;
		rc = cfs_dir_init(fs, ip);
		if (!rc)
			rc = cfs_iwrite(fs, ip);
		*ino = ip->ino;
	}
	cfs_making_system_inode = false;
	int put = ip ? cfs_iput_check(fs, ip) : 0;
	return rc ? rc : put;
}

static int add_one(struct cfs_fs *fs)
{
	struct cfs_dsuper sb = fs->sb;
	uint32_t slot = sb.nslots;
	int rc = cfs_journal_commit(fs); /* the slot's transaction holds nothing else */
	if (!rc)
		rc = new_journal(fs, slot, &sb.slot_journal[slot]);
	if (!rc && (rc = cfs_system_dir_new(fs, 0700, &sb.orphan_dir[slot])))
		cfs_free(fs, sb.slot_journal[slot], sb.journal_blocks);
	if (!rc) {
		sb.nslots++;
		sb.generation++;
		sb.mtime = (uint64_t)time(NULL);
		rc = cfs_super_journal(fs, &sb);
	}
	if (!rc)
		rc = cfs_journal_commit(fs);
	if (!rc) /* a node that mounts next reads the superblock before it takes any lock */
		rc = cfs_journal_empty(fs);
	if (!rc) {
		fs->sb = sb;
		cfs_log(fs, "added node slot %u: journal at block %llu, orphan directory inode %llu",
			slot, (unsigned long long)sb.slot_journal[slot],
			(unsigned long long)sb.orphan_dir[slot]);
	}
	return rc;
}

int cfs_add_slots(struct cfs_fs *fs, uint32_t count, uint32_t *nslots)
{
	if (count == 0 || count > CFS_MAX_SLOTS - fs->sb.nslots) {
		cfs_set_error("the filesystem has %u node slots: give 1 to %u more (at most %u)",
			      fs->sb.nslots, CFS_MAX_SLOTS - fs->sb.nslots, CFS_MAX_SLOTS);
		return -EINVAL;
	}
	int rc = cfs_op_begin(fs, true);
	if (rc)
		return rc;
	uint32_t added = 0;
	while (added < count && !(rc = add_one(fs)))
		added++;
	*nslots = fs->sb.nslots;
	if (rc == -ENOSPC)
		cfs_set_error("no room for %u more journal%s of %u blocks in a row%s: grow the "
			      "filesystem or free space", count - added, count - added == 1 ? "" : "s",
			      fs->sb.journal_blocks, added ? " (added the others)" : "");
	else if (rc)
		cfs_set_error("adding a node slot failed: %s%s", strerror(-rc),
			      added ? " (the slots added before it stay)" : "");
	cfs_op_end(fs);
	return rc;
}
