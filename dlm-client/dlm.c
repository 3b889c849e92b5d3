/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The "dlm" backend: the kernel DLM through libdlm (which owns the dlm_ prefix, so ours is
 * kdlm_), for sites that run dlm_controld.  The kernel
 * does the granting, recovery and fencing; this file maps libdlm's lock status blocks and ASTs
 * onto libcfslock's events.  Differences from the other backends, because libdlm's userspace
 * interface does not carry them: a blocking callback does not say which mode is wanted (it
 * reports EX), recovery is the kernel's business (cfslock_recovery_done is not supported), and
 * there is no table dump (use the kernel's debugfs dlm/<lockspace>_locks). */
#include "client.h"

#include <sys/types.h> /* libdlm.h uses mode_t without including it */

#include <libdlm.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DLM_CONTROL "/dev/misc/dlm-control"
#define DLM_EUNLOCK_STATUS 0x10002
#define DLM_ECANCEL_STATUS 0x10001

struct dlm_space {
	dlm_lshandle_t ls;
	int fd;
	pthread_t thread;
	int wake[2];
	bool stop;
};

/* Per lock: the status block libdlm fills, its value block, and the mode being asked for. */
struct dlm_lock {
	struct dlm_lksb lksb;
	char lvb[CFSLOCK_LVB_LEN];
	struct cfslock *lk;
	int target;
	struct dlm_lock *next;
};

/* libdlm's AST gets one argument, so each lock's side record is found by lock id (unique in
 * the process). */
#define SIDE_BUCKETS 4096
static struct dlm_lock *side[SIDE_BUCKETS];
static pthread_mutex_t side_lock = PTHREAD_MUTEX_INITIALIZER;

static struct dlm_lock *lock_of(struct cfslock *lk)
{
	pthread_mutex_lock(&side_lock);
	struct dlm_lock **pp = &side[lk->lkid % SIDE_BUCKETS];
	while (*pp && (*pp)->lk != lk)
		pp = &(*pp)->next;
	struct dlm_lock *d = *pp;
	if (!d && (d = calloc(1, sizeof *d))) {
		d->lk = lk;
		d->lksb.sb_lvbptr = d->lvb;
		*pp = d;
	}
	pthread_mutex_unlock(&side_lock);
	return d;
}

static uint32_t node_id_from_configfs(void)
{
	/* dlm_controld marks the local node in configfs: comms/<nodeid>/local holds 1. */
	char path[128], buf[8];
	for (uint32_t id = 1; id < 1024; id++) {
		snprintf(path, sizeof path, "/sys/kernel/config/dlm/cluster/comms/%u/local", id);
		FILE *f = fopen(path, "r");
		if (!f)
			continue;
		bool local = fgets(buf, sizeof buf, f) && buf[0] == '1';
		fclose(f);
		if (local)
			return id;
	}
	return 0;
}

static int kdlm_open(struct cfslock_client *c)
{
	if (access(DLM_CONTROL, R_OK | W_OK) != 0)
		return -ENODEV; /* no kernel DLM here: modprobe dlm, start dlm_controld */
	c->node = node_id_from_configfs();
	return 0;
}

static void kdlm_close(struct cfslock_client *c)
{
	(void)c;
}

static void *dispatch_thread(void *arg)
{
	struct dlm_space *ds = arg;
	while (!ds->stop) {
		struct pollfd p[2] = {{.fd = ds->fd, .events = POLLIN},
				      {.fd = ds->wake[0], .events = POLLIN}};
		if (poll(p, 2, 500) > 0 && (p[0].revents & POLLIN))
			dlm_dispatch(ds->fd);
	}
	return NULL;
}

static int kdlm_space_open(struct cfslock_space *s)
{
	struct dlm_space *ds = calloc(1, sizeof *ds);
	if (!ds)
		return -ENOMEM;
	ds->ls = dlm_open_lockspace(s->name);
	if (!ds->ls)
		ds->ls = dlm_create_lockspace(s->name, 0600);
	if (!ds->ls) {
		int e = errno ? errno : ENODEV;
		free(ds);
		return -e;
	}
	ds->fd = dlm_ls_get_fd(ds->ls);
	if (pipe(ds->wake) < 0 || pthread_create(&ds->thread, NULL, dispatch_thread, ds)) {
		dlm_close_lockspace(ds->ls);
		free(ds);
		return -EAGAIN;
	}
	s->backend = ds;
	return 0;
}

static void kdlm_space_close(struct cfslock_space *s)
{
	struct dlm_space *ds = s->backend;
	ds->stop = true;
	if (write(ds->wake[1], "x", 1) < 0) {
		/* the thread's poll times out anyway */
	}
	pthread_join(ds->thread, NULL);
	close(ds->wake[0]);
	close(ds->wake[1]);
	dlm_close_lockspace(ds->ls);
	free(ds);
}

static void ast(void *arg)
{
	struct dlm_lock *d = arg;
	struct lt_event ev = {.lkid = d->lk->lkid, .mode = d->target,
			      .lvb_valid = !(d->lksb.sb_flags & DLM_SBF_VALNOTVALID)};
	memcpy(ev.lvb, d->lvb, CFSLOCK_LVB_LEN);
	int st = d->lksb.sb_status;
	if (st == 0) {
		ev.type = LT_EV_GRANTED;
	} else if (st == DLM_EUNLOCK_STATUS || st == -DLM_EUNLOCK_STATUS) {
		ev.type = LT_EV_UNLOCKED;
		ev.mode = -1;
	} else {
		ev.type = LT_EV_FAILED;
		ev.mode = d->lk->granted;
		ev.status = (st == DLM_ECANCEL_STATUS || st == -DLM_ECANCEL_STATUS) ? -ECANCELED
			    : st < 0 ? st : -st;
	}
	cfslock_deliver(d->lk->s->c, d->lk, &ev);
}

static void bast(void *arg)
{
	struct dlm_lock *d = arg;
	struct lt_event ev = {.type = LT_EV_BLOCKING, .lkid = d->lk->lkid, .mode = CFSLOCK_EX};
	cfslock_deliver(d->lk->s->c, d->lk, &ev);
}

static int lock_call(struct cfslock *lk, int mode, unsigned flags, const uint8_t *lvb,
		     bool convert)
{
	struct dlm_space *ds = lk->s->backend;
	struct dlm_lock *d = lock_of(lk);
	if (!d)
		return -ENOMEM;
	d->target = mode;
	if (lvb)
		memcpy(d->lvb, lvb, CFSLOCK_LVB_LEN);
	uint32_t f = LKF_VALBLK | (flags & CFSLOCK_NOQUEUE ? LKF_NOQUEUE : 0) |
		     (flags & CFSLOCK_NOQUEUEBAST ? LKF_NOQUEUEBAST : 0) | (convert ? LKF_CONVERT : 0);
	int rc = dlm_ls_lock(ds->ls, (uint32_t)mode, &d->lksb, f, lk->name, (unsigned)lk->len, 0,
			     ast, d, bast, NULL);
	return rc ? -errno : 0;
}

static int kdlm_request(struct cfslock *lk, int mode, unsigned flags)
{
	return lock_call(lk, mode, flags, NULL, false);
}

static int kdlm_convert(struct cfslock *lk, int mode, unsigned flags, const uint8_t *lvb)
{
	return lock_call(lk, mode, flags, lvb, true);
}

static int kdlm_unlock(struct cfslock *lk, const uint8_t *lvb)
{
	struct dlm_space *ds = lk->s->backend;
	struct dlm_lock *d = lock_of(lk);
	if (!d)
		return -ENOMEM;
	if (lvb)
		memcpy(d->lvb, lvb, CFSLOCK_LVB_LEN);
	return dlm_ls_unlock(ds->ls, d->lksb.sb_lkid, lvb ? LKF_VALBLK : 0, &d->lksb, d) ? -errno
											 : 0;
}

static int kdlm_cancel(struct cfslock *lk)
{
	struct dlm_space *ds = lk->s->backend;
	struct dlm_lock *d = lock_of(lk);
	if (!d)
		return -ENOMEM;
	return dlm_ls_unlock(ds->ls, d->lksb.sb_lkid, LKF_CANCEL, &d->lksb, d) ? -errno : 0;
}

static int kdlm_recovery_done(struct cfslock_space *s, uint32_t node)
{
	(void)s;
	(void)node;
	return -EOPNOTSUPP; /* the kernel DLM recovers with dlm_controld */
}

static int kdlm_dump(struct cfslock_space *s, lt_visit_fn visit, void *arg)
{
	(void)s;
	(void)visit;
	(void)arg;
	return -EOPNOTSUPP; /* see /sys/kernel/debug/dlm/<lockspace>_locks */
}

static void kdlm_forget(struct cfslock *lk)
{
	pthread_mutex_lock(&side_lock);
	struct dlm_lock **pp = &side[lk->lkid % SIDE_BUCKETS];
	while (*pp && (*pp)->lk != lk)
		pp = &(*pp)->next;
	struct dlm_lock *d = *pp;
	if (d)
		*pp = d->next;
	pthread_mutex_unlock(&side_lock);
	free(d);
}

const struct cfslock_backend_ops cfslock_dlm_ops = {
	.name = "dlm", .open = kdlm_open, .close = kdlm_close,
	.space_open = kdlm_space_open, .space_close = kdlm_space_close,
	.request = kdlm_request, .convert = kdlm_convert, .unlock = kdlm_unlock,
	.cancel = kdlm_cancel, .recovery_done = kdlm_recovery_done, .dump = kdlm_dump,
	.forget = kdlm_forget,
};
