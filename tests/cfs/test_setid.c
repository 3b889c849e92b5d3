/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Which changes take set-user-ID and set-group-ID bits away (cfs/setid.c), through the libcfs
 * calls that apply them, for callers with and without CAP_FSETID and inside or outside the
 * file's group.  The caller's privileges come from a table here; cfsd's lookup of the real
 * ones is tested on a mount by tests/cfs/test_tools.sh as a non-root user. */
#include "cfs_test.h"

#include <errno.h>
#include <fcntl.h>

#define FILE_GID 100u

/* A user (uid 1000, gid 1000) in FILE_GID or not, with CAP_FSETID or not. */
static unsigned table_privileges(const struct cfs_cred *cr, uint32_t gid)
{
	const unsigned *granted = cr->ctx;
	return (*granted & CFS_CRED_FSETID) | (gid == FILE_GID ? *granted & CFS_CRED_IN_GROUP : 0);
}

static struct cfs_cred user(const unsigned *granted)
{
	return (struct cfs_cred){.uid = 1000, .gid = 1000, .privileges = table_privileges,
				 .ctx = (void *)granted};
}

/* A regular file of group FILE_GID with mode, 8 KiB long, open until the unmount. */
static uint64_t setid_file(struct cfs_fs *fs, const char *name, mode_t mode)
{
	struct stat st;
	cr_assert_eq(cfs_mknod(fs, CFS_ROOT, name, S_IFREG | 0644, 0, &root_cred, &st), 0);
	uint64_t ino = st.st_ino;
	cr_assert_eq(cfs_open(fs, ino, O_RDWR), 0);
	st.st_mode = mode;
	st.st_gid = FILE_GID;
	cr_assert_eq(cfs_setattr(fs, ino, &st, CFS_SET_MODE | CFS_SET_GID, NULL, &st), 0);
	cr_assert_eq(cfs_fallocate(fs, ino, 0, 0, 8192, NULL), 0);
	cr_assert_eq(st.st_mode & 07777, mode, "%o", st.st_mode);
	return ino;
}

static mode_t mode_of(struct cfs_fs *fs, uint64_t ino)
{
	struct stat st;
	cr_assert_eq(cfs_getattr(fs, ino, &st), 0);
	return st.st_mode & 07777;
}

static const unsigned outsider = 0, member = CFS_CRED_IN_GROUP, capable = CFS_CRED_FSETID;

Test(setid, a_write_drops_setuid_and_executable_setgid)
{
	struct cfs_fs *fs = fs_fresh(1, 64);
	char block[4096] = {0};
	struct cfs_cred c = user(&member);
	uint64_t f = setid_file(fs, "exe", 06755);
	cr_assert_eq(cfs_write(fs, f, block, sizeof block, 0, 0, &c), 4096);
	cr_expect_eq(mode_of(fs, f), 0755, "%o", mode_of(fs, f));
	/* Without group execute, set-group-ID stays for a member (a direct write too)... */
	f = setid_file(fs, "lockmarked", 06644);
	cr_assert_eq(cfs_write(fs, f, block, sizeof block, 0, CFS_W_DIRECT, &c), 4096);
	cr_expect_eq(mode_of(fs, f), 02644, "%o", mode_of(fs, f));
	/* ...and goes for an outsider. */
	c = user(&outsider);
	cr_assert_eq(cfs_write(fs, f, block, 10, 100, 0, &c), 10);
	cr_expect_eq(mode_of(fs, f), 0644, "%o", mode_of(fs, f));
	fs_done(fs);
}

Test(setid, cap_fsetid_and_the_filesystem_itself_keep_them)
{
	struct cfs_fs *fs = fs_fresh(1, 64);
	char block[4096] = {0};
	struct cfs_cred c = user(&capable);
	uint64_t f = setid_file(fs, "exe", 06755);
	cr_assert_eq(cfs_write(fs, f, block, sizeof block, 0, 0, &c), 4096);
	cr_assert_eq(cfs_fallocate(fs, f, 0, 0, 65536, &c), 0);
	cr_assert_eq(cfs_write(fs, f, block, sizeof block, 4096, 0, NULL), 4096);
	cr_expect_eq(mode_of(fs, f), 06755, "%o", mode_of(fs, f));
	/* Not for directories: set-group-ID there means inherit the group. */
	struct stat st = {.st_size = 0};
	c = user(&outsider);
	cr_assert_eq(cfs_mkdir(fs, CFS_ROOT, "d", 02775, &root_cred, &st), 0);
	cr_assert_eq(cfs_setxattr(fs, st.st_ino, "user.x", "1", 1, 0, &c), 0);
	cr_expect_eq(mode_of(fs, st.st_ino), 02775, "%o", mode_of(fs, st.st_ino));
	fs_done(fs);
}

Test(setid, fallocate_punch_and_truncate_drop_them)
{
	struct cfs_fs *fs = fs_fresh(1, 64);
	struct cfs_cred c = user(&outsider);
	uint64_t f = setid_file(fs, "a", 06666);
	cr_assert_eq(cfs_fallocate(fs, f, 0, 0, 16384, &c), 0);
	cr_expect_eq(mode_of(fs, f), 0666, "%o", mode_of(fs, f));
	f = setid_file(fs, "b", 06666);
	cr_assert_eq(cfs_fallocate(fs, f, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, 4096, &c),
		     0);
	cr_expect_eq(mode_of(fs, f), 0666, "%o", mode_of(fs, f));
	f = setid_file(fs, "c", 06666);
	struct stat st = {.st_size = 100};
	cr_assert_eq(cfs_setattr(fs, f, &st, CFS_SET_SIZE, &c, &st), 0);
	cr_expect_eq(st.st_mode & 07777, 0666, "%o", st.st_mode);
	/* A time change alone takes nothing. */
	f = setid_file(fs, "d", 06666);
	cr_assert_eq(cfs_setattr(fs, f, &st, CFS_SET_MTIME, &c, &st), 0);
	cr_expect_eq(st.st_mode & 07777, 06666, "%o", st.st_mode);
	fs_done(fs);
}

