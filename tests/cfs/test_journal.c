/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The journal: committed transactions are replayed at mount when their blocks did not reach
 * their place, in order, the newest image of a block last; replaying twice changes nothing; a
 * torn transaction (no valid commit block) is ignored whole; a commit writes nothing in place
 * and a checkpoint writes each changed block once, when the log has no room for another
 * transaction; a clean unmount leaves nothing to replay, and no transaction of an earlier log
 * is ever replayed.  A glock going down to PR has every committed block written in place and
 * owes the anchor until the next commit (which writes it first) or a settle. */
#include "cfs_test.h"

#include <pthread.h>

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

/* A journal of the smallest size: no room for a transaction of the largest size behind
 * any other. */
static struct cfs_fs *fs_small_journal(void)
{
	test_dir_make();
	volume_make(1, 32);
	test_vol = volume_open();
	struct cfs_mkfs_opts o = {.label = "test", .journal_blocks = 64};
	cr_assert_eq(cfs_mkfs(test_vol, &o, NULL, NULL), 0, "mkfs: %s", cfs_last_error());
	return fs_mount();
}

/* Whether block blk on disk holds what the cache holds of it. */
static bool home(struct cfs_fs *fs, uint64_t blk)
{
	uint8_t *disk;
	cr_assert_eq(posix_memalign((void **)&disk, 4096, 4096), 0);
	struct cfs_buf *b;
	cr_assert_eq(cvm_volume_read(fs->vol, disk, 4096, blk * 4096), 0);
	cr_assert_eq(cfs_bread(fs, blk, CFS_B_INODE, blk, &b), 0);
	bool same = memcmp(disk, b->data, 4096) == 0;
	free(disk);
	return same;
}

Test(journal, a_commit_writes_nothing_in_place_and_a_checkpoint_writes_each_block_once)
{
	struct cfs_fs *fs = fs_fresh(1, 32);
	pthread_mutex_lock(&fs->lock);
	struct cfs_inode *ip = fs_new_inode(fs, S_IFREG | 0600);
	cr_assert_eq(cfs_journal_commit(fs), 0);
	for (uint32_t uid = 1; uid <= 5; uid++) {
		ip->d.uid = uid;
		cr_assert_eq(cfs_iwrite(fs, ip), 0);
		cr_assert_eq(cfs_journal_commit(fs), 0);
	}
	cr_assert_not(home(fs, ip->ino), "the commits wrote the inode in place");
	uint64_t homed = fs->stats.home_blocks, blocks = fs->nunhome;
	cr_assert_eq(cfs_journal_empty(fs), 0);
	cr_assert(home(fs, ip->ino), "the checkpoint did not write the inode in place");
	cr_assert_eq(fs->stats.home_blocks, homed + blocks, "each changed block written once");
	cr_assert_lt(blocks, 8, "six commits of the same few blocks (%llu)",
		     (unsigned long long)blocks);
	ip->d.nlink = 0;
	cr_assert_eq(cfs_iput_check(fs, ip), 0);
	pthread_mutex_unlock(&fs->lock);
	fs_done(fs);
}

Test(journal, a_log_with_no_room_for_another_transaction_is_checkpointed_and_replays_after)
{
	struct cfs_fs *fs = fs_fresh(1, 32);
	uint8_t *old;
	cr_assert_eq(posix_memalign((void **)&old, 4096, 4096), 0);
	uint64_t ino = committed_but_not_home(fs, old);
	uint64_t anchors = fs->stats.anchors;
	uint32_t uid = 200, most = 0;
	for (; uid < 1200 && fs->stats.anchors == anchors; uid++) {
		most = fs->jlast_pos + fs->jlast_len;
		chown_not_home(fs, ino, uid);
	}
	cr_assert_eq(fs->stats.anchors, anchors + 1, "the log filled and was checkpointed");
	/* Each of these transactions takes a few log blocks. */
	cr_assert(most + fs->txn.limit + 2 <= fs->sb.journal_blocks &&
			  most + 8 + fs->txn.limit + 2 > fs->sb.journal_blocks,
		  "emptied only when a transaction of the largest size no longer fits (%u)", most);
	cr_assert_eq(fs->nunhome, 0);
	chown_not_home(fs, ino, uid);
	chown_not_home(fs, ino, uid + 1);
	struct cfs_jlog log;
	cr_assert_eq(cfs_journal_read(fs->vol, &fs->sb, 0, &log), 0);
	cr_assert_eq(log.ntxn, 2, "the new log holds what came after the checkpoint (%u)",
		     log.ntxn);
	cfs_jlog_free(&log);
	cr_assert_eq(uid_after_crash(&fs, ino), uid + 1);
	free(old);
	fs_done(fs); /* the inode is in no directory: fsck would say so */
}

