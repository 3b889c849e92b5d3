/* SPDX-License-Identifier: GPL-2.0-or-later */
/* cvm_volume_restripe on real LUN files: a volume of 2 LUNs grown by 2 more, every 4 KiB
 * block stamped with its volume offset, restriped into one set over the 4; interrupted
 * ("power lost") after every so many writes and run again, paused and resumed, refused when
 * it cannot be done; every block reads back as written afterwards. */
#include "cvm_test.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

static void setup(void) { test_dir_make(); }
static void teardown(void) { test_dir_remove(); }
TestSuite(restripe, .init = setup, .fini = teardown, .timeout = 600);

#define LUN_BYTES (CVM_MIN_LUN_BYTES + (64u << 10))
#define BLOCK 4096u

static struct cvm_scan scan;

static void rescan(void)
{
	cvm_scan_free(&scan);
	scan = scan_dir();
}

static void stamp(uint8_t *b, uint64_t off, uint64_t seed)
{
	for (unsigned i = 0; i < BLOCK; i += 16) {
		memcpy(b + i, &off, 8);
		memcpy(b + i + 8, &seed, 8);
	}
}

/* Every block of the volume from `from` on gets its stamp. */
static void fill(uint64_t from, uint64_t seed)
{
	struct cvm_volume *v;
	rescan();
	cr_assert_eq(cvm_volume_open(&scan, "v", CVM_OPEN_RDWR, &v), 0, "%s", cvm_last_error());
	uint8_t *b = cvm_alloc_aligned(BLOCK);
	for (uint64_t off = from; off < cvm_volume_size(v); off += BLOCK) {
		stamp(b, off, seed);
		cr_assert_eq(cvm_volume_write(v, b, BLOCK, off), 0);
	}
	cr_assert_eq(cvm_volume_flush(v), 0);
	free(b);
	cvm_volume_close(v);
}

/* Every block of the first 2 * grown_at bytes reads back with its stamp: seed 1 below
 * grown_at and 2 above, or `all` everywhere if not 0. */
static void read_back(uint64_t grown_at, uint64_t all, bool done)
{
	struct cvm_volume *v;
	rescan();
	cr_assert_eq(cvm_volume_open(&scan, "v", CVM_OPEN_RDONLY, &v), 0, "%s", cvm_last_error());
	const struct cvm_config *c = cvm_volume_config(v);
	if (done) {
		cr_assert_eq(c->nsets, 1, "one stripe set after the restripe");
		cr_assert_eq(c->sets[0].nluns, 4);
	}
	uint8_t *b = cvm_alloc_aligned(BLOCK), *want = cvm_alloc_aligned(BLOCK);
	for (uint64_t off = 0; off < 2 * grown_at; off += BLOCK) {
		cr_assert_eq(cvm_volume_read(v, b, BLOCK, off), 0);
		stamp(want, off, all ? all : off < grown_at ? 1 : 2);
		cr_assert(!memcmp(b, want, BLOCK), "block at %" PRIu64 " is not as written", off);
	}
	free(b);
	free(want);
	cvm_volume_close(v);
}

/* Two LUNs, stamped, grown by two, the new half stamped: the size of the first half. */
static uint64_t grown_volume(uint64_t width)
{
	const char *luns[4];
	for (int i = 0; i < 4; i++) {
		char name[16];
		snprintf(name, sizeof name, "lun%d", i);
		luns[i] = make_lun(name, LUN_BYTES);
	}
	struct cvm_create_opts o = {.stripe_width = width};
	rescan();
	cr_assert_eq(cvm_volume_create(&scan, "v", luns, 2, &o, NULL), 0, "%s", cvm_last_error());
	fill(0, 1);
	rescan();
	struct cvm_config c;
	cr_assert_eq(cvm_volume_grow(&scan, "v", luns + 2, 2, NULL, &c), 0, "%s", cvm_last_error());
	uint64_t half = c.sets[0].lun_bytes * 2;
	fill(half, 2);
	return half;
}

