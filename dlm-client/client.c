/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* libcfslock's client core: lock handles, the callback queue behind an eventfd, dispatch, and
 * the synchronous wrappers.  Backends do the locking (local.c, corosync.c, dlm.c). */
#include "client.h"

#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

enum callback_kind { CB_LOCK, CB_MEMBERSHIP, CB_QUORUM, CB_PLOCK, CB_EVICTED };

struct callback {
	struct callback *next;
	enum callback_kind kind;
	struct cfslock *lk;
	struct lt_event ev;
	uint32_t node;
	bool flag;
	cfslock_plock_done_fn plock_done;
	void *plock_arg;
	int status;
	char why[160];
};

static const struct cfslock_backend_ops *find_backend(const char *name)
{
	static const struct cfslock_backend_ops *const all[] = {
		&cfslock_local_ops, &cfslock_corosync_ops, &cfslock_dlm_ops};
	for (size_t i = 0; i < sizeof all / sizeof *all; i++)
		if (strcmp(all[i]->name, name) == 0)
			return all[i];
	return NULL;
}

static __thread char last_error[400];

void cfslock_set_error(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(last_error, sizeof last_error, fmt, ap);
	va_end(ap);
}

const char *cfslock_last_error(void)
{
	return last_error;
}

int cfslock_client_open(const char *backend, const struct cfslock_events *events,
			struct cfslock_client **out)
{
	last_error[0] = '\0';
	const struct cfslock_backend_ops *ops = find_backend(backend ? backend : "local");
	if (!ops)
		return -EPROTONOSUPPORT;
	struct cfslock_client *c = calloc(1, sizeof *c);
	if (!c)
		return -ENOMEM;
	c->ops = ops;
	if (events)
		c->events = *events;
	c->quorate = true;
	c->lease_until = UINT64_MAX;
	pthread_mutex_init(&c->lease_lock, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&c->lease_changed, &ca);
	pthread_condattr_destroy(&ca);
	pthread_mutex_init(&c->qlock, NULL);
	pthread_mutex_init(&c->cache_lock, NULL);
	pthread_mutex_init(&c->dispatch_lock, NULL);
	pthread_cond_init(&c->dispatched, NULL);
	c->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	int rc = c->efd < 0 ? -errno : ops->open(c);
	if (rc) {
		if (c->efd >= 0)
			close(c->efd);
		free(c);
		return rc;
	}
	*out = c;
	return 0;
}

void cfslock_client_close(struct cfslock_client *c)
{
	if (!c)
		return;
	c->ops->close(c);
	for (struct callback *cb = c->head, *n; cb; cb = n) {
		n = cb->next;
		free(cb);
	}
	close(c->efd);
	pthread_mutex_destroy(&c->qlock);
	pthread_mutex_destroy(&c->cache_lock);
	pthread_mutex_destroy(&c->dispatch_lock);
	pthread_cond_destroy(&c->dispatched);
	pthread_mutex_destroy(&c->lease_lock);
	pthread_cond_destroy(&c->lease_changed);
	free(c);
}

int cfslock_client_fd(const struct cfslock_client *c) { return c->efd; }
uint32_t cfslock_node_id(const struct cfslock_client *c) { return c->node; }
bool cfslock_quorate(const struct cfslock_client *c) { return c->quorate; }
uint32_t cfslock_failure_detection_ms(const struct cfslock_client *c)
{
	return c->ops->failure_detection_ms ? c->ops->failure_detection_ms() : 0;
}
uint64_t cfslock_messages_sent(const struct cfslock_client *c)
{
	return __atomic_load_n(&c->messages_sent, __ATOMIC_RELAXED);
}

static void enqueue(struct cfslock_client *c, struct callback *cb)
{
	pthread_mutex_lock(&c->qlock);
	if (c->tail)
		c->tail->next = cb;
	else
		c->head = cb;
	c->tail = cb;
	pthread_mutex_unlock(&c->qlock);
	uint64_t one = 1;
	if (write(c->efd, &one, sizeof one) < 0) {
		/* The counter cannot overflow in practice; a failed wakeup only delays dispatch. */
	}
}

static struct callback *new_callback(enum callback_kind kind)
{
	struct callback *cb = calloc(1, sizeof *cb);
	if (!cb)
		abort(); /* losing a grant would leave the caller waiting forever */
	cb->kind = kind;
	return cb;
}

