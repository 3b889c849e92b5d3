/* SPDX-License-Identifier: GPL-2.0-or-later */
/* odmbench: random I/O through libodm at a fixed queue depth, for bench/odm/run.sh.
 *   odmbench FILE SIZE_MIB BS DEPTH READ_PCT SECONDS   -> "IOPS MB/s"
 *   odmbench --procs N FILE BS SECONDS                  -> "IOPS MB/s SETUP_S" of N processes,
 *                                                          each doing synchronous random reads
 *                                                          once all have identified the file
 *   odmbench --count-cost N                             -> nanoseconds per counted I/O
 * FILE is created (zeroed) if it does not exist (--procs: it must exist). */
#include "odm/odm.h"
#include "odm/stats.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* What odm_io adds per completed request for the statistics: one odm_stats_count. */
static int count_cost(long n)
{
	struct odm_proc_slot *slot = calloc(1, sizeof *slot);
	struct odm_file_slot *files = calloc(64, sizeof *files);
	if (!slot || !files) {
		free(slot);
		free(files);
		return 1;
	}
	double t0 = now();
	for (long i = 0; i < n; i++)
		odm_stats_count(slot, &files[i % 64], (int)(i & 1), (int)(i >> 1 & 1), 8192,
				(uint64_t)i % 5000);
	double ns = (now() - t0) * 1e9 / (double)n;
	if (slot->total[0][0].ops + slot->total[1][1].ops == 0) /* keep the loop */
		return 1;
	printf("%.1f\n", ns);
	free(slot);
	free(files);
	return 0;
}

/* One process of --procs: identify the file, say so on ready, wait for go to close, then
 * synchronous random reads of bs for secs; how many (-1: failed). */
static long reader(const char *path, uint32_t bs, double secs, int ready, int go,
		   unsigned short seed[3])
{
	odm_fid fid;
	struct odm_fileinfo fi;
	char *buf, c = 1;
	int rc = odm_init("BENCH", "BENCHP");
	if (!rc)
		rc = odm_identify(path, &fid, NULL);
	if (!rc)
		rc = odm_getfileinfo(fid, &fi);
	if (rc || posix_memalign((void **)&buf, 4096, bs)) {
		fprintf(stderr, "odmbench: %s: %s\n", path, rc ? strerror(-rc) : "no memory");
		return -1;
	}
	if (write(ready, &c, 1) != 1 || read(go, &c, 1) != 0) /* go: closed by the parent */
		return -1;
	uint64_t blocks = (fi.size - bs) / fi.block_size + 1;
	long ops = 0;
	for (double end = now() + secs; now() < end; ops++) {
		struct odm_ioc ioc = {.op = ODM_READ, .fid = fid, .buf = buf, .size = bs,
				      .block = (uint64_t)nrand48(seed) % blocks};
		struct odm_ioc *p = &ioc;
		if ((rc = odm_io(&p, 1, &p, 1, NULL, 0, NULL, -1)) < 0 || ioc.status) {
			fprintf(stderr, "odmbench: read: %s\n", strerror(rc < 0 ? -rc : -ioc.status));
			return -1;
		}
	}
	odm_fini();
	return ops;
}

/* N processes, timed from when all have identified the file (as fio times its jobs from
 * when their files are open); how long that setup took is printed too. */
