/* SPDX-License-Identifier: GPL-2.0-or-later */
/* File data against a model: random writes of every alignment, from buffers on a page
 * boundary (cfsd's WRITE data, written to the volume as it is) and off one (copied through
 * an aligned buffer), into holes, unwritten and written blocks; read back after a remount
 * into buffers of both kinds.  And what a write that allocates and asks for durability
 * (O_DIRECT, O_DSYNC, O_SYNC) commits before it returns, through a crash right after it. */
#include "cfs_test.h"

#define FILE_BYTES (1u << 20)

static uint8_t model[FILE_BYTES];

/* A random range: a third of them block-aligned (written to the volume as they are, also
 * into new blocks), a third sector-aligned (as they are into written blocks), the rest
 * anywhere. */
static void random_range(uint64_t *off, uint64_t *len)
{
	uint64_t align = (uint64_t[]){4096, 512, 1}[rand() % 3];
	*len = 1 + (uint64_t)rand() % (128 * 1024);
	*len = (*len + align - 1) / align * align;
	*off = (uint64_t)rand() % (FILE_BYTES - *len) / align * align;
}

static void read_back_equal(struct cfs_fs *fs, uint64_t ino, uint8_t *page_buf)
{
	for (unsigned shift = 0; shift < 2; shift++) { /* into a page boundary, then off it */
		uint8_t *dst = page_buf + shift * 8;
		cr_assert_eq(cfs_read(fs, ino, dst, FILE_BYTES, 0), FILE_BYTES);
		for (uint64_t i = 0; i < FILE_BYTES; i++)
			cr_assert_eq(dst[i], model[i], "byte %llu (read into +%u): %u, model %u",
				     (unsigned long long)i, shift * 8, dst[i], model[i]);
	}
}

Test(file, writes_from_aligned_and_unaligned_buffers_read_back_as_written)
{
	struct cfs_fs *fs = fs_fresh(2, 64);
	struct stat st;
	cr_assert_eq(cfs_mknod(fs, CFS_ROOT, "f", S_IFREG | 0644, 0, &root_cred, &st), 0);
	cr_assert_eq(cfs_open(fs, st.st_ino, O_RDWR), 0);
	uint8_t *page_buf; /* the first half is written from, the second read into */
	cr_assert_eq(posix_memalign((void **)&page_buf, 4096, FILE_BYTES + 4096), 0);
	srand(11);
	uint64_t fallocated = 0;
	for (int step = 0; step < 300; step++) {
		uint64_t off, len;
		random_range(&off, &len);
		if (step % 40 == 0) { /* unwritten blocks to write into */
			cr_assert_eq(cfs_fallocate(fs, st.st_ino, 0, off, len, NULL), 0);
			fallocated += len;
			continue;
		}
		uint8_t *src = page_buf + (rand() % 2 ? 0 : 8 * (1 + rand() % 8));
		for (uint64_t i = 0; i < len; i++)
			src[i] = (uint8_t)rand();
		unsigned flags = rand() % 2 ? CFS_W_DIRECT : 0;
		cr_assert_eq(cfs_write(fs, st.st_ino, src, len, off, flags, &root_cred), (int64_t)len,
			     "write of %llu bytes at %llu", (unsigned long long)len,
			     (unsigned long long)off);
		memcpy(model + off, src, len);
		uint8_t *back = page_buf + FILE_BYTES / 2; /* cfsd keeps no data: from the volume */
		cr_assert_eq(cfs_read(fs, st.st_ino, back, len, off), (int64_t)len);
		cr_assert_eq(memcmp(back, model + off, len), 0, "step %d: %llu bytes at %llu differ",
			     step, (unsigned long long)len, (unsigned long long)off);
	}
	cr_assert_gt(fallocated, 0);
	struct stat size = {.st_size = FILE_BYTES};
	cr_assert_eq(cfs_setattr(fs, st.st_ino, &size, CFS_SET_SIZE, &root_cred, &size), 0);
	read_back_equal(fs, st.st_ino, page_buf);
	cr_assert_eq(cfs_release(fs, st.st_ino), 0);
	cr_assert_eq(cfs_unmount(fs), 0);
	fs = fs_mount(); /* what is on the volume, not in any cache */
	cr_assert_eq(cfs_open(fs, st.st_ino, O_RDONLY), 0);
	read_back_equal(fs, st.st_ino, page_buf);
	cr_assert_eq(cfs_release(fs, st.st_ino), 0);
	free(page_buf);
	fs_done_fsck_clean(fs);
}

