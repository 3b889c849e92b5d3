/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Glocks and the operation boundaries.
 *
 * A glock is a cluster lock of the filesystem's lockspace with what this node keeps under it
 * (GFS2's glock model): PR lets a node read and cache what the lock covers, EX lets it change
 * it.  "meta" covers the namespace and the superblock; inode glocks (iglock.c) and group
 * glocks (agglock.c) plug in beside it, each type's operations (struct cfs_glock_ops, as
 * GFS2's glops) saying what to write back and what to forget when a grant goes.  With the
 * local backend every glock is taken EX once and nobody else asks for it.
 *
 * Holders.  An operation, and data I/O on a mapping read under a grant, hold the glock
 * (cfs_glock_hold/unhold, fs->lock held): a held grant is never given up.  Waiting for another
 * node's grant releases fs->lock, so that meanwhile this node's other threads can give up the
 * glocks nobody here holds (else two nodes each waiting for a lock the other only keeps in
 * its cache would wait for ever).  So a hold that waited comes back with fs->lock taken again:
 * whatever the caller read before it must be read again, and nothing may be changed before a
 * hold that can wait.
 *
 * A node keeps a glock after its holders are done (it caches the grant) until another node
 * asks.  The blocking callback only records what the other node wants; the last unhold, an
 * operation boundary or the committer thread acts on it once nobody holds the glock:
 *   - EX wanted PR: sync (commit, empty the journal), convert down to PR, keep the caches
 *     (still valid: nobody else can change anything while we hold PR);
 *   - anything else: sync (if EX), go_unlock, invalidate (forget what was read under it),
 *     unlock.
 * An inode glock goes from PR to EX by a conversion that keeps the PR, and the caches, while
 * it waits (cfs_glock_convert_up); two nodes converting at once would wait for each other for
 * ever, so the lock manager refuses the later one (EDEADLK), which then lets its PR go and
 * asks anew.  The metadata glock lets go and asks anew at once: every node holds it PR for
 * its lookups, so its conversions would mostly be refused (tried: no fewer messages for 3
 * nodes creating at once).
 *
 * A metadata or group grant in use is kept for a short minimum hold time even when another
 * node asks (GFS2's gl_hold_time): without it two nodes both changing the filesystem passed
 * the glock back and forth for every operation, a commit and a handful of messages each.  A
 * node that has not used it for IDLE_NS lets go then: with 1 ms, the gaps between one
 * program's calls on a busy machine were enough to hand it over after almost every create.
 * So is an inode glock under which a directory's names changed: nodes creating and removing
 * files in one directory they share passed it on after every name. */
#include "cfs/internal.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define HOLD_NS 30000000ull /* a grant in use is kept this long after it came */
#define IDLE_NS 4000000ull  /* unused this long: given up when asked */
#define REST_LOOK_NS 1000000ull /* how often a write's rest is looked for */

uint64_t cfs_now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

struct timespec cfs_deadline_after_ns(uint64_t ns)
{
	struct timespec t;
	clock_gettime(CLOCK_REALTIME, &t);
	ns += (uint64_t)t.tv_nsec;
	t.tv_sec += (time_t)(ns / 1000000000u);
	t.tv_nsec = (long)(ns % 1000000000u);
	return t;
}

/* Keep the grant a little longer (the metadata and group glocks in use, an inode glock whose
 * write's rest is due, or whose directory names the kernel keeps until they expire:
 * cfs_iglock_lease_names)?  If so, the committer is told when to look again. */
static bool still_held_for_use(struct cfs_fs *fs, const struct cfs_glock *gl)
{
	if (!fs->cluster)
		return false;
	uint64_t now = cfs_now_ns(), hold_end = gl->granted_ns + HOLD_NS;
	uint64_t idle_at = gl->last_use_ns + IDLE_NS, until = 0;
	if ((gl->ops->min_hold || gl->names_changed) && now < hold_end && now < idle_at)
		until = hold_end < idle_at ? hold_end : idle_at;
	/* A write's rest: looked for again every REST_LOOK_NS while its thread still writes. */
	if (gl->keep_until_ns > now && cfs_iglock_rest_due(gl)) {
		uint64_t look = now + REST_LOOK_NS;
		look = look < gl->keep_until_ns ? look : gl->keep_until_ns;
		until = look > until ? look : until;
	}
	/* Names the kernel keeps must expire before another node changes the directory. */
	if (__atomic_load_n(&gl->wanted, __ATOMIC_ACQUIRE) == CFSLOCK_EX &&
	    gl->names_lease_ns > now && gl->names_lease_ns > until)
		until = gl->names_lease_ns;
	if (!until)
		return false;
	/* When the committer is to look again; it may be asleep for a second.  A later time
	 * than the one it waits for is left to that look. */
	if (fs->hold_until_ns <= now || until < fs->hold_until_ns) {
		fs->hold_until_ns = until;
		cfs_committer_wake(fs);
	}
	return true;
}

/* The committer looks at the metadata glock every round, at the others when queued. */
static bool queued_type(const struct cfs_glock *gl)
{
	return gl != &gl->fs->meta;
}

/* Record another node's wish; wake the committer to act on it now, or (a let-go that failed)
 * leave it to the committer's next round rather than retry at once for ever. */
static void record_wish(struct cfs_glock *gl, int mode, bool wake)
{
	/* The widest demand wins: a PR wish upgraded by a later EX wish means drop. */
	int prev = __atomic_load_n(&gl->wanted, __ATOMIC_ACQUIRE);
	if (mode > prev)
		__atomic_store_n(&gl->wanted, mode, __ATOMIC_RELEASE);
	if (queued_type(gl))
		cfs_iglock_wanted(gl->fs, gl, wake);
	else if (wake)
		cfs_committer_wake(gl->fs); /* it acts on it if nobody else does */
}

static void glock_wanted(void *arg, struct cfslock *lk, int mode)
{
	(void)lk;
	record_wish(arg, mode, true);
}

int cfs_glock_new(struct cfs_fs *fs, struct cfs_glock *gl, const char *name,
		  const struct cfs_glock_ops *ops)
{
	*gl = (struct cfs_glock){.fs = fs, .ops = ops, .mode = -1, .wanted = -1};
	gl->lk = cfslock_new(fs->space, name, NULL, glock_wanted, gl);
	return gl->lk ? 0 : -ENOMEM;
}

void cfs_glock_free(struct cfs_glock *gl)
{
	if (!gl->lk)
		return;
	if (gl->mode >= 0)
		cfslock_unlock_sync(gl->lk);
	cfslock_free(gl->lk);
	gl->lk = NULL;
	gl->mode = -1;
}

/* What another node may not see of ours: what we changed under EX is committed and in place.
 * Going down to PR, that is all: nobody else may change it while we hold PR, and the anchor
 * that voids our log (so that a replay cannot put old images back over another node's
 * changes) is owed until the next commit or let-go (cfs_journal_home), which takes it off
 * the path of the node waiting for our PR.  Letting go: the anchor too. */
static int glock_sync(struct cfs_fs *fs, bool down_to_pr)
{
	int rc = cfs_journal_commit(fs);
	if (rc || fs->ro)
		return rc; /* keep the lock: what we changed is not on disk */
	if (!fs->jlast_len)
		return 0; /* nothing committed since the last anchor (an earlier let-go) */
	rc = down_to_pr ? cfs_journal_home(fs) : cfs_journal_empty(fs);
	if (rc)
		cfs_log(fs, "slot %u: journal could not be emptied (%s): keeping the lock",
			fs->slot, strerror(-rc));
	else if (fs->janchor_owed)
		cfs_committer_wake(fs); /* it writes the anchor, off the other node's path */
	return rc;
}

/* Give the glock up (or convert it down to `to`, PR), in two steps: what this node does
 * first, then the lock manager's answer (let_go_end), so that one thread can let many go
 * with their messages under way together.  fs->lock held throughout, no holders. */
static int let_go_begin(struct cfs_fs *fs, struct cfs_glock *gl, int to)
{
	bool down = to == CFSLOCK_PR && gl->mode == CFSLOCK_EX;
	gl->ahead = false; /* taken ahead and not used (iglock.c) */
	/* Any grant going: the log may hold blocks it covers (homed under it EX, then PR). */
	int rc = gl->mode == CFSLOCK_EX ? glock_sync(fs, down) : cfs_journal_settle(fs);
	if (rc)
		return rc;
	if (down) {
		if (gl->ops->go_demote)
			gl->ops->go_demote(fs, gl);
		return cfslock_request_begin(gl->lk, CFSLOCK_PR, 0);
	}
	if (gl->ops->go_unlock && (rc = gl->ops->go_unlock(fs, gl)))
		return rc;
	gl->ops->go_invalidate(fs, gl);
	gl->mode = -1;
	gl->changed_here = false;
	gl->contested_ns = cfs_now_ns();
	if ((rc = cfslock_unlock_begin(gl->lk)))
		cfs_log(fs, "lock %s: unlock: %s", cfslock_name(gl->lk), strerror(-rc));
	return rc;
}

static int let_go_end(struct cfs_fs *fs, struct cfs_glock *gl, int to)
{
	int rc = cfslock_wait(gl->lk);
	if (to == CFSLOCK_PR && gl->mode == CFSLOCK_EX) {
		if (!rc)
			gl->mode = CFSLOCK_PR;
	} else if (rc) {
		cfs_log(fs, "lock %s: unlock: %s", cfslock_name(gl->lk), strerror(-rc));
	}
	return rc;
}

static int glock_let_go(struct cfs_fs *fs, struct cfs_glock *gl, int to)
{
	int rc = let_go_begin(fs, gl, to);
	return rc ? rc : let_go_end(fs, gl, to);
}

_Thread_local unsigned cfs_op_waits;

void cfs_glock_wait(struct cfs_fs *fs)
{
	cfs_op_waits++;
	pthread_cond_wait(&fs->glock_cond, &fs->lock);
}

static void lost_quorum(struct cfs_fs *fs)
{
	if (cfslock_evicted(fs->locks)) /* the lock calls fail then too */
		cfs_fence_evicted(fs, "its view of the cluster was stale");
	else
		cfs_fence(fs, "this node lost quorum");
}

/* A thread's wait for the lock manager's answers (one or many) that began at t0. */
static void count_wait(struct cfs_fs *fs, uint64_t t0)
{
	fs->lock_waits++;
	fs->lock_wait_ns += cfs_now_ns() - t0;
}

/* cfslock_request_sync for the glock, with fs->lock released if release (see the top of this
 * file); this node's other threads wait for it meanwhile (requesting).  The lock manager's
 * answer as it is. */
static int ask(struct cfs_fs *fs, struct cfs_glock *gl, int mode, unsigned flags, bool release)
{
	gl->requesting = true;
	cfs_op_waits += release;
	if (release)
		pthread_mutex_unlock(&fs->lock);
	uint64_t t0 = cfs_now_ns();
	int rc = cfslock_request_sync(gl->lk, mode, flags);
	if (release)
		pthread_mutex_lock(&fs->lock);
	count_wait(fs, t0);
	gl->requesting = false;
	pthread_cond_broadcast(&fs->glock_cond);
	if (rc == -CFSLOCK_ENOQUORUM)
		lost_quorum(fs);
	return rc;
}

static int take_grant(struct cfs_fs *fs, struct cfs_glock *gl, int mode)
{
	int was = gl->mode;
	gl->mode = mode;
	gl->changed_here |= mode == CFSLOCK_EX;
	gl->granted_ns = gl->last_use_ns = cfs_now_ns();
	gl->names_changed = false;
	gl->grant_seq = ++fs->grants;
	return gl->ops->go_granted ? gl->ops->go_granted(fs, gl, was) : 0;
}

/* Ask for a new grant. */
static int glock_request(struct cfs_fs *fs, struct cfs_glock *gl, int mode, unsigned flags,
			 bool release)
{
	/* Nothing is held now: a wish recorded from here on is about the grant we ask for (it
	 * can arrive before this thread sees the grant). */
	__atomic_store_n(&gl->wanted, -1, __ATOMIC_RELEASE);
	int rc = ask(fs, gl, mode, flags, release);
	if (rc == -EAGAIN && (flags & CFSLOCK_NOQUEUE))
		return rc;
	if (rc) {
		cfs_log(fs, "lock %s %s: %s", cfslock_name(gl->lk), cfslock_mode_name(mode),
			strerror(-rc));
		return cfs_lock_errno(rc);
	}
	return take_grant(fs, gl, mode);
}

int cfs_glock_request(struct cfs_fs *fs, struct cfs_glock *gl, int mode, bool release)
{
	return glock_request(fs, gl, mode, 0, release);
}

/* A refusal of one of cfs_glock_request_all's requests, acted on at once, fs->lock released:
 * a conversion refused because another node converts the same lock keeps our PR, which that
 * node waits for, and its let-go must not wait for our other answers (two nodes each waiting
 * for the rest of their batch kept each other's refused PR for ever). */
static void refused_in_batch(struct cfs_fs *fs, struct cfs_glock *gl, int rc, bool *no_quorum)
{
	pthread_mutex_lock(&fs->lock);
	gl->requesting = false;
	*no_quorum |= rc == -CFSLOCK_ENOQUORUM;
	int wanted = __atomic_load_n(&gl->wanted, __ATOMIC_ACQUIRE);
	if (wanted >= 0 && gl->mode >= 0)
		record_wish(gl, wanted, true);
	pthread_cond_broadcast(&fs->glock_cond);
	pthread_mutex_unlock(&fs->lock);
}

/* The answers to cfs_glock_request_all's requests (status[i] 0: asked), as they come; a
 * refused one's status becomes 1 (done with). */
static void wait_all(struct cfs_fs *fs, struct cfs_glock **v, size_t n, int *status,
		     size_t asked, bool *no_quorum)
{
	struct cfslock **lks = calloc(asked, sizeof *lks);
	size_t *at = calloc(asked, sizeof *at), left = 0;
	for (size_t i = 0; i < n; i++)
		if (!status[i] && lks && at) {
			lks[left] = v[i]->lk;
			at[left++] = i;
		} else if (!status[i]) { /* no memory: in order */
			int rc = cfslock_wait(v[i]->lk);
			if ((status[i] = rc != 0))
				refused_in_batch(fs, v[i], rc, no_quorum);
		}
	while (left) {
		size_t w;
		int rc = cfslock_wait_any(lks, left, &w);
		size_t i = at[w];
		lks[w] = lks[--left];
		at[w] = at[left];
		if ((status[i] = rc != 0))
			refused_in_batch(fs, v[i], rc, no_quorum);
	}
	free(lks);
	free(at);
}

void cfs_glock_request_all(struct cfs_fs *fs, struct cfs_glock **v, size_t n, int mode,
			   unsigned flags)
{
	int *status = calloc(n, sizeof *status);
	if (!status)
		return; /* each is asked for alone when used */
	/* status[i]: 1 if v[i] is not asked for here (or refused), 0 while asked and granted */
	size_t asked = 0;
	for (size_t i = 0; i < n; i++) {
		struct cfs_glock *gl = v[i];
		status[i] = 1;
		if (gl->requesting || gl->mode >= mode)
			continue; /* another thread asks, or it came meanwhile */
		if (gl->mode < 0) /* as glock_request's; a conversion's wish stays (convert_up) */
			__atomic_store_n(&gl->wanted, -1, __ATOMIC_RELEASE);
		if (cfslock_request_begin(gl->lk, mode, flags))
			continue; /* asked for again when used, which says why it fails */
		gl->requesting = true;
		status[i] = 0;
		asked++;
	}
	bool no_quorum = false;
	if (asked) {
		uint64_t t0 = cfs_now_ns();
		cfs_op_waits++;
		pthread_mutex_unlock(&fs->lock);
		wait_all(fs, v, n, status, asked, &no_quorum);
		pthread_mutex_lock(&fs->lock);
		count_wait(fs, t0);
	}
	for (size_t i = 0; i < n; i++) {
		if (status[i])
			continue; /* not asked here, or refused (wait_all) */
		v[i]->requesting = false;
		take_grant(fs, v[i], mode); /* an inode glock's go_granted cannot fail */
		int wanted = __atomic_load_n(&v[i]->wanted, __ATOMIC_ACQUIRE);
		if (wanted >= 0) /* as cfs_glock_convert_up's: acted on once nothing holds it */
			record_wish(v[i], wanted, true);
	}
	free(status);
	pthread_cond_broadcast(&fs->glock_cond);
	if (no_quorum)
		lost_quorum(fs);
}

int cfs_glock_convert_up(struct cfs_fs *fs, struct cfs_glock *gl)
{
	/* The wish recorded so far stays (unlike a new request's): it may be about the EX we
	 * are getting, and a conversion granted at once is not announced to the others again. */
	int rc = ask(fs, gl, CFSLOCK_EX, 0, true);
	if (rc)
		return rc == -EDEADLK ? rc : cfs_lock_errno(rc);
	rc = take_grant(fs, gl, CFSLOCK_EX);
	int wanted = __atomic_load_n(&gl->wanted, __ATOMIC_ACQUIRE);
	if (wanted >= 0) /* its wake-up found us converting: act on it after this operation */
		record_wish(gl, wanted, true);
	return rc;
}

int cfs_glock_drop(struct cfs_fs *fs, struct cfs_glock *gl)
{
	return glock_let_go(fs, gl, -1);
}

bool cfs_glock_wait_names(struct cfs_fs *fs, struct cfs_glock *gl)
{
	uint64_t now = cfs_now_ns();
	if (gl->names_lease_ns <= now)
		return false;
	gl->contested_ns = now; /* no new ones meanwhile */
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until); /* glock_cond's clock */
	uint64_t ns = (uint64_t)until.tv_nsec + (gl->names_lease_ns - now);
	until.tv_sec += (time_t)(ns / 1000000000ull);
	until.tv_nsec = (long)(ns % 1000000000ull);
	cfs_op_waits++;
	gl->waiters++; /* kept in memory meanwhile (iglock.c's put) */
	pthread_cond_timedwait(&fs->glock_cond, &fs->lock, &until);
	gl->waiters--;
	return true;
}

int cfs_glock_hold(struct cfs_fs *fs, struct cfs_glock *gl, int mode)
{
	if (!fs->cluster) /* one node: taken EX once and kept, nobody to count holders for */
		return gl->mode >= 0 ? 0 : glock_request(fs, gl, CFSLOCK_EX, 0, true);
	for (;;) {
		if (cfs_fenced(fs))
			return -EIO; /* what this node has cached may be another node's now */
		if (!gl->requesting && gl->mode >= mode) {
			gl->holders++;
			return 0;
		}
		/* Another thread is asking; or PR is held here, EX wanted: once nobody here
		 * uses PR, let go and ask (see the top of this file). */
		if (gl->requesting || (gl->mode >= 0 && gl->holders)) {
			cfs_glock_wait(fs);
		} else if (gl->mode < 0 || !cfs_glock_wait_names(fs, gl)) {
			int rc = gl->mode >= 0 ? glock_let_go(fs, gl, -1) : 0;
			if (!rc)
				rc = glock_request(fs, gl, mode, 0, true);
			if (rc)
				return cfs_lock_errno(rc);
		}
	}
}

int cfs_glock_try_hold(struct cfs_fs *fs, struct cfs_glock *gl, int mode)
{
	if (!fs->cluster || gl->mode >= mode)
		return cfs_glock_hold(fs, gl, mode);
	if (gl->requesting || gl->mode >= 0 || cfs_fenced(fs))
		return -EAGAIN; /* not worth a wait: the caller can do without */
	/* The holders in the way hear of it, and a holder that only caches it gives it up. */
	int rc = glock_request(fs, gl, mode, CFSLOCK_NOQUEUE | CFSLOCK_NOQUEUEBAST, true);
	if (!rc)
		gl->holders++;
	return cfs_lock_errno(rc);
}

void cfs_glock_check_begin(struct cfs_fs *fs, struct cfs_glock *gl)
{
	gl->letting_go = false;
	int wanted = __atomic_load_n(&gl->wanted, __ATOMIC_ACQUIRE);
	if (gl->mode < 0 || wanted < 0 || gl->holders || gl->requesting)
		return;
	if (still_held_for_use(fs, gl)) {
		if (queued_type(gl)) /* looked at again when the hold ends */
			cfs_iglock_wanted(fs, gl, false);
		return;
	}
	/* Taken before acting: a wish that arrives meanwhile (for the PR we convert down to,
	 * say) must survive. */
	if (!__atomic_compare_exchange_n(&gl->wanted, &wanted, -1, false, __ATOMIC_ACQ_REL,
					 __ATOMIC_ACQUIRE))
		return; /* changed under us: the next boundary sees the new one */
	if (wanted == CFSLOCK_PR && gl->mode == CFSLOCK_PR)
		return; /* a stale wish: PR is compatible with PR */
	int to = wanted == CFSLOCK_PR ? CFSLOCK_PR : -1;
	if (let_go_begin(fs, gl, to)) {
		record_wish(gl, wanted, false); /* kept: try again at the next round */
		return;
	}
	gl->letting_go = true;
	gl->letting_go_to = to;
	gl->letting_go_for = wanted;
}

void cfs_glock_check_end(struct cfs_fs *fs, struct cfs_glock *gl)
{
	if (!gl->letting_go)
		return;
	gl->letting_go = false;
	if (let_go_end(fs, gl, gl->letting_go_to))
		record_wish(gl, gl->letting_go_for, false);
	else if (gl->inode && gl->letting_go_for == CFSLOCK_EX)
		cfs_iglock_given_to_change(fs, gl);
}

void cfs_glock_check(struct cfs_fs *fs, struct cfs_glock *gl)
{
	cfs_glock_check_begin(fs, gl);
	cfs_glock_check_end(fs, gl);
}

void cfs_glock_unhold(struct cfs_fs *fs, struct cfs_glock *gl)
{
	if (!fs->cluster)
		return;
	gl->last_use_ns = cfs_now_ns(); /* for the minimum hold time */
	if (--gl->holders == 0) {
		pthread_cond_broadcast(&fs->glock_cond);
		cfs_glock_check(fs, gl);
	}
}

/* ---- the metadata glock ---- */

static int meta_go_unlock(struct cfs_fs *fs, struct cfs_glock *gl)
{
	(void)gl;
	fs->opens_refused_ns = 0; /* "opens" is worth asking for again in the next tenure */
	return 0;
}

/* Forget what was read under the grant.  In-memory inodes have their own glocks; their
 * blocks are read again from disk, where the last node to change them put them. */
static void meta_go_invalidate(struct cfs_fs *fs, struct cfs_glock *gl)
{
	(void)gl;
	cfs_bcache_drop(fs);
	fs->caches_stale = true;
	/* A node with it EX takes the glocks of the directories it changes too, so the
	 * kernel's names go with those; forgetting them here as well costs little. */
	if (fs->kernel.names)
		fs->kernel.names(fs->kernel.arg);
}

/* Other nodes allocated and freed meanwhile, and one may have grown the filesystem: the
 * group summaries are read again, after the superblock. */
static int meta_go_granted(struct cfs_fs *fs, struct cfs_glock *gl, int was)
{
	(void)gl, (void)was;
	if (!fs->caches_stale)
		return 0;
	int rc = cfs_growth_take_in(fs);
	if (!rc)
		rc = cfs_alloc_load(fs);
	fs->caches_stale = rc != 0;
	return rc;
}

static const struct cfs_glock_ops meta_glops = {
	.go_unlock = meta_go_unlock,
	.go_invalidate = meta_go_invalidate,
	.go_granted = meta_go_granted,
	.min_hold = true,
};

/* ---- the lock manager's side ---- */

/* Callbacks of the lock manager run on this thread, whatever the other threads do. */
static void *dispatcher(void *arg)
{
	struct cfs_fs *fs = arg;
	int fd = cfslock_client_fd(fs->locks);
	while (!__atomic_load_n(&fs->stopping, __ATOMIC_ACQUIRE)) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		if (poll(&p, 1, FENCE_CHECK_MS) > 0)
			cfslock_dispatch(fs->locks);
		if (!cfslock_quorate(fs->locks) || cfslock_evicted(fs->locks)) /* missed events */
			lost_quorum(fs);
	}
	/* The unmount goes on asking for locks: from now on each waiter dispatches itself
	 * (else each waited out the timed sleep meant for a busy dispatcher, 10 ms a lock). */
	cfslock_client_set_dispatcher(fs->locks, false);
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

static void evicted(void *arg, const char *why)
{
	cfs_fence_evicted(arg, why);
}

static void lock_manager_log(void *arg, int prio, const char *line)
{
	(void)prio;
	cfs_log(arg, "lock manager: %s", line);
}

int cfs_glock_init(struct cfs_fs *fs, const char *proto)
{
	if (cfs_iglock_init(fs))
		return -ENOMEM;
	char space[64];
	lockspace_name(fs, space, sizeof space);
	fs->lock_events = (struct cfslock_events){
		.membership = membership_changed, .quorum = quorum_changed, .evicted = evicted,
		.log = lock_manager_log, .arg = fs};
	int rc = cfslock_client_open(proto, &fs->lock_events, &fs->locks);
	if (rc == -EPROTO) {
		cfs_set_error("lock manager '%s': %s", proto, cfslock_last_error());
		return rc;
	}
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
	if (!rc)
		rc = cfs_glock_new(fs, &fs->meta, "meta", &meta_glops);
	if (!rc && fs->cluster && (rc = -pthread_create(&fs->dispatch, NULL, dispatcher, fs)) == 0) {
		fs->dispatching = true;
		cfslock_client_set_dispatcher(fs->locks, true);
	}
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
	if (fs->dispatching) {
		cfslock_client_set_dispatcher(fs->locks, false);
		pthread_join(fs->dispatch, NULL);
	}
	fs->dispatching = false;
	cfs_group_glocks_free(fs);
	cfs_glock_free(&fs->meta);
	cfs_iglock_shutdown(fs);
	if (fs->space)
		cfslock_space_close(fs->space);
	if (fs->locks)
		cfslock_client_close(fs->locks);
	fs->space = NULL;
	fs->locks = NULL;
}

/* ---- operations ---- */

int cfs_meta_hold(struct cfs_fs *fs, int mode, int imode)
{
	int rc = cfs_glock_hold(fs, &fs->meta, mode);
	if (!rc)
		cfs_op_imode = imode;
	return rc;
}

int cfs_op_begin(struct cfs_fs *fs, bool change)
{
	pthread_mutex_lock(&fs->lock);
	int mode = change ? CFSLOCK_EX : CFSLOCK_PR;
	int rc = change && fs->ro ? -EROFS : cfs_meta_hold(fs, mode, mode);
	if (rc)
		pthread_mutex_unlock(&fs->lock);
	return rc;
}

int cfs_op_begin_now(struct cfs_fs *fs)
{
	pthread_mutex_lock(&fs->lock);
	int rc = cfs_glock_try_hold(fs, &fs->meta, CFSLOCK_PR);
	if (rc)
		pthread_mutex_unlock(&fs->lock);
	else
		cfs_op_imode = CFSLOCK_PR;
	return rc;
}

int cfs_op_begin_inode(struct cfs_fs *fs)
{
	pthread_mutex_lock(&fs->lock);
	int rc = fs->ro ? -EROFS : cfs_meta_hold(fs, CFSLOCK_PR, CFSLOCK_EX);
	if (rc)
		pthread_mutex_unlock(&fs->lock);
	return rc;
}

void cfs_op_boundary(struct cfs_fs *fs)
{
	if (fs->txn.n > fs->txn.limit / 2)
		cfs_journal_commit(fs);
	cfs_group_unreserve(fs);
	cfs_bcache_trim(fs);
	cfs_iglock_act(fs);
	cfs_glock_check(fs, &fs->meta);
	pthread_mutex_unlock(&fs->lock);
}

void cfs_op_end(struct cfs_fs *fs)
{
	cfs_glock_unhold(fs, &fs->meta);
	cfs_op_boundary(fs);
}