static int procs(int n, const char *path, uint32_t bs, double secs)
{
	int go[2], ready[2], counts[2];
	if (n < 1 || bs < 512 || bs % 512 || secs <= 0 || pipe(go) || pipe(ready) || pipe(counts))
		return 2;
	double t0 = now();
	for (int i = 0; i < n; i++) {
		pid_t pid = fork();
		if (pid < 0)
			return 1;
		if (pid == 0) {
			close(go[1]);
			close(ready[0]);
			unsigned short seed[3] = {(unsigned short)i, 7, (unsigned short)(i >> 16)};
			long ops = reader(path, bs, secs, ready[1], go[0], seed);
			_exit(write(counts[1], &ops, sizeof ops) == sizeof ops && ops >= 0 ? 0 : 1);
		}
	}
	close(go[0]);
	close(ready[1]);
	close(counts[1]);
	char c;
	int up = 0;
	while (up < n && read(ready[0], &c, 1) == 1) /* EOF: every child has set up or died */
		up++;
	double start = now(), setup = start - t0;
	close(go[1]);
	long total = 0, ops;
	int failed = 0;
	while (read(counts[0], &ops, sizeof ops) == sizeof ops)
		total += ops > 0 ? ops : 0;
	for (int i = 0; i < n; i++) {
		int st;
		if (wait(&st) < 0 || !WIFEXITED(st) || WEXITSTATUS(st))
			failed++;
	}
	double t = now() - start;
	if (failed) {
		fprintf(stderr, "odmbench: %d of %d processes failed\n", failed, n);
		return 1;
	}
	printf("%.0f %.1f %.2f\n", total / t, total * (double)bs / t / 1e6, setup);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "--count-cost"))
		return count_cost(atol(argv[2]));
	if (argc == 6 && !strcmp(argv[1], "--procs"))
		return procs(atoi(argv[2]), argv[3], (uint32_t)atoi(argv[4]), atof(argv[5]));
	if (argc != 7) {
		fprintf(stderr, "usage: odmbench FILE SIZE_MIB BS DEPTH READ_PCT SECONDS | "
				"odmbench --procs N FILE BS SECONDS | odmbench --count-cost N\n");
		return 2;
	}
	uint64_t size = strtoull(argv[2], NULL, 10) << 20;
	uint32_t bs = (uint32_t)atoi(argv[3]);
	unsigned depth = (unsigned)atoi(argv[4]), rpct = (unsigned)atoi(argv[5]);
	double secs = atof(argv[6]);
	if (!size || bs < 512 || bs % 512 || !depth || depth > 256 || rpct > 100 || secs <= 0) {
		fprintf(stderr, "odmbench: bad arguments\n");
		return 2;
	}
	int rc = odm_init("BENCH", "BENCH1");
	odm_fid fid;
	if (!rc && (rc = odm_identify(argv[1], &fid, NULL)) == -ENOENT &&
	    (rc = odm_create(argv[1], size, bs, ODM_FT_DATA, &fid)) == 0)
		rc = odm_commit(fid);
	if (rc) {
		fprintf(stderr, "odmbench: %s: %s\n", argv[1], strerror(-rc));
		return 1;
	}
	struct odm_ioc *ioc = calloc(depth, sizeof *ioc), **todo = calloc(depth, sizeof *todo),
		       **done = calloc(depth, sizeof *done);
	char *buf;
	if (!ioc || !todo || !done || posix_memalign((void **)&buf, 4096, (size_t)depth * bs))
		return 1;
	memset(buf, 0x6b, (size_t)depth * bs);
	unsigned short seed[3] = {1, 2, 3};
	struct odm_fileinfo fi;
	if ((rc = odm_getfileinfo(fid, &fi)) || fi.size < bs) {
		fprintf(stderr, "odmbench: %s: %s\n", argv[1], rc ? strerror(-rc) : "too small");
		return 1;
	}
	/* offsets are in the file's blocks (8 KiB as created here), whatever the I/O size */
	uint64_t blocks = (fi.size - bs) / fi.block_size + 1, ops = 0;
	for (unsigned i = 0; i < depth; i++) {
		ioc[i] = (struct odm_ioc){.fid = fid, .buf = buf + (size_t)i * bs, .size = bs};
		todo[i] = &ioc[i];
	}
	unsigned ntodo = depth, inflight = 0;
	double start = now(), end = start + secs;
	while (now() < end || inflight) {
		bool more = now() < end;
		for (unsigned i = 0; more && i < ntodo; i++) {
			todo[i]->op = (unsigned)nrand48(seed) % 100 < rpct ? ODM_READ : ODM_WRITE;
			todo[i]->block = (uint64_t)nrand48(seed) % blocks;
		}
		unsigned n = 0;
		rc = odm_io(todo, more ? ntodo : 0, NULL, 0, done, depth, &n, -1);
		if (rc < 0) {
			fprintf(stderr, "odmbench: odm_io: %s\n", strerror(-rc));
			return 1;
		}
		inflight = inflight + (more ? ntodo : 0) - n;
		for (unsigned i = 0; i < n; i++)
			if (done[i]->status) {
				fprintf(stderr, "odmbench: I/O: %s\n", strerror(-done[i]->status));
				return 1;
			}
		ops += n;
		memcpy(todo, done, n * sizeof *done);
		ntodo = n;
	}
	double t = now() - start;
	printf("%.0f %.1f\n", ops / t, ops * (double)bs / t / 1e6);
	odm_fini();
	return 0;
}
