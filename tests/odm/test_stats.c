/* SPDX-License-Identifier: GPL-2.0-or-later */
/* odm/stats.c: histogram, process types from names, the segment's slots and retiring. */
#include "odm/stats.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

Test(stats, histogram_buckets_are_ordered_and_bounded)
{
	unsigned last = 0;
	for (uint64_t us = 0; us < 5000000; us = us < 64 ? us + 1 : us * 9 / 8) {
		unsigned b = odm_hist_bin(us);
		cr_assert(b >= last, "bucket of %llu went down", (unsigned long long)us);
		cr_assert(us < odm_hist_upper(b), "%llu us is not below its bucket's edge",
			  (unsigned long long)us);
		cr_assert(b == 0 || us >= odm_hist_upper(b - 1), "%llu us belongs lower",
			  (unsigned long long)us);
		last = b;
	}
	cr_assert_eq(odm_hist_bin(UINT64_MAX), ODM_HIST_BINS - 1);
}

Test(stats, percentile_of_a_known_spread)
{
	uint64_t h[ODM_HIST_BINS] = {0};
	h[odm_hist_bin(100)] = 98; /* 98 fast, 2 slow */
	h[odm_hist_bin(10000)] = 2;
	cr_assert_eq(odm_hist_percentile(h, 50), odm_hist_upper(odm_hist_bin(100)));
	cr_assert_eq(odm_hist_percentile(h, 99), odm_hist_upper(odm_hist_bin(10000)));
	uint64_t empty[ODM_HIST_BINS] = {0};
	cr_assert_eq(odm_hist_percentile(empty, 99), 0);
}

Test(stats, process_types_from_oracle_names)
{
	cr_assert_eq(odm_ptype_from_name("ora_lgwr_ORCL1"), ODM_PT_LGWR);
	cr_assert_eq(odm_ptype_from_name("ora_dbw0_ORCL1"), ODM_PT_DBWR);
	cr_assert_eq(odm_ptype_from_name("ora_dbwa_ORCL1"), ODM_PT_DBWR);
	cr_assert_eq(odm_ptype_from_name("ora_ckpt_ORCL1"), ODM_PT_CKPT);
	cr_assert_eq(odm_ptype_from_name("ora_arc3_ORCL1"), ODM_PT_ARCH);
	cr_assert_eq(odm_ptype_from_name("ora_p012_ORCL1"), ODM_PT_PQ);
	cr_assert_eq(odm_ptype_from_name("ora_pmon_ORCL1"), ODM_PT_OTHER);
	cr_assert_eq(odm_ptype_from_name("oracleORCL1"), ODM_PT_FOREGROUND);
	cr_assert_eq(odm_ptype_from_name("bash"), ODM_PT_OTHER);
}

Test(stats, names)
{
	cr_assert(odm_name_ok("ORCL_1$#-"));
	cr_assert(!odm_name_ok(""));
	cr_assert(!odm_name_ok("a/b"));
	cr_assert(!odm_name_ok("a.b"));
	cr_assert(!odm_name_ok("0123456789012345678901234567890123"));
	struct odm_segment *seg;
	cr_assert_eq(odm_segment_open("a/b", "x", true, &seg), -EINVAL);
}

/* Counts of a process that ends go to its type's retired totals when its slot is swept (at
 * least every 64 slots handed out): nothing is lost, and the slot is used again. */
Test(stats, retiring_keeps_the_sums)
{
	char inst[32];
	snprintf(inst, sizeof inst, "T%d", (int)getpid());
	struct odm_segment *seg;
	cr_assert_eq(odm_segment_open("UNIT", inst, false, &seg), -ENOENT);
	cr_assert_eq(odm_segment_open("UNIT", inst, true, &seg), 0);
	pid_t child = fork();
	if (child == 0) { /* counts and dies without retiring */
		struct odm_proc_slot *s;
		if (odm_slot_take(seg, ODM_PT_DBWR, &s))
			_exit(1);
		for (int i = 0; i < 10; i++)
			odm_stats_count(s, &seg->files[3], ODM_DIR_WRITE, ODM_MODE_ASYNC, 8192, 100);
		_exit((int)(s - seg->procs));
	}
	/* Exited but not reaped yet (a zombie, as long as its parent does not wait): gone all the
	 * same. */
	siginfo_t info = {0};
	cr_assert_eq(waitid(P_PID, (id_t)child, &info, WEXITED | WNOWAIT), 0);
	cr_assert(info.si_code == CLD_EXITED);
	const struct odm_proc_slot *dead = &seg->procs[info.si_status];
	struct odm_proc_slot *mine, *extra[64];
	unsigned n = 0;
	for (; n < 64; n++) { /* a sweep finds the dead one */
		cr_assert_eq(odm_slot_take(seg, ODM_PT_LGWR, &mine), 0);
		if (mine == dead)
			break;
		extra[n] = mine;
	}
	cr_assert_lt(n, 64u, "the dead process's slot was not swept in 64 takes");
	for (unsigned i = 0; i < n; i++)
		odm_slot_retire(seg, extra[i]);
	waitpid(child, NULL, 0);
	const struct odm_proc_slot *r = &seg->retired[ODM_PT_DBWR];
	cr_assert_eq(r->total[ODM_DIR_WRITE][ODM_MODE_ASYNC].ops, 10);
	cr_assert_eq(r->total[ODM_DIR_WRITE][ODM_MODE_ASYNC].bytes, 81920);
	cr_assert_eq(seg->files[3].count[ODM_DIR_WRITE][ODM_MODE_ASYNC].usec, 1000);
	cr_assert_eq(r->hist[ODM_DIR_WRITE][ODM_MODE_ASYNC][odm_hist_bin(100)], 10);
	odm_stats_count(mine, &seg->files[0], ODM_DIR_READ, ODM_MODE_SYNC, 4096, 7);
	odm_slot_retire(seg, mine);
	cr_assert_eq(seg->retired[ODM_PT_LGWR].total[ODM_DIR_READ][ODM_MODE_SYNC].ops, 1);
	cr_assert_eq(mine->state, ODM_SLOT_FREE);
	odm_segment_close(seg);
	char path[128];
	snprintf(path, sizeof path, "%s/%sUNIT.%s", ODM_SEG_DIR, ODM_SEG_PREFIX, inst);
	unlink(path);
}

