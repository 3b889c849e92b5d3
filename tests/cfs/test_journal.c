/* The journal: committed transactions are replayed at mount when their blocks did not reach
 * their place, in order, the newest image of a block last; replaying twice changes nothing; a
 * torn transaction (no valid commit block) is ignored whole; the log wraps past the journal's
 * end and goes over old transactions, never the newest; a clean unmount leaves nothing to
 * replay, and no transaction of an earlier log is ever replayed. */
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

/* Damage the newest transaction's commit block, as if the crash came before all of it was
 * written.  fs->lock not held. */
static void tear_newest(struct cfs_fs *fs)
{
	uint64_t commit = fs->sb.journal_start + fs->jlast_pos + fs->jlast_len - 1;
	uint8_t *b;
	cr_assert_eq(posix_memalign((void **)&b, 4096, 4096), 0);
	cr_assert_eq(cvm_volume_read(fs->vol, b, 4096, commit * 4096), 0);
	const char *why;
	cr_assert_eq(cfs_block_verify(b, 4096, commit, CFS_B_JCOMMIT, 0, &why), 0,
		     "the commit block is where the log says");
	b[100] ^= 1;
	cr_assert_eq(cvm_volume_write(fs->vol, b, 4096, commit * 4096), 0);
	free(b);
}

/* Change inode ino's uid to uid in a transaction of its own, then put back in place what the
 * block held before, as if the in-place write had not reached the disk. */
static void chown_not_home(struct cfs_fs *fs, uint64_t ino, uint32_t uid)
{
	uint8_t *old;
	cr_assert_eq(posix_memalign((void **)&old, 4096, 4096), 0);
	pthread_mutex_lock(&fs->lock);
	struct cfs_inode *ip;
	cr_assert_eq(cfs_iget(fs, ino, &ip), 0);
	cr_assert_eq(cvm_volume_read(fs->vol, old, 4096, ino * 4096), 0);
	ip->d.uid = uid;
	cr_assert_eq(cfs_iwrite(fs, ip), 0);
	cr_assert_eq(cfs_journal_commit(fs), 0);
	cr_assert_eq(cvm_volume_write(fs->vol, old, 4096, ino * 4096), 0);
	pthread_mutex_unlock(&fs->lock);
	free(old);
}

static uint32_t uid_after_crash(struct cfs_fs **fs, uint64_t ino)
{
	fs_crash(*fs);
	*fs = fs_mount();
	pthread_mutex_lock(&(*fs)->lock);
	struct cfs_inode *ip;
	cr_assert_eq(cfs_iget(*fs, ino, &ip), 0);
	uint32_t uid = ip->d.uid;
	pthread_mutex_unlock(&(*fs)->lock);
	return uid;
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
	tear_newest(fs);
	fs_crash(fs);
	fs = fs_mount();
	pthread_mutex_lock(&fs->lock);
	struct cfs_inode *ip;
	cr_assert_neq(cfs_iget(fs, ino, &ip), 0, "the torn transaction's inode must not appear");
	pthread_mutex_unlock(&fs->lock);
	free(old);
	fs_done(fs);
}

Test(journal, clean_unmount_leaves_nothing_to_replay)
{
	struct cfs_fs *fs = fs_fresh(1, 32);
	struct stat st;
	cr_assert_eq(cfs_mkdir(fs, CFS_ROOT, "d", 0755, &root_cred, &st), 0);
	cr_assert_eq(cfs_unmount(fs), 0);
	struct cfs_jlog log;
	struct cfs_dsuper sb;
	cr_assert_eq(cfs_super_read(test_vol, &sb, NULL), 0);
	cr_assert_eq(cfs_journal_read(test_vol, &sb, 0, &log), 0);
	cr_assert_eq(log.ntxn, 0);
	cr_assert_gt(log.next_seq, 1);
	cfs_jlog_free(&log);
	fs_done(NULL);
}

