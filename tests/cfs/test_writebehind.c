/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Write-behind (cfs/writebehind.c), on a one-node library mount with a bound set as a cluster
 * mount's option would: buffered writes of every alignment, truncates, hole punches, direct
 * writes and SEEK_DATA among them, read back against a model while kept and after every way
 * data leaves (the bound, fsync, a commit, the unmount); and what a crash keeps: all of what
 * was fsync'd, and of the rest whole writes or nothing, never zeros where data was written. */
#include "cfs_test.h"

#include <linux/falloc.h>

#define FILE_BYTES (512u << 10)

static uint8_t model[FILE_BYTES];
static uint64_t model_size;

static void keep_behind(struct cfs_fs *fs, uint64_t bound)
{
	pthread_mutex_lock(&fs->lock);
	fs->wb_limit = bound;
	pthread_mutex_unlock(&fs->lock);
}

static void equal_to_model(struct cfs_fs *fs, uint64_t ino, uint8_t *buf, const char *when)
{
	struct stat st;
	cr_assert_eq(cfs_getattr(fs, ino, &st), 0);
	cr_assert_eq((uint64_t)st.st_size, model_size, "%s: size %lld, model %llu", when,
		     (long long)st.st_size, (unsigned long long)model_size);
	cr_assert_eq(cfs_read(fs, ino, buf, FILE_BYTES, 0), (int64_t)model_size);
	for (uint64_t i = 0; i < model_size; i++)
		cr_assert_eq(buf[i], model[i], "%s: byte %llu is %u, model %u", when,
			     (unsigned long long)i, buf[i], model[i]);
}

static void model_write(uint64_t off, const uint8_t *src, uint64_t len)
{
	memcpy(model + off, src, len);
	if (off + len > model_size)
		model_size = off + len;
}

static void model_truncate(uint64_t size)
{
	if (size < model_size)
		memset(model + size, 0, model_size - size);
	model_size = size;
}

Test(writebehind, kept_writes_read_back_as_written_through_truncates_punches_and_flushes)
{
	struct cfs_fs *fs = fs_fresh(2, 64);
	keep_behind(fs, 96u << 10); /* small: the bound flushes too */
	struct stat st;
	cr_assert_eq(cfs_mknod(fs, CFS_ROOT, "f", S_IFREG | 0644, 0, &root_cred, &st), 0);
	cr_assert_eq(cfs_open(fs, st.st_ino, O_RDWR), 0);
	uint8_t *src, *back;
	cr_assert_eq(posix_memalign((void **)&src, 4096, FILE_BYTES), 0);
	cr_assert_eq(posix_memalign((void **)&back, 4096, FILE_BYTES), 0);
	memset(model, 0, sizeof model);
	model_size = 0;
	srand(7);
	uint64_t kept = fs->stats.behind_writes, direct = 0;
	for (int step = 0; step < 400; step++) {
		uint64_t align = (uint64_t[]){4096, 512, 1}[rand() % 3];
		uint64_t len = 1 + (uint64_t)rand() % (24 * 1024);
		uint64_t off = (uint64_t)rand() % (FILE_BYTES - len - 4096) / align * align;
		int what = rand() % 20;
		if (what == 0) { /* truncate, shorter or longer */
			uint64_t size = (uint64_t)rand() % (FILE_BYTES / 2);
			struct stat sz = {.st_size = (off_t)size};
			cr_assert_eq(cfs_setattr(fs, st.st_ino, &sz, CFS_SET_SIZE, &root_cred, &sz), 0);
			model_truncate(size);
		} else if (what == 1 && off + len <= model_size) { /* punch: reads as zeros */
			cr_assert_eq(cfs_fallocate(fs, st.st_ino, FALLOC_FL_PUNCH_HOLE |
						   FALLOC_FL_KEEP_SIZE, off, len, NULL), 0);
			memset(model + off, 0, len);
		} else if (what == 2) {
			cr_assert_eq(cfs_fsync(fs, st.st_ino), 0);
		} else if (what == 3 && model_size) { /* data kept in unwritten blocks is data */
			uint64_t at = (uint64_t)rand() % model_size;
			int64_t data = cfs_seek_data(fs, st.st_ino, at, false);
			uint64_t first = at;
			while (first < model_size && !model[first])
				first++;
			if (first < model_size)
				cr_assert(data >= 0 && (uint64_t)data <= first, "SEEK_DATA from %llu: "
					  "%lld, written byte at %llu", (unsigned long long)at,
					  (long long)data, (unsigned long long)first);
		} else {
			for (uint64_t i = 0; i < len; i++)
				src[i] = (uint8_t)(1 + rand() % 255);
			/* some direct writes (sector-aligned): what is kept goes first */
			unsigned flags = what == 4 ? CFS_W_DIRECT : 0;
			if (flags) {
				off &= ~511ull;
				len = (len + 511) & ~511ull;
				direct++;
			}
			cr_assert_eq(cfs_write(fs, st.st_ino, src, len, off, flags, &root_cred),
				     (int64_t)len);
			model_write(off, src, len);
		}
		if (step % 10 == 0)
			equal_to_model(fs, st.st_ino, back, "while kept");
	}
	cr_assert_gt(direct, 0);
	cr_assert_gt(fs->stats.behind_writes - kept, 200, "buffered writes were kept behind");
	cr_assert_gt(fs->stats.behind_flushed, 0);
	equal_to_model(fs, st.st_ino, back, "at the end");
	cr_assert_eq(cfs_release(fs, st.st_ino), 0);
	cr_assert_eq(cfs_unmount(fs), 0);
	fs = fs_mount(); /* what the volume has */
	cr_assert_eq(cfs_open(fs, st.st_ino, O_RDONLY), 0);
	equal_to_model(fs, st.st_ino, back, "after a remount");
	cr_assert_eq(cfs_release(fs, st.st_ino), 0);
	free(src);
	free(back);
	fs_done_fsck_clean(fs);
}

