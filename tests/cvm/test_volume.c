/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Volumes on real LUN files: create, I/O across stripe sets, grow, remove, and the bad inputs,
 * each refused with a message naming the thing and with nothing written. */
#include "cvm_test.h"

#include <errno.h>
#include <pthread.h>
#include <sys/stat.h>
#include <sys/wait.h>

static void setup(void) { test_dir_make(); }
static void teardown(void) { test_dir_remove(); }
TestSuite(volume, .init = setup, .fini = teardown);

#define LUN_BYTES (20ull << 20)

static void create(const char *name, const char *const *paths, size_t n, uint64_t width)
{
	struct cvm_scan s = scan_dir();
	struct cvm_create_opts o = {.stripe_width = width};
	cr_assert_eq(cvm_volume_create(&s, name, paths, n, &o, NULL), 0, "%s", cvm_last_error());
	cvm_scan_free(&s);
}

static struct cvm_volume *open_vol(const char *name, int flags)
{
	struct cvm_scan s = scan_dir();
	struct cvm_volume *v = NULL;
	cr_assert_eq(cvm_volume_open(&s, name, flags, &v), 0, "%s", cvm_last_error());
	cvm_scan_free(&s);
	return v;
}

static void fill(uint8_t *buf, size_t len, uint64_t seed)
{
	for (size_t i = 0; i < len; i += 8) {
		uint64_t v = seed + i;
		memcpy(buf + i, &v, 8);
	}
}

/* A hash of every file in the test directory, to prove a refusal wrote nothing. */
static uint64_t dir_fingerprint(void)
{
	uint64_t h = 1469598103934665603ull;
	const char *names[] = {"l0", "l1", "l2", "l3", "l4", "small"};
	static uint8_t buf[1 << 16];
	for (size_t n = 0; n < sizeof names / sizeof *names; n++) {
		FILE *f = fopen(test_path(names[n]), "rb");
		if (!f)
			continue;
		size_t got;
		while ((got = fread(buf, 1, sizeof buf, f)) > 0)
			h = (h ^ cvm_crc32c(0, buf, got)) * 1099511628211ull;
		fclose(f);
	}
	return h;
}

Test(volume, write_read_across_stripe_sets)
{
	const char *a[] = {strdup(make_lun("l0", LUN_BYTES)), strdup(make_lun("l1", LUN_BYTES))};
	create("v", a, 2, 64 << 10);
	const char *b[] = {strdup(make_lun("l2", LUN_BYTES)), strdup(make_lun("l3", 24ull << 20)),
			   strdup(make_lun("l4", LUN_BYTES))};
	struct cvm_scan s = scan_dir();
	struct cvm_create_opts o = {.stripe_width = 16 << 10};
	struct cvm_config *cfg = malloc(sizeof *cfg);
	cr_assert_eq(cvm_volume_grow(&s, "v", b, 3, &o, cfg), 0, "%s", cvm_last_error());
	cvm_scan_free(&s);
	cr_assert_eq(cfg->generation, 2);
	cr_assert_eq(cfg->nsets, 2);
	/* The set uses the smallest LUN's size on every LUN. */
	cr_assert_eq(cfg->sets[1].lun_bytes, LUN_BYTES - CVM_META_BYTES);

	struct cvm_volume *v = open_vol("v", CVM_OPEN_RDWR);
	uint64_t size = cvm_volume_size(v);
	cr_assert_eq(size, cvm_config_size(cfg));
	size_t len = 3 << 20;
	uint8_t *w = cvm_alloc_aligned(len), *r = cvm_alloc_aligned(len);
	/* Straddle the boundary between the two stripe sets. */
	uint64_t off = cfg->sets[0].lun_bytes * 2 - (1 << 20) - 512;
	fill(w, len, 42);
	cr_assert_eq(cvm_volume_write(v, w, len, off), 0);
	cr_assert_eq(cvm_volume_flush(v), 0);
	cvm_volume_close(v);
	v = open_vol("v", CVM_OPEN_RDONLY);
	memset(r, 0, len);
	cr_assert_eq(cvm_volume_read(v, r, len, off), 0);
	cr_assert_eq(memcmp(w, r, len), 0, "data read back differs");
	/* The last block of the volume, and refusals at its edges. */
	cr_assert_eq(cvm_volume_read(v, r, 4096, size - 4096), 0);
	cr_assert_eq(cvm_volume_read(v, r, 4096, size - 2048), -ERANGE);
	cr_assert_eq(cvm_volume_read(v, r + 1, 4096, 0), -EINVAL, "misaligned buffer");
	cr_assert_eq(cvm_volume_read(v, r, 100, 0), -EINVAL, "misaligned length");
	cvm_volume_close(v);
	free(w);
	free(r);
	free(cfg);
	for (int i = 0; i < 2; i++)
		free((void *)a[i]);
	for (int i = 0; i < 3; i++)
		free((void *)b[i]);
}

