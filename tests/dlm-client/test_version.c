/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The lock protocol's version rules (dlm-client/version.c): what a Hello without versions
 * means, which meetings work together and which are refused, and how a version is named in
 * the messages.  tests/cluster/test_versions.sh and test_upgrade.sh meet real processes. */
#include "dlm-client/cfslock.h"
#include "dlm-client/version.h"
#include "release.h"

#include <criterion/criterion.h>
#include <string.h>

Test(version, a_hello_without_versions_is_release_0_1)
{
	struct lock_version v = lock_version_said(false, 7, 7, "x");
	cr_expect_eq(v.major, 1);
	cr_expect_eq(v.minor, 0);
	cr_expect_str_eq(v.release, "0.1");
	v = lock_version_said(true, 3, 4, NULL);
	cr_expect(v.major == 3 && v.minor == 4 && v.release == NULL, "said: kept as said");
}

Test(version, own_is_the_builds)
{
	struct lock_version v = lock_version_own();
	cr_expect_eq(v.major, CFSLOCK_PROTO_MAJOR);
	cr_expect_eq(v.minor, CFSLOCK_PROTO_MINOR);
	cr_expect_str_eq(v.release, CFS_RELEASE);
}

Test(version, one_major_works_together_another_is_refused)
{
	struct lock_version ours = {1, 1, "0.2"};
	cr_expect_eq(lock_version_meet(ours, (struct lock_version){1, 1, "0.2"}), LOCK_SAME_VERSION);
	cr_expect_eq(lock_version_meet(ours, lock_version_said(false, 0, 0, NULL)), LOCK_OTHER_MINOR,
		     "release 0.1 (1.0) works with 1.1");
	cr_expect_eq(lock_version_meet(ours, (struct lock_version){1, 9, "0.9"}), LOCK_OTHER_MINOR,
		     "a newer minor too");
	cr_expect_eq(lock_version_meet(ours, (struct lock_version){2, 1, "0.3"}), LOCK_REFUSED);
	cr_expect_eq(lock_version_meet(ours, (struct lock_version){0, 1, NULL}), LOCK_REFUSED);
	cr_expect_eq(lock_version_meet((struct lock_version){2, 0, NULL}, ours), LOCK_REFUSED,
		     "both ways");
}

Test(version, named_in_messages)
{
	char text[96];
	lock_version_text(lock_version_said(false, 0, 0, NULL), text, sizeof text);
	cr_expect_str_eq(text, "lock protocol 1.0 (release 0.1)");
	lock_version_text((struct lock_version){2, 1, NULL}, text, sizeof text);
	cr_expect_str_eq(text, "lock protocol 2.1 (release unknown)");
}
