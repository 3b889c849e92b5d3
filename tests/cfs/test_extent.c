/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Extent maps against a reference model: a byte per file block saying hole, unwritten or
 * written, through random fills, writes (unwritten -> written) and punches; the map must stay
 * sorted, non-overlapping, merged where it can be, and say what the model says. */
#include "cfs_test.h"

#include <pthread.h>
#include <sched.h>
#include <sys/statvfs.h>

#define NBLK 4000

static char model[NBLK]; /* 0 hole, 'u' unwritten, 'w' written */

static void compare(const struct cfs_inode *ip)
{
	for (uint32_t i = 0; i + 1 < ip->next; i++) {
		const struct cfs_dextent *a = &ip->ext[i], *b = &ip->ext[i + 1];
		cr_assert_leq(a->lblk + a->len, b->lblk, "extents %u and %u overlap or are unsorted", i, i + 1);
		cr_assert(!(a->lblk + a->len == b->lblk && a->pblk + a->len == b->pblk && a->flags == b->flags),
			  "extents %u and %u should have been merged", i, i + 1);
	}
	for (uint64_t b = 0; b < NBLK; b++) {
		bool unwritten = false;
		uint64_t p = cfs_ext_bmap(ip, b, &unwritten);
		char got = !p ? 0 : unwritten ? 'u' : 'w';
		cr_assert_eq(got, model[b], "block %llu: map says %c, model %c", (unsigned long long)b,
			     got ? got : '-', model[b] ? model[b] : '-');
	}
}

/* A fill that runs out of space keeps nothing it allocated: the holes it filled are holes
 * again, what was mapped before is as it was, and the free count is back where it started
 * (the blocks once the frees are committed). */
Test(extent, a_fill_that_runs_out_of_space_gives_back_what_it_took)
{
	struct cfs_fs *fs = fs_fresh(1, 32);
	pthread_mutex_lock(&fs->lock);
	struct cfs_inode *ip = fs_new_inode(fs, S_IFREG | 0644);
	memset(model, 0, sizeof model);
	for (uint64_t b = 0; b < NBLK; b += 200) { /* holes between mapped pieces */
		cr_assert_eq(cfs_ext_fill(fs, ip, b, 50), 0);
		memset(model + b, 'u', 50);
	}
	cr_assert_eq(cfs_journal_commit(fs), 0);
	uint64_t free0 = cfs_free_blocks(fs), nblocks0 = ip->d.nblocks;
	cr_assert_eq(cfs_ext_fill(fs, ip, 0, free0 * 2), -ENOSPC);
	compare(ip);
	cr_assert_eq(ip->d.nblocks, nblocks0);
	cr_assert_eq(cfs_free_blocks(fs), free0);
	cr_assert_eq(cfs_journal_commit(fs), 0);
	cr_assert_eq(cfs_ext_fill(fs, ip, NBLK, free0 - CFS_META_RESERVE - 8), 0,
		     "after the commit the space is there again");
	pthread_mutex_unlock(&fs->lock);
	fs_done(fs);
}

Test(extent, random_operations_match_the_model)
{
	struct cfs_fs *fs = fs_fresh(1, 64);
	pthread_mutex_lock(&fs->lock);
	struct cfs_inode *ip = fs_new_inode(fs, S_IFREG | 0644);
	srand(7);
	uint64_t free0 = cfs_free_blocks(fs);
	for (int step = 0; step < 400; step++) {
		uint64_t a = (uint64_t)rand() % NBLK, n = 1 + (uint64_t)rand() % 300;
		if (a + n > NBLK)
			n = NBLK - a;
		switch (rand() % 3) {
		case 0:
			cr_assert_eq(cfs_ext_fill(fs, ip, a, n), 0);
			for (uint64_t b = a; b < a + n; b++)
				model[b] = model[b] ? model[b] : 'u';
			break;
		case 1: /* write: only where allocated */
			cr_assert_eq(cfs_ext_fill(fs, ip, a, n), 0);
			cr_assert_eq(cfs_ext_mark_written(ip, a, n), 0);
			memset(model + a, 'w', n);
			break;
		default:
			cr_assert_eq(cfs_ext_punch(fs, ip, a, n), 0);
			memset(model + a, 0, n);
		}
		compare(ip);
		if (step % 50 == 49) { /* the map survives a trip through its blocks */
			cr_assert_eq(cfs_iwrite(fs, ip), 0);
			cr_assert_eq(cfs_journal_commit(fs), 0);
		}
	}
	uint64_t used = 0;
	for (uint64_t b = 0; b < NBLK; b++)
		used += model[b] != 0;
	cr_assert_eq(ip->d.nblocks - (ip->d.ext_next ? 1 : 0) <= used + 8, true);
	cr_assert_eq(cfs_ext_punch(fs, ip, 0, UINT64_MAX), 0);
	cr_assert_eq(ip->next, 0);
	cr_assert_eq(cfs_iwrite(fs, ip), 0);
	cr_assert_eq(cfs_journal_commit(fs), 0);
	cr_assert_eq(cfs_free_blocks(fs), free0, "every block came back");
	ip->nlookup = 1; /* kept for unmount to free */
	pthread_mutex_unlock(&fs->lock);
	fs_done(fs);
}