static uint8_t block[4096] __attribute__((aligned(4096)));

/* A file of a block, open, committed; its mtime in *mtime. */
static uint64_t written_file(struct cfs_fs *fs, const char *name, struct timespec *mtime)
{
	struct stat st;
	cr_assert_eq(cfs_mknod(fs, CFS_ROOT, name, S_IFREG | 0644, 0, &root_cred, &st), 0);
	cr_assert_eq(cfs_open(fs, st.st_ino, O_RDWR), 0);
	cr_assert_eq(cfs_write(fs, st.st_ino, block, sizeof block, 0, 0, &root_cred), 4096);
	cr_assert_eq(cfs_sync(fs), 0);
	cr_assert_eq(cfs_getattr(fs, st.st_ino, &st), 0);
	*mtime = st.st_mtim;
	return st.st_ino;
}

static bool later(struct timespec a, struct timespec b)
{
	return a.tv_sec > b.tv_sec || (a.tv_sec == b.tv_sec && a.tv_nsec > b.tv_nsec);
}

Test(file, an_overwrites_times_go_with_the_next_commit_also_once_the_inode_is_evicted)
{
	struct cfs_fs *fs = fs_fresh(1, 64);
	struct timespec kept_before, evicted_before;
	uint64_t kept = written_file(fs, "kept", &kept_before);
	uint64_t evicted = written_file(fs, "evicted", &evicted_before);
	struct timespec tick = {0, 2000000};
	nanosleep(&tick, NULL);
	for (unsigned i = 0; i < 2; i++) /* overwrites: only the times change */
		cr_assert_eq(cfs_write(fs, i ? evicted : kept, block, sizeof block, 0, 0, &root_cred), 4096);
	pthread_mutex_lock(&fs->lock);
	cr_assert_eq(fs->ntimes, 2, "both inodes wait for the commit (%zu)", fs->ntimes);
	pthread_mutex_unlock(&fs->lock);
	cr_assert_eq(cfs_release(fs, evicted), 0);
	cfs_forget(fs, evicted, 1); /* out of memory: its times are written on the way */
	pthread_mutex_lock(&fs->lock);
	cr_assert_eq(fs->ntimes, 1, "the evicted inode left the list (%zu)", fs->ntimes);
	pthread_mutex_unlock(&fs->lock);
	cr_assert_eq(cfs_sync(fs), 0);
	cr_assert_eq(fs->ntimes, 0);
	fs_crash(fs);
	fs = fs_mount(); /* replays the journal */
	struct stat st;
	cr_assert_eq(cfs_getattr(fs, kept, &st), 0);
	cr_assert(later(st.st_mtim, kept_before), "the kept inode's new mtime was committed");
	cr_assert_eq(cfs_getattr(fs, evicted, &st), 0);
	cr_assert(later(st.st_mtim, evicted_before), "the evicted inode's new mtime was committed");
	fs_done_fsck_clean(fs);
}

/* A write that allocates and asks for durability (O_DIRECT, O_DSYNC, O_SYNC) commits the map
 * and size before it returns: a crash right after loses none of it. */
