/* SPDX-License-Identifier: GPL-2.0-or-later */
/* odmstat: ODM I/O statistics of the instances on this node, from their shared-memory
 * segments (/dev/shm/odm.DATABASE.INSTANCE), like iostat: the first report since each
 * instance began, then one per interval.  With --cluster, of every node that mounts a CFS
 * filesystem, as the daemon of one mount last heard them (cfsd/odm_share.c). */
#include "cfs/control.h"
#include "tools/version.h"
#include "odm/rows.h"
#include "tools/ask.h"
#include "tools/common.h"
#include "tools/svgplot.h"

#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct opts {
	double interval;
	long count;
	enum odm_by by;
	const char *instance;
	bool json, list;
	const char *prometheus; /* NULL; "-": standard output; else a file replaced each time */
	const char *plot;       /* an SVG of the interval reports, written at the end */
	const char *cluster;    /* a CFS mount point whose daemon has every node's counts */
};

/* The nodes of the last --cluster sample, for the reports. */
struct node_note {
	uint32_t id;
	bool alive;
	bool unmounted;
	double age_s;
};
static struct {
	struct node_note *v;
	size_t n;
} nodes;

static void usage(FILE *f)
{
	fprintf(f, "usage: odmstat [-i SEC] [-c COUNT] [--by instance|database|node|ptype|file]\n"
		   "               [--instance NAME] [--json | --prometheus[=FILE]] [--plot FILE.svg]\n"
		   "               [--cluster[=DIR]]\n"
		   "       odmstat -l [--instance NAME] [--json]\n"
		   "ODM I/O statistics of this node's database instances (see odmstat(1)).\n"
		   "  -i, --interval SEC  report every SEC seconds (the first report is cumulative)\n"
		   "  -c, --count N       stop after N reports (default: 1 without -i, else forever)\n"
		   "  --by KEY            one row per instance (default), database, node, process\n"
		   "                      type or file\n"
		   "  --instance NAME     only this instance\n"
		   "  -l, --list          the processes using libodm\n"
		   "  --json              one JSON object per report, raw counts included\n"
		   "  --prometheus[=FILE] Prometheus' text format: counters since each instance\n"
		   "                      began, per database, instance, node and process type;\n"
		   "                      FILE (for node_exporter's textfile collector) is\n"
		   "                      replaced whole at each report\n"
		   "  --plot FILE.svg     at the end, draw IOPS, MB/s and p99 latency of each row\n"
		   "                      over the interval reports (needs -i)\n"
		   "  --cluster[=DIR]     every node's instances, as the daemon of the CFS mount\n"
		   "                      DIR (default: the first CFS mount) last heard them (each\n"
		   "                      node's at most a second old); a node that left keeps its\n"
		   "                      last counts, marked down or unmounted; nodes are named\n"
		   "                      HOST#ID\n"
		   "Exit: 0 ok, 1 no instance found, 2 bad usage.\n");
}

/* odm_rows_row, or the end: odmstat cannot go on without memory. */
static struct odm_row *row_for(struct odm_rows *s, const char *key, uint32_t block_size)
{
	struct odm_row *r = odm_rows_row(s, key, block_size);
	if (!r) {
		fprintf(stderr, "odmstat: out of memory\n");
		exit(1);
	}
	return r;
}

static double avg_ms(const struct odm_count *c) { return c->ops ? c->usec / 1000.0 / c->ops : 0; }

