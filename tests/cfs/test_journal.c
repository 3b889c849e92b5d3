/* The journal: a committed transaction is replayed at mount when its blocks did not reach their
 * place; replaying twice changes nothing; a torn transaction (no valid commit block) is
 * ignored whole; a clean unmount leaves nothing to replay. */
#include "cfs_test.h"

/* Commit a change to one new inode, then put the old content of its block back in place, as
 * if the crash came between the journal write and the in-place write. */
static uint64_t committed_but_not_home(struct cfs_fs *fs, uint8_t *old)
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

Test(journal, replay_brings_a_committed_block_home_and_is_idempotent)
{
	struct cfs_fs *fs = fs_fresh(1, 32);
	uint8_t *old;
	cr_assert_eq(posix_memalign((void **)&old, 4096, 4096), 0);
	uint64_t ino = committed_but_not_home(fs, old);
	fs_crash(fs);
	for (int round = 0; round < 2; round++) { /* the second replay finds it home already */
		fs = fs_mount();
		pthread_mutex_lock(&fs->lock);
		struct cfs_inode *ip;
		cr_assert_eq(cfs_iget(fs, ino, &ip), 0, "round %d", round);
		cr_assert_eq(ip->d.uid, 7);
		cr_assert_eq(ip->d.mode, S_IFREG | 0640);
		pthread_mutex_unlock(&fs->lock);
		fs_crash(fs);
	}
	free(old);
	fs = fs_mount();
	fs_done(fs);
}

Test(journal, a_torn_transaction_is_ignored)
{
	struct cfs_fs *fs = fs_fresh(1, 32);
	uint8_t *old;
	cr_assert_eq(posix_memalign((void **)&old, 4096, 4096), 0);
	uint64_t ino = committed_but_not_home(fs, old);
	/* Tear it: damage the commit block, after the descriptor and the images. */
	uint64_t seq, *t;
	uint32_t n;
	uint8_t *img;
	cr_assert_eq(cfs_journal_read(fs->vol, &fs->sb, 0, &seq, &n, &t, &img), 0);
	cr_assert_gt(n, 0);
	free(t);
	free(img);
	uint64_t commit = fs->sb.journal_start + 1 + n;
	uint8_t *b;
	cr_assert_eq(posix_memalign((void **)&b, 4096, 4096), 0);
	cr_assert_eq(cvm_volume_read(fs->vol, b, 4096, commit * 4096), 0);
	const char *why;
	cr_assert_eq(cfs_block_verify(b, 4096, commit, CFS_B_JCOMMIT, 0, &why), 0,
		     "the commit block is where the layout says");
	b[100] ^= 1;
	cr_assert_eq(cvm_volume_write(fs->vol, b, 4096, commit * 4096), 0);
	fs_crash(fs);
	fs = fs_mount();
	pthread_mutex_lock(&fs->lock);
	struct cfs_inode *ip;
	cr_assert_neq(cfs_iget(fs, ino, &ip), 0, "the torn transaction's inode must not appear");
	pthread_mutex_unlock(&fs->lock);
	free(b);
	free(old);
	fs_done(fs);
}

Test(journal, clean_unmount_leaves_nothing_to_replay)
{
	struct cfs_fs *fs = fs_fresh(1, 32);
	struct stat st;
	cr_assert_eq(cfs_mkdir(fs, CFS_ROOT, "d", 0755, &root_cred, &st), 0);
	cr_assert_eq(cfs_unmount(fs), 0);
	uint64_t seq, *t;
	uint32_t n;
	uint8_t *img;
	struct cfs_dsuper sb;
	cr_assert_eq(cfs_super_read(test_vol, &sb, NULL), 0);
	cr_assert_eq(cfs_journal_read(test_vol, &sb, 0, &seq, &n, &t, &img), 0);
	cr_assert_eq(n, 0);
	cr_assert_gt(seq, 1);
	fs_done(NULL);
}
