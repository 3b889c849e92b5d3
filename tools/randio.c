/* SPDX-License-Identifier: GPL-2.0-or-later */
/* randio: the field's random-I/O micro-benchmark (after PolyServe's randio kit).  N streams,
 * each a process with its own 8 MiB buffer, issue reads and writes of one size at uniformly
 * random block-aligned offsets over the whole target, synchronously or with an async queue.
 * Targets: a file or block device (O_DIRECT), or a CVM volume through libcvm.  See randio(1). */
#include "../cvm/cvm.h"
#include "tools/version.h"
#include "common.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <libaio.h>
#include <linux/fs.h>
#include <math.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define BUFFER_BYTES (8u << 20)
#define HIST_BUCKETS (64 + 58 * 32)
#define MAX_STREAMS 1024
#define MAX_DEPTH 1024

struct config {
	const char *target;
	const char *volume; /* set when the target is vol:NAME */
	struct scan_paths scan;
	unsigned streams, depth, read_pct;
	uint64_t bs, size_limit, ios_per_stream, seed;
	double seconds;
	bool sequential, json, quiet, force;
};

/* Shared with the parent through a MAP_SHARED mapping; counters written by one stream only. */
struct stream_stats {
	_Atomic uint64_t ios;
	uint64_t reads, writes, bytes, max_ns;
	uint64_t hist[HIST_BUCKETS];
	int error;
	char message[256];
};

/* ---- latency histogram: exact below 64 ns, then 32 buckets per power of two (~3%) ---- */
static unsigned bucket_of(uint64_t ns)
{
	if (ns < 64)
		return (unsigned)ns;
	unsigned msb = 63u - (unsigned)__builtin_clzll(ns);
	return 64 + (msb - 6) * 32 + (unsigned)((ns >> (msb - 5)) - 32);
}

static double bucket_value(unsigned b)
{
	if (b < 64)
		return b;
	b -= 64;
	unsigned msb = b / 32 + 6;
	uint64_t lo = (uint64_t)(b % 32 + 32) << (msb - 5);
	return (double)lo + (double)(1ull << (msb - 5)) / 2;
}

