/* SPDX-License-Identifier: GPL-2.0-or-later */
/* libcfslock through the local backend: the client API, callbacks on dispatch, LVBs, and
 * mutual exclusion among threads that each act as a separate client. */
#include "dlm-client/cfslock.h"

#include <criterion/criterion.h>
#include <fcntl.h>
#include <unistd.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

struct seen {
	int done_calls, last_status, blocking_calls, wanted;
};

static void on_done(void *arg, struct cfslock *lk, int status)
{
	(void)lk;
	struct seen *s = arg;
	s->done_calls++;
	s->last_status = status;
}

static void on_blocking(void *arg, struct cfslock *lk, int wanted)
{
	(void)lk;
	struct seen *s = arg;
	s->blocking_calls++;
	s->wanted = wanted;
}

static struct cfslock_client *open_client(void)
{
	struct cfslock_client *c;
	cr_assert_eq(cfslock_client_open("local", NULL, &c), 0);
	return c;
}

/* Two clients of one lockspace: two "nodes" as far as the local backend goes. */
struct pair {
	struct cfslock_client *a, *b;
	struct cfslock_space *sa, *sb;
};

static struct pair open_pair(const char *space)
{
	struct pair p = {open_client(), open_client(), NULL, NULL};
	cr_assert_eq(cfslock_space_open(p.a, space, &p.sa), 0);
	cr_assert_eq(cfslock_space_open(p.b, space, &p.sb), 0);
	return p;
}

static void close_pair(struct pair *p)
{
	cfslock_space_close(p->sa);
	cfslock_space_close(p->sb);
	cfslock_client_close(p->a);
	cfslock_client_close(p->b);
}

/* Run both clients' callbacks until *calls is not 0 (at most two seconds). */
static void dispatch_until(struct pair *p, const int *calls)
{
	for (int i = 0; i < 2000 && !*calls; i++) {
		cfslock_dispatch(p->a);
		cfslock_dispatch(p->b);
		usleep(1000);
	}
}

Test(local, unknown_backend_is_refused)
{
	struct cfslock_client *c;
	cr_assert_eq(cfslock_client_open("carrier-pigeon", NULL, &c), -EPROTONOSUPPORT);
}

Test(local, callbacks_run_only_in_dispatch)
{
	struct pair p = open_pair("t1");
	struct cfslock_client *a = p.a, *b = p.b;
	struct cfslock_space *sa = p.sa, *sb = p.sb;
	struct seen x = {0}, y = {0};
	struct cfslock *la = cfslock_new(sa, "inode:42", on_done, on_blocking, &x);
	struct cfslock *lb = cfslock_new(sb, "inode:42", on_done, on_blocking, &y);
	cr_assert_eq(cfslock_request(la, CFSLOCK_EX, 0), 0);
	cr_assert_eq(x.done_calls, 0, "a callback ran outside dispatch");
	cr_assert_eq(cfslock_request(la, CFSLOCK_PR, 0), -EBUSY, "second request while pending");
	cr_assert_eq(cfslock_dispatch(a), 1);
	cr_assert_eq(x.done_calls, 1);
	cr_assert_eq(x.last_status, 0);
	cr_assert_eq(cfslock_mode(la), CFSLOCK_EX);

	cr_assert_eq(cfslock_request(lb, CFSLOCK_PR, 0), 0);
	cfslock_dispatch(a);
	cr_assert_eq(x.blocking_calls, 1, "the holder was not told");
	cr_assert_eq(x.wanted, CFSLOCK_PR);
	cfslock_dispatch(b);
	cr_assert_eq(y.done_calls, 0, "granted over EX");
	/* The holder answers the blocking callback by converting down. */
	cr_assert_eq(cfslock_request_sync(la, CFSLOCK_PR, 0), 0);
	cfslock_dispatch(b);
	cr_assert_eq(y.done_calls, 1);
	cr_assert_eq(cfslock_mode(lb), CFSLOCK_PR);
	cr_assert_eq(cfslock_unlock_sync(la), 0);
	cr_assert_eq(cfslock_unlock_sync(lb), 0);
	cfslock_free(la);
	cfslock_free(lb);
	close_pair(&p);
}

