/* SPDX-License-Identifier: GPL-2.0-or-later */
/* ODM's cluster locks per file (see odm_cluster.h). */
#include "cfsd/odm_cluster.h"
#include "cfs/internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define CHECK_MS 200           /* how often the revoker looks for a fence of this node */
#define REVOKE_RETRY_S 1       /* a client that did not answer a revoke is asked again */
#define DELETE_TRIES 10        /* asking "use" EX without waiting: cached grants go meanwhile */
#define DELETE_RETRY_US 50000u
#define RECOVERY_POLL_US 100000u
#define FILES_KEPT 1024        /* entries kept of files nobody here uses (see forget_idle) */

struct file_locks {
	struct odm_cluster *oc;
	uint64_t ino;
	struct cfslock *map, *use;
	unsigned mappers;  /* maps out or being made here: map held PR */
	unsigned users;    /* client holds here: use held PR */
	unsigned changers; /* size changes here: map held EX */
	bool busy;         /* a thread waits for the lock manager on one of them */
	bool revoke_due;   /* another node wants the map lock */
	bool revoking;     /* the revoker works on it */
	struct file_locks *next;
};

struct odm_cluster {
	struct odm_server *s;
	struct cfs_fs *fs;
	pthread_mutex_t lock;
	pthread_cond_t changed;
	struct file_locks *files;
	size_t nfiles;
	pthread_t revoker;
	bool stopping;
	bool fence_revoked;
};

/* Runs in whichever thread dispatches the lock manager's callbacks: only records the wish. */
static void map_wanted(void *arg, struct cfslock *lk, int mode)
{
	(void)lk, (void)mode;
	struct file_locks *fl = arg;
	pthread_mutex_lock(&fl->oc->lock);
	fl->revoke_due = true;
	pthread_cond_broadcast(&fl->oc->changed);
	pthread_mutex_unlock(&fl->oc->lock);
}

static bool lock_idle(const struct cfslock *lk)
{
	return cfslock_mode(lk) < 0 && !cfslock_pending(lk);
}

/* Entries of files nobody here uses whose grants went back (to another node, or for the lock
 * cache's limit) leave memory once there are many: what bounds them is then the limit.
 * oc->lock held. */
static void forget_idle(struct odm_cluster *oc)
{
	for (struct file_locks **pp = &oc->files, *fl; oc->nfiles >= FILES_KEPT && (fl = *pp);) {
		if (fl->mappers || fl->users || fl->changers || fl->busy || fl->revoke_due ||
		    fl->revoking || !lock_idle(fl->map) || !lock_idle(fl->use)) {
			pp = &fl->next;
			continue;
		}
		*pp = fl->next;
		cfs_lock_put(&fl->map);
		cfs_lock_put(&fl->use);
		free(fl);
		oc->nfiles--;
	}
}

/* oc->lock held. */
static struct file_locks *file_locks(struct odm_cluster *oc, uint64_t ino)
{
	for (struct file_locks *fl = oc->files; fl; fl = fl->next)
		if (fl->ino == ino)
			return fl;
	forget_idle(oc);
	struct file_locks *fl = calloc(1, sizeof *fl);
	if (!fl)
		return NULL;
	char name[CFSLOCK_NAME_MAX];
	*fl = (struct file_locks){.oc = oc, .ino = ino};
	snprintf(name, sizeof name, "odm-map-%" PRIx64, ino);
	fl->map = cfslock_new(oc->fs->space, name, NULL, map_wanted, fl);
	snprintf(name, sizeof name, "odm-use-%" PRIx64, ino);
	fl->use = cfslock_new(oc->fs->space, name, NULL, NULL, fl);
	if (!fl->map || !fl->use) {
		cfs_lock_put(&fl->map);
		cfs_lock_put(&fl->use);
		free(fl);
		return NULL;
	}
	fl->next = oc->files;
	oc->files = fl;
	oc->nfiles++;
	return fl;
}

/* A dead node that had maps of this file may still have writes in flight to the LUNs: a new
 * map waits until it is recovered (after the fence interval, or its fence agent), when its
 * grants go.  Its PR alone would not keep ours off. */
static void wait_recovered(struct odm_cluster *oc, struct cfslock *lk)
{
	const char *resource = cfslock_name(lk);
	for (int i = 0; cfs_lock_recovering(oc->fs, resource, 0); i++) {
		if (i == 0)
			cfs_log(oc->fs, "ODM: %s: a node that held it died; waiting for its recovery",
				resource);
		usleep(RECOVERY_POLL_US);
	}
}

