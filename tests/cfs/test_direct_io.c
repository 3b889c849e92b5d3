/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Direct I/O whose LUN part the caller submits (cfs/direct_io.c): the pieces, done here with
 * pread and pwrite on the LUNs' descriptors as cfsd's data threads do through their rings,
 * read back through cfs_read; and everything that must take the ordinary path instead. */
#include "cfs_test.h"

#include <unistd.h>

#define FILE_BYTES (256u * 1024)

static uint8_t *aligned(size_t n)
{
	uint8_t *p;
	cr_assert_eq(posix_memalign((void **)&p, 4096, n), 0);
	return p;
}

/* cfs_direct_io_end of a caller that may wait: it always ends. */
static int64_t end(struct cfs_direct_io *d, int result, uint64_t moved)
{
	int64_t answer = INT64_MIN;
	cr_assert(cfs_direct_io_end(d, result, moved, true, &answer));
	return answer;
}

/* The pieces of d done by hand, then cfs_direct_io_end with the first error and the bytes
 * they moved. */
static int64_t pieces_and_end(struct cfs_direct_io *d, uint8_t *buf)
{
	int error = 0;
	uint64_t moved = 0;
	for (unsigned i = 0; i < d->n && !error; i++) {
		const struct cfs_lun_io *p = &d->io[i];
		ssize_t n = d->write ? pwrite(p->fd, buf + p->buf_offset, p->len, (off_t)p->offset)
				     : pread(p->fd, buf + p->buf_offset, p->len, (off_t)p->offset);
		if (n < 0)
			error = -errno;
		else
			moved += (uint64_t)n;
	}
	return end(d, error, moved);
}

/* An open file of FILE_BYTES written with bytes of seed. */
static uint64_t written_file(struct cfs_fs *fs, const char *name, uint8_t seed, uint8_t *buf)
{
	struct stat st;
	cr_assert_eq(cfs_mknod(fs, CFS_ROOT, name, S_IFREG | 0644, 0, &root_cred, &st), 0);
	cr_assert_eq(cfs_open(fs, st.st_ino, O_RDWR), 0);
	memset(buf, seed, FILE_BYTES);
	cr_assert_eq(cfs_write(fs, st.st_ino, buf, FILE_BYTES, 0, CFS_W_DIRECT, &root_cred),
		     FILE_BYTES);
	return st.st_ino;
}

Test(direct_io, writes_and_reads_through_the_pieces_land_where_cfs_read_finds_them)
{
	struct cfs_fs *fs = fs_fresh(4, 64); /* striped: a range may span LUNs */
	uint8_t *buf = aligned(FILE_BYTES), *back = aligned(FILE_BYTES);
	uint64_t ino = written_file(fs, "f", 0x11, buf);
	struct stat before, after;
	cr_assert_eq(cfs_getattr(fs, ino, &before), 0);
	struct cfs_direct_io d;
	for (unsigned i = 0; i < FILE_BYTES; i++)
		buf[i] = (uint8_t)(i * 7 + 3);
	usleep(10000); /* a later mtime */
	cr_assert_eq(cfs_direct_io_begin(fs, ino, true, 0, buf + 8192, 64 * 1024, 8192, true, &d), 0);
	cr_assert_geq(d.n, 1);
	cr_assert_eq(d.bytes, 64 * 1024);
	cr_assert_eq(pieces_and_end(&d, buf + 8192), 64 * 1024);
	cr_assert_eq(cfs_read(fs, ino, back, FILE_BYTES, 0), FILE_BYTES);
	for (unsigned i = 0; i < FILE_BYTES; i++)
		cr_assert_eq(back[i], i >= 8192 && i < 8192 + 64 * 1024 ? buf[i] : 0x11, "byte %u", i);
	cr_assert_eq(cfs_getattr(fs, ino, &after), 0);
	cr_assert(after.st_mtim.tv_sec > before.st_mtim.tv_sec ||
		  (after.st_mtim.tv_sec == before.st_mtim.tv_sec &&
		   after.st_mtim.tv_nsec > before.st_mtim.tv_nsec), "the write stamps mtime");

	memset(back, 0, FILE_BYTES);
	cr_assert_eq(cfs_direct_io_begin(fs, ino, false, 0, back, FILE_BYTES, 0, false, &d), 0);
	cr_assert_eq(pieces_and_end(&d, back), FILE_BYTES);
	cr_assert_eq(memcmp(back + 8192, buf + 8192, 64 * 1024), 0);
	cr_assert_eq(back[0], 0x11);
	free(buf);
	free(back);
	fs_done_fsck_clean(fs);
}