/* A lock freed with an event still queued for it (a blocking notice here): the dispatch that
 * follows must not run it (it would use freed memory; ASan says so). */
Test(local, free_drops_queued_events)
{
	struct pair p = open_pair("t6");
	struct seen x = {0}, y = {0}, z = {0};
	struct cfslock *la = cfslock_new(p.sa, "inode:7", on_done, on_blocking, &x);
	struct cfslock *other = cfslock_new(p.sa, "inode:8", on_done, on_blocking, &z);
	struct cfslock *lb = cfslock_new(p.sb, "inode:7", on_done, on_blocking, &y);
	cr_assert_eq(cfslock_request_sync(la, CFSLOCK_EX, 0), 0);
	cr_assert_eq(cfslock_request(other, CFSLOCK_EX, 0), 0); /* its grant is queued */
	cr_assert_eq(cfslock_request(lb, CFSLOCK_PR, 0), 0);    /* la's blocking notice too */
	cr_assert_eq(cfslock_unlock(la), 0);                    /* and la's unlock */
	cfslock_free(la);
	cr_assert_eq(cfslock_dispatch(p.a), 1, "only the other lock's event is left");
	cr_assert_eq(x.blocking_calls + x.done_calls, 0);
	cr_assert_eq(z.done_calls, 1);
	cr_assert_eq(cfslock_request_sync(lb, CFSLOCK_PR, 0), -EBUSY, "lb's request is pending");
	while (!y.done_calls)
		cfslock_dispatch(p.b);
	cr_assert_eq(cfslock_mode(lb), CFSLOCK_PR, "granted once la was unlocked");
	cr_assert_eq(cfslock_unlock_sync(other), 0);
	cr_assert_eq(cfslock_unlock_sync(lb), 0);
	cfslock_free(other);
	cfslock_free(lb);
	close_pair(&p);
}

/* A wish for a cached lock that is taken again before the wish is run: the grant from the
 * cache must not forget the wish (the table sends it once), so the release lets the lock go.
 * It was forgotten, and the other node waited for ever (cluster flock found it). */
Test(local, wish_survives_regrant_from_cache)
{
	struct pair p = open_pair("t7");
	struct seen x = {0}, y = {0};
	struct cfslock *la = cfslock_new(p.sa, "inode:9", on_done, NULL, &x);
	struct cfslock *lb = cfslock_new(p.sb, "inode:9", on_done, NULL, &y);
	cr_assert_eq(cfslock_request_sync(la, CFSLOCK_EX, 0), 0);
	cr_assert_eq(cfslock_release(la), 0);
	cr_assert_eq(cfslock_request(lb, CFSLOCK_EX, 0), 0); /* la's wish is queued, not run */
	cr_assert_eq(cfslock_request(la, CFSLOCK_EX, 0), 0); /* taken from the cache */
	while (!x.done_calls)
		cfslock_dispatch(p.a);
	cr_assert_eq(cfslock_mode(la), CFSLOCK_EX);
	cr_assert_eq(cfslock_release(la), 0); /* owes the wish: let go */
	dispatch_until(&p, &y.done_calls);
	cr_assert_eq(cfslock_mode(lb), CFSLOCK_EX, "the other client got the lock");
	cr_assert_eq(cfslock_unlock_sync(lb), 0);
	cfslock_free(la);
	cfslock_free(lb);
	close_pair(&p);
}

