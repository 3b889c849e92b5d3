/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The allocator: contiguous runs near the goal, every block handed out once, frees come back
 * only after the transaction that freed them is committed, ENOSPC when full, and the counts
 * survive a remount. */
#include "cfs_test.h"

#include <inttypes.h>

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

/* A refusal for space while frees wait for their commit: cfs_alloc_retry commits them and
 * says to try again; with nothing waiting, or for another error, it does not. */
Test(alloc, a_refusal_while_frees_wait_commits_them_for_one_more_try)
{
	struct cfs_fs *fs = fs_fresh(1, 32);
	pthread_mutex_lock(&fs->lock);
	uint64_t p, first = 0;
	uint32_t n, first_n = 0;
	while (cfs_alloc(fs, 0, 4096, &p, &n) == 0) {
		if (!first_n)
			first = p, first_n = n;
		if (fs->txn.n > fs->txn.limit / 2)
			cr_assert_eq(cfs_journal_commit(fs), 0);
	}
	cr_assert_eq(cfs_free(fs, first, first_n), 0, "free %llu+%u", (unsigned long long)first, first_n);
	cr_assert_eq(cfs_alloc(fs, 0, first_n, &p, &n), -ENOSPC, "freed, not yet committed");
	pthread_mutex_unlock(&fs->lock);
	cr_assert_not(cfs_alloc_retry(fs, -EIO));
	cr_assert(cfs_alloc_retry(fs, -ENOSPC));
	cr_assert_not(cfs_alloc_retry(fs, -ENOSPC), "nothing waits any more");
	pthread_mutex_lock(&fs->lock);
	cr_assert_eq(cfs_alloc(fs, 0, first_n, &p, &n), 0);
	cr_assert_eq(n, first_n);
	pthread_mutex_unlock(&fs->lock);
	fs_done(fs);
}

/* Runs of bits are set and measured a byte at a time where they can be: the same as bit by
 * bit, at every start and length around byte boundaries. */
Test(alloc, bit_runs_match_a_bit_by_bit_reference)
{
	enum { BITS = 200 };
	uint8_t bm[BITS / 8], ref[BITS / 8];
	srand(11);
	for (int round = 0; round < 3000; round++) {
		for (size_t i = 0; round % 100 == 0 && i < sizeof bm;) { /* runs of bytes alike */
			size_t len = 1 + (size_t)rand() % 12;
			int v = rand() % 3 == 0 ? rand() : rand() % 2 ? 0xff : 0;
			for (; len-- && i < sizeof bm; i++)
				bm[i] = ref[i] = (uint8_t)v;
		}
		uint32_t bit = (uint32_t)rand() % BITS, n = (uint32_t)rand() % (BITS - bit + 1);
		bool on = rand() % 2;
		cfs_bits_set(bm, bit, n, on);
		for (uint32_t i = bit; i < bit + n; i++)
			cfs_bit_set(ref, i, on);
		cr_assert_arr_eq(bm, ref, sizeof bm, "set %u bits from %u to %d", n, bit, on);
		for (uint32_t from = 0; from < BITS; from++) {
			uint32_t max = (uint32_t)rand() % (BITS - from + 1), want = 0;
			while (want < max && cfs_bit_get(ref, from + want) == on)
				want++;
			cr_assert_eq(cfs_bits_run(bm, from, max, on), want, "run of %d from %u, at most %u",
				     on, from, max);
		}
	}
}

/* A run stops short of the blocks the running transaction freed, and a search that starts
 * in them goes past them. */
