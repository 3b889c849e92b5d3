/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The lock table's grant rules, and a randomized check of its invariants and determinism. */
#include "dlm-client/cfslock.h"
#include "dlm-client/table.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_EVENTS 100000

struct recorder {
	struct lt_event ev[MAX_EVENTS];
	size_t n;
};

static void record(void *arg, const struct lt_event *ev)
{
	struct recorder *r = arg;
	cr_assert_lt(r->n, MAX_EVENTS);
	r->ev[r->n++] = *ev;
}

static struct recorder *rec;
static struct lt_table *t;
static void setup(void)
{
	rec = calloc(1, sizeof *rec);
	t = lt_create(record, rec);
}
static void teardown(void)
{
	lt_destroy(t);
	free(rec);
}
TestSuite(table, .init = setup, .fini = teardown);

/* The last event for (node, lkid) of a type, or NULL. */
static const struct lt_event *last(enum lt_event_type type, uint32_t node, uint64_t lkid)
{
	for (size_t i = rec->n; i-- > 0;)
		if (rec->ev[i].type == type && rec->ev[i].node == node && rec->ev[i].lkid == lkid)
			return &rec->ev[i];
	return NULL;
}

static bool granted(uint32_t node, uint64_t lkid, int mode)
{
	const struct lt_event *e = last(LT_EV_GRANTED, node, lkid);
	return e && e->mode == mode;
}

#define R(node, id, mode, flags) cr_assert_eq(lt_request(t, node, id, "res", 3, mode, flags), 0)

Test(table, compatibility_matrix)
{
	/* Spot checks of the DLM matrix, and symmetry. */
	cr_assert(lt_modes_compatible(CFSLOCK_PR, CFSLOCK_PR));
	cr_assert(lt_modes_compatible(CFSLOCK_CR, CFSLOCK_PW));
	cr_assert(lt_modes_compatible(CFSLOCK_CW, CFSLOCK_CW));
	cr_assert_not(lt_modes_compatible(CFSLOCK_CW, CFSLOCK_PR));
	cr_assert_not(lt_modes_compatible(CFSLOCK_PW, CFSLOCK_PW));
	cr_assert_not(lt_modes_compatible(CFSLOCK_EX, CFSLOCK_CR));
	for (int m = 0; m < 6; m++) {
		cr_assert(lt_modes_compatible(CFSLOCK_NL, m));
		for (int n = 0; n < 6; n++)
			cr_assert_eq(lt_modes_compatible(m, n), lt_modes_compatible(n, m));
	}
}

Test(table, shared_readers_then_a_writer_waits_in_order)
{
	R(1, 1, CFSLOCK_PR, 0);
	R(2, 1, CFSLOCK_PR, 0);
	cr_assert(granted(1, 1, CFSLOCK_PR) && granted(2, 1, CFSLOCK_PR));
	R(3, 1, CFSLOCK_EX, 0);
	cr_assert_not(granted(3, 1, CFSLOCK_EX));
	/* Both readers are told someone wants EX. */
	cr_assert_not_null(last(LT_EV_BLOCKING, 1, 1));
	cr_assert_not_null(last(LT_EV_BLOCKING, 2, 1));
	/* A new reader does not overtake the waiting writer: no starvation. */
	R(4, 1, CFSLOCK_PR, 0);
	cr_assert_not(granted(4, 1, CFSLOCK_PR));
	cr_assert_eq(lt_unlock(t, 1, 1, NULL), 0);
	cr_assert_not(granted(3, 1, CFSLOCK_EX));
	cr_assert_eq(lt_unlock(t, 2, 1, NULL), 0);
	cr_assert(granted(3, 1, CFSLOCK_EX));
	cr_assert_not(granted(4, 1, CFSLOCK_PR));
	cr_assert_not_null(last(LT_EV_BLOCKING, 3, 1), "the writer hears about the reader");
	cr_assert_eq(lt_unlock(t, 3, 1, NULL), 0);
	cr_assert(granted(4, 1, CFSLOCK_PR));
}