Test(local, noqueue_cancel_and_value_block)
{
	struct pair p = open_pair("t2");
	struct cfslock_client *b = p.b;
	struct cfslock_space *sa = p.sa, *sb = p.sb;
	struct seen y = {0};
	struct cfslock *la = cfslock_new(sa, "rg:7", NULL, NULL, NULL);
	struct cfslock *lb = cfslock_new(sb, "rg:7", on_done, NULL, &y);
	cr_assert_eq(cfslock_request_sync(la, CFSLOCK_EX, 0), 0);
	cr_assert_not(cfslock_lvb_valid(la));
	cr_assert_eq(cfslock_request_sync(lb, CFSLOCK_PR, CFSLOCK_NOQUEUE), -EAGAIN);
	cr_assert_eq(cfslock_mode(lb), -1);
	cr_assert_eq(cfslock_request(lb, CFSLOCK_PR, 0), 0);
	cr_assert_eq(cfslock_cancel(lb), 0);
	cfslock_dispatch(b);
	cr_assert_eq(y.last_status, -ECANCELED);
	cr_assert_eq(cfslock_cancel(lb), -ENOENT);

	uint8_t v[CFSLOCK_LVB_LEN];
	memset(v, 0xab, sizeof v);
	cfslock_set_lvb(la, v);
	cr_assert_eq(cfslock_unlock_sync(la), 0);
	cr_assert_eq(cfslock_request_sync(lb, CFSLOCK_PR, 0), 0);
	cr_assert(cfslock_lvb_valid(lb));
	cr_assert_eq(memcmp(cfslock_lvb(lb), v, sizeof v), 0, "the value block did not pass");
	cr_assert_eq(cfslock_unlock_sync(lb), 0);
	cr_assert_eq(cfslock_unlock(lb), -ENOENT, "unlock of a lock not held");
	cfslock_free(la);
	cfslock_free(lb);
	close_pair(&p);
}

/* A lock another client only keeps cached: a NOQUEUE request fails for as long as it is kept,
 * unless it asks with NOQUEUEBAST, which makes the library give the cached grant back. */
Test(local, noqueuebast_takes_back_a_cached_grant)
{
	struct pair p = open_pair("t8");
	struct seen x = {0};
	struct cfslock *la = cfslock_new(p.sa, "opens", on_done, on_blocking, &x);
	struct cfslock *lb = cfslock_new(p.sb, "opens", NULL, NULL, NULL);
	cr_assert_eq(cfslock_request_sync(la, CFSLOCK_EX, 0), 0);
	cr_assert_eq(cfslock_release(la), 0);
	for (int i = 0; i < 3; i++) {
		cr_assert_eq(cfslock_request_sync(lb, CFSLOCK_EX, CFSLOCK_NOQUEUE), -EAGAIN);
		cfslock_dispatch(p.a);
		cr_assert(cfslock_cached(la), "a plain NOQUEUE request took a cached grant back");
	}
	cr_assert_eq(cfslock_request_sync(lb, CFSLOCK_EX, CFSLOCK_NOQUEUE | CFSLOCK_NOQUEUEBAST),
		     -EAGAIN);
	for (int i = 0; i < 2000 && cfslock_mode(la) >= 0; i++) {
		cfslock_dispatch(p.a);
		usleep(1000);
	}
	cr_assert_eq(cfslock_mode(la), -1, "the cached grant was not given back");
	cr_assert_eq(x.blocking_calls, 0, "a cached lock's blocking callback reached its user");
	cr_assert_eq(cfslock_request_sync(lb, CFSLOCK_EX, CFSLOCK_NOQUEUE), 0);
	cr_assert_eq(cfslock_unlock_sync(lb), 0);
	cfslock_free(la);
	cfslock_free(lb);
	close_pair(&p);
}

/* A request made while the library gives a cached grant back (another client asked) waits
 * for that and is sent then, in turn behind the other client: it was refused with EBUSY. */