static void verify(uint64_t grown_at) { read_back(grown_at, 0, true); }

static int restripe(const struct cvm_restripe_opts *o)
{
	rescan();
	return cvm_volume_restripe(&scan, "v", o, NULL);
}

static struct cvm_restripe_opts plain;

static void set_result(void *arg, int64_t result) { *(int64_t *)arg = result; }

/* Restripe in a child that loses power after k writes; true if it did. */
static bool crash_after(long k)
{
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		cvm_fault_crash_after(k);
		_exit(restripe(&plain) == 0 ? 0 : 1);
	}
	int status;
	waitpid(pid, &status, 0);
	cr_assert(WIFEXITED(status), "the child died of a signal");
	cr_assert(WEXITSTATUS(status) == 0 || WEXITSTATUS(status) == CVM_FAULT_EXIT,
		  "the child failed: exit %d", WEXITSTATUS(status));
	return WEXITSTATUS(status) == CVM_FAULT_EXIT;
}

Test(restripe, spreads_a_grown_volume_and_keeps_every_block)
{
	uint64_t half = grown_volume(256 << 10);
	cr_assert_eq(restripe(&plain), 0, "%s", cvm_last_error());
	verify(half);
	cr_assert_eq(restripe(&plain), -EALREADY, "a second restripe has nothing to do");
}

/* A copy of the LUN files in a subdirectory, which scans do not look into. */
static void save_luns(void)
{
	char cmd[1000];
	snprintf(cmd, sizeof cmd, "mkdir '%s/orig' && cp -a '%s'/lun* '%s/orig/'", test_dir, test_dir,
		 test_dir);
	cr_assert_eq(system(cmd), 0);
}

static void restore_luns(void)
{
	char cmd[1000];
	snprintf(cmd, sizeof cmd, "cp -a '%s'/orig/lun* '%s/'", test_dir, test_dir);
	cr_assert_eq(system(cmd), 0);
}

/* Power lost after k writes (metadata and data, staging and placing), then run again: the
 * points spread over the whole run, and the first few, where the record is young. */
Test(restripe, every_crash_point_resumes_to_the_same_data)
{
	uint64_t half = grown_volume(256 << 10);
	save_luns();
	long total = 0; /* how many writes a whole run makes, to a thousand */
	do {
		total += 1000;
		restore_luns();
	} while (crash_after(total));
	long points[] = {0, 1, 2, 3, 5, 8, 13, 21, 34, total / 7, total / 3, total / 2,
			 total * 2 / 3, total - 1500, total - 1000};
	for (size_t i = 0; i < sizeof points / sizeof *points; i++) {
		restore_luns();
		crash_after(points[i]);
		cr_assert_eq(restripe(&plain), 0, "after a crash at write %ld: %s", points[i],
			     cvm_last_error());
		verify(half);
	}
}

static volatile int stop_now;

static void stop_after_first(void *arg, const struct cvm_restripe_progress *p)
{
	(void)arg;
	if (p->moves_done > 0)
		stop_now = 1;
}

Test(restripe, pauses_and_goes_on)
{
	uint64_t half = grown_volume(64 << 10);
	struct cvm_restripe_opts o = {.stop = &stop_now, .progress = stop_after_first};
	cr_assert_eq(restripe(&o), -EINTR);
	rescan();
	struct cvm_config c;
	cr_assert_eq(cvm_scan_find_volume(&scan, "v", &c), 0);
	cr_assert_gt(c.restripe.moves_done, 0);
	const char *extra[] = {make_lun("lun9", LUN_BYTES)};
	rescan();
	cr_assert_eq(cvm_volume_grow(&scan, "v", extra, 1, NULL, NULL), -EBUSY);
	cr_assert(strstr(cvm_last_error(), "is being restriped"), "%s", cvm_last_error());
	struct cvm_restripe_opts other = {.stripe_width = 1 << 20};
	cr_assert_eq(restripe(&other), -EBUSY, "another width while one is under way");
	cr_assert_eq(restripe(&plain), 0, "%s", cvm_last_error());
	verify(half);
}

