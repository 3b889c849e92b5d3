/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The check of a mounted filesystem (cfs/check.c), through libcfs without FUSE: clean on a
 * tree in use, damage written to the LUNs behind the mount's back (to a block it holds clean
 * in its cache) found and named by path, and a stop honoured. */
#include "cfs_test.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct heard {
	char lines[8][1024];
	unsigned n;
};

static void hear(void *arg, const char *line)
{
	struct heard *h = arg;
	if (h->n < 8)
		snprintf(h->lines[h->n++], sizeof h->lines[0], "%s", line);
}

static int check(struct cfs_fs *fs, struct heard *h, const volatile int *stop,
		 struct cfs_check_progress *p)
{
	struct cfs_check_opts o = {.stop = stop, .problem = hear, .arg = h};
	return cfs_check_mounted(fs, &o, p);
}

/* Blocks taken and never given to anything, committed: what a bug that loses an extent
 * leaves.  Named by group and block, and nothing else is. */
static uint64_t leak(struct cfs_fs *fs, uint32_t want)
{
	uint64_t at;
	uint32_t got;
	pthread_mutex_lock(&fs->lock);
	cr_assert_eq(cfs_alloc(fs, 0, want, &at, &got), 0);
	cr_assert_eq(got, want);
	cr_assert_eq(cfs_journal_commit(fs), 0);
	pthread_mutex_unlock(&fs->lock);
	return at;
}

static void write_block(struct cfs_fs *fs, uint64_t ino, uint64_t at)
{
	static const char block[4096] = "some data";
	cr_assert_eq(cfs_open(fs, ino, O_RDWR), 0);
	cr_assert_eq(cfs_write(fs, ino, block, sizeof block, at, 0, &root_cred), 4096);
	cr_assert_eq(cfs_release(fs, ino), 0);
}

/* Files f0 .. f<n-1> in dir, each of one block of data if data. */
static void make_files(struct cfs_fs *fs, uint64_t dir, int n, bool data)
{
	for (int i = 0; i < n; i++) {
		char name[16];
		snprintf(name, sizeof name, "f%d", i);
		uint64_t f = fs_make(fs, dir, name, S_IFREG | 0644);
		if (data)
			write_block(fs, f, 0);
		cfs_forget(fs, f, 1);
	}
}

Test(check, clean_tree)
{
	struct cfs_fs *fs = fs_fresh(1, 64);
	uint64_t d = fs_make(fs, CFS_ROOT, "dir", S_IFDIR | 0755);
	make_files(fs, d, 50, false);
	struct heard h = {0};
	struct cfs_check_progress p;
	cr_assert_eq(check(fs, &h, NULL, &p), 0);
	cr_assert_eq(p.problems, 0, "%s", h.lines[0]);
	cr_assert_geq(p.inodes, 50);
	cr_assert_geq(p.directories, 2);
	cr_assert_eq(p.groups, p.groups_total);
	cfs_forget(fs, d, 1);
	fs_done(fs);
}

Test(check, damage_behind_the_cache)
{
	struct cfs_fs *fs = fs_fresh(1, 64);
	uint64_t d = fs_make(fs, CFS_ROOT, "dir", S_IFDIR | 0755);
	uint64_t f = fs_make(fs, d, "file", S_IFREG | 0644);
	cfs_forget(fs, f, 1);
	cfs_forget(fs, d, 1);
	/* Mounted again and read: the block is in the cache, clean, with nothing to write home. */
	cr_assert_eq(cfs_unmount(fs), 0);
	fs = fs_mount();
	struct stat st;
	cr_assert_eq(cfs_lookup(fs, CFS_ROOT, "dir", &st), 0);
	cr_assert_eq(cfs_lookup(fs, d, "file", &st), 0);
	uint64_t blk = cfs_handle_block(fs, f);
	uint8_t *b = aligned_alloc(4096, fs->bs);
	cr_assert_eq(cvm_volume_read(fs->vol, b, fs->bs, blk * fs->bs), 0);
	((struct cfs_dinode *)b)->mode = 0xffffffffu; /* as a bug would write it, sealed */
	cfs_block_seal(b, fs->bs);
	cr_assert_eq(cvm_volume_write(fs->vol, b, fs->bs, blk * fs->bs), 0);
	free(b);

	struct heard h = {0};
	struct cfs_check_progress p;
	cr_assert_eq(check(fs, &h, NULL, &p), 0);
	cr_assert_eq(p.problems, 1, "%u problems: %s", (unsigned)p.problems, h.lines[0]);
	char want[64];
	snprintf(want, sizeof want, "/dir/file (inode %llu): ", (unsigned long long)blk);
	cr_assert(strstr(h.lines[0], want) && strstr(h.lines[0], "mode is no file type"), "%s",
		  h.lines[0]);
	cr_assert_eq(cfs_getattr(fs, f, &st), 0, "the mount serves its own copy on");
	cfs_forget(fs, f, 1);
	cfs_forget(fs, d, 1);
	fs_done(fs);
}

