/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Config changes (change.c) interrupted: a child process runs create, grow or remove and
 * "loses power" after k metadata writes (cvm_fault_crash_after); the parent then assembles the
 * volume and finds the old config or the new one, never a mix, with the data intact. */
#include "cvm_test.h"

#include <errno.h>
#include <sys/wait.h>

static void setup(void) { test_dir_make(); }
static void teardown(void) { test_dir_remove(); }
TestSuite(crash, .init = setup, .fini = teardown, .timeout = 120);

#define LUN_BYTES (20ull << 20)
#define DATA_BYTES (256u << 10)

/* Run fn in a child that crashes after k metadata writes.  Returns true if it crashed, false
 * if it finished first. */
static bool crash_after(long k, int (*fn)(void *), void *arg)
{
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		cvm_fault_crash_after(k);
		_exit(fn(arg) == 0 ? 0 : 1);
	}
	int status;
	waitpid(pid, &status, 0);
	cr_assert(WIFEXITED(status), "child died of a signal");
	int code = WEXITSTATUS(status);
	cr_assert(code == 0 || code == CVM_FAULT_EXIT, "child failed: exit %d", code);
	return code == CVM_FAULT_EXIT;
}

static const char *new_luns[2];
static const char *old_luns[2];

static int do_grow(void *arg)
{
	(void)arg;
	struct cvm_scan s = scan_dir();
	int rc = cvm_volume_grow(&s, "v", new_luns, 2, NULL, NULL);
	cvm_scan_free(&s);
	return rc;
}

static int do_create(void *arg)
{
	(void)arg;
	struct cvm_scan s = scan_dir();
	int rc = cvm_volume_create(&s, "v", old_luns, 2, NULL, NULL);
	cvm_scan_free(&s);
	return rc;
}

static int do_remove(void *arg)
{
	(void)arg;
	struct cvm_scan s = scan_dir();
	int rc = cvm_volume_remove(&s, "v", true);
	cvm_scan_free(&s);
	return rc;
}

static void write_pattern(uint8_t seed)
{
	struct cvm_scan s = scan_dir();
	struct cvm_volume *v;
	cr_assert_eq(cvm_volume_open(&s, "v", CVM_OPEN_RDWR, &v), 0, "%s", cvm_last_error());
	uint8_t *buf = cvm_alloc_aligned(DATA_BYTES);
	memset(buf, seed, DATA_BYTES);
	cr_assert_eq(cvm_volume_write(v, buf, DATA_BYTES, 0), 0);
	cr_assert_eq(cvm_volume_flush(v), 0);
	free(buf);
	cvm_volume_close(v);
	cvm_scan_free(&s);
}

/* Open the volume and return its generation after checking the data and a clean check. */
static uint64_t assemble_and_verify(uint8_t seed)
{
	struct cvm_scan s = scan_dir();
	struct cvm_volume *v;
	cr_assert_eq(cvm_volume_open(&s, "v", CVM_OPEN_RDWR, &v), 0, "%s", cvm_last_error());
	const struct cvm_config *c = cvm_volume_config(v);
	uint64_t gen = c->generation;
	cr_assert(gen == 1 ? c->nluns == 2 && c->nsets == 1 : c->nluns == 4 && c->nsets == 2,
		  "generation %llu with %u LUNs: a mix", (unsigned long long)gen, c->nluns);
	uint8_t *buf = cvm_alloc_aligned(DATA_BYTES);
	cr_assert_eq(cvm_volume_read(v, buf, DATA_BYTES, 0), 0);
	for (size_t i = 0; i < DATA_BYTES; i++)
		cr_assert_eq(buf[i], seed, "data changed at byte %zu", i);
	free(buf);
	cvm_volume_close(v);
	cvm_scan_free(&s);
	/* The RDWR open finished the interrupted change: check finds nothing. */
	s = scan_dir();
	struct cvm_check_report rep;
	cr_assert_eq(cvm_volume_check(&s, "v", false, NULL, NULL, &rep), 0);
	cr_assert_eq(rep.problems, 0, "check found %u problems", rep.problems);
	cvm_scan_free(&s);
	return gen;
}

static void make_luns(void)
{
	old_luns[0] = strdup(make_lun("a0", LUN_BYTES));
	old_luns[1] = strdup(make_lun("a1", LUN_BYTES));
	new_luns[0] = strdup(make_lun("b0", LUN_BYTES));
	new_luns[1] = strdup(make_lun("b1", LUN_BYTES));
}

static void free_luns(void)
{
	for (int i = 0; i < 2; i++) {
		free((void *)old_luns[i]);
		free((void *)new_luns[i]);
	}
}

Test(crash, grow_leaves_old_or_new_config)
{
	/* grow writes 2 labels, then 4 config copies. */
	for (long k = 0; k <= 7; k++) {
		make_luns();
		cr_assert_eq(do_create(NULL), 0, "%s", cvm_last_error());
		write_pattern((uint8_t)(k + 1));
		bool crashed = crash_after(k, do_grow, NULL);
		cr_assert_eq(crashed, k < 6, "k=%ld", k);
		uint64_t gen = assemble_and_verify((uint8_t)(k + 1));
		cr_assert_eq(gen, k <= 2 ? 1u : 2u, "k=%ld: generation %llu", k,
			     (unsigned long long)gen);
		if (gen == 1) /* the LUNs labelled by the crashed grow can be used again */
			cr_assert_eq(do_grow(NULL), 0, "k=%ld: grow again: %s", k, cvm_last_error());
		free_luns();
		test_dir_remove();
		test_dir_make();
	}
}

Test(crash, create_leaves_no_volume_or_a_whole_one)
{
	for (long k = 0; k <= 4; k++) {
		make_luns();
		bool crashed = crash_after(k, do_create, NULL);
		cr_assert_eq(crashed, k < 4, "k=%ld", k);
		struct cvm_scan s = scan_dir();
		struct cvm_config *c = malloc(sizeof *c);
		int rc = cvm_scan_find_volume(&s, "v", c);
		cvm_scan_free(&s);
		free(c);
		if (k <= 2) {
			cr_assert_eq(rc, -ENOENT, "k=%ld: a volume exists before any config", k);
			cr_assert_eq(do_create(NULL), 0, "k=%ld: create again: %s", k, cvm_last_error());
		}
		write_pattern(9);
		cr_assert_eq(assemble_and_verify(9), 1);
		free_luns();
		test_dir_remove();
		test_dir_make();
	}
}

Test(crash, remove_leaves_the_volume_or_reusable_luns)
{
	/* remove writes 2 config wipes, then 2 label wipes. */
	for (long k = 0; k <= 4; k++) {
		make_luns();
		cr_assert_eq(do_create(NULL), 0);
		write_pattern(5);
		bool crashed = crash_after(k, do_remove, NULL);
		cr_assert_eq(crashed, k < 4, "k=%ld", k);
		if (k <= 1) {
			cr_assert_eq(assemble_and_verify(5), 1, "k=%ld", k);
		} else {
			struct cvm_scan s = scan_dir();
			struct cvm_config *c = malloc(sizeof *c);
			cr_assert_eq(cvm_scan_find_volume(&s, "v", c), -ENOENT, "k=%ld", k);
			free(c);
			cvm_scan_free(&s);
			cr_assert_eq(do_create(NULL), 0, "k=%ld: LUNs not reusable: %s", k,
				     cvm_last_error());
		}
		free_luns();
		test_dir_remove();
		test_dir_make();
	}
}