/* A crash keeps what fsync acknowledged; of the appends after it, whole ones up to a commit
 * or none: the size never covers blocks whose data did not make it. */
Test(writebehind, a_crash_keeps_what_fsync_acknowledged_and_never_shows_zeros_for_data)
{
	enum { RECORD = 3000, RECORDS = 40 };
	struct cfs_fs *fs = fs_fresh(2, 64);
	keep_behind(fs, 64u << 20);
	struct stat st;
	cr_assert_eq(cfs_mknod(fs, CFS_ROOT, "log", S_IFREG | 0644, 0, &root_cred, &st), 0);
	cr_assert_eq(cfs_open(fs, st.st_ino, O_RDWR), 0);
	static uint8_t rec[RECORD];
	for (unsigned r = 0; r < RECORDS; r++) {
		memset(rec, 'a' + r % 26, RECORD);
		cr_assert_eq(cfs_write(fs, st.st_ino, rec, RECORD, (uint64_t)r * RECORD, 0,
				       &root_cred), RECORD);
		if (r == RECORDS / 2 - 1)
			cr_assert_eq(cfs_fsync(fs, st.st_ino), 0);
	}
	cr_assert_eq(fs->stats.behind_writes, RECORDS);
	fs_crash(fs);
	fs = fs_mount();
	cr_assert_eq(cfs_getattr(fs, st.st_ino, &st), 0);
	uint64_t size = (uint64_t)st.st_size;
	cr_assert(size >= RECORDS / 2 * RECORD && size <= RECORDS * RECORD && size % RECORD == 0,
		  "size %llu: the fsync'd half, then whole records", (unsigned long long)size);
	static uint8_t back[RECORDS * RECORD];
	cr_assert_eq(cfs_open(fs, st.st_ino, O_RDONLY), 0);
	cr_assert_eq(cfs_read(fs, st.st_ino, back, size, 0), (int64_t)size);
	for (uint64_t i = 0; i < size; i++)
		cr_assert_eq(back[i], 'a' + i / RECORD % 26, "byte %llu of %llu",
			     (unsigned long long)i, (unsigned long long)size);
	cr_assert_eq(cfs_release(fs, st.st_ino), 0);
	fs_done_fsck_clean(fs);
}
