/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Immutable and append-only inodes (cfs/iflags.c) through the libcfs calls that must refuse
 * them, also for callers the kernel does not check (ODM clients, cr NULL); who may set which
 * flag; the flags surviving a remount; fsck clean after.  chattr(1) and lsattr(1) on a mount
 * are tested by tests/cfs/test_posix.sh. */
#include "cfs_test.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <linux/fs.h>

static const struct cfs_cred owner = {.uid = 1000, .gid = 1000};

/* A 4 KiB file of name owned by `owner`, open. */
static uint64_t flagged_file(struct cfs_fs *fs, uint64_t dir, const char *name, uint32_t flags)
{
	struct stat st;
	char block[4096] = {1};
	cr_assert_eq(cfs_mknod(fs, dir, name, S_IFREG | 0644, 0, &owner, &st), 0);
	cr_assert_eq(cfs_open(fs, st.st_ino, O_RDWR), 0);
	cr_assert_eq(cfs_write(fs, st.st_ino, block, sizeof block, 0, 0, &owner), 4096);
	cr_assert_eq(cfs_set_iflags(fs, st.st_ino, flags, &root_cred), 0);
	return st.st_ino;
}

static uint64_t flagged_dir(struct cfs_fs *fs, const char *name)
{
	struct stat st;
	cr_assert_eq(cfs_mkdir(fs, CFS_ROOT, name, 0755, &owner, &st), 0);
	return st.st_ino;
}

Test(iflags, immutable_file_refuses_every_change)
{
	struct cfs_fs *fs = fs_fresh(1, 64);
	uint64_t f = flagged_file(fs, CFS_ROOT, "frozen", FS_IMMUTABLE_FL);
	char block[4096] = {0}, back[4096];
	struct stat st = {.st_mode = 0600, .st_size = 0};
	cr_expect_eq(cfs_write(fs, f, block, sizeof block, 4096, 0, &owner), -EPERM);
	cr_expect_eq(cfs_write(fs, f, block, sizeof block, 0, CFS_W_DIRECT, &owner), -EPERM);
	cr_expect_eq(cfs_setattr(fs, f, &st, CFS_SET_SIZE, NULL, &st), -EPERM);
	cr_expect_eq(cfs_setattr(fs, f, &st, CFS_SET_MODE, &root_cred, &st), -EPERM);
	cr_expect_eq(cfs_setattr(fs, f, &st, CFS_SET_ATIME | CFS_SET_MTIME | CFS_SET_TIMES_NOW,
				 &root_cred, &st), -EPERM); /* not even touched */
	cr_expect_eq(cfs_fallocate(fs, f, 0, 0, 65536, NULL), -EPERM);
	cr_expect_eq(cfs_fallocate(fs, f, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, 4096, NULL),
		     -EPERM);
	cr_expect_eq(cfs_setxattr(fs, f, "user.x", "1", 1, 0, &root_cred), -EPERM);
	cr_expect_eq(cfs_link(fs, f, CFS_ROOT, "other", &st), -EPERM);
	cr_expect_eq(cfs_unlink(fs, CFS_ROOT, "frozen"), -EPERM);
	cr_expect_eq(cfs_rename(fs, CFS_ROOT, "frozen", CFS_ROOT, "moved", 0, &root_cred), -EPERM);
	cr_expect_eq(cfs_open(fs, f, O_WRONLY), -EPERM);
	cr_expect_eq(cfs_open(fs, f, O_RDONLY | O_TRUNC), -EPERM);
	/* Reading and opening to read still work, and nothing changed. */
	cr_expect_eq(cfs_read(fs, f, back, sizeof back, 0), 4096);
	cr_expect_eq(back[0], 1);
	cr_assert_eq(cfs_open(fs, f, O_RDONLY), 0);
	cr_assert_eq(cfs_release(fs, f), 0);
	/* A bypass (ODM) map would let clients write anywhere. */
	struct cfs_bypass_map map;
	cr_expect_eq(cfs_bypass_map(fs, f, &map), -EPERM);
	/* Cleared, it is an ordinary file again. */
	cr_assert_eq(cfs_set_iflags(fs, f, 0, &root_cred), 0);
	cr_expect_eq(cfs_write(fs, f, block, sizeof block, 4096, 0, &owner), 4096);
	cr_expect_eq(cfs_unlink(fs, CFS_ROOT, "frozen"), 0);
	cr_assert_eq(cfs_release(fs, f), 0);
	fs_done_fsck_clean(fs);
}