void cfslock_deliver(struct cfslock_client *c, struct cfslock *lk, const struct lt_event *ev)
{
	struct callback *cb = new_callback(CB_LOCK);
	cb->lk = lk;
	cb->ev = *ev;
	enqueue(c, cb);
}

void cfslock_deliver_membership(struct cfslock_client *c, uint32_t node, bool joined)
{
	struct callback *cb = new_callback(CB_MEMBERSHIP);
	cb->node = node;
	cb->flag = joined;
	enqueue(c, cb);
}

void cfslock_deliver_plock(struct cfslock_client *c, cfslock_plock_done_fn done, void *arg,
			   int status)
{
	struct callback *cb = new_callback(CB_PLOCK);
	cb->plock_done = done;
	cb->plock_arg = arg;
	cb->status = status;
	enqueue(c, cb);
}

void cfslock_deliver_quorum(struct cfslock_client *c, bool quorate)
{
	struct callback *cb = new_callback(CB_QUORUM);
	cb->flag = quorate;
	enqueue(c, cb);
}

/* ---- the membership lease (cfslock.h) ---- */
uint64_t cfslock_boottime_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_BOOTTIME, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

bool cfslock_lease_fresh(const struct cfslock_client *c)
{
	uint64_t until = __atomic_load_n(&c->lease_until, __ATOMIC_ACQUIRE);
	return until == UINT64_MAX || cfslock_boottime_ns() < until;
}

bool cfslock_evicted(const struct cfslock_client *c)
{
	return __atomic_load_n(&c->evicted, __ATOMIC_ACQUIRE);
}

int cfslock_withdraw(struct cfslock_client *c)
{
	return c->ops->withdraw ? c->ops->withdraw(c) : -EOPNOTSUPP;
}

uint32_t cfslock_lease_ms(const struct cfslock_client *c) { return c->lease_ms; }
uint32_t cfslock_evict_ms(const struct cfslock_client *c) { return c->evict_ms; }
uint32_t cfslock_beat_gap_max_ms(const struct cfslock_client *c)
{
	return __atomic_load_n(&c->beat_gap_max_ms, __ATOMIC_RELAXED);
}

/* lease_lock held. */
static void set_lease(struct cfslock_client *c, uint64_t until)
{
	__atomic_store_n(&c->lease_until, until, __ATOMIC_RELEASE);
	if (c->lease_mirror)
		__atomic_store_n(c->lease_mirror, until, __ATOMIC_RELEASE);
	pthread_cond_broadcast(&c->lease_changed);
}

void cfslock_lease_mirror(struct cfslock_client *c, uint64_t *until)
{
	pthread_mutex_lock(&c->lease_lock);
	c->lease_mirror = until;
	set_lease(c, __atomic_load_n(&c->lease_until, __ATOMIC_ACQUIRE));
	pthread_mutex_unlock(&c->lease_lock);
}

void cfslock_lease_renew(struct cfslock_client *c, uint64_t until)
{
	pthread_mutex_lock(&c->lease_lock);
	if (!cfslock_evicted(c) && until > __atomic_load_n(&c->lease_until, __ATOMIC_ACQUIRE))
		set_lease(c, until);
	pthread_mutex_unlock(&c->lease_lock);
}

int cfslock_lease_wait(struct cfslock_client *c, uint32_t ms)
{
	struct timespec end;
	clock_gettime(CLOCK_MONOTONIC, &end);
	end.tv_sec += (time_t)(ms / 1000);
	end.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (end.tv_nsec >= 1000000000L) {
		end.tv_sec++;
		end.tv_nsec -= 1000000000L;
	}
	int rc = 0;
	pthread_mutex_lock(&c->lease_lock);
	while (!cfslock_evicted(c) && !cfslock_lease_fresh(c) && !rc)
		if (pthread_cond_timedwait(&c->lease_changed, &c->lease_lock, &end) == ETIMEDOUT)
			rc = cfslock_lease_fresh(c) ? 0 : -ETIMEDOUT;
	pthread_mutex_unlock(&c->lease_lock);
	return cfslock_evicted(c) ? -ESTALE : rc;
}

