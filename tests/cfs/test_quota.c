/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Quotas (cfs/quota.c): usage follows every allocation and free to the byte, per user, group
 * and project, also when an inode changes owner; hard limits refuse writes, fallocates,
 * creates and mkdirs with EDQUOT keeping nothing; a soft limit refuses once its grace is
 * over; bad limits are refused and change nothing; the records survive a remount and fsck.cfs
 * finds them equal to the files, and repairs a record made wrong.  The command and kill -9
 * runs: tests/cfs/test_quota.sh and test_crash.sh. */
#include "cfs_test.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <unistd.h>

static const struct cfs_cred alice = {.uid = 1000, .gid = 100};

static struct cfs_fs *fs_with_quotas(void)
{
	return fs_fresh_with(1, 64, "project,quota");
}

static struct cfs_quota_rec quota_of(struct cfs_fs *fs, unsigned type, uint32_t id)
{
	struct cfs_quota_rec r;
	cr_assert_eq(cfs_quota_get(fs, type, id, &r), 0, "%s", cfs_last_error());
	return r;
}

static uint64_t file(struct cfs_fs *fs, uint64_t dir, const char *name, const struct cfs_cred *cr)
{
	struct stat st;
	cr_assert_eq(cfs_mknod(fs, dir, name, S_IFREG | 0644, 0, cr, &st), 0);
	cr_assert_eq(cfs_open(fs, st.st_ino, O_RDWR), 0);
	return st.st_ino;
}

/* A file of alice's with 1 MiB written, open. */
static uint64_t written_file(struct cfs_fs *fs, const char *name)
{
	static char buf[1 << 20];
	uint64_t f = file(fs, CFS_ROOT, name, &alice);
	cr_assert_eq(cfs_write(fs, f, buf, sizeof buf, 0, 0, &alice), (int64_t)sizeof buf);
	return f;
}

static void set_limit(struct cfs_fs *fs, unsigned type, uint32_t id, uint64_t hard_bytes,
		      uint64_t hard_inodes)
{
	struct cfs_quota_rec r = {.type = type, .id = id, .hard_bytes = hard_bytes,
				  .hard_inodes = hard_inodes};
	cr_assert_eq(cfs_quota_set(fs, &r, CFS_QUOTA_SET_HARD_BYTES | CFS_QUOTA_SET_HARD_INODES), 0,
		     "%s", cfs_last_error());
}

/* fsck.cfs -n of the unmounted volume: 0 problems. */
static void fsck_clean(void)
{
	struct cfs_fsck_report r;
	cr_assert_eq(cfs_fsck(test_vol, false, NULL, NULL, NULL, &r), 0);
	cr_assert_eq(r.problems, 0, "fsck.cfs found %u problems", r.problems);
}