Test(check, stops_when_asked)
{
	struct cfs_fs *fs = fs_fresh(1, 64);
	cfs_forget(fs, fs_make(fs, CFS_ROOT, "file", S_IFREG | 0644), 1);
	volatile int stop = 1;
	struct heard h = {0};
	struct cfs_check_progress p;
	cr_assert_eq(check(fs, &h, &stop, &p), -ECANCELED);
	cr_assert_eq(p.problems, 0);
	fs_done(fs);
}

/* Files changed under the check as users would: written after the walk read them, made in
 * a directory it had listed, removed and made again in their blocks; and written again while
 * the leaks are being confirmed. */
struct meddler {
	struct heard h;
	struct cfs_fs *fs;
	uint64_t dir, visited;
	unsigned calls;
	bool confirming;
};

static void meddle(struct meddler *m, unsigned step)
{
	struct cfs_fs *fs = m->fs;
	uint64_t f;
	switch (step) {
	case 0: /* written after the walk read it */
		for (uint64_t b = 1; b < 20; b++)
			write_block(fs, m->visited, (b + 20 * m->calls) * 4096);
		break;
	case 1: /* made where the walk has been */
		f = fs_make(fs, CFS_ROOT, "late", S_IFREG | 0644);
		for (uint64_t b = 0; b < 10; b++)
			write_block(fs, f, b * 4096);
		cfs_forget(fs, f, 1);
		break;
	default: /* removed, and its blocks taken by a new file */
		cr_assert_eq(cfs_unlink(fs, m->dir, "f1"), 0);
		f = fs_make(fs, m->dir, "again", S_IFREG | 0644);
		for (uint64_t b = 0; b < 5; b++)
			write_block(fs, f, b * 4096);
		cfs_forget(fs, f, 1);
		break;
	}
}

static void meddler_hear(void *arg, const char *line)
{
	hear(&((struct meddler *)arg)->h, line);
}

/* Called after each inode the check reads: three changes in the walk, one in the leaks'
 * confirmation (the group headers are all checked by then). */
static void meddle_in_check(void *arg, const struct cfs_check_progress *p)
{
	struct meddler *m = arg;
	if (m->calls < 3 && p->inodes == 30 + 5 * m->calls)
		meddle(m, m->calls++);
	else if (m->calls == 3 && p->groups == p->groups_total)
		meddle(m, m->calls++ % 3);
}

Test(check, leaked_blocks)
{
	struct cfs_fs *fs = fs_fresh(1, 64);
	uint64_t d = fs_make(fs, CFS_ROOT, "dir", S_IFDIR | 0755);
	make_files(fs, d, 50, true);
	uint64_t at = leak(fs, 3);
	struct heard h = {0};
	struct cfs_check_progress p;
	cr_assert_eq(check(fs, &h, NULL, &p), 0);
	cr_assert_eq(p.problems, 1, "%u problems: %s", (unsigned)p.problems, h.lines[0]);
	char want[128];
	snprintf(want, sizeof want, "3 blocks marked in use belong to nothing (%llu, %llu, %llu)",
		 (unsigned long long)at, (unsigned long long)at + 1, (unsigned long long)at + 2);
	cr_assert(strstr(h.lines[0], "allocation group 0: ") && strstr(h.lines[0], want), "%s",
		  h.lines[0]);
	cr_assert_eq(p.unconfirmed, 0);
	cfs_forget(fs, d, 1);
	fs_done(fs);
}

