/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Test helpers: a unique temporary directory per test, sparse LUN files in it, and its
 * removal.  Files live under $TMPDIR (default /var/tmp: a real disk, where O_DIRECT works). */
#ifndef TESTS_HELPERS_H
#define TESTS_HELPERS_H

#include <criterion/criterion.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char test_dir[256];

static inline int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st; (void)flag; (void)ftw;
	return remove(path);
}

static inline void test_dir_remove(void)
{
	if (test_dir[0])
		nftw(test_dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	test_dir[0] = '\0';
}

static inline void test_dir_make(void)
{
	/* A failed assertion ends the test's process before its own cleanup: the directory
	 * goes at that exit all the same. */
	static bool removed_at_exit;
	if (!removed_at_exit && atexit(test_dir_remove) == 0)
		removed_at_exit = true;
	const char *tmp = getenv("TMPDIR");
	snprintf(test_dir, sizeof test_dir, "%s/cvmtest.XXXXXX", tmp && *tmp ? tmp : "/var/tmp");
	cr_assert_not_null(mkdtemp(test_dir), "mkdtemp %s", test_dir);
}

/* Path of a file in the test directory (a rotating set of buffers, fine for a few at once). */
static inline const char *test_path(const char *name)
{
	static char bufs[16][512];
	static unsigned next;
	char *p = bufs[next++ % 16];
	snprintf(p, 512, "%s/%s", test_dir, name);
	return p;
}

/* A sparse file of the given size; returns its path. */
static inline const char *make_lun(const char *name, unsigned long long bytes)
{
	const char *p = test_path(name);
	int fd = open(p, O_CREAT | O_RDWR | O_TRUNC, 0644);
	cr_assert_geq(fd, 0, "create %s", p);
	cr_assert_eq(ftruncate(fd, (off_t)bytes), 0);
	close(fd);
	return p;
}

#endif