Test(journal, several_transactions_replay_in_order_newest_last)
{
	struct cfs_fs *fs = fs_fresh(1, 32);
	uint8_t *old;
	cr_assert_eq(posix_memalign((void **)&old, 4096, 4096), 0);
	uint64_t ino = committed_but_not_home(fs, old);
	for (uint32_t uid = 100; uid < 105; uid++)
		chown_not_home(fs, ino, uid);
	struct cfs_jlog log;
	cr_assert_eq(cfs_journal_read(fs->vol, &fs->sb, 0, &log), 0);
	cr_assert_eq(log.ntxn, 6, "the log holds the six transactions (%u)", log.ntxn);
	uint32_t seen = 0;
	for (uint32_t i = 0; i < log.count; i++)
		seen += log.targets[i] == ino;
	cr_assert_eq(seen, 1, "each block once, with its newest image");
	cfs_jlog_free(&log);
	cr_assert_eq(uid_after_crash(&fs, ino), 104);
	cr_assert_eq(uid_after_crash(&fs, ino), 104, "replayed again: nothing changes");
	free(old);
	fs_done(fs); /* the inode is in no directory: fsck would say so */
}

Test(journal, a_torn_newest_transaction_leaves_the_ones_before_it)
{
	struct cfs_fs *fs = fs_fresh(1, 32);
	uint8_t *old;
	cr_assert_eq(posix_memalign((void **)&old, 4096, 4096), 0);
	uint64_t ino = committed_but_not_home(fs, old);
	chown_not_home(fs, ino, 100);
	chown_not_home(fs, ino, 101);
	tear_newest(fs);
	cr_assert_eq(uid_after_crash(&fs, ino), 100);
	free(old);
	fs_done(fs); /* the inode is in no directory: fsck would say so */
}

/* Write content over block blk behind the filesystem's back, crash, mount (replaying the
 * log): the block must still hold it. */
static struct cfs_fs *crash_after_writing(struct cfs_fs *fs, uint64_t blk, const uint8_t *content,
					  const char *what)
{
	uint8_t *now;
	cr_assert_eq(posix_memalign((void **)&now, 4096, 4096), 0);
	cr_assert_eq(cvm_volume_write(fs->vol, content, 4096, blk * 4096), 0);
	fs_crash(fs);
	fs = fs_mount();
	cr_assert_eq(cvm_volume_read(fs->vol, now, 4096, blk * 4096), 0);
	cr_assert_eq(memcmp(now, content, 4096), 0, "%s", what);
	free(now);
	return fs;
}

/* A journal of the smallest size: the log wraps every few dozen commits. */
static struct cfs_fs *fs_small_journal(void)
{
	test_dir_make();
	volume_make(1, 32);
	test_vol = volume_open();
	struct cfs_mkfs_opts o = {.label = "test", .journal_blocks = 64};
	cr_assert_eq(cfs_mkfs(test_vol, &o, NULL, NULL), 0, "mkfs: %s", cfs_last_error());
	return fs_mount();
}

Test(journal, the_log_wraps_and_replays_across_its_end)
{
	struct cfs_fs *fs = fs_small_journal();
	uint8_t *old;
	cr_assert_eq(posix_memalign((void **)&old, 4096, 4096), 0);
	uint64_t ino = committed_but_not_home(fs, old);
	uint64_t anchors = fs->stats.anchors;
	bool wrapped = false;
	/* Commit until the newest transaction is at block 1 again, with transactions before it
	 * at the end of the journal still in the log. */
	uint32_t uid = 200;
	for (; uid < 400 && !wrapped; uid++) {
		uint32_t before = fs->jlast_pos;
		chown_not_home(fs, ino, uid);
		wrapped = fs->jlast_pos < before;
	}
	cr_assert(wrapped, "the log came round to its start");
	cr_assert_eq(fs->stats.anchors, anchors, "wrapping needs no new anchor");
	chown_not_home(fs, ino, uid);
	struct cfs_jlog log;
	cr_assert_eq(cfs_journal_read(fs->vol, &fs->sb, 0, &log), 0);
	cr_assert_geq(log.ntxn, 3, "transactions on both sides of the end are in the run (%u)",
		      log.ntxn);
	cfs_jlog_free(&log);
	cr_assert_eq(uid_after_crash(&fs, ino), uid);
	free(old);
	fs_done(fs); /* the inode is in no directory: fsck would say so */
}

