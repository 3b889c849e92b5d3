/* The metadata glock and the operation boundaries.
 *
 * Every operation runs under fs->lock and the cluster lock "meta" of the filesystem's
 * lockspace (GFS2's glock model, with one glock for the whole filesystem in this version):
 * PR lets a node read and cache metadata, EX lets it change it.  With the local backend the
 * glock is always taken EX and nobody else asks for it.
 *
 * A node keeps the glock after its operations (it caches the grant) until another node asks.
 * The blocking callback only records what the other node wants; the next operation boundary,
 * or the committer thread, acts on it once no data I/O of this node relies on the grant
 * (fs->io_holders):
 *   - EX wanted PR: commit, empty the journal, convert down to PR, keep the caches (still
 *     valid: nobody else can change anything while we hold PR);
 *   - anything else: commit (if EX), empty the journal (its blocks are about to be changed by
 *     others, a replay of it would put old images back), drop the block cache, mark every
 *     in-memory inode stale, tell cfsd which inodes the kernel may cache pages of, unlock.
 * Going from PR to EX is a drop and a new request, not a conversion: two nodes converting
 * PR to EX at once would wait for each other for ever.
 *
 * A grant in use is kept for a short minimum hold time even when another node asks (GFS2's
 * gl_hold_time): without it two nodes both changing the filesystem passed the glock back and
 * forth for every operation, a commit and a handful of messages each.  A node that has not
 * used it for a moment lets go at once. */
#include "cfs/internal.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define HOLD_NS 30000000ull /* a grant in use is kept this long after it came */
#define IDLE_NS 1000000ull  /* unused this long: given up at once when asked */

uint64_t cfs_now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* Keep the grant a little longer?  If so, the committer is told when to look again. */
static bool still_held_for_use(struct cfs_fs *fs)
{
	uint64_t now = cfs_now_ns(), until = fs->meta_granted_ns + HOLD_NS;
	if (!fs->cluster || now >= until || now - fs->last_use_ns >= IDLE_NS)
		return false;
	if (fs->hold_until_ns != until) { /* the committer may be asleep for a second */
		fs->hold_until_ns = until;
		pthread_cond_signal(&fs->commit_wake);
	}
	return true;
}

static void meta_wanted(void *arg, struct cfslock *lk, int mode)
{
	(void)lk;
	struct cfs_fs *fs = arg;
	/* The widest demand wins: a PR wish upgraded by a later EX wish means drop. */
	int prev = __atomic_load_n(&fs->meta_wanted, __ATOMIC_ACQUIRE);
	if (mode > prev)
		__atomic_store_n(&fs->meta_wanted, mode, __ATOMIC_RELEASE);
	pthread_cond_signal(&fs->commit_wake); /* the committer acts on it if nobody else does */
}

static void lost_quorum(struct cfs_fs *fs)
{
	cfs_fence(fs, "this node lost quorum");
}

/* Callbacks of the lock manager run on this thread, whatever the other threads do. */
static void *dispatcher(void *arg)
{
	struct cfs_fs *fs = arg;
	int fd = cfslock_client_fd(fs->locks);
	while (!__atomic_load_n(&fs->stopping, __ATOMIC_ACQUIRE)) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		if (poll(&p, 1, FENCE_CHECK_MS) > 0)
			cfslock_dispatch(fs->locks);
		if (!cfslock_quorate(fs->locks)) /* in case the event went by */
			lost_quorum(fs);
	}
	return NULL;
}

static void lockspace_name(const struct cfs_fs *fs, char *buf, size_t len)
{
	cvm_uuid u;
	char us[CVM_UUID_STR];
	memcpy(u.b, fs->sb.fs_uuid, 16);
	cvm_uuid_format(&u, us);
	snprintf(buf, len, "cfs-%.36s", us);
}

static void membership_changed(void *arg, uint32_t node, bool joined)
{
	(void)node;
	if (!joined)
		cfs_recovery_kick(arg);
}