/* 40 new inodes in one transaction, committed by commit (fs->lock held): more than half of
 * the small journal's 63 log blocks, so no transaction of the largest size fits behind it and
 * the log is checkpointed: a new anchor, every inode in place. */
static void checkpointing_round(struct cfs_fs *fs, int round, int (*commit)(struct cfs_fs *))
{
	uint64_t ino[40];
	for (int i = 0; i < 40; i++)
		ino[i] = fs_new_inode(fs, S_IFREG | 0600)->ino;
	uint64_t anchors = fs->stats.anchors;
	cr_assert_eq(commit(fs), 0);
	cr_assert_eq(fs->stats.anchors, anchors + 1, "round %d", round);
	for (int i = 0; i < 40; i++)
		cr_assert(home(fs, ino[i]), "round %d inode %d", round, i);
}

Test(journal, a_commit_that_leaves_no_room_for_the_largest_transaction_is_checkpointed)
{
	struct cfs_fs *fs = fs_small_journal();
	pthread_mutex_lock(&fs->lock);
	for (int round = 0; round < 2; round++)
		checkpointing_round(fs, round, cfs_journal_commit);
	pthread_mutex_unlock(&fs->lock);
	struct cfs_jlog log;
	cr_assert_eq(cfs_journal_read(fs->vol, &fs->sb, 0, &log), 0);
	cr_assert_eq(log.ntxn, 0, "nothing left to replay");
	cfs_jlog_free(&log);
	fs_done(fs); /* the inodes are in no directory: fsck would say so */
}

/* Sees, when it gets fs->lock, whether a checkpoint is in flight. */
struct flight_watch {
	struct cfs_fs *fs;
	bool stop, saw_checkpoint;
};

static void *watch_flight(void *arg)
{
	struct flight_watch *w = arg;
	while (!__atomic_load_n(&w->stop, __ATOMIC_ACQUIRE)) {
		pthread_mutex_lock(&w->fs->lock);
		if (w->fs->jflight.active && w->fs->jflight.home)
			w->saw_checkpoint = true;
		pthread_mutex_unlock(&w->fs->lock);
	}
	return NULL;
}

/* fsync's commit (cfs_journal_sync) that leaves the log no room for another transaction
 * checkpoints in its own flight, fs->lock let go: other threads go on meanwhile, and after it
 * the blocks are in place and the log is empty. */