Test(local, request_during_the_release_of_a_cached_grant)
{
	struct pair p = open_pair("t9");
	struct seen x = {0}, y = {0};
	struct cfslock *la = cfslock_new(p.sa, "f1", on_done, NULL, &x);
	struct cfslock *lb = cfslock_new(p.sb, "f1", on_done, NULL, &y);
	cr_assert_eq(cfslock_request_sync(la, CFSLOCK_EX, 0), 0);
	cr_assert_eq(cfslock_release(la), 0);
	cr_assert_eq(cfslock_request(lb, CFSLOCK_EX, 0), 0);
	cfslock_dispatch(p.a); /* the wish: the library unlocks the cached grant */
	cr_assert(cfslock_pending(la), "the library's unlock is under way");
	cr_assert_eq(cfslock_request(la, CFSLOCK_EX, 0), 0, "refused during the library's unlock");
	dispatch_until(&p, &y.done_calls);
	cr_assert_eq(cfslock_mode(lb), CFSLOCK_EX, "the other client asked first");
	cr_assert_eq(x.done_calls, 0);
	cr_assert_eq(cfslock_unlock_sync(lb), 0);
	dispatch_until(&p, &x.done_calls);
	cr_assert_eq(x.last_status, 0);
	cr_assert_eq(cfslock_mode(la), CFSLOCK_EX, "the deferred request was not granted");
	cr_assert_eq(cfslock_unlock_sync(la), 0);
	cfslock_free(la);
	cfslock_free(lb);
	close_pair(&p);
}

Test(local, bad_arguments)
{
	struct cfslock_client *a = open_client();
	struct cfslock_space *s;
	char longname[CFSLOCK_NAME_MAX + 2];
	memset(longname, 'x', sizeof longname - 1);
	longname[sizeof longname - 1] = '\0';
	cr_assert_eq(cfslock_space_open(a, "", &s), -EINVAL);
	cr_assert_eq(cfslock_space_open(a, longname, &s), -EINVAL);
	cr_assert_eq(cfslock_space_open(a, "t3", &s), 0);
	cr_assert_null(cfslock_new(s, longname, NULL, NULL, NULL));
	cr_assert_null(cfslock_new(s, "", NULL, NULL, NULL));
	struct cfslock *lk = cfslock_new(s, "x", NULL, NULL, NULL);
	cr_assert_eq(cfslock_request(lk, 6, 0), -EINVAL);
	cr_assert_eq(cfslock_request(lk, CFSLOCK_PR, 0x80), -EINVAL);
	cr_assert_eq(cfslock_parse_mode("ex"), CFSLOCK_EX);
	cr_assert_eq(cfslock_parse_mode("XX"), -EINVAL);
	/* Record locks are the corosync backend's; a bad range is refused before that. */
	struct cfslock_plock pl = {.file = 1, .owner = 1, .start = 0, .end = 9, .type = F_WRLCK};
	uint64_t reqid;
	cr_assert_eq(cfslock_plock(s, &pl, false, NULL, NULL, &reqid), -EOPNOTSUPP);
	cr_assert_eq(cfslock_plock_close(s, 1, 1, NULL, NULL), -EOPNOTSUPP);
	cfslock_free(lk);
	cfslock_space_close(s);
	cfslock_client_close(a);
}

/* K threads, each its own client, increment a shared counter under EX. */
#define THREADS 4
#define ROUNDS 2500
static long counter;

static void *incrementer(void *arg)
{
	(void)arg;
	struct cfslock_client *c;
	struct cfslock_space *s;
	if (cfslock_client_open("local", NULL, &c) || cfslock_space_open(c, "t4", &s))
		return (void *)1;
	struct cfslock *lk = cfslock_new(s, "counter", NULL, NULL, NULL);
	for (int i = 0; i < ROUNDS; i++) {
		if (cfslock_request_sync(lk, CFSLOCK_EX, 0))
			return (void *)1;
		long v = counter;
		sched_yield(); /* invite a race if exclusion were broken */
		counter = v + 1;
		if (cfslock_unlock_sync(lk))
			return (void *)1;
	}
	cfslock_free(lk);
	cfslock_space_close(s);
	cfslock_client_close(c);
	return NULL;
}

Test(local, ex_excludes_threads, .timeout = 60)
{
	pthread_t th[THREADS];
	for (int i = 0; i < THREADS; i++)
		pthread_create(&th[i], NULL, incrementer, NULL);
	for (int i = 0; i < THREADS; i++) {
		void *ret;
		pthread_join(th[i], &ret);
		cr_assert_null(ret, "thread %d failed", i);
	}
	cr_assert_eq(counter, THREADS * ROUNDS);
}

