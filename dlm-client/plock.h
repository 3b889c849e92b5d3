/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* POSIX record locks (fcntl F_SETLK, F_SETLKW, F_GETLK) as one deterministic table: every
 * member of a lockspace applies the same ordered calls to its copy (as dlm_controld does for
 * GFS2's plocks), so all copies agree on who holds what.  Ranges are inclusive [start, end];
 * a lock's owner is (node, owner): the cluster member and the kernel's lock owner there. */
#ifndef CFS_PLOCK_H
#define CFS_PLOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PL_MAX UINT64_MAX /* "to the end of the file" */

enum pl_type { PL_RD, PL_WR, PL_UN };

struct pl_lock {
	uint64_t file, node, owner, start, end;
	uint32_t pid;
	enum pl_type type;
};

enum pl_event_type {
	PL_EV_GRANTED, /* a set (lock or unlock) took effect */
	PL_EV_FAILED,  /* status: -EAGAIN (F_SETLK and busy), -ECANCELED (a waiter cancelled) */
};
struct pl_event {
	enum pl_event_type type;
	uint64_t node, reqid; /* the request it answers */
	int status;
};
typedef void (*pl_emit_fn)(void *arg, const struct pl_event *ev);

struct pl_table;
struct pl_table *pl_create(pl_emit_fn emit, void *arg);
void pl_destroy(struct pl_table *t);

/* The files whose locks a deadlock check follows (pl_set); NULL: every file's. */
struct pl_scope {
	bool (*sees)(void *arg, uint64_t file);
	void *arg;
};

/* Lock or unlock (PL_UN) l's range for its owner; reqid names the request in the events.
 * wait: a lock that conflicts waits (F_SETLKW) instead of failing, unless it would wait for
 * an owner that waits, itself or through others, for l's owner: then it fails with -EDEADLK
 * (fcntl's deadlock detection).  Only the locks of files scope sees count: every member's
 * copy must answer alike, so a call of the ordered stream leaves out the files one member
 * owns (plock_own.h).  0, or -EINVAL, -ENOMEM. */
int pl_set(struct pl_table *t, uint64_t reqid, const struct pl_lock *l, bool wait,
	   const struct pl_scope *scope);
/* The first lock of another owner that conflicts with l, or false (F_GETLK). */
bool pl_get(const struct pl_table *t, const struct pl_lock *l, struct pl_lock *holder);
/* Cancel a waiting request (a signal): -ENOENT if it does not wait. */
int pl_cancel(struct pl_table *t, uint64_t node, uint64_t reqid);
/* Everything of an owner on a file goes (its last close there), or of a whole node (its
 * recovery is done: owner and file 0 mean all).  held false: only waiters (a node that failed
 * keeps what it holds until its recovery). */
void pl_drop(struct pl_table *t, uint64_t node, uint64_t owner, uint64_t file, bool held);
size_t pl_count(const struct pl_table *t); /* held ranges and waiters */
/* Does anybody hold or wait for anything on file? */
bool pl_file_busy(const struct pl_table *t, uint64_t file);
/* Does owner (node, owner) hold or wait for anything on file? */
bool pl_owns(const struct pl_table *t, uint64_t node, uint64_t owner, uint64_t file);
/* Every held range, then every waiter in arrival order (reqid 0 for a held range): what a
 * joining member's copy is made from with pl_restore, called in the same order. */
typedef void (*pl_visit_fn)(void *arg, const struct pl_lock *l, uint64_t reqid);
void pl_walk(const struct pl_table *t, pl_visit_fn fn, void *arg);
int pl_restore(struct pl_table *t, const struct pl_lock *l, uint64_t reqid);

#endif
