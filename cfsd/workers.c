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
 * At most CFSD_WORKERS threads, the ceiling libfuse's loop had; a worker waiting for a
 * lock holds its thread as it did there.  The loop ends as libfuse's does:
 * the kernel says ENODEV when the filesystem is unmounted, a signal makes libfuse's handler
 * mark the session exited; the workers still reading are cancelled (read is a cancellation
 * point; a worker answering a request is not cancelled until it is done). */
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
};

struct pool {
	struct fuse_session *se;
	struct dev_direct *direct; /* where a dboptimized mount's direct I/O goes, or NULL */
	sem_t finished;   /* a worker has stopped */
	int error;        /* the first read error, negative errno (atomic) */
	pthread_mutex_t lock;
	unsigned started; /* workers[0..started) run */
	unsigned idle;    /* of them, those not answering a request */
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
	p->idle++;
	return 0;
}

static bool is_forget(const struct fuse_buf *buf)
{
	uint32_t op = ((const struct fuse_in_header *)buf->mem)->opcode;
	return op == FUSE_FORGET || op == FUSE_BATCH_FORGET;
}

/* A worker starts answering a request (busy) or is done with it.  Workers are started as
 * requests find none idle, as in libfuse's loop: with all CFSD_WORKERS waiting from the
 * start, the kernel hands requests round all of them, and each request's data goes through
 * another megabyte of buffer (a third more CPU per 1 MiB write here). */
static void set_busy(struct pool *p, bool busy)
{
	pthread_mutex_lock(&p->lock);
	if (!busy)
		p->idle++;
	else if (!--p->idle && p->started < CFSD_WORKERS && !fuse_session_exited(p->se))
		start_worker(p); /* on failure the others go on */
	pthread_mutex_unlock(&p->lock);
}

static void *work(void *arg)
{
	struct worker *w = arg;
	struct pool *p = w->pool;
	while (!fuse_session_exited(p->se)) {
		pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, NULL);
		int res = fuse_session_receive_buf(p->se, &w->buf);
		pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
		if (res == -EINTR)
			continue;
		if (res < 0) {
			int none = 0;
			__atomic_compare_exchange_n(&p->error, &none, res, false, __ATOMIC_RELAXED,
						    __ATOMIC_RELAXED);
			fuse_session_exit(p->se);
		}
		if (res <= 0) /* 0: unmounted, or a signal ended the session */
			break;
		bool counted = !is_forget(&w->buf); /* a burst of FORGETs starts no workers */
		if (counted)
			set_busy(p, true);
		/* no local's address is taken here: a cancelled read would leave its poison for ASan */
		if (!dev_direct_take(p->direct, &w->region, &w->buf.mem, (size_t)res))
			fuse_session_process_buf(p->se, &w->buf);
		if (counted)
			set_busy(p, false);
	}
	sem_post(&p->finished);
	return NULL;
}

int cfsd_serve_requests(struct fuse_session *se, struct dev_direct *direct)
{
	struct pool p = {.se = se, .direct = direct};
	sem_init(&p.finished, 0, 0);
	pthread_mutex_init(&p.lock, NULL);
	pthread_mutex_lock(&p.lock);
	int rc = start_worker(&p);
	pthread_mutex_unlock(&p.lock);
	while (!rc && !fuse_session_exited(se)) /* sem_wait returns early on a signal */
		sem_wait(&p.finished);
	pthread_mutex_lock(&p.lock); /* no worker starts after this */
	unsigned started = p.started;
	for (unsigned i = 0; i < started; i++)
		pthread_cancel(p.workers[i].thread);
	pthread_mutex_unlock(&p.lock);
	for (unsigned i = 0; i < started; i++) {
		pthread_join(p.workers[i].thread, NULL);
		free(p.workers[i].region);
	}
	fuse_session_reset(se);
	pthread_mutex_destroy(&p.lock);
	sem_destroy(&p.finished);
	return rc ? rc : p.error;
}
