/* SPDX-License-Identifier: GPL-2.0-or-later */
/* odmload: an Oracle-like load through libodm, loaded with dlopen() as a database loads it.
 *
 * Creates the datafiles and a redo log of an instance (or identifies them when they exist),
 * then forks processes named like Oracle's, each doing its part for a set time:
 *   oltp: foregrounds (oracleSID) doing sync random single-block reads, a database writer
 *         (ora_dbw0_SID) writing async batches, a log writer (ora_lgwr_SID) doing sequential
 *         sync writes;
 *   scan: parallel query slaves (ora_pNNN_SID) doing large async reads, a database writer
 *         writing async bursts every two seconds.
 * Offsets come from --seed, so a run can be repeated.  --instances N starts N instances at
 * once (databases DB1..DBN, instances INSTANCE1..INSTANCEN), as a node of a consolidated
 * cluster runs them. */
#include "odm/odm.h"
#include "tools/version.h"

#include <dlfcn.h>
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_FILES 32
#define MAX_DEPTH 64

static struct {
	int (*discover)(const char *);
	int (*init)(const char *, const char *);
	int (*fini)(void);
	int (*identify)(const char *, odm_fid *, uint64_t *);
	int (*create)(const char *, uint64_t, uint32_t, enum odm_ftype, odm_fid *);
	int (*commit)(odm_fid);
	int (*io)(struct odm_ioc *const *, unsigned, struct odm_ioc *const *, unsigned,
		  struct odm_ioc **, unsigned, unsigned *, int64_t);
} odm;

#define MAX_PROCS 4000 /* of an instance; its processes get an Oracle-like name each */
#define MAX_INSTANCES 1000

struct opts {
	const char *dir, *db, *instance, *lib, *profile, *until;
	double seconds;
	long seed, files, fgs, pqs, instances, think_ms;
	uint64_t file_mib, redo_mib;
	uint32_t block;
};

static struct opts o = {.db = "ORCL", .instance = "ORCL1", .lib = "libodm.so",
			.profile = "oltp", .seconds = 10, .seed = 1, .files = 2, .fgs = 2,
			.pqs = 2, .file_mib = 64, .redo_mib = 64, .block = 8192, .instances = 1};
static odm_fid data[MAX_FILES], redo;

static void die(const char *what, int rc)
{
	fprintf(stderr, "odmload: %s: %s\n", what, strerror(rc < 0 ? -rc : rc));
	exit(1);
}

static void load_library(void)
{
	void *h = dlopen(o.lib, RTLD_NOW);
	if (!h) {
		fprintf(stderr, "odmload: %s (give --lib PATH to libodm.so)\n", dlerror());
		exit(1);
	}
#define SYM(field, name)                                                                       \
	if (!(*(void **)&odm.field = dlsym(h, name))) {                                       \
		fprintf(stderr, "odmload: %s has no %s\n", o.lib, name);                        \
		exit(1);                                                                       \
	}
	SYM(discover, "odm_discover")
	SYM(init, "odm_init")
	SYM(fini, "odm_fini")
	SYM(identify, "odm_identify")
	SYM(create, "odm_create")
	SYM(commit, "odm_commit")
	SYM(io, "odm_io")
#undef SYM
}