Test(table, conversions_go_before_new_requests)
{
	R(1, 1, CFSLOCK_PR, 0);
	R(2, 1, CFSLOCK_PR, 0);
	R(3, 1, CFSLOCK_EX, 0);                       /* waits */
	cr_assert_eq(lt_convert(t, 1, 1, CFSLOCK_EX, 0, NULL), 0); /* converts, waits for 2 */
	cr_assert_eq(lt_unlock(t, 2, 1, NULL), 0);
	cr_assert(granted(1, 1, CFSLOCK_EX), "the conversion is served first");
	cr_assert_not(granted(3, 1, CFSLOCK_EX));
	cr_assert_eq(lt_convert(t, 1, 1, CFSLOCK_NL, 0, NULL), 0);
	cr_assert(granted(3, 1, CFSLOCK_EX), "down-conversion lets the waiter in");
	cr_assert_eq(lt_convert(t, 1, 1, CFSLOCK_PR, 0, NULL), 0); /* waits behind EX */
	cr_assert_eq(lt_convert(t, 1, 1, CFSLOCK_NL, 0, NULL), -EBUSY, "converting already");
}

/* Two holders of PR both converting to EX would wait for each other for ever: the later one
 * is refused with EDEADLK and keeps PR; once it lets go, the first is granted. */
Test(table, conversion_deadlock_refuses_the_later_one)
{
	R(1, 1, CFSLOCK_PR, 0);
	R(2, 1, CFSLOCK_PR, 0);
	cr_assert_eq(lt_convert(t, 1, 1, CFSLOCK_EX, 0, NULL), 0);
	cr_assert_not(granted(1, 1, CFSLOCK_EX), "waits for node 2's PR");
	cr_assert_not_null(last(LT_EV_BLOCKING, 2, 1));
	cr_assert_eq(lt_convert(t, 2, 1, CFSLOCK_EX, 0, NULL), 0);
	const struct lt_event *e = last(LT_EV_FAILED, 2, 1);
	cr_assert(e && e->status == -EDEADLK && e->mode == CFSLOCK_PR);
	cr_assert_null(last(LT_EV_FAILED, 1, 1), "the first conversion waits on");
	R(3, 1, CFSLOCK_PR, 0); /* a new request waits behind the conversion */
	cr_assert_not(granted(3, 1, CFSLOCK_PR));
	cr_assert_eq(lt_unlock(t, 2, 1, NULL), 0);
	cr_assert(granted(1, 1, CFSLOCK_EX));
	/* Not a deadlock: a conversion that waits for a holder that is not converting. */
	cr_assert_eq(lt_request(t, 4, 2, "other", 5, CFSLOCK_PR, 0), 0);
	cr_assert_eq(lt_request(t, 5, 2, "other", 5, CFSLOCK_PR, 0), 0);
	cr_assert_eq(lt_convert(t, 4, 2, CFSLOCK_EX, 0, NULL), 0);
	cr_assert_eq(lt_convert(t, 5, 2, CFSLOCK_NL, 0, NULL), 0, "5 goes down instead");
	cr_assert(granted(4, 2, CFSLOCK_EX));
	cr_assert_null(last(LT_EV_FAILED, 4, 2));
}

Test(table, noqueue_fails_with_eagain)
{
	R(1, 1, CFSLOCK_EX, 0);
	R(2, 1, CFSLOCK_PR, LT_NOQUEUE);
	const struct lt_event *e = last(LT_EV_FAILED, 2, 1);
	cr_assert_not_null(e);
	cr_assert_eq(e->status, -EAGAIN);
	cr_assert_eq(lt_count(t), 1, "a refused NOQUEUE request leaves nothing behind");
	R(2, 1, CFSLOCK_NL, 0);
	cr_assert_eq(lt_convert(t, 2, 1, CFSLOCK_PR, LT_NOQUEUE, NULL), 0);
	e = last(LT_EV_FAILED, 2, 1);
	cr_assert_eq(e->status, -EAGAIN);
	cr_assert_eq(e->mode, CFSLOCK_NL, "a refused conversion keeps its mode");
}

/* NOQUEUEBAST: a refused request still tells the holders in its way, once per grant; a plain
 * NOQUEUE tells nobody. */
