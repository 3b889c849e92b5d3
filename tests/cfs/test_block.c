/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Metadata block headers: a sealed block verifies; a flipped bit, a block read from the wrong
 * place, the wrong type or owner are each caught and named. */
#include "cfs_test.h"

static uint8_t blk[4096];

Test(block, sealed_block_verifies)
{
	const char *why = NULL;
	cfs_block_init(blk, sizeof blk, 1234, CFS_B_INODE, 1234);
	memset(blk + 100, 0xab, 50);
	cfs_block_seal(blk, sizeof blk);
	cr_assert_eq(cfs_block_verify(blk, sizeof blk, 1234, CFS_B_INODE, 1234, &why), 0);
	cr_assert_eq(cfs_block_verify(blk, sizeof blk, 1234, CFS_B_INODE, 0, &why), 0, "owner 0: any");
}

Test(block, every_kind_of_damage_is_named)
{
	const char *why = NULL;
	cfs_block_init(blk, sizeof blk, 77, CFS_B_BUCKET, 9);
	cfs_block_seal(blk, sizeof blk);
	cr_assert_eq(cfs_block_verify(blk, sizeof blk, 78, CFS_B_BUCKET, 9, &why), -EIO);
	cr_assert_str_eq(why, "block belongs elsewhere (misdirected write)");
	cr_assert_eq(cfs_block_verify(blk, sizeof blk, 77, CFS_B_INODE, 9, &why), -EIO);
	cr_assert_str_eq(why, "wrong block type");
	cr_assert_eq(cfs_block_verify(blk, sizeof blk, 77, CFS_B_BUCKET, 10, &why), -EIO);
	cr_assert_str_eq(why, "block belongs to another object");
	for (size_t bit = 0; bit < sizeof blk * 8; bit += 997) {
		blk[bit / 8] ^= (uint8_t)(1u << (bit % 8));
		cr_assert_eq(cfs_block_verify(blk, sizeof blk, 77, CFS_B_BUCKET, 9, &why), -EIO,
			     "bit %zu flipped went unnoticed", bit);
		blk[bit / 8] ^= (uint8_t)(1u << (bit % 8));
	}
	memset(blk, 0, sizeof blk);
	cr_assert_eq(cfs_block_verify(blk, sizeof blk, 77, CFS_B_BUCKET, 9, &why), -EIO);
	cr_assert_str_eq(why, "not a CFS metadata block (bad magic)");
}

/* cfs_bread of blkno with fd 2 (the daemon's log) sent to a file: its return; what it logged
 * is left in log (NUL-terminated). */
static int bread_logged(struct cfs_fs *fs, uint64_t blkno, char *log, size_t size)
{
	int fd = open(test_path("stderr"), O_CREAT | O_RDWR | O_TRUNC, 0600), saved = dup(2);
	cr_assert(fd >= 0 && saved >= 0);
	fflush(stderr);
	cr_assert(dup2(fd, 2) == 2);
	struct cfs_buf *b;
	pthread_mutex_lock(&fs->lock);
	int rc = cfs_bread(fs, blkno, CFS_B_AGH, 0, &b);
	pthread_mutex_unlock(&fs->lock);
	fflush(stderr);
	cr_assert(dup2(saved, 2) == 2);
	ssize_t n = pread(fd, log, size - 1, 0);
	log[n > 0 ? n : 0] = '\0';
	close(fd);
	close(saved);
	return rc;
}

Test(block, a_fenced_nodes_failed_reads_are_not_logged_as_damage)
{
	struct cfs_fs *fs = fs_fresh(1, 32);
	char log[1024];
	uint64_t last = fs->sb.total_blocks - 1;
	cr_assert_eq(bread_logged(fs, last, log, sizeof log), -EIO, "an unused block");
	cr_assert(strstr(log, "EIO"), "damage is logged, naming the block: '%s'", log);
	cfs_fence(fs, "a test");
	cr_assert_eq(bread_logged(fs, last - 1, log, sizeof log), -EIO);
	cr_assert_null(strstr(log, "EIO"), "fenced, not damaged: '%s'", log);
	fs_crash(fs); /* nothing reaches the volume: no unmount */
	fs_done(NULL);
}