Test(setid, chown_drops_setuid_whoever_asks)
{
	struct cfs_fs *fs = fs_fresh(1, 64);
	struct cfs_cred c = user(&capable);
	uint64_t f = setid_file(fs, "exe", 06755);
	struct stat st = {.st_uid = 1000, .st_gid = 1000};
	cr_assert_eq(cfs_setattr(fs, f, &st, CFS_SET_UID | CFS_SET_GID, &c, &st), 0);
	cr_expect_eq(st.st_mode & 07777, 0755, "%o", st.st_mode);
	f = setid_file(fs, "lockmarked", 02644); /* a capable caller keeps a lock mark */
	cr_assert_eq(cfs_setattr(fs, f, &st, CFS_SET_UID, &c, &st), 0);
	cr_expect_eq(st.st_mode & 07777, 02644, "%o", st.st_mode);
	fs_done(fs);
}

/* A regular file with a file capability (security.capability; its value matters not here). */
static uint64_t capable_file(struct cfs_fs *fs, const char *name)
{
	uint64_t ino = setid_file(fs, name, 0755);
	cr_assert_eq(cfs_setxattr(fs, ino, "security.capability", "cap", 3, 0, &root_cred), 0);
	return ino;
}

static bool has_caps(struct cfs_fs *fs, uint64_t ino)
{
	int rc = cfs_getxattr(fs, ino, "security.capability", NULL, 0);
	cr_assert(rc == 3 || rc == -ENODATA, "%d", rc);
	return rc == 3;
}

Test(setid, a_write_truncate_fallocate_and_chown_take_file_capabilities_whoever_asks)
{
	struct cfs_fs *fs = fs_fresh(1, 64);
	char block[4096] = {0};
	struct cfs_cred c = user(&capable); /* CAP_FSETID keeps set-ID bits, not capabilities */
	uint64_t f = capable_file(fs, "written");
	cr_assert_eq(cfs_write(fs, f, block, sizeof block, 0, 0, &c), 4096);
	cr_expect(!has_caps(fs, f));
	f = capable_file(fs, "written_direct");
	cr_assert_eq(cfs_write(fs, f, block, sizeof block, 0, CFS_W_DIRECT, &c), 4096);
	cr_expect(!has_caps(fs, f));
	f = capable_file(fs, "allocated");
	cr_assert_eq(cfs_fallocate(fs, f, 0, 0, 16384, &c), 0);
	cr_expect(!has_caps(fs, f));
	f = capable_file(fs, "truncated");
	struct stat st = {.st_size = 100, .st_uid = 5};
	cr_assert_eq(cfs_setattr(fs, f, &st, CFS_SET_SIZE, &c, &st), 0);
	cr_expect(!has_caps(fs, f));
	f = capable_file(fs, "chowned");
	cr_assert_eq(cfs_setattr(fs, f, &st, CFS_SET_UID, &c, &st), 0);
	cr_expect(!has_caps(fs, f));
	/* A time or mode change, a read, and the filesystem's own write keep them. */
	f = capable_file(fs, "kept");
	st.st_mode = 0700;
	cr_assert_eq(cfs_setattr(fs, f, &st, CFS_SET_MTIME | CFS_SET_MODE, &c, &st), 0);
	cr_assert_eq(cfs_read(fs, f, block, 100, 0), 100);
	cr_assert_eq(cfs_write(fs, f, block, sizeof block, 4096, 0, NULL), 4096);
	cr_expect(has_caps(fs, f));
	fs_done(fs);
}

Test(setid, chmod_and_acl_by_an_outsider_cannot_set_setgid)
{
	struct cfs_fs *fs = fs_fresh(1, 64);
	struct cfs_cred c = user(&outsider);
	uint64_t f = setid_file(fs, "f", 0644);
	struct stat st = {.st_mode = 02755};
	cr_assert_eq(cfs_setattr(fs, f, &st, CFS_SET_MODE, &c, &st), 0);
	cr_expect_eq(st.st_mode & 07777, 0755, "%o", st.st_mode);
	c = user(&member);
	st.st_mode = 06755;
	cr_assert_eq(cfs_setattr(fs, f, &st, CFS_SET_MODE, &c, &st), 0);
	cr_expect_eq(st.st_mode & 07777, 06755, "%o", st.st_mode);
	/* An access ACL that sets u::rwx g::r-x o::r-x: setgid goes for an outsider only. */
	const uint32_t acl[] = {2, 0x01 | 7u << 16, ~0u, 0x04 | 5u << 16, ~0u, 0x20 | 5u << 16, ~0u};
	cr_assert_eq(cfs_setxattr(fs, f, "system.posix_acl_access", acl, sizeof acl, 0, &c), 0);
	cr_expect_eq(mode_of(fs, f), 06755, "%o", mode_of(fs, f));
	c = user(&outsider);
	cr_assert_eq(cfs_setxattr(fs, f, "system.posix_acl_access", acl, sizeof acl, 0, &c), 0);
	cr_expect_eq(mode_of(fs, f), 04755, "%o", mode_of(fs, f));
	fs_done(fs);
}
