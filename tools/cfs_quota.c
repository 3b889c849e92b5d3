/* SPDX-License-Identifier: GPL-2.0-or-later */
/* cfs quota: limits and usage per user, group and project, through the daemon of the mount
 * the directory is in (cfs(8), "Quotas").  Everything given is checked before the request is
 * sent; the daemon checks the limits against what is used. */
#include "tools/cfs_quota.h"

#include "cfs/cfs.h"
#include "cvm/cvm.h"
#include "tools/ask.h"
#include "tools/common.h"

#include <errno.h>
#include <getopt.h>
#include <stddef.h>
#include <grp.h>
#include <inttypes.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

void cfs_quota_usage(FILE *out)
{
	fprintf(out,
		"usage: cfs quota set DIR -u USER|-g GROUP|-p ID [--blocks-soft SIZE]\n"
		"           [--blocks-hard SIZE] [--inodes-soft N] [--inodes-hard N] [--grace SECONDS]\n"
		"       cfs quota get DIR -u USER|-g GROUP|-p ID [--json]\n"
		"       cfs quota report DIR [-u|-g|-p] [--json | --prometheus[=FILE]]\n"
		"DIR: any path in a CFS mount.  SIZE as 64M or 10G; 0 removes a limit.  Limits apply\n"
		"from the next allocation.  --prometheus: the text format, to FILE (replaced whole,\n"
		"for node_exporter's textfile collector, beside odmstat's) or standard output.\n"
		"See cfs(8), \"Quotas\".\n"
		"Exit status: 0 done, 1 failed, 2 bad usage.\n");
}

/* USER, GROUP or project ID, by name or number. */
static int resolve(unsigned type, const char *name, uint32_t *id)
{
	uint64_t n;
	if (parse_number(name, &n) && n < UINT32_MAX) {
		*id = (uint32_t)n;
		return 0;
	}
	if (type == CFS_QUOTA_USER) {
		struct passwd *pw = getpwnam(name);
		if (pw) {
			*id = pw->pw_uid;
			return 0;
		}
		fprintf(stderr, "cfs: quota: no user '%s' on this node: give a user name or number\n",
			name);
	} else if (type == CFS_QUOTA_GROUP) {
		struct group *gr = getgrnam(name);
		if (gr) {
			*id = gr->gr_gid;
			return 0;
		}
		fprintf(stderr, "cfs: quota: no group '%s' on this node: give a group name or "
			"number\n", name);
	} else {
		fprintf(stderr, "cfs: quota: project '%s': give a project id, a number from 0 to "
			"%u\n", name, UINT32_MAX - 1);
	}
	return -EINVAL;
}

/* The mount a path is in: the topmost directory above it on the same device. */
static int mount_of(const char *path, char *root, size_t len)
{
	char at[PATH_MAX];
	struct stat st, up;
	if (!realpath(path, at) || stat(at, &st)) {
		fprintf(stderr, "cfs: quota: %s: %s\n", path, strerror(errno));
		return -errno;
	}
	for (char *slash; (slash = strrchr(at, '/')) && slash != at;) {
		*slash = '\0';
		if (stat(at, &up) || up.st_dev != st.st_dev) {
			*slash = '/';
			break;
		}
	}
	snprintf(root, len, "%s", at);
	return 0;
}

struct quota_args {
	const char *dir, *who;
	char root[PATH_MAX];
	int type; /* -1: none given */
	bool json;
	const char *prometheus; /* NULL; "-": standard output; else a file replaced each time */
	ControlRequest req;
	QuotaRecord rec;
};

static int limit_arg(int opt, const char *arg, QuotaRecord *r)
{
	uint64_t v;
	bool bytes = opt == 'S' || opt == 'H';
	bool ok = bytes ? cvm_parse_size(arg, &v) == 0 : parse_number(arg, &v);
	if (!ok) {
		fprintf(stderr, "cfs: quota: '%s' is not %s\n", arg,
			bytes ? "a size (as 64M or 10G)" : "a number");
		return -EINVAL;
	}
	switch (opt) {
	case 'S': r->has_soft_bytes = true, r->soft_bytes = v; break;
	case 'H': r->has_hard_bytes = true, r->hard_bytes = v; break;
	case 'i': r->has_soft_inodes = true, r->soft_inodes = v; break;
	case 'I': r->has_hard_inodes = true, r->hard_inodes = v; break;
	default: r->has_grace = true, r->grace = v; break;
	}
	return 0;
}