/* A checkpoint in flight wrote the committed images it copied: a block changed since stays
 * waiting for the next checkpoint, the others leave the list. */
Test(block, a_block_changed_while_its_checkpoint_flew_waits_for_the_next)
{
	struct cfs_fs *fs = fs_fresh(1, 32);
	pthread_mutex_lock(&fs->lock);
	uint64_t blk[2];
	struct cfs_buf *b[2];
	for (int i = 0; i < 2; i++) {
		cr_assert_eq(cfs_alloc_meta(fs, 0, &blk[i]), 0);
		cr_assert_eq(cfs_bnew(fs, blk[i], CFS_B_EXTENTS, 1, &b[i]), 0);
	}
	cr_assert_eq(cfs_journal_commit(fs), 0);
	cr_assert(b[0]->unhome && b[1]->unhome);
	b[1]->data[100] ^= 1; /* the running transaction changes it */
	cfs_bdirty(fs, b[1]);
	for (int i = 0; i < 2; i++)
		cfs_bcache_homed_block(fs, blk[i]);
	cr_assert_not(b[0]->unhome, "a block written in place still waits");
	cr_assert(b[1]->unhome, "a block changed since its image was copied left the list");
	pthread_mutex_unlock(&fs->lock);
	fs_done(fs);
}

/* A one-node mount reads an inode block with the 64 KiB around it and keeps the other inode
 * blocks in use there; a freed inode's block, whose old image is still on the LUNs, is not
 * taken, nor is anything the read finds that is not an inode block. */
Test(block, an_inode_read_brings_the_inodes_in_use_around_it)
{
	struct cfs_fs *fs = fs_fresh(1, 32);
	enum { N = 12, GONE = 4 };
	uint64_t ino[N];
	char name[16];
	for (int i = 0; i < N; i++) {
		snprintf(name, sizeof name, "f%d", i);
		ino[i] = fs_make(fs, CFS_ROOT, name, S_IFREG | 0644);
	}
	cr_assert_eq(cfs_unmount(fs), 0); /* every inode block written in place */
	fs = fs_mount();
	cr_assert_eq(cfs_unlink(fs, CFS_ROOT, "f4"), 0); /* its old image stays there */
	cr_assert_eq(cfs_unmount(fs), 0);
	fs = fs_mount(); /* nothing cached */
	uint64_t per = (64u << 10) / fs->bs, probe = ino[0];
	unsigned around = 0; /* the live inodes that share the probe's window */
	for (int i = 1; i < N; i++)
		around += i != GONE && ino[i] / per == probe / per;
	cr_assert_gt(around, 2, "the files' inodes lie apart: %llu, %llu, %llu...",
		     (unsigned long long)ino[0], (unsigned long long)ino[1],
		     (unsigned long long)ino[2]);
	pthread_mutex_lock(&fs->lock);
	uint64_t before = fs->stats.inodes_read_ahead;
	struct cfs_buf *b;
	cr_assert_eq(cfs_bread(fs, probe, CFS_B_INODE, probe, &b), 0);
	cr_assert_eq(fs->stats.inodes_read_ahead - before, around,
		     "%llu inode blocks taken with the probe's, %u live ones around it",
		     (unsigned long long)(fs->stats.inodes_read_ahead - before), around);
	for (int i = 1; i < N; i++) /* each one around read as the cache has it */
		if (i != GONE && ino[i] / per == probe / per)
			cr_assert_eq(cfs_bread(fs, ino[i], CFS_B_INODE, ino[i], &b), 0);
	cr_assert_eq(fs->stats.inodes_read_ahead - before, around, "a cached one read again");
	pthread_mutex_unlock(&fs->lock);
	fs_done(fs);
}