static void print_text(const struct opts *o, const struct odm_rows *s, double secs)
{
	if (o->by == ODM_BY_FILE) {
		printf("%-40s %10s %10s %12s %12s %8s %8s\n", "FILE", "NREADS", "NWRITES", "RBLOCKS",
		       "WBLOCKS", "RTIME_ms", "WTIME_ms");
		for (size_t i = 0; i < s->n; i++) {
			const struct odm_row *r = &s->rows[i];
			if (odm_row_empty(r))
				continue;
			struct odm_count rd = r->c[0][0], wr = r->c[1][0];
			for (int d = 0; d < 2; d++) { /* sync and async together, as Veritas shows */
				struct odm_count *t = d ? &wr : &rd;
				t->ops += r->c[d][1].ops;
				t->bytes += r->c[d][1].bytes;
				t->usec += r->c[d][1].usec;
			}
			printf("%-40s %10llu %10llu %12llu %12llu %8.2f %8.2f\n", r->key,
			       (unsigned long long)rd.ops, (unsigned long long)wr.ops,
			       (unsigned long long)(rd.bytes / r->block_size),
			       (unsigned long long)(wr.bytes / r->block_size), avg_ms(&rd), avg_ms(&wr));
		}
		return;
	}
	printf("%-24s %-5s %9s %9s %8s %8s %8s %8s %8s\n", odm_by_names[o->by], "MODE", "READS/s",
	       "WRITES/s", "RMB/s", "WMB/s", "RAVG_ms", "WAVG_ms", "P99_ms");
	for (size_t i = 0; i < s->n; i++)
		for (int m = 0; m < 2 && !odm_row_empty(&s->rows[i]); m++) {
			const struct odm_row *r = &s->rows[i];
			printf("%-24s %-5s %9.1f %9.1f %8.2f %8.2f %8.3f %8.3f %8.3f\n", r->key,
			       m == ODM_MODE_SYNC ? "sync" : "async", r->c[0][m].ops / secs,
			       r->c[1][m].ops / secs, r->c[0][m].bytes / secs / 1048576.0,
			       r->c[1][m].bytes / secs / 1048576.0, avg_ms(&r->c[0][m]),
			       avg_ms(&r->c[1][m]), odm_hist_percentile(r->hist[m], 99.0) / 1000.0);
		}
	for (size_t i = 0; i < nodes.n; i++)
		if (!nodes.v[i].alive)
			printf("node %u %s: its counts are the last it sent, %.1f s ago\n",
			       nodes.v[i].id, nodes.v[i].unmounted ? "unmounted" : "is down",
			       nodes.v[i].age_s);
}

static void json_mode(const struct odm_row *r, int m, double secs)
{
	printf("{\"reads\": %llu, \"writes\": %llu, \"read_bytes\": %llu, \"write_bytes\": %llu, "
	       "\"read_usec\": %llu, \"write_usec\": %llu, \"reads_per_s\": %.1f, "
	       "\"writes_per_s\": %.1f, \"read_mb_per_s\": %.3f, \"write_mb_per_s\": %.3f, "
	       "\"p99_us\": %llu}",
	       (unsigned long long)r->c[0][m].ops, (unsigned long long)r->c[1][m].ops,
	       (unsigned long long)r->c[0][m].bytes, (unsigned long long)r->c[1][m].bytes,
	       (unsigned long long)r->c[0][m].usec, (unsigned long long)r->c[1][m].usec,
	       r->c[0][m].ops / secs, r->c[1][m].ops / secs, r->c[0][m].bytes / secs / 1048576.0,
	       r->c[1][m].bytes / secs / 1048576.0,
	       (unsigned long long)odm_hist_percentile(r->hist[m], 99.0));
}

static void print_json(const struct opts *o, const struct odm_rows *s, double secs, bool cumulative)
{
	printf("{\"time\": %lld, \"seconds\": %.3f, \"cumulative\": %s, \"by\": \"%s\", \"rows\": [",
	       (long long)time(NULL), secs, cumulative ? "true" : "false", odm_by_names[o->by]);
	bool first = true;
	for (size_t i = 0; i < s->n; i++) {
		if (odm_row_empty(&s->rows[i]))
			continue;
		printf("%s{\"key\": ", first ? "" : ", ");
		first = false;
		json_string(stdout, s->rows[i].key);
		if (o->by == ODM_BY_FILE)
			printf(", \"block_size\": %u", s->rows[i].block_size);
		printf(", \"sync\": ");
		json_mode(&s->rows[i], ODM_MODE_SYNC, secs);
		printf(", \"async\": ");
		json_mode(&s->rows[i], ODM_MODE_ASYNC, secs);
		printf("}");
	}
	printf("]");
	if (o->cluster) {
		printf(", \"nodes\": [");
		for (size_t i = 0; i < nodes.n; i++)
			printf("%s{\"node_id\": %u, \"alive\": %s, \"unmounted\": %s, \"age_s\": %.3f}",
			       i ? ", " : "", nodes.v[i].id, nodes.v[i].alive ? "true" : "false",
			       nodes.v[i].unmounted ? "true" : "false", nodes.v[i].age_s);
		printf("]");
	}
	printf("}\n");
}

