/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The POSIX record lock table: fcntl's rules (replace, split, merge, conflicts), waiters in
 * order, cancel, an owner's close and a node's failure, deadlocks refused, and one sequence
 * applied to two tables ending in the same state (what keeps the cluster's copies equal). */
#include "dlm-client/plock.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>

#define MAX_EVENTS 4096

struct recorder {
	struct pl_event ev[MAX_EVENTS];
	size_t n;
};

static void record(void *arg, const struct pl_event *ev)
{
	struct recorder *r = arg;
	cr_assert_lt(r->n, MAX_EVENTS);
	r->ev[r->n++] = *ev;
}

static struct recorder rec;
static struct pl_table *t;
static void setup(void)
{
	rec.n = 0;
	t = pl_create(record, &rec);
}
static void teardown(void) { pl_destroy(t); }
TestSuite(plock, .init = setup, .fini = teardown);

static struct pl_lock L(uint64_t node, uint64_t owner, uint64_t start, uint64_t end,
			enum pl_type type)
{
	return (struct pl_lock){.file = 7, .node = node, .owner = owner, .start = start,
				.end = end, .pid = (uint32_t)(100 * node + owner), .type = type};
}

/* The last event answering (node, reqid): its type, or -1 with *status untouched. */
static int answer(uint64_t node, uint64_t reqid, int *status)
{
	for (size_t i = rec.n; i-- > 0;)
		if (rec.ev[i].node == node && rec.ev[i].reqid == reqid) {
			if (status)
				*status = rec.ev[i].status;
			return (int)rec.ev[i].type;
		}
	return -1;
}

static void set(uint64_t reqid, struct pl_lock l, bool wait)
{
	cr_assert_eq(pl_set(t, reqid, &l, wait, NULL), 0);
}

/* Does another owner see [start, end] of type as free? */
static bool is_free(uint64_t start, uint64_t end, enum pl_type type)
{
	struct pl_lock probe = L(99, 99, start, end, type), holder;
	return !pl_get(t, &probe, &holder);
}

Test(plock, readers_share_writers_exclude)
{
	set(1, L(1, 1, 0, 99, PL_RD), false);
	set(2, L(2, 1, 50, 149, PL_RD), false);
	cr_assert_eq(answer(1, 1, NULL), PL_EV_GRANTED);
	cr_assert_eq(answer(2, 2, NULL), PL_EV_GRANTED);
	int st = 0;
	set(3, L(3, 1, 149, 149, PL_WR), false);
	cr_assert_eq(answer(3, 3, &st), PL_EV_FAILED);
	cr_assert_eq(st, -EAGAIN);
	set(4, L(3, 1, 150, 200, PL_WR), false);
	cr_assert_eq(answer(3, 4, NULL), PL_EV_GRANTED, "a range that touches but does not overlap");
	struct pl_lock probe = L(4, 1, 120, 120, PL_WR), holder;
	cr_assert(pl_get(t, &probe, &holder));
	cr_assert_eq(holder.node, 2);
	cr_assert_eq(holder.pid, 201, "F_GETLK names the holder's pid");
	cr_assert_eq(holder.start, 50);
	cr_assert_eq(holder.end, 149);
}

Test(plock, an_owner_replaces_splits_and_merges_its_own_ranges)
{
	set(1, L(1, 1, 0, 99, PL_WR), false);
	set(2, L(1, 1, 40, 59, PL_RD), false); /* the middle becomes a read lock: split in 3 */
	cr_assert_eq(pl_count(t), 3);
	cr_assert(is_free(40, 59, PL_RD), "readers share the middle");
	cr_assert_not(is_free(39, 39, PL_RD));
	cr_assert_not(is_free(40, 40, PL_WR));
	set(3, L(1, 1, 40, 59, PL_WR), false); /* back to one write lock: merged */
	cr_assert_eq(pl_count(t), 1);
	set(4, L(1, 1, 10, 19, PL_UN), false); /* a hole */
	cr_assert_eq(pl_count(t), 2);
	cr_assert(is_free(10, 19, PL_WR));
	cr_assert_not(is_free(9, 10, PL_WR));
	set(5, L(1, 1, 0, PL_MAX, PL_UN), false);
	cr_assert_eq(pl_count(t), 0, "unlock of the whole file leaves nothing");
	set(6, L(1, 1, 100, PL_MAX, PL_WR), false);
	set(7, L(1, 1, 0, 99, PL_WR), false);
	cr_assert_eq(pl_count(t), 1, "ranges up to the end of the file merge too");
	cr_assert_eq(answer(1, 7, NULL), PL_EV_GRANTED);
}

Test(plock, waiters_are_granted_in_order_when_the_range_frees)
{
	set(1, L(1, 1, 0, 9, PL_WR), false);
	set(2, L(2, 1, 5, 5, PL_WR), true);
	set(3, L(3, 1, 0, 0, PL_RD), true);
	set(4, L(2, 2, 20, 29, PL_WR), true); /* nothing in its way: granted at once */
	cr_assert_eq(answer(2, 4, NULL), PL_EV_GRANTED);
	cr_assert_eq(answer(2, 2, NULL), -1, "waits");
	cr_assert_eq(answer(3, 3, NULL), -1, "waits");
	set(5, L(1, 1, 0, 4, PL_UN), false);
	cr_assert_eq(answer(3, 3, NULL), PL_EV_GRANTED, "[0, 4] is free for the reader");
	cr_assert_eq(answer(2, 2, NULL), -1, "5 is still held");
	set(6, L(1, 1, 5, 9, PL_RD), false); /* the holder goes down to read */
	cr_assert_eq(answer(2, 2, NULL), -1, "a reader still holds 5");
	set(7, L(1, 1, 0, PL_MAX, PL_UN), false);
	cr_assert_eq(answer(2, 2, NULL), PL_EV_GRANTED);
	cr_assert_eq(pl_count(t), 3);
}

Test(plock, cancel_close_and_node_failure)
{
	set(1, L(1, 1, 0, 9, PL_WR), false);
	set(2, L(2, 1, 0, 0, PL_WR), true);
	set(3, L(3, 1, 1, 1, PL_WR), true);
	int st = 0;
	cr_assert_eq(pl_cancel(t, 2, 2), 0);
	cr_assert_eq(answer(2, 2, &st), PL_EV_FAILED);
	cr_assert_eq(st, -ECANCELED);
	cr_assert_eq(pl_cancel(t, 2, 2), -ENOENT);
	/* Node 1's owner closes the file: its locks go, node 3's waiter gets its range. */
	set(4, L(1, 2, 50, 59, PL_WR), false); /* another owner of node 1 keeps this */
	pl_drop(t, 1, 1, 7, true);
	cr_assert_eq(answer(3, 3, NULL), PL_EV_GRANTED);
	cr_assert_not(is_free(55, 55, PL_RD), "only the closing owner's locks went");
	/* Node 3 fails: all it held or waited for goes. */
	set(5, L(3, 2, 55, 55, PL_RD), true);
	pl_drop(t, 3, 0, 0, true);
	cr_assert_eq(answer(3, 5, &st), PL_EV_FAILED);
	cr_assert(is_free(1, 1, PL_WR));
	cr_assert_eq(pl_count(t), 1);
}

Test(plock, bad_ranges_and_types_are_refused)
{
	struct pl_lock l = L(1, 1, 10, 9, PL_WR);
	cr_assert_eq(pl_set(t, 1, &l, false, NULL), -EINVAL);
	l = L(1, 1, 0, 9, (enum pl_type)7);
	cr_assert_eq(pl_set(t, 1, &l, false, NULL), -EINVAL);
	cr_assert_eq(rec.n, 0);
}

/* Owner (node, owner) locks byte 0 of file f, for writing. */
static struct pl_lock B(uint64_t f, uint64_t node, uint64_t owner)
{
	struct pl_lock l = L(node, owner, 0, 0, PL_WR);
	l.file = f;
	return l;
}

static void expect_deadlock(uint64_t node, uint64_t reqid)
{
	int st = 0;
	cr_assert_eq(answer(node, reqid, &st), PL_EV_FAILED, "request %llu refused",
		     (unsigned long long)reqid);
	cr_assert_eq(st, -EDEADLK);
}

Test(plock, two_owners_each_waiting_for_the_other_is_a_deadlock)
{
	set(1, B(7, 1, 1), false);
	set(2, B(8, 2, 1), false);
	set(3, B(8, 1, 1), true); /* waits for node 2's owner */
	cr_assert_eq(answer(1, 3, NULL), -1, "waits");
	set(4, B(7, 2, 1), true); /* would wait for node 1's owner, which waits for it */
	expect_deadlock(2, 4);
	cr_assert_eq(pl_count(t), 3, "both still hold their byte, one waits");
	set(5, B(7, 2, 1), false);
	int st = 0;
	cr_assert_eq(answer(2, 5, &st), PL_EV_FAILED);
	cr_assert_eq(st, -EAGAIN, "F_SETLK does not wait, so it is busy, not a deadlock");
	pl_drop(t, 2, 1, 8, true); /* the refused owner gives up: the waiter goes on */
	cr_assert_eq(answer(1, 3, NULL), PL_EV_GRANTED);
}

Test(plock, a_cycle_through_three_owners_and_readers_upgrading)
{
	set(1, B(7, 1, 1), false);
	set(2, B(8, 2, 1), false);
	set(3, B(9, 3, 1), false);
	set(4, B(8, 1, 1), true); /* 1 waits for 2 */
	set(5, B(9, 2, 1), true); /* 2 waits for 3 */
	set(6, B(10, 3, 1), true); /* nobody holds 10: granted, no cycle */
	cr_assert_eq(answer(3, 6, NULL), PL_EV_GRANTED);
	set(7, B(7, 3, 1), true); /* 3 would wait for 1: 1 -> 2 -> 3 -> 1 */
	expect_deadlock(3, 7);
	/* Two readers of one range that both want to write it. */
	set(8, L(4, 1, 100, 109, PL_RD), false);
	set(9, L(5, 1, 100, 109, PL_RD), false);
	set(10, L(4, 1, 100, 109, PL_WR), true);
	cr_assert_eq(answer(4, 10, NULL), -1, "waits for the other reader");
	set(11, L(5, 1, 100, 109, PL_WR), true);
	expect_deadlock(5, 11);
}

Test(plock, a_chain_without_a_cycle_waits)
{
	set(1, B(7, 1, 1), false);
	set(2, B(8, 2, 1), false);
	set(3, B(9, 3, 1), false);
	set(4, B(8, 1, 1), true);  /* 1 waits for 2 */
	set(5, B(9, 2, 1), true);  /* 2 waits for 3 */
	set(6, B(11, 4, 1), false);
	set(7, B(11, 3, 1), true); /* 3 waits for 4, which waits for nobody */
	cr_assert_eq(answer(3, 7, NULL), -1, "a long chain is no deadlock");
	set(8, B(7, 2, 2), true); /* another owner of node 2, holding nothing 1 wants */
	cr_assert_eq(answer(2, 8, NULL), -1, "owners are (node, owner), not nodes");
}

static bool not_file_8(void *arg, uint64_t file)
{
	(void)arg;
	return file != 8;
}

Test(plock, a_cycle_through_a_file_out_of_scope_is_not_seen)
{
	struct pl_scope scope = {.sees = not_file_8};
	set(1, B(7, 1, 1), false);
	set(2, B(8, 2, 1), false);
	set(3, B(8, 1, 1), true);
	struct pl_lock l = B(7, 2, 1);
	cr_assert_eq(pl_set(t, 4, &l, true, &scope), 0);
	cr_assert_eq(answer(2, 4, NULL), -1, "the edge through file 8 is not followed: waits");
}

struct all_held {
	struct pl_lock v[512];
	size_t n;
};
static void collect(void *arg, const struct pl_lock *l, uint64_t reqid)
{
	struct all_held *a = arg;
	if (reqid)
		return; /* a waiter */
	cr_assert_lt(a->n, 512);
	a->v[a->n++] = *l;
}

/* No two owners hold conflicting ranges; an owner's own ranges neither overlap nor touch
 * with one type (they would have merged). */
static void check_invariants(const struct pl_table *x)
{
	static struct all_held a;
	a.n = 0;
	pl_walk(x, collect, &a);
	for (size_t i = 0; i < a.n; i++)
		for (size_t j = i + 1; j < a.n; j++) {
			const struct pl_lock *p = &a.v[i], *q = &a.v[j];
			bool same = p->node == q->node && p->owner == q->owner;
			bool overlaps = p->start <= q->end && q->start <= p->end;
			cr_assert_not(overlaps && !same && (p->type == PL_WR || q->type == PL_WR),
				      "conflicting locks held at once");
			cr_assert_not(same && overlaps, "an owner's ranges overlap");
			cr_assert_not(same && p->type == q->type &&
					      (p->end + 1 == q->start || q->end + 1 == p->start),
				      "touching ranges of one type not merged");
		}
}

/* Two copies fed the same random calls end with the same answers: the replicas agree. */
static struct recorder rec2;
Test(plock, same_calls_same_answers)
{
	struct pl_table *u = pl_create(record, &rec2);
	srand(42);
	for (uint64_t i = 1; i <= 3000; i++) {
		uint64_t s = (uint64_t)(rand() % 100), len = (uint64_t)(rand() % 20);
		struct pl_lock l = L((uint64_t)(rand() % 3 + 1), (uint64_t)(rand() % 2 + 1), s, s + len,
				     (enum pl_type)(rand() % 3));
		bool wait = rand() % 2;
		int which = rand() % 20;
		if (which == 0) {
			pl_cancel(t, l.node, i - 5);
			pl_cancel(u, l.node, i - 5);
		} else if (which == 1) {
			pl_drop(t, l.node, l.owner, 7, true);
			pl_drop(u, l.node, l.owner, 7, true);
		} else {
			cr_assert_eq(pl_set(t, i, &l, wait, NULL), 0);
			cr_assert_eq(pl_set(u, i, &l, wait, NULL), 0);
		}
		/* The invariant: no two owners' held ranges conflict (every probe agrees). */
		struct pl_lock holder, probe = L(9, 9, (uint64_t)(rand() % 120), 0, PL_WR);
		probe.end = probe.start;
		cr_assert_eq(pl_get(t, &probe, &holder), pl_get(u, &probe, &holder));
		check_invariants(t);
	}
	cr_assert_eq(rec.n, rec2.n);
	for (size_t i = 0; i < rec.n; i++)
		cr_assert(rec.ev[i].type == rec2.ev[i].type && rec.ev[i].reqid == rec2.ev[i].reqid &&
			  rec.ev[i].status == rec2.ev[i].status);
	cr_assert_eq(pl_count(t), pl_count(u));
	pl_destroy(u);
}

/* A copy made from pl_walk in the middle of a run (a joining member's snapshot) answers the
 * rest of the run as the original does: waiters keep their order. */
static struct recorder rec3;
static void copy_into(void *arg, const struct pl_lock *l, uint64_t reqid)
{
	cr_assert_eq(pl_restore(arg, l, reqid), 0);
}

static void random_call(struct pl_table *a, struct pl_table *b, uint64_t i)
{
	uint64_t s = (uint64_t)(rand() % 60), len = (uint64_t)(rand() % 20);
	struct pl_lock l = L((uint64_t)(rand() % 3 + 1), (uint64_t)(rand() % 2 + 1), s, s + len,
			     (enum pl_type)(rand() % 3));
	bool wait = rand() % 3 != 0;
	int which = rand() % 30;
	struct pl_table *both[2] = {a, b};
	for (int k = 0; k < 2 && both[k]; k++) {
		if (which == 0)
			pl_cancel(both[k], l.node, i - 3);
		else if (which == 1)
			pl_drop(both[k], l.node, 0, 0, false); /* a node fails: its waiters go */
		else
			cr_assert_eq(pl_set(both[k], i, &l, wait, NULL), 0);
	}
}

Test(plock, a_copy_from_a_walk_goes_on_alike)
{
	srand(7);
	uint64_t i = 1;
	for (; i <= 1500; i++)
		random_call(t, NULL, i);
	struct pl_table *v = pl_create(record, &rec3);
	pl_walk(t, copy_into, v);
	cr_assert_eq(pl_count(v), pl_count(t));
	cr_assert_gt(pl_count(t), 0, "the copy is made of something");
	size_t from = rec.n;
	for (; i <= 3000; i++)
		random_call(t, v, i);
	cr_assert_eq(rec.n - from, rec3.n);
	for (size_t k = 0; k < rec3.n; k++)
		cr_assert(rec.ev[from + k].type == rec3.ev[k].type &&
			  rec.ev[from + k].reqid == rec3.ev[k].reqid &&
			  rec.ev[from + k].node == rec3.ev[k].node);
	check_invariants(v);
	pl_destroy(v);
}