/* The config as the LUNs hold it now. */
static struct cvm_config config_now(void)
{
	struct cvm_config c;
	rescan();
	cr_assert_eq(cvm_scan_find_volume(&scan, "v", &c), 0, "%s", cvm_last_error());
	return c;
}

/* --luns: one stripe set at a time gets a new width, the other keeps its layout and every
 * block; the second set first (the last: it could grow), then the first (set 1 after it
 * keeps its place).  Paused after a batch, the restripe goes on without --luns as recorded,
 * and refuses other LUNs meanwhile. */
Test(restripe, luns_restripe_their_sets_only)
{
	uint64_t half = grown_volume(64 << 10);
	struct cvm_config c = config_now();
	cvm_uuid second[2] = {c.luns[3].uuid, c.luns[2].uuid}, first[2] = {c.luns[0].uuid,
									c.luns[1].uuid};
	struct cvm_restripe_opts o = {.stripe_width = 16 << 10, .luns = second, .nluns = 2,
				      .stop = &stop_now, .progress = stop_after_first};
	stop_now = 0;
	cr_assert_eq(restripe(&o), -EINTR, "%s", cvm_last_error());
	c = config_now();
	cr_assert(c.restripe.first_set == 1 && c.restripe.set_count == 1 &&
		  c.restripe.moves_done > 0);
	struct cvm_restripe_opts other = {.luns = first, .nluns = 2};
	cr_assert_eq(restripe(&other), -EBUSY, "other LUNs while one is under way");
	cr_assert(strstr(cvm_last_error(), "is being restriped (stripe set 1); run the restripe again without --luns"), "%s", cvm_last_error());
	cr_assert_eq(restripe(&plain), 0, "%s", cvm_last_error());
	c = config_now();
	cr_assert(c.nsets == 2 && c.sets[0].stripe_width == 64 << 10 &&
		  c.sets[1].stripe_width == 16 << 10 && c.sets[1].first_lun == 2);
	read_back(half, 0, false);

	struct cvm_restripe_opts set0 = {.stripe_width = 4 << 10, .luns = first, .nluns = 2};
	cr_assert_eq(restripe(&set0), 0, "%s", cvm_last_error());
	c = config_now();
	cr_assert(c.nsets == 2 && c.sets[0].stripe_width == 4 << 10 &&
		  c.sets[1].stripe_width == 16 << 10 && c.sets[0].lun_bytes * 2 == half);
	read_back(half, 0, false);
	cr_assert_eq(restripe(&set0), -EALREADY);
	cr_assert(strstr(cvm_last_error(), "stripe set 0 of volume v is one stripe set of width "
					   "4096 already"), "%s", cvm_last_error());
	cr_assert_eq(restripe(&plain), 0, "%s", cvm_last_error());
	verify(half);
}

/* Online, on one handle kept open (a mount's): a restripe of the second set, then of all,
 * the second taken for the volume as the first left it; every block reads back through
 * that handle as written. */
Test(restripe, online_restripes_follow_one_another_on_one_handle)
{
	uint64_t half = grown_volume(64 << 10);
	struct cvm_config c = config_now(), out;
	cvm_uuid second[2] = {c.luns[2].uuid, c.luns[3].uuid};
	struct cvm_volume *v;
	cr_assert_eq(cvm_volume_open(&scan, "v", CVM_OPEN_RDWR, &v), 0, "%s", cvm_last_error());
	struct cvm_restripe_opts set1 = {.stripe_width = 16 << 10, .luns = second, .nluns = 2};
	cr_assert_eq(cvm_volume_restripe_online(v, &c, &set1, &out), 0, "%s", cvm_last_error());
	cr_assert_eq(out.nsets, 2);
	c = config_now();
	cr_assert_eq(cvm_volume_restripe_online(v, &c, &plain, &out), 0, "%s", cvm_last_error());
	cr_assert_eq(out.nsets, 1);
	uint8_t *b = cvm_alloc_aligned(BLOCK), *want = cvm_alloc_aligned(BLOCK);
	for (uint64_t off = 0; off < 2 * half; off += BLOCK) {
		cr_assert_eq(cvm_volume_read(v, b, BLOCK, off), 0);
		stamp(want, off, off < half ? 1 : 2);
		cr_assert(!memcmp(b, want, BLOCK), "block at %" PRIu64 " is not as written", off);
	}
	free(b);
	free(want);
	cvm_volume_close(v);
	verify(half);
}