Test(iflags, append_only_file_grows_and_keeps_what_it_holds)
{
	struct cfs_fs *fs = fs_fresh(1, 64);
	uint64_t f = flagged_file(fs, CFS_ROOT, "log", FS_APPEND_FL);
	char block[4096] = {2};
	struct stat st = {.st_size = 0};
	cr_expect_eq(cfs_write(fs, f, block, sizeof block, 4096, 0, &owner), 4096);
	cr_expect_eq(cfs_write(fs, f, block, sizeof block, 0, 0, &owner), -EPERM);
	cr_expect_eq(cfs_fallocate(fs, f, 0, 8192, 8192, NULL), 0);
	cr_expect_eq(cfs_fallocate(fs, f, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, 4096, NULL),
		     -EPERM);
	cr_expect_eq(cfs_fallocate(fs, f, FALLOC_FL_ZERO_RANGE, 0, 4096, NULL), -EPERM);
	cr_expect_eq(cfs_setattr(fs, f, &st, CFS_SET_SIZE, NULL, &st), -EPERM);
	/* Its times may be set to now (touch), not to a time of the caller's choosing; its
	 * mode and owner stay (fs/attr.c). */
	struct stat t = {.st_atim = {1000000000, 0}, .st_mtim = {1000000000, 0}};
	const unsigned times = CFS_SET_ATIME | CFS_SET_MTIME;
	cr_expect_eq(cfs_setattr(fs, f, &t, times, &owner, &st), -EPERM);
	clock_gettime(CLOCK_REALTIME, &t.st_atim);
	t.st_mtim = t.st_atim;
	cr_expect_eq(cfs_setattr(fs, f, &t, times | CFS_SET_TIMES_NOW, &owner, &st), 0);
	cr_expect_eq(st.st_mtim.tv_sec, t.st_mtim.tv_sec);
	t.st_mode = 0600;
	cr_expect_eq(cfs_setattr(fs, f, &t, CFS_SET_MODE | times | CFS_SET_TIMES_NOW, &owner, &st),
		     -EPERM);
	cr_expect_eq(cfs_unlink(fs, CFS_ROOT, "log"), -EPERM);
	cr_expect_eq(cfs_open(fs, f, O_WRONLY), -EPERM);
	cr_expect_eq(cfs_open(fs, f, O_WRONLY | O_APPEND | O_TRUNC), -EPERM);
	cr_assert_eq(cfs_open(fs, f, O_WRONLY | O_APPEND), 0);
	cr_assert_eq(cfs_release(fs, f), 0);
	cr_assert_eq(cfs_getattr(fs, f, &st), 0);
	cr_expect_eq(st.st_size, 16384);
	cr_assert_eq(cfs_release(fs, f), 0);
	fs_done_fsck_clean(fs);
}

Test(iflags, flagged_directories_keep_their_entries)
{
	struct cfs_fs *fs = fs_fresh(1, 64);
	struct stat st;
	uint64_t sealed = flagged_dir(fs, "sealed"), drop = flagged_dir(fs, "dropbox");
	uint64_t in_sealed = flagged_file(fs, sealed, "kept", 0);
	uint64_t in_drop = flagged_file(fs, drop, "first", 0);
	cr_assert_eq(cfs_set_iflags(fs, sealed, FS_IMMUTABLE_FL, &root_cred), 0);
	cr_assert_eq(cfs_set_iflags(fs, drop, FS_APPEND_FL, &root_cred), 0);
	/* Immutable: no name comes or goes; the files in it still change. */
	cr_expect_eq(cfs_mknod(fs, sealed, "new", S_IFREG | 0644, 0, &owner, &st), -EPERM);
	cr_expect_eq(cfs_mkdir(fs, sealed, "sub", 0755, &owner, &st), -EPERM);
	cr_expect_eq(cfs_unlink(fs, sealed, "kept"), -EPERM);
	cr_expect_eq(cfs_rename(fs, sealed, "kept", CFS_ROOT, "out", 0, &root_cred), -EPERM);
	cr_expect_eq(cfs_link(fs, in_drop, sealed, "linked", &st), -EPERM);
	char block[4096] = {3};
	cr_expect_eq(cfs_write(fs, in_sealed, block, sizeof block, 0, 0, &owner), 4096);
	/* Append-only: names come, none goes. */
	cr_expect_eq(cfs_mknod(fs, drop, "second", S_IFREG | 0644, 0, &owner, &st), 0);
	cr_expect_eq(cfs_unlink(fs, drop, "second"), -EPERM);
	cr_expect_eq(cfs_rename(fs, drop, "first", drop, "renamed", 0, &root_cred), -EPERM);
	cr_expect_eq(cfs_rename(fs, CFS_ROOT, "sealed", drop, "sealed", 0, &root_cred), -EPERM);
	uint64_t loose = flagged_file(fs, CFS_ROOT, "loose", 0);
	cr_expect_eq(cfs_rename(fs, CFS_ROOT, "loose", drop, "loose", 0, &root_cred), 0);
	cr_assert_eq(cfs_release(fs, loose), 0);
	cr_assert_eq(cfs_set_iflags(fs, sealed, 0, &root_cred), 0);
	cr_assert_eq(cfs_set_iflags(fs, drop, 0, &root_cred), 0);
	cr_assert_eq(cfs_release(fs, in_sealed), 0);
	cr_assert_eq(cfs_release(fs, in_drop), 0);
	fs_done_fsck_clean(fs);
}

