/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* libcfslock internals shared by the client core (client.c) and the backends. */
#ifndef CFSLOCK_CLIENT_H
#define CFSLOCK_CLIENT_H

#include "cfslock.h"
#include "table.h"

#include <pthread.h>

struct cfslock_backend_ops {
	const char *name;
	int (*open)(struct cfslock_client *c);
	void (*close)(struct cfslock_client *c);
	int (*space_open)(struct cfslock_space *s);
	void (*space_close)(struct cfslock_space *s);
	int (*request)(struct cfslock *lk, int mode, unsigned flags);
	int (*convert)(struct cfslock *lk, int mode, unsigned flags, const uint8_t *lvb);
	int (*unlock)(struct cfslock *lk, const uint8_t *lvb);
	int (*cancel)(struct cfslock *lk);
	int (*recovery_done)(struct cfslock_space *s, uint32_t node);
	int (*dump)(struct cfslock_space *s, lt_visit_fn visit, void *arg);
	void (*forget)(struct cfslock *lk); /* the handle is being freed */
	/* POSIX record locks (NULL: not supported) */
	int (*plock)(struct cfslock_space *s, const struct cfslock_plock *l, bool wait,
		     cfslock_plock_done_fn done, void *arg, uint64_t reqid);
	int (*plock_cancel)(struct cfslock_space *s, uint64_t reqid);
	int (*plock_get)(struct cfslock_space *s, const struct cfslock_plock *l,
			 struct cfslock_plock *holder, uint32_t *holder_node);
	int (*plock_close)(struct cfslock_space *s, uint64_t file, uint64_t owner,
			   cfslock_plock_done_fn done, void *arg, uint64_t reqid);
	int (*plock_dump)(struct cfslock_space *s, cfslock_plock_dump_fn fn, void *arg);
	uint32_t (*failure_detection_ms)(void); /* NULL: the backend does not say */
	int (*withdraw)(struct cfslock_client *c); /* NULL: not supported */
};

extern const struct cfslock_backend_ops cfslock_local_ops;
extern const struct cfslock_backend_ops cfslock_corosync_ops;
extern const struct cfslock_backend_ops cfslock_dlm_ops;

struct callback; /* a queued event, see client.c */

/* The message of cfslock_last_error, for this thread. */
void cfslock_set_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

struct cfslock_client {
	const struct cfslock_backend_ops *ops;
	void *backend;
	uint32_t node;
	bool quorate;
	struct cfslock_events events;
	int efd; /* eventfd: readable while callbacks are queued */
	uint64_t messages_sent; /* by this client to other nodes (atomic) */
	pthread_mutex_t qlock;
	pthread_mutex_t cache_lock; /* a cached grant taken or let go: one thread at a time */
	/* Cached grants, oldest first (under cache_lock): past cache_limit (0: none) the oldest
	 * is given back, as if another node had asked for it. */
	struct cfslock *cached_oldest, *cached_newest;
	size_t ncached, cache_limit;
	uint64_t cache_given_back;
	struct callback *head, *tail;
	pthread_mutex_t dispatch_lock;
	pthread_cond_t dispatched; /* broadcast after every dispatch, under dispatch_lock */
	bool outside_dispatcher;   /* a caller's thread polls efd (atomic) */
	/* The membership lease (cfslock.h), kept by the backend: fresh while CLOCK_BOOTTIME is
	 * before lease_until (UINT64_MAX: no lease); evicted for good.  Atomic. */
	uint64_t lease_until;
	uint64_t *lease_mirror; /* cfslock_lease_mirror */
	bool evicted;
	uint32_t lease_ms, evict_ms;
	uint32_t beat_gap_max_ms; /* atomic */
	pthread_mutex_t lease_lock;
	pthread_cond_t lease_changed; /* the lease renewed, or evicted */
};

struct cfslock_space {
	struct cfslock_client *c;
	char name[CFSLOCK_NAME_MAX + 1];
	void *backend;
};

struct cfslock {
	struct cfslock_space *s;
	char name[CFSLOCK_NAME_MAX + 1];
	size_t len;
	uint64_t lkid;
	int granted;       /* as of the last dispatched completion */
	bool pending;      /* a request, conversion or unlock is under way */
	cfslock_done_fn done;
	cfslock_blocking_fn blocking;
	void *arg;
	uint8_t lvb[CFSLOCK_LVB_LEN];
	bool lvb_valid;
	uint8_t lvb_out[CFSLOCK_LVB_LEN];
	bool lvb_out_set;
	bool sync_waiting, sync_done;
	int sync_status;
	bool cached;          /* granted, kept after cfslock_release, not in use */
	struct cfslock *cached_prev, *cached_next; /* in the client's list while cached */
	bool wanted_elsewhere; /* a blocking callback came while in use: unlock at release */
	bool internal;        /* the pending op is the library's own unlock of a cached lock */
	int deferred_mode;    /* a request made meanwhile, sent when that unlock is done; -1 none */
	unsigned deferred_flags;
};

/* Backends report table events for this client's locks, and membership and quorum changes,
 * from any thread; they run as callbacks in the next cfslock_dispatch. */
void cfslock_deliver(struct cfslock_client *c, struct cfslock *lk, const struct lt_event *ev);
void cfslock_deliver_membership(struct cfslock_client *c, uint32_t node, bool joined);
void cfslock_deliver_quorum(struct cfslock_client *c, bool quorate);
/* The lease: renewed until `until` (CLOCK_BOOTTIME ns), or this process evicted (sticky,
 * the evicted event follows). */
uint64_t cfslock_boottime_ns(void);
void cfslock_lease_renew(struct cfslock_client *c, uint64_t until);
void cfslock_deliver_evicted(struct cfslock_client *c, const char *why);
/* A record lock request ended: done(arg, status) runs in the next cfslock_dispatch. */
void cfslock_deliver_plock(struct cfslock_client *c, cfslock_plock_done_fn done, void *arg,
			   int status);

#endif