static int parse(int argc, char **argv, const char *cmd, struct quota_args *a)
{
	static const struct option longs[] = {
		{"user", required_argument, NULL, 'u'},  {"group", required_argument, NULL, 'g'},
		{"project", required_argument, NULL, 'p'}, {"blocks-soft", required_argument, NULL, 'S'},
		{"blocks-hard", required_argument, NULL, 'H'}, {"inodes-soft", required_argument, NULL, 'i'},
		{"inodes-hard", required_argument, NULL, 'I'}, {"grace", required_argument, NULL, 'G'},
		{"json", no_argument, NULL, 'j'}, {"help", no_argument, NULL, 'h'},
		{"prometheus", optional_argument, NULL, 'P'}, {0}};
	bool report = !strcmp(cmd, "report");
	/* report takes -u, -g, -p without a name */
	const char *shorts = report ? "ugpjh" : "u:g:p:jh";
	optind = 1;
	for (int c; (c = getopt_long(argc, argv, shorts, longs, NULL)) != -1;) {
		int type = c == 'u' ? CFS_QUOTA_USER : c == 'g' ? CFS_QUOTA_GROUP
					  : c == 'p' ? CFS_QUOTA_PROJECT : -1;
		if (type >= 0) {
			if (a->type >= 0) {
				fprintf(stderr, "cfs: quota: give one of -u, -g and -p\n");
				return -EINVAL;
			}
			a->type = type;
			a->who = report ? NULL : optarg;
		} else if (c == 'j') {
			a->json = true;
		} else if (c == 'P' && report) {
			a->prometheus = optarg && *optarg ? optarg : "-";
		} else if (c == 'h') {
			cfs_quota_usage(stdout);
			exit(EXIT_OK);
		} else if (strchr("SHiIG", c) && c && !strcmp(cmd, "set")) {
			if (limit_arg(c, optarg, &a->rec))
				return -EINVAL;
		} else {
			cfs_quota_usage(stderr);
			return -EINVAL;
		}
	}
	if (argc - optind != 1) {
		fprintf(stderr, "cfs: quota %s: give one DIR in the mount\n", cmd);
		return -EINVAL;
	}
	if (mount_of(argv[optind], a->root, sizeof a->root))
		return -ENOENT;
	a->dir = a->root;
	if (a->json && a->prometheus) {
		fprintf(stderr, "cfs: quota report: --json or --prometheus, not both\n");
		return -EINVAL;
	}
	if (!report && a->type < 0) {
		fprintf(stderr, "cfs: quota %s: give -u USER, -g GROUP or -p ID\n", cmd);
		return -EINVAL;
	}
	return 0;
}

/* The checks the daemon would make anyway, before anything is sent. */
static int check_set(const QuotaRecord *r)
{
	if (!r->has_soft_bytes && !r->has_hard_bytes && !r->has_soft_inodes &&
	    !r->has_hard_inodes && !r->has_grace) {
		fprintf(stderr, "cfs: quota set: give a limit to set (--blocks-soft, --blocks-hard, "
			"--inodes-soft, --inodes-hard, --grace)\n");
		return -EINVAL;
	}
	if (r->has_soft_bytes && r->has_hard_bytes && r->hard_bytes && r->soft_bytes > r->hard_bytes) {
		fprintf(stderr, "cfs: quota set: --blocks-soft is above --blocks-hard: give a soft "
			"limit at or below the hard one\n");
		return -EINVAL;
	}
	if (r->has_soft_inodes && r->has_hard_inodes && r->hard_inodes &&
	    r->soft_inodes > r->hard_inodes) {
		fprintf(stderr, "cfs: quota set: --inodes-soft is above --inodes-hard: give a soft "
			"limit at or below the hard one\n");
		return -EINVAL;
	}
	return 0;
}

void cfs_quota_print_json(const QuotaRecord *r)
{
	printf("{\"type\": \"%s\", \"id\": %" PRIu32 ", \"used_bytes\": %" PRIu64
	       ", \"used_inodes\": %" PRIu64 ", \"soft_bytes\": %" PRIu64 ", \"hard_bytes\": %" PRIu64
	       ", \"soft_inodes\": %" PRIu64 ", \"hard_inodes\": %" PRIu64 ", \"grace\": %" PRIu64
	       ", \"bytes_over_since\": %" PRId64 ", \"inodes_over_since\": %" PRId64 "}",
	       cfs_quota_type_name(r->type), r->id, r->used_bytes, r->used_inodes, r->soft_bytes,
	       r->hard_bytes, r->soft_inodes, r->hard_inodes, r->grace, r->bytes_over_since,
	       r->inodes_over_since);
}

