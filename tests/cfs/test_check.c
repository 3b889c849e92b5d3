/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The check of a mounted filesystem (cfs/check.c), through libcfs without FUSE: clean on a
 * tree in use, damage written to the LUNs behind the mount's back (to a block it holds clean
 * in its cache) found and named by path, and a stop honoured. */
#include "cfs_test.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct heard {
	char lines[8][1024];
	unsigned n;
};

static void hear(void *arg, const char *line)
{
	struct heard *h = arg;
	if (h->n < 8)
		snprintf(h->lines[h->n++], sizeof h->lines[0], "%s", line);
}

static int check(struct cfs_fs *fs, struct heard *h, const volatile int *stop,
		 struct cfs_check_progress *p)
{
	struct cfs_check_opts o = {.stop = stop, .problem = hear, .arg = h};
	return cfs_check_mounted(fs, &o, p);
}

Test(check, clean_tree)
{
	struct cfs_fs *fs = fs_fresh(1, 64);
	uint64_t d = fs_make(fs, CFS_ROOT, "dir", S_IFDIR | 0755);
	for (int i = 0; i < 50; i++) {
		char name[16];
		snprintf(name, sizeof name, "f%d", i);
		cfs_forget(fs, fs_make(fs, d, name, S_IFREG | 0644), 1);
	}
	struct heard h = {0};
	struct cfs_check_progress p;
	cr_assert_eq(check(fs, &h, NULL, &p), 0);
	cr_assert_eq(p.problems, 0, "%s", h.lines[0]);
	cr_assert_geq(p.inodes, 50);
	cr_assert_geq(p.directories, 2);
	cr_assert_eq(p.groups, p.groups_total);
	cfs_forget(fs, d, 1);
	fs_done(fs);
}

Test(check, damage_behind_the_cache)
{
	struct cfs_fs *fs = fs_fresh(1, 64);
	uint64_t d = fs_make(fs, CFS_ROOT, "dir", S_IFDIR | 0755);
	uint64_t f = fs_make(fs, d, "file", S_IFREG | 0644);
	cfs_forget(fs, f, 1);
	cfs_forget(fs, d, 1);
	/* Mounted again and read: the block is in the cache, clean, with nothing to write home. */
	cr_assert_eq(cfs_unmount(fs), 0);
	fs = fs_mount();
	struct stat st;
	cr_assert_eq(cfs_lookup(fs, CFS_ROOT, "dir", &st), 0);
	cr_assert_eq(cfs_lookup(fs, d, "file", &st), 0);
	uint64_t blk = cfs_handle_block(fs, f);
	uint8_t *b = aligned_alloc(4096, fs->bs);
	cr_assert_eq(cvm_volume_read(fs->vol, b, fs->bs, blk * fs->bs), 0);
	((struct cfs_dinode *)b)->mode = 0xffffffffu; /* as a bug would write it, sealed */
	cfs_block_seal(b, fs->bs);
	cr_assert_eq(cvm_volume_write(fs->vol, b, fs->bs, blk * fs->bs), 0);
	free(b);

	struct heard h = {0};
	struct cfs_check_progress p;
	cr_assert_eq(check(fs, &h, NULL, &p), 0);
	cr_assert_eq(p.problems, 1, "%u problems: %s", (unsigned)p.problems, h.lines[0]);
	char want[64];
	snprintf(want, sizeof want, "/dir/file (inode %llu): ", (unsigned long long)blk);
	cr_assert(strstr(h.lines[0], want) && strstr(h.lines[0], "mode is no file type"), "%s",
		  h.lines[0]);
	cr_assert_eq(cfs_getattr(fs, f, &st), 0, "the mount serves its own copy on");
	cfs_forget(fs, f, 1);
	cfs_forget(fs, d, 1);
	fs_done(fs);
}

Test(check, stops_when_asked)
{
	struct cfs_fs *fs = fs_fresh(1, 64);
	cfs_forget(fs, fs_make(fs, CFS_ROOT, "file", S_IFREG | 0644), 1);
	volatile int stop = 1;
	struct heard h = {0};
	struct cfs_check_progress p;
	cr_assert_eq(check(fs, &h, &stop, &p), -ECANCELED);
	cr_assert_eq(p.problems, 0);
	fs_done(fs);
}
