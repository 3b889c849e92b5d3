/* SPDX-License-Identifier: GPL-2.0-or-later */
/* An online restripe on a cluster (docs/restripe.md, "On a cluster").  The node that runs it
 * keeps its own processes out of the batch in motion with its gate, as on one node; every
 * other node's daemon follows the run with a gate of its own (cvm_volume_restripe_follow),
 * told of each batch by cluster locks in the filesystem's lockspace:
 *
 *   restripe-owner      EX by the node running a restripe, for the whole run.
 *   restripe            PR by every node.  The restriper takes it EX (and lets it go) once the
 *                       run's record is written, and again after the run: each node, told so,
 *                       starts following the run (or stops) before it lets its PR go.
 *   restripe-<first>    the batch starting at move `first`: every follower holds the next
 *                       batch's PR, so the restriper's EX is granted only once every node has
 *                       closed its gate for the batch (waiting for its I/O there), taken the
 *                       batch after's PR and let this one go.  The follower asks for it again
 *                       at once; granted after the restriper is through, the value block says
 *                       how the batch ended, and the follower opens its gate.
 *
 * No message goes per I/O: a few per node per batch.  A node that mounts during a run joins
 * it before its mount reads anything: it takes the batch lock of the progress the config
 * shows and reads the config again, until the two agree. */
#include "cfsd/restripe_cluster.h"

#include "cfs/internal.h"
#include "cfsd/odm_server.h"
#include "cfsd/restripe.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define OWNER_LOCK "restripe-owner"
#define STATE_LOCK "restripe"
#define BATCH_LVB_MAGIC 0x3152545352534643ull /* "CFSRSTR1" */

/* What the restriper leaves in a batch lock's value block. */
struct batch_lvb {
	uint64_t magic;
	uint64_t first;
	uint32_t n;
	int32_t rc;
};
_Static_assert(sizeof(struct batch_lvb) <= CFSLOCK_LVB_LEN, "a batch's outcome fits a value block");

struct restripe_cluster {
	struct cfsd *d;
	struct cfs_fs *fs;
	pthread_mutex_t lock;
	pthread_cond_t changed;
	pthread_mutex_t gate_lock;    /* the follower's gate: its thread's, and a recovery's */
	pthread_t thread;
	bool stopping;
	bool stopped;                 /* the follower thread is over */
	struct cfslock *waiting;      /* what it waits for: an unmount cancels it */
	bool state_due;               /* the restriper wants "restripe" EX */
	struct cfslock *batch_wanted; /* the batch lock the restriper wants EX */
	bool hand_over_due;           /* this node is to run a restripe itself */
	bool finish_due;              /* a batch its restriper left staged is closed here */
	bool finish_wanted;           /* and another node still owned the run: once it ends */
	bool here;                    /* it does */
	/* the follower thread's */
	struct cfslock *state;        /* PR */
	struct cfslock *batch;        /* the next batch's, PR while following */
	struct cvm_restripe_follower *follower;
	struct cfslock *stuck; /* a batch this node failed to follow: held, with rc->batch */
	/* the restriper's */
	struct cfslock *owner, *announce, *moving;
	bool announced;
};

static struct restripe_cluster *of(struct cfsd *d)
{
	return d->restripe_cluster;
}

/* Lock callbacks run on the dispatcher: they only record the wish. */
static void state_wanted(void *arg, struct cfslock *lk, int mode)
{
	(void)lk, (void)mode;
	struct restripe_cluster *rc = arg;
	pthread_mutex_lock(&rc->lock);
	rc->state_due = true;
	pthread_cond_broadcast(&rc->changed);
	pthread_mutex_unlock(&rc->lock);
}

static void batch_wanted(void *arg, struct cfslock *lk, int mode)
{
	(void)mode;
	struct restripe_cluster *rc = arg;
	pthread_mutex_lock(&rc->lock);
	rc->batch_wanted = lk;
	pthread_cond_broadcast(&rc->changed);
	pthread_mutex_unlock(&rc->lock);
}