static void dump_count(void *arg, const struct cfslock_dump_entry *e)
{
	int *n = arg;
	(*n)++;
	cr_assert_str_eq(e->resource, "d");
}

Test(local, dump_lists_holders_and_waiters)
{
	struct cfslock_client *a = open_client();
	struct cfslock_space *s;
	cr_assert_eq(cfslock_space_open(a, "t5", &s), 0);
	struct cfslock *l1 = cfslock_new(s, "d", NULL, NULL, NULL);
	struct cfslock *l2 = cfslock_new(s, "d", NULL, NULL, NULL);
	cr_assert_eq(cfslock_request_sync(l1, CFSLOCK_EX, 0), 0);
	cr_assert_eq(cfslock_request(l2, CFSLOCK_EX, 0), 0);
	int n = 0;
	cr_assert_eq(cfslock_dump(s, dump_count, &n), 0);
	cr_assert_eq(n, 2);
	cr_assert_eq(cfslock_unlock_sync(l1), 0);
	cfslock_dispatch(a);
	cr_assert_eq(cfslock_mode(l2), CFSLOCK_EX);
	cr_assert_eq(cfslock_unlock_sync(l2), 0);
	cfslock_free(l1);
	cfslock_free(l2);
	cfslock_space_close(s);
	cfslock_client_close(a);
}

static void count_entries(void *arg, const struct cfslock_dump_entry *e)
{
	(void)e;
	(*(int *)arg)++;
}

Test(local, cached_lock_is_reacquired_without_a_request)
{
	struct pair p = open_pair("t6");
	struct cfslock_client *a = p.a, *b = p.b;
	struct cfslock_space *sa = p.sa, *sb = p.sb;
	struct seen x = {0}, y = {0};
	struct cfslock *la = cfslock_new(sa, "c", on_done, on_blocking, &x);
	struct cfslock *lb = cfslock_new(sb, "c", on_done, on_blocking, &y);
	cr_assert_eq(cfslock_request_sync(la, CFSLOCK_EX, 0), 0);
	cr_assert_eq(cfslock_release(la), 0);
	cr_assert(cfslock_cached(la));
	/* PR is covered by the cached EX: granted at once, the table still says EX. */
	cr_assert_eq(cfslock_request_sync(la, CFSLOCK_PR, 0), 0);
	cr_assert_eq(cfslock_mode(la), CFSLOCK_EX);
	cr_assert_eq(cfslock_release(la), 0);
	int n = 0;
	cfslock_dump(sa, count_entries, &n);
	cr_assert_eq(n, 1);

	/* Another client wants it: the cached lock is let go without its owner's help. */
	cr_assert_eq(cfslock_request(lb, CFSLOCK_PR, 0), 0);
	cfslock_dispatch(a); /* the blocking callback: the library unlocks */
	cfslock_dispatch(a); /* the unlock's completion */
	cr_assert_eq(x.blocking_calls, 0, "a cached lock's blocking callback reached its user");
	cr_assert_eq(cfslock_mode(la), -1);
	cfslock_dispatch(b);
	cr_assert_eq(cfslock_mode(lb), CFSLOCK_PR);

	/* In use: the user hears about it, and the release becomes an unlock. */
	cr_assert_eq(cfslock_request_sync(la, CFSLOCK_CR, 0), 0);
	cr_assert_eq(cfslock_release(lb), 0);
	cr_assert_eq(cfslock_request_sync(lb, CFSLOCK_PR, 0), 0, "cached PR covers PR");
	cr_assert_eq(cfslock_request(la, CFSLOCK_EX, 0), 0); /* converts: blocks on b's PR */
	cfslock_dispatch(b);
	cr_assert_eq(y.blocking_calls, 1);
	cr_assert_eq(cfslock_release(lb), 0);
	cfslock_dispatch(b);
	cr_assert_eq(cfslock_mode(lb), -1, "a release after a blocking callback must unlock");
	cr_assert_not(cfslock_cached(lb));
	cfslock_dispatch(a);
	cr_assert_eq(cfslock_mode(la), CFSLOCK_EX);
	cr_assert_eq(cfslock_unlock_sync(la), 0);
	cfslock_free(la);
	cfslock_free(lb);
	close_pair(&p);
}