Test(extent, a_long_map_goes_to_overflow_blocks_and_back)
{
	struct cfs_fs *fs = fs_fresh(1, 64);
	pthread_mutex_lock(&fs->lock);
	struct cfs_inode *ip = fs_new_inode(fs, S_IFREG | 0644);
	/* Every other block: no two extents can merge. */
	for (uint64_t b = 0; b < 1000; b += 2) {
		cr_assert_eq(cfs_ext_fill(fs, ip, b, 1), 0);
		cfs_ext_mark_written(ip, b, 1);
		uint64_t hole;
		uint32_t got;
		cr_assert_eq(cfs_alloc(fs, 0, 1, &hole, &got), 0); /* keep the next block busy */
	}
	cr_assert_eq(ip->next, 500);
	cr_assert_eq(cfs_iwrite(fs, ip), 0);
	cr_assert_neq(ip->d.ext_next, 0, "500 extents need overflow blocks");
	uint64_t ino = ip->ino;
	struct cfs_dextent copy[500];
	memcpy(copy, ip->ext, sizeof copy);
	cr_assert_eq(cfs_journal_commit(fs), 0);
	cfs_iforget(fs, ip);
	cr_assert_eq(cfs_iget(fs, ino, &ip), 0);
	cr_assert_eq(ip->next, 500);
	cr_assert_arr_eq(ip->ext, copy, sizeof copy);
	ip->nlookup = 1;
	pthread_mutex_unlock(&fs->lock);
	fs_done(fs);
}

/* A write-out of kept data (writebehind.c) marks blocks written inside any commit, holding no
 * group: the map must keep its number of overflow blocks.  Two neighbours it makes mergeable
 * stay apart until an operation joins them; a split the overflow blocks have no room for is
 * refused, the map unchanged. */