/* Ask for lk in mode (oc->lock held, dropped while waiting; one asker per file at a time).
 * EX is never a conversion from what this node kept: two nodes converting at once would wait
 * for each other. */
static int ask(struct file_locks *fl, struct cfslock *lk, int mode, unsigned flags)
{
	struct odm_cluster *oc = fl->oc;
	while (fl->busy)
		pthread_cond_wait(&oc->changed, &oc->lock);
	fl->busy = true;
	pthread_mutex_unlock(&oc->lock);
	int rc = 0;
	if (mode == CFSLOCK_EX && cfslock_mode(lk) >= 0 && cfslock_mode(lk) != CFSLOCK_EX)
		rc = cfslock_unlock_sync(lk);
	if (!rc)
		rc = cfslock_request_sync(lk, mode, flags);
	if (!rc && lk == fl->map)
		wait_recovered(oc, lk);
	pthread_mutex_lock(&oc->lock);
	fl->busy = false;
	pthread_cond_broadcast(&oc->changed);
	return cfs_lock_errno(rc);
}

/* The count a map, use or change takes on fl, and the lock it stands for. */
enum what { MAP, USE, CHANGE };

static unsigned *count_of(struct file_locks *fl, enum what w)
{
	return w == MAP ? &fl->mappers : w == USE ? &fl->users : &fl->changers;
}

/* Take a count, asking for the lock when the count was 0.  Maps and changes here exclude each
 * other (the callers' revokes already see to it): a change's EX must not wait for this
 * node's own PR, and a map's PR must not convert a change's EX down. */
static int count_up(struct odm_cluster *oc, uint64_t ino, enum what w)
{
	if (!oc)
		return 0;
	pthread_mutex_lock(&oc->lock);
	struct file_locks *fl = file_locks(oc, ino);
	int rc = fl ? 0 : -ENOMEM;
	while (fl && (fl->busy || (w == CHANGE && fl->mappers) || (w == MAP && fl->changers)))
		pthread_cond_wait(&oc->changed, &oc->lock);
	if (fl && *count_of(fl, w) == 0)
		rc = ask(fl, w == USE ? fl->use : fl->map, w == CHANGE ? CFSLOCK_EX : CFSLOCK_PR, 0);
	if (!rc)
		++*count_of(fl, w);
	pthread_mutex_unlock(&oc->lock);
	return rc;
}

/* Drop a count; at 0 the grant is kept, and given up when another node asks. */
static void count_down(struct odm_cluster *oc, uint64_t ino, enum what w)
{
	if (!oc)
		return;
	pthread_mutex_lock(&oc->lock);
	struct file_locks *fl = oc->files;
	while (fl && fl->ino != ino)
		fl = fl->next;
	unsigned *count = fl ? count_of(fl, w) : NULL;
	if (count && *count && --*count == 0) {
		cfslock_release(w == USE ? fl->use : fl->map);
		pthread_cond_broadcast(&oc->changed);
	}
	pthread_mutex_unlock(&oc->lock);
}

int odm_cluster_map_begin(struct odm_cluster *oc, uint64_t ino)
{
	return count_up(oc, ino, MAP);
}

void odm_cluster_map_end(struct odm_cluster *oc, uint64_t ino)
{
	count_down(oc, ino, MAP);
}

int odm_cluster_use_begin(struct odm_cluster *oc, uint64_t ino)
{
	return count_up(oc, ino, USE);
}

void odm_cluster_use_end(struct odm_cluster *oc, uint64_t ino)
{
	count_down(oc, ino, USE);
}

int odm_cluster_change_begin(struct odm_cluster *oc, uint64_t ino)
{
	return count_up(oc, ino, CHANGE);
}

void odm_cluster_change_end(struct odm_cluster *oc, uint64_t ino)
{
	count_down(oc, ino, CHANGE);
}