void cfslock_deliver_evicted(struct cfslock_client *c, const char *why)
{
	pthread_mutex_lock(&c->lease_lock);
	bool first = !cfslock_evicted(c);
	__atomic_store_n(&c->evicted, true, __ATOMIC_RELEASE);
	set_lease(c, 0);
	pthread_mutex_unlock(&c->lease_lock);
	if (!first)
		return;
	struct callback *cb = new_callback(CB_EVICTED);
	snprintf(cb->why, sizeof cb->why, "%s", why);
	enqueue(c, cb);
}

static int unlock_now(struct cfslock *lk, bool internal);
static int send_request(struct cfslock *lk, int mode, unsigned flags);

/* ---- the cached grants, oldest first: cache_lock held ---- */
static void cache_add(struct cfslock *lk)
{
	struct cfslock_client *c = lk->s->c;
	lk->cached = true;
	lk->cached_prev = c->cached_newest;
	lk->cached_next = NULL;
	*(c->cached_newest ? &c->cached_newest->cached_next : &c->cached_oldest) = lk;
	c->cached_newest = lk;
	c->ncached++;
}

static void cache_remove(struct cfslock *lk)
{
	if (!lk->cached)
		return;
	struct cfslock_client *c = lk->s->c;
	*(lk->cached_prev ? &lk->cached_prev->cached_next : &c->cached_oldest) = lk->cached_next;
	*(lk->cached_next ? &lk->cached_next->cached_prev : &c->cached_newest) = lk->cached_prev;
	lk->cached = false;
	c->ncached--;
}

/* Past the limit, the oldest cached grants go back as if another node had asked: a node
 * that walked a million files must not leave a million locks in every member's table. */
static void cache_trim(struct cfslock_client *c)
{
	while (c->cache_limit && c->ncached > c->cache_limit && c->cached_oldest) {
		struct cfslock *oldest = c->cached_oldest;
		cache_remove(oldest);
		unlock_now(oldest, true);
		c->cache_given_back++;
	}
}

static void uncache(struct cfslock *lk)
{
	pthread_mutex_lock(&lk->s->c->cache_lock);
	cache_remove(lk);
	pthread_mutex_unlock(&lk->s->c->cache_lock);
}

void cfslock_set_cache_limit(struct cfslock_client *c, size_t limit)
{
	pthread_mutex_lock(&c->cache_lock);
	c->cache_limit = limit;
	cache_trim(c);
	pthread_mutex_unlock(&c->cache_lock);
}

void cfslock_cache_counts(struct cfslock_client *c, size_t *cached, uint64_t *given_back)
{
	pthread_mutex_lock(&c->cache_lock);
	*cached = c->ncached;
	*given_back = c->cache_given_back;
	pthread_mutex_unlock(&c->cache_lock);
}

/* The library's own unlock of a cached grant is done: a request made meanwhile goes now.
 * 1 if one did (its completion comes later), 0 if there was none, or -errno. */
static int send_deferred(struct cfslock *lk)
{
	pthread_mutex_lock(&lk->s->c->cache_lock);
	lk->internal = false;
	int mode = lk->deferred_mode;
	lk->deferred_mode = -1;
	pthread_mutex_unlock(&lk->s->c->cache_lock);
	if (mode < 0)
		return 0;
	int rc = send_request(lk, mode, lk->deferred_flags);
	return rc ? rc : 1;
}

static void run_lock_callback(struct cfslock *lk, const struct lt_event *ev)
{
	if (ev->type == LT_EV_BLOCKING) {
		/* A thread may be taking the cached grant right now: decide under cache_lock. */
		pthread_mutex_lock(&lk->s->c->cache_lock);
		bool unused = lk->cached && !lk->pending;
		if (unused) {
			cache_remove(lk);
			unlock_now(lk, true); /* nobody here uses it: let it go */
		} else {
			lk->wanted_elsewhere = true; /* its release unlocks it */
		}
		pthread_mutex_unlock(&lk->s->c->cache_lock);
		if (unused)
			return;
		if (lk->blocking)
			lk->blocking(lk->arg, lk, ev->mode);
		return;
	}
	int status = ev->type == LT_EV_FAILED ? ev->status : 0;
	lk->granted = ev->type == LT_EV_UNLOCKED ? -1 : ev->mode;
	lk->pending = false;
	/* A new grant answers no earlier wish; a grant taken from the cache still owes one
	 * that arrived before it was run (the table sends a wish once). */
	if (ev->type != LT_EV_GRANTED)
		uncache(lk);
	else if (!ev->from_cache)
		lk->wanted_elsewhere = false;
	if (lk->internal) { /* the library's own unlock: nobody waits for it, but a request may */
		int sent = send_deferred(lk);
		if (sent >= 0)
			return;
		status = sent; /* the deferred request ends here */
	}
	if (ev->type == LT_EV_GRANTED) {
		memcpy(lk->lvb, ev->lvb, CFSLOCK_LVB_LEN);
		lk->lvb_valid = ev->lvb_valid;
	}
	if (lk->sync_waiting) {
		lk->sync_status = status;
		lk->sync_done = true;
		return;
	}
	if (lk->done)
		lk->done(lk->arg, lk, status);
}

