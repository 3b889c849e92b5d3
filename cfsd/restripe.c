/* SPDX-License-Identifier: GPL-2.0-or-later */
/* cvm restripe on a mounted volume: the daemon runs it on its own volume handle, so that the
 * filesystem's I/O and its ODM clients' go on meanwhile, each kept out of the batch in motion
 * by the restripe gate (cvm/restripe_gate.c).
 *
 * Every map handed to an ODM client is revoked first: the clients ask again, are told of a
 * new layout generation and open the volume again, which attaches them to the gate.  The
 * filesystem's own I/O stops while its handle switches to the gate (cfs_volume_hold).
 *
 * On a cluster every other node's daemon keeps its node's I/O out of each batch
 * (restripe_cluster.c). */
#include "cfsd/restripe.h"

#include "cfs/internal.h"
#include "cfsd/odm_server.h"
#include "cfsd/restripe_cluster.h"
#include "tools/common.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum job_state { JOB_RUNNING, JOB_PAUSED, JOB_DONE, JOB_FAILED };

struct cfsd_restripe {
	struct cfsd *d;
	pthread_mutex_t lock;
	pthread_t thread;
	bool joinable;
	enum job_state state;
	volatile int stop;
	bool revoking; /* the ODM clients' maps are held back until the gate exists */
	struct cvm_restripe_opts opts;
	cvm_uuid luns[CVM_MAX_LUNS]; /* opts.luns */
	struct cvm_restripe_progress last;
	char error[256];
	char lock_error[256]; /* why a batch's cluster lock failed */
};

static pthread_mutex_t jobs_lock = PTHREAD_MUTEX_INITIALIZER;
static struct cfsd_restripe *job; /* a daemon serves one mount */

static void end_revoke(struct cfsd_restripe *j)
{
	if (j->revoking) {
		odm_revoke_end(j->d->odm, 0);
		j->revoking = false;
	}
}

/* The first report comes once the gate exists: the ODM clients may map again. */
static void progress(void *arg, const struct cvm_restripe_progress *p)
{
	struct cfsd_restripe *j = arg;
	end_revoke(j);
	pthread_mutex_lock(&j->lock);
	j->last = *p;
	pthread_mutex_unlock(&j->lock);
}

static void hold_io(void *arg, bool hold)
{
	struct cfsd_restripe *j = arg;
	cfs_volume_hold(j->d->fs, hold);
}

int cfsd_config_now(struct cfsd *d, struct cvm_config *cfg)
{
	struct cvm_scan scan;
	int rc = cvm_scan_paths(d->scan->paths, d->scan->n, &scan);
	if (!rc) {
		rc = cvm_scan_find_volume(&scan, d->volume, cfg);
		cvm_scan_free(&scan);
	}
	return rc;
}

static int batch_begin(void *arg, uint64_t first, uint32_t n)
{
	(void)n;
	struct cfsd_restripe *j = arg;
	return restripe_cluster_batch_begin(j->d, first, j->lock_error, sizeof j->lock_error);
}

static void batch_end(void *arg, uint64_t first, uint32_t n, int rc)
{
	struct cfsd_restripe *j = arg;
	restripe_cluster_batch_end(j->d, first, n, rc);
}

#define REVOKE_TRIES 6 /* an ODM process slow to give its maps back: a minute in all */

/* Every ODM map goes before the gate is made: the clients open the volume again then. */
static int revoke_maps(struct cfsd *d, char *msg, size_t msglen)
{
	int rc = -EBUSY;
	for (int i = 0; i < REVOKE_TRIES && rc == -EBUSY; i++)
		rc = odm_revoke_begin(d->odm, 0, NULL, msg, msglen);
	return rc;
}

/* The mount uses every LUN of the volume now: one that `cvm grow` added must be taken in
 * by `cfs grow` first (the restripe runs on the mount's own handle). */