/* ---- Prometheus' text exposition format ---- */

static void prom_labels(FILE *f, const char *key, const char *extra)
{
	static const char *const names[] = {"database", "instance", "node", "ptype"};
	const char *p = key;
	fputc('{', f);
	for (int i = 0; i < 4; i++) {
		fprintf(f, "%s%s=\"", i ? "," : "", names[i]);
		size_t len = strcspn(p, (char[]){ODM_KEY_SEP, 0});
		prom_label_value(f, p, len);
		p += len;
		fputc('"', f);
		if (*p)
			p++;
	}
	fprintf(f, "%s}", extra);
}

/* A sample's name and labels; its value follows. */
static void prom_sample(FILE *f, const char *name, const char *suffix, const char *key,
			const char *extra)
{
	fprintf(f, "%s%s", name, suffix);
	prom_labels(f, key, extra);
}

static void prom_counter(FILE *f, const struct odm_rows *s, const char *name, const char *help,
			 int what)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s counter\n", name, help, name);
	for (size_t i = 0; i < s->n; i++)
		for (int d = 0; d < 2 && !odm_row_empty(&s->rows[i]); d++)
			for (int m = 0; m < 2; m++) {
				const struct odm_count *c = &s->rows[i].c[d][m];
				char extra[64];
				snprintf(extra, sizeof extra, ",op=\"%s\",mode=\"%s\"",
					 d ? "write" : "read", m == ODM_MODE_SYNC ? "sync" : "async");
				prom_sample(f, name, "", s->rows[i].key, extra);
				if (what == 2)
					fprintf(f, " %.6f\n", c->usec / 1e6);
				else
					fprintf(f, " %llu\n",
						(unsigned long long)(what ? c->bytes : c->ops));
			}
}

/* Latency histograms, reads and writes together: the buckets end at powers of two of
 * microseconds, which are edges of libodm's own buckets. */
static void prom_histogram(FILE *f, const struct odm_rows *s)
{
	const char *name = "odm_io_latency_seconds";
	fprintf(f, "# HELP %s Time from submission to completion of ODM I/O.\n"
		   "# TYPE %s histogram\n", name, name);
	for (size_t i = 0; i < s->n; i++)
		for (int m = 0; m < 2 && !odm_row_empty(&s->rows[i]); m++) {
			const struct odm_row *r = &s->rows[i];
			const char *mode = m == ODM_MODE_SYNC ? "sync" : "async";
			uint64_t seen = 0;
			unsigned bin = 0;
			char extra[96];
			for (uint64_t edge = 4; edge <= (1ull << 22); edge *= 2) {
				while (bin < ODM_HIST_BINS && odm_hist_upper(bin) <= edge)
					seen += r->hist[m][bin++];
				snprintf(extra, sizeof extra, ",mode=\"%s\",le=\"%g\"", mode, edge / 1e6);
				prom_sample(f, name, "_bucket", r->key, extra);
				fprintf(f, " %llu\n", (unsigned long long)seen);
			}
			while (bin < ODM_HIST_BINS)
				seen += r->hist[m][bin++];
			snprintf(extra, sizeof extra, ",mode=\"%s\",le=\"+Inf\"", mode);
			prom_sample(f, name, "_bucket", r->key, extra);
			fprintf(f, " %llu\n", (unsigned long long)seen);
			snprintf(extra, sizeof extra, ",mode=\"%s\"", mode);
			prom_sample(f, name, "_sum", r->key, extra);
			fprintf(f, " %.6f\n", (r->c[0][m].usec + r->c[1][m].usec) / 1e6);
			prom_sample(f, name, "_count", r->key, extra);
			fprintf(f, " %llu\n", (unsigned long long)seen);
		}
}

static void prom_write(FILE *f, const struct odm_rows *s)
{
	prom_counter(f, s, "odm_io_operations_total", "ODM I/O operations completed.", 0);
	prom_counter(f, s, "odm_io_bytes_total", "Bytes moved by ODM I/O.", 1);
	prom_counter(f, s, "odm_io_time_seconds_total", "Time ODM I/O took, summed.", 2);
	prom_histogram(f, s);
}

static void prom_fill(FILE *f, void *arg) { prom_write(f, arg); }