static void batch_lock_name(uint64_t first, char name[CFSLOCK_NAME_MAX])
{
	snprintf(name, CFSLOCK_NAME_MAX, "restripe-%" PRIx64, first);
}

static struct cfslock *batch_lock(struct restripe_cluster *rc, uint64_t first, bool follower)
{
	char name[CFSLOCK_NAME_MAX];
	batch_lock_name(first, name);
	return cfslock_new(rc->fs->space, name, NULL, follower ? batch_wanted : NULL, rc);
}

static const char *volume_name(const struct restripe_cluster *rc)
{
	return cvm_volume_config(rc->fs->vol)->name;
}

/* A lock wait of the follower thread (or the mount's join).  An unmount cancels it: the
 * node's I/O is over by then, and the wait may hang on the unmount itself (its glocks are
 * no longer given up, and another node's join may wait for one of them). */
static int wait_for(struct restripe_cluster *rc, struct cfslock *lk, int mode)
{
	pthread_mutex_lock(&rc->lock);
	bool stop = rc->stopping;
	if (!stop)
		rc->waiting = lk;
	pthread_mutex_unlock(&rc->lock);
	if (stop)
		return -ECANCELED;
	int e = cfslock_request_sync(lk, mode, 0);
	pthread_mutex_lock(&rc->lock);
	rc->waiting = NULL;
	pthread_mutex_unlock(&rc->lock);
	return e;
}

/* ---- following ---- */

static void hold_io(void *arg, bool hold)
{
	cfs_volume_hold(arg, hold);
}

/* Stop following: the gate goes idle, or (keep_gate) stays as it is for a run of this
 * daemon to take over. */
static void stop_following(struct restripe_cluster *rc, bool keep_gate)
{
	if (!rc->follower)
		return;
	if (keep_gate)
		cvm_restripe_follow_hand_over(rc->follower);
	else
		cvm_restripe_follow_end(rc->follower);
	rc->follower = NULL;
	rc->finish_wanted = false;
	cfs_lock_put(&rc->batch);
	cfs_lock_put(&rc->stuck);
	if (!keep_gate)
		cfs_log(rc->fs, "volume %s: no longer following a restripe", volume_name(rc));
}

static void leave(struct restripe_cluster *rc)
{
	stop_following(rc, false);
}

/* The config and the batch lock of its progress, once the two agree: the restriper cannot
 * start that batch before this node lets the lock go.  *lk NULL: no restripe under way. */
static int agree(struct restripe_cluster *rc, struct cvm_config *cfg, struct cfslock **lk)
{
	*lk = NULL;
	int e;
	while (!(e = cfsd_config_now(rc->d, cfg)) && cfg->restripe.target_width) {
		uint64_t first = cfg->restripe.moves_done;
		if (!(*lk = batch_lock(rc, first, true)))
			return -ENOMEM;
		if ((e = cfs_lock_errno(wait_for(rc, *lk, CFSLOCK_PR))) ||
		    (e = cfsd_config_now(rc->d, cfg)))
			break;
		if (cfg->restripe.target_width && cfg->restripe.moves_done == first)
			return 0;
		cfs_lock_put(lk);
	}
	cfs_lock_put(lk);
	return e;
}