Test(quota, usage_follows_every_allocation_and_free_and_owner)
{
	struct cfs_fs *fs = fs_with_quotas();
	uint32_t bs = fs->bs;
	struct stat st;
	cr_assert_eq(cfs_mkdir(fs, CFS_ROOT, "acme", 0777, &root_cred, &st), 0);
	uint64_t acme = st.st_ino;
	cr_assert_eq(cfs_set_fsattr(fs, acme, FS_PROJINHERIT_FL, 42, &root_cred), 0);
	uint64_t f = file(fs, acme, "f", &alice);
	static char buf[1 << 20];
	cr_assert_eq(cfs_write(fs, f, buf, sizeof buf, 0, 0, &alice), (int64_t)sizeof buf);
	cr_assert_eq(cfs_fallocate(fs, f, 0, 1 << 20, 3 << 20, &alice), 0);
	struct cfs_quota_rec u = quota_of(fs, CFS_QUOTA_USER, 1000);
	cr_expect_eq(u.used_bytes, 4u << 20, "user: %llu bytes", (unsigned long long)u.used_bytes);
	cr_expect_eq(u.used_inodes, 1);
	cr_expect_eq(quota_of(fs, CFS_QUOTA_GROUP, 100).used_bytes, 4u << 20);
	struct cfs_quota_rec p = quota_of(fs, CFS_QUOTA_PROJECT, 42);
	cr_expect_eq(p.used_bytes, (4u << 20) + bs, "the project has the directory's bucket too");
	cr_expect_eq(p.used_inodes, 2);
	struct stat a = {.st_size = 1 << 20};
	cr_assert_eq(cfs_setattr(fs, f, &a, CFS_SET_SIZE, &root_cred, &st), 0);
	cr_expect_eq(quota_of(fs, CFS_QUOTA_USER, 1000).used_bytes, 1u << 20, "truncated");
	a = (struct stat){.st_uid = 2000, .st_gid = 200};
	cr_assert_eq(cfs_setattr(fs, f, &a, CFS_SET_UID | CFS_SET_GID, &root_cred, &st), 0);
	cr_expect_eq(quota_of(fs, CFS_QUOTA_USER, 1000).used_bytes, 0, "chown moves the charge");
	cr_expect_eq(quota_of(fs, CFS_QUOTA_USER, 1000).used_inodes, 0);
	cr_expect_eq(quota_of(fs, CFS_QUOTA_USER, 2000).used_bytes, 1u << 20);
	cr_expect_eq(quota_of(fs, CFS_QUOTA_GROUP, 200).used_inodes, 1);
	cr_assert_eq(cfs_unmount(fs), 0);
	fsck_clean();
	fs = fs_mount();
	cr_expect_eq(quota_of(fs, CFS_QUOTA_USER, 2000).used_bytes, 1u << 20, "after a remount");
	cr_assert_eq(cfs_release(fs, f), 0);
	cr_assert_eq(cfs_unlink(fs, acme, "f"), 0);
	cfs_forget(fs, f, 1);
	cr_expect_eq(quota_of(fs, CFS_QUOTA_USER, 2000).used_bytes, 0, "removed");
	cr_expect_eq(quota_of(fs, CFS_QUOTA_USER, 2000).used_inodes, 0);
	cr_expect_eq(quota_of(fs, CFS_QUOTA_PROJECT, 42).used_inodes, 1);
	cr_assert_eq(cfs_unmount(fs), 0);
	fsck_clean();
	fs_done(NULL);
}

Test(quota, hard_limits_refuse_with_edquot_and_keep_nothing)
{
	struct cfs_fs *fs = fs_with_quotas();
	set_limit(fs, CFS_QUOTA_USER, 1000, 2u << 20, 3);
	uint64_t f = file(fs, CFS_ROOT, "f", &alice);
	static char buf[1 << 20], big[2 << 20];
	cr_assert_eq(cfs_write(fs, f, buf, sizeof buf, 0, 0, &alice), (int64_t)sizeof buf);
	cr_expect_eq(cfs_fallocate(fs, f, 0, 1 << 20, 2 << 20, &alice), -EDQUOT);
	cr_expect_eq(cfs_write(fs, f, big, sizeof big, 3 << 20, CFS_W_DIRECT, &alice), -EDQUOT,
		     "a write into a hole past the limit");
	struct cfs_quota_rec u = quota_of(fs, CFS_QUOTA_USER, 1000);
	cr_expect_eq(u.used_bytes, 1u << 20, "the refusals kept %llu bytes",
		     (unsigned long long)u.used_bytes);
	cr_expect_eq(cfs_write(fs, f, buf, sizeof buf - 4096, 1 << 20, 0, &alice),
		     (int64_t)(sizeof buf - 4096), "up to the limit, the map's block left");
	cr_expect_leq(quota_of(fs, CFS_QUOTA_USER, 1000).used_bytes, 2u << 20);
	cr_expect_eq(cfs_write(fs, f, buf, sizeof buf, 0, 0, &alice), (int64_t)sizeof buf,
		     "an overwrite takes nothing");
	struct stat st;
	cr_assert_eq(cfs_mknod(fs, CFS_ROOT, "g", S_IFREG | 0644, 0, &alice, &st), 0);
	cr_assert_eq(cfs_mknod(fs, CFS_ROOT, "h", S_IFREG | 0644, 0, &alice, &st), 0);
	cr_expect_eq(cfs_mknod(fs, CFS_ROOT, "i", S_IFREG | 0644, 0, &alice, &st), -EDQUOT);
	cr_expect_eq(cfs_mkdir(fs, CFS_ROOT, "d", 0755, &alice, &st), -EDQUOT);
	cr_expect_eq(quota_of(fs, CFS_QUOTA_USER, 1000).used_inodes, 3);
	cr_expect_eq(cfs_mknod(fs, CFS_ROOT, "i", S_IFREG | 0644, 0, &root_cred, &st), 0,
		     "another user is not held by alice's limit");
	cr_assert_eq(cfs_release(fs, f), 0);
	cr_assert_eq(cfs_unmount(fs), 0);
	fsck_clean();
	fs_done(NULL);
}