/* To standard output, or to a file replaced whole (the collector never reads half of one). */
static int print_prometheus(const struct opts *o, const struct odm_rows *s)
{
	return write_whole("odmstat", o->prometheus, prom_fill, (void *)s);
}

/* ---- --plot: every row's IOPS, MB/s and p99 latency at each interval report ---- */
struct curve {
	char key[600];
	double *t, *iops, *mbs, *p99;
	size_t n, cap;
};

struct curves {
	struct curve *v;
	size_t n, cap;
};

static struct curve *curve_for(struct curves *c, const char *key)
{
	for (size_t i = 0; i < c->n; i++)
		if (!strcmp(c->v[i].key, key))
			return &c->v[i];
	if (c->n == c->cap) {
		size_t cap = c->cap ? 2 * c->cap : 8;
		struct curve *v = realloc(c->v, cap * sizeof *v);
		if (!v)
			return NULL;
		c->v = v;
		c->cap = cap;
	}
	struct curve *k = &c->v[c->n++];
	memset(k, 0, sizeof *k);
	snprintf(k->key, sizeof k->key, "%s", key);
	return k;
}

static int curve_add(struct curve *k, double t, double iops, double mbs, double p99)
{
	if (k->n == k->cap) {
		size_t cap = k->cap ? 2 * k->cap : 64;
		double **v[4] = {&k->t, &k->iops, &k->mbs, &k->p99};
		for (int i = 0; i < 4; i++) { /* each kept as it grows: curves_free frees it */
			double *g = realloc(*v[i], cap * sizeof *g);
			if (!g)
				return -ENOMEM;
			*v[i] = g;
		}
		k->cap = cap;
	}
	k->t[k->n] = t, k->iops[k->n] = iops, k->mbs[k->n] = mbs, k->p99[k->n] = p99;
	k->n++;
	return 0;
}

/* One interval report's points, at t seconds from the first report. */
static int plot_sample(struct curves *c, const struct odm_rows *s, double t, double secs)
{
	for (size_t i = 0; i < s->n; i++) {
		const struct odm_row *r = &s->rows[i];
		uint64_t ops = 0, bytes = 0, hist[ODM_HIST_BINS] = {0};
		for (int d = 0; d < 2; d++)
			for (int m = 0; m < 2; m++) {
				ops += r->c[d][m].ops;
				bytes += r->c[d][m].bytes;
			}
		for (int m = 0; m < 2; m++)
			for (unsigned b = 0; b < ODM_HIST_BINS; b++)
				hist[b] += r->hist[m][b];
		struct curve *k = curve_for(c, r->key);
		if (!k || curve_add(k, t, ops / secs, bytes / secs / 1048576.0,
				    odm_hist_percentile(hist, 99.0) / 1000.0))
			return -ENOMEM;
	}
	return 0;
}

static int plot_write(const struct opts *o, const struct curves *c)
{
	struct plot_series *ser = calloc(3 * (c->n ? c->n : 1), sizeof *ser);
	FILE *f = ser ? fopen(o->plot, "w") : NULL;
	int rc = f ? 0 : -errno;
	if (!rc) {
		for (size_t i = 0; i < c->n; i++) {
			const struct curve *k = &c->v[i];
			ser[i] = (struct plot_series){k->key, k->t, k->iops, k->n};
			ser[c->n + i] = (struct plot_series){k->key, k->t, k->mbs, k->n};
			ser[2 * c->n + i] = (struct plot_series){k->key, k->t, k->p99, k->n};
		}
		const struct plot_panel panels[] = {{"IOPS (reads and writes)", ser, c->n},
						    {"MB/s", ser + c->n, c->n},
						    {"p99 latency (ms)", ser + 2 * c->n, c->n}};
		char title[128];
		snprintf(title, sizeof title, "odmstat by %s, every %g s", odm_by_names[o->by],
			 o->interval);
		rc = svg_plot(f, title, panels, 3);
		if (fclose(f) && !rc)
			rc = -errno;
	}
	free(ser);
	if (rc)
		fprintf(stderr, "odmstat: --plot %s: %s\n", o->plot, strerror(-rc));
	return rc ? 1 : 0;
}

