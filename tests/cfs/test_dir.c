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