Test(file, an_allocating_direct_or_sync_append_survives_a_crash_right_after_it)
{
	static const unsigned modes[] = {CFS_W_DIRECT, CFS_W_DSYNC, CFS_W_SYNC, CFS_W_DIRECT | CFS_W_DSYNC};
	enum { APPENDS = 3, NMODES = sizeof modes / sizeof modes[0] };
	struct cfs_fs *fs = fs_fresh(2, 64);
	uint64_t ino[NMODES];
	for (unsigned m = 0; m < NMODES; m++) {
		char name[16];
		snprintf(name, sizeof name, "f%u", m);
		struct stat st;
		cr_assert_eq(cfs_mknod(fs, CFS_ROOT, name, S_IFREG | 0644, 0, &root_cred, &st), 0);
		ino[m] = st.st_ino;
		cr_assert_eq(cfs_open(fs, ino[m], O_RDWR), 0);
	}
	cr_assert_eq(cfs_sync(fs), 0); /* the empty files are there; their appends follow */
	for (unsigned b = 0; b < APPENDS; b++)
		for (unsigned m = 0; m < NMODES; m++) {
			memset(block, 'a' + (int)(m * APPENDS + b), sizeof block);
			cr_assert_eq(cfs_write(fs, ino[m], block, sizeof block, b * sizeof block, modes[m],
					       &root_cred), 4096);
		}
	fs_crash(fs);
	fs = fs_mount(); /* replays the journal */
	for (unsigned m = 0; m < NMODES; m++) {
		struct stat st;
		cr_assert_eq(cfs_getattr(fs, ino[m], &st), 0);
		cr_assert_eq(st.st_size, APPENDS * 4096, "mode %#x: size %lld after the crash", modes[m],
			     (long long)st.st_size);
		cr_assert_eq(cfs_open(fs, ino[m], O_RDONLY), 0);
		for (unsigned b = 0; b < APPENDS; b++) {
			cr_assert_eq(cfs_read(fs, ino[m], block, sizeof block, b * sizeof block), 4096);
			for (size_t i = 0; i < sizeof block; i++)
				cr_assert_eq(block[i], 'a' + (int)(m * APPENDS + b), "mode %#x: block %u byte %zu",
					     modes[m], b, i);
		}
	}
	fs_done_fsck_clean(fs);
}

static uint64_t flushes(struct cfs_fs *fs)
{
	struct cfs_status st;
	cfs_status(fs, &st);
	return st.stats.flushes;
}

/* An O_DSYNC or O_SYNC append flushes the LUNs once: its commit's flush carries its data
 * too.  An overwrite, with nothing to commit, flushes by itself. */
Test(file, a_sync_append_flushes_once_with_its_commit)
{
	struct cfs_fs *fs = fs_fresh(2, 64);
	struct stat st;
	cr_assert_eq(cfs_mknod(fs, CFS_ROOT, "log", S_IFREG | 0644, 0, &root_cred, &st), 0);
	cr_assert_eq(cfs_open(fs, st.st_ino, O_RDWR), 0);
	cr_assert_eq(cfs_sync(fs), 0);
	for (unsigned b = 0; b < 6; b++) {
		unsigned mode = b % 2 ? CFS_W_DSYNC : CFS_W_SYNC | CFS_W_DIRECT;
		uint64_t commits = fs->stats.commits, before = flushes(fs);
		memset(block, 'a' + (int)b, sizeof block);
		cr_assert_eq(cfs_write(fs, st.st_ino, block, sizeof block, b * sizeof block, mode,
				       &root_cred), 4096);
		cr_assert_eq(fs->stats.commits, commits + 1, "append %u committed", b);
		cr_assert_eq(flushes(fs), before + 1, "append %u (mode %#x): %llu flushes", b, mode,
			     (unsigned long long)(flushes(fs) - before));
	}
	uint64_t before = flushes(fs);
	cr_assert_eq(cfs_write(fs, st.st_ino, block, sizeof block, 0, CFS_W_DSYNC, &root_cred), 4096);
	cr_assert_geq(flushes(fs), before + 1, "an O_DSYNC overwrite flushed");
	fs_done_fsck_clean(fs);
}

/* O_APPEND as cfsd does it without a write-back cache: at the end as it is, not where the
 * caller thought it was.  Four threads append records to one file at once: the records tile
 * the file, each whole.  Records of odd sizes (unaligned, some crossing blocks, some
 * allocating), and of 512 bytes (sector-aligned: inside a written block they would go under
 * the shared I/O lock of an overwrite). */
#define APPENDS 200

struct appender {
	struct cfs_fs *fs;
	uint64_t ino;
	unsigned id;
	size_t fixed; /* every record this long, or of odd sizes if 0 */
	int64_t n[APPENDS];
	uint64_t at[APPENDS];
};

static size_t record_len(const struct appender *a, unsigned i)
{
	return a->fixed ? a->fixed : 100 + (a->id * 977 + i * 131) % 2900;
}

static uint8_t record_byte(const struct appender *a, unsigned i)
{
	return (uint8_t)((a->id * APPENDS + i) % 251 + 1);
}

