/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* libcfslock: cluster membership, quorum, and a DLM-style lock API.
 *
 * Lockspaces hold resources named by up to 64 bytes.  A lock on a resource is requested in one
 * of the modes NL CR CW PR PW EX (the DLM compatibility matrix), converted, and unlocked.
 * Every call is asynchronous: its outcome arrives as the lock's completion callback, and a
 * holder that blocks someone gets the blocking callback.  Callbacks run only inside
 * cfslock_dispatch(), on the caller's event loop (poll cfslock_client_fd() for POLLIN).
 * The *_sync wrappers wait for their own completion.
 *
 * Backends: "local" (in-process, one node), "corosync" (lock table replicated over CPG), "dlm"
 * (the kernel DLM through libdlm).  Errors are negative errno values; a call made without
 * quorum fails with CFSLOCK_ENOQUORUM.
 */
#ifndef CFSLOCK_H
#define CFSLOCK_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum cfslock_mode { CFSLOCK_NL, CFSLOCK_CR, CFSLOCK_CW, CFSLOCK_PR, CFSLOCK_PW, CFSLOCK_EX };

#define CFSLOCK_LVB_LEN 32
#define CFSLOCK_NAME_MAX 64
#define CFSLOCK_NOQUEUE 0x1u        /* fail with -EAGAIN instead of waiting */
/* With NOQUEUE: the holders in the way still get the blocking notice (the DLM's NOQUEUEBAST),
 * so a lock only kept in a holder's cache is given back for the next try. */
#define CFSLOCK_NOQUEUEBAST 0x2u
#define CFSLOCK_ENOQUORUM ENOLINK   /* this node has no quorum: it must stop I/O */

struct cfslock_client;
struct cfslock_space;
struct cfslock;

struct cfslock_events {
	void (*membership)(void *arg, uint32_t node, bool joined);
	void (*quorum)(void *arg, bool quorate);
	/* The others removed this process from the cluster while it stalled (see the lease
	 * below): its view of the locks is stale, and it must never write to shared storage
	 * again.  Runs once; cfslock_evicted stays true. */
	void (*evicted)(void *arg, const char *why);
	/* Where the library's log lines go (syslog if NULL): the caller's own log, so that a
	 * line saying why this process lost quorum or was evicted sits beside its own.  Called
	 * at once from the library's threads, not from cfslock_dispatch: it must only log. */
	void (*log)(void *arg, int prio, const char *line);
	void *arg;
};

/* The corosync backend's lock protocol (docs/upgrading.md).  Processes of one major version
 * work together whatever their minor; one of another major is refused when it joins, before
 * it sees the lock table, and its cfslock_client_open fails with -EPROTO (a build for a test
 * may set another major with -DCFSLOCK_PROTO_MAJOR=N). */
#ifndef CFSLOCK_PROTO_MAJOR
#define CFSLOCK_PROTO_MAJOR 1
#endif
#define CFSLOCK_PROTO_MINOR 1 /* 1.0: release 0.1, whose Hello carries no version */

/* backend: "local", "corosync" or "dlm".  events may be NULL.  A failure that a person must
 * act on (a refused protocol version) also leaves a message in cfslock_last_error(). */
int cfslock_client_open(const char *backend, const struct cfslock_events *events,
			struct cfslock_client **out);
void cfslock_client_close(struct cfslock_client *c);
/* Why this thread's last cfslock_client_open failed, if it says ("" if not). */
const char *cfslock_last_error(void);
int cfslock_client_fd(const struct cfslock_client *c);
/* Run the callbacks that are due; returns how many ran, or -errno. */
int cfslock_dispatch(struct cfslock_client *c);
/* Say whether a thread of the caller now polls cfslock_client_fd() and dispatches.  While one
 * does, the *_sync calls sleep until its next dispatch instead of polling the fd themselves
 * (the dispatcher drains the fd, so their own poll would only see its timeout). */
void cfslock_client_set_dispatcher(struct cfslock_client *c, bool running);
uint32_t cfslock_node_id(const struct cfslock_client *c);
/* Messages this client sent to the other nodes (0 for the local backend): what caching saves. */
uint64_t cfslock_messages_sent(const struct cfslock_client *c);
bool cfslock_quorate(const struct cfslock_client *c);
/* How long membership takes to declare a silent member gone (corosync's token timeout), for
 * fence intervals; 0 if the backend does not say.  Asks the cluster manager at each call (it
 * runs a command): call it once and keep the answer. */