static void size_or_none(uint64_t v, char *out, size_t len)
{
	if (v)
		cvm_format_size(v, out, len);
	else
		snprintf(out, len, "none");
}

/* "over the soft limit, 2h left" or "" */
static void grace_left(int64_t since, uint64_t grace, char *out, size_t len)
{
	out[0] = '\0';
	if (!since)
		return;
	int64_t left = since + (int64_t)grace - (int64_t)time(NULL);
	if (left <= 0)
		snprintf(out, len, "  (grace over: refused)");
	else
		snprintf(out, len, "  (over soft, %" PRId64 "s of grace left)", left);
}

void cfs_quota_print_near(const QuotaRecord *r)
{
	uint64_t b = r->hard_bytes ? r->hard_bytes : r->soft_bytes;
	uint64_t i = r->hard_inodes ? r->hard_inodes : r->soft_inodes;
	char used[32], limit[32];
	cvm_format_size(r->used_bytes, used, sizeof used);
	cvm_format_size(b, limit, sizeof limit);
	printf("  quota: %s %" PRIu32 " uses %s", cfs_quota_type_name(r->type), r->id, used);
	if (b)
		printf(" of %s (%.0f%%)", limit, 100.0 * (double)r->used_bytes / (double)b);
	printf(", %" PRIu64 " inodes", r->used_inodes);
	if (i)
		printf(" of %" PRIu64 " (%.0f%%)", i, 100.0 * (double)r->used_inodes / (double)i);
	printf("%s\n", r->bytes_over_since || r->inodes_over_since ? ", over a soft limit" : "");
}

static void print_text_header(void)
{
	printf("%-8s %10s %10s %10s %10s %10s %10s %10s\n", "type", "id", "used", "soft", "hard",
	       "inodes", "soft", "hard");
}

static void print_text(const QuotaRecord *r)
{
	char used[32], soft[32], hard[32], g1[64], g2[64];
	cvm_format_size(r->used_bytes, used, sizeof used);
	size_or_none(r->soft_bytes, soft, sizeof soft);
	size_or_none(r->hard_bytes, hard, sizeof hard);
	grace_left(r->bytes_over_since, r->grace, g1, sizeof g1);
	grace_left(r->inodes_over_since, r->grace, g2, sizeof g2);
	char isoft[24] = "none", ihard[24] = "none";
	if (r->soft_inodes)
		snprintf(isoft, sizeof isoft, "%" PRIu64, r->soft_inodes);
	if (r->hard_inodes)
		snprintf(ihard, sizeof ihard, "%" PRIu64, r->hard_inodes);
	printf("%-8s %10" PRIu32 " %10s %10s %10s %10" PRIu64 " %10s %10s%s%s\n",
	       cfs_quota_type_name(r->type), r->id, used, soft, hard, r->used_inodes, isoft, ihard,
	       g1, g2);
}

static int ask_one(struct quota_args *a, ControlRequest__Op op, ControlReply **r)
{
	a->req.op = op;
	a->req.quota = &a->rec;
	return tool_ask("cfs", a->dir, &a->req, r) ? -EIO : 0;
}

static void prometheus_record(FILE *f, const char *fs, const QuotaRecord *r)
{
	static const struct {
		const char *name;
		size_t off;
	} metrics[] = {{"used_bytes", offsetof(QuotaRecord, used_bytes)},
		       {"used_inodes", offsetof(QuotaRecord, used_inodes)},
		       {"soft_bytes", offsetof(QuotaRecord, soft_bytes)},
		       {"hard_bytes", offsetof(QuotaRecord, hard_bytes)},
		       {"soft_inodes", offsetof(QuotaRecord, soft_inodes)},
		       {"hard_inodes", offsetof(QuotaRecord, hard_inodes)}};
	for (size_t m = 0; m < sizeof metrics / sizeof *metrics; m++) {
		uint64_t v;
		memcpy(&v, (const char *)r + metrics[m].off, sizeof v);
		fprintf(f, "cfs_quota_%s{fs=\"%s\",type=\"%s\",id=\"%" PRIu32 "\"} %" PRIu64 "\n",
			metrics[m].name, fs, cfs_quota_type_name(r->type), r->id, v);
	}
	int64_t since = r->bytes_over_since ? r->bytes_over_since : r->inodes_over_since;
	fprintf(f, "cfs_quota_over_soft_since_seconds{fs=\"%s\",type=\"%s\",id=\"%" PRIu32
		   "\"} %" PRId64 "\n", fs, cfs_quota_type_name(r->type), r->id, since);
}

