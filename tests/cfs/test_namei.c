/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Namespace operations through libcfs, without FUSE: create, lookup, link, unlink, rename
 * (plain, NOREPLACE, EXCHANGE, over a directory), and that everything survives a remount. */
#include "cfs_test.h"

#include <dirent.h>
#include <errno.h>

static int look(struct cfs_fs *fs, uint64_t dir, const char *name, struct stat *st)
{
	struct stat tmp;
	int rc = cfs_lookup(fs, dir, name, st ? st : &tmp);
	if (!rc)
		cfs_forget(fs, (st ? st : &tmp)->st_ino, 1);
	return rc;
}

Test(namei, create_lookup_remount)
{
	struct cfs_fs *fs = fs_fresh(2, 64);
	uint64_t d = fs_make(fs, CFS_ROOT, "dir", S_IFDIR | 0755);
	uint64_t f = fs_make(fs, d, "file", S_IFREG | 0644);
	cfs_forget(fs, d, 1);
	cfs_forget(fs, f, 1);
	struct stat st;
	cr_assert_eq(look(fs, CFS_ROOT, "dir", &st), 0);
	cr_assert(S_ISDIR(st.st_mode));
	cr_assert_eq(st.st_nlink, 2);
	cr_assert_eq(cfs_getattr(fs, CFS_ROOT, &st), 0);
	cr_assert_eq(st.st_nlink, 3);
	cr_assert_eq(look(fs, d, "file", &st), 0);
	cr_assert_eq(st.st_ino, f);
	cr_assert_eq(look(fs, d, "nope", NULL), -ENOENT);
	cr_assert_eq(cfs_mknod(fs, d, "file", S_IFREG | 0644, 0, &root_cred, &st), -EEXIST);
	cr_assert_eq(cfs_unmount(fs), 0);
	fs = fs_mount();
	cr_assert_eq(look(fs, CFS_ROOT, "dir", &st), 0);
	cr_assert_eq(look(fs, d, "file", &st), 0);
	cr_assert_eq(st.st_ino, f);
	fs_done(fs);
}

Test(namei, many_entries_split_buckets)
{
	struct cfs_fs *fs = fs_fresh(1, 64);
	char name[64];
	for (int i = 0; i < 3000; i++) {
		snprintf(name, sizeof name, "entry-with-a-longish-name-%05d", i);
		cfs_forget(fs, fs_make(fs, CFS_ROOT, name, S_IFREG | 0600), 1);
	}
	struct cfs_dirent *ents;
	size_t n;
	cr_assert_eq(cfs_readdir_all(fs, CFS_ROOT, &ents, &n), 0);
	cr_assert_eq(n, 3002);
	free(ents);
	for (int i = 0; i < 3000; i += 2) {
		snprintf(name, sizeof name, "entry-with-a-longish-name-%05d", i);
		cr_assert_eq(cfs_unlink(fs, CFS_ROOT, name), 0, "unlink %s", name);
	}
	cr_assert_eq(cfs_unmount(fs), 0);
	fs = fs_mount();
	for (int i = 0; i < 3000; i++) {
		snprintf(name, sizeof name, "entry-with-a-longish-name-%05d", i);
		cr_assert_eq(look(fs, CFS_ROOT, name, NULL), i % 2 ? 0 : -ENOENT, "%s", name);
	}
	fs_done(fs);
}

/* Names long enough to fill a bucket before it splits chain overflow blocks to it; removing
 * the directory frees them with its buckets (they leaked once: fsck.cfs found them). */
Test(namei, rmdir_frees_overflow_blocks)
{
	struct cfs_fs *fs = fs_fresh(1, 64);
	uint64_t before = cfs_free_blocks(fs);
	uint64_t d = fs_make(fs, CFS_ROOT, "dir", S_IFDIR | 0755);
	char name[256];
	for (int i = 0; i < 60; i++) {
		snprintf(name, sizeof name, "%03d-%0200d", i, 0);
		cfs_forget(fs, fs_make(fs, d, name, S_IFREG | 0600), 1);
	}
	struct stat st;
	cr_assert_eq(cfs_getattr(fs, d, &st), 0);
	cr_assert_gt(st.st_blocks * 512 / 4096, 2, "60 names of 204 bytes need overflow blocks");
	for (int i = 0; i < 60; i++) {
		snprintf(name, sizeof name, "%03d-%0200d", i, 0);
		cr_assert_eq(cfs_unlink(fs, d, name), 0, "unlink %s", name);
	}
	cfs_forget(fs, d, 1);
	cr_assert_eq(cfs_rmdir(fs, CFS_ROOT, "dir"), 0);
	cr_assert_eq(cfs_sync(fs), 0);
	cr_assert_eq(cfs_free_blocks(fs), before, "every block of the directory is free again");
	fs_done(fs);
}

/* Names made in a directory removed meanwhile: ENOENT while this node still knows it, ESTALE
 * once it is forgotten and freed (on a cluster, another node removed it while the kernel here
 * still named it; cfsd crashed on it once). */