/* Follow the run under way; at mount (running false) nothing of this node's is in flight. */
static int join(struct restripe_cluster *rc, bool running)
{
	struct cvm_config *cfg = malloc(sizeof *cfg);
	struct cfslock *lk = NULL;
	int e = cfg ? agree(rc, cfg, &lk) : -ENOMEM;
	if (e || !lk) {
		free(cfg);
		return e;
	}
	struct odm_server *odm = running ? rc->d->odm : NULL;
	char msg[256] = "";
	/* Maps handed out name the layout as it was: every one goes first. */
	if (!(e = odm ? odm_revoke_begin(odm, 0, NULL, msg, sizeof msg) : 0)) {
		struct cvm_restripe_opts opts = {.hold_io = running ? hold_io : NULL, .arg = rc->fs};
		e = cvm_volume_restripe_follow(rc->fs->vol, cfg, &opts, &rc->follower);
		/* A grow just before the run that this idle node has not taken in yet. */
		if (e == -ESTALE && running && !cfs_growth_catch_up(rc->fs))
			e = cvm_volume_restripe_follow(rc->fs->vol, cfg, &opts, &rc->follower);
		if (e)
			snprintf(msg, sizeof msg, "%s", cvm_last_error());
		if (odm)
			odm_revoke_end(odm, 0);
	}
	if (e) {
		cfs_lock_put(&lk);
		cfs_set_error("volume %s: cannot follow the restripe under way: %s",
			      volume_name(rc), msg[0] ? msg : strerror(-e));
	} else {
		rc->batch = lk;
		cfs_log(rc->fs, "volume %s: following the restripe run by node %u, at move %" PRIu64,
			volume_name(rc), cfs_lock_holder(rc->fs, OWNER_LOCK),
			cfg->restripe.moves_done);
	}
	free(cfg);
	return e;
}

enum outcome { DONE, NOT_BEGUN, STAGED };

/* How the batch [first, next) ended: the value block says done; if it does not (its
 * restriper failed or died), the config says. */
static int batch_outcome(struct restripe_cluster *rc, uint64_t first, uint64_t next,
			 enum outcome *out)
{
	struct batch_lvb v;
	memcpy(&v, cfslock_lvb(rc->batch), sizeof v);
	*out = DONE;
	if (cfslock_lvb_valid(rc->batch) && v.magic == BATCH_LVB_MAGIC && v.first == first &&
	    v.first + v.n == next && v.rc == 0)
		return 0;
	struct cvm_config *cfg = malloc(sizeof *cfg);
	int e = cfg ? cfsd_config_now(rc->d, cfg) : -ENOMEM;
	if (!e && cfg->restripe.target_width && cfg->restripe.moves_done < next)
		*out = cfg->restripe.staged ? STAGED : NOT_BEGUN;
	free(cfg);
	return e;
}

/* The restriper wants the next batch's lock: close the gate for it, and open it again with
 * the chunks where the batch left them.  A batch its restriper left staged stays closed,
 * and this node finishes it (take_over). */
static void follow_batch(struct restripe_cluster *rc)
{
	pthread_mutex_lock(&rc->gate_lock);
	uint64_t first = cvm_restripe_follow_position(rc->follower), next = 0;
	enum outcome outcome = DONE;
	struct cfslock *after = NULL;
	int e = cvm_restripe_follow_close(rc->follower, first, &next);
	pthread_mutex_unlock(&rc->gate_lock);
	if (!e && !(after = batch_lock(rc, next, true)))
		e = -ENOMEM;
	if (!e)
		e = cfs_lock_errno(wait_for(rc, after, CFSLOCK_PR));
	if (!e)
		e = cfs_lock_errno(cfslock_unlock_sync(rc->batch));
	if (!e)
		e = cfs_lock_errno(wait_for(rc, rc->batch, CFSLOCK_PR));
	pthread_mutex_lock(&rc->gate_lock);
	/* The batch of a dead restriper this node recovered is done already (recovering()). */
	bool finished = cvm_restripe_follow_position(rc->follower) == next;
	if (!e && !finished)
		e = batch_outcome(rc, first, next, &outcome);
	if (!e && !finished && outcome != STAGED)
		e = cvm_restripe_follow_open(rc->follower, outcome == DONE);
	pthread_mutex_unlock(&rc->gate_lock);
	if (e) { /* closed it stays, and the locks stay held: the restriper cannot go on */
		rc->stuck = after;
		cfs_log(rc->fs, "volume %s: following the restripe's batch at move %" PRIu64 ": %s; "
			"this node keeps the restripe from going on until it unmounts",
			volume_name(rc), first, strerror(-e));
		return;
	}
	if (outcome != DONE) /* the run starts again at `first`: its lock stays held here */
		cfs_lock_put(&after);
	if (outcome == STAGED) {
		cfs_log(rc->fs, "volume %s: the restripe's node died in the middle of the batch at "
			"move %" PRIu64 "; finishing that batch here", volume_name(rc), first);
		pthread_mutex_lock(&rc->lock);
		rc->finish_due = true;
		pthread_mutex_unlock(&rc->lock);
		return;
	}
	if (outcome == NOT_BEGUN)
		return;
	cfs_lock_put(&rc->batch);
	pthread_mutex_lock(&rc->lock);
	rc->batch = after;
	pthread_mutex_unlock(&rc->lock);
}