Test(restripe, a_volume_that_would_not_fit_is_refused_unchanged)
{
	const char *luns[] = {make_lun("a", LUN_BYTES * 2), make_lun("b", LUN_BYTES * 2),
			      make_lun("c", LUN_BYTES)};
	rescan();
	cr_assert_eq(cvm_volume_create(&scan, "v", luns, 2, NULL, NULL), 0);
	rescan();
	cr_assert_eq(cvm_volume_grow(&scan, "v", luns + 2, 1, NULL, NULL), 0);
	rescan();
	struct cvm_config before, after;
	cr_assert_eq(cvm_scan_find_volume(&scan, "v", &before), 0);
	cr_assert_eq(restripe(&plain), -ENOSPC);
	cr_assert(strstr(cvm_last_error(), "volume v: one stripe set over its 3 LUNs holds"),
		  "%s", cvm_last_error());
	rescan();
	cr_assert_eq(cvm_scan_find_volume(&scan, "v", &after), 0);
	cr_assert_eq(after.generation, before.generation, "a refused restripe wrote a config");
}

Test(restripe, a_missing_lun_is_refused)
{
	grown_volume(256 << 10);
	char *gone;
	cr_assert(asprintf(&gone, "%s/lun3", test_dir) > 0);
	cr_assert_eq(unlink(gone), 0);
	cr_assert_eq(restripe(&plain), -ENODEV);
	cr_assert(strstr(cvm_last_error(), "is missing"), "%s", cvm_last_error());
	free(gone);
}

Test(restripe, a_volume_in_use_is_refused)
{
	grown_volume(256 << 10);
	rescan();
	struct cvm_volume *v;
	cr_assert_eq(cvm_volume_open(&scan, "v", CVM_OPEN_RDWR, &v), 0);
	cr_assert_eq(restripe(&plain), -EBUSY);
	cr_assert(strstr(cvm_last_error(), "another process on this node uses it"), "%s",
		  cvm_last_error());
	cvm_volume_close(v);
}

static void stop_halfway(void *arg, const struct cvm_restripe_progress *p)
{
	(void)arg;
	if (p->moves_done > p->moves_total / 2)
		stop_now = 1;
}

/* Written through the volume while the restripe is paused: half with synchronous writes,
 * half through libaio, each block where the restripe left its chunk. */
static void overwrite(uint64_t size, uint64_t seed)
{
	struct cvm_volume *v;
	struct cvm_aio *aio;
	rescan();
	cr_assert_eq(cvm_volume_open(&scan, "v", CVM_OPEN_RDWR, &v), 0, "%s", cvm_last_error());
	cr_assert_eq(cvm_aio_create(v, 8, &aio), 0);
	uint8_t *b = cvm_alloc_aligned(BLOCK);
	for (uint64_t off = 0; off < size; off += BLOCK) {
		stamp(b, off, seed);
		if (off / BLOCK % 2) {
			cr_assert_eq(cvm_volume_write(v, b, BLOCK, off), 0);
			continue;
		}
		int64_t result = 1;
		cr_assert_eq(cvm_aio_submit(aio, CVM_WRITE, b, BLOCK, off, set_result, &result), 0);
		while (result == 1)
			cr_assert_geq(cvm_aio_poll(aio, 1, NULL), 0);
		cr_assert_eq(result, BLOCK);
	}
	cr_assert_eq(cvm_volume_flush(v), 0);
	free(b);
	cvm_aio_destroy(aio);
	cvm_volume_close(v);
}