static int dispatch_locked(struct cfslock_client *c)
{
	uint64_t count;
	if (read(c->efd, &count, sizeof count) < 0 && errno != EAGAIN)
		return -errno;
	pthread_mutex_lock(&c->qlock);
	struct callback *cb = c->head;
	c->head = c->tail = NULL;
	pthread_mutex_unlock(&c->qlock);
	int ran = 0;
	for (struct callback *n; cb; cb = n, ran++) {
		n = cb->next;
		switch (cb->kind) {
		case CB_LOCK: run_lock_callback(cb->lk, &cb->ev); break;
		case CB_MEMBERSHIP:
			if (c->events.membership)
				c->events.membership(c->events.arg, cb->node, cb->flag);
			break;
		case CB_QUORUM:
			c->quorate = cb->flag;
			if (c->events.quorum)
				c->events.quorum(c->events.arg, cb->flag);
			break;
		case CB_PLOCK: cb->plock_done(cb->plock_arg, cb->status); break;
		case CB_EVICTED:
			if (c->events.evicted)
				c->events.evicted(c->events.arg, cb->why);
			break;
		}
		free(cb);
	}
	pthread_cond_broadcast(&c->dispatched);
	return ran;
}

int cfslock_dispatch(struct cfslock_client *c)
{
	pthread_mutex_lock(&c->dispatch_lock);
	int rc = dispatch_locked(c);
	pthread_mutex_unlock(&c->dispatch_lock);
	return rc;
}

/* The first of v[0..n) that has completed, or n. */
static size_t first_done(struct cfslock *const *v, size_t n)
{
	size_t i = 0;
	while (i < n && !v[i]->sync_done)
		i++;
	return i;
}

/* Wait for the completion of one of v[0..n) (all of one client).  Whoever holds the dispatch
 * lock runs everybody's callbacks.  With a dispatcher thread of the caller's, sleep until one
 * of its dispatches: polling the fd it drains would see only the poll's timeout (hand-offs of
 * an inode glock took 10 ms that way).  Without one, poll the fd and dispatch here. */
int cfslock_wait_any(struct cfslock *const *v, size_t n, size_t *which)
{
	struct cfslock_client *c = v[0]->s->c;
	pthread_mutex_lock(&c->dispatch_lock);
	int wait_ms = 1; /* short at first: most completions come within a few milliseconds */
	size_t i;
	while ((i = first_done(v, n)) == n) {
		if (__atomic_load_n(&c->outside_dispatcher, __ATOMIC_ACQUIRE)) {
			struct timespec until;
			clock_gettime(CLOCK_REALTIME, &until);
			until.tv_nsec += 10 * 1000000L;
			until.tv_sec += until.tv_nsec / 1000000000L;
			until.tv_nsec %= 1000000000L;
			/* Timed, and a dispatch of our own after it: the dispatcher may be busy. */
			if (pthread_cond_timedwait(&c->dispatched, &c->dispatch_lock, &until))
				dispatch_locked(c);
			continue;
		}
		struct pollfd p = {.fd = c->efd, .events = POLLIN};
		pthread_mutex_unlock(&c->dispatch_lock);
		poll(&p, 1, wait_ms);
		wait_ms = wait_ms < 8 ? wait_ms * 2 : 10;
		pthread_mutex_lock(&c->dispatch_lock);
		dispatch_locked(c);
	}
	v[i]->sync_waiting = false;
	pthread_mutex_unlock(&c->dispatch_lock);
	*which = i;
	return v[i]->sync_status;
}

