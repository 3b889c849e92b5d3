/* The metadata glock and the operation boundaries.
 *
 * Every operation runs under fs->lock and the cluster lock "meta" of the filesystem's
 * lockspace, held EX while this node caches metadata (GFS2's glock model, with one glock for
 * the whole filesystem in this version).  When another node asks for it, the blocking callback
 * marks it wanted; the next operation boundary commits the journal and lets it go, and the
 * next operation asks for it again.  With the local backend nobody else asks; dropping the
 * block and inode caches and the kernel's on release is for the cluster version. */
#include "cfs/internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static void meta_wanted(void *arg, struct cfslock *lk, int mode)
{
	(void)lk, (void)mode;
	struct cfs_fs *fs = arg;
	fs->meta_wanted = true; /* read at the next boundary, under fs->lock */
	pthread_cond_signal(&fs->commit_wake);
}

int cfs_glock_init(struct cfs_fs *fs)
{
	char space[64];
	cvm_uuid u;
	char us[CVM_UUID_STR];
	memcpy(u.b, fs->sb.fs_uuid, 16);
	cvm_uuid_format(&u, us);
	snprintf(space, sizeof space, "cfs-%.36s", us);
	int rc = cfslock_client_open("local", NULL, &fs->locks);
	if (!rc)
		rc = cfslock_space_open(fs->locks, space, &fs->space);
	if (!rc && !(fs->meta = cfslock_new(fs->space, "meta", NULL, meta_wanted, fs)))
		rc = -ENOMEM;
	if (rc)
		cfs_set_error("lock manager: %s", strerror(-rc));
	return rc;
}

int cfs_glock_acquire(struct cfs_fs *fs)
{
	if (fs->meta_held)
		return 0;
	int rc = cfslock_request_sync(fs->meta, CFSLOCK_EX, 0);
	if (rc) {
		cfs_log(fs, "lock meta: %s", strerror(-rc));
		return rc == -CFSLOCK_ENOQUORUM ? -EIO : rc;
	}
	fs->meta_held = true;
	return 0;
}

void cfs_glock_check(struct cfs_fs *fs)
{
	if (!fs->meta_held || !fs->meta_wanted)
		return;
	if (cfs_journal_commit(fs))
		return; /* keep the lock: what we hold is not on disk */
	fs->meta_wanted = false;
	fs->meta_held = false;
	cfslock_release(fs->meta);
}

int cfs_op_begin(struct cfs_fs *fs, bool change)
{
	pthread_mutex_lock(&fs->lock);
	int rc = change && fs->ro ? -EROFS : cfs_glock_acquire(fs);
	if (rc)
		pthread_mutex_unlock(&fs->lock);
	return rc;
}

void cfs_op_end(struct cfs_fs *fs)
{
	if (fs->txn.n > fs->txn.limit / 2)
		cfs_journal_commit(fs);
	cfs_bcache_trim(fs);
	cfs_glock_check(fs);
	pthread_mutex_unlock(&fs->lock);
}

uint64_t cfs_real_ino(const struct cfs_fs *fs, uint64_t ino)
{
	return ino == CFS_ROOT ? fs->sb.root_ino : ino;
}