static void curves_free(struct curves *c)
{
	for (size_t i = 0; i < c->n; i++) {
		free(c->v[i].t);
		free(c->v[i].iops);
		free(c->v[i].mbs);
		free(c->v[i].p99);
	}
	free(c->v);
}

struct list_arg {
	const struct opts *o;
	bool first;
};

static void list_one(void *arg, struct odm_segment *seg)
{
	struct list_arg *a = arg;
	for (unsigned i = 0; i < seg->nprocs; i++) {
		const struct odm_proc_slot *p = &seg->procs[i];
		if (p->state != ODM_SLOT_LIVE || !odm_slot_alive(p))
			continue;
		uint64_t rd = p->total[0][0].ops + p->total[0][1].ops;
		uint64_t wr = p->total[1][0].ops + p->total[1][1].ops;
		const char *pt = odm_ptype_names[p->ptype < ODM_PT_COUNT ? p->ptype : 0];
		if (a->o->json) {
			printf("%s{\"pid\": %d, \"database\": ", a->first ? "" : ", ", (int)p->pid);
			json_string(stdout, seg->database);
			printf(", \"instance\": ");
			json_string(stdout, seg->instance);
			printf(", \"node\": ");
			json_string(stdout, seg->node);
			printf(", \"ptype\": \"%s\", \"name\": ", pt);
			json_string(stdout, p->name);
			printf(", \"reads\": %llu, \"writes\": %llu}", (unsigned long long)rd,
			       (unsigned long long)wr);
		} else {
			printf("%-8d %-12s %-12s %-10s %-16s %12llu %12llu\n", (int)p->pid,
			       seg->database, seg->instance, pt, p->name, (unsigned long long)rd,
			       (unsigned long long)wr);
		}
		a->first = false;
	}
}

static int list(const struct opts *o)
{
	struct list_arg a = {o, true};
	if (o->json)
		printf("[");
	else
		printf("%-8s %-12s %-12s %-10s %-16s %12s %12s\n", "PID", "DATABASE", "INSTANCE",
		       "PTYPE", "NAME", "READS", "WRITES");
	int found = odm_each_segment(o->instance, true, list_one, &a);
	if (o->json)
		printf("]\n");
	return found;
}

static volatile sig_atomic_t stop;
static void on_signal(int sig) { (void)sig; stop = 1; }

static int parse(int argc, char **argv, struct opts *o)
{
	static const struct option longs[] = {
		{"interval", required_argument, NULL, 'i'}, {"count", required_argument, NULL, 'c'},
		{"by", required_argument, NULL, 'b'},       {"instance", required_argument, NULL, 'I'},
		{"json", no_argument, NULL, 'j'},           {"list", no_argument, NULL, 'l'},
		{"prometheus", optional_argument, NULL, 'P'}, {"plot", required_argument, NULL, 'G'},
		{"cluster", optional_argument, NULL, 'C'},
		{"version", no_argument, NULL, 'V'}, {"help", no_argument, NULL, 'h'},           {NULL, 0, NULL, 0}};
	*o = (struct opts){.count = -1};
	int c;
	char *end;
	while ((c = getopt_long(argc, argv, "i:c:lhV", longs, NULL)) != -1) {
		/* NULL only for --prometheus without =FILE */
		const char *arg = optarg ? optarg : "";
		switch (c) {
		case 'i':
			o->interval = strtod(arg, &end);
			if (*end || !(o->interval > 0 && o->interval <= 86400)) {
				fprintf(stderr, "odmstat: interval '%s': give seconds, more than 0\n", arg);
				return 2;
			}
			break;
		case 'c':
			o->count = strtol(arg, &end, 10);
			if (*end || o->count < 1) {
				fprintf(stderr, "odmstat: count '%s': give a number of reports, 1 or more\n",
					arg);
				return 2;
			}
			break;
		case 'b': {
			size_t k = 0;
			while (k < 5 && strcmp(arg, odm_by_names[k]))
				k++;
			if (k == 5) {
				fprintf(stderr, "odmstat: --by '%s': one of instance, database, node, ptype, "
						"file\n", arg);
				return 2;
			}
			o->by = (enum odm_by)k;
			break;
		}
		case 'I':
			if (!odm_name_ok(arg)) {
				fprintf(stderr, "odmstat: instance '%s': not an instance name\n", arg);
				return 2;
			}
			o->instance = arg;
			break;
		case 'j':
			o->json = true;
			break;
		case 'P':
			o->prometheus = optarg && *optarg ? optarg : "-";
			break;
		case 'G':
			o->plot = arg;
			break;
		case 'C':
			o->cluster = optarg && *optarg ? optarg : "";
			break;
		case 'l':
			o->list = true;
			break;
		case 'V': print_version("odmstat"); exit(0);
		case 'h':
			usage(stdout);
			exit(0);
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "odmstat: unexpected '%s'\n", argv[optind]);
		usage(stderr);
		return 2;
	}
	if (o->prometheus && (o->json || o->list || o->by)) {
		fprintf(stderr, "odmstat: --prometheus has its own labels: not with --json, -l or "
				"--by\n");
		return 2;
	}
	if (o->cluster && (o->list || o->by == ODM_BY_FILE)) {
		fprintf(stderr, "odmstat: --cluster shows instances, databases, nodes and process "
				"types: not with -l or --by file (ask a node itself for those)\n");
		return 2;
	}
	if (o->prometheus)
		o->by = ODM_BY_ALL;
	if (o->plot && (o->interval <= 0 || o->prometheus)) {
		fprintf(stderr, "odmstat: --plot draws interval reports: give -i SEC (and -c COUNT, or "
				"stop it with Ctrl-C), not with --prometheus\n");
		return 2;
	}
	if (o->count < 0)
		o->count = o->interval > 0 ? 0 : 1; /* 0: until interrupted */
	if (o->interval <= 0 && o->count > 1) {
		fprintf(stderr, "odmstat: -c %ld needs -i SEC between reports\n", o->count);
		return 2;
	}
	return 0;
}