Test(table, noqueuebast_tells_the_holders)
{
	R(1, 1, CFSLOCK_PR, 0);
	R(2, 1, CFSLOCK_CR, 0);
	R(3, 1, CFSLOCK_EX, LT_NOQUEUE);
	cr_assert_null(last(LT_EV_BLOCKING, 1, 1), "a plain NOQUEUE refusal told a holder");
	R(3, 2, CFSLOCK_EX, LT_NOQUEUE | LT_NOQUEUEBAST);
	cr_assert_eq(last(LT_EV_FAILED, 3, 2)->status, -EAGAIN);
	const struct lt_event *e1 = last(LT_EV_BLOCKING, 1, 1), *e2 = last(LT_EV_BLOCKING, 2, 1);
	cr_assert(e1 && e1->mode == CFSLOCK_EX && e2 && e2->mode == CFSLOCK_EX);
	size_t n = rec->n;
	R(3, 3, CFSLOCK_EX, LT_NOQUEUE | LT_NOQUEUEBAST);
	cr_assert_eq(rec->n, n + 1, "a second refusal for the same mode tells nobody again");
	/* A refused conversion tells the others, not itself; PW is in the way of PR only. */
	R(3, 4, CFSLOCK_NL, 0);
	cr_assert_eq(lt_convert(t, 3, 4, CFSLOCK_PW, LT_NOQUEUE | LT_NOQUEUEBAST, NULL), 0);
	cr_assert_eq(last(LT_EV_BLOCKING, 1, 1)->mode, CFSLOCK_PW);
	cr_assert_eq(last(LT_EV_BLOCKING, 2, 1)->mode, CFSLOCK_EX, "CR does not block PW");
	cr_assert_null(last(LT_EV_BLOCKING, 3, 4));
	cr_assert_eq(lt_count(t), 3, "refused requests leave nothing behind");
}

Test(table, cancel_waiting_and_converting)
{
	R(1, 1, CFSLOCK_EX, 0);
	R(2, 1, CFSLOCK_PR, 0);
	R(3, 1, CFSLOCK_NL, 0);
	cr_assert_eq(lt_convert(t, 3, 1, CFSLOCK_PW, 0, NULL), 0);
	cr_assert_eq(lt_cancel(t, 2, 1), 0);
	cr_assert_eq(last(LT_EV_FAILED, 2, 1)->status, -ECANCELED);
	cr_assert_eq(lt_cancel(t, 3, 1), 0);
	cr_assert_eq(last(LT_EV_FAILED, 3, 1)->mode, CFSLOCK_NL);
	cr_assert_eq(lt_cancel(t, 1, 1), -ENOENT, "nothing pending to cancel");
	cr_assert_eq(lt_count(t), 2);
}

Test(table, value_block_written_on_release_from_pw_or_ex)
{
	uint8_t v1[LT_LVB_LEN], v2[LT_LVB_LEN];
	memset(v1, 0x11, sizeof v1);
	memset(v2, 0x22, sizeof v2);
	R(1, 1, CFSLOCK_EX, 0);
	cr_assert_not(last(LT_EV_GRANTED, 1, 1)->lvb_valid);
	cr_assert_eq(lt_unlock(t, 1, 1, v1), 0);
	R(2, 1, CFSLOCK_PR, 0);
	const struct lt_event *e = last(LT_EV_GRANTED, 2, 1);
	cr_assert(e->lvb_valid);
	cr_assert_eq(memcmp(e->lvb, v1, LT_LVB_LEN), 0);
	cr_assert_eq(lt_unlock(t, 2, 1, v2), 0); /* from PR: not written */
	R(3, 1, CFSLOCK_PW, 0);
	cr_assert_eq(memcmp(last(LT_EV_GRANTED, 3, 1)->lvb, v1, LT_LVB_LEN), 0);
	cr_assert_eq(lt_convert(t, 3, 1, CFSLOCK_CR, 0, v2), 0); /* down from PW: written */
	R(4, 1, CFSLOCK_CR, 0);
	cr_assert_eq(memcmp(last(LT_EV_GRANTED, 4, 1)->lvb, v2, LT_LVB_LEN), 0);
}

Test(table, failed_node_locks_stay_until_recovery)
{
	uint8_t v[LT_LVB_LEN] = {1};
	R(1, 1, CFSLOCK_EX, 0);
	cr_assert_eq(lt_unlock(t, 1, 1, v), 0);
	R(1, 2, CFSLOCK_EX, 0);
	cr_assert_eq(lt_request(t, 1, 3, "other", 5, CFSLOCK_PR, 0), 0);
	R(2, 1, CFSLOCK_PR, 0); /* waits for node 1's EX */
	cr_assert_eq(lt_request(t, 1, 4, "res", 3, CFSLOCK_PR, 0), 0); /* node 1 waiting too */
	cr_assert(lt_node_holds(t, 1));
	lt_node_failed(t, 1);
	cr_assert(lt_node_holds(t, 1), "its granted locks stay, recovering");
	cr_assert_not(granted(2, 1, CFSLOCK_PR), "granted over a recovering EX");
	cr_assert_eq(lt_request(t, 2, 2, "other", 5, CFSLOCK_PR, 0), 0);
	cr_assert(granted(2, 2, CFSLOCK_PR), "a compatible lock is granted beside recovering PR");
	lt_recovery_done(t, 1);
	const struct lt_event *e = last(LT_EV_GRANTED, 2, 1);
	cr_assert_not_null(e, "not granted after recovery");
	cr_assert_not(e->lvb_valid, "an LVB under a dead writer must read as invalid");
	cr_assert_eq(lt_count(t), 2);
	cr_assert_not(lt_node_holds(t, 1), "nothing of node 1 is left for a recovery");
}

