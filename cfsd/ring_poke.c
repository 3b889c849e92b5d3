/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Pokes of a FUSE io_uring queue.
 *
 * Why: the kernel gives a request to a free entry of the queue of the asking process's core,
 * and when none is free it queues the request; only an entry's COMMIT_AND_FETCH (an answer)
 * takes a queued request, a REGISTER of a new entry takes none (fuse_uring_do_register).
 * On a cluster mount a request left to wait for a lock another node holds parks its entry
 * (fuse_uring.c), and the thread registers a new one in its place; but a request that came
 * while every entry was taken stays queued until some entry of that queue is answered.  If
 * every taken entry is parked, that is when a lock is let go or the next request of that
 * core comes: a crowd of flock waits from one core left 4 of 40 waits (and any stat(2)
 * behind them) in the kernel until then.
 *
 * So once new entries are in, the queue is poked: a thread on its core asks the mount's root
 * for RING_POKE_XATTR, which takes a free entry (or queues behind the others, and an entry
 * taken before it is answered or parked, a poke more) and whose answer takes the first
 * queued request, whose answer takes the next.
 *
 * A poke waits in the kernel as long as the requests in front of it, so pokes come from a
 * few threads started as pokes find none idle. */
#include "cfsd/ring_poke.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>

#define POKERS 4 /* threads at most: each blocks only behind requests queued in the kernel */

struct ring_poker {
	pthread_mutex_t lock;
	pthread_cond_t wanted_came;
	char *mountpoint;
	unsigned ncores;
	bool *wanted; /* a poke of the core's queue is to be sent */
	unsigned threads, idle;
	bool stopping;
	bool orphaned; /* stopped with a poke in the kernel: its thread frees the whole */
	bool failure_logged;
};

static void poker_free(struct ring_poker *p)
{
	pthread_cond_destroy(&p->wanted_came);
	pthread_mutex_destroy(&p->lock);
	free(p->wanted);
	free(p->mountpoint);
	free(p);
}

int ring_poker_new(const char *mountpoint, unsigned ncores, struct ring_poker **out)
{
	struct ring_poker *p = calloc(1, sizeof *p);
	if (!p)
		return -ENOMEM;
	p->ncores = ncores;
	p->mountpoint = strdup(mountpoint);
	p->wanted = calloc(ncores, sizeof *p->wanted);
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->wanted_came, NULL);
	if (!p->mountpoint || !p->wanted) {
		poker_free(p);
		return -ENOMEM;
	}
	*out = p;
	return 0;
}

/* A queue whose poke is wanted, its want taken; -1 if none (p->lock held). */
static int take_wanted(struct ring_poker *p)
{
	for (unsigned i = 0; i < p->ncores; i++)
		if (p->wanted[i]) {
			p->wanted[i] = false;
			return (int)i;
		}
	return -1;
}

/* One poke of core qid's queue, from that core: 0, or what went wrong. */
static int poke(const char *mountpoint, unsigned qid)
{
	cpu_set_t one;
	CPU_ZERO(&one);
	CPU_SET(qid, &one);
	if (sched_setaffinity(0, sizeof one, &one))
		return -errno;
	char answer;
	ssize_t n = getxattr(mountpoint, RING_POKE_XATTR, &answer, 1);
	if (n < 0)
		return -errno;
	return n == 1 && answer == '1' ? 0 : -EPROTO; /* not cfsd's mount: another on top */
}

static void *poker_main(void *arg)
{
	struct ring_poker *p = arg;
	pthread_mutex_lock(&p->lock);
	for (;;) {
		int qid;
		while ((qid = take_wanted(p)) < 0 && !p->stopping)
			pthread_cond_wait(&p->wanted_came, &p->lock);
		if (qid < 0)
			break;
		p->idle--;
		pthread_mutex_unlock(&p->lock);
		int rc = poke(p->mountpoint, (unsigned)qid);
		pthread_mutex_lock(&p->lock);
		p->idle++;
		if (rc && !p->stopping && !p->failure_logged) {
			p->failure_logged = true;
			fprintf(stderr, "cfsd: io_uring: cannot poke core %d's queue through %s: %s "
					"(requests that came while its entries were taken may wait "
					"for the next one of that core)\n",
				qid, p->mountpoint, strerror(-rc));
		}
	}
	p->threads--;
	p->idle--;
	bool last = p->orphaned && !p->threads;
	pthread_mutex_unlock(&p->lock);
	if (last)
		poker_free(p);
	return NULL;
}

/* A poker thread more, with every signal blocked: signals are the session's (p->lock held). */
static void poker_start(struct ring_poker *p)
{
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_t thread;
	int rc = pthread_create(&thread, &attr, poker_main, p);
	pthread_attr_destroy(&attr);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (!rc) {
		p->threads++;
		p->idle++;
	} else if (!p->failure_logged) {
		p->failure_logged = true;
		fprintf(stderr, "cfsd: io_uring: no thread to poke queues: %s\n", strerror(rc));
	}
}

void ring_poker_want(struct ring_poker *p, unsigned qid)
{
	if (!p || qid >= p->ncores)
		return;
	pthread_mutex_lock(&p->lock);
	if (!p->stopping && !p->wanted[qid]) {
		p->wanted[qid] = true;
		if (!p->idle && p->threads < POKERS)
			poker_start(p);
		pthread_cond_signal(&p->wanted_came);
	}
	pthread_mutex_unlock(&p->lock);
}

void ring_poker_stop(struct ring_poker *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	p->stopping = true;
	pthread_cond_broadcast(&p->wanted_came);
	p->orphaned = p->threads > 0;
	bool free_now = !p->orphaned;
	pthread_mutex_unlock(&p->lock);
	if (free_now)
		poker_free(p);
}