static struct odm_segment *fresh_segment(char *path, size_t len)
{
	char inst[32];
	snprintf(inst, sizeof inst, "L%d", (int)getpid());
	snprintf(path, len, "%s/%sUNIT.%s", ODM_SEG_DIR, ODM_SEG_PREFIX, inst);
	unlink(path);
	struct odm_segment *seg;
	cr_assert_eq(odm_segment_open("UNIT", inst, true, &seg), 0);
	return seg;
}

/* The kibibytes the segment's file holds in memory (tmpfs: pages touched). */
static long long segment_kib(const char *path)
{
	struct stat st;
	cr_assert_eq(stat(path, &st), 0);
	return (long long)st.st_blocks / 2;
}

/* 4,096 processes an instance, in memory that follows the slots used. */
Test(stats, an_instance_takes_4096_processes_and_memory_follows_them, .timeout = 120)
{
	char path[128];
	struct odm_segment *seg = fresh_segment(path, sizeof path);
	long long empty = segment_kib(path);
	static struct odm_proc_slot *s[ODM_MAX_PROCS];
	for (unsigned i = 0; i < ODM_MAX_PROCS; i++)
		cr_assert_eq(odm_slot_take(seg, ODM_PT_FOREGROUND, &s[i]), 0, "slot %u", i);
	long long full = segment_kib(path);
	struct odm_proc_slot *more;
	cr_assert_eq(odm_slot_take(seg, ODM_PT_FOREGROUND, &more), -EUSERS);
	cr_assert_lt(empty, 512, "an empty segment holds %lld KiB", empty);
	cr_assert_gt(full, empty + ODM_MAX_PROCS * sizeof **s / 1024 / 2, "%lld -> %lld KiB",
		     empty, full);
	odm_slot_retire(seg, s[100]);
	cr_assert_eq(odm_slot_take(seg, ODM_PT_LGWR, &more), 0, "a slot given back is used again");
	cr_assert_eq(more, s[100]);
	odm_segment_close(seg);
	unlink(path);
}

/* 65,536 files an instance, found by path at once; a freed entry is used again. */
Test(stats, an_instance_identifies_65536_files, .timeout = 120)
{
	char path[128], name[64];
	struct odm_segment *seg = fresh_segment(path, sizeof path);
	unsigned index;
	cr_assert_eq(odm_segment_lock(seg), 0);
	for (unsigned i = 0; i < ODM_MAX_FILES; i++) {
		snprintf(name, sizeof name, "/db/f%u.dbf", i);
		cr_assert_eq(odm_table_add(seg, name, ODM_FILE_USED, getpid(), &index), 0, "%s", name);
		cr_assert_eq(index, i);
	}
	cr_assert_eq(odm_table_add(seg, "/db/one-more.dbf", ODM_FILE_USED, getpid(), &index), -ENFILE);
	for (unsigned i = 0; i < ODM_MAX_FILES; i += 997) {
		snprintf(name, sizeof name, "/db/f%u.dbf", i);
		cr_assert_eq(odm_table_find(seg, name, &index), 0, "%s", name);
		cr_assert_eq(index, i);
	}
	cr_assert_eq(odm_table_find(seg, "/db/f65536.dbf", &index), -ENOENT);
	uint32_t gen = seg->files[4242].gen;
	odm_table_free(seg, 4242);
	cr_assert_eq(odm_table_find(seg, "/db/f4242.dbf", &index), -ENOENT);
	cr_assert_eq(odm_table_add(seg, "/db/new.dbf", ODM_FILE_CREATING, getpid(), &index), 0);
	cr_assert_eq(index, 4242u, "the freed entry is used again");
	cr_assert_neq(seg->files[4242].gen, gen, "with a new generation: old fids are refused");
	cr_assert_eq(odm_table_find(seg, "/db/new.dbf", &index), -ENOENT, "not USED yet");
	odm_segment_unlock(seg);
	odm_segment_close(seg);
	unlink(path);
}
