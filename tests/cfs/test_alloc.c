/* The allocator: contiguous runs near the goal, every block handed out once, frees come back
 * only after the transaction that freed them is committed, ENOSPC when full, and the counts
 * survive a remount. */
#include "cfs_test.h"

Test(alloc, runs_are_contiguous_and_unique)
{
	struct cfs_fs *fs = fs_fresh(1, 64);
	pthread_mutex_lock(&fs->lock);
	uint64_t free0 = cfs_free_blocks(fs), a, b;
	uint32_t na, nb;
	cr_assert_eq(cfs_alloc(fs, 0, 100, &a, &na), 0);
	cr_assert_eq(na, 100);
	cr_assert_eq(cfs_alloc(fs, a + 100, 50, &b, &nb), 0);
	cr_assert_eq(b, a + 100, "the goal is honoured when free");
	cr_assert_eq(cfs_free_blocks(fs), free0 - 150);
	for (uint64_t i = a; i < a + 150; i++)
		cr_assert(cfs_block_in_use(fs, i, 0));
	pthread_mutex_unlock(&fs->lock);
	fs_done(fs);
}

Test(alloc, freed_blocks_wait_for_the_commit)
{
	struct cfs_fs *fs = fs_fresh(1, 64);
	pthread_mutex_lock(&fs->lock);
	uint64_t a, b;
	uint32_t na, nb;
	cr_assert_eq(cfs_alloc(fs, 0, 10, &a, &na), 0);
	cr_assert_eq(cfs_journal_commit(fs), 0);
	cr_assert_eq(cfs_free(fs, a, 10), 0);
	cr_assert_eq(cfs_alloc(fs, a, 10, &b, &nb), 0);
	cr_assert(b >= a + 10 || b + nb <= a, "a block freed in the running transaction was reused");
	cr_assert_eq(cfs_journal_commit(fs), 0);
	uint64_t c;
	uint32_t nc;
	cr_assert_eq(cfs_alloc(fs, a, 10, &c, &nc), 0);
	cr_assert_eq(c, a, "after the commit the freed run is there again");
	cr_assert_eq(cfs_free(fs, a, 10), 0);
	cr_assert_eq(cfs_free(fs, a, 1), -EIO, "a double free is refused");
	pthread_mutex_unlock(&fs->lock);
	fs_done(fs);
}

Test(alloc, full_then_enospc_and_counts_survive_remount)
{
	struct cfs_fs *fs = fs_fresh(1, 32);
	pthread_mutex_lock(&fs->lock);
	uint64_t total = cfs_free_blocks(fs), got_all = 0, p;
	uint32_t n;
	int rc;
	while ((rc = cfs_alloc(fs, 0, 4096, &p, &n)) == 0) {
		got_all += n;
		if (fs->txn.n > fs->txn.limit / 2)
			cr_assert_eq(cfs_journal_commit(fs), 0);
	}
	cr_assert_eq(rc, -ENOSPC);
	/* New things stop at the reserve; maps of what is there may take it, to the last block. */
	cr_assert_eq(got_all, total - CFS_META_RESERVE);
	cr_assert_eq(cfs_free_blocks(fs), CFS_META_RESERVE);
	for (unsigned i = 0; i < CFS_META_RESERVE; i++)
		cr_assert_eq(cfs_alloc_meta(fs, 0, &p), 0);
	cr_assert_eq(cfs_alloc_meta(fs, 0, &p), -ENOSPC);
	cr_assert_eq(cfs_free_blocks(fs), 0);
	cr_assert_eq(cfs_journal_commit(fs), 0);
	pthread_mutex_unlock(&fs->lock);
	cr_assert_eq(cfs_unmount(fs), 0);
	fs = fs_mount();
	cr_assert_eq(cfs_free_blocks(fs), 0);
	fs_done(fs);
}
