/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Pokes of a FUSE io_uring queue (ring_poke.c): a request of cfsd's own, sent from the
 * queue's core, whose answer makes the kernel hand out the requests it queued while the
 * queue had no free entry. */
#ifndef CFSD_RING_POKE_H
#define CFSD_RING_POKE_H

/* The extended attribute of the mount's root that a poke asks for: cfsd answers it without
 * a lock or a look at the filesystem (fuse_ops.c), with the one byte "1". */
#define RING_POKE_XATTR "trusted.cfs.ring-poke"

struct ring_poker;

/* Pokers for the queues of cores 0 to ncores - 1 of the mount at mountpoint. */
int ring_poker_new(const char *mountpoint, unsigned ncores, struct ring_poker **out);
/* Have the queue of core qid poked, once its new entries are in the kernel; a poke that
 * is wanted and not yet sent stands for any number asked for meanwhile. */
void ring_poker_want(struct ring_poker *p, unsigned qid);
/* No poke more.  A poke in the kernel when the rings stop is answered only when the
 * connection ends (the unmount): its thread frees p then. */
void ring_poker_stop(struct ring_poker *p);

#endif
