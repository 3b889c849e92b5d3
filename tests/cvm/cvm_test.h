/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Shared by the cvm tests that work on volumes in the test directory. */
#ifndef TESTS_CVM_TEST_H
#define TESTS_CVM_TEST_H

#include "cvm/internal.h"
#include "../helpers.h"

/* Everything the scan finds in the test directory. */
static inline struct cvm_scan scan_dir(void)
{
	const char *paths[] = {test_dir};
	struct cvm_scan s;
	cr_assert_eq(cvm_scan_paths(paths, 1, &s), 0, "%s", cvm_last_error());
	return s;
}

#endif