/* For --cluster without DIR: the first mounted CFS filesystem whose daemon answers.  A
 * mount left by a daemon that died does not hide a live one after it. */
struct mount_search {
	char *found;
	size_t len;
	int dead; /* CFS mounts whose daemon did not answer */
};

static void take_live_cfs_mount(const struct cfs_mount_entry *m, void *arg)
{
	struct mount_search *s = arg;
	if (s->found[0] || strcmp(m->fstype, "fuse.cfs"))
		return;
	if (tool_daemon_answers(m->dir))
		snprintf(s->found, s->len, "%s", m->dir);
	else
		s->dead++;
}

static const char *first_cfs_mount(char *buf, size_t len)
{
	struct mount_search s = {.found = buf, .len = len};
	buf[0] = 0;
	if (cfs_mountinfo_each(take_live_cfs_mount, &s) || !buf[0]) {
		fprintf(stderr, "odmstat: --cluster: %s; give --cluster=DIR\n",
			s.dead ? "no daemon answers for the CFS filesystems mounted here"
			       : "no CFS filesystem is mounted here");
		return NULL;
	}
	return buf;
}

/* The BY_ALL key of a row from another node, as o->by keys it; NULL: not shown. */
static const char *cluster_key(const struct opts *o, const char *all, const OdmNodeStats *st,
			       char *key, size_t len)
{
	char f[4][ODM_KEY_MAX] = {"", "", "", ""};
	const char *p = all;
	for (int i = 0; i < 4; i++) {
		const char *sep = strchr(p, ODM_KEY_SEP);
		size_t n = sep ? (size_t)(sep - p) : strlen(p);
		snprintf(f[i], sizeof f[i], "%.*s", (int)n, p);
		p = sep ? sep + 1 : p + n;
	}
	if (o->instance && strcmp(f[1], o->instance))
		return NULL;
	if (o->by == ODM_BY_ALL)
		snprintf(key, len, "%s", all);
	else if (o->by == ODM_BY_INSTANCE)
		snprintf(key, len, "%s/%s", f[0], f[1]);
	else if (o->by == ODM_BY_DATABASE)
		snprintf(key, len, "%s", f[0]);
	else if (o->by == ODM_BY_NODE)
		snprintf(key, len, "%s%s", f[2], st->alive ? "" : st->unmounted ? " (unmounted)"
										  : " (down)");
	else
		snprintf(key, len, "%s", f[3]);
	return key;
}

