/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Files' link counts in the check of a mounted filesystem (cfs/check_links.c): which files
 * the names met make suspects, and the count again, which clears what the walk miscounted and
 * names what the inode miscounts. */
#include "cfs_test.h"
#include "cfs/check_links.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const struct timespec T1 = {100, 1}, T2 = {100, 2};

Test(check_links, one_name_each_is_no_suspect)
{
	struct cfs_links *l = cfs_links_new(1000);
	cr_assert(l);
	for (uint64_t ino = 10; ino < 500; ino++)
		cr_assert_eq(cfs_links_met(l, ino, 1, &T1), 0);
	cr_assert_eq(cfs_links_suspects(l), 0);
	cfs_links_free(l);
}

Test(check_links, names_against_counts)
{
	struct cfs_links *l = cfs_links_new(1000);
	cfs_links_met(l, 10, 1, &T1); /* one link, two names */
	cfs_links_met(l, 10, 1, &T1);
	cfs_links_met(l, 20, 2, &T1); /* two links, two names: fine */
	cfs_links_met(l, 20, 2, &T1);
	cfs_links_met(l, 30, 3, &T1); /* three links, one name */
	cfs_links_met(l, 5000, 1, &T1); /* past the volume's blocks: a record, fine */
	cr_assert_eq(cfs_links_suspects(l), 2);
	cfs_links_met(l, 5000, 1, &T1);
	cr_assert_eq(cfs_links_suspects(l), 3);
	cfs_links_free(l);
}

Test(check_links, a_count_changed_during_the_walk_is_a_suspect)
{
	struct cfs_links *l = cfs_links_new(1000);
	cfs_links_met(l, 10, 2, &T1); /* a name removed and another made between the two */
	cfs_links_met(l, 10, 2, &T2);
	cfs_links_met(l, 20, 1, &T1); /* linked between its two names */
	cfs_links_met(l, 20, 2, &T2);
	cr_assert_eq(cfs_links_suspects(l), 2);
	cfs_links_free(l);
}

struct heard {
	char lines[4][1024];
	unsigned n;
};

static void hear(void *arg, const char *line)
{
	struct heard *h = arg;
	if (h->n < 4)
		snprintf(h->lines[h->n++], sizeof h->lines[0], "%s", line);
}

/* The walk's count was wrong (a name met once of a file of two), the tree's is right: the
 * count again clears it. */
Test(check_links, the_count_again_clears_a_miscount_of_the_walk)
{
	struct cfs_fs *fs = fs_fresh(1, 64);
	uint64_t d = fs_make(fs, CFS_ROOT, "dir", S_IFDIR | 0755);
	uint64_t f = fs_make(fs, d, "file", S_IFREG | 0644);
	struct stat st;
	cr_assert_eq(cfs_link(fs, f, CFS_ROOT, "second", &st), 0);
	cr_assert_eq(st.st_nlink, 2);
	struct cfs_links *l = cfs_links_new(fs->sb.total_blocks);
	cfs_links_met(l, st.st_ino, 2, &st.st_ctim);
	cr_assert_eq(cfs_links_suspects(l), 1);
	struct heard h = {0};
	struct cfs_links_confirm c = {.tries = 3, .problem = hear, .arg = &h};
	cr_assert_eq(cfs_links_confirm(fs, l, &c), 0);
	cr_assert_eq(h.n, 0, "%s", h.lines[0]);
	cr_assert_eq(c.unconfirmed, 0);
	cr_assert_eq(cfs_links_suspects(l), 0);
	cfs_links_free(l);
	cfs_forget(fs, f, 2);
	cfs_forget(fs, d, 1);
	fs_done(fs);
}

/* A stop asked for ends the count with -ECANCELED. */
Test(check_links, a_stop_ends_the_count)
{
	struct cfs_fs *fs = fs_fresh(1, 64);
	uint64_t f = fs_make(fs, CFS_ROOT, "file", S_IFREG | 0644);
	struct cfs_links *l = cfs_links_new(fs->sb.total_blocks);
	struct timespec t = {0, 0};
	cfs_links_met(l, cfs_handle_ino(f), 3, &t);
	volatile int stop = 1;
	struct heard h = {0};
	struct cfs_links_confirm c = {.tries = 3, .stop = &stop, .problem = hear, .arg = &h};
	cr_assert_eq(cfs_links_confirm(fs, l, &c), -ECANCELED);
	cfs_links_free(l);
	cfs_forget(fs, f, 1);
	fs_done(fs);
}