/* XFS's rule: a user's chgrp into a group without room is refused and changes nothing; root's
 * chown passes and leaves the new owner over its limit, where it can take no more. */
Test(quota, a_users_chgrp_into_a_full_group_is_refused_roots_chown_passes)
{
	struct cfs_fs *fs = fs_with_quotas();
	uint64_t f = written_file(fs, "f");
	set_limit(fs, CFS_QUOTA_GROUP, 300, 512u << 10, 0);
	struct stat st, a = {.st_gid = 300};
	cr_expect_eq(cfs_setattr(fs, f, &a, CFS_SET_GID, &alice, &st), -EDQUOT);
	cr_assert_eq(cfs_getattr(fs, f, &st), 0);
	cr_expect_eq(st.st_gid, 100, "the refused chgrp changed the group");
	cr_expect_eq(quota_of(fs, CFS_QUOTA_GROUP, 100).used_bytes, 1u << 20);
	cr_expect_eq(quota_of(fs, CFS_QUOTA_GROUP, 300).used_bytes, 0);
	a.st_gid = 301;
	cr_expect_eq(cfs_setattr(fs, f, &a, CFS_SET_GID, &alice, &st), 0, "a group with room");
	a.st_gid = 300;
	cr_expect_eq(cfs_setattr(fs, f, &a, CFS_SET_GID, &root_cred, &st), 0);
	cr_expect_eq(quota_of(fs, CFS_QUOTA_GROUP, 300).used_bytes, 1u << 20);
	static char buf[4096];
	cr_expect_eq(cfs_write(fs, f, buf, sizeof buf, 4 << 20, CFS_W_DIRECT, &alice), -EDQUOT,
		     "the group is over its limit");
	cr_assert_eq(cfs_release(fs, f), 0);
	cr_assert_eq(cfs_unmount(fs), 0);
	fsck_clean();
	fs_done(NULL);
}

Test(quota, a_soft_limit_refuses_once_its_grace_is_over)
{
	struct cfs_fs *fs = fs_with_quotas();
	struct cfs_quota_rec r = {.type = CFS_QUOTA_USER, .id = 1000, .soft_bytes = 1u << 20,
				  .grace = 3600};
	cr_assert_eq(cfs_quota_set(fs, &r, CFS_QUOTA_SET_SOFT_BYTES | CFS_QUOTA_SET_GRACE), 0);
	uint64_t f = written_file(fs, "f");
	static char buf[1 << 20];
	cr_assert_eq(cfs_write(fs, f, buf, sizeof buf, 1 << 20, 0, &alice), (int64_t)sizeof buf,
		     "over the soft limit within its grace");
	struct cfs_quota_rec u = quota_of(fs, CFS_QUOTA_USER, 1000);
	cr_expect_gt(u.bytes_over_since, 0, "the time it went over is kept");
	r.grace = 1;
	cr_assert_eq(cfs_quota_set(fs, &r, CFS_QUOTA_SET_GRACE), 0);
	sleep(2); /* time only moves on: after it the grace is over whatever the machine's speed */
	cr_expect_eq(cfs_write(fs, f, buf, sizeof buf, 2 << 20, 0, &alice), -EDQUOT);
	cr_assert_eq(cfs_release(fs, f), 0);
	fs_done(fs);
}

