/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The kernel DLM backend.  Where the kernel DLM runs (/dev/misc/dlm-control and dlm_controld)
 * it must lock and unlock; elsewhere opening it must fail with ENODEV, not pretend. */
#include "dlm-client/cfslock.h"

#include <criterion/criterion.h>
#include <unistd.h>

Test(dlm, runs_only_where_the_kernel_dlm_is)
{
	struct cfslock_client *c;
	int rc = cfslock_client_open("dlm", NULL, &c);
	if (access("/dev/misc/dlm-control", R_OK | W_OK) != 0) {
		cr_assert_eq(rc, -ENODEV, "opened the dlm backend without a kernel DLM");
		return;
	}
	cr_assert_eq(rc, 0);
	struct cfslock_space *s;
	cr_assert_eq(cfslock_space_open(c, "cfstest", &s), 0);
	struct cfslock *lk = cfslock_new(s, "r", NULL, NULL, NULL);
	cr_assert_eq(cfslock_request_sync(lk, CFSLOCK_EX, 0), 0);
	cr_assert_eq(cfslock_unlock_sync(lk), 0);
	cfslock_free(lk);
	cfslock_space_close(s);
	cfslock_client_close(c);
}