static void quorum_changed(void *arg, bool quorate)
{
	if (!quorate)
		lost_quorum(arg);
}

int cfs_glock_init(struct cfs_fs *fs, const char *proto)
{
	char space[64];
	lockspace_name(fs, space, sizeof space);
	fs->meta_wanted = -1;
	fs->meta_mode = -1;
	fs->lock_events = (struct cfslock_events){
		.membership = membership_changed, .quorum = quorum_changed, .arg = fs};
	int rc = cfslock_client_open(proto, &fs->lock_events, &fs->locks);
	if (rc) {
		cfs_set_error("lock manager '%s': %s%s", proto, strerror(-rc),
			      strcmp(proto, "local") ? " (is corosync running on this node?)" : "");
		return rc;
	}
	if (!cfslock_quorate(fs->locks)) {
		cfs_set_error("this node has no quorum: a cluster filesystem is mounted only on a "
			      "node of the quorate partition; check corosync-quorumtool -s");
		return -CFSLOCK_ENOQUORUM;
	}
	rc = cfslock_space_open(fs->locks, space, &fs->space);
	if (!rc && !(fs->meta = cfslock_new(fs->space, "meta", NULL, meta_wanted, fs)))
		rc = -ENOMEM;
	if (!rc && fs->cluster && (rc = -pthread_create(&fs->dispatch, NULL, dispatcher, fs)) == 0)
		fs->dispatching = true;
	if (rc)
		cfs_set_error("lock manager: %s", strerror(-rc));
	return rc;
}

void cfs_lock_put(struct cfslock **lk)
{
	if (!*lk)
		return;
	if (cfslock_mode(*lk) >= 0)
		cfslock_unlock_sync(*lk);
	cfslock_free(*lk);
	*lk = NULL;
}

void cfs_glock_shutdown(struct cfs_fs *fs)
{
	__atomic_store_n(&fs->stopping, true, __ATOMIC_RELEASE);
	if (fs->dispatching)
		pthread_join(fs->dispatch, NULL);
	fs->dispatching = false;
	if (fs->meta) {
		if (fs->meta_mode >= 0)
			cfslock_unlock_sync(fs->meta);
		cfslock_free(fs->meta);
		fs->meta = NULL;
	}
	if (fs->space)
		cfslock_space_close(fs->space);
	if (fs->locks)
		cfslock_client_close(fs->locks);
	fs->space = NULL;
	fs->locks = NULL;
}

/* Forget everything read under a grant we are giving up. */
static void drop_caches(struct cfs_fs *fs)
{
	cfs_bcache_drop(fs);
	cfs_icache_invalidate(fs);
	fs->caches_stale = true;
	__atomic_add_fetch(&fs->glock_epoch, 1, __ATOMIC_RELEASE);
}

/* Give the glock up (or convert it down to `to`, PR).  fs->lock held, no data I/O in flight. */
static int glock_let_go(struct cfs_fs *fs, int to)
{
	int rc = 0;
	if (fs->meta_mode == CFSLOCK_EX) {
		if ((rc = cfs_journal_commit(fs)))
			return rc; /* keep the lock: what we changed is not on disk */
		/* Also on the way down to PR: the next node's EX may come before we drop PR. */
		if (!fs->ro) {
			rc = cfs_journal_clear(fs->vol, &fs->sb, fs->slot, fs->jseq);
			if (!rc)
				rc = cvm_volume_flush(fs->vol);
			if (rc) {
				cfs_log(fs, "slot %u: journal could not be emptied (%s): keeping the "
					"metadata lock", fs->slot, strerror(-rc));
				return rc;
			}
		}
	}
	if (to == CFSLOCK_PR && fs->meta_mode == CFSLOCK_EX) {
		rc = cfslock_request_sync(fs->meta, CFSLOCK_PR, 0);
		if (!rc)
			fs->meta_mode = CFSLOCK_PR;
		return rc;
	}
	/* Nobody may free what this node has open once it lets go (see iopen.c). */
	if ((rc = cfs_iopen_before_let_go(fs)))
		return rc;
	drop_caches(fs);
	fs->meta_mode = -1;
	rc = cfslock_unlock_sync(fs->meta);
	if (rc)
		cfs_log(fs, "lock meta: unlock: %s", strerror(-rc));
	return rc;
}