Test(alloc, runs_stop_at_blocks_freed_by_the_running_transaction)
{
	struct cfs_fs *fs = fs_fresh(1, 64);
	pthread_mutex_lock(&fs->lock);
	uint64_t a, b;
	uint32_t na, nb;
	cr_assert_eq(cfs_alloc_run(fs, 300, &a), 0);
	cr_assert_eq(cfs_journal_commit(fs), 0);
	cr_assert_eq(cfs_free(fs, a, 100), 0);
	cr_assert_eq(cfs_journal_commit(fs), 0); /* [a, a+100) free and usable */
	cr_assert_eq(cfs_free(fs, a + 100, 100), 0); /* [a+100, a+200) free, not yet usable */
	cr_assert_eq(cfs_alloc(fs, a, 150, &b, &nb), 0);
	cr_assert_eq(b, a);
	cr_assert_eq(nb, 100, "the run went into blocks freed by the running transaction");
	cr_assert_eq(cfs_alloc(fs, a + 120, 10, &b, &nb), 0);
	cr_assert(b >= a + 200 || b + nb <= a + 100, "a block freed in the running transaction was "
		  "handed out: %llu+%u", (unsigned long long)b, nb);
	cr_assert_eq(cfs_journal_commit(fs), 0);
	cr_assert_eq(cfs_alloc(fs, a + 100, 100, &b, &na), 0);
	cr_assert_eq(b, a + 100, "after the commit they are there again");
	pthread_mutex_unlock(&fs->lock);
	fs_done(fs);
}

static bool in_transaction(const struct cfs_fs *fs, uint64_t blkno)
{
	for (uint32_t i = 0; i < fs->txn.n; i++)
		if (fs->txn.bufs[i]->blkno == blkno)
			return true;
	return false;
}

/* A free of many blocks forgets the cached blocks inside it with one walk of the cache, and
 * only those. */
Test(alloc, a_long_free_forgets_the_cached_blocks_inside_it_and_no_other)
{
	struct cfs_fs *fs = fs_fresh(1, 256);
	pthread_mutex_lock(&fs->lock);
	uint64_t run, other;
	cr_assert_eq(cfs_alloc_run(fs, 10000, &run), 0);
	cr_assert_eq(cfs_alloc_run(fs, 1, &other), 0);
	uint64_t inside[] = {run, run + 4321, run + 9999}, outside[] = {run + 10000, other};
	struct cfs_buf *b;
	for (size_t i = 0; i < 3; i++)
		cr_assert_eq(cfs_bnew(fs, inside[i], CFS_B_EXTENTS, 1, &b), 0);
	for (size_t i = 0; i < 2; i++)
		if (!in_transaction(fs, outside[i]))
			cr_assert_eq(cfs_bnew(fs, outside[i], CFS_B_EXTENTS, 1, &b), 0);
	cr_assert_eq(cfs_free(fs, run, 10000), 0);
	for (size_t i = 0; i < 3; i++)
		cr_assert_not(in_transaction(fs, inside[i]), "block %llu was freed but kept",
			      (unsigned long long)inside[i]);
	for (size_t i = 0; i < 2; i++)
		cr_assert(in_transaction(fs, outside[i]), "block %llu was not freed but forgotten",
			  (unsigned long long)outside[i]);
	pthread_mutex_unlock(&fs->lock);
	fs_done(fs);
}

/* fsck's bitmap covers the whole volume: past 2^32 blocks (16 TiB) a bit is its own, not the
 * one 2^32 below it. */
Test(alloc, bits_past_2_to_the_32_are_their_own)
{
	uint64_t high = 1ull << 32;
	uint8_t *bm = calloc((high + 1024) / 8, 1); /* 512 MiB, mapped as it is touched */
	cr_assert_not_null(bm);
	cfs_bit_set(bm, high + 7, true);
	cr_assert(cfs_bit_get(bm, high + 7));
	cr_assert_not(cfs_bit_get(bm, 7), "bit 2^32 + 7 landed on bit 7");
	cfs_bits_set(bm, high + 64, 128, true);
	cr_assert_eq(cfs_bits_run(bm, high + 64, 500, true), 128);
	cr_assert_eq(cfs_bits_run(bm, 64, 500, false), 500, "the run landed 2^32 below");
	free(bm);
}

/* Data of 64 KiB or more starts where volume block and file block agree modulo 64 KiB (a
 * database's blocks never straddle one), unless it continues the file at its goal; smaller
 * requests and metadata go anywhere. */