Test(extent, a_write_outs_mark_keeps_the_number_of_overflow_blocks)
{
	struct cfs_fs *fs = fs_fresh(1, 64);
	pthread_mutex_lock(&fs->lock);
	struct cfs_inode *ip = fs_new_inode(fs, S_IFREG | 0644);
	uint32_t full = CFS_INODE_EXTENTS(fs->bs) + CFS_EXTB_EXTENTS(fs->bs); /* one block, full */
	uint64_t b = 0;
	for (; ip->next < full - 1; b += 2) { /* every other block: none merge */
		cr_assert_eq(cfs_ext_fill(fs, ip, b, 1), 0);
		cr_assert_eq(cfs_ext_mark_written(ip, b, 1), 0);
	}
	/* Unwritten, right after the last written one on the volume too. */
	cr_assert_eq(cfs_ext_fill(fs, ip, b - 1, 1), 0);
	bool unwritten;
	cr_assert_eq(cfs_ext_bmap(ip, b - 1, &unwritten), cfs_ext_bmap(ip, b - 2, &unwritten) + 1,
		     "the fill went next to its neighbour (the allocator's goal)");
	cr_assert_eq(ip->next, full);
	cr_assert_eq(cfs_ext_fill(fs, ip, b + 1, 4), 0); /* after a hole: a second block */
	cr_assert_eq(ip->next, full + 1);

	cr_assert_eq(cfs_ext_mark_kept_written(fs, ip, b - 1, 1), 0);
	cr_assert_eq(ip->next, full + 1, "not joined to the written block before it");
	cr_assert_eq(cfs_ext_bmap(ip, b - 1, &unwritten) != 0 && !unwritten, true);
	cr_assert_eq(cfs_ext_mark_kept_written(fs, ip, b + 2, 2), 0,
		     "two splits: the second overflow block has room");
	cr_assert_eq(ip->next, full + 3);
	cfs_ext_join(ip);
	cr_assert_eq(ip->next, full + 2, "an operation joins them");

	/* Back to one full overflow block: a split would need a second. */
	cr_assert_eq(cfs_ext_punch(fs, ip, b + 1, 4), 0);
	cr_assert_eq(cfs_ext_fill(fs, ip, b + 1, 4), 0);
	cr_assert_eq(ip->next, full);
	struct cfs_dextent before = ip->ext[full - 1];
	cr_assert_eq(cfs_ext_mark_kept_written(fs, ip, b + 2, 2), -ENOSPC);
	cr_assert_eq(ip->next, full);
	cr_assert_arr_eq(&ip->ext[full - 1], &before, sizeof before, "nothing changed");
	cr_assert_eq(cfs_ext_mark_kept_written(fs, ip, b + 1, 4), 0, "the whole extent: no split");
	cr_assert_eq(ip->next, full);
	pthread_mutex_unlock(&fs->lock);
	fs_done(fs);
}

/* The leak the soak found: the last free block went to data whose map then needed an overflow
 * block; the inode could not be written and the block stayed in use, belonging to nothing. */
Test(extent, a_full_filesystem_still_has_room_for_the_map_of_its_data)
{
	struct cfs_fs *fs = fs_fresh(1, 64);
	struct stat st;
	cr_assert_eq(cfs_mknod(fs, CFS_ROOT, "frag", S_IFREG | 0644, 0, &root_cred, &st), 0);
	uint64_t frag = st.st_ino;
	cr_assert_eq(cfs_open(fs, frag, O_RDWR), 0);
	uint32_t inl = CFS_INODE_EXTENTS(fs->bs);
	for (uint32_t i = 0; i < inl; i++) /* every other block: the inline map is full */
		cr_assert_eq(cfs_fallocate(fs, frag, FALLOC_FL_KEEP_SIZE, 8192ull * i, 4096, NULL), 0);
	fs_fill(fs, 1);
	/* The last block goes to the fragmented file: its map now needs an overflow block. */
	cr_assert_eq(cfs_fallocate(fs, frag, FALLOC_FL_KEEP_SIZE, 8192ull * inl, 4096, NULL), 0);
	cr_assert_eq(cfs_fallocate(fs, frag, FALLOC_FL_KEEP_SIZE, 8192ull * (inl + 1), 4096, NULL),
		     -ENOSPC);
	cr_assert_eq(cfs_release(fs, frag), 0);
	fs_done_fsck_clean(fs);
}

/* The soak's second leak: a write into holes larger than the free space allocated what there
 * was, failed with ENOSPC, and left the inode unwritten: those blocks belonged to nothing. */
Test(extent, a_write_that_runs_out_of_space_maps_what_it_allocated)
{
	struct cfs_fs *fs = fs_fresh(1, 64);
	struct stat st;
	cr_assert_eq(cfs_mknod(fs, CFS_ROOT, "f", S_IFREG | 0644, 0, &root_cred, &st), 0);
	cr_assert_eq(cfs_open(fs, st.st_ino, O_RDWR), 0);
	fs_fill(fs, 10);
	static char data[100 * 4096];
	cr_assert_eq(cfs_write(fs, st.st_ino, data, sizeof data, 0, 0, NULL), -ENOSPC);
	cr_assert_eq(cfs_release(fs, st.st_ino), 0);
	fs_done_fsck_clean(fs);
}

/* A big file's allocation and free commit on the way with fs->lock let go (cfs_op_may_yield):
 * another thread's operations go on meanwhile and see the change half done, here the free
 * count between its values before and after.  Without the let-go they could only see it
 * before or after. */
#define SEEN_MAX 64