/* Each bad input: the call fails with the expected error and message, and nothing changed. */
static void refused(const char *name, const char *const *paths, size_t n, uint64_t width,
		    int err, const char *needle)
{
	uint64_t before = dir_fingerprint();
	struct cvm_scan s = scan_dir();
	struct cvm_create_opts o = {.stripe_width = width};
	int rc = cvm_volume_create(&s, name, paths, n, &o, NULL);
	cvm_scan_free(&s);
	cr_assert_eq(rc, err, "create returned %d (%s), expected %d", rc, cvm_last_error(), err);
	cr_assert(strstr(cvm_last_error(), needle), "message '%s' lacks '%s'", cvm_last_error(),
		  needle);
	cr_assert_eq(dir_fingerprint(), before, "a refused create changed a LUN");
}

/* Each flush a caller asks for alone is one flush.  Callers at once all succeed, each after
 * a flush ended since it asked, and together they need no more flushes than calls. */
struct flusher {
	struct cvm_volume *v;
	uint64_t offset;
	int failures;
};

static void *write_and_flush(void *arg)
{
	struct flusher *f = arg;
	uint8_t *w = cvm_alloc_aligned(4096);
	fill(w, 4096, f->offset);
	for (int i = 0; i < 100; i++) {
		uint64_t ended = cvm_volume_flushes(f->v);
		f->failures += cvm_volume_write(f->v, w, 4096, f->offset) != 0 ||
			       cvm_volume_flush(f->v) != 0 || cvm_volume_flushes(f->v) <= ended;
	}
	free(w);
	return NULL;
}

Test(volume, flushes_are_counted_and_shared_by_callers_at_once)
{
	const char *p[] = {strdup(make_lun("l0", LUN_BYTES)), strdup(make_lun("l1", LUN_BYTES))};
	create("v", p, 2, 64 << 10);
	struct cvm_volume *v = open_vol("v", CVM_OPEN_RDWR);
	uint64_t before = cvm_volume_flushes(v);
	for (int i = 0; i < 3; i++)
		cr_assert_eq(cvm_volume_flush(v), 0);
	cr_assert_eq(cvm_volume_flushes(v), before + 3, "one flush per lone call");
	enum { THREADS = 8 };
	struct flusher f[THREADS];
	pthread_t t[THREADS];
	before = cvm_volume_flushes(v);
	for (int i = 0; i < THREADS; i++) {
		f[i] = (struct flusher){.v = v, .offset = (uint64_t)i << 16};
		cr_assert_eq(pthread_create(&t[i], NULL, write_and_flush, &f[i]), 0);
	}
	for (int i = 0; i < THREADS; i++) {
		pthread_join(t[i], NULL);
		cr_assert_eq(f[i].failures, 0, "thread %d: a write or flush failed", i);
	}
	uint64_t flushes = cvm_volume_flushes(v) - before;
	cr_assert(flushes >= 1 && flushes <= THREADS * 100, "%llu flushes for %d calls",
		  (unsigned long long)flushes, THREADS * 100);
	cvm_volume_close(v);
	for (int i = 0; i < 2; i++)
		free((void *)p[i]);
}

/* A LUN whose flush fails (its descriptor swapped for a pipe's, where fdatasync is EINVAL):
 * the flush says so, the other LUNs are flushed, and the failed one is tried again at the
 * next flush until it succeeds. */