static double percentile_ns(const uint64_t *hist, uint64_t total, double pct)
{
	uint64_t want = (uint64_t)ceil((double)total * pct / 100.0), seen = 0;
	for (unsigned b = 0; b < HIST_BUCKETS; b++)
		if ((seen += hist[b]) >= want && want)
			return bucket_value(b);
	return 0;
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t next_random(uint64_t *s)
{
	/* xorshift64*: fast, and good enough for choosing offsets */
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 0x2545f4914f6cdd1dull;
}

/* ---- targets: a function table per backend ---- */
struct target;
struct target_ops {
	int (*read)(struct target *t, void *buf, uint64_t len, uint64_t off);
	int (*write)(struct target *t, const void *buf, uint64_t len, uint64_t off);
	int (*aio_start)(struct target *t, unsigned depth);
	int (*aio_submit)(struct target *t, bool write, void *buf, uint64_t len, uint64_t off,
			  void *slot);
	/* Wait for at least one completion; calls done(slot, ok) for each. */
	int (*aio_reap)(struct target *t, void (*done)(void *slot, bool ok, void *arg), void *arg);
	void (*close)(struct target *t);
};

struct target {
	const struct target_ops *ops;
	uint64_t size;
	int fd;                       /* file backend */
	io_context_t ctx;
	struct iocb *iocbs;           /* one per slot */
	struct cvm_volume *vol;       /* volume backend */
	struct cvm_aio *aio;
	void (*done)(void *slot, bool ok, void *arg);
	void *done_arg;
};

static int file_read(struct target *t, void *buf, uint64_t len, uint64_t off)
{
	ssize_t n = pread(t->fd, buf, len, (off_t)off);
	return n == (ssize_t)len ? 0 : n < 0 ? -errno : -EIO;
}

static int file_write(struct target *t, const void *buf, uint64_t len, uint64_t off)
{
	ssize_t n = pwrite(t->fd, buf, len, (off_t)off);
	return n == (ssize_t)len ? 0 : n < 0 ? -errno : -EIO;
}

static int file_aio_start(struct target *t, unsigned depth)
{
	t->iocbs = calloc(depth, sizeof *t->iocbs);
	return t->iocbs ? io_setup((int)depth, &t->ctx) : -ENOMEM;
}

static int file_aio_submit(struct target *t, bool write, void *buf, uint64_t len, uint64_t off,
			   void *slot)
{
	struct iocb *cb = &t->iocbs[*(unsigned *)slot];
	if (write)
		io_prep_pwrite(cb, t->fd, buf, len, (long long)off);
	else
		io_prep_pread(cb, t->fd, buf, len, (long long)off);
	cb->data = slot;
	int n = io_submit(t->ctx, 1, &cb);
	return n == 1 ? 0 : n < 0 ? n : -EIO;
}

static int file_aio_reap(struct target *t, void (*done)(void *, bool, void *), void *arg)
{
	struct io_event ev[64];
	int n;
	while ((n = io_getevents(t->ctx, 1, 64, ev, NULL)) == -EINTR)
		;
	for (int i = 0; i < n; i++)
		done(ev[i].data, (long long)ev[i].res == (long long)ev[i].obj->u.c.nbytes, arg);
	return n < 0 ? n : 0;
}

static void file_close(struct target *t)
{
	if (t->iocbs)
		io_destroy(t->ctx);
	free(t->iocbs);
	close(t->fd);
}

static const struct target_ops file_ops = {file_read, file_write, file_aio_start,
					   file_aio_submit, file_aio_reap, file_close};

static int vol_read(struct target *t, void *buf, uint64_t len, uint64_t off)
{
	return cvm_volume_read(t->vol, buf, len, off);
}

static int vol_write(struct target *t, const void *buf, uint64_t len, uint64_t off)
{
	return cvm_volume_write(t->vol, buf, len, off);
}

static int vol_aio_start(struct target *t, unsigned depth)
{
	return cvm_aio_create(t->vol, depth, &t->aio);
}

static void vol_aio_done(void *slot, int64_t result);

static int vol_aio_submit(struct target *t, bool write, void *buf, uint64_t len, uint64_t off,
			  void *slot)
{
	return cvm_aio_submit(t->aio, write ? CVM_WRITE : CVM_READ, buf, len, off, vol_aio_done,
			      slot);
}

/* The volume backend's callback carries only the slot; the reap call in progress is global to
 * the stream (one process, one target). */
static struct target *reaping;
static void vol_aio_done(void *slot, int64_t result)
{
	reaping->done(slot, result >= 0, reaping->done_arg);
}

static int vol_aio_reap(struct target *t, void (*done)(void *, bool, void *), void *arg)
{
	t->done = done;
	t->done_arg = arg;
	reaping = t;
	int n = cvm_aio_poll(t->aio, 1, NULL);
	return n < 0 ? n : 0;
}

static void vol_close(struct target *t)
{
	cvm_aio_destroy(t->aio);
	cvm_volume_close(t->vol);
}

static const struct target_ops vol_ops = {vol_read, vol_write, vol_aio_start, vol_aio_submit,
					  vol_aio_reap, vol_close};

static int open_target(const struct config *c, const struct cvm_scan *scan, bool writes,
		       struct target *t, char *msg, size_t msglen)
{
	memset(t, 0, sizeof *t);
	if (c->volume) {
		int rc = cvm_volume_open(scan, c->volume, writes ? CVM_OPEN_RDWR : CVM_OPEN_RDONLY,
					 &t->vol);
		if (rc) {
			snprintf(msg, msglen, "%s", cvm_last_error());
			return rc;
		}
		t->ops = &vol_ops;
		t->size = cvm_volume_size(t->vol);
		return 0;
	}
	t->ops = &file_ops;
	t->fd = open(c->target, (writes ? O_RDWR : O_RDONLY) | O_DIRECT | O_CLOEXEC);
	struct stat st;
	if (t->fd < 0 || fstat(t->fd, &st) < 0) {
		int e = errno ? errno : EIO;
		snprintf(msg, msglen, "target %s: %s", c->target, strerror(e));
		if (t->fd >= 0)
			close(t->fd);
		return -e;
	}
	t->size = (uint64_t)st.st_size;
	if (S_ISBLK(st.st_mode) && ioctl(t->fd, BLKGETSIZE64, &t->size) < 0) {
		int e = errno ? errno : EIO;
		snprintf(msg, msglen, "target %s: device size: %s", c->target, strerror(e));
		close(t->fd);
		return -e;
	}
	return 0;
}

/* ---- one stream ---- */
struct slot {
	unsigned index;
	uint64_t start_ns;
	bool write;
	uint64_t len;
};

struct stream {
	const struct config *c;
	struct target t;
	struct stream_stats *st;
	uint8_t *buffer;
	uint64_t rng, blocks, next_block, first_block, nblocks;
	uint64_t deadline_ns, issued;
	struct slot *slots;
	bool failed;
};

static bool stream_more(struct stream *s)
{
	if (s->c->ios_per_stream)
		return s->issued < s->c->ios_per_stream;
	return now_ns() < s->deadline_ns;
}

/* Choose the next I/O: direction, offset in the target, place in the buffer. */
static void next_io(struct stream *s, bool *write, uint64_t *off, void **buf)
{
	uint64_t r = next_random(&s->rng);
	*write = (r % 100) >= s->c->read_pct;
	uint64_t block;
	if (s->c->sequential) {
		block = s->first_block + s->next_block;
		s->next_block = (s->next_block + 1) % s->nblocks;
	} else {
		block = next_random(&s->rng) % s->blocks;
	}
	*off = block * s->c->bs;
	uint64_t places = (BUFFER_BYTES - s->c->bs) / 4096 + 1;
	*buf = s->buffer + (next_random(&s->rng) % places) * 4096;
	s->issued++;
}

static void account(struct stream *s, bool write, uint64_t len, uint64_t ns)
{
	struct stream_stats *st = s->st;
	if (write)
		st->writes++;
	else
		st->reads++;
	st->bytes += len;
	st->hist[bucket_of(ns)]++;
	if (ns > st->max_ns)
		st->max_ns = ns;
	atomic_fetch_add_explicit(&st->ios, 1, memory_order_relaxed);
}

static int run_sync(struct stream *s)
{
	while (stream_more(s)) {
		bool write;
		uint64_t off;
		void *buf;
		next_io(s, &write, &off, &buf);
		uint64_t t0 = now_ns();
		int rc = write ? s->t.ops->write(&s->t, buf, s->c->bs, off)
			       : s->t.ops->read(&s->t, buf, s->c->bs, off);
		if (rc) {
			snprintf(s->st->message, sizeof s->st->message, "%s at offset %" PRIu64 ": %s",
				 write ? "write" : "read", off, strerror(-rc));
			return rc;
		}
		account(s, write, s->c->bs, now_ns() - t0);
	}
	return 0;
}

static int submit_one(struct stream *s, struct slot *slot)
{
	uint64_t off;
	void *buf;
	next_io(s, &slot->write, &off, &buf);
	slot->len = s->c->bs;
	slot->start_ns = now_ns();
	int rc = s->t.ops->aio_submit(&s->t, slot->write, buf, s->c->bs, off, slot);
	if (rc)
		snprintf(s->st->message, sizeof s->st->message, "submit at offset %" PRIu64 ": %s",
			 off, strerror(-rc));
	return rc;
}

static void async_done(void *p, bool ok, void *arg)
{
	struct stream *s = arg;
	struct slot *slot = p;
	if (!ok) {
		if (!s->failed)
			snprintf(s->st->message, sizeof s->st->message, "asynchronous %s failed",
				 slot->write ? "write" : "read");
		s->failed = true;
		return;
	}
	account(s, slot->write, slot->len, now_ns() - slot->start_ns);
	if (!s->failed && stream_more(s) && submit_one(s, slot))
		s->failed = true;
}

static int run_async(struct stream *s)
{
	unsigned depth = s->c->depth;
	int rc = s->t.ops->aio_start(&s->t, depth);
	if (rc) {
		snprintf(s->st->message, sizeof s->st->message, "async setup: %s", strerror(-rc));
		return rc;
	}
	s->slots = calloc(depth, sizeof *s->slots);
	if (!s->slots)
		return -ENOMEM;
	unsigned started = 0;
	for (; started < depth && stream_more(s); started++) {
		s->slots[started].index = started;
		if ((rc = submit_one(s, &s->slots[started])))
			break;
	}
	uint64_t before = atomic_load(&s->st->ios);
	/* Every completion resubmits its slot until time is up; stop when nothing is left. */
	uint64_t outstanding = started;
	while (outstanding && rc == 0) {
		uint64_t issued_before = s->issued;
		rc = s->t.ops->aio_reap(&s->t, async_done, s);
		uint64_t completed = atomic_load(&s->st->ios) - before;
		before += completed;
		outstanding = outstanding + (s->issued - issued_before) - completed;
		if (s->failed)
			rc = -EIO;
	}
	free(s->slots);
	return rc;
}

static int stream_main(const struct config *c, const struct cvm_scan *scan, unsigned index,
		       struct stream_stats *st, uint64_t deadline_ns)
{
	struct stream s = {.c = c, .st = st, .deadline_ns = deadline_ns,
			   .rng = c->seed * 0x9e3779b97f4a7c15ull + index + 1};
	int rc = open_target(c, scan, c->read_pct < 100, &s.t, st->message, sizeof st->message);
	if (rc)
		return rc;
	uint64_t size = c->size_limit && c->size_limit < s.t.size ? c->size_limit : s.t.size;
	s.blocks = size / c->bs;
	if (s.blocks == 0) {
		snprintf(st->message, sizeof st->message, "target %s is smaller than one I/O",
			 c->target);
		s.t.ops->close(&s.t);
		return -ENOSPC;
	}
	s.nblocks = s.blocks / c->streams ? s.blocks / c->streams : 1;
	s.first_block = (index * s.nblocks) % s.blocks;
	s.buffer = mmap(NULL, BUFFER_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			-1, 0);
	if (s.buffer == MAP_FAILED) {
		s.t.ops->close(&s.t);
		return -ENOMEM;
	}
	for (size_t i = 0; i < BUFFER_BYTES / 8; i++)
		((uint64_t *)s.buffer)[i] = next_random(&s.rng);
	rc = c->depth > 1 ? run_async(&s) : run_sync(&s);
	s.t.ops->close(&s.t);
	munmap(s.buffer, BUFFER_BYTES);
	return rc;
}

/* ---- the parent: start streams, show progress, sum up ---- */
static void usage(FILE *out)
{
	fprintf(out,
		"Usage: randio [OPTIONS] TARGET\n"
		"\n"
		"Random I/O micro-benchmark.  TARGET is a file, a block device, or vol:NAME for a\n"
		"CVM volume (found with --scan).  Writes destroy the target's data.\n"
		"\n"
		"  -n, --streams N       processes issuing I/O (default 1)\n"
		"  -q, --iodepth N       1: synchronous I/O (default); more: libaio queue depth\n"
		"  -r, --read-pct P      percentage of reads, 0-100 (default 75)\n"
		"  -b, --bs SIZE         I/O size, a multiple of 512 up to 8M (default 4k)\n"
		"  -t, --time SEC        run time in seconds (default 10)\n"
		"  -N, --ios COUNT       stop each stream after COUNT I/Os instead of a time\n"
		"  -p, --pattern P       rand (default) or seq: each stream walks its own slice\n"
		"  -S, --size SIZE       use only the first SIZE bytes of the target\n"
		"  -s, --scan PATH       where to find a volume's LUNs (as in cvm)\n"
		"      --seed N          random seed (default 1)\n"
		"  -j, --json            print the result as JSON\n"
		"      --quiet           no progress line\n"
		"  -f, --force           write to a file or device that carries a CVM label\n"
		"  -h, --help            this text\n"
		"\n"
		"Exit status: 0 done, 1 failed (the message says why), 2 bad usage.\n");
}

static int bad(const char *what, const char *value, const char *expect)
{
	fprintf(stderr, "randio: %s '%s': %s\nTry 'randio --help'.\n", what, value, expect);
	return EXIT_USAGE;
}

static int parse_uint(const char *s, uint64_t max, uint64_t *out)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || end == s || *end || *s == '-' || v > max)
		return -EINVAL;
	*out = v;
	return 0;
}