static int luns_taken_in(struct cfsd *d, const struct cvm_config *now, char *msg, size_t len)
{
	pthread_rwlock_rdlock(&d->fs->vol_lock);
	uint32_t here = cvm_volume_config(d->fs->vol)->nluns;
	pthread_rwlock_unlock(&d->fs->vol_lock);
	if (now->nluns == here)
		return 0;
	snprintf(msg, len, "volume %s has %u LUNs, of which this mount uses %u: run 'cfs grow' on "
		 "the mount first, then the restripe", d->volume, now->nluns, here);
	return -ESTALE;
}

static void *run(void *arg)
{
	struct cfsd_restripe *j = arg;
	struct cfsd *d = j->d;
	char msg[256] = "";
	struct cvm_config *now = malloc(sizeof *now), *cfg = malloc(sizeof *cfg);
	int rc = now && cfg ? 0 : -ENOMEM;
	/* What the restripe would refuse is refused before the maps go.  A grow by another node
	 * that this node has not taken in yet is taken in first. */
	if (!rc && !(rc = cfsd_config_now(d, now)) && !(rc = cvm_restripe_check(now, &j->opts)) &&
	    d->restripe_cluster && (rc = cfs_growth_catch_up(d->fs)))
		snprintf(msg, sizeof msg, "cannot take in the volume's last growth: %s", strerror(-rc));
	if (!rc)
		rc = luns_taken_in(d, now, msg, sizeof msg);
	if (!rc && d->odm)
		rc = revoke_maps(d, msg, sizeof msg);
	j->revoking = d->odm && !rc;
	if (!rc)
		rc = cvm_volume_restripe_online(d->fs->vol, now, &j->opts, cfg);
	restripe_cluster_disown(d);
	if (rc && rc != -EINTR && !msg[0] && j->lock_error[0])
		snprintf(msg, sizeof msg, "%s", j->lock_error);
	if (rc && rc != -EINTR && !msg[0])
		snprintf(msg, sizeof msg, "%s", rc == -ENOMEM ? strerror(ENOMEM) : cvm_last_error());
	end_revoke(j);
	pthread_mutex_lock(&j->lock);
	j->state = rc == 0 ? JOB_DONE : rc == -EINTR ? JOB_PAUSED : JOB_FAILED;
	snprintf(j->error, sizeof j->error, "%s", msg);
	pthread_mutex_unlock(&j->lock);
	if (rc == 0)
		cfs_log(d->fs, "volume %s: restriped: %s, generation %llu", d->volume,
			cvm_describe_sets(cfg, msg, sizeof msg), (unsigned long long)cfg->generation);
	else if (rc == -EINTR)
		cfs_log(d->fs, "volume %s: restripe paused at move %llu of %llu", d->volume,
			(unsigned long long)j->last.moves_done, (unsigned long long)j->last.moves_total);
	else
		cfs_log(d->fs, "volume %s: restripe failed: %s", d->volume, msg);
	free(now);
	free(cfg);
	return NULL;
}

static int refuse(char *msg, size_t msglen, int rc, const char *why, const char *volume)
{
	snprintf(msg, msglen, why, volume);
	return rc;
}