Test(volume, a_failed_flush_is_reported_and_tried_again)
{
	const char *p[] = {strdup(make_lun("l0", LUN_BYTES)), strdup(make_lun("l1", LUN_BYTES)),
			   strdup(make_lun("l2", LUN_BYTES))};
	create("v", p, 3, 64 << 10);
	struct cvm_volume *v = open_vol("v", CVM_OPEN_RDWR);
	size_t len = 3 << 16; /* a stripe on each LUN */
	uint8_t *w = cvm_alloc_aligned(len);
	fill(w, len, 7);
	cr_assert_eq(cvm_volume_write(v, w, len, 0), 0);
	cr_assert_eq(cvm_volume_flush(v), 0, "three LUNs flushed at once");
	cr_assert_eq(cvm_volume_write(v, w, len, 0), 0);
	int lun1 = cvm_volume_lun_fd(v, 1), saved = dup(lun1), pipefd[2];
	cr_assert(saved >= 0 && pipe(pipefd) == 0);
	cr_assert(dup2(pipefd[0], lun1) == lun1);
	cr_assert_eq(cvm_volume_flush(v), -EINVAL);
	cr_assert_eq(cvm_volume_flush(v), -EINVAL, "the failed LUN is still to be flushed");
	cr_assert(dup2(saved, lun1) == lun1);
	cr_assert_eq(cvm_volume_flush(v), 0);
	cr_assert_eq(cvm_volume_flush(v), 0, "nothing left to flush");
	close(saved);
	close(pipefd[0]);
	close(pipefd[1]);
	cvm_volume_close(v);
	free(w);
	for (int i = 0; i < 3; i++)
		free((void *)p[i]);
}

struct captured {
	int lines;
	char last[512];
};

static void capture(void *arg, const char *line)
{
	struct captured *c = arg;
	c->lines++;
	snprintf(c->last, sizeof c->last, "%s", line);
}

Test(volume, failed_lun_io_is_counted_per_lun_and_logged_rate_limited)
{
	const char *p[] = {strdup(make_lun("l0", LUN_BYTES)), strdup(make_lun("l1", LUN_BYTES))};
	create("v", p, 2, 64 << 10);
	struct cvm_volume *v = open_vol("v", CVM_OPEN_RDWR);
	struct captured c = {0};
	cvm_volume_set_log(v, capture, &c);
	size_t len = 2 << 16; /* a stripe on each LUN */
	uint8_t *w = cvm_alloc_aligned(len);
	fill(w, len, 3);
	int lun1 = cvm_volume_lun_fd(v, 1), saved = dup(lun1), pipefd[2];
	cr_assert(saved >= 0 && pipe(pipefd) == 0);
	cr_assert(dup2(pipefd[0], lun1) == lun1); /* LUN 1 fails every write from now on */
	for (int i = 0; i < 30; i++)
		cr_assert_lt(cvm_volume_write(v, w, len, 0), 0);
	cr_assert_eq(cvm_volume_lun_errors(v, 0), 0, "LUN 0 did not fail");
	cr_assert_eq(cvm_volume_lun_errors(v, 1), 30);
	cr_assert_eq(c.lines, 10, "10 lines in a window, not %d", c.lines);
	cr_assert(strstr(c.last, "volume v: LUN 1 (") && strstr(c.last, p[1]) &&
		  strstr(c.last, "write of 65536 bytes at byte ") &&
		  strstr(c.last, "(10 failed I/O on this LUN so far)"), "%s", c.last);
	cr_assert(dup2(saved, lun1) == lun1);
	cr_assert_eq(cvm_volume_write(v, w, len, 0), 0);
	cr_assert_eq(cvm_volume_lun_errors(v, 1), 30, "a good write counts nothing");
	struct cvm_volume *again = open_vol("v", CVM_OPEN_RDWR);
	cvm_volume_inherit_errors(again, v);
	cr_assert_eq(cvm_volume_lun_errors(again, 1), 30, "a new handle counts on");
	cvm_volume_close(again);
	close(saved);
	close(pipefd[0]);
	close(pipefd[1]);
	cvm_volume_close(v);
	free(w);
	for (int i = 0; i < 2; i++)
		free((void *)p[i]);
}

Test(volume, bad_inputs_are_refused_and_change_nothing)
{
	const char *l0 = strdup(make_lun("l0", LUN_BYTES));
	const char *l1 = strdup(make_lun("l1", LUN_BYTES));
	const char *small = strdup(make_lun("small", 8 << 20));
	const char *missing = strdup(test_path("nope"));
	char dir[512];
	snprintf(dir, sizeof dir, "%s/adir", test_dir);
	mkdir(dir, 0755);
	char link0[512];
	snprintf(link0, sizeof link0, "%s/link0", test_dir);
	cr_assert_eq(symlink(l0, link0), 0);

	refused("v", (const char *[]){missing}, 1, 0, -ENOENT, "nope");
	refused("v", (const char *[]){l0, dir}, 2, 0, -EINVAL, "not a block device or regular file");
	refused("v", (const char *[]){l0, small}, 2, 0, -ENOSPC, "below the minimum");
	refused("v", (const char *[]){l0, l1, l0}, 3, 0, -EINVAL, "same device");
	refused("v", (const char *[]){l0, link0}, 2, 0, -EINVAL, "same device");
	refused("v", (const char *[]){l0}, 1, 12 << 10, -EINVAL, "power of two");
	refused("v", (const char *[]){l0}, 1, 2048, -EINVAL, "power of two");
	refused("bad name!", (const char *[]){l0}, 1, 0, -EINVAL, "volume name");

	create("v", (const char *[]){l0}, 1, 0);
	refused("w", (const char *[]){l1, l0}, 2, 0, -EEXIST, "already belongs to volume v");
	refused("v", (const char *[]){l1}, 1, 0, -EEXIST, "already exists");
	free((void *)l0);
	free((void *)l1);
	free((void *)small);
	free((void *)missing);
}