static int parse_args(int argc, char **argv, struct config *c)
{
	enum { OPT_SEED = 256, OPT_QUIET };
	static const struct option longopts[] = {
		{"streams", required_argument, NULL, 'n'}, {"iodepth", required_argument, NULL, 'q'},
		{"read-pct", required_argument, NULL, 'r'}, {"bs", required_argument, NULL, 'b'},
		{"time", required_argument, NULL, 't'},	   {"ios", required_argument, NULL, 'N'},
		{"pattern", required_argument, NULL, 'p'}, {"size", required_argument, NULL, 'S'},
		{"scan", required_argument, NULL, 's'},	   {"seed", required_argument, NULL, OPT_SEED},
		{"json", no_argument, NULL, 'j'},	   {"quiet", no_argument, NULL, OPT_QUIET},
		{"force", no_argument, NULL, 'f'},	   {"version", no_argument, NULL, 'V'}, {"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0}};
	*c = (struct config){.streams = 1, .depth = 1, .read_pct = 75, .bs = 4096, .seconds = 10,
			     .seed = 1};
	uint64_t v;
	char *end;
	int o;
	while ((o = getopt_long(argc, argv, "n:q:r:b:t:N:p:S:s:jfhV", longopts, NULL)) != -1) {
		switch (o) {
		case 'n':
			if (parse_uint(optarg, MAX_STREAMS, &v) || v == 0)
				return bad("--streams", optarg, "a number from 1 to 1024");
			c->streams = (unsigned)v;
			break;
		case 'q':
			if (parse_uint(optarg, MAX_DEPTH, &v) || v == 0)
				return bad("--iodepth", optarg, "a number from 1 to 1024");
			c->depth = (unsigned)v;
			break;
		case 'r':
			if (parse_uint(optarg, 100, &v))
				return bad("--read-pct", optarg, "a percentage from 0 to 100");
			c->read_pct = (unsigned)v;
			break;
		case 'b':
			if (cvm_parse_size(optarg, &c->bs) || c->bs == 0 || c->bs % 512 ||
			    c->bs > BUFFER_BYTES)
				return bad("--bs", optarg, "a multiple of 512 up to 8M, e.g. 4k");
			break;
		case 't':
			c->seconds = strtod(optarg, &end);
			if (*end || end == optarg || !(c->seconds > 0) || c->seconds > 1e6)
				return bad("--time", optarg, "a positive number of seconds");
			break;
		case 'N':
			if (parse_uint(optarg, UINT64_MAX, &c->ios_per_stream) || !c->ios_per_stream)
				return bad("--ios", optarg, "a positive count");
			break;
		case 'p':
			if (strcmp(optarg, "rand") && strcmp(optarg, "seq"))
				return bad("--pattern", optarg, "rand or seq");
			c->sequential = !strcmp(optarg, "seq");
			break;
		case 'S':
			if (cvm_parse_size(optarg, &c->size_limit) || c->size_limit == 0)
				return bad("--size", optarg, "a size such as 1G");
			break;
		case 's': scan_paths_add(&c->scan, optarg); break;
		case OPT_SEED:
			if (parse_uint(optarg, UINT64_MAX, &c->seed))
				return bad("--seed", optarg, "a number");
			break;
		case 'j': c->json = true; break;
		case OPT_QUIET: c->quiet = true; break;
		case 'f': c->force = true; break;
		case 'V': print_version("randio"); exit(0);
		case 'h': usage(stdout); exit(EXIT_OK);
		default: fprintf(stderr, "Try 'randio --help'.\n"); return EXIT_USAGE;
		}
	}
	if (optind != argc - 1) {
		fprintf(stderr, "randio: give exactly one TARGET\nTry 'randio --help'.\n");
		return EXIT_USAGE;
	}
	c->target = argv[optind];
	if (!strncmp(c->target, "vol:", 4))
		c->volume = c->target + 4;
	return EXIT_OK;
}

/* Writing over a LUN of a volume through its raw path corrupts the volume; ask for --force. */
static int refuse_labelled_lun(const struct config *c)
{
	if (c->volume || c->read_pct == 100 || c->force)
		return 0;
	int fd = open(c->target, O_RDONLY | O_DIRECT | O_CLOEXEC);
	if (fd < 0)
		return 0; /* the stream reports it */
	void *buf = NULL;
	int labelled = 0;
	if (posix_memalign(&buf, 4096, 4096) == 0 && pread(fd, buf, 4096, 0) == 4096)
		labelled = !memcmp(buf, "CVMLABEL", 8);
	free(buf);
	close(fd);
	if (labelled)
		fprintf(stderr, "randio: target %s is a LUN of a CVM volume; writing to it would "
				"corrupt the volume.  Use vol:NAME, --read-pct 100, or --force\n",
			c->target);
	return labelled;
}

static void print_result(const struct config *c, const struct stream_stats *sum,
			 uint64_t target_size, double secs)
{
	uint64_t ios = atomic_load(&sum->ios);
	double iops = (double)ios / secs, mbs = (double)sum->bytes / secs / 1e6;
	double p50 = percentile_ns(sum->hist, ios, 50) / 1e3, p95 = percentile_ns(sum->hist, ios, 95) / 1e3;
	double p99 = percentile_ns(sum->hist, ios, 99) / 1e3, max = (double)sum->max_ns / 1e3;
	if (c->json) {
		printf("{\"target\":");
		json_string(stdout, c->target);
		printf(",\"target_bytes\":%" PRIu64 ",\"streams\":%u,\"iodepth\":%u,\"read_pct\":%u,"
		       "\"bs\":%" PRIu64 ",\"pattern\":\"%s\",\"seconds\":%.3f,\"ios\":%" PRIu64
		       ",\"reads\":%" PRIu64 ",\"writes\":%" PRIu64 ",\"iops\":%.1f,\"mb_per_s\":%.2f,"
		       "\"latency_us\":{\"p50\":%.1f,\"p95\":%.1f,\"p99\":%.1f,\"max\":%.1f}}\n",
		       target_size, c->streams, c->depth, c->read_pct, c->bs,
		       c->sequential ? "seq" : "rand", secs, ios, sum->reads, sum->writes, iops, mbs,
		       p50, p95, p99, max);
		return;
	}
	char tsize[32], bs[32];
	cvm_format_size(target_size, tsize, sizeof tsize);
	cvm_format_size(c->bs, bs, sizeof bs);
	printf("randio: %s (%s), %u streams, %s, %u%% reads, %s I/O, %s, %.1f s\n", c->target,
	       tsize, c->streams, c->depth > 1 ? "async" : "sync", c->read_pct, bs,
	       c->sequential ? "sequential" : "random", secs);
	if (c->depth > 1)
		printf("  queue depth  %u per stream\n", c->depth);
	printf("  IOPS         %.0f (reads %.0f, writes %.0f)\n  MB/s         %.1f\n"
	       "  latency us   p50 %.1f  p95 %.1f  p99 %.1f  max %.1f\n",
	       iops, (double)sum->reads / secs, (double)sum->writes / secs, mbs, p50, p95, p99, max);
}

static void progress(const struct config *c, struct stream_stats *st, uint64_t start_ns)
{
	static uint64_t last_ios, last_ns;
	uint64_t ios = 0, t = now_ns();
	for (unsigned i = 0; i < c->streams; i++)
		ios += atomic_load_explicit(&st[i].ios, memory_order_relaxed);
	if (last_ns == 0)
		last_ns = start_ns;
	double rate = (double)(ios - last_ios) / ((double)(t - last_ns) / 1e9);
	fprintf(stderr, "randio: %5.1f s  %10.0f IOPS  %8.1f MB/s%s", (double)(t - start_ns) / 1e9,
		rate, rate * (double)c->bs / 1e6, isatty(2) ? "\r" : "\n");
	last_ios = ios;
	last_ns = t;
}

int main(int argc, char **argv)
{
	struct config c;
	int ex = parse_args(argc, argv, &c);
	if (ex != EXIT_OK)
		return ex;
	if (refuse_labelled_lun(&c))
		return EXIT_FAILED;
	struct cvm_scan scan = {0};
	if (c.volume) {
		scan_paths_defaults(&c.scan);
		int rc = c.scan.n ? cvm_scan_paths(c.scan.paths, c.scan.n, &scan) : -ENOENT;
		if (rc) {
			fprintf(stderr, "randio: %s\n", c.scan.n ? cvm_last_error()
					: "no scan path for the volume's LUNs: give --scan DIR or set CVM_SCAN");
			return EXIT_FAILED;
		}
	}
	/* Validate the target once in the parent, so a bad target fails before any stream. */
	struct target probe;
	char msg[256];
	if (open_target(&c, &scan, c.read_pct < 100, &probe, msg, sizeof msg)) {
		fprintf(stderr, "randio: %s\n", msg);
		cvm_scan_free(&scan);
		return EXIT_FAILED;
	}
	uint64_t target_size = c.size_limit && c.size_limit < probe.size ? c.size_limit : probe.size;
	probe.ops->close(&probe);
	if (target_size < c.bs * c.streams) {
		fprintf(stderr, "randio: target %s is too small for %u streams of %" PRIu64
				"-byte I/O\n", c.target, c.streams, c.bs);
		cvm_scan_free(&scan);
		return EXIT_FAILED;
	}

	struct stream_stats *st = mmap(NULL, c.streams * sizeof *st, PROT_READ | PROT_WRITE,
				       MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (st == MAP_FAILED) {
		perror("randio: mmap");
		return EXIT_FAILED;
	}
	uint64_t start = now_ns(), deadline = start + (uint64_t)(c.seconds * 1e9);
	pid_t pids[MAX_STREAMS];
	fflush(NULL);
	for (unsigned i = 0; i < c.streams; i++) {
		pids[i] = fork();
		if (pids[i] == 0) {
			int rc = stream_main(&c, &scan, i, &st[i], deadline);
			st[i].error = -rc;
			_exit(rc ? EXIT_FAILED : EXIT_OK);
		}
	}
	unsigned running = c.streams;
	bool failed = false;
	uint64_t next_progress = start + 1000000000ull;
	while (running) {
		pid_t pid;
		while (running && (pid = waitpid(-1, NULL, WNOHANG)) > 0)
			running--;
		if (!running || pid < 0)
			break;
		struct timespec tick = {0, 100 * 1000 * 1000};
		nanosleep(&tick, NULL);
		if (!c.quiet && now_ns() >= next_progress) {
			progress(&c, st, start);
			next_progress += 1000000000ull;
		}
	}
	double secs = (double)(now_ns() - start) / 1e9;
	if (!c.quiet && isatty(2))
		fputc('\n', stderr);
	struct stream_stats *sum = calloc(1, sizeof *sum);
	for (unsigned i = 0; i < c.streams; i++) {
		if (st[i].error) {
			fprintf(stderr, "randio: stream %u: %s\n", i, st[i].message);
			failed = true;
		}
		atomic_fetch_add(&sum->ios, atomic_load(&st[i].ios));
		sum->reads += st[i].reads;
		sum->writes += st[i].writes;
		sum->bytes += st[i].bytes;
		if (st[i].max_ns > sum->max_ns)
			sum->max_ns = st[i].max_ns;
		for (unsigned b = 0; b < HIST_BUCKETS; b++)
			sum->hist[b] += st[i].hist[b];
	}
	if (!failed)
		print_result(&c, sum, target_size, secs);
	free(sum);
	munmap(st, c.streams * sizeof *st);
	cvm_scan_free(&scan);
	scan_paths_free(&c.scan);
	return failed ? EXIT_FAILED : EXIT_OK;
}