/* The file at path: identified if it exists, else created and committed. */
static odm_fid open_file(const char *name, uint64_t size, enum odm_ftype type)
{
	char path[4096];
	odm_fid fid;
	snprintf(path, sizeof path, "%s/%s", o.dir, name);
	int rc = odm.identify(path, &fid, NULL);
	if (rc == -ENOENT && (rc = odm.create(path, size, o.block, type, &fid)) == 0)
		rc = odm.commit(fid);
	if (rc)
		die(path, rc);
	return fid;
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Whether to go on: until the end, or with --until FILE until that file exists (looked for
 * every 0.2 s), so that a test holds every process running for as long as it needs. */
static bool running(double end)
{
	static double looked;
	double t = now();
	if (!o.until)
		return t < end;
	if (t - looked < 0.2)
		return true;
	looked = t;
	return access(o.until, F_OK) != 0;
}

static void *buffer(size_t size)
{
	void *b;
	if (posix_memalign(&b, 4096, size))
		die("buffer", ENOMEM);
	memset(b, 0x5a, size);
	return b;
}

static uint64_t random_block(unsigned short seed[3], uint32_t size)
{
	uint64_t blocks = o.file_mib * 1048576 / o.block - size / o.block;
	return (uint64_t)nrand48(seed) % (blocks + 1);
}

static void check(struct odm_ioc *ioc)
{
	if (ioc->status)
		die(ioc->op == ODM_READ ? "read" : "write", ioc->status);
}

/* Sync: submit and wait in one call. */
static void sync_io(int op, odm_fid fid, uint64_t block, void *buf, uint32_t size)
{
	struct odm_ioc ioc = {.op = op, .fid = fid, .block = block, .buf = buf, .size = size};
	struct odm_ioc *p = &ioc;
	int rc = odm.io(&p, 1, &p, 1, NULL, 0, NULL, -1);
	if (rc < 0)
		die("odm_io", rc);
	check(&ioc);
}

/* Async: submit n in one call, wait for them in another. */
static void async_batch(int op, unsigned n, uint32_t size, unsigned short seed[3], void *buf)
{
	struct odm_ioc ioc[MAX_DEPTH], *p[MAX_DEPTH];
	for (unsigned i = 0; i < n; i++) {
		odm_fid fid = data[nrand48(seed) % o.files];
		ioc[i] = (struct odm_ioc){.op = op, .fid = fid, .block = random_block(seed, size),
					  .buf = (char *)buf + (size_t)i * size, .size = size};
		p[i] = &ioc[i];
	}
	int rc = odm.io(p, n, NULL, 0, NULL, 0, NULL, 0);
	if (rc >= 0)
		rc = odm.io(NULL, 0, p, n, NULL, 0, NULL, -1);
	if (rc < 0)
		die("odm_io", rc);
	for (unsigned i = 0; i < n; i++)
		check(&ioc[i]);
}

static void pause_s(double s)
{
	struct timespec ts = {(time_t)s, (long)((s - (time_t)s) * 1e9)};
	nanosleep(&ts, NULL);
}

static void foreground(unsigned short seed[3], double end)
{
	void *buf = buffer(o.block);
	do {
		sync_io(ODM_READ, data[nrand48(seed) % o.files], random_block(seed, o.block), buf,
			o.block);
		if (o.think_ms)
			pause_s((double)o.think_ms / 1000);
	} while (running(end));
}

static void dbwr(unsigned short seed[3], double end, bool bursts)
{
	void *buf = buffer((size_t)MAX_DEPTH * o.block);
	do {
		if (bursts) {
			for (int i = 0; i < 4; i++)
				async_batch(ODM_WRITE, MAX_DEPTH, o.block, seed, buf);
			pause_s(2);
		} else {
			async_batch(ODM_WRITE, 16, o.block, seed, buf);
			pause_s(o.think_ms ? (double)o.think_ms / 1000 : 0.02);
		}
	} while (running(end));
}

static void lgwr(double end)
{
	const uint32_t size = 16384;
	void *buf = buffer(size);
	uint64_t blocks = o.redo_mib * 1048576 / o.block, per = size / o.block, b = 0;
	do {
		sync_io(ODM_WRITE, redo, b, buf, size);
		b = b + 2 * per > blocks ? 0 : b + per;
		pause_s(o.think_ms ? (double)o.think_ms / 1000 : 0.002);
	} while (running(end));
}

/* Large async reads, four in flight, each replaced as it completes. */
static void pq_slave(unsigned short seed[3], double end)
{
	const uint32_t size = 1 << 20;
	const unsigned depth = 4;
	void *buf = buffer((size_t)depth * size);
	struct odm_ioc ioc[4], *done[4];
	for (unsigned i = 0; i < depth; i++)
		ioc[i] = (struct odm_ioc){.op = ODM_READ, .buf = (char *)buf + (size_t)i * size,
					  .size = size};
	struct odm_ioc *todo[4];
	unsigned ntodo = depth, inflight = 0;
	for (unsigned i = 0; i < depth; i++)
		todo[i] = &ioc[i];
	bool go = true;
	while (go || inflight) {
		for (unsigned i = 0; i < ntodo; i++) {
			todo[i]->fid = data[nrand48(seed) % o.files];
			todo[i]->block = random_block(seed, size) / (size / o.block) * (size / o.block);
		}
		unsigned n = 0, submit = go ? ntodo : 0;
		int rc = odm.io(todo, submit, NULL, 0, done, depth, &n, -1);
		if (rc < 0)
			die("odm_io", rc);
		inflight += submit - n;
		for (unsigned i = 0; i < n; i++)
			check(done[i]);
		memcpy(todo, done, n * sizeof *done);
		ntodo = n;
		go = go && running(end);
	}
}

static pid_t spawn(const char *role, int index)
{
	pid_t pid = fork();
	if (pid)
		return pid;
	char name[16];
	if (!strcmp(role, "fg"))
		snprintf(name, sizeof name, "oracle%s", o.instance);
	else if (!strcmp(role, "pq"))
		snprintf(name, sizeof name, "ora_p%03d_%s", index, o.instance);
	else
		snprintf(name, sizeof name, "ora_%s_%s", role, o.instance);
	prctl(PR_SET_NAME, name); /* libodm takes the process type from it */
	int rc = odm.init(o.db, o.instance);
	if (rc)
		die("odm_init", rc);
	unsigned short seed[3] = {(unsigned short)o.seed, (unsigned short)index,
				  (unsigned short)(role[0] * 31 + role[1])};
	double end = now() + o.seconds;
	bool scan = !strcmp(o.profile, "scan");
	if (!strcmp(role, "fg"))
		foreground(seed, end);
	else if (!strcmp(role, "dbw0"))
		dbwr(seed, end, scan);
	else if (!strcmp(role, "lgwr"))
		lgwr(end);
	else
		pq_slave(seed, end);
	odm.fini();
	_exit(0);
}

static void usage(FILE *f)
{
	fprintf(f, "usage: odmload --dir DIR [--db NAME] [--instance NAME] [--profile oltp|scan]\n"
		   "               [--seconds N] [--seed N] [--files N] [--file-mib N] [--procs N]\n"
		   "               [--redo-mib N] [--instances N] [--think-ms N] [--until FILE]\n"
		   "               [--lib PATH]\n"
		   "An Oracle-like load through libodm on a CFS directory (see odmload(1)).\n"
		   "  --profile oltp  sync 8 KiB random reads (foregrounds), async write batches\n"
		   "                  (dbw0), sequential sync redo writes (lgwr)   [default]\n"
		   "  --profile scan  1 MiB async reads (pNNN), async write bursts (dbw0)\n"
		   "  --procs N       foregrounds (oltp) or query slaves (scan), default 2\n"
		   "  --instances N   N instances at once: databases NAME1..NAMEN with\n"
		   "                  instances NAME1..NAMEN, each with its own files\n"
		   "  --until FILE    run until FILE exists instead of --seconds (every process\n"
		   "                  does at least one I/O first)\n"
		   "  --think-ms N    the pause of a foreground between reads, of dbw0\n"
		   "                  between batches, of lgwr between writes (default 0, 20, 2)\n"
		   "  --lib PATH      libodm.so to dlopen (default: the loader's search path)\n");
}

static void parse(int argc, char **argv)
{
	static const struct option longs[] = {
		{"dir", 1, NULL, 'd'},   {"db", 1, NULL, 'D'},      {"instance", 1, NULL, 'I'},
		{"profile", 1, NULL, 'p'}, {"seconds", 1, NULL, 's'}, {"seed", 1, NULL, 'S'},
		{"files", 1, NULL, 'f'}, {"file-mib", 1, NULL, 'm'}, {"procs", 1, NULL, 'n'},
		{"lib", 1, NULL, 'l'},   {"redo-mib", 1, NULL, 'r'}, {"instances", 1, NULL, 'i'},
		{"think-ms", 1, NULL, 't'}, {"until", 1, NULL, 'u'}, {"version", 0, NULL, 'V'}, {"help", 0, NULL, 'h'},
		{NULL, 0, NULL, 0}};
	int c;
	char *end = NULL;
	while ((c = getopt_long(argc, argv, "hV", longs, NULL)) != -1) {
		long v = optarg ? strtol(optarg, &end, 10) : 0;
		bool number = optarg && *optarg && !*end && v > 0;
		switch (c) {
		case 'd': o.dir = optarg; break;
		case 'D': o.db = optarg; break;
		case 'I': o.instance = optarg; break;
		case 'l': o.lib = optarg; break;
		case 'p': o.profile = optarg; break;
		case 's': o.seconds = (double)v; break;
		case 'S': o.seed = v; break;
		case 'f': o.files = v; break;
		case 'm': o.file_mib = (uint64_t)v; break;
		case 'n': o.fgs = o.pqs = v; break;
		case 'r': o.redo_mib = (uint64_t)v; break;
		case 'i': o.instances = v; break;
		case 't': o.think_ms = v; break;
		case 'u': o.until = optarg; break;
		case 'V': print_version("odmload"); exit(0);
		case 'h': usage(stdout); exit(0);
		default: usage(stderr); exit(2);
		}
		if (strchr("sSfmnrit", c) && !number) {
			const struct option *l = longs;
			while (l->val != c)
				l++;
			fprintf(stderr, "odmload: --%s '%s': give a whole number above 0\n", l->name,
				optarg);
			exit(2);
		}
	}
	if (!o.dir || optind < argc) {
		fprintf(stderr, "odmload: %s\n", o.dir ? "unexpected arguments" : "--dir DIR is needed");
		usage(stderr);
		exit(2);
	}
	if (strcmp(o.profile, "oltp") && strcmp(o.profile, "scan")) {
		fprintf(stderr, "odmload: --profile '%s': oltp or scan\n", o.profile);
		exit(2);
	}
	if (o.files > MAX_FILES || o.fgs > MAX_PROCS - 3 || o.file_mib < 2 || o.redo_mib < 2 ||
	    o.instances > MAX_INSTANCES) {
		fprintf(stderr, "odmload: at most %d files of at least 2 MiB, a redo log of at least "
			"2 MiB, at most %d procs, at most %d instances\n", MAX_FILES, MAX_PROCS - 3,
			MAX_INSTANCES);
		exit(2);
	}
}

/* How many of the children did not exit 0. */
static int wait_all(const pid_t *pids, long n)
{
	int failed = 0;
	for (long i = 0; i < n; i++) {
		int st;
		if (waitpid(pids[i], &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st))
			failed++;
	}
	return failed;
}

/* One instance: its files, its processes; the exit status says whether all of them ran. */
static int run_instance(void)
{
	int rc = odm.init(o.db, o.instance);
	if (rc)
		die("odm_init (database and instance: 1-31 of A-Z a-z 0-9 _ $ # -)", rc);
	char name[64];
	for (long i = 0; i < o.files; i++) {
		snprintf(name, sizeof name, "%s_data%02ld.dbf", o.instance, i + 1);
		data[i] = open_file(name, o.file_mib << 20, ODM_FT_DATA);
	}
	snprintf(name, sizeof name, "%s_redo01.log", o.instance);
	redo = open_file(name, o.redo_mib << 20, ODM_FT_REDO);
	pid_t pids[MAX_PROCS];
	int n = 0;
	if (!strcmp(o.profile, "oltp")) {
		pids[n++] = spawn("dbw0", 0); /* the background processes first, as Oracle does */
		pids[n++] = spawn("lgwr", 0);
		for (long i = 0; i < o.fgs; i++)
			pids[n++] = spawn("fg", (int)i);
	} else {
		pids[n++] = spawn("dbw0", 0);
		for (long i = 0; i < o.pqs; i++)
			pids[n++] = spawn("pq", (int)i);
	}
	int failed = wait_all(pids, n);
	odm.fini();
	printf("odmload: %s/%s %s for %.0f s: %d processes, %d failed (odmstat --instance %s)\n",
	       o.db, o.instance, o.profile, o.seconds, n, failed, o.instance);
	return failed ? 1 : 0;
}

int main(int argc, char **argv)
{
	parse(argc, argv);
	load_library();
	int rc = odm.discover(o.dir);
	if (rc <= 0) {
		fprintf(stderr, "odmload: %s: %s\n", o.dir,
			rc == 0 ? "not on a CFS mount (mount one with `cfs mount`)" : strerror(-rc));
		return 1;
	}
	if (o.instances == 1)
		return run_instance();
	static pid_t pids[MAX_INSTANCES];
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (long i = 0; i < o.instances; i++) {
		if ((pids[i] = fork()) < 0)
			die("fork", errno);
		if (pids[i] == 0) { /* instance i + 1: NAME1, NAME2... */
			static char db[48], instance[48];
			snprintf(db, sizeof db, "%.24s%ld", o.db, i + 1);
			snprintf(instance, sizeof instance, "%.24s%ld", o.instance, i + 1);
			o.db = db;
			o.instance = instance;
			o.seed += i;
			_exit(run_instance());
		}
	}
	int failed = wait_all(pids, o.instances);
	printf("odmload: %ld instances, %d failed\n", o.instances, failed);
	return failed ? 1 : 0;
}