Test(journal, a_transaction_too_big_to_go_beside_the_newest_starts_a_new_log)
{
	struct cfs_fs *fs = fs_small_journal();
	/* 40 new inodes in one transaction: more than half of the journal's 63 log blocks, so
	 * the second such transaction cannot go beside the first. */
	uint64_t ino[40];
	uint8_t *old;
	cr_assert_eq(posix_memalign((void **)&old, 4096, 40 * 4096), 0);
	pthread_mutex_lock(&fs->lock);
	for (int round = 0; round < 2; round++) {
		for (int i = 0; i < 40; i++) {
			struct cfs_inode *ip = fs_new_inode(fs, S_IFREG | 0600);
			ino[i] = ip->ino;
			cr_assert_eq(cvm_volume_read(fs->vol, old + i * 4096, 4096, ino[i] * 4096), 0);
		}
		uint64_t anchors = fs->stats.anchors;
		cr_assert_eq(cfs_journal_commit(fs), 0);
		cr_assert_eq(fs->stats.anchors, anchors + (round == 1), "round %d", round);
	}
	/* The second's inodes did not reach their place: replay brings them. */
	for (int i = 0; i < 40; i++)
		cr_assert_eq(cvm_volume_write(fs->vol, old + i * 4096, 4096, ino[i] * 4096), 0);
	pthread_mutex_unlock(&fs->lock);
	struct cfs_jlog log;
	cr_assert_eq(cfs_journal_read(fs->vol, &fs->sb, 0, &log), 0);
	cr_assert_eq(log.ntxn, 1, "the new log holds the second transaction only");
	cfs_jlog_free(&log);
	fs_crash(fs);
	fs = fs_mount();
	pthread_mutex_lock(&fs->lock);
	for (int i = 0; i < 40; i++) {
		struct cfs_inode *ip;
		cr_assert_eq(cfs_iget(fs, ino[i], &ip), 0, "inode %d", i);
	}
	pthread_mutex_unlock(&fs->lock);
	free(old);
	fs_done(fs); /* the inodes are in no directory: fsck would say so */
}

Test(journal, the_new_log_after_a_too_big_transaction_knows_its_blocks)
{
	struct cfs_fs *fs = fs_small_journal();
	pthread_mutex_lock(&fs->lock);
	struct cfs_inode *ip = NULL;
	for (int round = 0; round < 2; round++) {
		for (int i = 0; i < 40; i++) {
			ip = fs_new_inode(fs, S_IFREG | 0600);
			if (i < 39 || round == 0)
				cr_assert_eq(cfs_iput_check(fs, ip), 0);
		}
		cr_assert_eq(cfs_journal_commit(fs), 0);
	}
	/* The second transaction went into a new log: freeing one of its inodes must revoke
	 * its image there too (a replay would write the inode back over whatever gets the
	 * block). */
	uint64_t ino = ip->ino;
	ip->d.nlink = 0;
	cr_assert_eq(cfs_iput_check(fs, ip), 0);
	cr_assert_eq(cfs_journal_commit(fs), 0);
	pthread_mutex_unlock(&fs->lock);
	struct cfs_jlog log;
	cr_assert_eq(cfs_journal_read(fs->vol, &fs->sb, 0, &log), 0);
	for (uint32_t i = 0; i < log.count; i++)
		cr_assert_neq(log.targets[i], ino, "the freed inode's image would be replayed");
	cfs_jlog_free(&log);
	fs_done(fs); /* the inodes are in no directory: fsck would say so */
}