static void hand_over(struct restripe_cluster *rc)
{
	stop_following(rc, true);
}

/* Finish the staged batch of a restriper that died or failed, then pause: whichever node
 * gets the owner lock does it (its gate handed over to the run: restripe_cluster_own); the
 * others follow it.  A run that failed still owns the lock a moment: the batch stays
 * closed here, and this node tries again when that run ends (state_change). */
static void take_over(struct restripe_cluster *rc)
{
	char msg[256] = "";
	int e = cfsd_restripe_start(rc->d, NULL, true, msg, sizeof msg);
	if (!e)
		return;
	pthread_mutex_lock(&rc->lock);
	rc->finish_wanted = rc->follower != NULL;
	pthread_mutex_unlock(&rc->lock);
	cfs_log(rc->fs, "volume %s: the batch left staged is not finished here yet: %s%s",
		volume_name(rc), msg[0] ? msg : strerror(-e),
		rc->follower ? "; it stays closed here until a restripe finishes it" : "");
}

/* Still following a run that died, as a new one starts: is this node where the config
 * says the volume is?  (Else it follows the new run afresh.) */
static bool in_step(struct restripe_cluster *rc)
{
	struct cvm_config *cfg = malloc(sizeof *cfg);
	bool same = cfg && !cfsd_config_now(rc->d, cfg) && cfg->restripe.target_width &&
		    cfg->restripe.moves_done == cvm_restripe_follow_position(rc->follower);
	free(cfg);
	return same;
}

static bool stopping(struct restripe_cluster *rc)
{
	pthread_mutex_lock(&rc->lock);
	bool stop = rc->stopping;
	pthread_mutex_unlock(&rc->lock);
	return stop;
}

/* The restriper starts a run (its owner lock held) or ends one: follow it, or stop, before
 * letting it have "restripe". */
static void state_change(struct restripe_cluster *rc)
{
	pthread_mutex_lock(&rc->lock);
	bool here = rc->here;
	pthread_mutex_unlock(&rc->lock);
	bool running = cfs_lock_holder(rc->fs, OWNER_LOCK) != 0;
	if (rc->follower && !running && rc->finish_wanted) {
		pthread_mutex_lock(&rc->lock); /* the run that kept it from this node ended */
		rc->finish_due = true;
		pthread_mutex_unlock(&rc->lock);
	} else if (rc->follower && (!running || here || !in_step(rc))) {
		leave(rc);
	}
	/* This node's I/O must not go on unkept while the run moves chunks: "restripe" stays
	 * held, which keeps the run from starting, until the node follows it. */
	for (unsigned tries = 0; running && !here && !rc->follower && !stopping(rc); tries++) {
		if (!join(rc, true))
			break;
		if (tries % 10 == 0)
			cfs_log(rc->fs, "%s; the restripe waits for this node (trying again)",
				cfs_last_error());
		sleep(1);
	}
	cfslock_unlock_sync(rc->state);
	for (unsigned tries = 0; !stopping(rc); tries++) {
		int e = wait_for(rc, rc->state, CFSLOCK_PR);
		if (!e || e == -ECANCELED)
			break;
		if (tries % 10 == 0)
			cfs_log(rc->fs, "volume %s: lock %s: %s; trying again", volume_name(rc),
				STATE_LOCK, strerror(-e));
		sleep(1);
	}
}