/* A survivor's EX waits for a dead node's PR until its recovery; the survivors' readers are
 * granted past it meanwhile, and wait behind it again once the recovery is done. */
Test(table, readers_pass_a_request_held_up_by_recovery)
{
	R(1, 1, CFSLOCK_PR, 0);
	lt_node_failed(t, 1);
	R(2, 1, CFSLOCK_EX, 0);
	cr_assert_not(granted(2, 1, CFSLOCK_EX), "granted over a recovering PR");
	R(3, 1, CFSLOCK_PR, 0);
	cr_assert(granted(3, 1, CFSLOCK_PR), "a reader waits behind a request held up by recovery");
	cr_assert_null(last(LT_EV_BLOCKING, 3, 1), "the reader is told before EX can be had");
	cr_assert_null(last(LT_EV_BLOCKING, 1, 1), "the dead node is told");
	lt_recovery_done(t, 1);
	cr_assert_not_null(last(LT_EV_BLOCKING, 3, 1), "the reader is not told that EX waits");
	cr_assert_not(granted(2, 1, CFSLOCK_EX), "EX granted beside the reader's PR");
	R(4, 1, CFSLOCK_PR, 0);
	cr_assert_not(granted(4, 1, CFSLOCK_PR), "a reader passed EX after the recovery");
	cr_assert_eq(lt_unlock(t, 3, 1, NULL), 0);
	cr_assert(granted(2, 1, CFSLOCK_EX));
	cr_assert_eq(lt_unlock(t, 2, 1, NULL), 0);
	cr_assert(granted(4, 1, CFSLOCK_PR));
}

/* Only requests held up by recovery are passed: one that waits for a live holder keeps its
 * place, also when those ahead of it are held up. */
Test(table, only_requests_held_up_by_recovery_are_passed)
{
	R(1, 1, CFSLOCK_CR, 0);
	R(2, 1, CFSLOCK_PR, 0);
	lt_node_failed(t, 1);
	cr_assert_eq(lt_convert(t, 2, 1, CFSLOCK_EX, 0, NULL), 0); /* held up by node 1's CR */
	R(3, 1, CFSLOCK_PR, 0);
	cr_assert(granted(3, 1, CFSLOCK_PR), "a reader waits behind a held-up conversion");
	R(4, 1, CFSLOCK_PW, 0); /* fits beside the dead CR, waits for live PRs */
	R(5, 1, CFSLOCK_CR, 0);
	cr_assert_not(granted(5, 1, CFSLOCK_CR), "passed a request waiting for a live holder");
	cr_assert_eq(lt_unlock(t, 3, 1, NULL), 0);
	cr_assert_not(granted(2, 1, CFSLOCK_EX), "EX granted beside a recovering CR");
	cr_assert_not(granted(4, 1, CFSLOCK_PW), "PW granted beside node 2's PR");
	cr_assert_not(granted(5, 1, CFSLOCK_CR), "passed a request waiting for a live holder");
	lt_recovery_done(t, 1);
	cr_assert(granted(2, 1, CFSLOCK_EX));
	cr_assert_not(granted(5, 1, CFSLOCK_CR));
	cr_assert_eq(lt_unlock(t, 2, 1, NULL), 0);
	cr_assert(granted(4, 1, CFSLOCK_PW) && granted(5, 1, CFSLOCK_CR));
}

/* ---- randomized: invariants, and the same stream gives the same events ---- */
struct model_lock {
	uint32_t node;
	uint64_t lkid;
	int res;
	bool exists;
};

struct conflict_ctx {
	struct lt_lock_info held[512];
	char names[512][LT_NAME_MAX];
	size_t n;
};