/* Past the cache limit the oldest cached grant goes back by itself, and the lock table
 * holds no more than the limit; a grant taken again from the cache counts as new. */
Test(local, cached_grants_past_the_limit_are_given_back)
{
	struct cfslock_client *a = open_client();
	struct cfslock_space *sa;
	cr_assert_eq(cfslock_space_open(a, "t9", &sa), 0);
	cfslock_set_cache_limit(a, 3);
	struct cfslock *lk[6];
	for (int i = 0; i < 6; i++) {
		char name[16];
		snprintf(name, sizeof name, "l%d", i);
		lk[i] = cfslock_new(sa, name, on_done, on_blocking, NULL);
		cr_assert_eq(cfslock_request_sync(lk[i], CFSLOCK_PR, 0), 0);
		if (i == 3) /* l0 was used again: l1 is now the oldest */
			cr_assert_eq(cfslock_request_sync(lk[0], CFSLOCK_PR, 0) |
					     cfslock_release(lk[0]), 0);
		cr_assert_eq(cfslock_release(lk[i]), 0);
	}
	while (cfslock_dispatch(a) > 0)
		;
	size_t cached;
	uint64_t given_back;
	cfslock_cache_counts(a, &cached, &given_back);
	cr_assert_eq(cached, 3);
	cr_assert_eq(given_back, 3);
	bool want[6] = {false, false, false, true, true, true};
	for (int i = 0; i < 6; i++) {
		cr_assert_eq(cfslock_cached(lk[i]), want[i], "l%d", i);
		cr_assert_eq(cfslock_mode(lk[i]), want[i] ? CFSLOCK_PR : -1, "l%d", i);
	}
	int n = 0;
	cfslock_dump(sa, count_entries, &n);
	cr_assert_eq(n, 3);
	cfslock_set_cache_limit(a, 1); /* a lower limit applies at once */
	while (cfslock_dispatch(a) > 0)
		;
	cfslock_cache_counts(a, &cached, &given_back);
	cr_assert_eq(cached, 1);
	cr_assert(cfslock_cached(lk[5]));
	cr_assert_eq(cfslock_request_sync(lk[1], CFSLOCK_PR, 0), 0, "a given-back lock asks again");
	for (int i = 0; i < 6; i++) {
		if (cfslock_mode(lk[i]) >= 0)
			cr_assert_eq(cfslock_unlock_sync(lk[i]), 0);
		cfslock_free(lk[i]);
	}
	cfslock_space_close(sa);
	cfslock_client_close(a);
}

/* An event loop of the caller's that drains the client's fd, as cfsd's dispatcher does. */
struct outside_loop {
	struct cfslock_client *c;
	bool stop;
};

static void *outside_loop_run(void *arg)
{
	struct outside_loop *o = arg;
	while (!__atomic_load_n(&o->stop, __ATOMIC_ACQUIRE)) {
		struct pollfd p = {.fd = cfslock_client_fd(o->c), .events = POLLIN};
		if (poll(&p, 1, 5) > 0)
			cfslock_dispatch(o->c);
	}
	return NULL;
}

static void *request_ex(void *arg) { return (void *)(long)cfslock_request_sync(arg, CFSLOCK_EX, 0); }

/* With a dispatcher thread of the caller's, the sync calls wake at its dispatches, also for
 * a grant that waits for another client; without one they dispatch for themselves again. */
