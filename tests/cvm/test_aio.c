/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Asynchronous I/O through libaio against the synchronous path, on real LUN files. */
#include "cvm/internal.h"
#include "../helpers.h"

#include <errno.h>

static void setup(void) { test_dir_make(); }
static void teardown(void) { test_dir_remove(); }
TestSuite(aio, .init = setup, .fini = teardown);

static struct cvm_volume *make_volume(uint64_t width)
{
	const char *l[3];
	for (int i = 0; i < 3; i++) {
		char name[16];
		snprintf(name, sizeof name, "l%d", i);
		l[i] = strdup(make_lun(name, 20ull << 20));
	}
	const char *paths[] = {test_dir};
	struct cvm_scan s = {0};
	struct cvm_create_opts o = {.stripe_width = width};
	cr_assert_eq(cvm_volume_create(&s, "v", l, 3, &o, NULL), 0, "%s", cvm_last_error());
	cr_assert_eq(cvm_scan_paths(paths, 1, &s), 0);
	struct cvm_volume *v;
	cr_assert_eq(cvm_volume_open(&s, "v", CVM_OPEN_RDWR, &v), 0, "%s", cvm_last_error());
	cvm_scan_free(&s);
	for (int i = 0; i < 3; i++)
		free((void *)l[i]);
	return v;
}

struct done {
	int calls;
	int64_t last;
};

static void on_done(void *arg, int64_t result)
{
	struct done *d = arg;
	d->calls++;
	d->last = result;
}

Test(aio, writes_then_reads_match_sync_path)
{
	struct cvm_volume *v = make_volume(16 << 10);
	struct cvm_aio *aio;
	cr_assert_eq(cvm_aio_create(v, 8, &aio), 0);
	enum { N = 64, LEN = 40 << 10 };
	uint8_t *w = cvm_alloc_aligned((size_t)N * LEN), *r = cvm_alloc_aligned((size_t)N * LEN);
	for (size_t i = 0; i < (size_t)N * LEN; i++)
		w[i] = (uint8_t)(i * 7 + i / 4096);
	struct done d[N] = {0};
	/* Keep 8 in flight: submit until -EAGAIN, then poll. */
	for (int i = 0; i < N;) {
		int rc = cvm_aio_submit(aio, CVM_WRITE, w + (size_t)i * LEN, LEN,
					(uint64_t)i * LEN + 4096, on_done, &d[i]);
		if (rc == -EAGAIN) {
			cr_assert_gt(cvm_aio_poll(aio, 1, NULL), 0);
			continue;
		}
		cr_assert_eq(rc, 0);
		i++;
	}
	while (cvm_aio_inflight(aio))
		cr_assert_geq(cvm_aio_poll(aio, 1, NULL), 0);
	for (int i = 0; i < N; i++) {
		cr_assert_eq(d[i].calls, 1);
		cr_assert_eq(d[i].last, LEN);
	}
	cr_assert_eq(cvm_volume_read(v, r, (size_t)N * LEN, 4096), 0);
	cr_assert_eq(memcmp(w, r, (size_t)N * LEN), 0, "async writes differ from sync read");

	/* One read far larger than the context's iocb slots: pieces queue and resubmit. */
	memset(r, 0, (size_t)N * LEN);
	struct done big = {0};
	cr_assert_eq(cvm_aio_submit(aio, CVM_READ, r, (size_t)N * LEN, 4096, on_done, &big), 0);
	while (big.calls == 0)
		cr_assert_geq(cvm_aio_poll(aio, 1, NULL), 0);
	cr_assert_eq(big.last, (int64_t)N * LEN);
	cr_assert_eq(memcmp(w, r, (size_t)N * LEN), 0, "large async read differs");
	cvm_aio_destroy(aio);
	cvm_volume_close(v);
	free(w);
	free(r);
}

/* A context starts small (fs.aio-max-nr is shared by every process of the machine) and
 * doubles while pieces wait for room; requests in the old one complete from it. */