struct prometheus_report {
	const char *fs;
	ControlReply **r;
	size_t nr;
};

static void fill_prometheus(FILE *f, void *arg)
{
	const struct prometheus_report *p = arg;
	fprintf(f, "# HELP cfs_quota_used_bytes Bytes an id's files hold (cfs quota).\n"
		   "# TYPE cfs_quota_used_bytes gauge\n");
	for (size_t k = 0; k < p->nr; k++)
		for (size_t i = 0; p->r[k] && i < p->r[k]->n_quotas; i++)
			prometheus_record(f, p->fs, p->r[k]->quotas[i]);
}

/* The text format, whole, to standard output or in place of FILE (a reader never sees half). */
static int write_prometheus(const char *to, const char *fs, ControlReply **r, size_t nr)
{
	struct prometheus_report p = {fs, r, nr};
	return write_whole("cfs: quota report", to, fill_prometheus, &p);
}

static void free_replies(ControlReply **r, size_t n)
{
	for (size_t k = 0; k < n; k++)
		if (r[k])
			control_reply__free_unpacked(r[k], NULL);
}

static int do_report(struct quota_args *a)
{
	ControlReply *r[CFS_QUOTA_TYPES] = {0};
	for (unsigned t = 0; t < CFS_QUOTA_TYPES; t++) {
		if (a->type >= 0 && (unsigned)a->type != t)
			continue;
		a->rec.type = t;
		a->rec.has_id = false;
		if (ask_one(a, CONTROL_REQUEST__OP__QUOTA_REPORT, &r[t])) {
			free_replies(r, CFS_QUOTA_TYPES);
			return EXIT_FAILED;
		}
	}
	int rc = EXIT_OK;
	if (a->prometheus) {
		rc = write_prometheus(a->prometheus, a->dir, r, CFS_QUOTA_TYPES);
	} else {
		bool first = true;
		if (a->json)
			printf("[");
		else
			print_text_header();
		for (unsigned t = 0; t < CFS_QUOTA_TYPES; t++)
			for (size_t i = 0; r[t] && i < r[t]->n_quotas; i++) {
				if (a->json) {
					printf("%s", first ? "" : ", ");
					cfs_quota_print_json(r[t]->quotas[i]);
				} else {
					print_text(r[t]->quotas[i]);
				}
				first = false;
			}
		if (a->json)
			printf("]\n");
	}
	free_replies(r, CFS_QUOTA_TYPES);
	return rc;
}

int cfs_quota_main(int argc, char **argv)
{
	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		cfs_quota_usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? EXIT_USAGE : EXIT_OK;
	}
	const char *cmd = argv[1];
	if (strcmp(cmd, "set") && strcmp(cmd, "get") && strcmp(cmd, "report")) {
		fprintf(stderr, "cfs: quota '%s': give set, get or report\n", cmd);
		cfs_quota_usage(stderr);
		return EXIT_USAGE;
	}
	struct quota_args a = {.type = -1, .req = CONTROL_REQUEST__INIT};
	quota_record__init(&a.rec);
	if (parse(argc - 1, argv + 1, cmd, &a))
		return EXIT_USAGE;
	if (!strcmp(cmd, "report"))
		return do_report(&a);
	a.rec.type = (uint32_t)a.type;
	a.rec.has_id = true;
	if (resolve((unsigned)a.type, a.who, &a.rec.id))
		return EXIT_USAGE;
	bool set = !strcmp(cmd, "set");
	if (set && check_set(&a.rec))
		return EXIT_USAGE;
	ControlReply *r;
	if (ask_one(&a, set ? CONTROL_REQUEST__OP__QUOTA_SET : CONTROL_REQUEST__OP__QUOTA_GET, &r))
		return EXIT_FAILED;
	if (r->n_quotas != 1) {
		fprintf(stderr, "cfs: quota: the daemon of %s answered no record\n", a.dir);
		control_reply__free_unpacked(r, NULL);
		return EXIT_FAILED;
	}
	if (a.json) {
		cfs_quota_print_json(r->quotas[0]);
		printf("\n");
	} else {
		print_text_header();
		print_text(r->quotas[0]);
	}
	control_reply__free_unpacked(r, NULL);
	return EXIT_OK;
}