Test(direct_io, reads_stop_at_the_end_and_zero_holes)
{
	struct cfs_fs *fs = fs_fresh(2, 64);
	uint8_t *buf = aligned(FILE_BYTES);
	struct stat st;
	cr_assert_eq(cfs_mknod(fs, CFS_ROOT, "sparse", S_IFREG | 0644, 0, &root_cred, &st), 0);
	cr_assert_eq(cfs_open(fs, st.st_ino, O_RDWR), 0);
	memset(buf, 0x5a, 4096);
	cr_assert_eq(cfs_write(fs, st.st_ino, buf, 100, 200000, 0, &root_cred), 100);
	struct cfs_direct_io d;
	memset(buf, 0xff, FILE_BYTES);
	cr_assert_eq(cfs_direct_io_begin(fs, st.st_ino, false, 0, buf, 65536, 0, true, &d), 0);
	cr_assert_eq(d.n, 0, "a hole needs no LUN I/O");
	cr_assert_eq(end(&d, 0, 0), 65536);
	for (unsigned i = 0; i < 65536; i++)
		cr_assert_eq(buf[i], 0, "byte %u of the hole", i);
	cr_assert_eq(cfs_direct_io_begin(fs, st.st_ino, false, 0, buf, 8192, 196608, true, &d), 0);
	cr_assert_eq(d.bytes, 200100 - 196608, "stops at the end of the file");
	cr_assert_eq(pieces_and_end(&d, buf), 200100 - 196608);
	cr_assert_eq(buf[200000 - 196608], 0x5a);
	cr_assert_eq(cfs_direct_io_begin(fs, st.st_ino, false, 0, buf, 4096, 204800, true, &d), 0);
	cr_assert_eq(end(&d, 0, 0), 0, "past the end: nothing");
	free(buf);
	fs_done_fsck_clean(fs);
}

Test(direct_io, what_needs_the_ordinary_path_is_sent_back)
{
	struct cfs_fs *fs = fs_fresh(2, 64);
	uint8_t *buf = aligned(FILE_BYTES);
	uint64_t ino = written_file(fs, "f", 0x22, buf);
	struct cfs_direct_io d;
	/* unaligned offset, size, buffer */
	cr_assert_eq(cfs_direct_io_begin(fs, ino, true, 0, buf, 4096, 100, true, &d), -EAGAIN);
	cr_assert_eq(cfs_direct_io_begin(fs, ino, true, 0, buf, 100, 0, true, &d), -EAGAIN);
	cr_assert_eq(cfs_direct_io_begin(fs, ino, false, 0, buf + 8, 4096, 0, true, &d), -EAGAIN);
	/* the size to grow; a hole to allocate */
	cr_assert_eq(cfs_direct_io_begin(fs, ino, true, 0, buf, 8192, FILE_BYTES - 4096, true, &d),
		     -EAGAIN);
	struct stat grow = {.st_size = 2 * FILE_BYTES};
	cr_assert_eq(cfs_setattr(fs, ino, &grow, CFS_SET_SIZE, &root_cred, &grow), 0);
	cr_assert_eq(cfs_direct_io_begin(fs, ino, true, 0, buf, 4096, FILE_BYTES, true, &d), -EAGAIN);
	/* unwritten blocks to convert */
	cr_assert_eq(cfs_fallocate(fs, ino, 0, FILE_BYTES, 65536, NULL), 0);
	cr_assert_eq(cfs_direct_io_begin(fs, ino, true, 0, buf, 4096, FILE_BYTES, true, &d), -EAGAIN);
	/* set-ID bits a write may take away */
	struct stat attr = {.st_mode = S_IFREG | 04755};
	cr_assert_eq(cfs_setattr(fs, ino, &attr, CFS_SET_MODE, &root_cred, &attr), 0);
	cr_assert_eq(cfs_direct_io_begin(fs, ino, true, 0, buf, 4096, 0, true, &d), -EAGAIN);
	cr_assert_eq(cfs_direct_io_begin(fs, ino, false, 0, buf, 4096, 0, true, &d), 0, "reads go");
	cr_assert_eq(pieces_and_end(&d, buf), 4096);
	/* fs->lock busy and the caller may not wait */
	pthread_mutex_lock(&fs->lock);
	cr_assert_eq(cfs_direct_io_begin(fs, ino, false, 0, buf, 4096, 0, false, &d), -EAGAIN);
	pthread_mutex_unlock(&fs->lock);
	/* a file not open */
	cr_assert_eq(cfs_release(fs, ino), 0);
	cr_assert_eq(cfs_direct_io_begin(fs, ino, false, 0, buf, 4096, 0, true, &d), -EAGAIN);
	free(buf);
	fs_done_fsck_clean(fs);
}

Test(direct_io, a_short_or_failed_lun_io_is_an_error_and_lets_go_of_the_file)
{
	struct cfs_fs *fs = fs_fresh(2, 64);
	uint8_t *buf = aligned(FILE_BYTES);
	uint64_t ino = written_file(fs, "f", 0x33, buf);
	struct cfs_direct_io d;
	cr_assert_eq(cfs_direct_io_begin(fs, ino, false, 0, buf, 8192, 0, true, &d), 0);
	cr_assert_eq(end(&d, 0, 8192 - 512), -EIO, "a LUN file that ends early");
	cr_assert_eq(cfs_direct_io_begin(fs, ino, true, 0, buf, 8192, 0, true, &d), 0);
	cr_assert_eq(end(&d, -ENOSPC, 0), -ENOSPC, "the first piece's error");
	/* both let go of the file: a write through the ordinary path takes it whole */
	cr_assert_eq(cfs_write(fs, ino, buf, FILE_BYTES, 0, CFS_W_DIRECT, &root_cred), FILE_BYTES);
	cr_assert_eq(cfs_direct_io_begin(fs, ino, false, 0, buf, 8192, 0, true, &d), 0);
	cr_assert_eq(pieces_and_end(&d, buf), 8192);
	free(buf);
	fs_done_fsck_clean(fs);
}