static void damage(const char *path, off_t offset)
{
	int fd = open(path, O_RDWR);
	uint8_t junk[64];
	memset(junk, 0xa5, sizeof junk);
	cr_assert_eq(pwrite(fd, junk, sizeof junk, offset), (ssize_t)sizeof junk);
	close(fd);
}

static void print_nothing(void *arg, const char *line) { (void)arg; (void)line; }

Test(volume, damaged_label_is_named_and_repaired)
{
	const char *l[] = {strdup(make_lun("l0", LUN_BYTES)), strdup(make_lun("l1", LUN_BYTES))};
	create("v", l, 2, 0);
	damage(l[1], 100);
	struct cvm_scan s = scan_dir();
	struct cvm_volume *v;
	cr_assert_eq(cvm_volume_open(&s, "v", CVM_OPEN_RDONLY, &v), -EBADMSG);
	cr_assert(strstr(cvm_last_error(), l[1]), "%s", cvm_last_error());
	cr_assert(strstr(cvm_last_error(), "cvm check v"), "%s", cvm_last_error());
	struct cvm_check_report rep;
	cr_assert_eq(cvm_volume_check(&s, "v", false, print_nothing, NULL, &rep), 0);
	cr_assert_eq(rep.problems, 1);
	cr_assert_eq(rep.repaired, 0);
	cr_assert_eq(cvm_volume_check(&s, "v", true, print_nothing, NULL, &rep), 0);
	cr_assert_eq(rep.repaired, 1);
	cvm_scan_free(&s);
	s = scan_dir();
	cr_assert_eq(cvm_volume_check(&s, "v", false, print_nothing, NULL, &rep), 0);
	cr_assert_eq(rep.problems, 0, "still %u problems after repair", rep.problems);
	cr_assert_eq(cvm_volume_open(&s, "v", CVM_OPEN_RDONLY, &v), 0, "%s", cvm_last_error());
	cvm_volume_close(v);
	cvm_scan_free(&s);
	free((void *)l[0]);
	free((void *)l[1]);
}

Test(volume, damaged_config_copy_falls_back_and_is_repaired)
{
	const char *l[] = {strdup(make_lun("l0", LUN_BYTES)), strdup(make_lun("l1", LUN_BYTES))};
	create("v", l, 2, 0);
	/* Generation 1 lives in slot 1: damage it on one LUN; the other LUN's copy still wins. */
	damage(l[0], CVM_SLOT_OFFSET(1) + 200);
	struct cvm_scan s = scan_dir();
	cr_assert_eq(s.luns[0].state, CVM_LUN_NO_CONFIG);
	struct cvm_volume *v;
	cr_assert_eq(cvm_volume_open(&s, "v", CVM_OPEN_RDONLY, &v), 0, "%s", cvm_last_error());
	cvm_volume_close(v);
	struct cvm_check_report rep;
	cr_assert_eq(cvm_volume_check(&s, "v", true, print_nothing, NULL, &rep), 0);
	cr_assert_eq(rep.problems, 1);
	cr_assert_eq(rep.repaired, 1);
	cvm_scan_free(&s);
	s = scan_dir();
	cr_assert_eq(s.luns[0].state, CVM_LUN_OK);
	cvm_scan_free(&s);
	free((void *)l[0]);
	free((void *)l[1]);
}