Test(check, blocks_taken_during_the_check_are_no_leaks)
{
	struct cfs_fs *fs = fs_fresh(1, 64);
	struct meddler m = {.fs = fs, .dir = fs_make(fs, CFS_ROOT, "dir", S_IFDIR | 0755)};
	make_files(fs, m.dir, 60, true);
	struct stat st;
	cr_assert_eq(cfs_lookup(fs, m.dir, "f59", &st), 0); /* listed last, read first */
	m.visited = st.st_ino;
	uint64_t at = leak(fs, 1);
	struct cfs_check_progress p;
	struct cfs_check_opts o = {.problem = meddler_hear, .progress = meddle_in_check, .arg = &m};
	cr_assert_eq(cfs_check_mounted(fs, &o, &p), 0);
	cr_assert_eq(m.calls, 4, "the changes were made");
	cr_assert_eq(p.problems, 1, "%u problems: %s / %s", (unsigned)p.problems, m.h.lines[0],
		     m.h.lines[1]);
	char want[96];
	snprintf(want, sizeof want, "1 block marked in use belongs to nothing (%llu)",
		 (unsigned long long)at);
	cr_assert(strstr(m.h.lines[0], want), "%s", m.h.lines[0]);
	cr_assert_eq(p.unconfirmed, 0);
	cfs_forget(fs, m.visited, 1);
	cfs_forget(fs, m.dir, 1);
	fs_done(fs);
}

/* A writer that takes a block after every inode the confirmation reads. */
struct busy {
	struct cfs_fs *fs;
	uint64_t file, written;
};

static void write_all_through(void *arg, const struct cfs_check_progress *p)
{
	struct busy *b = arg;
	if (p->groups == p->groups_total)
		write_block(b->fs, b->file, b->written++ * 4096);
}

Test(check, a_group_in_use_throughout_leaves_its_suspects_unconfirmed)
{
	struct cfs_fs *fs = fs_fresh(1, 64);
	struct busy b = {.fs = fs, .file = fs_make(fs, CFS_ROOT, "log", S_IFREG | 0644)};
	make_files(fs, CFS_ROOT, 20, false);
	leak(fs, 1);
	struct cfs_check_progress p;
	struct cfs_check_opts o = {.progress = write_all_through, .arg = &b};
	cr_assert_eq(cfs_check_mounted(fs, &o, &p), 0);
	cr_assert_gt(b.written, 3, "the writer ran through the rounds");
	cr_assert_eq(p.problems, 0, "a group that changed in every round says nothing");
	cr_assert_eq(p.unconfirmed, 1, "the leaked block is left unconfirmed: %llu",
		     (unsigned long long)p.unconfirmed);
	cfs_forget(fs, b.file, 1);
	fs_done(fs);
}

/* A directory the walk has queued is removed and its block made a file's before the walk
 * lists it: the walk must see a directory gone, not a file to read as one. */
struct reuse {
	struct cfs_fs *fs;
	uint64_t sub;
	bool done, reused;
};

static void reuse_dir_block(void *arg, const struct cfs_check_progress *p)
{
	struct reuse *r = arg;
	if (r->done || p->inodes < 5)
		return;
	r->done = true;
	cr_assert_eq(cfs_rmdir(r->fs, CFS_ROOT, "sub"), 0);
	pthread_mutex_lock(&r->fs->lock);
	cr_assert_eq(cfs_journal_commit(r->fs), 0); /* its block may be handed out again */
	pthread_mutex_unlock(&r->fs->lock);
	for (int i = 0; i < 200 && !r->reused; i++) {
		char name[16];
		snprintf(name, sizeof name, "new%d", i);
		uint64_t f = fs_make(r->fs, CFS_ROOT, name, S_IFREG | 0644);
		write_block(r->fs, f, 0);
		r->reused = f == r->sub;
		cfs_forget(r->fs, f, 1);
	}
}

Test(check, a_directory_removed_and_its_block_reused_before_its_listing)
{
	struct cfs_fs *fs = fs_fresh(1, 64);
	struct reuse r = {.fs = fs, .sub = fs_make(fs, CFS_ROOT, "sub", S_IFDIR | 0755)};
	cfs_forget(fs, r.sub, 1);
	make_files(fs, CFS_ROOT, 20, true);
	struct cfs_check_progress p;
	struct cfs_check_opts o = {.progress = reuse_dir_block, .arg = &r};
	cr_assert_eq(cfs_check_mounted(fs, &o, &p), 0);
	cr_assert(r.reused, "a new file took the directory's block");
	cr_assert_eq(p.problems, 0, "%u problems", (unsigned)p.problems);
	fs_done(fs);
}