Test(namei, make_in_a_removed_directory)
{
	struct cfs_fs *fs = fs_fresh(1, 64);
	struct stat st;
	uint64_t d = fs_make(fs, CFS_ROOT, "gone", S_IFDIR | 0755);
	cr_assert_eq(cfs_rmdir(fs, CFS_ROOT, "gone"), 0);
	cr_assert_eq(cfs_mkdir(fs, d, "x", 0755, &root_cred, &st), -ENOENT);
	cfs_forget(fs, d, 1);
	cr_assert_eq(cfs_mkdir(fs, d, "x", 0755, &root_cred, &st), -ESTALE);
	cr_assert_eq(cfs_mknod(fs, d, "f", S_IFREG | 0644, 0, &root_cred, &st), -ESTALE);
	cr_assert_eq(cfs_symlink(fs, d, "l", "x", &root_cred, &st), -ESTALE);
	fs_done(fs);
}

Test(namei, rename_kinds)
{
	struct cfs_fs *fs = fs_fresh(1, 64);
	uint64_t a = fs_make(fs, CFS_ROOT, "a", S_IFDIR | 0755);
	uint64_t b = fs_make(fs, CFS_ROOT, "b", S_IFDIR | 0755);
	uint64_t x = fs_make(fs, a, "x", S_IFREG | 0644);
	uint64_t y = fs_make(fs, b, "y", S_IFREG | 0644);
	cr_assert_eq(cfs_rename(fs, a, "x", b, "y", CFS_RENAME_NOREPLACE, &root_cred), -EEXIST);
	cr_assert_eq(cfs_rename(fs, a, "x", b, "y", CFS_RENAME_EXCHANGE, &root_cred), 0);
	struct stat st;
	cr_assert_eq(look(fs, a, "x", &st), 0);
	cr_assert_eq(st.st_ino, y);
	cr_assert_eq(look(fs, b, "y", &st), 0);
	cr_assert_eq(st.st_ino, x);
	/* Over an existing file: the old one loses its name. */
	cr_assert_eq(cfs_rename(fs, a, "x", b, "y", 0, &root_cred), 0);
	cr_assert_eq(look(fs, a, "x", NULL), -ENOENT);
	cr_assert_eq(look(fs, b, "y", &st), 0);
	cr_assert_eq(st.st_ino, y);
	/* A directory into another: link counts follow; not into itself. */
	uint64_t c = fs_make(fs, a, "c", S_IFDIR | 0755);
	cr_assert_eq(cfs_rename(fs, CFS_ROOT, "a", c, "inside", 0, &root_cred), -EINVAL);
	cr_assert_eq(cfs_rename(fs, a, "c", b, "c", 0, &root_cred), 0);
	cr_assert_eq(cfs_getattr(fs, a, &st), 0);
	cr_assert_eq(st.st_nlink, 2);
	cr_assert_eq(cfs_getattr(fs, b, &st), 0);
	cr_assert_eq(st.st_nlink, 3);
	cr_assert_eq(look(fs, c, "..", &st), 0);
	cr_assert_eq(st.st_ino, b);
	cr_assert_eq(cfs_rmdir(fs, CFS_ROOT, "b"), -ENOTEMPTY);
	cr_assert_eq(cfs_rename(fs, CFS_ROOT, "a", b, "c", 0, &root_cred), 0); /* over an empty dir */
	cr_assert_eq(cfs_getattr(fs, CFS_ROOT, &st), 0);
	cr_assert_eq(st.st_nlink, 3);
	(void)x;
	fs_done(fs);
}

Test(namei, links_and_orphans)
{
	struct cfs_fs *fs = fs_fresh(1, 64);
	uint64_t f = fs_make(fs, CFS_ROOT, "f", S_IFREG | 0644);
	struct stat st;
	cr_assert_eq(cfs_link(fs, f, CFS_ROOT, "g", &st), 0);
	cr_assert_eq(st.st_nlink, 2);
	cr_assert_eq(cfs_open(fs, f, O_RDWR), 0);
	cr_assert_eq(cfs_unlink(fs, CFS_ROOT, "f"), 0);
	cr_assert_eq(cfs_unlink(fs, CFS_ROOT, "g"), 0);
	/* Still open: readable and writable, an orphan on disk. */
	cr_assert_eq(cfs_write(fs, f, "hello", 5, 0, 0, NULL), 5);
	char buf[8] = {0};
	cr_assert_eq(cfs_read(fs, f, buf, sizeof buf, 0), 5);
	cr_assert_str_eq(buf, "hello");
	uint64_t before = cfs_free_blocks(fs);
	cr_assert_eq(cfs_release(fs, f), 0);
	cfs_forget(fs, f, 2);
	cr_assert_gt(cfs_free_blocks(fs), before);
	cr_assert_eq(cfs_getattr(fs, f, &st), -ESTALE);
	fs_done(fs);
}

/* A mkdir with one block left for it: its inode fitted, its first bucket did not.  It used to
 * leave the inode behind and its parent's link count one too high; it is refused whole. */
Test(namei, a_create_refused_for_space_leaves_nothing_behind)
{
	struct cfs_fs *fs = fs_fresh(1, 64);
	struct stat st;
	fs_fill(fs, 1);
	cr_assert_eq(cfs_mkdir(fs, CFS_ROOT, "d", 0755, &root_cred, &st), -ENOSPC);
	cr_assert_eq(cfs_mknod(fs, CFS_ROOT, "f", S_IFREG | 0644, 0, &root_cred, &st), -ENOSPC);
	cr_assert_eq(look(fs, CFS_ROOT, "d", NULL), -ENOENT);
	cr_assert_eq(cfs_getattr(fs, CFS_ROOT, &st), 0);
	cr_assert_eq(st.st_nlink, 2);
	fs_done_fsck_clean(fs);
}