void cfslock_client_set_dispatcher(struct cfslock_client *c, bool running)
{
	__atomic_store_n(&c->outside_dispatcher, running, __ATOMIC_RELEASE);
	pthread_mutex_lock(&c->dispatch_lock);
	pthread_cond_broadcast(&c->dispatched); /* sleepers poll for themselves from now */
	pthread_mutex_unlock(&c->dispatch_lock);
}

int cfslock_space_open(struct cfslock_client *c, const char *name, struct cfslock_space **out)
{
	if (!name || !*name || strlen(name) > CFSLOCK_NAME_MAX)
		return -EINVAL;
	struct cfslock_space *s = calloc(1, sizeof *s);
	if (!s)
		return -ENOMEM;
	s->c = c;
	snprintf(s->name, sizeof s->name, "%s", name);
	int rc = c->ops->space_open(s);
	if (rc) {
		free(s);
		return rc;
	}
	*out = s;
	return 0;
}

void cfslock_space_close(struct cfslock_space *s)
{
	if (!s)
		return;
	s->c->ops->space_close(s);
	free(s);
}

int cfslock_recovery_done(struct cfslock_space *s, uint32_t node)
{
	return s->c->ops->recovery_done(s, node);
}

struct cfslock *cfslock_new(struct cfslock_space *s, const char *name, cfslock_done_fn done,
			    cfslock_blocking_fn blocking, void *arg)
{
	size_t len = name ? strlen(name) : 0;
	if (len == 0 || len > CFSLOCK_NAME_MAX)
		return NULL;
	struct cfslock *lk = calloc(1, sizeof *lk);
	if (!lk)
		return NULL;
	*lk = (struct cfslock){.s = s, .len = len, .granted = -1, .done = done,
			       .blocking = blocking, .arg = arg, .deferred_mode = -1};
	memcpy(lk->name, name, len); /* NOLINT(bugprone-not-null-terminated-result): calloc'd */
	static _Atomic uint64_t next_lkid = 1; /* unique in the process, whatever the client */
	lk->lkid = next_lkid++;
	return lk;
}

void cfslock_free(struct cfslock *lk)
{
	if (!lk)
		return;
	struct cfslock_client *c = lk->s->c;
	uncache(lk);
	if (c->ops->forget)
		c->ops->forget(lk); /* no new event names it */
	/* Nor may a queued one: dispatched after the free it would run on freed memory. */
	pthread_mutex_lock(&c->dispatch_lock);
	pthread_mutex_lock(&c->qlock);
	c->tail = NULL;
	for (struct callback **p = &c->head, *cb; (cb = *p);) {
		if (cb->kind == CB_LOCK && cb->lk == lk) {
			*p = cb->next;
			free(cb);
		} else {
			c->tail = cb;
			p = &cb->next;
		}
	}
	pthread_mutex_unlock(&c->qlock);
	pthread_mutex_unlock(&c->dispatch_lock);
	free(lk);
}

static int start(struct cfslock *lk)
{
	if (lk->pending)
		return -EBUSY;
	if (!lk->s->c->quorate)
		return -CFSLOCK_ENOQUORUM;
	lk->pending = true;
	return 0;
}

/* Does holding mode `held` give everything `want` does? */
static bool covers(int held, int want)
{
	static const unsigned char cover[6] = {
		1u << CFSLOCK_NL,
		1u << CFSLOCK_NL | 1u << CFSLOCK_CR,
		1u << CFSLOCK_NL | 1u << CFSLOCK_CR | 1u << CFSLOCK_CW,
		1u << CFSLOCK_NL | 1u << CFSLOCK_CR | 1u << CFSLOCK_PR,
		1u << CFSLOCK_NL | 1u << CFSLOCK_CR | 1u << CFSLOCK_PR | 1u << CFSLOCK_PW,
		0x3f,
	};
	return held >= 0 && (cover[held] >> want) & 1u;
}

/* A request the cached grant covers: granted here, no message. */
static bool take_cached(struct cfslock *lk, int mode)
{
	pthread_mutex_lock(&lk->s->c->cache_lock);
	bool take = lk->cached && !lk->pending && covers(lk->granted, mode);
	if (take)
		cache_remove(lk);
	pthread_mutex_unlock(&lk->s->c->cache_lock);
	return take;
}

_Static_assert(LT_NOQUEUE == CFSLOCK_NOQUEUE && LT_NOQUEUEBAST == CFSLOCK_NOQUEUEBAST,
	       "backends pass the request flags to the lock table as they are");