uint32_t cfslock_failure_detection_ms(const struct cfslock_client *c);

/* The membership lease (corosync backend; the others have none and are always fresh).
 * Every member multicasts a beat every lease/4 (lease/2 with four members or more) from the
 * library's own thread; its own beat
 * coming back in the agreed order proves it was a member when it sent it, and makes the
 * lease fresh until the send time + the lease time, measured on CLOCK_BOOTTIME (which runs
 * on across a pause of the process or the machine).  The lease time is the token timeout,
 * so a node the others removed for silence finds its lease stale when it wakes:
 * a stale lease means "stop writing until renewed", and a membership change in which
 * members went while it was stale means this process was (or may have been) removed, and
 * it is evicted.  A member that beats no more for cfslock_evict_ms (its process frozen, its
 * corosync alive) is evicted by the others as if it had died. */
bool cfslock_lease_fresh(const struct cfslock_client *c);
/* Wait up to ms for a fresh lease: 0, -ESTALE (evicted), or -ETIMEDOUT. */
int cfslock_lease_wait(struct cfslock_client *c, uint32_t ms);
bool cfslock_evicted(const struct cfslock_client *c);
/* This member can no longer keep what it holds (its journal failed): it stops beating, so the
 * others evict it after cfslock_evict_ms and recover it as if it had died, instead of waiting
 * for ever for locks it can no longer give up cleanly.  -EOPNOTSUPP for backends without
 * beats. */
int cfslock_withdraw(struct cfslock_client *c);
/* Keep *until equal to the lease's end (CLOCK_BOOTTIME ns; UINT64_MAX: no lease; 0: out for
 * good), written atomically: a page shared with processes that write to the same storage. */
void cfslock_lease_mirror(struct cfslock_client *c, uint64_t *until);
/* The lease time and the silence after which the others evict a member; 0 without a lease. */
uint32_t cfslock_lease_ms(const struct cfslock_client *c);
uint32_t cfslock_evict_ms(const struct cfslock_client *c);
/* The longest time between two of this process's beats coming back in one ring, since it
 * joined: how close a busy node came to its lease running out (lease_ms / 4 when idle). */
uint32_t cfslock_beat_gap_max_ms(const struct cfslock_client *c);

int cfslock_space_open(struct cfslock_client *c, const char *name, struct cfslock_space **out);
void cfslock_space_close(struct cfslock_space *s);
/* Say that recovery of a failed node is done: its recovering locks are dropped. */
int cfslock_recovery_done(struct cfslock_space *s, uint32_t node);

/* status: 0 granted (or unlocked), -EAGAIN (NOQUEUE and busy), -ECANCELED, or another -errno. */
typedef void (*cfslock_done_fn)(void *arg, struct cfslock *lk, int status);
typedef void (*cfslock_blocking_fn)(void *arg, struct cfslock *lk, int wanted_mode);

struct cfslock *cfslock_new(struct cfslock_space *s, const char *name, cfslock_done_fn done,
			    cfslock_blocking_fn blocking, void *arg);
/* Free a lock that is not held (never requested, or unlocked). */
void cfslock_free(struct cfslock *lk);

/* Request the lock in `mode`, or convert it if held.  -EBUSY if a request is pending.  A
 * conversion keeps the granted mode while it waits; one that would deadlock with another
 * node's conversion (both holding PR, both wanting EX) completes at once with -EDEADLK and
 * the lock as it was, as the DLM's conversions do. */
int cfslock_request(struct cfslock *lk, int mode, unsigned flags);
int cfslock_unlock(struct cfslock *lk);
/* Cancel a pending request or conversion (it completes with -ECANCELED). */
int cfslock_cancel(struct cfslock *lk);

int cfslock_request_sync(struct cfslock *lk, int mode, unsigned flags);
int cfslock_unlock_sync(struct cfslock *lk);
/* The same in two steps, so that one thread can have many under way at once (their messages
 * go out together instead of one round trip after another): start it, then cfslock_wait for
 * its outcome, which every begun call needs exactly once.  A begin that fails (its -errno
 * returned) has nothing to wait for. */
int cfslock_request_begin(struct cfslock *lk, int mode, unsigned flags);
int cfslock_unlock_begin(struct cfslock *lk);
int cfslock_wait(struct cfslock *lk);
/* cfslock_wait for whichever of v[0..n) (begun, not yet waited for) ends first: its outcome,
 * and its index in *which.  A caller waiting for several acts on each answer as it comes: one
 * refused may keep a grant another node waits for. */
