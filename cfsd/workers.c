/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The threads that read requests from /dev/fuse and answer them, each into its own buffer.
 *
 * libfuse's own loop reads a request into a buffer from malloc, where a WRITE's data lands
 * 80 bytes (the request header and fuse_write_in) past an unaligned address; the LUNs are
 * opened O_DIRECT, so every write was copied into an aligned buffer before it went out.
 * Here each worker's buffer starts 80 bytes before a page boundary, so a WRITE's data is
 * page-aligned and cfs_write hands it to the volume as it is (cfs/file.c).  On a dboptimized
 * mount a direct READ or WRITE goes to the LUNs without the worker (dev_direct.c), which
 * reads the next request meanwhile.
 *
 * At most CFSD_WORKERS threads, the ceiling libfuse's loop had, started as requests find
 * no reader left (with all of them reading from the start, each request's data went through
 * another megabyte of buffer: a third more CPU per 1 MiB write); a worker waiting for a lock
 * holds its thread as it did there.  Only as many as there are CPUs wait in read at once,
 * and one more for each worker answering a request itself: the kernel wakes waiting readers
 * in turn, so with sixteen waiting nearly every request of a database's direct I/O at depth
 * 32 woke a sleeping thread and the readers fought over the kernel's queue lock; with two,
 * a reader back from a request mostly finds the next one queued.  Those answering requests
 * (an O_DSYNC write each, say) count, so that a burst of them finds as many readers as it
 * did.  The others park until a reader that must answer a request itself leaves no reader
 * behind.  Measured against all sixteen reading: 4 KiB direct writes at depth 32 15% faster,
 * creates and unlinks 6-19%, dbench 25-33%.  The loop ends as libfuse's does: the kernel
 * says ENODEV when the filesystem is unmounted, a signal makes libfuse's handler
 * mark the session exited; the parked workers are woken to see it, those still reading are
 * cancelled (read is a cancellation point; a worker answering a request is not cancelled
 * until it is done). */
#define FUSE_USE_VERSION 312
#include "cfsd/fuse_ops.h"

#include "cfsd/dev_direct.h"

#include <errno.h>
#include <fuse_lowlevel.h>
#include <linux/fuse.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CFSD_WORKERS 16

struct worker {
	struct pool *pool;
	pthread_t thread;
	void *region; /* what the buffer was allocated as */
	struct fuse_buf buf;
	struct dev_direct_slot *here; /* see dev_direct_take */
};

struct pool {
	struct fuse_session *se;
	struct dev_direct *direct; /* where a dboptimized mount's direct I/O goes, or NULL */
	sem_t finished;   /* a worker has stopped */
	int error;        /* the first read error, negative errno (atomic) */
	pthread_mutex_t lock;
	pthread_cond_t unparked;
	unsigned started; /* workers[0..started) run */
	unsigned reading; /* of them, those waiting in read */
	unsigned parked;  /* and those waiting for their turn to read */
	unsigned answering; /* and those answering a request they read */
	unsigned readers_max;
	struct worker workers[CFSD_WORKERS];
};

static void *work(void *arg);

/* One more worker (p->lock held). */
static int start_worker(struct pool *p)
{
	struct worker *w = &p->workers[p->started];
	w->pool = p;
	char *mem;
	size_t size;
	int rc = cfsd_request_buffer(&w->region, &mem, &size);
	if (!rc) {
		w->buf = (struct fuse_buf){.mem = mem, .size = size};
		rc = -pthread_create(&w->thread, NULL, work, w);
	}
	if (rc) {
		free(w->region);
		fprintf(stderr, "cfsd: cannot start a FUSE worker: %s\n", strerror(-rc));
		return rc;
	}
	p->started++;
	return 0;
}

static bool is_forget(const struct fuse_buf *buf)
{
	uint32_t op = ((const struct fuse_in_header *)buf->mem)->opcode;
	return op == FUSE_FORGET || op == FUSE_BATCH_FORGET;
}

/* Waits until this worker may read (see the top); false when the session has ended.
 * answered: it comes back from answering a request itself. */