Test(journal, no_transaction_of_an_earlier_log_is_replayed)
{
	struct cfs_fs *fs = fs_fresh(1, 32);
	uint8_t *old;
	cr_assert_eq(posix_memalign((void **)&old, 4096, 4096), 0);
	uint64_t ino = committed_but_not_home(fs, old);
	chown_not_home(fs, ino, 300);
	/* A let-go of the locks does this: everything in place, a new log. */
	pthread_mutex_lock(&fs->lock);
	cr_assert_eq(cfs_journal_empty(fs), 0);
	pthread_mutex_unlock(&fs->lock);
	/* Then another node changes the block (here: back to what it was before the inode). */
	fs = crash_after_writing(fs, ino, old, "the old log's image came back over it");
	free(old);
	fs_done(fs);
}

Test(journal, a_commit_that_frees_a_block_of_the_log_revokes_its_images)
{
	struct cfs_fs *fs = fs_fresh(1, 32);
	struct stat st;
	cr_assert_eq(cfs_mknod(fs, CFS_ROOT, "f", S_IFREG | 0644, 0, &root_cred, &st), 0);
	pthread_mutex_lock(&fs->lock);
	cr_assert_eq(cfs_journal_commit(fs), 0);
	pthread_mutex_unlock(&fs->lock);
	uint64_t anchors = fs->stats.anchors, ino = st.st_ino;
	/* The inode's block is in the log; once freed it may hold a file's data, which a
	 * replay of the log must never overwrite with the inode's old image. */
	cr_assert_eq(cfs_unlink(fs, CFS_ROOT, "f"), 0);
	cfs_forget(fs, ino, 1); /* the kernel's lookup of it */
	pthread_mutex_lock(&fs->lock);
	cr_assert_eq(cfs_journal_commit(fs), 0);
	pthread_mutex_unlock(&fs->lock);
	cr_assert_eq(fs->stats.anchors, anchors, "a revoke costs no new log");
	struct cfs_jlog log;
	cr_assert_eq(cfs_journal_read(fs->vol, &fs->sb, 0, &log), 0);
	cr_assert_geq(log.ntxn, 2, "both transactions are replayable");
	for (uint32_t i = 0; i < log.count; i++)
		cr_assert_neq(log.targets[i], ino, "the freed inode's image would be replayed");
	cfs_jlog_free(&log);
	/* The block gets a file's data; a crash and the replay leave it. */
	uint8_t *data;
	cr_assert_eq(posix_memalign((void **)&data, 4096, 4096), 0);
	memset(data, 'd', 4096);
	fs = crash_after_writing(fs, ino, data, "the replay put the freed inode back");
	free(data);
	fs_done(fs); /* its data block is "free" to fsck: it was written behind its back */
}

Test(journal, a_commit_that_frees_more_logged_blocks_than_its_descriptor_holds_voids_the_log)
{
	struct cfs_fs *fs = fs_fresh(1, 32);
	enum { N = 520 }; /* more than a 4 KiB descriptor's 504 */
	static struct cfs_inode *ips[N];
	pthread_mutex_lock(&fs->lock);
	for (int i = 0; i < N; i++) {
		ips[i] = fs_new_inode(fs, S_IFREG | 0600);
		if (fs->txn.n > fs->txn.limit / 2)
			cr_assert_eq(cfs_journal_commit(fs), 0);
	}
	cr_assert_eq(cfs_journal_commit(fs), 0);
	uint64_t anchors = fs->stats.anchors;
	for (int i = 0; i < N; i++) {
		ips[i]->d.nlink = 0;
		cr_assert_eq(cfs_iput_check(fs, ips[i]), 0);
	}
	cr_assert_lt(fs->txn.n, CFS_JDESC_MAX(4096u), "the frees alone fit in a transaction");
	cr_assert_eq(cfs_journal_commit(fs), 0);
	pthread_mutex_unlock(&fs->lock);
	cr_assert_eq(fs->stats.anchors, anchors + 1);
	struct cfs_jlog log;
	cr_assert_eq(cfs_journal_read(fs->vol, &fs->sb, 0, &log), 0);
	cr_assert_eq(log.ntxn, 0, "nothing of the old log can be replayed");
	cfs_jlog_free(&log);
	fs_done(fs);
}