Test(local, sync_calls_with_an_outside_dispatcher, .timeout = 60)
{
	struct pair p = open_pair("t9");
	struct outside_loop loop = {.c = p.a};
	pthread_t th;
	cr_assert_eq(pthread_create(&th, NULL, outside_loop_run, &loop), 0);
	cfslock_client_set_dispatcher(p.a, true);
	struct cfslock *mine = cfslock_new(p.sa, "x", NULL, NULL, NULL);
	struct cfslock *theirs = cfslock_new(p.sb, "x", NULL, NULL, NULL);
	for (int i = 0; i < 200; i++) {
		cr_assert_eq(cfslock_request_sync(mine, i % 2 ? CFSLOCK_PR : CFSLOCK_EX, 0), 0);
		cr_assert_eq(cfslock_unlock_sync(mine), 0);
	}
	cr_assert_eq(cfslock_request_sync(theirs, CFSLOCK_EX, 0), 0);
	pthread_t waiter;
	cr_assert_eq(pthread_create(&waiter, NULL, request_ex, mine), 0);
	usleep(50000); /* let it queue behind theirs */
	cr_assert_eq(cfslock_mode(mine), -1, "granted while the other client holds EX");
	cr_assert_eq(cfslock_unlock_sync(theirs), 0);
	void *ret;
	pthread_join(waiter, &ret);
	cr_assert_eq((long)ret, 0);
	cr_assert_eq(cfslock_mode(mine), CFSLOCK_EX);
	cfslock_client_set_dispatcher(p.a, false);
	__atomic_store_n(&loop.stop, true, __ATOMIC_RELEASE);
	pthread_join(th, NULL);
	cr_assert_eq(cfslock_unlock_sync(mine), 0, "dispatched by the waiter itself again");
	cfslock_free(mine);
	cfslock_free(theirs);
	close_pair(&p);
}

/* Several requests under way at once: cfslock_wait_any answers the one that ends first, not
 * the first asked for (cfs_glock_request_all acts on a refusal at once that way). */
Test(local, wait_any_answers_the_first_to_end, .timeout = 60)
{
	struct pair p = open_pair("t10");
	struct cfslock *theirs = cfslock_new(p.sa, "x", NULL, NULL, NULL);
	struct cfslock *v[2] = {cfslock_new(p.sb, "x", NULL, NULL, NULL),
				cfslock_new(p.sb, "y", NULL, NULL, NULL)};
	cr_assert_eq(cfslock_request_sync(theirs, CFSLOCK_EX, 0), 0);
	cr_assert_eq(cfslock_request_begin(v[0], CFSLOCK_PR, 0), 0);
	cr_assert_eq(cfslock_request_begin(v[1], CFSLOCK_PR, 0), 0);
	size_t which = 9;
	cr_assert_eq(cfslock_wait_any(v, 2, &which), 0);
	cr_assert_eq(which, 1, "y, free, ends first; x waits for the other client's EX");
	cr_assert_eq(cfslock_mode(v[0]), -1);
	cr_assert_eq(cfslock_unlock_sync(theirs), 0);
	cr_assert_eq(cfslock_wait_any(v, 1, &which), 0);
	cr_assert_eq(which, 0);
	cr_assert_eq(cfslock_mode(v[0]), CFSLOCK_PR);
	for (int i = 0; i < 2; i++) {
		cr_assert_eq(cfslock_unlock_sync(v[i]), 0);
		cfslock_free(v[i]);
	}
	cfslock_free(theirs);
	close_pair(&p);
}

/* One node has no membership to lose: its lease is always fresh, and a page mirroring it
 * (libodm's) says so. */
Test(local, the_lease_of_one_node_is_always_fresh)
{
	struct cfslock_client *c;
	cr_assert_eq(cfslock_client_open("local", NULL, &c), 0);
	cr_assert(cfslock_lease_fresh(c));
	cr_assert_eq(cfslock_lease_wait(c, 0), 0);
	cr_assert_not(cfslock_evicted(c));
	cr_assert_eq(cfslock_lease_ms(c), 0);
	uint64_t mirror = 0;
	cfslock_lease_mirror(c, &mirror);
	cr_assert_eq(mirror, UINT64_MAX);
	cfslock_client_close(c);
}