static void *append_records(void *arg)
{
	struct appender *a = arg;
	uint8_t rec[3000];
	for (unsigned i = 0; i < APPENDS; i++) {
		memset(rec, record_byte(a, i), record_len(a, i));
		a->n[i] = cfs_append(a->fs, a->ino, rec, record_len(a, i), 0, &root_cred, &a->at[i]);
	}
	return NULL;
}

static int by_at(const void *x, const void *y)
{
	uint64_t a = ((const uint64_t *)x)[0], b = ((const uint64_t *)y)[0];
	return a < b ? -1 : a > b;
}

/* Four appenders of records `fixed` long (0: odd sizes) after `start` bytes. */
static void appenders_tile_the_file(size_t fixed, uint64_t start)
{
	struct cfs_fs *fs = fs_fresh(2, 64);
	struct stat st;
	cr_assert_eq(cfs_mknod(fs, CFS_ROOT, "log", S_IFREG | 0644, 0, &root_cred, &st), 0);
	cr_assert_eq(cfs_open(fs, st.st_ino, O_WRONLY | O_APPEND), 0);
	static uint8_t head[4096];
	cr_assert_eq(cfs_write(fs, st.st_ino, head, start, 0, 0, &root_cred), (int64_t)start);
	static struct appender a[4];
	pthread_t t[4];
	for (unsigned k = 0; k < 4; k++) {
		a[k] = (struct appender){.fs = fs, .ino = st.st_ino, .id = k, .fixed = fixed};
		cr_assert_eq(pthread_create(&t[k], NULL, append_records, &a[k]), 0);
	}
	static uint64_t span[4 * APPENDS][2]; /* where each record went, and its length */
	for (unsigned k = 0; k < 4; k++) {
		pthread_join(t[k], NULL);
		for (unsigned i = 0; i < APPENDS; i++) {
			cr_assert_eq(a[k].n[i], (int64_t)record_len(&a[k], i),
				     "thread %u append %u: %lld", k, i, (long long)a[k].n[i]);
			span[k * APPENDS + i][0] = a[k].at[i];
			span[k * APPENDS + i][1] = record_len(&a[k], i);
		}
	}
	qsort(span, 4 * APPENDS, sizeof span[0], by_at);
	uint64_t end = start;
	for (unsigned r = 0; r < 4 * APPENDS; r++) {
		cr_assert_eq(span[r][0], end, "a record at %llu, the one before ended at %llu",
			     (unsigned long long)span[r][0], (unsigned long long)end);
		end += span[r][1];
	}
	cr_assert_eq(cfs_getattr(fs, st.st_ino, &st), 0);
	cr_assert_eq((uint64_t)st.st_size, end);
	uint8_t *back = malloc(end);
	cr_assert_eq(cfs_read(fs, st.st_ino, back, end, 0), (int64_t)end);
	for (unsigned k = 0; k < 4; k++)
		for (unsigned i = 0; i < APPENDS; i++)
			for (size_t j = 0; j < record_len(&a[k], i); j++)
				cr_assert_eq(back[a[k].at[i] + j], record_byte(&a[k], i),
					     "thread %u record %u at %llu: byte %zu", k, i,
					     (unsigned long long)a[k].at[i], j);
	free(back);
	cfs_release(fs, st.st_ino);
	fs_done_fsck_clean(fs);
}

Test(file, an_append_lands_at_the_end_as_it_is)
{
	struct cfs_fs *fs = fs_fresh(2, 64);
	struct stat st;
	cr_assert_eq(cfs_mknod(fs, CFS_ROOT, "log", S_IFREG | 0644, 0, &root_cred, &st), 0);
	cr_assert_eq(cfs_open(fs, st.st_ino, O_WRONLY | O_APPEND), 0);
	uint64_t at;
	cr_assert_eq(cfs_write(fs, st.st_ino, "head", 4, 0, 0, &root_cred), 4);
	cr_assert_eq(cfs_append(fs, st.st_ino, "x", 1, 0, &root_cred, &at), 1);
	cr_assert_eq(at, 4, "the append went to %llu, not the end (4)", (unsigned long long)at);
	cfs_release(fs, st.st_ino);
	fs_done_fsck_clean(fs);
}

Test(file, appends_of_odd_sizes_at_once_land_one_after_another)
{
	appenders_tile_the_file(0, 5);
}

Test(file, sector_aligned_appends_at_once_land_one_after_another)
{
	appenders_tile_the_file(512, 512);
}
