/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Recovery of a node that died with the filesystem mounted (GFS2's recovery.c, in our terms).
 *
 * When a member of the lock group goes, the lock manager keeps its locks granted, marked
 * recovering: nothing incompatible is granted on them until somebody says the recovery is
 * done.  So a dead node keeps every other node off what it held EX (the whole metadata if
 * that was the metadata glock; else its directories, inodes and groups) until its journal is
 * replayed, and a dead node's journal holds a transaction only if it died holding a glock
 * EX (it empties the journal whenever it lets go of one).
 *
 * Every surviving mount looks at the lock table when the membership changes.  For a dead node
 * that held a slot, the survivor that gets "recover-N" EX without waiting replays slot N's
 * journal (images written in place, flushed, the journal emptied), says recovery done (the
 * dead node's locks go: the glock, its open locks, its slot), and lets go.  Holding
 * "recover-N" across replay and recovery-done keeps a second survivor from replaying the
 * same journal after the first has let other nodes change those blocks; a survivor that finds
 * the dead node's slot lock gone under "recover-N" has nothing to do.  If the recovering
 * survivor dies too, its "recover-N" is itself recovering: the others recover it first (it is
 * in the same pass), which frees "recover-N", and the next pass finishes slot N.  Dead members
 * that held no slot (a status command, a mount that had not claimed its slot) only need
 * recovery-done.
 *
 * Then, under the glock EX like any operation, the dead slot's orphan list: files that only
 * the dead node had open are freed (their open locks went with it); files still open on a
 * survivor stay listed for its last close.
 *
 * The recovery runs on a thread of its own, without fs->lock: an operation of this node may be
 * holding it while it waits for the dead node's glock. */
#include "cfs/internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define RETRY_NS 1000000000ull /* a pass that could not finish is tried again after this */

struct dead_node {
	uint32_t node;
	uint32_t nslots;
	uint32_t slots[4]; /* slots its recovering slot locks name (one per mount of it) */
};

struct dead_set {
	struct dead_node v[CFS_STATUS_MAX_NODES];
	uint32_t n;
};

static struct dead_node *dead_lookup(struct dead_set *d, uint32_t node)
{
	for (uint32_t i = 0; i < d->n; i++)
		if (d->v[i].node == node)
			return &d->v[i];
	return NULL;
}

/* The node's entry, added if it is not there; NULL if the set is full. */
static struct dead_node *dead_find(struct dead_set *d, uint32_t node)
{
	struct dead_node *dn = dead_lookup(d, node);
	if (dn || d->n == CFS_STATUS_MAX_NODES)
		return dn;
	d->v[d->n] = (struct dead_node){.node = node};
	return &d->v[d->n++];
}

static void add_recovering(void *arg, const struct cfslock_dump_entry *e)
{
	struct dead_set *d = arg;
	unsigned slot;
	if (!e->recovering)
		return;
	struct dead_node *dn = dead_find(d, e->node);
	if (dn && cfs_slot_lock(e->resource, &slot) && dn->nslots < 4)
		dn->slots[dn->nslots++] = slot;
}

/* Is slot N's lock still held by the dead node, recovering? */
static bool slot_still_recovering(struct cfs_fs *fs, uint32_t slot, uint32_t node)
{
	char name[32];
	snprintf(name, sizeof name, "slot-%u", slot);
	return cfs_lock_recovering(fs, name, node);
}

/* Write a dead slot's committed transaction in place and empty its journal. */
static int replay_slot(struct cfs_fs *fs, uint32_t slot)
{
	struct cfs_jlog log = {0};
	pthread_rwlock_rdlock(&fs->vol_lock);
	/* A slot added since this node last took the glock: where its journal lies is in the
	 * superblock as it is on disk now (the dead node mounted with it). */
	struct cfs_dsuper sb = fs->sb;
	int rc = slot < sb.nslots ? 0 : cfs_super_read(fs->vol, &sb, NULL);
	if (!rc && slot >= sb.nslots)
		rc = -EUCLEAN;
	if (!rc)
		rc = cfs_journal_apply(fs->vol, &sb, slot, &log);
	/* Emptied with the next sequence, so that the slot's next mount goes on from there. */
	if (!rc && log.ntxn && !(rc = cfs_journal_clear(fs->vol, &sb, slot, log.next_seq)))
		rc = cvm_volume_flush(fs->vol);
	pthread_rwlock_unlock(&fs->vol_lock);
	char when[96];
	if (rc)
		cfs_log(fs, "recovery: journal of slot %u: %s", slot,
			rc == -EPROTONOSUPPORT ? cfs_last_error() : strerror(-rc));
	else if (log.ntxn)
		cfs_log(fs, "recovery: journal of slot %u: replayed transactions %" PRIu64
			" to %" PRIu64 " (%u blocks%s)", slot, log.first_seq, log.last_seq,
			log.count, cfs_jlog_when(&log, when, sizeof when));
	else
		cfs_log(fs, "recovery: journal of slot %u: nothing to replay", slot);
	return rc;
}

static void recover_lock_name(uint32_t slot, char *buf, size_t len)
{
	snprintf(buf, len, "recover-%" PRIu32, slot);
}

/* Only a member that was quorate and fresh without a break may recover anybody: one that
 * stalled may be the node the others think dead (cfslock.h, the lease).  Looked at before
 * each step; the write gate (fence.c) stops a replay the moment the lease goes.  A lease out
 * because corosync is re-forming the ring after the death is waited for (up to a fence
 * interval), not left to the next pass a second later. */
static bool may_recover(struct cfs_fs *fs)
{
	if (!cfs_lease_fresh(fs) && !cfs_fenced(fs))
		(void)cfslock_lease_wait(fs->locks, cfs_fence_interval_ms(fs));
	return !cfs_fenced(fs) && !cfslock_evicted(fs->locks) && cfslock_quorate(fs->locks) &&
	       cfs_lease_fresh(fs);
}

/* Recover one dead node: the number of its slots this node replayed (0: somebody else did, or
 * it held none), -EAGAIN another node is at it. */
static int recover_node(struct cfs_fs *fs, const struct dead_node *dn, uint32_t *replayed)
{
	struct cfslock *lk[4] = {0};
	uint64_t t0 = cfs_now_ns();
	int rc = 0;
	for (uint32_t i = 0; i < dn->nslots && !rc; i++) {
		char name[32];
		recover_lock_name(dn->slots[i], name, sizeof name);
		if (!(lk[i] = cfslock_new(fs->space, name, NULL, NULL, NULL)))
			rc = -ENOMEM;
		else
			rc = cfslock_request_sync(lk[i], CFSLOCK_EX, CFSLOCK_NOQUEUE);
	}
	uint32_t done = 0;
	bool hooked = false;
	for (uint32_t i = 0; i < dn->nslots && !rc; i++) {
		if (!may_recover(fs)) {
			rc = -EAGAIN;
			break;
		}
		if (!slot_still_recovering(fs, dn->slots[i], dn->node))
			continue; /* somebody recovered it before we got here */
		if (fs->fence_program && (rc = cfs_fence_node(fs, dn->node, dn->slots[i])))
			break;
		if (!hooked && fs->recovering) { /* a restripe's batch may keep the journal shut */
			fs->recovering(fs->locks_arg, fs, dn->node, true);
			hooked = true;
		}
		/* Test hook (test_cfs_restripe_kill.sh): the moment between the hook and the replay. */
		cfs_test_gate(getenv("CFSD_TEST_HOLD_RECOVERY"));
		if (!(rc = replay_slot(fs, dn->slots[i])))
			replayed[done++] = dn->slots[i];
	}
	if (hooked)
		fs->recovering(fs->locks_arg, fs, dn->node, false);
	/* Still under "recover-N": nobody replays the journal again once its locks go. */
	if (!rc && !may_recover(fs))
		rc = -EAGAIN;
	if (!rc && (rc = cfslock_recovery_done(fs->space, dn->node)) == -ENOENT)
		rc = 0; /* recovered already */
	if (!rc && done)
		cfs_log(fs, "recovery: node %" PRIu32 " (slot %" PRIu32 ") recovered in %" PRIu64
			" ms", dn->node, replayed[0], (cfs_now_ns() - t0) / 1000000);
	for (uint32_t i = 0; i < dn->nslots; i++)
		cfs_lock_put(&lk[i]);
	return rc ? rc : (int)done;
}

/* Wait ns unless the mount stops meanwhile (then false). */
static bool rest(struct cfs_fs *fs, uint64_t ns)
{
	struct timespec until;
	clock_gettime(CLOCK_MONOTONIC, &until);
	uint64_t t = (uint64_t)until.tv_nsec + ns;
	until.tv_sec += (time_t)(t / 1000000000ull);
	until.tv_nsec = (long)(t % 1000000000ull);
	pthread_mutex_lock(&fs->recovery_lock);
	while (!__atomic_load_n(&fs->recovery_stop, __ATOMIC_ACQUIRE) &&
	       pthread_cond_timedwait(&fs->recovery_wake, &fs->recovery_lock, &until) == 0)
		; /* a kick: the next pass sees it */
	pthread_mutex_unlock(&fs->recovery_lock);
	return !__atomic_load_n(&fs->recovery_stop, __ATOMIC_ACQUIRE);
}

/* The dead slots' orphans, under the glock EX as any operation, once this mount has replayed
 * its own journal (a replay after our changes would put old images back). */
static void free_dead_orphans(struct cfs_fs *fs, const uint32_t *slots, uint32_t n)
{
	while (n && !__atomic_load_n(&fs->started, __ATOMIC_ACQUIRE))
		if (!rest(fs, 10000000ull))
			return;
	for (uint32_t i = 0; i < n; i++) {
		int rc = cfs_op_begin(fs, true);
		if (!rc) {
			rc = cfs_orphans_free(fs, slots[i]);
			cfs_op_end(fs);
		}
		if (rc)
			cfs_log(fs, "recovery: orphans of slot %" PRIu32 ": %s (the slot's next "
				"mount frees them)", slots[i], strerror(-rc));
		cfs_log(fs, "recovery: slot %" PRIu32 " done", slots[i]);
	}
}

/* Wait the fence interval for dead nodes with a slot not waited for yet: by its end a node
 * that is only cut off has stopped writing (fence.c).  With a fence program, recover_node
 * runs it instead.  False if the mount is stopping. */
static bool fence_wait(struct cfs_fs *fs, const struct dead_set *d, struct dead_set *waited)
{
	if (fs->fence_program)
		return true;
	bool wait = false;
	for (uint32_t i = 0; i < d->n; i++) {
		if (d->v[i].nslots && !dead_lookup(waited, d->v[i].node) &&
		    dead_find(waited, d->v[i].node)) {
			cfs_log(fs, "recovery: node %" PRIu32 " (slot %" PRIu32 ") is gone; its journal "
				"is replayed after the fence interval", d->v[i].node, d->v[i].slots[0]);
			wait = true;
		}
	}
	if (!wait)
		return true;
	cfs_fence_log_interval(fs);
	return rest(fs, (uint64_t)cfs_fence_interval_ms(fs) * 1000000ull);
}

/* One look at the table: false if something is left to do later.  waited: the dead nodes
 * whose fence interval has passed, forgotten once every one is recovered. */
static bool recovery_pass(struct cfs_fs *fs, struct dead_set *waited)
{
	bool progress = true, finished = false;
	uint32_t replayed[CFS_STATUS_MAX_NODES * 4] = {0}, nreplayed = 0;
	while (progress && !finished) {
		struct dead_set d = {.n = 0};
		if (!may_recover(fs))
			return cfs_fenced(fs); /* fenced: nothing more to do, ever */
		if (cfslock_dump(fs->space, add_recovering, &d) || !fence_wait(fs, &d, waited))
			return false;
		progress = false;
		finished = true;
		for (uint32_t i = 0; i < d.n; i++) {
			int rc = recover_node(fs, &d.v[i], replayed + nreplayed);
			if (rc < 0) {
				finished = false;
				continue;
			}
			nreplayed += (uint32_t)rc;
			progress = true;
		}
	}
	free_dead_orphans(fs, replayed, nreplayed);
	if (finished)
		waited->n = 0;
	return finished;
}

static void *recovery_thread(void *arg)
{
	struct cfs_fs *fs = arg;
	struct dead_set waited = {.n = 0};
	pthread_mutex_lock(&fs->recovery_lock);
	while (!__atomic_load_n(&fs->recovery_stop, __ATOMIC_ACQUIRE)) {
		if (!fs->recovery_kicked) {
			struct timespec until;
			clock_gettime(CLOCK_MONOTONIC, &until);
			until.tv_sec += RETRY_NS / 1000000000ull;
			if (pthread_cond_timedwait(&fs->recovery_wake, &fs->recovery_lock, &until) &&
			    !fs->recovery_retry)
				continue;
		}
		fs->recovery_kicked = false;
		pthread_mutex_unlock(&fs->recovery_lock);
		bool finished = recovery_pass(fs, &waited);
		pthread_mutex_lock(&fs->recovery_lock);
		fs->recovery_retry = !finished;
	}
	pthread_mutex_unlock(&fs->recovery_lock);
	return NULL;
}

void cfs_recovery_kick(struct cfs_fs *fs)
{
	pthread_mutex_lock(&fs->recovery_lock);
	fs->recovery_kicked = true;
	pthread_cond_signal(&fs->recovery_wake);
	pthread_mutex_unlock(&fs->recovery_lock);
}

void cfs_recovery_init(struct cfs_fs *fs)
{
	pthread_condattr_t a;
	pthread_condattr_init(&a);
	pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
	pthread_cond_init(&fs->recovery_wake, &a);
	pthread_condattr_destroy(&a);
	pthread_mutex_init(&fs->recovery_lock, NULL);
}

int cfs_recovery_start(struct cfs_fs *fs)
{
	if (!fs->cluster)
		return 0;
	fs->failure_detection_ms = cfslock_failure_detection_ms(fs->locks);
	fs->recovery_kicked = true; /* a node may have died before we came */
	int rc = -pthread_create(&fs->recoverer, NULL, recovery_thread, fs);
	fs->recovery_running = !rc;
	return rc;
}

void cfs_recovery_stop(struct cfs_fs *fs)
{
	if (!fs->recovery_running)
		return;
	pthread_mutex_lock(&fs->recovery_lock);
	__atomic_store_n(&fs->recovery_stop, true, __ATOMIC_RELEASE);
	pthread_cond_signal(&fs->recovery_wake);
	pthread_mutex_unlock(&fs->recovery_lock);
	pthread_join(fs->recoverer, NULL);
	fs->recovery_running = false;
}

void cfs_recovery_destroy(struct cfs_fs *fs)
{
	pthread_cond_destroy(&fs->recovery_wake);
	pthread_mutex_destroy(&fs->recovery_lock);
}
