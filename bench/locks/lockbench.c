/* SPDX-License-Identifier: GPL-2.0-or-later */
/* lockbench: the lock manager's speed, one measurement per run, printed as one JSON line.
 *   cached   N   re-acquire of a lock this node caches (request covered by the cached grant)
 *   first    N   first acquire (and unlock) of N new locks
 *   pingpong N   two processes, on two nodes, take turns with one EX lock N times each; the
 *                turn is kept in the lock value block
 *   ops      SEC request/unlock of this process's own lock for SEC seconds
 *   lease    N   N looks at the membership lease (cfslock_lease_fresh), what every write of
 *                cfsd asks before it is submitted, after waiting for the lease to be fresh
 *   cache    N   take N new locks PR and keep them cached (the limit set with -l), print
 *                how many the table holds and this process's resident growth, then hold
 *                them for -w SEC seconds (other members' memory can be read meanwhile)
 * Options: -b BACKEND (default corosync), -s SPACE, -l CACHE_LIMIT, -w SEC. */
#include "dlm-client/cfslock.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

static void print_latency(const char *what, uint64_t *lat, size_t n, uint64_t total_ns)
{
	qsort(lat, n, sizeof *lat, cmp_u64);
	printf("{\"bench\":\"%s\",\"n\":%zu,\"p50_us\":%.3f,\"p99_us\":%.3f,\"mean_us\":%.3f}\n",
	       what, n, (double)lat[n / 2] / 1e3, (double)lat[n * 99 / 100] / 1e3,
	       (double)total_ns / (double)n / 1e3);
}

static int die(const char *what, int rc)
{
	fprintf(stderr, "lockbench: %s: %s\n", what, strerror(-rc));
	return 1;
}