static void collect_held(void *arg, const struct lt_lock_info *i)
{
	struct conflict_ctx *c = arg;
	if (i->queue == LT_WAITING || c->n == 512)
		return;
	c->held[c->n] = *i;
	memcpy(c->names[c->n], i->name, i->name_len);
	c->held[c->n].name = c->names[c->n];
	c->n++;
}

static void assert_no_incompatible_grants(const struct lt_table *tab)
{
	struct conflict_ctx *c = calloc(1, sizeof *c);
	lt_walk(tab, collect_held, c);
	for (size_t a = 0; a < c->n; a++)
		for (size_t b = a + 1; b < c->n; b++)
			if (c->held[a].name_len == c->held[b].name_len &&
			    memcmp(c->held[a].name, c->held[b].name, c->held[a].name_len) == 0)
				cr_assert(lt_modes_compatible(c->held[a].granted, c->held[b].granted),
					  "%s: %s and %s granted together", c->names[a],
					  cfslock_mode_name(c->held[a].granted),
					  cfslock_mode_name(c->held[b].granted));
	free(c);
}

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* Apply one random operation to both tables. */
static void random_op(struct lt_table **tabs, size_t ntabs, struct model_lock *locks, size_t n,
		      uint64_t *seed)
{
	struct model_lock *l = &locks[rnd(seed) % n];
	int mode = (int)(rnd(seed) % 6);
	unsigned flags = rnd(seed) % 4 == 0 ? LT_NOQUEUE : 0;
	uint8_t lvb[LT_LVB_LEN];
	memset(lvb, (int)(rnd(seed) & 0xff), sizeof lvb);
	char name[8];
	snprintf(name, sizeof name, "r%d", l->res);
	int op = (int)(rnd(seed) % 4);
	for (size_t k = 0; k < ntabs; k++) {
		switch (op) {
		case 0: lt_request(tabs[k], l->node, l->lkid, name, strlen(name), mode, flags); break;
		case 1: lt_convert(tabs[k], l->node, l->lkid, mode, flags, lvb); break;
		case 2: lt_unlock(tabs[k], l->node, l->lkid, lvb); break;
		case 3: lt_cancel(tabs[k], l->node, l->lkid); break;
		}
	}
}

static void restore_into(void *arg, const struct lt_lock_info *i)
{
	cr_assert_eq(lt_restore(arg, i), 0);
}

Test(table, random_streams_keep_invariants_and_replicate)
{
	struct recorder *r2 = calloc(1, sizeof *r2);
	struct lt_table *t2 = lt_create(record, r2);
	struct model_lock locks[24];
	for (int i = 0; i < 24; i++)
		locks[i] = (struct model_lock){.node = 1 + (uint32_t)i % 3, .lkid = 100 + (uint64_t)i,
					       .res = i % 4};
	uint64_t seed = 0xfeedface;
	struct lt_table *both[] = {t, t2};
	for (int step = 0; step < 4000; step++) {
		random_op(both, 2, locks, 24, &seed);
		assert_no_incompatible_grants(t);
		if (step == 2000) {
			/* Node 3 fails on both replicas, and recovery completes later. */
			lt_node_failed(t, 3);
			lt_node_failed(t2, 3);
		}
		if (step == 2500) {
			lt_recovery_done(t, 3);
			lt_recovery_done(t2, 3);
		}
	}
	cr_assert_eq(rec->n, r2->n, "replicas emitted different numbers of events");
	cr_assert_eq(memcmp(rec->ev, r2->ev, rec->n * sizeof *rec->ev), 0,
		     "replicas emitted different events");
	cr_assert_gt(rec->n, 1000, "the random stream did too little to prove anything");

	/* A replica rebuilt from a walk (state transfer) goes on exactly like the original. */
	struct recorder *r3 = calloc(1, sizeof *r3);
	struct lt_table *t3 = lt_create(record, r3);
	lt_walk(t, restore_into, t3);
	size_t before = rec->n;
	struct lt_table *pair[] = {t, t3};
	for (int step = 0; step < 2000; step++)
		random_op(pair, 2, locks, 24, &seed);
	cr_assert_eq(rec->n - before, r3->n);
	cr_assert_eq(memcmp(rec->ev + before, r3->ev, r3->n * sizeof *r3->ev), 0,
		     "a restored replica diverged");
	lt_destroy(t2);
	lt_destroy(t3);
	free(r2);
	free(r3);
}
