/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The owners of files' record locks: claiming, calls held back in order, a cancel or an
 * F_SETLK found among them, release handing the calls back oldest first, the memory of
 * recent releases. */
#include "dlm-client/plock_own.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

static struct po_table *t;
static void setup(void) { cr_assert_not_null(t = po_create()); }
static void teardown(void) { po_destroy(t); }
TestSuite(plock_own, .init = setup, .fini = teardown);

enum { SET, CANCEL, CLOSE };

static void hold(struct po_file *f, uint64_t sender, uint64_t reqid, int kind, bool nowait,
		 const char *body)
{
	struct po_call c = {.sender = sender, .reqid = reqid, .lock_owner = 100 + sender,
			    .kind = kind, .nowait = nowait};
	cr_assert_eq(po_hold_back(f, &c, body, strlen(body) + 1), 0);
}

/* What f held back, bodies in order, freed. */
static void expect_released(struct po_file *f, const char *want)
{
	char got[256] = "";
	for (struct po_call *c = po_release(t, f, 1000), *n; c; c = n) {
		n = c->next;
		strcat(got, (const char *)c->data);
		free(c);
	}
	cr_assert_str_eq(got, want);
}

Test(plock_own, a_claimed_file_is_found_with_its_owner)
{
	cr_assert_null(po_find(t, 7));
	struct po_file *f = po_claim(t, 7, 0x100000001);
	cr_assert_not_null(f);
	cr_assert_eq(po_find(t, 7), f);
	cr_assert_eq(f->owner, 0x100000001);
	cr_assert_not(f->frozen);
	cr_assert_eq(po_count(t), 1);
	cr_assert_null(po_find(t, 8));
}

Test(plock_own, many_files_each_found)
{
	for (uint64_t file = 1; file <= 3000; file++)
		cr_assert_not_null(po_claim(t, file * 4096, file));
	cr_assert_eq(po_count(t), 3000);
	for (uint64_t file = 1; file <= 3000; file++)
		cr_assert_eq(po_find(t, file * 4096)->owner, file);
}

Test(plock_own, calls_come_back_in_order_at_release)
{
	struct po_file *f = po_claim(t, 7, 1);
	hold(f, 2, 1, SET, false, "a");
	hold(f, 3, 1, SET, true, "b");
	hold(f, 2, 2, CLOSE, false, "c");
	expect_released(f, "abc");
	cr_assert_null(po_find(t, 7));
	cr_assert_eq(po_count(t), 0);
}

Test(plock_own, a_cancel_finds_its_waiting_set)
{
	struct po_file *f = po_claim(t, 7, 1);
	hold(f, 2, 1, SET, false, "a");
	hold(f, 2, 2, SET, false, "b");
	hold(f, 3, 2, SET, false, "c");
	cr_assert_null(po_take(f, 2, 3, SET), "no such request");
	cr_assert_null(po_take(f, 2, 2, CLOSE), "not a SET");
	struct po_call *c = po_take(f, 2, 2, SET);
	cr_assert_not_null(c);
	cr_assert_str_eq((const char *)c->data, "b");
	free(c);
	c = po_take(f, 3, 2, SET); /* the last: the tail moves back */
	free(c);
	hold(f, 4, 1, SET, false, "d");
	expect_released(f, "ad");
}

Test(plock_own, set_locks_that_fail_rather_than_wait_are_found)
{
	struct po_file *f = po_claim(t, 7, 1);
	hold(f, 2, 1, SET, false, "a");
	hold(f, 3, 1, SET, true, "b");
	hold(f, 2, 2, SET, true, "c");
	struct po_call *c = po_take_nowait(f);
	cr_assert_str_eq((const char *)c->data, "b");
	free(c);
	free(po_take_nowait(f));
	cr_assert_null(po_take_nowait(f));
	expect_released(f, "a");
}

Test(plock_own, a_close_knows_what_its_owner_left_waiting)
{
	struct po_file *f = po_claim(t, 7, 1);
	hold(f, 2, 1, SET, false, "a");
	cr_assert(po_holds_back(f, 2, 102));
	cr_assert_not(po_holds_back(f, 2, 103));
	cr_assert_not(po_holds_back(f, 3, 103));
	expect_released(f, "a");
}

Test(plock_own, a_release_is_remembered_for_a_while)
{
	expect_released(po_claim(t, 7, 1), "");
	cr_assert(po_recent(t, 7, 1500, 1000));
	cr_assert_not(po_recent(t, 7, 2000, 1000));
	cr_assert_not(po_recent(t, 8, 1500, 1000));
}