Test(journal, a_sync_that_fills_the_log_checkpoints_with_the_lock_let_go)
{
	struct cfs_fs *fs = fs_small_journal();
	struct flight_watch w = {.fs = fs};
	pthread_mutex_lock(&fs->lock);
	pthread_t t;
	cr_assert_eq(pthread_create(&t, NULL, watch_flight, &w), 0); /* waits for fs->lock */
	for (int round = 0; round < 3; round++) {
		checkpointing_round(fs, round, cfs_journal_sync);
		cr_assert_eq(fs->nunhome, 0, "round %d: blocks still wait for a checkpoint", round);
	}
	__atomic_store_n(&w.stop, true, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&fs->lock);
	pthread_join(t, NULL);
	cr_assert(w.saw_checkpoint, "the checkpoint held fs->lock throughout");
	struct cfs_jlog log;
	cr_assert_eq(cfs_journal_read(fs->vol, &fs->sb, 0, &log), 0);
	cr_assert_eq(log.ntxn, 0, "nothing left to replay");
	cfs_jlog_free(&log);
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

/* After a commit that freed blocks the log held images of: no new log, both transactions
 * replayable, and none of the n freed blocks among the images a replay writes. */
static void assert_revoked(struct cfs_fs *fs, uint64_t anchors, const uint64_t *freed, int n)
{
	cr_assert_eq(fs->stats.anchors, anchors, "a revoke costs no new log");
	struct cfs_jlog log;
	cr_assert_eq(cfs_journal_read(fs->vol, &fs->sb, 0, &log), 0);
	cr_assert_geq(log.ntxn, 2, "both transactions are replayable");
	for (uint32_t i = 0; i < log.count; i++)
		for (int k = 0; k < n; k++)
			cr_assert_neq(log.targets[i], freed[k], "freed block %llu would be replayed",
				      (unsigned long long)freed[k]);
	cfs_jlog_free(&log);
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
	assert_revoked(fs, anchors, &ino, 1);
	/* The block gets a file's data; a crash and the replay leave it. */
	uint8_t *data;
	cr_assert_eq(posix_memalign((void **)&data, 4096, 4096), 0);
	memset(data, 'd', 4096);
	fs = crash_after_writing(fs, ino, data, "the replay put the freed inode back");
	free(data);
	fs_done(fs); /* its data block is "free" to fsck: it was written behind its back */
}

/* A free of a long run (a big file's extent) looks for the log's images inside it by one walk
 * of the log's table: they are revoked all the same. */
Test(journal, a_commit_that_frees_a_long_run_revokes_the_logged_blocks_inside_it)
{
	struct cfs_fs *fs = fs_fresh(1, 32);
	pthread_mutex_lock(&fs->lock);
	uint64_t run, logged[3];
	cr_assert_eq(cfs_alloc_run(fs, 200, &run), 0);
	logged[0] = run;
	logged[1] = run + 100;
	logged[2] = run + 199;
	struct cfs_buf *b;
	for (int i = 0; i < 3; i++)
		cr_assert_eq(cfs_bnew(fs, logged[i], CFS_B_EXTENTS, 1, &b), 0);
	cr_assert_eq(cfs_journal_commit(fs), 0);
	uint64_t anchors = fs->stats.anchors;
	cr_assert_eq(cfs_free(fs, run, 200), 0);
	cr_assert_eq(cfs_journal_commit(fs), 0);
	pthread_mutex_unlock(&fs->lock);
	assert_revoked(fs, anchors, logged, 3);
	fs_done(fs);
}

Test(journal, a_commit_that_frees_more_logged_blocks_than_its_descriptor_holds_voids_the_log)
{
	struct cfs_fs *fs = fs_fresh(1, 32);
	enum { OTHERS = 20, LOGGED = 490 };
	static struct cfs_inode *others[OTHERS], *ips[LOGGED];
	pthread_mutex_lock(&fs->lock);
	for (int i = 0; i < OTHERS; i++)
		others[i] = fs_new_inode(fs, S_IFREG | 0600);
	cr_assert_eq(cfs_journal_commit(fs), 0);
	cr_assert_eq(cfs_journal_empty(fs), 0);
	/* One transaction of LOGGED new inodes, all in the log... */
	for (int i = 0; i < LOGGED; i++)
		ips[i] = fs_new_inode(fs, S_IFREG | 0600);
	uint64_t anchors = fs->stats.anchors;
	cr_assert_eq(cfs_journal_commit(fs), 0);
	cr_assert_eq(fs->stats.anchors, anchors, "the log has room for one more transaction");
	/* ...freed in one that changes OTHERS more blocks: the revokes do not fit beside them
	 * in its descriptor. */
	for (int i = 0; i < OTHERS; i++) {
		others[i]->d.uid = 1;
		cr_assert_eq(cfs_iwrite(fs, others[i]), 0);
	}
	for (int i = 0; i < LOGGED; i++) {
		ips[i]->d.nlink = 0;
		cr_assert_eq(cfs_iput_check(fs, ips[i]), 0);
	}
	cr_assert_gt(LOGGED, CFS_JDESC_MAX(4096u) - fs->txn.n, "the revokes do not fit");
	cr_assert_eq(cfs_journal_commit(fs), 0);
	pthread_mutex_unlock(&fs->lock);
	cr_assert_eq(fs->stats.anchors, anchors + 1);
	struct cfs_jlog log;
	cr_assert_eq(cfs_journal_read(fs->vol, &fs->sb, 0, &log), 0);
	cr_assert_eq(log.ntxn, 0, "nothing of the old log can be replayed");
	cfs_jlog_free(&log);
	fs_done(fs); /* the others are in no directory: fsck would say so */
}

static uint32_t log_transactions(struct cfs_fs *fs)
{
	struct cfs_jlog log;
	cr_assert_eq(cfs_journal_read(fs->vol, &fs->sb, 0, &log), 0);
	uint32_t n = log.ntxn;
	cfs_jlog_free(&log);
	return n;
}

Test(journal, going_down_to_pr_writes_in_place_and_owes_the_anchor_until_the_next_commit)
{
	struct cfs_fs *fs = fs_fresh(1, 32);
	pthread_mutex_lock(&fs->lock); /* the committer would settle it meanwhile */
	struct cfs_inode *ip = fs_new_inode(fs, S_IFREG | 0600);
	uint64_t ino = ip->ino;
	ip->d.uid = 1;
	cr_assert_eq(cfs_iwrite(fs, ip), 0);
	cr_assert_eq(cfs_journal_commit(fs), 0);
	uint64_t anchors = fs->stats.anchors;
	cr_assert_eq(cfs_journal_home(fs), 0);
	cr_assert(home(fs, ino), "in place, for other nodes to read");
	cr_assert(fs->janchor_owed);
	cr_assert_eq(fs->stats.anchors, anchors, "the anchor is left for later");
	cr_assert_eq(log_transactions(fs), 1, "the log still replays, putting back what is there");
	/* The next commit voids that log first: else a later anchor would void its own. */
	ip->d.uid = 2;
	cr_assert_eq(cfs_iwrite(fs, ip), 0);
	cr_assert_eq(cfs_journal_commit(fs), 0);
	cr_assert_eq(fs->stats.anchors, anchors + 1);
	cr_assert_not(fs->janchor_owed);
	cr_assert_eq(log_transactions(fs), 1, "only the new transaction");
	cr_assert_eq(cfs_journal_settle(fs), 0);
	cr_assert_eq(fs->stats.anchors, anchors + 1, "nothing was owed");
	/* Owed again, then settled: nothing left to replay. */
	cr_assert_eq(cfs_journal_home(fs), 0);
	cr_assert(fs->janchor_owed);
	cr_assert_eq(cfs_journal_settle(fs), 0);
	cr_assert_eq(fs->stats.anchors, anchors + 2);
	cr_assert_eq(log_transactions(fs), 0);
	/* Owed at a crash: the replay puts back only what is in place. */
	ip->d.uid = 3;
	cr_assert_eq(cfs_iwrite(fs, ip), 0);
	cr_assert_eq(cfs_journal_commit(fs), 0);
	cr_assert_eq(cfs_journal_home(fs), 0);
	pthread_mutex_unlock(&fs->lock);
	cr_assert_eq(uid_after_crash(&fs, ino), 3);
	/* A commit after a home, then a settle: the commit is replayed after a crash (the
	 * settle did not void its log). */
	pthread_mutex_lock(&fs->lock);
	cr_assert_eq(cfs_iget(fs, ino, &ip), 0);
	for (uint32_t uid = 4; uid <= 5; uid++) {
		ip->d.uid = uid;
		cr_assert_eq(cfs_iwrite(fs, ip), 0);
		cr_assert_eq(cfs_journal_commit(fs), 0);
		if (uid == 4)
			cr_assert_eq(cfs_journal_home(fs), 0);
	}
	cr_assert_eq(cfs_journal_settle(fs), 0);
	pthread_mutex_unlock(&fs->lock);
	cr_assert_eq(uid_after_crash(&fs, ino), 5);
	fs_done(fs); /* the inode is in no directory: fsck would say so */
}