int cfslock_request(struct cfslock *lk, int mode, unsigned flags)
{
	if (mode < CFSLOCK_NL || mode > CFSLOCK_EX || (flags & ~(unsigned)LT_FLAGS))
		return -EINVAL;
	if (take_cached(lk, mode)) {
		struct lt_event ev = {.type = LT_EV_GRANTED, .lkid = lk->lkid, .mode = lk->granted,
				      .lvb_valid = lk->lvb_valid, .from_cache = true};
		memcpy(ev.lvb, lk->lvb, CFSLOCK_LVB_LEN);
		lk->pending = true;
		cfslock_deliver(lk->s->c, lk, &ev);
		return 0;
	}
	/* The library is giving the cached grant back (another node asked): ask once it has. */
	pthread_mutex_lock(&lk->s->c->cache_lock);
	bool defer = lk->internal && lk->deferred_mode < 0;
	if (defer) {
		lk->deferred_mode = mode;
		lk->deferred_flags = flags;
	}
	pthread_mutex_unlock(&lk->s->c->cache_lock);
	return defer ? 0 : send_request(lk, mode, flags);
}

static int send_request(struct cfslock *lk, int mode, unsigned flags)
{
	uncache(lk);
	int rc = start(lk);
	if (rc)
		return rc;
	const struct cfslock_backend_ops *ops = lk->s->c->ops;
	rc = lk->granted < 0 ? ops->request(lk, mode, flags)
			     : ops->convert(lk, mode, flags, lk->lvb_out_set ? lk->lvb_out : NULL);
	if (rc)
		lk->pending = false;
	return rc;
}

static int unlock_now(struct cfslock *lk, bool internal)
{
	int rc = start(lk);
	if (rc)
		return rc;
	lk->internal = internal;
	rc = lk->s->c->ops->unlock(lk, lk->lvb_out_set ? lk->lvb_out : NULL);
	if (rc)
		lk->pending = lk->internal = false;
	return rc;
}

int cfslock_unlock(struct cfslock *lk)
{
	if (lk->granted < 0)
		return -ENOENT;
	uncache(lk);
	return unlock_now(lk, false);
}

int cfslock_release(struct cfslock *lk)
{
	if (lk->granted < 0 || lk->pending)
		return lk->granted < 0 ? -ENOENT : -EBUSY;
	pthread_mutex_lock(&lk->s->c->cache_lock);
	int rc = 0;
	if (lk->wanted_elsewhere) {
		lk->wanted_elsewhere = false;
		rc = unlock_now(lk, true);
	} else {
		cache_add(lk);
		cache_trim(lk->s->c);
	}
	pthread_mutex_unlock(&lk->s->c->cache_lock);
	return rc;
}

bool cfslock_cached(const struct cfslock *lk) { return lk->cached; }

int cfslock_cancel(struct cfslock *lk)
{
	if (!lk->pending)
		return -ENOENT;
	return lk->s->c->ops->cancel(lk);
}

int cfslock_request_begin(struct cfslock *lk, int mode, unsigned flags)
{
	lk->sync_waiting = true;
	lk->sync_done = false;
	if (take_cached(lk, mode)) { /* no message, no callback, no system call */
		lk->sync_status = 0;
		lk->sync_done = true;
		return 0;
	}
	int rc = cfslock_request(lk, mode, flags);
	if (rc)
		lk->sync_waiting = false;
	return rc;
}

int cfslock_unlock_begin(struct cfslock *lk)
{
	lk->sync_waiting = true;
	lk->sync_done = false;
	int rc = cfslock_unlock(lk);
	if (rc)
		lk->sync_waiting = false;
	return rc;
}

int cfslock_wait(struct cfslock *lk)
{
	size_t which;
	return cfslock_wait_any(&lk, 1, &which);
}

int cfslock_request_sync(struct cfslock *lk, int mode, unsigned flags)
{
	if (take_cached(lk, mode))
		return 0; /* the fast path: not even the dispatch lock */
	int rc = cfslock_request_begin(lk, mode, flags);
	return rc ? rc : cfslock_wait(lk);
}

int cfslock_unlock_sync(struct cfslock *lk)
{
	int rc = cfslock_unlock_begin(lk);
	return rc ? rc : cfslock_wait(lk);
}