Test(quota, bad_limits_are_refused_and_change_nothing)
{
	struct cfs_fs *fs = fs_with_quotas();
	uint64_t f = written_file(fs, "f");
	struct cfs_quota_rec r = {.type = CFS_QUOTA_USER, .id = 1000, .hard_bytes = 4096};
	cr_expect_eq(cfs_quota_set(fs, &r, CFS_QUOTA_SET_HARD_BYTES), -EINVAL);
	cr_expect(strstr(cfs_last_error(), "uses 1048576 bytes already"), "%s", cfs_last_error());
	r = (struct cfs_quota_rec){.type = CFS_QUOTA_USER, .id = 1000, .soft_bytes = 8u << 20,
				   .hard_bytes = 4u << 20};
	cr_expect_eq(cfs_quota_set(fs, &r, CFS_QUOTA_SET_SOFT_BYTES | CFS_QUOTA_SET_HARD_BYTES),
		     -EINVAL);
	cr_expect(strstr(cfs_last_error(), "above the hard one"), "%s", cfs_last_error());
	r = (struct cfs_quota_rec){.type = 7, .id = 1000};
	cr_expect_eq(cfs_quota_set(fs, &r, CFS_QUOTA_SET_HARD_INODES), -EINVAL);
	struct cfs_quota_rec u = quota_of(fs, CFS_QUOTA_USER, 1000);
	cr_expect_eq(u.hard_bytes, 0);
	cr_expect_eq(u.soft_bytes, 0);
	cr_assert_eq(cfs_release(fs, f), 0);
	fs_done(fs);
}

Test(quota, fsck_repairs_a_record_that_disagrees_with_the_files)
{
	struct cfs_fs *fs = fs_with_quotas();
	uint64_t f = written_file(fs, "f");
	cr_assert_eq(cfs_release(fs, f), 0);
	pthread_mutex_lock(&fs->lock); /* a record made wrong, as a bug would */
	cr_assert_eq(cfs_quota_set_usage(fs, CFS_QUOTA_USER, 1000, 5, 9), 0);
	cr_assert_eq(cfs_quota_set_usage(fs, CFS_QUOTA_USER, 3000, 4096, 1), 0);
	cr_assert_eq(cfs_journal_commit(fs), 0);
	pthread_mutex_unlock(&fs->lock);
	cr_assert_eq(cfs_unmount(fs), 0);
	struct cfs_fsck_report rep;
	cr_assert_eq(cfs_fsck(test_vol, false, NULL, NULL, NULL, &rep), 0);
	cr_expect_eq(rep.problems, 2, "%u problems", rep.problems);
	cr_assert_eq(cfs_fsck(test_vol, true, NULL, NULL, NULL, &rep), 0);
	cr_expect_eq(rep.repaired, 2);
	fsck_clean();
	fs = fs_mount();
	cr_expect_eq(quota_of(fs, CFS_QUOTA_USER, 1000).used_bytes, 1u << 20);
	cr_expect_eq(quota_of(fs, CFS_QUOTA_USER, 3000).used_inodes, 0);
	fs_done(fs);
}

Test(quota, tune_turns_quotas_on_with_the_files_counted_and_off_again)
{
	struct cfs_fs *fs = fs_fresh(1, 64);
	uint64_t f = written_file(fs, "f");
	struct cfs_quota_rec r;
	cr_expect_eq(cfs_quota_get(fs, CFS_QUOTA_USER, 1000, &r), -EOPNOTSUPP);
	cr_assert_eq(cfs_release(fs, f), 0);
	cr_assert_eq(cfs_unmount(fs), 0);
	cr_assert_eq(cfs_tune(test_vol, "quota", NULL, NULL), 0, "%s", cfs_last_error());
	fsck_clean();
	fs = fs_mount();
	cr_expect_eq(quota_of(fs, CFS_QUOTA_USER, 1000).used_bytes, 1u << 20);
	cr_expect_eq(quota_of(fs, CFS_QUOTA_USER, 1000).used_inodes, 1);
	cr_assert_eq(cfs_unmount(fs), 0);
	cr_assert_eq(cfs_tune(test_vol, "^quota", NULL, NULL), 0, "%s", cfs_last_error());
	fsck_clean();
	fs_done(NULL);
}