Test(aio, the_context_grows_with_what_is_in_flight)
{
	struct cvm_volume *v = make_volume(16 << 10);
	struct cvm_aio *aio;
	enum { N = 64, LEN = 40 << 10 };
	cr_assert_eq(cvm_aio_create(v, N, &aio), 0);
	unsigned first = cvm_aio_context_events(aio);
	cr_assert_leq(first, 16u, "a new context takes %u events", first);
	uint8_t *w = cvm_alloc_aligned((size_t)N * LEN), *r = cvm_alloc_aligned((size_t)N * LEN);
	for (size_t i = 0; i < (size_t)N * LEN; i++)
		w[i] = (uint8_t)(i * 13 + i / 4096);
	struct done d[N] = {0};
	for (int i = 0; i < N; i++) /* 3 to 4 pieces each: far more than 16 at once */
		cr_assert_eq(cvm_aio_submit(aio, CVM_WRITE, w + (size_t)i * LEN, LEN,
					    (uint64_t)i * LEN, on_done, &d[i]), 0);
	unsigned grown = cvm_aio_context_events(aio);
	cr_assert_gt(grown, first, "the context stayed at %u events", grown);
	while (cvm_aio_inflight(aio))
		cr_assert_geq(cvm_aio_poll(aio, 1, NULL), 0);
	for (int i = 0; i < N; i++)
		cr_assert_eq(d[i].last, LEN, "request %d: %lld", i, (long long)d[i].last);
	cr_assert_leq(cvm_aio_context_events(aio), (unsigned)N * 4);
	cr_assert_eq(cvm_volume_read(v, r, (size_t)N * LEN, 0), 0);
	cr_assert_eq(memcmp(w, r, (size_t)N * LEN), 0, "writes through a growing context differ");
	cvm_aio_destroy(aio);
	cvm_volume_close(v);
	free(w);
	free(r);
}

Test(aio, bad_requests_are_refused)
{
	struct cvm_volume *v = make_volume(256 << 10);
	struct cvm_aio *aio;
	cr_assert_eq(cvm_aio_create(v, 2, &aio), 0);
	uint8_t *buf = cvm_alloc_aligned(8192);
	struct done d = {0};
	uint64_t size = cvm_volume_size(v);
	cr_assert_eq(cvm_aio_submit(aio, CVM_READ, buf + 1, 4096, 0, on_done, &d), -EINVAL);
	cr_assert_eq(cvm_aio_submit(aio, CVM_READ, buf, 1000, 0, on_done, &d), -EINVAL);
	cr_assert_eq(cvm_aio_submit(aio, CVM_READ, buf, 4096, size, on_done, &d), -ERANGE);
	cr_assert_eq(cvm_aio_submit(aio, CVM_READ, buf, 0, 0, on_done, &d), -EINVAL);
	cr_assert_eq(d.calls, 0);
	cvm_aio_destroy(aio);
	cr_assert_eq(cvm_aio_create(v, 0, &aio), -EINVAL);
	free(buf);
	cvm_volume_close(v);
}

Test(aio, timeout_returns_with_nothing_done)
{
	struct cvm_volume *v = make_volume(256 << 10);
	struct cvm_aio *aio;
	cr_assert_eq(cvm_aio_create(v, 4, &aio), 0);
	struct timespec zero = {0, 0};
	cr_assert_eq(cvm_aio_poll(aio, 1, &zero), 0);
	cvm_aio_destroy(aio);
	cvm_volume_close(v);
}

/* A write gate (a cluster node's membership lease) that says no: writes fail with its answer
 * before they reach a LUN, synchronous or not, and reads still go. */
static int gate_answer;
static unsigned gate_asked;
static int gate(void *arg)
{
	(void)arg;
	gate_asked++;
	return gate_answer;
}

Test(aio, a_write_gate_that_says_no_keeps_writes_off_the_luns)
{
	struct cvm_volume *v = make_volume(256 << 10);
	struct cvm_aio *aio;
	cr_assert_eq(cvm_aio_create(v, 4, &aio), 0);
	uint8_t *buf = cvm_alloc_aligned(8192), *back = cvm_alloc_aligned(8192);
	memset(buf, 'a', 8192);
	cr_assert_eq(cvm_volume_write(v, buf, 8192, 0), 0);
	cvm_volume_set_write_gate(v, gate, NULL);
	gate_answer = 0;
	memset(buf, 'b', 8192);
	cr_assert_eq(cvm_volume_write(v, buf, 4096, 0), 0, "a gate that says yes lets it go");
	cr_assert_gt(gate_asked, 0);
	gate_answer = -EIO;
	memset(buf, 'c', 8192);
	cr_assert_eq(cvm_volume_write(v, buf, 8192, 0), -EIO);
	struct done d = {0};
	cr_assert_eq(cvm_aio_submit(aio, CVM_WRITE, buf, 8192, 0, on_done, &d), 0);
	while (!d.calls)
		cr_assert_geq(cvm_aio_poll(aio, 1, NULL), 0);
	cr_assert_eq(d.last, -EIO, "an asynchronous write fails with the gate's answer");
	cr_assert_eq(cvm_volume_read(v, back, 8192, 0), 0, "reads do not ask the gate");
	for (int i = 0; i < 8192; i++)
		cr_assert_eq(back[i], i < 4096 ? 'b' : 'a', "byte %d reached the LUN past the gate", i);
	cvm_aio_destroy(aio);
	cvm_volume_close(v);
	free(buf);
	free(back);
}