int odm_cluster_may_delete(struct odm_cluster *oc, uint64_t ino, char *msg, size_t msglen)
{
	if (!oc)
		return 0;
	pthread_mutex_lock(&oc->lock);
	struct file_locks *fl = file_locks(oc, ino);
	int rc = fl ? -EAGAIN : -ENOMEM;
	for (int i = 0; fl && rc == -EAGAIN && i < DELETE_TRIES; i++) {
		if (i) {
			pthread_mutex_unlock(&oc->lock);
			usleep(DELETE_RETRY_US);
			pthread_mutex_lock(&oc->lock);
		}
		rc = ask(fl, fl->use, CFSLOCK_EX, CFSLOCK_NOQUEUE | CFSLOCK_NOQUEUEBAST);
	}
	if (!rc)
		cfslock_release(fl->use); /* kept: another node's identify takes it back */
	pthread_mutex_unlock(&oc->lock);
	if (rc == -EAGAIN) {
		char name[CFSLOCK_NAME_MAX];
		snprintf(name, sizeof name, "odm-use-%" PRIx64, ino);
		snprintf(msg, msglen, "inode %" PRIu64 " is in use by ODM on node %u", ino,
			 cfs_lock_holder(oc->fs, name));
		rc = -EBUSY;
	}
	return rc;
}

/* oc->lock held. */
static struct file_locks *revoke_due(struct odm_cluster *oc)
{
	for (struct file_locks *fl = oc->files; fl; fl = fl->next)
		if (fl->revoke_due)
			return fl;
	return NULL;
}

static void revoke_for(struct odm_cluster *oc, uint64_t ino, bool *again)
{
	char msg[512] = "";
	pthread_mutex_unlock(&oc->lock);
	int rc = odm_revoke_here(oc->s, ino, msg, sizeof msg);
	pthread_mutex_lock(&oc->lock);
	*again = rc != 0;
	if (rc)
		cfs_log(oc->fs, "ODM: inode %" PRIu64 " wanted by another node: %s; asking again in "
			"%d s", ino, msg[0] ? msg : strerror(-rc), REVOKE_RETRY_S);
}

/* Revokes the maps another node waits for, and every map once this node is fenced. */
static void *revoker(void *arg)
{
	struct odm_cluster *oc = arg;
	pthread_mutex_lock(&oc->lock);
	while (!oc->stopping) {
		struct file_locks *fl = revoke_due(oc);
		bool again = false;
		if (fl) {
			fl->revoke_due = false;
			fl->revoking = true;
			revoke_for(oc, fl->ino, &again);
			fl->revoking = false;
			fl->revoke_due |= again;
		} else if (!oc->fence_revoked && cfs_fenced(oc->fs)) {
			revoke_for(oc, 0, &again);
			oc->fence_revoked = !again;
		}
		if (fl && !again)
			continue;
		struct timespec t;
		clock_gettime(CLOCK_MONOTONIC, &t);
		uint64_t ns = (uint64_t)t.tv_nsec + (again ? REVOKE_RETRY_S * 1000000000ull
							 : CHECK_MS * 1000000ull);
		t.tv_sec += (time_t)(ns / 1000000000ull);
		t.tv_nsec = (long)(ns % 1000000000ull);
		pthread_cond_timedwait(&oc->changed, &oc->lock, &t);
	}
	pthread_mutex_unlock(&oc->lock);
	return NULL;
}

int odm_cluster_create(struct odm_server *s, struct cfs_fs *fs, struct odm_cluster **out)
{
	*out = NULL;
	if (!fs->cluster || !fs->dboptimized) /* no ODM where a node mounts normally */
		return 0;
	struct odm_cluster *oc = calloc(1, sizeof *oc);
	if (!oc)
		return -ENOMEM;
	*oc = (struct odm_cluster){.s = s, .fs = fs};
	pthread_mutex_init(&oc->lock, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&oc->changed, &ca);
	pthread_condattr_destroy(&ca);
	int rc = -pthread_create(&oc->revoker, NULL, revoker, oc);
	if (rc) {
		pthread_cond_destroy(&oc->changed);
		pthread_mutex_destroy(&oc->lock);
		free(oc);
		return rc;
	}
	*out = oc;
	return 0;
}

void odm_cluster_destroy(struct odm_cluster *oc)
{
	if (!oc)
		return;
	pthread_mutex_lock(&oc->lock);
	oc->stopping = true;
	pthread_cond_broadcast(&oc->changed);
	pthread_mutex_unlock(&oc->lock);
	pthread_join(oc->revoker, NULL);
	while (oc->files) {
		struct file_locks *fl = oc->files;
		oc->files = fl->next;
		cfs_lock_put(&fl->map);
		cfs_lock_put(&fl->use);
		free(fl);
	}
	pthread_cond_destroy(&oc->changed);
	pthread_mutex_destroy(&oc->lock);
	free(oc);
}