Test(volume, missing_lun_names_uuid_and_last_path)
{
	const char *l[] = {strdup(make_lun("l0", LUN_BYTES)), strdup(make_lun("l1", LUN_BYTES))};
	create("v", l, 2, 0);
	struct cvm_scan s = scan_dir();
	struct cvm_config *c = malloc(sizeof *c);
	cr_assert_eq(cvm_scan_find_volume(&s, "v", c), 0);
	cvm_scan_free(&s);
	char hidden[512];
	snprintf(hidden, sizeof hidden, "%s.hidden", test_dir);
	cr_assert_eq(rename(l[1], hidden), 0);
	s = scan_dir();
	struct cvm_volume *v;
	cr_assert_eq(cvm_volume_open(&s, "v", CVM_OPEN_RDONLY, &v), -ENODEV);
	char u[CVM_UUID_STR];
	cvm_uuid_format(&c->luns[1].uuid, u);
	cr_assert(strstr(cvm_last_error(), u), "%s", cvm_last_error());
	cr_assert(strstr(cvm_last_error(), l[1]), "%s", cvm_last_error());
	/* Without --force, an incomplete volume is not removed. */
	cr_assert_eq(cvm_volume_remove(&s, "v", false), -ENODEV);
	cvm_scan_free(&s);
	cr_assert_eq(rename(hidden, l[1]), 0);
	free(c);
	free((void *)l[0]);
	free((void *)l[1]);
}

Test(volume, remove_refuses_data_without_force)
{
	const char *l[] = {strdup(make_lun("l0", LUN_BYTES))};
	create("v", l, 1, 0);
	struct cvm_volume *v = open_vol("v", CVM_OPEN_RDWR);
	uint8_t *buf = cvm_alloc_aligned(4096);
	memset(buf, 1, 4096);
	cr_assert_eq(cvm_volume_write(v, buf, 4096, 0), 0);
	cvm_volume_close(v);
	struct cvm_scan s = scan_dir();
	cr_assert_eq(cvm_volume_remove(&s, "v", false), -ENOTEMPTY);
	cr_assert(strstr(cvm_last_error(), "--force"));
	cr_assert_eq(cvm_volume_remove(&s, "v", true), 0, "%s", cvm_last_error());
	cvm_scan_free(&s);
	s = scan_dir();
	cr_assert_eq(s.nluns, 0, "a removed volume's LUN still carries a label");
	/* And the LUN can be used again. */
	cr_assert_eq(cvm_volume_create(&s, "again", l, 1, NULL, NULL), 0, "%s", cvm_last_error());
	cvm_scan_free(&s);
	free(buf);
	free((void *)l[0]);
}

/* Run fn in a child process (another user of the LUNs) and return its result. */
static int in_child(int (*fn)(void))
{
	pid_t pid = fork();
	if (pid == 0)
		_exit(-fn() & 0xff);
	int status;
	waitpid(pid, &status, 0);
	cr_assert(WIFEXITED(status));
	return -WEXITSTATUS(status);
}

static const char *grow_lun;
static int grow_v(void)
{
	struct cvm_scan s = scan_dir();
	const char *n[] = {grow_lun};
	int rc = cvm_volume_grow(&s, "v", n, 1, NULL, NULL);
	cvm_scan_free(&s);
	return rc;
}

static int remove_v(void)
{
	struct cvm_scan s = scan_dir();
	int rc = cvm_volume_remove(&s, "v", true);
	cvm_scan_free(&s);
	return rc;
}

Test(volume, grow_is_online_but_remove_and_concurrent_changes_wait)
{
	const char *l[] = {strdup(make_lun("l0", LUN_BYTES))};
	grow_lun = strdup(make_lun("l1", LUN_BYTES));
	create("v", l, 1, 0);
	struct cvm_volume *v = open_vol("v", CVM_OPEN_RDWR);
	uint64_t before = cvm_volume_size(v);
	cr_assert_eq(in_child(remove_v), -EBUSY, "remove of a volume in use was not refused");

	/* Another config change in progress (the change lock held) makes grow wait. */
	int fd = open(l[0], O_RDWR);
	cr_assert_eq(cvm_lun_lock(fd, l[0], CVM_LOCK_CHANGE), 0);
	cr_assert_eq(in_child(grow_v), -EBUSY, "two config changes ran at once");
	close(fd);

	/* Growth while the volume is open: the open handle keeps working on its old size. */
	cr_assert_eq(in_child(grow_v), 0, "online grow failed");
	uint8_t *buf = cvm_alloc_aligned(4096);
	memset(buf, 7, 4096);
	cr_assert_eq(cvm_volume_write(v, buf, 4096, before - 4096), 0);
	cvm_volume_close(v);
	v = open_vol("v", CVM_OPEN_RDONLY);
	cr_assert_gt(cvm_volume_size(v), before, "a reopen does not see the grown volume");
	cr_assert_eq(cvm_volume_read(v, buf, 4096, before - 4096), 0);
	cr_assert_eq(buf[0], 7);
	cvm_volume_close(v);
	free(buf);
	free((void *)l[0]);
	free((void *)grow_lun);
}