Test(restripe, a_paused_volume_is_used_where_its_chunks_are)
{
	uint64_t half = grown_volume(64 << 10);
	stop_now = 0;
	struct cvm_restripe_opts o = {.stop = &stop_now, .progress = stop_halfway};
	cr_assert_eq(restripe(&o), -EINTR);
	read_back(half, 0, false);
	overwrite(2 * half, 3);
	read_back(half, 3, false);
	cr_assert_eq(restripe(&plain), 0, "%s", cvm_last_error());
	read_back(half, 3, true);
}

Test(restripe, a_batch_cut_short_must_be_finished_before_use)
{
	uint64_t half = grown_volume(256 << 10);
	save_luns();
	struct cvm_config c = {0};
	for (long k = 1; k < 200 && !c.restripe.staged; k++) { /* a crash between record and place */
		restore_luns();
		cr_assert(crash_after(k));
		rescan();
		cr_assert_eq(cvm_scan_find_volume(&scan, "v", &c), 0);
	}
	cr_assert_gt(c.restripe.staged, 0, "no crash point left a batch staged");
	struct cvm_volume *v;
	cr_assert_eq(cvm_volume_open(&scan, "v", CVM_OPEN_RDONLY, &v), -EBUSY);
	cr_assert(strstr(cvm_last_error(), "interrupted in the middle of a batch; run 'cvm restripe v'"),
		  "%s", cvm_last_error());
	cr_assert_eq(restripe(&plain), 0, "%s", cvm_last_error());
	verify(half);
}

/* ---- online: users on this node while the restripe runs (cvm/restripe_gate.c) ---- */

#define USERS 3 /* processes; the restriper's own handle is user USERS */

struct user {
	struct cvm_volume *v;
	unsigned index;
	uint64_t size, half;
	uint32_t *version; /* of each block this user owns (block % (USERS + 1) == index) */
	unsigned ops;
};

static uint32_t first_version(const struct user *u, uint64_t off) { return off < u->half ? 1 : 2; }

/* Users run in child processes and a thread, where criterion's asserts cannot report: a
 * failure is printed, and ends the process (exit 2) or the thread (user_failed). */
static _Thread_local enum { IN_TEST, IN_PROCESS, IN_THREAD } user_where;
static volatile int user_failed;
#define user_assert(cond, ...)                                                                  \
	do {                                                                                    \
		if (cond)                                                                       \
			break;                                                                  \
		if (user_where == IN_TEST)                                                      \
			cr_assert(cond, __VA_ARGS__);                                           \
		fprintf(stderr, __VA_ARGS__);                                                   \
		fprintf(stderr, " (%s)\n", cvm_last_error());                                   \
		if (user_where == IN_PROCESS)                                                   \
			_exit(2);                                                               \
		user_failed = 1;                                                                \
		pthread_exit(NULL);                                                             \
	} while (0)

/* A block's stamp carries its version as the seed. */
static void user_write(struct user *u, struct cvm_aio *aio, uint64_t blk, uint8_t *b)
{
	uint64_t off = blk * BLOCK;
	uint32_t ver = ++u->version[blk / (USERS + 1)] + 2;
	stamp(b, off, ver);
	if (!aio) {
		user_assert(cvm_volume_write(u->v, b, BLOCK, off) == 0, "user %u: write", u->index);
		return;
	}
	int64_t result = 1;
	user_assert(cvm_aio_submit(aio, CVM_WRITE, b, BLOCK, off, set_result, &result) == 0, "submit");
	while (result == 1)
		user_assert(cvm_aio_poll(aio, 1, NULL) >= 0, "poll");
	user_assert(result == BLOCK, "user %u: aio result %" PRId64, u->index, result);
}