static void *follow(void *arg)
{
	struct restripe_cluster *rc = arg;
	pthread_mutex_lock(&rc->lock);
	while (!rc->stopping) {
		if (rc->finish_due) { /* one event at a time: each flag cleared as it is handled */
			rc->finish_due = false;
			pthread_mutex_unlock(&rc->lock);
			take_over(rc);
			pthread_mutex_lock(&rc->lock);
		} else if (rc->state_due) {
			rc->state_due = false;
			pthread_mutex_unlock(&rc->lock);
			state_change(rc);
			pthread_mutex_lock(&rc->lock);
		} else if (rc->hand_over_due) {
			pthread_mutex_unlock(&rc->lock);
			hand_over(rc);
			pthread_mutex_lock(&rc->lock);
			rc->hand_over_due = false;
			pthread_cond_broadcast(&rc->changed);
		} else if (rc->batch && rc->batch_wanted == rc->batch && rc->follower && !rc->stuck) {
			rc->batch_wanted = NULL;
			pthread_mutex_unlock(&rc->lock);
			follow_batch(rc);
			pthread_mutex_lock(&rc->lock);
		} else {
			pthread_cond_wait(&rc->changed, &rc->lock);
		}
	}
	rc->stopped = true;
	pthread_cond_broadcast(&rc->changed);
	pthread_mutex_unlock(&rc->lock);
	return NULL;
}

static int staged_check(struct cfs_fs *fs)
{
	int rc = cvm_config_staged_check(cvm_volume_config(fs->vol));
	if (rc)
		cfs_set_error("%s", cvm_last_error());
	return rc;
}

static void cluster_free(struct restripe_cluster *rc)
{
	leave(rc);
	cfs_lock_put(&rc->state);
	cfs_lock_put(&rc->owner);
	cfs_lock_put(&rc->announce);
	cfs_lock_put(&rc->moving);
	pthread_cond_destroy(&rc->changed);
	pthread_mutex_destroy(&rc->gate_lock);
	pthread_mutex_destroy(&rc->lock);
	free(rc);
}

int restripe_cluster_mount(void *d, struct cfs_fs *fs)
{
	if (!fs->cluster)
		return staged_check(fs);
	struct restripe_cluster *rc = calloc(1, sizeof *rc);
	if (!rc)
		return -ENOMEM;
	*rc = (struct restripe_cluster){.d = d, .fs = fs};
	pthread_mutex_init(&rc->lock, NULL);
	pthread_mutex_init(&rc->gate_lock, NULL);
	pthread_cond_init(&rc->changed, NULL);
	int e = (rc->state = cfslock_new(fs->space, STATE_LOCK, NULL, state_wanted, rc)) ? 0
											  : -ENOMEM;
	if (!e)
		e = cfs_lock_errno(cfslock_request_sync(rc->state, CFSLOCK_PR, 0));
	/* A run whose record is not written yet makes this node follow it when it is. */
	if (!e && cfs_lock_holder(fs, OWNER_LOCK))
		e = join(rc, false);
	if (!e && !rc->follower)
		e = staged_check(fs);
	if (!e && (e = -pthread_create(&rc->thread, NULL, follow, rc)))
		cfs_set_error("restripe follower: cannot start a thread");
	if (e) {
		cluster_free(rc);
		return e;
	}
	((struct cfsd *)d)->restripe_cluster = rc;
	return 0;
}

void restripe_cluster_unmount(void *d, struct cfs_fs *fs)
{
	(void)fs;
	struct restripe_cluster *rc = of(d);
	if (!rc)
		return;
	pthread_mutex_lock(&rc->lock);
	rc->stopping = true;
	pthread_cond_broadcast(&rc->changed);
	while (!rc->stopped) { /* a cancel can come before the request: again until it ends */
		if (rc->waiting && cfslock_pending(rc->waiting))
			(void)cfslock_cancel(rc->waiting);
		struct timespec until = cfs_deadline_after_ns(50 * 1000000ull);
		pthread_cond_timedwait(&rc->changed, &rc->lock, &until);
	}
	pthread_mutex_unlock(&rc->lock);
	pthread_join(rc->thread, NULL);
	((struct cfsd *)d)->restripe_cluster = NULL;
	cluster_free(rc);
}

