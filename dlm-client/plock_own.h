/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Which member owns a file's record locks (as dlm_controld's plock_ownership).  A member may
 * claim a file on whose locks nobody holds or waits for anything: from then on its own copy
 * of the file's locks is the only true one and it locks and unlocks there without a message.
 * A call of another member on the file freezes it: every call on it is held back, in order,
 * until the owner has sent its copy (every member installs it) or, if the owner died, until
 * its recovery is done; then the calls held back are applied as usual and nobody owns it.
 *
 * Every member changes this table at the same points of the ordered stream, like the lock
 * tables.  The calls held back are opaque to it (packed messages), with the few fields
 * needed to find a waiter's cancel or an owner's close among them. */
#ifndef CFS_PLOCK_OWN_H
#define CFS_PLOCK_OWN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Files owned at once, all members together: past it nobody claims more (their calls go
 * through the ordered stream as before), which bounds the table. */
#define PO_MAX_FILES 4096

struct po_call {
	uint64_t sender, reqid, lock_owner;
	int kind;
	bool nowait; /* a lock that fails rather than waits (F_SETLK) */
	size_t len;
	struct po_call *next;
	uint8_t data[]; /* the packed message */
};

struct po_file {
	uint64_t file, owner;
	bool frozen;
	struct po_call *held_back, **tail;
	struct po_file *next;
};

struct po_table;
struct po_table *po_create(void);
void po_destroy(struct po_table *t);
size_t po_count(const struct po_table *t);
struct po_file *po_find(const struct po_table *t, uint64_t file);
/* owner owns file from now on: its record, or NULL (out of memory). */
struct po_file *po_claim(struct po_table *t, uint64_t file, uint64_t owner);
/* Keep a call back until the file is released: 0 or -ENOMEM. */
int po_hold_back(struct po_file *f, const struct po_call *call, const void *data, size_t len);
/* Take a held-back call of sender with reqid (kind want_kind) out of the queue, or NULL. */
struct po_call *po_take(struct po_file *f, uint64_t sender, uint64_t reqid, int want_kind);
/* Take the first held-back call that fails rather than waits out of the queue, or NULL. */
struct po_call *po_take_nowait(struct po_file *f);
/* Does a call of (sender, lock_owner) wait in f's queue? */
bool po_holds_back(const struct po_file *f, uint64_t sender, uint64_t lock_owner);
/* Nobody owns f any more: it leaves the table; what it held back is returned, oldest first,
 * for the caller to apply and free.  The file counts as just released (po_recent). */
struct po_call *po_release(struct po_table *t, struct po_file *f, int64_t now_ms);
/* Was file released in the last window_ms (here: a member's local memory, not replicated)?
 * Claiming it again so soon would pass it back and forth between members that take turns. */
bool po_recent(const struct po_table *t, uint64_t file, int64_t now_ms, int64_t window_ms);
typedef void (*po_visit_fn)(void *arg, const struct po_file *f);
void po_walk(const struct po_table *t, po_visit_fn fn, void *arg);

#endif
