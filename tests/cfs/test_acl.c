/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Permission checks for callers the kernel does not check (ODM clients): cfs_access by mode
 * bits and by access ACL (cfs/acl.c), for the owner, named users, the owning and named groups
 * (also through supplementary groups), others, the mask, and root. */
#include "cfs_test.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#define OWNER 1000u
#define FILE_GID 100u

/* A caller whose supplementary groups are the ones listed in ctx (0-terminated). */
static unsigned listed_groups(const struct cfs_cred *cr, uint32_t gid)
{
	for (const uint32_t *g = cr->ctx; *g; g++)
		if (*g == gid)
			return CFS_CRED_IN_GROUP;
	return cr->gid == gid ? CFS_CRED_IN_GROUP : 0;
}

static const uint32_t no_groups[] = {0}, in_file_group[] = {FILE_GID, 0}, in_dba[] = {300, 0};

static struct cfs_cred caller(uint32_t uid, const uint32_t *groups)
{
	return (struct cfs_cred){.uid = uid, .gid = uid, .privileges = listed_groups,
				 .ctx = (void *)groups};
}

/* A file of OWNER:FILE_GID with mode. */
static uint64_t file(struct cfs_fs *fs, const char *name, mode_t mode)
{
	struct stat st;
	cr_assert_eq(cfs_mknod(fs, CFS_ROOT, name, S_IFREG | 0600, 0, &root_cred, &st), 0);
	st.st_mode = mode;
	st.st_uid = OWNER;
	st.st_gid = FILE_GID;
	cr_assert_eq(cfs_setattr(fs, st.st_ino, &st, CFS_SET_MODE | CFS_SET_UID | CFS_SET_GID,
				 NULL, &st), 0);
	return st.st_ino;
}

static int may(struct cfs_fs *fs, uint64_t ino, int mask, uint32_t uid, const uint32_t *groups)
{
	struct cfs_cred cr = caller(uid, groups);
	return cfs_access(fs, ino, mask, &cr);
}

Test(acl, mode_bits_for_owner_group_other_and_root)
{
	struct cfs_fs *fs = fs_fresh(1, 32);
	uint64_t f = file(fs, "f", 0640);
	cr_assert_eq(may(fs, f, R_OK | W_OK, OWNER, no_groups), 0);
	cr_assert_eq(may(fs, f, X_OK, OWNER, no_groups), -EACCES);
	cr_assert_eq(may(fs, f, R_OK, 2000, in_file_group), 0); /* a supplementary group */
	cr_assert_eq(may(fs, f, W_OK, 2000, in_file_group), -EACCES);
	cr_assert_eq(may(fs, f, R_OK, 2000, no_groups), -EACCES);
	cr_assert_eq(may(fs, f, R_OK | W_OK, 0, no_groups), 0);
	cr_assert_eq(may(fs, f, X_OK, 0, no_groups), -EACCES, "root runs only what someone may");
	cr_assert_eq(may(fs, CFS_ROOT, X_OK | W_OK, 2000, no_groups), -EACCES); /* 0755, root's */
	cr_assert_eq(may(fs, CFS_ROOT, X_OK | R_OK, 2000, no_groups), 0);
	fs_done(fs);
}

/* The kernel's xattr format of an access ACL: version 2, then (tag, perm, id) entries. */
static void set_acl(struct cfs_fs *fs, uint64_t ino, const uint16_t (*e)[2], const uint32_t *id,
		    int n)
{
	uint8_t acl[4 + 8 * 16];
	uint32_t version = 2;
	memcpy(acl, &version, 4);
	for (int i = 0; i < n; i++) {
		memcpy(acl + 4 + 8 * i, e[i], 4);
		memcpy(acl + 8 + 8 * i, &id[i], 4);
	}
	cr_assert_eq(cfs_setxattr(fs, ino, "system.posix_acl_access", acl, (size_t)(4 + 8 * n), 0,
				  NULL), 0);
}

enum { USER_OBJ = 1, USER = 2, GROUP_OBJ = 4, GROUP = 8, MASK = 0x10, OTHER = 0x20 };

Test(acl, access_acl_named_entries_and_mask)
{
	struct cfs_fs *fs = fs_fresh(1, 32);
	uint64_t f = file(fs, "f", 0600);
	/* user::rw- user:2000:rw- group::r-- group:300:rw- mask::r-- other::--- */
	const uint16_t e[][2] = {{USER_OBJ, 6}, {USER, 6}, {GROUP_OBJ, 4}, {GROUP, 6},
				 {MASK, 4}, {OTHER, 0}};
	const uint32_t id[] = {0, 2000, 0, 300, 0, 0};
	set_acl(fs, f, e, id, 6);
	cr_assert_eq(may(fs, f, R_OK | W_OK, OWNER, no_groups), 0);
	cr_assert_eq(may(fs, f, R_OK, 2000, no_groups), 0, "named user");
	cr_assert_eq(may(fs, f, W_OK, 2000, no_groups), -EACCES, "the mask takes w away");
	cr_assert_eq(may(fs, f, R_OK, 3000, in_dba), 0, "named group");
	cr_assert_eq(may(fs, f, W_OK, 3000, in_dba), -EACCES, "masked");
	cr_assert_eq(may(fs, f, R_OK, 3000, in_file_group), 0, "owning group");
	cr_assert_eq(may(fs, f, R_OK, 3000, no_groups), -EACCES, "other has nothing");
	/* Without the mask's limit the named group may write. */
	const uint16_t open_mask[][2] = {{USER_OBJ, 6}, {USER, 6}, {GROUP_OBJ, 4}, {GROUP, 6},
					 {MASK, 6}, {OTHER, 0}};
	set_acl(fs, f, open_mask, id, 6);
	cr_assert_eq(may(fs, f, R_OK | W_OK, 3000, in_dba), 0);
	cr_assert_eq(may(fs, f, W_OK, 3000, in_file_group), -EACCES, "the owning group: r only");
	fs_done(fs);
}