static long rss_kb(void)
{
	FILE *f = fopen("/proc/self/statm", "r");
	long pages = 0, resident = 0;
	if (f) {
		if (fscanf(f, "%ld %ld", &pages, &resident) != 2)
			resident = 0;
		fclose(f);
	}
	return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

static void count_entry(void *arg, const struct cfslock_dump_entry *e)
{
	(void)e;
	++*(long *)arg;
}

static int cache_many(struct cfslock_client *c, struct cfslock_space *s, long n, long hold_s)
{
	struct cfslock **lk = calloc((size_t)n, sizeof *lk);
	if (!lk)
		return -ENOMEM;
	long before = rss_kb();
	int rc = 0;
	for (long i = 0; i < n && !rc; i++) {
		char name[64];
		snprintf(name, sizeof name, "cache-%u-%d-%ld", cfslock_node_id(c), (int)getpid(), i);
		if (!(lk[i] = cfslock_new(s, name, NULL, NULL, NULL)))
			rc = -ENOMEM;
		else if (!(rc = cfslock_request_sync(lk[i], CFSLOCK_PR, 0)))
			rc = cfslock_release(lk[i]);
		while (cfslock_dispatch(c) > 0) /* the limit's unlocks complete */
			;
	}
	size_t cached;
	uint64_t given_back;
	cfslock_cache_counts(c, &cached, &given_back);
	long entries = 0;
	cfslock_dump(s, count_entry, &entries);
	printf("{\"bench\":\"cache\",\"n\":%ld,\"cached\":%zu,\"given_back\":%" PRIu64
	       ",\"table_entries\":%ld,\"rss_growth_kb\":%ld}\n",
	       n, cached, given_back, entries, rss_kb() - before);
	fflush(stdout);
	sleep((unsigned)hold_s);
	for (long i = 0; i < n; i++)
		if (lk[i]) {
			if (cfslock_mode(lk[i]) >= 0)
				cfslock_unlock_sync(lk[i]);
			cfslock_free(lk[i]);
		}
	free(lk);
	return rc;
}

int main(int argc, char **argv)
{
	const char *backend = "corosync", *space = "bench";
	long cache_limit = 0, hold_s = 0;
	int opt;
	while ((opt = getopt(argc, argv, "b:s:l:w:")) != -1) {
		if (opt == 'b')
			backend = optarg;
		else if (opt == 's')
			space = optarg;
		else if (opt == 'l')
			cache_limit = strtol(optarg, NULL, 10);
		else if (opt == 'w')
			hold_s = strtol(optarg, NULL, 10);
		else
			return 2;
	}
	if (argc - optind != 2) {
		fprintf(stderr, "usage: lockbench [-b BACKEND] [-s SPACE] [-l LIMIT] [-w SEC] "
				"cached|first|pingpong|ops|cache|lease N\n");
		return 2;
	}
	const char *mode = argv[optind];
	long n = strtol(argv[optind + 1], NULL, 10);
	struct cfslock_client *c;
	struct cfslock_space *s;
	int rc = cfslock_client_open(backend, NULL, &c);
	if (rc || (rc = cfslock_space_open(c, space, &s)))
		return die("open", rc);
	cfslock_set_cache_limit(c, (size_t)cache_limit);
	char name[64];
	uint64_t *lat = calloc((size_t)(n > 0 ? n : 1), sizeof *lat);
	if (!strcmp(mode, "cached")) {
		snprintf(name, sizeof name, "cached-%u-%d", cfslock_node_id(c), (int)getpid());
		struct cfslock *lk = cfslock_new(s, name, NULL, NULL, NULL);
		if ((rc = cfslock_request_sync(lk, CFSLOCK_EX, 0)) || (rc = cfslock_release(lk)))
			return die("lock", rc);
		uint64_t t0 = now_ns();
		for (long i = 0; i < n; i++)
			if (cfslock_request_sync(lk, CFSLOCK_EX, 0) || cfslock_release(lk))
				return die("re-acquire", -EIO);
		uint64_t total = now_ns() - t0;
		printf("{\"bench\":\"cached\",\"n\":%ld,\"mean_ns\":%.1f}\n", n,
		       (double)total / (double)n);
		cfslock_unlock_sync(lk);
		cfslock_free(lk);
	} else if (!strcmp(mode, "first")) {
		uint64_t total = 0;
		for (long i = 0; i < n; i++) {
			snprintf(name, sizeof name, "first-%u-%d-%ld", cfslock_node_id(c), (int)getpid(), i);
			struct cfslock *lk = cfslock_new(s, name, NULL, NULL, NULL);
			uint64_t t0 = now_ns();
			if ((rc = cfslock_request_sync(lk, CFSLOCK_EX, 0)))
				return die("lock", rc);
			lat[i] = now_ns() - t0;
			total += lat[i];
			cfslock_unlock_sync(lk);
			cfslock_free(lk);
		}
		print_latency("first", lat, (size_t)n, total);
	} else if (!strcmp(mode, "pingpong")) {
		/* Turn t belongs to node (t % 2 == 0 ? lower : higher) node id: the LVB holds t. */
		struct cfslock *lk = cfslock_new(s, "pingpong", NULL, NULL, NULL);
		long mine = 0;
		uint64_t start = now_ns(), total = 0;
		int side = -1;
		while (mine < n) {
			uint64_t t0 = now_ns();
			if ((rc = cfslock_request_sync(lk, CFSLOCK_EX, 0)))
				return die("lock", rc);
			uint64_t turn = 0;
			if (cfslock_lvb_valid(lk))
				memcpy(&turn, cfslock_lvb(lk), sizeof turn);
			if (side < 0) /* the first to arrive plays the even turns */
				side = (int)(turn % 2);
			if ((int)(turn % 2) == side) {
				lat[mine] = now_ns() - t0;
				total += lat[mine++];
				turn++;
				uint8_t v[CFSLOCK_LVB_LEN] = {0};
				memcpy(v, &turn, sizeof turn);
				cfslock_set_lvb(lk, v);
			}
			if ((rc = cfslock_unlock_sync(lk)))
				return die("unlock", rc);
		}
		uint64_t wall = now_ns() - start;
		print_latency("pingpong", lat, (size_t)n, total);
		printf("{\"bench\":\"pingpong_handoff\",\"n\":%ld,\"mean_us\":%.3f}\n", n,
		       (double)wall / (double)(2 * n) / 1e3);
		cfslock_free(lk);
	} else if (!strcmp(mode, "cache")) {
		rc = cache_many(c, s, n, hold_s);
		if (rc)
			return die("cache", rc);
	} else if (!strcmp(mode, "lease")) {
		if ((rc = cfslock_lease_wait(c, 10000)))
			return die("lease", rc);
		long fresh = 0;
		uint64_t t0 = now_ns();
		for (long i = 0; i < n; i++)
			fresh += cfslock_lease_fresh(c);
		uint64_t total = now_ns() - t0;
		printf("{\"bench\":\"lease\",\"n\":%ld,\"fresh\":%ld,\"lease_ms\":%u,\"mean_ns\":%.1f}\n",
		       n, fresh, cfslock_lease_ms(c), (double)total / (double)n);
	} else if (!strcmp(mode, "ops")) {
		snprintf(name, sizeof name, "ops-%u-%d", cfslock_node_id(c), (int)getpid());
		struct cfslock *lk = cfslock_new(s, name, NULL, NULL, NULL);
		uint64_t end = now_ns() + (uint64_t)n * 1000000000ull, count = 0;
		uint64_t t0 = now_ns();
		while (now_ns() < end) {
			if ((rc = cfslock_request_sync(lk, CFSLOCK_EX, 0)) ||
			    (rc = cfslock_unlock_sync(lk)))
				return die("ops", rc);
			count += 2;
		}
		printf("{\"bench\":\"ops\",\"node\":%u,\"ops_per_s\":%.0f}\n", cfslock_node_id(c),
		       (double)count / ((double)(now_ns() - t0) / 1e9));
		cfslock_free(lk);
	} else {
		return die(mode, -EINVAL);
	}
	free(lat);
	cfslock_space_close(s);
	cfslock_client_close(c);
	return 0;
}