static void user_check(struct user *u, struct cvm_aio *aio, uint64_t blk, uint8_t *b,
		       uint8_t *want)
{
	uint64_t off = blk * BLOCK;
	uint32_t n = u->version[blk / (USERS + 1)];
	stamp(want, off, n ? n + 2 : first_version(u, off));
	if (!aio) {
		user_assert(cvm_volume_read(u->v, b, BLOCK, off) == 0, "user %u: read", u->index);
	} else {
		int64_t result = 1;
		user_assert(cvm_aio_submit(aio, CVM_READ, b, BLOCK, off, set_result, &result) == 0, "submit");
		while (result == 1)
			user_assert(cvm_aio_poll(aio, 1, NULL) >= 0, "poll");
		user_assert(result == BLOCK, "user %u: aio result %" PRId64, u->index, result);
	}
	user_assert(!memcmp(b, want, BLOCK), "user %u: block at %" PRIu64 " is not as written",
		    u->index, off);
}

/* Told to stop: *flag set, or the pipe's write end closed. */
static bool stopped(const volatile int *flag, int fd)
{
	char c;
	return (flag && *flag) || (fd >= 0 && read(fd, &c, 1) == 0);
}

/* Random reads and writes of the user's own blocks, half synchronous, half through libaio,
 * until stopped (and at least 50); then every block checked. */
static void user_run(struct user *u, const volatile int *stop, int stop_fd)
{
	struct cvm_aio *aio;
	user_assert(cvm_aio_create(u->v, 4, &aio) == 0, "aio");
	uint8_t *b = cvm_alloc_aligned(BLOCK), *want = cvm_alloc_aligned(BLOCK);
	uint64_t nblocks = u->size / BLOCK, seed = 77 + u->index;
	while (u->ops < 50 || !stopped(stop, stop_fd)) {
		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		uint64_t blk = (seed >> 20) % (nblocks / (USERS + 1)) * (USERS + 1) + u->index;
		struct cvm_aio *how = seed >> 60 & 1 ? aio : NULL;
		if (seed >> 61 & 1)
			user_write(u, how, blk, b);
		else
			user_check(u, how, blk, b, want);
		u->ops++;
	}
	for (uint64_t blk = u->index; blk < nblocks; blk += USERS + 1)
		user_check(u, NULL, blk, b, want);
	free(b);
	free(want);
	cvm_aio_destroy(aio);
}

static void user_init(struct user *u, unsigned index, uint64_t half)
{
	*u = (struct user){.index = index, .size = 2 * half, .half = half};
	u->version = calloc(u->size / BLOCK / (USERS + 1) + 1, sizeof *u->version);
	cr_assert(u->version);
}

static void user_save(const struct user *u)
{
	char *path;
	cr_assert(asprintf(&path, "%s/user%u", test_dir, u->index) > 0);
	FILE *f = fopen(path, "w");
	cr_assert(f);
	cr_assert_eq(fwrite(u->version, sizeof *u->version, u->size / BLOCK / (USERS + 1) + 1, f),
		     u->size / BLOCK / (USERS + 1) + 1);
	fclose(f);
	free(path);
}

static void user_load(struct user *u)
{
	char *path;
	cr_assert(asprintf(&path, "%s/user%u", test_dir, u->index) > 0);
	FILE *f = fopen(path, "r");
	cr_assert(f, "user %u left no record", u->index);
	cr_assert_eq(fread(u->version, sizeof *u->version, u->size / BLOCK / (USERS + 1) + 1, f),
		     u->size / BLOCK / (USERS + 1) + 1);
	fclose(f);
	free(path);
}

struct online {
	uint64_t half;
	pid_t pid[USERS];
	int stop_pipe[2]; /* the users stop when it closes */
	volatile int stop_owner_user;
	struct user owner_user;
	pthread_t owner_thread;
	bool started;
};