/* The batch this node keeps closed, as a recovery of node begins (config: the volume's now).
 * The replay may need its chunks, and they must be read where they lie:
 *  - done (its restriper died after recording it, before telling the others): open it with
 *    its chunks in their new places, as the restriper's value block would have;
 *  - staged by the dead restriper: half moved; finish it here (this node alone recovers it,
 *    and it is fenced);
 *  - not begun, and nothing can move it before the recovery is done (the dead node runs the
 *    restripe, or holds the batch's lock): let this node's I/O through to where they were;
 *  - else the restriper, alive, may be moving it: it stays closed, the replay waits for it. */
static void recovery_begins(struct restripe_cluster *rc, struct cvm_restripe_follower *f,
			    uint32_t node, const struct cvm_config *cfg)
{
	uint64_t first = cvm_restripe_follow_position(f);
	uint64_t next = first + cvm_restripe_follow_closed(f);
	const struct cvm_restripe *run = &cfg->restripe;
	bool dead_runs_it = cfs_lock_holder(rc->fs, OWNER_LOCK) == node;
	char batch[CFSLOCK_NAME_MAX];
	batch_lock_name(first, batch);
	if (!run->target_width || run->moves_done >= next) {
		cvm_restripe_follow_open(f, true);
		cfs_log(rc->fs, "volume %s: node %u died having moved the restripe's batch at move "
			"%" PRIu64 "; its chunks are read in their new places here", volume_name(rc),
			node, first);
	} else if (dead_runs_it && run->staged && run->moves_done == first) {
		int e = cvm_restripe_follow_finish(f, cfg);
		cfs_log(rc->fs, "volume %s: node %u died in the middle of the restripe's batch at "
			"move %" PRIu64 ": %s", volume_name(rc), node, first,
			e ? cvm_last_error() : "finished it here");
	} else if (!run->staged && (dead_runs_it || cfs_lock_recovering(rc->fs, batch, node))) {
		cvm_restripe_follow_pause(f);
	}
}

/* This node replays a dead node's journal (before), or has (after), keeping the batch it
 * closed for a restripe (recovery_begins), then closed again if it let it through. */
void restripe_cluster_recovering(void *d, struct cfs_fs *fs, uint32_t node, bool before)
{
	(void)fs;
	struct restripe_cluster *rc = of(d);
	if (!rc)
		return;
	pthread_mutex_lock(&rc->gate_lock);
	struct cvm_restripe_follower *f = rc->follower;
	if (f && !before) {
		cvm_restripe_follow_unpause(f);
	} else if (f && cvm_restripe_follow_closed(f)) {
		struct cvm_config *cfg = malloc(sizeof *cfg);
		int e = cfg ? cfsd_config_now(rc->d, cfg) : -ENOMEM;
		if (!e)
			recovery_begins(rc, f, node, cfg);
		else
			cfs_log(rc->fs, "volume %s: recovery of node %u: the restripe's batch at move "
				"%" PRIu64 " stays closed here: config: %s", volume_name(rc), node,
				cvm_restripe_follow_position(f), strerror(-e));
		free(cfg);
	}
	pthread_mutex_unlock(&rc->gate_lock);
}

/* ---- running it ---- */

uint32_t restripe_cluster_owner(struct cfsd *d)
{
	struct restripe_cluster *rc = of(d);
	return rc ? cfs_lock_holder(rc->fs, OWNER_LOCK) : 0;
}