int cfslock_wait_any(struct cfslock *const *v, size_t n, size_t *which);

/* Caching, as GFS2's glocks do: cfslock_release says "done for now" but keeps the grant on this
 * node.  A later request the cached mode covers is granted at once, with no message; when
 * another node wants the lock, a cached lock is unlocked by the library itself, and one in use
 * gets the blocking callback and is unlocked at its release. */
int cfslock_release(struct cfslock *lk);
bool cfslock_cached(const struct cfslock *lk);
/* At most limit grants cached (0: no limit, the default): past it the oldest is given back
 * as if another node had asked, so its next request sends a message again. */
void cfslock_set_cache_limit(struct cfslock_client *c, size_t limit);
/* Grants cached now, and how many the limit made this client give back so far. */
void cfslock_cache_counts(struct cfslock_client *c, size_t *cached, uint64_t *given_back);

/* The granted mode, or -1. */
int cfslock_mode(const struct cfslock *lk);
bool cfslock_pending(const struct cfslock *lk);
/* The value block as of the last grant; set it before a release from PW or EX to publish it. */
const uint8_t *cfslock_lvb(const struct cfslock *lk);
bool cfslock_lvb_valid(const struct cfslock *lk);
void cfslock_set_lvb(struct cfslock *lk, const uint8_t lvb[CFSLOCK_LVB_LEN]);
const char *cfslock_name(const struct cfslock *lk);
const char *cfslock_mode_name(int mode);
int cfslock_parse_mode(const char *s);

/* ---- POSIX record locks (fcntl), cluster-wide: the corosync backend only (-EOPNOTSUPP
 * elsewhere).  Every member applies them in one order to its copy (plock.c). ---- */
struct cfslock_plock {
	uint64_t file;       /* the caller's name for the file, the same on every node */
	uint64_t owner;      /* the kernel's lock owner on this node */
	uint64_t start, end; /* inclusive; end UINT64_MAX: to the end of the file */
	uint32_t pid;
	int type;            /* F_RDLCK, F_WRLCK or F_UNLCK */
};
typedef void (*cfslock_plock_done_fn)(void *arg, int status);
/* Lock or unlock a range.  done(arg, status) runs in cfslock_dispatch: 0, -EAGAIN (not wait,
 * and held elsewhere), -EINTR (cancelled), -ENOLINK (quorum lost) or another -errno.  *reqid
 * names the request for cfslock_plock_cancel. */
int cfslock_plock(struct cfslock_space *s, const struct cfslock_plock *l, bool wait,
		  cfslock_plock_done_fn done, void *arg, uint64_t *reqid);
/* A waiting request ends with -EINTR (or was granted meanwhile). */
int cfslock_plock_cancel(struct cfslock_space *s, uint64_t reqid);
/* F_GETLK from this node's copy: 1 and the first lock in the way (and the cluster node that
 * holds it), or 0. */
int cfslock_plock_get(struct cfslock_space *s, const struct cfslock_plock *l,
		      struct cfslock_plock *holder, uint32_t *holder_node);
/* The owner closed the file here: all its locks on it go.  1 if it held none (done is not
 * called), 0 if done will say, or -errno. */
int cfslock_plock_close(struct cfslock_space *s, uint64_t file, uint64_t owner,
			cfslock_plock_done_fn done, void *arg);

/* Every record lock of the lockspace as this node's copy has it: the held ranges, then the
 * waiting requests (waiting true), with the cluster node of each.  fn must not call into
 * this library.  -EOPNOTSUPP without record locks. */
typedef void (*cfslock_plock_dump_fn)(void *arg, const struct cfslock_plock *l, uint32_t node,
				      bool waiting);
int cfslock_plock_dump(struct cfslock_space *s, cfslock_plock_dump_fn fn, void *arg);

/* Dump a lockspace's table as this node sees it. */
struct cfslock_dump_entry {
	const char *resource;
	uint32_t node;  /* corosync node id */
	uint64_t owner; /* node id << 32 | incarnation of the process holding it */
	uint64_t lkid;
	int granted, requested;
	const char *state; /* "granted", "converting", "waiting" */
	bool recovering;
};
typedef void (*cfslock_dump_fn)(void *arg, const struct cfslock_dump_entry *e);
int cfslock_dump(struct cfslock_space *s, cfslock_dump_fn fn, void *arg);

#endif
