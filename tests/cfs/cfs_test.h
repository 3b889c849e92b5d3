/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Shared by the cfs tests: a volume of LUN files in the test directory, made and mounted. */
#ifndef TESTS_CFS_TEST_H
#define TESTS_CFS_TEST_H

#include "cfs/internal.h"
#include "../helpers.h"

#include <pthread.h>

static struct cvm_volume *test_vol;

/* A volume of nluns LUNs of mib MiB each, striped 256k, opened read-write. */
static inline struct cvm_volume *volume_make(unsigned nluns, unsigned mib)
{
	char name[32];
	const char *paths[8];
	for (unsigned i = 0; i < nluns; i++) {
		snprintf(name, sizeof name, "lun%u", i);
		paths[i] = make_lun(name, (unsigned long long)mib << 20);
	}
	const char *dirs[] = {test_dir};
	struct cvm_scan s;
	cr_assert_eq(cvm_scan_paths(dirs, 1, &s), 0);
	struct cvm_config cfg;
	cr_assert_eq(cvm_volume_create(&s, "vol", paths, nluns, NULL, &cfg), 0, "%s",
		     cvm_last_error());
	cvm_scan_free(&s);
	return NULL;
}

static inline struct cvm_volume *volume_open(void)
{
	const char *dirs[] = {test_dir};
	struct cvm_scan s;
	struct cvm_volume *v;
	cr_assert_eq(cvm_scan_paths(dirs, 1, &s), 0);
	cr_assert_eq(cvm_volume_open(&s, "vol", CVM_OPEN_RDWR, &v), 0, "%s", cvm_last_error());
	cvm_scan_free(&s);
	return v;
}

static inline struct cfs_fs *fs_mount(void)
{
	struct cfs_mount_opts o = {0};
	struct cfs_fs *fs;
	cr_assert_eq(cfs_mount(test_vol, &o, &fs), 0, "mount: %s", cfs_last_error());
	return fs;
}

/* mkfs a fresh volume and mount it. */
/* ... with features turned on over the default ones (cfs_mkfs_opts.features), or NULL. */
static inline struct cfs_fs *fs_fresh_with(unsigned nluns, unsigned mib, const char *features)
{
	test_dir_make();
	volume_make(nluns, mib);
	test_vol = volume_open();
	struct cfs_mkfs_opts o = {.label = "test", .features = features};
	cr_assert_eq(cfs_mkfs(test_vol, &o, NULL, NULL), 0, "mkfs: %s", cfs_last_error());
	return fs_mount();
}

static inline struct cfs_fs *fs_fresh(unsigned nluns, unsigned mib)
{
	return fs_fresh_with(nluns, mib, NULL);
}

static inline void fs_done(struct cfs_fs *fs)
{
	if (fs)
		cr_assert_eq(cfs_unmount(fs), 0);
	if (test_vol)
		cvm_volume_close(test_vol);
	test_vol = NULL;
	test_dir_remove();
}

/* A new root-owned inode outside any directory, linked as a file or directory would be;
 * fs->lock held. */
static inline struct cfs_inode *fs_new_inode(struct cfs_fs *fs, uint32_t mode)
{
	struct cfs_inode *ip;
	cr_assert_eq(cfs_ialloc(fs, 0, mode, 0, 0, &ip), 0);
	ip->d.nlink = S_ISDIR(mode) ? 2 : 1;
	return ip;
}

/* What a kill -9 leaves: nothing of the daemon's memory, the volume as it is. */
static inline void fs_crash(struct cfs_fs *fs)
{
	pthread_mutex_lock(&fs->lock);
	fs->stopping = true;
	fs->ro = true; /* the committer's last round commits nothing: the process is gone */
	pthread_cond_signal(&fs->commit_wake);
	pthread_mutex_unlock(&fs->lock);
	pthread_join(fs->committer, NULL);
	fs->txn.n = 0;
	cfs_icache_destroy(fs);
	cfs_bcache_destroy(fs);
	cfslock_free(fs->meta.lk);
	cfslock_space_close(fs->space);
	cfslock_client_close(fs->locks);
	close(fs->lockfd);
	free(fs->ags);
	free(fs->pending_free);
	cfs_journal_free(fs);
	free(fs);
}

static const struct cfs_cred root_cred = {.uid = 0};

/* A file or directory of mode made in dir by root: its inode number (looked up once). */
static inline uint64_t fs_make(struct cfs_fs *fs, uint64_t dir, const char *name, mode_t mode)
{
	struct stat st;
	int rc = S_ISDIR(mode) ? cfs_mkdir(fs, dir, name, mode & 07777, &root_cred, &st)
			       : cfs_mknod(fs, dir, name, mode, 0, &root_cred, &st);
	cr_assert_eq(rc, 0, "create %s: %d", name, rc);
	return st.st_ino;
}

/* Commit a change to one new inode, then put the old content of its block back in place, as
 * if the crash came between the journal write and the in-place write. */
static inline uint64_t committed_but_not_home(struct cfs_fs *fs, uint8_t *old)
{
	pthread_mutex_lock(&fs->lock);
	struct cfs_inode *ip;
	cr_assert_eq(cfs_ialloc(fs, 0, S_IFREG | 0640, 7, 8, &ip), 0);
	ip->d.nlink = 1;
	uint64_t ino = ip->ino;
	cr_assert_eq(cvm_volume_read(fs->vol, old, 4096, ino * 4096), 0);
	cr_assert_eq(cfs_iwrite(fs, ip), 0);
	cr_assert_eq(cfs_journal_commit(fs), 0);
	cr_assert_eq(cvm_volume_write(fs->vol, old, 4096, ino * 4096), 0);
	pthread_mutex_unlock(&fs->lock);
	return ino;
}

/* Fill the filesystem with a file "big" of all the space users can have but leave blocks. */
static inline void fs_fill(struct cfs_fs *fs, uint64_t leave)
{
	struct stat st;
	struct statvfs sv;
	cr_assert_eq(cfs_mknod(fs, CFS_ROOT, "big", S_IFREG | 0644, 0, &root_cred, &st), 0);
	cr_assert_eq(cfs_open(fs, st.st_ino, O_RDWR), 0);
	cr_assert_eq(cfs_statfs(fs, &sv), 0);
	cr_assert_eq(cfs_fallocate(fs, st.st_ino, 0, 0, (sv.f_bavail - leave) * fs->bs, NULL), 0);
	cr_assert_eq(cfs_release(fs, st.st_ino), 0);
}

static void fsck_print(void *arg, const char *line)
{
	(void)arg;
	cr_log_info("fsck: %s", line);
}

/* Unmount, then fsck.cfs -n must find nothing (its lines go to the test's log). */
static inline void fs_done_fsck_clean(struct cfs_fs *fs)
{
	cr_assert_eq(cfs_unmount(fs), 0);
	struct cfs_fsck_report r;
	cr_assert_eq(cfs_fsck(test_vol, false, fsck_print, NULL, NULL, &r), 0);
	cr_expect_eq(r.problems, 0, "fsck found %u problems", r.problems);
	fs_done(NULL);
}

#endif
