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
 * The times of a file written this way are stamped at its next exclusive use on this node
 * (a write that needs EX, fsync, the last close): an inode block is never written under PR. */
#include "cfs/internal.h"

#include <errno.h>
#include <string.h>

#define RETRY_NS 5000000000ull /* after a refusal (a normal mount somewhere): ask again this late */

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
	int rc = cfslock_request_sync(fs->pagecache, CFSLOCK_PR, 0);
	if (rc)
		cfs_set_error("lock pagecache: %s", strerror(-rc));
	return cfs_lock_errno(rc);
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

void cfs_itimes_catch_up(struct cfs_inode *ip)
{
	if (!ip->times_pending)
		return;
	cfs_itouch(ip, true, true);
	ip->times_dirty = true;
	ip->times_pending = false;
}