static bool take_turn(struct pool *p, bool answered)
{
	pthread_mutex_lock(&p->lock);
	if (answered)
		p->answering--;
	while (p->reading >= p->readers_max + p->answering && !fuse_session_exited(p->se)) {
		p->parked++;
		pthread_cond_wait(&p->unparked, &p->lock);
		p->parked--;
	}
	bool go = !fuse_session_exited(p->se);
	if (go)
		p->reading++;
	pthread_mutex_unlock(&p->lock);
	return go;
}

/* A reader has a request.  If it must answer it itself and no reader is left, a parked
 * worker reads instead, or a new one is started, as libfuse's loop starts one when none is
 * idle: a request that waits for a lock must not hold up those behind it. */
static void leave_reading(struct pool *p, bool answering)
{
	pthread_mutex_lock(&p->lock);
	p->answering += answering;
	if (!--p->reading && answering && !fuse_session_exited(p->se)) {
		if (p->parked)
			pthread_cond_signal(&p->unparked);
		else if (p->started < CFSD_WORKERS)
			start_worker(p); /* on failure the others go on */
	}
	pthread_mutex_unlock(&p->lock);
}

static void *work(void *arg)
{
	struct worker *w = arg;
	struct pool *p = w->pool;
	bool answered = false;
	/* Only the read may be cancelled: a new worker cancelled in its first take_turn's wait
	 * would die holding p->lock (the wait takes it again), and the shutdown would hang. */
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
	while (take_turn(p, answered)) {
		pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, NULL);
		int res = fuse_session_receive_buf(p->se, &w->buf);
		pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
		if (res < 0 && res != -EINTR) {
			int none = 0;
			__atomic_compare_exchange_n(&p->error, &none, res, false, __ATOMIC_RELAXED,
						    __ATOMIC_RELAXED);
			fuse_session_exit(p->se);
		}
		/* no local's address is taken here: a cancelled read would leave its poison for ASan */
		bool taken = res > 0 && dev_direct_take(p->direct, &w->region, &w->buf.mem,
							(size_t)res, &w->here);
		bool moving_here = taken && w->here;
		/* a burst of FORGETs wakes no workers */
		answered = (res > 0 && !taken && !is_forget(&w->buf)) || moving_here;
		leave_reading(p, answered);
		if (moving_here)
			dev_direct_run_here(w->here);
		if (res == -EINTR || taken)
			continue;
		if (res <= 0) /* 0: unmounted, or a signal ended the session */
			break;
		fuse_session_process_buf(p->se, &w->buf);
	}
	sem_post(&p->finished);
	return NULL;
}

int cfsd_serve_requests(struct fuse_session *se, struct dev_direct *direct)
{
	struct pool p = {.se = se, .direct = direct};
	sem_init(&p.finished, 0, 0);
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	p.readers_max = cpus < 2 ? 2 : cpus > CFSD_WORKERS ? CFSD_WORKERS : (unsigned)cpus;
	pthread_mutex_init(&p.lock, NULL);
	pthread_cond_init(&p.unparked, NULL);
	pthread_mutex_lock(&p.lock);
	int rc = start_worker(&p);
	pthread_mutex_unlock(&p.lock);
	while (!rc && !fuse_session_exited(se)) /* sem_wait returns early on a signal */
		sem_wait(&p.finished);
	pthread_mutex_lock(&p.lock); /* no worker starts after this */
	pthread_cond_broadcast(&p.unparked); /* the parked ones see the session ended */
	unsigned started = p.started;
	for (unsigned i = 0; i < started; i++)
		pthread_cancel(p.workers[i].thread);
	pthread_mutex_unlock(&p.lock);
	for (unsigned i = 0; i < started; i++) {
		pthread_join(p.workers[i].thread, NULL);
		free(p.workers[i].region);
	}
	fuse_session_reset(se);
	pthread_cond_destroy(&p.unparked);
	pthread_mutex_destroy(&p.lock);
	sem_destroy(&p.finished);
	return rc ? rc : p.error;
}
