/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Direct writes from several nodes at once (dboptimized cluster mounts), as RAC instances
 * write every datafile: a write that lands wholly in allocated, written blocks of a file and
 * does not grow it changes no metadata, so it needs only the metadata glock PR, which every
 * node can hold at once; no lock message per I/O.  Writes that allocate, convert unwritten
 * extents, grow the file or ask for O_SYNC take the glock EX as before.
 *
 * What such a write would break is a page cache: a node of a normal mount that caches a
 * file's pages keeps them while it holds the glock, and would never see a write made under a
 * glock shared with it.  So the filesystem has one lock "pagecache": a normal cluster mount
 * holds it PR for its lifetime, and a dboptimized node writes under the shared glock only
 * while it holds the lock CW (compatible with CW, not with PR), asked for without waiting.
 * With a normal mount anywhere, every write takes the glock EX; a node mounting normally
 * waits for the shared writes in flight, which stop starting once it asks.
 *
 * ODM clients write straight to the LUNs for as long as they hold a file: a node serving them
 * on a cluster keeps the lock CW from a client's hello to its last goodbye (cfs_shared_write_
 * hold), so ODM across nodes runs only where every node mounts dboptimized; a normal mount
 * then gives up after MOUNT_WAIT_NS with a message naming a node in the way.
 *
 * The times of a file written this way are stamped at its next exclusive use on this node
 * (a write that needs EX, fsync, the last close): an inode block is never written under PR. */
#include "cfs/internal.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#define RETRY_NS 5000000000ull /* after a refusal (a normal mount somewhere): ask again this late */
#define MOUNT_WAIT_NS 30000000000ull /* a normal mount waits this long for shared writers */
#define MOUNT_RETRY_US 100000u

static void pagecache_wanted(void *arg, struct cfslock *lk, int mode)
{
	(void)lk, (void)mode;
	struct cfs_fs *fs = arg;
	__atomic_store_n(&fs->pagecache_wanted, true, __ATOMIC_RELEASE);
}

int cfs_shared_write_init(struct cfs_fs *fs)
{
	if (!fs->cluster)
		return 0;
	fs->pagecache = cfslock_new(fs->space, "pagecache", NULL, pagecache_wanted, fs);
	if (!fs->pagecache)
		return -ENOMEM;
	if (fs->dboptimized)
		return 0;
	/* Asked without queueing, again and again: the holders hear of it each time (shared
	 * writes stop starting), and a queued request would wait for ever behind ODM. */
	uint64_t start = cfs_now_ns();
	int rc;
	while ((rc = cfslock_request_sync(fs->pagecache, CFSLOCK_PR,
					  CFSLOCK_NOQUEUE | CFSLOCK_NOQUEUEBAST)) == -EAGAIN &&
	       cfs_now_ns() - start < MOUNT_WAIT_NS)
		usleep(MOUNT_RETRY_US);
	if (rc == -EAGAIN) {
		cfs_set_error("node %u mounts %s dboptimized and keeps files in use for ODM (or "
			      "shared direct writes going) for %llu s: mount with -o dboptimized, "
			      "or stop the databases there", cfs_lock_holder(fs, "pagecache"),
			      cvm_volume_config(fs->vol)->name, MOUNT_WAIT_NS / 1000000000ull);
		return -EBUSY;
	}
	if (rc)
		cfs_set_error("lock pagecache: %s", strerror(-rc));
	return cfs_lock_errno(rc);
}

int cfs_shared_write_hold(struct cfs_fs *fs)
{
	if (!fs->cluster)
		return 0;
	if (!fs->dboptimized) {
		cfs_set_error("on a cluster, ODM needs every node to mount the filesystem with "
			      "-o dboptimized (its files' pages must not be cached anywhere)");
		return -EOPNOTSUPP;
	}
	pthread_mutex_lock(&fs->lock);
	int rc = 0;
	if (fs->shared_writers == 0) /* not queued: a normal mount holds it for its lifetime */
		rc = cfslock_request_sync(fs->pagecache, CFSLOCK_CW, CFSLOCK_NOQUEUE);
	if (!rc)
		fs->shared_writers++;
	pthread_mutex_unlock(&fs->lock);
	if (rc == -EAGAIN) {
		cfs_set_error("node %u mounts this filesystem without dboptimized (its page cache "
			      "would miss ODM's writes): mount it with -o dboptimized on every node",
			      cfs_lock_holder(fs, "pagecache"));
		return -EBUSY;
	}
	return cfs_lock_errno(rc);
}

void cfs_shared_write_unhold(struct cfs_fs *fs)
{
	if (!fs->cluster)
		return;
	pthread_mutex_lock(&fs->lock);
	cfs_shared_write_end(fs);
	pthread_mutex_unlock(&fs->lock);
}

void cfs_shared_write_free(struct cfs_fs *fs)
{
	cfs_lock_put(&fs->pagecache);
}

bool cfs_shared_write_begin(struct cfs_fs *fs)
{
	if (!fs->cluster || !fs->dboptimized || fs->ro)
		return false;
	if (fs->shared_writers) {
		/* Held: share it, unless a normal mount waits for it. */
		if (__atomic_load_n(&fs->pagecache_wanted, __ATOMIC_ACQUIRE))
			return false;
		fs->shared_writers++;
		return true;
	}
	uint64_t now = cfs_now_ns();
	if (fs->pagecache_refused && now - fs->pagecache_refused < RETRY_NS)
		return false;
	__atomic_store_n(&fs->pagecache_wanted, false, __ATOMIC_RELEASE);
	/* A kept grant is taken again with no message. */
	int rc = cfslock_request_sync(fs->pagecache, CFSLOCK_CW, CFSLOCK_NOQUEUE);
	if (rc) {
		fs->pagecache_refused = now;
		return false;
	}
	fs->pagecache_refused = 0;
	fs->shared_writers = 1;
	return true;
}

void cfs_shared_write_end(struct cfs_fs *fs)
{
	if (--fs->shared_writers == 0)
		cfslock_release(fs->pagecache); /* kept; given up when a normal mount asks */
}

void cfs_itimes_catch_up(struct cfs_fs *fs, struct cfs_inode *ip)
{
	if (!ip->times_pending)
		return;
	cfs_itouch(ip, true, true);
	cfs_itimes_later(fs, ip);
	ip->times_pending = false;
}