struct watcher {
	struct cfs_fs *fs;
	bool looking, stop;
	uint64_t seen[SEEN_MAX]; /* the free counts seen, each once */
	unsigned nseen;
};

static uint64_t free_blocks(struct cfs_fs *fs)
{
	struct statvfs sv;
	cr_assert_eq(cfs_statfs(fs, &sv), 0);
	return sv.f_bfree;
}

static void *watch(void *arg)
{
	struct watcher *w = arg;
	while (!__atomic_load_n(&w->stop, __ATOMIC_ACQUIRE)) {
		uint64_t f = free_blocks(w->fs);
		if (w->nseen < SEEN_MAX && (!w->nseen || w->seen[w->nseen - 1] != f))
			w->seen[w->nseen++] = f;
		__atomic_store_n(&w->looking, true, __ATOMIC_RELEASE);
	}
	return NULL;
}

enum change { FALLOCATE, TRUNCATE, FREE_AT_FORGET };

static void change(struct cfs_fs *fs, uint64_t ino, enum change c, uint64_t bytes)
{
	struct stat st = {.st_size = 0};
	switch (c) {
	case FALLOCATE:
		cr_assert_eq(cfs_fallocate(fs, ino, 0, 0, bytes, NULL), 0);
		break;
	case TRUNCATE:
		cr_assert_eq(cfs_setattr(fs, ino, &st, CFS_SET_SIZE, &root_cred, &st), 0);
		break;
	case FREE_AT_FORGET:
		cr_assert_eq(cfs_unlink(fs, CFS_ROOT, "big"), 0);
		cfs_forget(fs, ino, 1); /* the kernel's lookup: the last reference */
		break;
	}
}

/* Did another thread see the free count strictly between before and after the change?
 * *after: the count after it. */
static bool seen_half_done(struct cfs_fs *fs, uint64_t ino, enum change c, uint64_t bytes,
			   uint64_t *after)
{
	uint64_t before = free_blocks(fs);
	struct watcher w = {.fs = fs};
	pthread_t t;
	cr_assert_eq(pthread_create(&t, NULL, watch, &w), 0);
	while (!__atomic_load_n(&w.looking, __ATOMIC_ACQUIRE))
		sched_yield();
	change(fs, ino, c, bytes);
	__atomic_store_n(&w.stop, true, __ATOMIC_RELEASE);
	pthread_join(t, NULL);
	*after = free_blocks(fs);
	uint64_t lo = before < *after ? before : *after, hi = before < *after ? *after : before;
	for (unsigned i = 0; i < w.nseen; i++)
		if (w.seen[i] > lo && w.seen[i] < hi)
			return true;
	return false;
}

Test(extent, a_big_files_allocation_and_free_let_other_operations_run_between_their_commits,
     .timeout = 120)
{
	/* 128 GiB of sparse LUNs: a 100 GiB file spans ~820 groups, whose headers fill about
	 * four transactions of the largest size (the log holds two of them between
	 * checkpoints, which stay under the lock). */
	struct cfs_fs *fs = fs_fresh(4, 32768);
	struct stat st;
	cr_assert_eq(cfs_mknod(fs, CFS_ROOT, "big", S_IFREG | 0644, 0, &root_cred, &st), 0);
	cr_assert_eq(cfs_open(fs, st.st_ino, O_RDWR), 0);
	uint64_t bytes = 100ull << 30, empty = free_blocks(fs), after;
	cr_assert(seen_half_done(fs, st.st_ino, FALLOCATE, bytes, &after),
		  "fallocate held the filesystem lock throughout");
	cr_assert_leq(after, empty - (bytes >> 12));
	cr_assert(seen_half_done(fs, st.st_ino, TRUNCATE, 0, &after),
		  "truncate held the filesystem lock throughout");
	cr_assert_eq(after, empty);
	cr_assert_eq(cfs_fallocate(fs, st.st_ino, 0, 0, bytes, NULL), 0);
	cr_assert_eq(cfs_release(fs, st.st_ino), 0);
	cr_assert(seen_half_done(fs, st.st_ino, FREE_AT_FORGET, 0, &after),
		  "the free of an unlinked file held the filesystem lock throughout");
	cr_assert_eq(after, empty + 1, "its inode too");
	fs_done_fsck_clean(fs);
}