int cfsd_restripe_start(struct cfsd *d, const struct cvm_restripe_opts *asked, bool staged_only,
			char *msg, size_t msglen)
{
	if (d->fs->ro)
		return refuse(msg, msglen, -EROFS, "volume %s is mounted read-only here", d->volume);
	pthread_mutex_lock(&jobs_lock);
	struct cfsd_restripe *j = job;
	if (j && j->state == JOB_RUNNING) {
		pthread_mutex_unlock(&jobs_lock);
		return refuse(msg, msglen, -EBUSY, "volume %s is being restriped already; "
			      "cvm show says how far it is", d->volume);
	}
	int rc = restripe_cluster_own(d, msg, msglen);
	if (rc) {
		pthread_mutex_unlock(&jobs_lock);
		return rc;
	}
	if (j && j->joinable)
		pthread_join(j->thread, NULL);
	if (!j && !(j = calloc(1, sizeof *j))) {
		restripe_cluster_disown(d);
		pthread_mutex_unlock(&jobs_lock);
		return -ENOMEM;
	}
	if (!job)
		pthread_mutex_init(&j->lock, NULL);
	job = j;
	j->d = d;
	j->state = JOB_RUNNING;
	j->stop = staged_only; /* paused before the first new batch */
	j->joinable = false;
	j->last = (struct cvm_restripe_progress){0};
	j->error[0] = 0;
	j->lock_error[0] = 0;
	j->opts = (struct cvm_restripe_opts){.stop = &j->stop, .progress = progress,
					     .hold_io = hold_io, .arg = j};
	if (asked) {
		j->opts.stripe_width = asked->stripe_width;
		j->opts.rate_bytes = asked->rate_bytes;
		j->opts.nluns = asked->nluns;
		j->opts.luns = j->luns;
		memcpy(j->luns, asked->luns, asked->nluns * sizeof *asked->luns);
	}
	if (d->restripe_cluster) {
		j->opts.batch_begin = batch_begin;
		j->opts.batch_end = batch_end;
	}
	rc = -pthread_create(&j->thread, NULL, run, j);
	if (rc) {
		j->state = JOB_FAILED;
		restripe_cluster_disown(d);
	}
	else
		j->joinable = true;
	pthread_mutex_unlock(&jobs_lock);
	if (rc)
		return refuse(msg, msglen, rc, "volume %s: cannot start a thread", d->volume);
	cfs_log(d->fs, "volume %s: restripe started%s", d->volume,
		staged_only ? " to finish a batch left staged" : j->opts.rate_bytes ? " (throttled)" : "");
	return 0;
}

int cfsd_restripe_stop(struct cfsd *d)
{
	(void)d;
	pthread_mutex_lock(&jobs_lock);
	int rc = job && job->state == JOB_RUNNING ? 0 : -ENOENT;
	if (!rc)
		job->stop = 1;
	pthread_mutex_unlock(&jobs_lock);
	return rc;
}

bool cfsd_restripe_running(struct cfsd *d)
{
	pthread_mutex_lock(&jobs_lock);
	bool running = job && job->state == JOB_RUNNING;
	pthread_mutex_unlock(&jobs_lock);
	return running || restripe_cluster_owner(d);
}

bool cfsd_restripe_status(struct cfsd *d, RestripeStatus *rs, char *state, char *error)
{
	(void)d;
	static const char *const names[] = {"running", "paused", "done", "failed"};
	pthread_mutex_lock(&jobs_lock);
	struct cfsd_restripe *j = job;
	if (j) {
		pthread_mutex_lock(&j->lock);
		restripe_status__init(rs);
		snprintf(state, 16, "%s", j->state == JOB_RUNNING && j->stop ? "stopping"
								     : names[j->state]);
		rs->state = state;
		rs->moves_done = j->last.moves_done;
		rs->moves_total = j->last.moves_total;
		rs->chunk_bytes = j->last.chunk_bytes;
		rs->moved_bytes = j->last.moved_bytes;
		rs->seconds = j->last.seconds;
		rs->has_io_waits = rs->has_io_wait_max_us = rs->has_io_held = true;
		rs->io_waits = j->last.io_waits;
		rs->io_wait_max_us = j->last.io_wait_max_ns / 1000;
		rs->io_held = j->last.io_held;
		if (j->error[0]) {
			snprintf(error, 256, "%s", j->error);
			rs->error = error;
		}
		pthread_mutex_unlock(&j->lock);
	}
	pthread_mutex_unlock(&jobs_lock);
	return j != NULL;
}

void cfsd_restripe_end(struct cfsd *d)
{
	cfsd_restripe_stop(d);
	pthread_mutex_lock(&jobs_lock);
	struct cfsd_restripe *j = job;
	job = NULL;
	pthread_mutex_unlock(&jobs_lock);
	if (!j)
		return;
	if (j->joinable)
		pthread_join(j->thread, NULL);
	pthread_mutex_destroy(&j->lock);
	free(j);
}
