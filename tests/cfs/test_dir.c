/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Directories: names hash to their bucket, linear hashing splits as the directory grows
 * (level and split pointer), every name stays findable through the splits, removal and
 * replace work, and long names and odd bytes are names like any other. */
#include "cfs_test.h"

#include <dirent.h>

static int count(void *arg, const char *name, size_t len, uint64_t ino, uint8_t type)
{
	(void)name, (void)len, (void)ino, (void)type;
	(*(unsigned *)arg)++;
	return 0;
}

Test(dir, hash_is_seeded_and_stable)
{
	struct cfs_fs *fs = fs_fresh(1, 32);
	uint32_t h1 = cfs_dir_hash(fs, "oracle", 6);
	cr_assert_eq(h1, cfs_dir_hash(fs, "oracle", 6));
	cr_assert_neq(h1, cfs_dir_hash(fs, "oraclE", 6));
	fs->sb.hash_seed ^= 1;
	cr_assert_neq(h1, cfs_dir_hash(fs, "oracle", 6), "the seed takes part");
	fs->sb.hash_seed ^= 1;
	fs_done(fs);
}

Test(dir, splits_keep_every_name_findable)
{
	struct cfs_fs *fs = fs_fresh(1, 64);
	pthread_mutex_lock(&fs->lock);
	struct cfs_inode *dir = fs_new_inode(fs, S_IFDIR | 0755);
	dir->nlookup = 1;
	cr_assert_eq(cfs_dir_init(fs, dir), 0);
	char name[300];
	const unsigned n = 5000;
	for (unsigned i = 0; i < n; i++) {
		snprintf(name, sizeof name, "%u-%s", i, i % 7 ? "x" : "a-rather-long-name-with-\x01-odd-bytes-\xff");
		cr_assert_eq(cfs_dir_add(fs, dir, name, 1000 + i, DT_REG), 0, "%s", name);
		if (fs->txn.n > fs->txn.limit / 2)
			cr_assert_eq(cfs_journal_commit(fs), 0);
	}
	cr_assert_gt(dir->d.dir_level, 4, "5000 names split the buckets");
	cr_assert_eq(cfs_dir_add(fs, dir, "3-x", 1, DT_REG), -EEXIST);
	for (unsigned i = 0; i < n; i++) {
		uint64_t ino;
		uint8_t type;
		snprintf(name, sizeof name, "%u-%s", i, i % 7 ? "x" : "a-rather-long-name-with-\x01-odd-bytes-\xff");
		cr_assert_eq(cfs_dir_lookup(fs, dir, name, &ino, &type), 0, "%s", name);
		cr_assert_eq(ino, 1000 + i);
		cr_assert_eq(type, DT_REG);
	}
	unsigned seen = 0;
	cr_assert_eq(cfs_dir_walk(fs, dir, count, &seen), 0);
	cr_assert_eq(seen, n);
	for (unsigned i = 0; i < n; i += 2) {
		snprintf(name, sizeof name, "%u-%s", i, i % 7 ? "x" : "a-rather-long-name-with-\x01-odd-bytes-\xff");
		cr_assert_eq(cfs_dir_remove(fs, dir, name), 0);
	}
	cr_assert_eq(cfs_dir_replace(fs, dir, "1-x", 42, DT_LNK), 0);
	uint64_t ino;
	uint8_t type;
	cr_assert_eq(cfs_dir_lookup(fs, dir, "1-x", &ino, &type), 0);
	cr_assert_eq(ino, 42);
	cr_assert_eq(type, DT_LNK);
	cr_assert_eq(cfs_dir_lookup(fs, dir, "0-a-rather-long-name-with-\x01-odd-bytes-\xff", &ino, NULL), -ENOENT);
	seen = 0;
	cr_assert_eq(cfs_dir_walk(fs, dir, count, &seen), 0);
	cr_assert_eq(seen, n / 2);
	cr_assert_eq(dir->d.dir_entries, n / 2);
	char longname[300];
	memset(longname, 'n', 256);
	longname[256] = '\0';
	cr_assert_eq(cfs_dir_add(fs, dir, longname, 5, DT_REG), -ENAMETOOLONG);
	longname[255] = '\0';
	cr_assert_eq(cfs_dir_add(fs, dir, longname, 5, DT_REG), 0);
	cr_assert_eq(cfs_iwrite(fs, dir), 0);
	pthread_mutex_unlock(&fs->lock);
	fs_done(fs);
}

/* Near full, a name is added or it is not.  A link that failed used to leave its name behind
 * when the split it started had no block for its new bucket (found by the soak); now names
 * stop 64 blocks above the maps' reserve, before a split can run short, and a split short of
 * space changes nothing (cfs_dir_add). */
Test(dir, a_full_filesystem_adds_a_name_whole_or_not_at_all)
{
	struct cfs_fs *fs = fs_fresh(1, 64);
	struct stat st;
	cr_assert_eq(cfs_mknod(fs, CFS_ROOT, "target", S_IFREG | 0644, 0, &root_cred, &st), 0);
	uint64_t target = st.st_ino;
	cr_assert_eq(cfs_mkdir(fs, CFS_ROOT, "names", 0755, &root_cred, &st), 0);
	uint64_t dir = st.st_ino;
	fs_fill(fs, 70);
	unsigned linked = 0, refused = 0;
	for (unsigned i = 0; i < 3000 && refused < 20; i++) {
		char name[64];
		snprintf(name, sizeof name, "n%05u", i); /* short: buckets split before they fill */
		int rc = cfs_link(fs, target, dir, name, &st);
		struct stat found;
		int look = cfs_lookup(fs, dir, name, &found);
		if (rc == 0) {
			linked++;
			cr_assert_eq(look, 0, "%s linked but not found", name);
		} else {
			refused++;
			cr_assert_eq(rc, -ENOSPC);
			cr_assert_eq(look, -ENOENT, "%s refused but found", name);
		}
	}
	cr_assert_gt(linked, 0);
	cr_assert_gt(refused, 0);
	fs_done_fsck_clean(fs);
}
