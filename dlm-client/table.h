/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The lock table: the DLM's grant rules as a pure state machine.  The same sequence of calls
 * gives the same events on every node, which is what lets the corosync backend replicate the
 * table by applying one totally ordered request stream everywhere, with no master.
 * Internal to libcfslock. */
#ifndef CFSLOCK_TABLE_H
#define CFSLOCK_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define LT_LVB_LEN 32
#define LT_NAME_MAX 64

enum lt_queue { LT_GRANTED, LT_CONVERTING, LT_WAITING };

enum lt_event_type {
	LT_EV_GRANTED,  /* request or conversion granted: mode, lvb */
	LT_EV_FAILED,   /* request or conversion ended without grant: status (-EAGAIN, -ECANCELED) */
	LT_EV_BLOCKING, /* a holder blocks someone: mode is the mode wanted */
	LT_EV_UNLOCKED, /* unlock done */
};

struct lt_event {
	enum lt_event_type type;
	uint64_t node;
	uint64_t lkid;
	int mode;      /* granted mode (GRANTED, FAILED), wanted mode (BLOCKING) */
	int status;
	bool lvb_valid;
	uint8_t lvb[LT_LVB_LEN];
	bool from_cache; /* client only: a grant the client took from its own cache */
};

typedef void (*lt_emit_fn)(void *arg, const struct lt_event *ev);

struct lt_table;

struct lt_table *lt_create(lt_emit_fn emit, void *arg);
void lt_destroy(struct lt_table *t);

bool lt_modes_compatible(int a, int b);

/* A resource lives while it has locks or a valid value block.
 * All return 0 when the call was taken (its outcome comes as events), or -errno when it is
 * malformed: -EEXIST (lock id in use), -ENOENT (no such lock), -EBUSY (a request of that lock
 * is still pending), -EINVAL (mode or name). */
/* Flags: the values of cfslock.h's CFSLOCK_NOQUEUE and CFSLOCK_NOQUEUEBAST. */
#define LT_NOQUEUE 1u
#define LT_NOQUEUEBAST 2u
#define LT_FLAGS (LT_NOQUEUE | LT_NOQUEUEBAST)
int lt_request(struct lt_table *t, uint64_t node, uint64_t lkid, const char *name, size_t len,
	       int mode, unsigned flags);
/* lvb, if not NULL, is stored when the lock goes down from PW or EX.  A conversion that must
 * wait keeps its granted mode meanwhile; one that would wait for another conversion waiting
 * for it fails at once (LT_EV_FAILED, -EDEADLK) and keeps its mode. */
int lt_convert(struct lt_table *t, uint64_t node, uint64_t lkid, int mode, unsigned flags,
	       const uint8_t *lvb);
int lt_unlock(struct lt_table *t, uint64_t node, uint64_t lkid, const uint8_t *lvb);
int lt_cancel(struct lt_table *t, uint64_t node, uint64_t lkid);

/* A node left: its waiting requests go, its granted locks stay, marked recovering (nothing
 * incompatible is granted on them) until lt_recovery_done.  Meanwhile a request that waits
 * for a recovering lock does not hold up those queued behind it: what fits beside the
 * granted locks is granted past it (a survivor's PR past another survivor's EX that waits
 * for the dead node's PR), and queue order resumes when the recovery is done. */
void lt_node_failed(struct lt_table *t, uint64_t node);
/* Recovery for the node is done: drop its locks (a PW/EX holder's LVB becomes invalid). */
void lt_recovery_done(struct lt_table *t, uint64_t node);

/* Walk every lock in a stable order (resources by name, then queue order).  A resource that
 * has no lock but a value block is visited once with lkid 0. */
struct lt_lock_info {
	const char *name;
	size_t name_len;
	uint64_t node;
	uint64_t lkid;
	int granted;   /* -1 while never granted */
	int requested; /* the mode asked for while converting or waiting */
	enum lt_queue queue;
	bool recovering;
	int bast_sent; /* the wanted mode of the last blocking event, -1 for none */
	bool lvb_valid;
	const uint8_t *lvb; /* the resource's */
};
typedef void (*lt_visit_fn)(void *arg, const struct lt_lock_info *info);
void lt_walk(const struct lt_table *t, lt_visit_fn visit, void *arg);
size_t lt_count(const struct lt_table *t);
/* Does node have any lock in the table (granted, converting, waiting, recovering)? */
bool lt_node_holds(const struct lt_table *t, uint64_t node);

/* Rebuild: add a lock exactly as a walk reported it (for state transfer to a joining node);
 * lkid 0 restores only the resource's value block. */
int lt_restore(struct lt_table *t, const struct lt_lock_info *info);

#endif