/* A user process: opens the volume (the gate exists by then), works until the pipe closes. */
static void user_process(struct online *o, unsigned index)
{
	user_where = IN_PROCESS;
	close(o->stop_pipe[1]);
	fcntl(o->stop_pipe[0], F_SETFL, O_NONBLOCK);
	struct user u;
	user_init(&u, index, o->half);
	rescan();
	user_assert(cvm_volume_open(&scan, "v", CVM_OPEN_RDWR, &u.v) == 0, "user %u: open", index);
	user_run(&u, NULL, o->stop_pipe[0]);
	cvm_volume_close(u.v);
	user_save(&u);
	_exit(0);
}

static void *owner_user_thread(void *arg)
{
	struct online *o = arg;
	user_where = IN_THREAD;
	user_run(&o->owner_user, &o->stop_owner_user, -1);
	return NULL;
}

/* At the restripe's first report the gate exists: the users start. */
static void start_users(void *arg, const struct cvm_restripe_progress *p)
{
	(void)p;
	struct online *o = arg;
	if (o->started)
		return;
	o->started = true;
	for (unsigned i = 0; i < USERS; i++) {
		o->pid[i] = fork();
		cr_assert_geq(o->pid[i], 0);
		if (o->pid[i] == 0)
			user_process(o, i);
	}
	close(o->stop_pipe[0]);
	cr_assert_eq(pthread_create(&o->owner_thread, NULL, owner_user_thread, o), 0);
}

/* The users' blocks read back as each one last wrote them, through a handle opened after. */
static void check_users(struct online *o)
{
	struct user u[USERS + 1];
	struct cvm_volume *v;
	rescan();
	cr_assert_eq(cvm_volume_open(&scan, "v", CVM_OPEN_RDONLY, &v), 0, "%s", cvm_last_error());
	for (unsigned i = 0; i <= USERS; i++) {
		if (i < USERS) {
			user_init(&u[i], i, o->half);
			user_load(&u[i]);
		} else {
			u[i] = o->owner_user;
		}
		u[i].v = v;
		uint8_t *b = cvm_alloc_aligned(BLOCK), *want = cvm_alloc_aligned(BLOCK);
		for (uint64_t blk = i; blk < u[i].size / BLOCK; blk += USERS + 1)
			user_check(&u[i], NULL, blk, b, want);
		free(b);
		free(want);
		if (i < USERS)
			free(u[i].version);
	}
	cvm_volume_close(v);
}

Test(restripe, online_users_on_this_node_keep_their_data)
{
	struct online o = {.half = grown_volume(64 << 10)};
	cr_assert_eq(pipe(o.stop_pipe), 0);
	user_init(&o.owner_user, USERS, o.half);
	rescan();
	cr_assert_eq(cvm_volume_open(&scan, "v", CVM_OPEN_RDWR, &o.owner_user.v), 0);
	struct cvm_restripe_opts opts = {.progress = start_users, .arg = &o};
	struct cvm_config out, now;
	cr_assert_eq(cvm_scan_find_volume(&scan, "v", &now), 0);
	cr_assert_eq(cvm_volume_restripe_online(o.owner_user.v, &now, &opts, &out), 0, "%s",
		     cvm_last_error());
	cr_assert_eq(out.nsets, 1);
	close(o.stop_pipe[1]);
	o.stop_owner_user = 1;
	pthread_join(o.owner_thread, NULL);
	cr_assert_not(user_failed, "the restriper's own handle read something else than written");
	for (unsigned i = 0; i < USERS; i++) {
		int status;
		cr_assert_eq(waitpid(o.pid[i], &status, 0), o.pid[i]);
		cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "user %u failed", i);
	}
	cvm_volume_close(o.owner_user.v);
	check_users(&o);
	free(o.owner_user.version);
	char us[CVM_UUID_STR], gate[128];
	cvm_uuid_format(&out.vol_uuid, us);
	snprintf(gate, sizeof gate, "/dev/shm/cvm-restripe-%s", us);
	cr_assert_neq(access(gate, F_OK), 0, "the restripe left its gate %s behind", gate);
}