Test(iflags, who_may_set_which_flag)
{
	struct cfs_fs *fs = fs_fresh(1, 64);
	uint64_t f = flagged_file(fs, CFS_ROOT, "mine", 0);
	const struct cfs_cred stranger = {.uid = 2000, .gid = 2000};
	uint32_t flags = 1;
	cr_expect_eq(cfs_set_iflags(fs, f, FS_NODUMP_FL, &owner), 0);
	cr_expect_eq(cfs_set_iflags(fs, f, FS_NODUMP_FL | FS_NOATIME_FL, &stranger), -EPERM);
	cr_expect_eq(cfs_set_iflags(fs, f, FS_NODUMP_FL | FS_IMMUTABLE_FL, &owner), -EPERM);
	cr_expect_eq(cfs_set_iflags(fs, f, FS_NODUMP_FL | FS_APPEND_FL, &owner), -EPERM);
	cr_expect_eq(cfs_set_iflags(fs, f, FS_COMPR_FL, &root_cred), -EOPNOTSUPP);
	cr_assert_eq(cfs_get_iflags(fs, f, &flags), 0);
	cr_expect_eq(flags, FS_NODUMP_FL, "%x", flags);
	/* Kept in the inode: a remount has them. */
	cr_assert_eq(cfs_set_iflags(fs, f, FS_NODUMP_FL | FS_APPEND_FL, NULL), 0);
	cr_assert_eq(cfs_release(fs, f), 0);
	cr_assert_eq(cfs_unmount(fs), 0);
	fs = fs_mount();
	struct stat st;
	cr_assert_eq(cfs_lookup(fs, CFS_ROOT, "mine", &st), 0);
	cr_assert_eq(cfs_get_iflags(fs, st.st_ino, &flags), 0);
	cr_expect_eq(flags, FS_NODUMP_FL | FS_APPEND_FL, "%x", flags);
	fs_done_fsck_clean(fs);
}

/* Flags this version does not know (a newer one's, or damage the checksum missed): fsck -n
 * names them, a repair clears them. */
Test(iflags, fsck_clears_unknown_flags)
{
	struct cfs_fs *fs = fs_fresh(1, 64);
	uint64_t f = flagged_file(fs, CFS_ROOT, "odd", FS_NODUMP_FL);
	cr_assert_eq(cfs_release(fs, f), 0);
	pthread_mutex_lock(&fs->lock);
	struct cfs_inode *ip;
	cr_assert_eq(cfs_iget(fs, f, &ip), 0);
	ip->d.flags |= 0x40000000u;
	cr_assert_eq(cfs_iwrite(fs, ip), 0);
	cr_assert_eq(cfs_journal_commit(fs), 0);
	pthread_mutex_unlock(&fs->lock);
	cr_assert_eq(cfs_unmount(fs), 0);
	struct cfs_fsck_report r;
	cr_assert_eq(cfs_fsck(test_vol, false, fsck_print, NULL, NULL, &r), 0);
	cr_expect_eq(r.problems, 1, "fsck -n found %u problems", r.problems);
	cr_assert_eq(cfs_fsck(test_vol, true, fsck_print, NULL, NULL, &r), 0);
	fs = fs_mount();
	uint32_t flags;
	cr_assert_eq(cfs_get_iflags(fs, f, &flags), 0);
	cr_expect_eq(flags, FS_NODUMP_FL, "%x", flags);
	fs_done_fsck_clean(fs);
}