Test(alloc, file_data_is_placed_as_its_file_offsets)
{
	struct cfs_fs *fs = fs_fresh(1, 64);
	pthread_mutex_lock(&fs->lock);
	uint32_t align = CFS_DATA_ALIGN_BYTES / fs->bs, got;
	uint64_t one, p, q;
	cr_assert_eq(cfs_alloc(fs, 0, 1, &one, &got), 0); /* so that the next free one is not placed */
	cr_assert_eq(cfs_alloc_data(fs, 0, 0, 2 * align, &p, &got), 0);
	cr_assert_eq(p % align, 0);
	cr_assert_eq(cfs_alloc_data(fs, p + got, 7, 2 * align, &q, &got), 0);
	cr_assert_eq(q, p + 2 * align, "continuing the file at its goal wins over placement");
	for (uint64_t lblk = 1; lblk < 3 * align; lblk += align / 2 + 1) {
		cr_assert_eq(cfs_alloc_data(fs, 0, lblk, 2 * align, &p, &got), 0);
		cr_assert_eq(p % align, lblk % align, "file block %llu at volume block %llu",
			     (unsigned long long)lblk, (unsigned long long)p);
	}
	cr_assert_eq(cfs_alloc_peek(fs, 0, &q), 0);
	cr_assert_eq(cfs_alloc_data(fs, 0, 3, align - 1, &p, &got), 0);
	cr_assert_eq(p, q, "a request under 64 KiB takes the first free block");
	pthread_mutex_unlock(&fs->lock);
	fs_done(fs);
}

/* New inodes go past the spans of the root and the orphan directories (whose glocks other
 * nodes then never take for a file of ours): into another group while one has room, and
 * there only when nothing else is left (cfs_alloc_peek). */
Test(alloc, new_inodes_stay_out_of_the_root_and_orphan_spans_while_there_is_room)
{
	struct cfs_fs *fs = fs_fresh(1, 256);
	pthread_mutex_lock(&fs->lock);
	cr_assert_geq(fs->sb.nags, 2);
	uint64_t last = fs->sb.root_ino;
	for (uint32_t s = 0; s < fs->sb.nslots; s++)
		last = fs->sb.orphan_dir[s] > last ? fs->sb.orphan_dir[s] : last;
	uint64_t floor = (last | (CFS_IGLOCK_SPAN - 1)) + 1, blk;
	cr_assert(cfs_system_span(fs, fs->sb.root_ino) && cfs_system_span(fs, floor - 1));
	cr_assert(!cfs_system_span(fs, floor));
	cr_assert_eq(cfs_alloc_inode(fs, fs->sb.root_ino, &blk), 0);
	cr_assert_eq(blk, floor, "near the root, yet past its span: %" PRIu64, blk);
	/* Group 0 full from the floor on; the blocks before it left free. */
	const struct cfs_ag *g0 = &fs->ags[0];
	for (uint64_t b = floor; b < g0->start + g0->nblocks; b++) {
		uint32_t got;
		if (cfs_block_in_use(fs, b, 0))
			continue;
		cr_assert_eq(cfs_alloc(fs, b, 4096, &blk, &got), 0);
		cr_assert_eq(blk, b);
		b += got - 1;
		if (fs->txn.n > fs->txn.limit / 2)
			cr_assert_eq(cfs_journal_commit(fs), 0);
	}
	cr_assert(!cfs_block_in_use(fs, floor - 1, 0), "room in the orphan directories' span");
	cr_assert_eq(cfs_alloc_inode(fs, floor, &blk), 0);
	cr_assert_geq(blk, fs->ags[1].start, "another group's room first: %" PRIu64, blk);
	cr_assert_eq(cfs_alloc_peek(fs, floor, &blk), 0, "group 0's last room, when only it");
	cr_assert_lt(blk, floor);
	pthread_mutex_unlock(&fs->lock);
	fs_done(fs);
}