int cfslock_mode(const struct cfslock *lk) { return lk->granted; }
bool cfslock_pending(const struct cfslock *lk) { return lk->pending; }
const uint8_t *cfslock_lvb(const struct cfslock *lk) { return lk->lvb; }
bool cfslock_lvb_valid(const struct cfslock *lk) { return lk->lvb_valid; }
const char *cfslock_name(const struct cfslock *lk) { return lk->name; }

void cfslock_set_lvb(struct cfslock *lk, const uint8_t lvb[CFSLOCK_LVB_LEN])
{
	memcpy(lk->lvb_out, lvb, CFSLOCK_LVB_LEN);
	lk->lvb_out_set = true;
}

static const char *const mode_names[] = {"NL", "CR", "CW", "PR", "PW", "EX"};

const char *cfslock_mode_name(int mode)
{
	return mode >= CFSLOCK_NL && mode <= CFSLOCK_EX ? mode_names[mode] : "--";
}

int cfslock_parse_mode(const char *s)
{
	for (int m = CFSLOCK_NL; m <= CFSLOCK_EX; m++)
		if (strcasecmp(s, mode_names[m]) == 0)
			return m;
	return -EINVAL;
}

struct dump_ctx {
	cfslock_dump_fn fn;
	void *arg;
};

static void dump_visit(void *arg, const struct lt_lock_info *info)
{
	struct dump_ctx *d = arg;
	static const char *const states[] = {"granted", "converting", "waiting"};
	if (info->lkid == 0)
		return; /* a value block without locks */
	char name[CFSLOCK_NAME_MAX + 1];
	memcpy(name, info->name, info->name_len);
	name[info->name_len] = '\0';
	struct cfslock_dump_entry e = {.resource = name, .node = (uint32_t)(info->node >> 32),
				       .owner = info->node, .lkid = info->lkid,
				       .granted = info->granted, .requested = info->requested,
				       .state = states[info->queue], .recovering = info->recovering};
	d->fn(d->arg, &e);
}

int cfslock_dump(struct cfslock_space *s, cfslock_dump_fn fn, void *arg)
{
	struct dump_ctx d = {fn, arg};
	return s->c->ops->dump(s, dump_visit, &d);
}

/* ---- POSIX record locks ---- */
static uint64_t new_reqid(void)
{
	static _Atomic uint64_t next = 1;
	return next++;
}

static int plock_valid(const struct cfslock_plock *l)
{
	return l->start <= l->end && (l->type == F_RDLCK || l->type == F_WRLCK || l->type == F_UNLCK)
		       ? 0
		       : -EINVAL;
}

int cfslock_plock(struct cfslock_space *s, const struct cfslock_plock *l, bool wait,
		  cfslock_plock_done_fn done, void *arg, uint64_t *reqid)
{
	const struct cfslock_backend_ops *ops = s->c->ops;
	if (!ops->plock)
		return -EOPNOTSUPP;
	int rc = plock_valid(l);
	if (rc)
		return rc;
	if (!s->c->quorate)
		return -CFSLOCK_ENOQUORUM;
	*reqid = new_reqid();
	return ops->plock(s, l, wait, done, arg, *reqid);
}

int cfslock_plock_cancel(struct cfslock_space *s, uint64_t reqid)
{
	return s->c->ops->plock_cancel ? s->c->ops->plock_cancel(s, reqid) : -EOPNOTSUPP;
}

int cfslock_plock_get(struct cfslock_space *s, const struct cfslock_plock *l,
		      struct cfslock_plock *holder, uint32_t *holder_node)
{
	if (!s->c->ops->plock_get)
		return -EOPNOTSUPP;
	int rc = plock_valid(l);
	return rc ? rc : s->c->ops->plock_get(s, l, holder, holder_node);
}

int cfslock_plock_dump(struct cfslock_space *s, cfslock_plock_dump_fn fn, void *arg)
{
	return s->c->ops->plock_dump ? s->c->ops->plock_dump(s, fn, arg) : -EOPNOTSUPP;
}

int cfslock_plock_close(struct cfslock_space *s, uint64_t file, uint64_t owner,
			cfslock_plock_done_fn done, void *arg)
{
	if (!s->c->ops->plock_close)
		return -EOPNOTSUPP;
	return s->c->ops->plock_close(s, file, owner, done, arg, new_reqid());
}