int cfs_glock_acquire(struct cfs_fs *fs, int mode)
{
	if (!fs->cluster)
		mode = CFSLOCK_EX;
	else if (cfs_fenced(fs))
		return -EIO; /* what this node has cached may be another node's to change now */
	if (fs->meta_mode >= mode)
		return 0;
	if (fs->meta_mode >= 0) {
		/* PR held, EX wanted: let go, then ask (see the top of this file). */
		while (fs->io_holders)
			pthread_cond_wait(&fs->io_idle, &fs->lock);
		if (fs->meta_mode >= mode)
			return 0;
		int rc = glock_let_go(fs, -1);
		if (rc)
			return cfs_lock_errno(rc);
	}
	/* Nothing is held now: a wish recorded from here on is about the grant we ask for (it
	 * can arrive before this thread sees the grant). */
	__atomic_store_n(&fs->meta_wanted, -1, __ATOMIC_RELEASE);
	int rc = cfslock_request_sync(fs->meta, mode, 0);
	if (rc == -CFSLOCK_ENOQUORUM)
		lost_quorum(fs);
	if (rc) {
		cfs_log(fs, "lock meta %s: %s", cfslock_mode_name(mode), strerror(-rc));
		return cfs_lock_errno(rc);
	}
	fs->meta_mode = mode;
	fs->meta_granted_ns = fs->last_use_ns = cfs_now_ns();
	if (fs->caches_stale) {
		/* Other nodes allocated and freed meanwhile: the group summaries are read again. */
		if ((rc = cfs_alloc_load(fs)))
			return rc;
		fs->caches_stale = false;
	}
	return 0;
}

void cfs_glock_check(struct cfs_fs *fs)
{
	int wanted = __atomic_load_n(&fs->meta_wanted, __ATOMIC_ACQUIRE);
	if (fs->meta_mode < 0 || wanted < 0 || fs->io_holders || still_held_for_use(fs))
		return;
	/* Taken before acting: a wish that arrives meanwhile (for the PR we convert down to,
	 * say) must survive. */
	if (!__atomic_compare_exchange_n(&fs->meta_wanted, &wanted, -1, false, __ATOMIC_ACQ_REL,
					 __ATOMIC_ACQUIRE))
		return; /* changed under us: the next boundary sees the new one */
	if (wanted == CFSLOCK_PR && fs->meta_mode == CFSLOCK_PR)
		return; /* a stale wish: PR is compatible with PR */
	int to = wanted == CFSLOCK_PR ? CFSLOCK_PR : -1;
	if (glock_let_go(fs, to))
		meta_wanted(fs, fs->meta, wanted); /* kept: try again at the next boundary */
}

void cfs_io_hold(struct cfs_fs *fs)
{
	fs->io_holders++;
}

void cfs_io_unhold(struct cfs_fs *fs)
{
	if (--fs->io_holders == 0) {
		pthread_cond_broadcast(&fs->io_idle);
		cfs_glock_check(fs);
	}
}

int cfs_op_begin(struct cfs_fs *fs, bool change)
{
	pthread_mutex_lock(&fs->lock);
	int rc = change && fs->ro ? -EROFS : cfs_glock_acquire(fs, change ? CFSLOCK_EX : CFSLOCK_PR);
	if (rc)
		pthread_mutex_unlock(&fs->lock);
	return rc;
}

void cfs_op_end(struct cfs_fs *fs)
{
	if (fs->cluster) /* for the minimum hold time */
		fs->last_use_ns = cfs_now_ns();
	if (fs->txn.n > fs->txn.limit / 2)
		cfs_journal_commit(fs);
	cfs_bcache_trim(fs);
	cfs_glock_check(fs);
	pthread_mutex_unlock(&fs->lock);
}