/* Every node's rows from the daemon of o->cluster; how many nodes, or -errno. */
static int take_cluster(const struct opts *o, struct odm_rows *s)
{
	ControlRequest req = CONTROL_REQUEST__INIT;
	ControlReply *r;
	req.op = CONTROL_REQUEST__OP__ODM_STATS;
	int rc = tool_ask("odmstat", o->cluster, &req, &r);
	if (rc)
		return rc;
	odm_rows_clear(s);
	s->since = 1;
	free(nodes.v);
	nodes.n = 0;
	if (!(nodes.v = calloc(r->n_node_stats ? r->n_node_stats : 1, sizeof *nodes.v)))
		rc = -ENOMEM;
	for (size_t i = 0; i < r->n_node_stats && !rc; i++) {
		const OdmNodeStats *st = r->node_stats[i];
		nodes.v[nodes.n++] = (struct node_note){st->node_id, st->alive, st->unmounted,
							st->age_ms / 1000.0};
		if (st->since > s->since)
			s->since = st->since;
		for (size_t k = 0; k < st->n_rows && !rc; k++) {
			struct odm_row row;
			char key[4 * ODM_KEY_MAX];
			if ((rc = odm_row_from_wire(st->rows[k], &row)))
				fprintf(stderr, "odmstat: node %u sent counts I cannot read\n",
					st->node_id);
			else if (cluster_key(o, row.key, st, key, sizeof key))
				rc = odm_rows_add(s, key, &row);
		}
	}
	control_reply__free_unpacked(r, NULL);
	return rc ? rc : (int)nodes.n;
}

static int take(const struct opts *o, struct odm_rows *s)
{
	return o->cluster ? take_cluster(o, s) : odm_rows_take(s, o->by, o->instance, NULL, true);
}

static void not_found(const struct opts *o)
{
	if (o->instance)
		fprintf(stderr, "odmstat: no instance %s on this node (no %s/%s*.%s)\n", o->instance,
			ODM_SEG_DIR, ODM_SEG_PREFIX, o->instance);
	else
		fprintf(stderr, "odmstat: no ODM instance on this node (nothing has called odm_init; "
				"segments live in %s/%s*)\n", ODM_SEG_DIR, ODM_SEG_PREFIX);
}

int main(int argc, char **argv)
{
	struct opts o;
	int rc = parse(argc, argv, &o);
	if (rc)
		return rc;
	if (o.list) {
		if (!list(&o)) {
			not_found(&o);
			return 1;
		}
		return 0;
	}
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	struct odm_rows prev = {0}, cur = {0}, view = {0};
	struct curves curves = {0};
	char mount[4096];
	if (o.cluster && !*o.cluster && !(o.cluster = first_cfs_mount(mount, sizeof mount)))
		return 1;
	if (take(&o, &cur) <= 0) {
		if (!o.cluster)
			not_found(&o);
		return 1;
	}
	for (long n = 1;; n++) {
		bool cumulative = n == 1;
		double secs = cumulative ? cur.since : o.interval;
		odm_rows_clear(&view);
		for (size_t i = 0; i < cur.n; i++) /* rows in the order they were found */
			*row_for(&view, cur.rows[i].key, cur.rows[i].block_size) = cur.rows[i];
		if (!cumulative && !o.prometheus) /* Prometheus' counters only ever grow */
			odm_rows_subtract(&view, &prev);
		if (o.prometheus)
			rc = print_prometheus(&o, &view);
		else if (o.json)
			print_json(&o, &view, secs, cumulative);
		else
			print_text(&o, &view, secs);
		if (o.plot && !cumulative && plot_sample(&curves, &view, (n - 1) * o.interval, secs))
			rc = 1;
		fflush(stdout);
		if ((o.count && n >= o.count) || stop)
			break;
		if (!o.json && !o.prometheus)
			printf("\n");
		struct timespec ts = {(time_t)o.interval, (long)((o.interval - (time_t)o.interval) * 1e9)};
		nanosleep(&ts, NULL);
		if (stop)
			break;
		struct odm_rows raw = prev; /* the sample just shown becomes the base of the next */
		prev = cur;
		cur = raw;
		take(&o, &cur);
	}
	if (o.plot && !rc)
		rc = plot_write(&o, &curves);
	curves_free(&curves);
	odm_rows_free(&view);
	odm_rows_free(&prev);
	odm_rows_free(&cur);
	free(nodes.v);
	return rc;
}