int restripe_cluster_own(struct cfsd *d, char *msg, size_t msglen)
{
	struct restripe_cluster *rc = of(d);
	if (!rc)
		return 0;
	int e = (rc->owner = cfslock_new(rc->fs->space, OWNER_LOCK, NULL, NULL, rc)) ? 0 : -ENOMEM;
	if (!e && (e = cfslock_request_sync(rc->owner, CFSLOCK_EX, CFSLOCK_NOQUEUE)) == -EAGAIN) {
		snprintf(msg, msglen, "volume %s is being restriped by node %u; 'cvm restripe %s' "
			 "there shows it, or pauses it with Ctrl-C", volume_name(rc),
			 cfs_lock_holder(rc->fs, OWNER_LOCK), volume_name(rc));
		e = -EBUSY;
	}
	if (e) {
		cfs_lock_put(&rc->owner);
		return cfs_lock_errno(e);
	}
	/* Following a run that died: this one takes over its gate (on the follower thread
	 * itself, take_over, directly). */
	pthread_mutex_lock(&rc->lock);
	rc->here = true;
	rc->announced = false;
	bool follower_thread = pthread_equal(pthread_self(), rc->thread);
	if (!follower_thread) {
		rc->hand_over_due = true;
		pthread_cond_broadcast(&rc->changed);
		while (rc->hand_over_due)
			pthread_cond_wait(&rc->changed, &rc->lock);
	}
	pthread_mutex_unlock(&rc->lock);
	if (follower_thread)
		hand_over(rc);
	return 0;
}

/* Every node that holds "restripe" has followed (or left) the run when the EX comes. */
static int announce(struct restripe_cluster *rc)
{
	if (!rc->announce &&
	    !(rc->announce = cfslock_new(rc->fs->space, STATE_LOCK, NULL, NULL, rc)))
		return -ENOMEM;
	int e = cfslock_request_sync(rc->announce, CFSLOCK_EX, 0);
	if (!e)
		e = cfslock_unlock_sync(rc->announce);
	return cfs_lock_errno(e);
}

void restripe_cluster_disown(struct cfsd *d)
{
	struct restripe_cluster *rc = of(d);
	if (!rc)
		return;
	cfs_lock_put(&rc->owner);
	int e = announce(rc);
	if (e)
		cfs_log(rc->fs, "volume %s: telling the other nodes the restripe ended: %s",
			volume_name(rc), strerror(-e));
	pthread_mutex_lock(&rc->lock);
	rc->here = false;
	pthread_mutex_unlock(&rc->lock);
}

int restripe_cluster_batch_begin(struct cfsd *d, uint64_t first, char *msg, size_t msglen)
{
	struct restripe_cluster *rc = of(d);
	if (!rc)
		return 0;
	int e = 0;
	if (!rc->announced && !(e = announce(rc)))
		rc->announced = true;
	if (!e && !(rc->moving = batch_lock(rc, first, false)))
		e = -ENOMEM;
	if (!e && (e = cfs_lock_errno(cfslock_request_sync(rc->moving, CFSLOCK_EX, 0))))
		cfs_lock_put(&rc->moving);
	if (e)
		snprintf(msg, msglen, "volume %s: the other nodes' I/O cannot be kept out of the "
			 "batch at move %" PRIu64 ": lock: %s", volume_name(rc), first, strerror(-e));
	return e;
}

void restripe_cluster_batch_end(struct cfsd *d, uint64_t first, uint32_t n, int result)
{
	struct restripe_cluster *rc = of(d);
	if (!rc || !rc->moving)
		return;
	/* Test hook (test_cfs_restripe_kill.sh): the batch recorded done, the others not told. */
	if (!result)
		cfs_test_gate(getenv("CFSD_TEST_HOLD_BATCH_END"));
	struct batch_lvb v = {.magic = BATCH_LVB_MAGIC, .first = first, .n = n, .rc = result};
	uint8_t lvb[CFSLOCK_LVB_LEN] = {0};
	memcpy(lvb, &v, sizeof v);
	cfslock_set_lvb(rc->moving, lvb);
	cfs_lock_put(&rc->moving);
}
