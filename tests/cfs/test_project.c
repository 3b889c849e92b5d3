/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Project ids (cfs/project.c, set through cfs_set_fsattr): what a directory passes on to what
 * is made in it, the links and renames into another project refused with EXDEV (exchanges
 * both ways), who may set an id, the ids surviving a remount, and a filesystem without the
 * feature 'project' refusing them.  chattr, lsattr and xfs_io on a mount:
 * tests/cfs/test_project.sh. */
#include "cfs_test.h"

#include <errno.h>
#include <linux/fs.h>

static const struct cfs_cred owner = {.uid = 1000, .gid = 1000};

static struct cfs_fs *fs_with_projects(void)
{
	return fs_fresh_with(1, 64, "project");
}

static uint64_t make(struct cfs_fs *fs, uint64_t dir, const char *name, bool is_dir)
{
	struct stat st;
	int rc = is_dir ? cfs_mkdir(fs, dir, name, 0777, &owner, &st)
			: cfs_mknod(fs, dir, name, S_IFREG | 0644, 0, &owner, &st);
	cr_assert_eq(rc, 0, "make %s: %d", name, rc);
	return st.st_ino;
}

static uint32_t project_of(struct cfs_fs *fs, uint64_t ino, uint32_t *flags)
{
	uint32_t fl, id;
	cr_assert_eq(cfs_get_fsattr(fs, ino, &fl, &id), 0);
	if (flags)
		*flags = fl;
	return id;
}

/* A directory of project id that passes it on. */
static uint64_t project_dir(struct cfs_fs *fs, const char *name, uint32_t id)
{
	uint64_t d = make(fs, CFS_ROOT, name, true);
	cr_assert_eq(cfs_set_fsattr(fs, d, FS_PROJINHERIT_FL, id, &root_cred), 0);
	return d;
}

Test(project, what_is_made_in_a_project_directory_takes_its_id)
{
	struct cfs_fs *fs = fs_with_projects();
	uint64_t acme = project_dir(fs, "acme", 42);
	uint64_t sub = make(fs, acme, "sub", true), f = make(fs, sub, "f", false);
	uint32_t fl;
	cr_expect_eq(project_of(fs, sub, &fl), 42);
	cr_expect(fl & FS_PROJINHERIT_FL, "a directory passes the id on further down");
	cr_expect_eq(project_of(fs, f, &fl), 42);
	cr_expect_not(fl & FS_PROJINHERIT_FL, "files do not keep the inherit flag");
	struct stat st;
	cr_assert_eq(cfs_tmpfile(fs, acme, 0600, &owner, &st), 0);
	cr_expect_eq(project_of(fs, st.st_ino, NULL), 42, "an unnamed file too (ODM's creates)");
	cr_assert_eq(cfs_link(fs, st.st_ino, acme, "named", &st), 0);
	uint64_t plain = make(fs, CFS_ROOT, "plain", true);
	cr_expect_eq(project_of(fs, make(fs, plain, "g", false), NULL), 0);
	/* An id without the inherit flag is the directory's own. */
	cr_assert_eq(cfs_set_fsattr(fs, plain, 0, 5, &root_cred), 0);
	cr_expect_eq(project_of(fs, make(fs, plain, "h", false), NULL), 0);
	cfs_forget(fs, st.st_ino, 2);
	cr_assert_eq(cfs_unmount(fs), 0);
	fs = fs_mount();
	cr_expect_eq(project_of(fs, f, NULL), 42, "after a remount");
	cr_expect_eq(project_of(fs, plain, NULL), 5);
	fs_done(fs);
}

Test(project, links_and_renames_into_another_project_are_refused_with_exdev)
{
	struct cfs_fs *fs = fs_with_projects();
	uint64_t acme = project_dir(fs, "acme", 42), globex = project_dir(fs, "globex", 7);
	uint64_t plain = make(fs, CFS_ROOT, "plain", true);
	uint64_t a = make(fs, acme, "a", false), p = make(fs, plain, "p", false);
	make(fs, globex, "g", false);
	struct stat st;
	cr_expect_eq(cfs_link(fs, p, acme, "p", &st), -EXDEV);
	cr_expect_eq(cfs_link(fs, a, globex, "a", &st), -EXDEV);
	cr_expect_eq(cfs_rename(fs, plain, "p", acme, "p", 0, &owner), -EXDEV);
	cr_expect_eq(cfs_rename(fs, acme, "a", globex, "a", 0, &owner), -EXDEV);
	cr_expect_eq(cfs_rename(fs, acme, "a", globex, "g", CFS_RENAME_EXCHANGE, &owner), -EXDEV);
	cr_expect_eq(cfs_rename(fs, plain, "p", acme, "a", CFS_RENAME_EXCHANGE, &owner), -EXDEV,
		     "an exchange looks both ways");
	/* Within a project, and out of one into a directory that passes nothing on: allowed. */
	cr_expect_eq(cfs_link(fs, a, acme, "a2", &st), 0);
	cr_expect_eq(cfs_rename(fs, acme, "a2", acme, "a3", 0, &owner), 0);
	cr_expect_eq(cfs_rename(fs, acme, "a3", plain, "a3", 0, &owner), 0);
	cr_expect_eq(project_of(fs, a, NULL), 42, "a file keeps its id where it goes");
	cfs_forget(fs, a, 2);
	fs_done(fs);
}

Test(project, only_root_changes_an_id_and_the_owner_the_flag)
{
	struct cfs_fs *fs = fs_with_projects();
	uint64_t d = make(fs, CFS_ROOT, "d", true), f = make(fs, d, "f", false);
	cr_expect_eq(cfs_set_fsattr(fs, d, FS_PROJINHERIT_FL, 3, &owner), -EPERM,
		     "a tenant does not move its files out of its company's quota");
	cr_expect_eq(project_of(fs, d, NULL), 0);
	cr_expect_eq(cfs_set_fsattr(fs, d, FS_PROJINHERIT_FL, 0, &owner), 0);
	cr_expect_eq(cfs_set_fsattr(fs, f, FS_PROJINHERIT_FL, 9, &root_cred), 0);
	uint32_t fl;
	cr_expect_eq(project_of(fs, f, &fl), 9);
	cr_expect_not(fl & FS_PROJINHERIT_FL, "the flag is a directory's");
	cr_expect_eq(cfs_set_iflags(fs, f, FS_NODUMP_FL, &owner), 0);
	cr_expect_eq(project_of(fs, f, &fl), 9, "chattr's flags keep the id");
	cr_expect_eq(fl, FS_NODUMP_FL);
	fs_done(fs);
}

Test(project, without_the_feature_ids_are_refused_and_not_shown)
{
	struct cfs_fs *fs = fs_fresh(1, 64);
	uint64_t d = make(fs, CFS_ROOT, "d", true);
	cr_expect_eq(cfs_set_fsattr(fs, d, 0, 4, &root_cred), -EOPNOTSUPP);
	cr_expect_eq(cfs_set_fsattr(fs, d, FS_PROJINHERIT_FL, 0, &root_cred), -EOPNOTSUPP);
	cr_expect_eq(cfs_set_fsattr(fs, d, FS_NODUMP_FL, 0, &root_cred), 0, "other flags are set");
	uint32_t fl;
	cr_expect_eq(project_of(fs, d, &fl), 0);
	cr_expect_eq(fl, FS_NODUMP_FL);
	fs_done(fs);
}
