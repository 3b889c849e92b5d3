/* SPDX-License-Identifier: GPL-2.0-or-later */
/* cvm: the volume manager's command.  See man/cvm.8. */
#include "../cvm/cvm.h"
#include "tools/version.h"
#include "../dlm-client/cfslock.h"
#include "common.h"
#include "ask.h"
#include "restripe_mounted.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

enum { EXIT_CHECK_REPAIRED = 1, EXIT_RESTRIPE_PAUSED = 3, EXIT_CHECK_PROBLEMS = 4 };

struct opts {
	struct scan_paths scan;
	const char *locks; /* lock manager backend for config changes */
	bool json, force, repair;
	uint64_t stripe_width;
	double rate_mb;    /* restripe: MB/s at most, 0 no limit */
	const char *luns;  /* restripe: which LUNs */
	const char *command;
	char **args;
	int nargs;
};

static void usage(FILE *out)
{
	fprintf(out,
		"Usage: cvm [--scan PATH]... COMMAND [ARGS]\n"
		"\n"
		"Cluster volume manager: concatenated, striped volumes over shared LUNs.\n"
		"\n"
		"Commands:\n"
		"  create NAME [--stripe-width SIZE] LUN...   label LUNs and build a striped volume\n"
		"  show [NAME] [--json]                        show one volume, or all found\n"
		"  discover PATH... [--json]                   list volumes and LUNs under paths\n"
		"  grow NAME [--stripe-width SIZE] LUN...      append a stripe set of new LUNs\n"
		"  restripe NAME [--stripe-width SIZE] [--rate MB/s] [--luns all|LIST]\n"
		"                                              make it one stripe set over all its\n"
		"                                              LUNs (or those of LIST's stripe\n"
		"                                              sets), mounted on this node (its\n"
		"                                              daemon runs it) or unmounted;\n"
		"                                              Ctrl-C pauses, running it again\n"
		"                                              (on any node) goes on\n"
		"  check NAME [--repair]                       verify labels and config copies\n"
		"  remove NAME [--force]                       wipe a volume's labels and config\n"
		"\n"
		"Options:\n"
		"  -s, --scan PATH          where to look for LUNs: a directory, a glob, a device or\n"
		"                           file; repeatable (default: $CVM_SCAN, colon-separated,\n"
		"                           else /dev/disk/by-id)\n"
		"  -w, --stripe-width SIZE  stripe width: a power of two multiple of 4k (default 256k;\n"
		"                           restripe: that of the first set it takes)\n"
		"  -R, --rate MB/s          restripe: move at most this many megabytes a second\n"
		"      --luns all|LIST      restripe: the LUNs (paths or uuids, comma-separated) of\n"
		"                           the adjacent stripe sets to make one (default all)\n"
		"  -j, --json               machine-readable output (show, discover)\n"
		"  -f, --force              remove a volume that is incomplete or holds data\n"
		"  -r, --repair             let check rewrite damaged labels and stale config copies\n"
		"  -L, --locks BACKEND      lock manager that serialises config changes across nodes:\n"
		"                           local (this process only), corosync or dlm (default:\n"
		"                           $CFSLOCK_BACKEND, else local)\n"
		"  -h, --help               this text\n"
		"\n"
		"SIZE takes a suffix k, M, G or T (powers of 1024).\n"
		"Exit status: 0 done; 1 failed (the message says why); 2 bad usage; check: 1 problems\n"
		"repaired, 4 problems left; restripe: 3 paused.\n");
}

static int fail(const char *what, int rc)
{
	const char *msg = cvm_last_error();
	fprintf(stderr, "cvm %s: %s\n", what, *msg ? msg : strerror(-rc));
	return EXIT_FAILED;
}

static int usage_error(const char *fmt, const char *arg)
{
	fprintf(stderr, "cvm: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\nTry 'cvm --help'.\n");
	return EXIT_USAGE;
}

static const char *lun_state(const struct cvm_scan *scan, const struct cvm_config *cfg,
			     uint32_t i, const char **path)
{
	const struct cvm_found_lun *f = cvm_scan_lun(scan, &cfg->luns[i].uuid);
	*path = f ? f->path : cfg->luns[i].path;
	if (!f)
		return "missing";
	if (f->state == CVM_LUN_LABEL_DAMAGED)
		return "label-damaged";
	if (f->slot_generation[cfg->generation % 2] != cfg->generation)
		return "stale-config";
	return "ok";
}

static bool volume_complete(const struct cvm_scan *scan, const struct cvm_config *cfg)
{
	for (uint32_t i = 0; i < cfg->nluns; i++) {
		const char *path;
		const char *st = lun_state(scan, cfg, i, &path);
		if (strcmp(st, "ok") && strcmp(st, "stale-config"))
			return false;
	}
	return true;
}

static void print_volume_text(const struct cvm_scan *scan, const struct cvm_config *cfg)
{
	char uuid[CVM_UUID_STR], size[32];
	cvm_uuid_format(&cfg->vol_uuid, uuid);
	cvm_format_size(cvm_config_size(cfg), size, sizeof size);
	printf("volume %s\n  uuid        %s\n  size        %s (%" PRIu64 " bytes)\n"
	       "  generation  %" PRIu64 "\n  state       %s\n",
	       cfg->name, uuid, size, cvm_config_size(cfg), cfg->generation,
	       volume_complete(scan, cfg) ? "complete" : "INCOMPLETE (see the LUNs below)");
	uint64_t moves, chunk;
	const struct cvm_restripe *r = &cfg->restripe;
	if (r->target_width && cvm_restripe_count(cfg, &moves, &chunk) == 0) {
		char width[32], per[32], sets[48], of[56] = "";
		cvm_format_size(r->target_width, width, sizeof width);
		cvm_format_size(r->target_lun_bytes, per, sizeof per);
		uint32_t nluns = 0;
		for (uint32_t s = r->first_set; s < r->first_set + r->set_count; s++)
			nluns += cfg->sets[s].nluns;
		if (r->set_count < cfg->nsets) {
			cvm_restripe_name_sets(r->first_set, r->set_count, sets, sizeof sets);
			snprintf(of, sizeof of, "of %s ", sets);
		}
		printf("  restripe    %.0f%% done (%" PRIu64 " of %" PRIu64 " moves) %sto one stripe "
		       "set of width %s, %u LUNs x %s; 'cvm restripe %s' goes on with it\n",
		       moves ? 100.0 * (double)r->moves_done / (double)moves : 100.0, r->moves_done,
		       moves, of, width, nluns, per, cfg->name);
	}
	for (uint32_t s = 0; s < cfg->nsets; s++) {
		const struct cvm_stripe_set *set = &cfg->sets[s];
		char width[32], per[32];
		cvm_format_size(set->stripe_width, width, sizeof width);
		cvm_format_size(set->lun_bytes, per, sizeof per);
		printf("  stripe set %u: width %s, %u LUNs x %s\n", s, width, set->nluns, per);
		for (uint32_t i = set->first_lun; i < set->first_lun + set->nluns; i++) {
			const char *path;
			const char *st = lun_state(scan, cfg, i, &path);
			char lu[CVM_UUID_STR];
			cvm_uuid_format(&cfg->luns[i].uuid, lu);
			printf("    LUN %-3u %s  %-13s %s\n", i, lu, st, path);
		}
	}
}

/* Inside the volume's object, before its stripe sets: "restripe":{...} or null, then ','. */
static void print_restripe_json(const struct cvm_config *cfg)
{
	uint64_t moves, chunk;
	if (!cfg->restripe.target_width || cvm_restripe_count(cfg, &moves, &chunk)) {
		printf("\"restripe\":null,");
		return;
	}
	printf("\"restripe\":{\"target_stripe_width\":%" PRIu64 ",\"target_lun_bytes\":%" PRIu64
	       ",\"moves_done\":%" PRIu64 ",\"moves_total\":%" PRIu64 ",\"chunk_bytes\":%" PRIu64
	       ",\"staged\":%u,\"first_set\":%u,\"set_count\":%u},", cfg->restripe.target_width,
	       cfg->restripe.target_lun_bytes, cfg->restripe.moves_done, moves, chunk,
	       cfg->restripe.staged, cfg->restripe.first_set, cfg->restripe.set_count);
}

static void print_volume_json(const struct cvm_scan *scan, const struct cvm_config *cfg)
{
	char uuid[CVM_UUID_STR];
	cvm_uuid_format(&cfg->vol_uuid, uuid);
	printf("{\"name\":");
	json_string(stdout, cfg->name);
	printf(",\"uuid\":\"%s\",\"size_bytes\":%" PRIu64 ",\"generation\":%" PRIu64
	       ",\"complete\":%s,",
	       uuid, cvm_config_size(cfg), cfg->generation,
	       volume_complete(scan, cfg) ? "true" : "false");
	print_restripe_json(cfg);
	printf("\"stripe_sets\":[");
	for (uint32_t s = 0; s < cfg->nsets; s++) {
		const struct cvm_stripe_set *set = &cfg->sets[s];
		printf("%s{\"stripe_width\":%" PRIu64 ",\"lun_bytes\":%" PRIu64 ",\"luns\":[",
		       s ? "," : "", set->stripe_width, set->lun_bytes);
		for (uint32_t i = set->first_lun; i < set->first_lun + set->nluns; i++) {
			const char *path;
			const char *st = lun_state(scan, cfg, i, &path);
			char lu[CVM_UUID_STR];
			cvm_uuid_format(&cfg->luns[i].uuid, lu);
			printf("%s{\"index\":%u,\"uuid\":\"%s\",\"state\":\"%s\",\"path\":",
			       i > set->first_lun ? "," : "", i, lu, st);
			json_string(stdout, path);
			printf("}");
		}
		printf("]}");
	}
	printf("]}");
}

/* Each volume once: the LUN whose copy is the volume's winning config speaks for it. */
static size_t volume_configs(const struct cvm_scan *scan, const struct cvm_config **out)
{
	size_t n = 0;
	for (size_t i = 0; i < scan->nluns; i++) {
		const struct cvm_config *c = scan->luns[i].config;
		if (!c)
			continue;
		size_t j;
		for (j = 0; j < n && !cvm_uuid_equal(&out[j]->vol_uuid, &c->vol_uuid); j++)
			;
		if (j == n)
			out[n++] = c;
		else if (c->generation > out[j]->generation)
			out[j] = c;
	}
	return n;
}

static void print_other_luns_json(const struct cvm_scan *scan)
{
	bool first = true;
	for (size_t i = 0; i < scan->nluns; i++) {
		const struct cvm_found_lun *f = &scan->luns[i];
		if (f->config)
			continue;
		char lu[CVM_UUID_STR];
		cvm_uuid_format(&f->lun_uuid, lu);
		printf("%s{\"path\":", first ? "" : ",");
		json_string(stdout, f->path);
		printf(",\"uuid\":\"%s\",\"state\":\"%s\"}", lu,
		       f->state == CVM_LUN_PREPARED	   ? "prepared"
		       : f->state == CVM_LUN_NO_CONFIG ? "config-damaged"
						       : "label-damaged");
		first = false;
	}
}

static void print_other_luns_text(const struct cvm_scan *scan)
{
	for (size_t i = 0; i < scan->nluns; i++) {
		const struct cvm_found_lun *f = &scan->luns[i];
		if (f->config)
			continue;
		if (f->state == CVM_LUN_PREPARED)
			printf("LUN %s: labelled for volume %s by an interrupted create or grow; "
			       "not part of any volume\n", f->path, f->vol_name);
		else if (f->state == CVM_LUN_NO_CONFIG)
			printf("LUN %s: member of volume %s with both config copies damaged; run "
			       "'cvm check %s'\n", f->path, f->vol_name, f->vol_name);
		else
			printf("LUN %s: damaged CVM label and no readable config\n", f->path);
	}
}

static int print_volumes(const struct cvm_scan *scan, const char *only, bool json, bool others)
{
	const struct cvm_config **cfgs = calloc(scan->nluns + 1, sizeof *cfgs);
	if (!cfgs)
		return EXIT_FAILED;
	size_t n = volume_configs(scan, cfgs);
	if (json)
		printf("{\"volumes\":[");
	size_t shown = 0;
	for (size_t i = 0; i < n; i++) {
		char uuid[CVM_UUID_STR];
		cvm_uuid_format(&cfgs[i]->vol_uuid, uuid);
		if (only && strcmp(only, cfgs[i]->name) && strcmp(only, uuid))
			continue;
		if (json) {
			if (shown)
				printf(",");
			print_volume_json(scan, cfgs[i]);
		} else {
			print_volume_text(scan, cfgs[i]);
		}
		shown++;
	}
	if (json && others) {
		printf("],\"other_luns\":[");
		print_other_luns_json(scan);
	}
	if (json)
		printf("]}\n");
	else if (others)
		print_other_luns_text(scan);
	free(cfgs);
	if (only && shown == 0) {
		struct cvm_config *tmp = malloc(sizeof *tmp);
		int rc = tmp ? cvm_scan_find_volume(scan, only, tmp) : -ENOMEM;
		free(tmp);
		return fail("show", rc);
	}
	if (!json && shown == 0 && !others)
		printf("no volumes found\n");
	return EXIT_OK;
}

/* Config changes of a volume run under an EX cluster lock named after it, so that two nodes
 * never change one volume at once (libcvm's own OFD locks cover one node).  NOQUEUE: a change
 * elsewhere is reported, not waited for. */
struct change_lock {
	struct cfslock_client *client;
	struct cfslock_space *space;
	struct cfslock *lock;
};

static void change_lock_drop(struct change_lock *cl)
{
	if (cl->lock && cfslock_mode(cl->lock) >= 0)
		cfslock_unlock_sync(cl->lock);
	cfslock_free(cl->lock);
	cfslock_space_close(cl->space);
	cfslock_client_close(cl->client);
	memset(cl, 0, sizeof *cl);
}

static int change_lock_take(const struct opts *o, const char *volume, struct change_lock *cl)
{
	char name[CFSLOCK_NAME_MAX + 1];
	snprintf(name, sizeof name, "cvm:%s", volume);
	memset(cl, 0, sizeof *cl);
	int rc = cfslock_client_open(o->locks, NULL, &cl->client);
	if (rc == 0)
		rc = cfslock_space_open(cl->client, "cvm", &cl->space);
	if (rc == 0 && !(cl->lock = cfslock_new(cl->space, name, NULL, NULL, NULL)))
		rc = -EINVAL;
	if (rc == 0)
		rc = cfslock_request_sync(cl->lock, CFSLOCK_EX, CFSLOCK_NOQUEUE);
	if (rc == 0)
		return 0;
	if (rc == -EAGAIN)
		fprintf(stderr, "cvm: volume %s is being changed by another node; retry when that "
				"is done\n", volume);
	else if (rc == -CFSLOCK_ENOQUORUM)
		fprintf(stderr, "cvm: this node has no quorum: volume %s cannot be changed\n", volume);
	else if (cfslock_last_error()[0])
		fprintf(stderr, "cvm: the %s lock manager refused this node: %s\n", o->locks,
			cfslock_last_error());
	else
		fprintf(stderr, "cvm: cannot take the cluster lock of volume %s through the %s lock "
				"manager: %s (see --locks)\n", volume, o->locks, strerror(-rc));
	change_lock_drop(cl);
	return EXIT_FAILED;
}

static int scan_or_fail(struct opts *o, struct cvm_scan *scan, const char *what)
{
	scan_paths_defaults(&o->scan);
	if (o->scan.n == 0) {
		fprintf(stderr, "cvm %s: nowhere to look for LUNs: give --scan DIR, or set "
				"CVM_SCAN\n", what);
		return EXIT_USAGE;
	}
	int rc = cvm_scan_paths(o->scan.paths, o->scan.n, scan);
	return rc ? fail(what, rc) : EXIT_OK;
}

static void print_line(void *arg, const char *line)
{
	(void)arg;
	printf("%s\n", line);
}

/* The change lock of the volume o->args[0], then a scan made under it (what another node
 * changed before is seen). */
static int begin_change(struct opts *o, const char *what, struct change_lock *cl,
			struct cvm_scan *scan)
{
	int ex = change_lock_take(o, o->args[0], cl);
	if (ex == EXIT_OK && (ex = scan_or_fail(o, scan, what)))
		change_lock_drop(cl);
	return ex;
}

static int cmd_create_or_grow(struct opts *o, bool grow)
{
	const char *what = grow ? "grow" : "create";
	if (o->nargs < 2)
		return usage_error("%s needs a volume name and at least one LUN", what);
	/* The new LUNs are scanned too, so their labels are judged with the rest. */
	scan_paths_defaults(&o->scan);
	for (int i = 1; i < o->nargs; i++)
		scan_paths_add(&o->scan, o->args[i]);
	for (int i = 1; i < o->nargs; i++) {
		struct stat st;
		if (stat(o->args[i], &st) < 0) {
			fprintf(stderr, "cvm %s: LUN %s: no such file or device; check the path\n",
				what, o->args[i]);
			return EXIT_FAILED;
		}
		if (!S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode)) {
			fprintf(stderr, "cvm %s: LUN %s: not a block device or regular file\n", what,
				o->args[i]);
			return EXIT_FAILED;
		}
	}
	struct change_lock cl;
	struct cvm_scan scan;
	int ex = begin_change(o, what, &cl, &scan);
	if (ex)
		return ex;
	struct cvm_config *cfg = malloc(sizeof *cfg);
	struct cvm_create_opts copts = {.stripe_width = o->stripe_width};
	const char *const *luns = (const char *const *)o->args + 1;
	int rc = !cfg ? -ENOMEM
	       : grow ? cvm_volume_grow(&scan, o->args[0], luns, (size_t)o->nargs - 1, &copts, cfg)
		      : cvm_volume_create(&scan, o->args[0], luns, (size_t)o->nargs - 1, &copts, cfg);
	if (rc == 0) {
		char size[32];
		cvm_format_size(cvm_config_size(cfg), size, sizeof size);
		printf("volume %s %s: %s, %u LUNs in %u stripe sets, generation %" PRIu64 "\n",
		       cfg->name, grow ? "grown" : "created", size, cfg->nluns, cfg->nsets,
		       cfg->generation);
	}
	free(cfg);
	cvm_scan_free(&scan);
	change_lock_drop(&cl);
	return rc ? fail(what, rc) : EXIT_OK;
}

static int cmd_show(struct opts *o, bool discover)
{
	if (!discover && o->nargs > 1)
		return usage_error("show takes at most one volume name, not '%s'", o->args[1]);
	if (discover) {
		if (o->nargs == 0)
			return usage_error("%s needs at least one PATH", "discover");
		for (int i = 0; i < o->nargs; i++)
			scan_paths_add(&o->scan, o->args[i]);
	}
	struct cvm_scan scan;
	int ex = scan_or_fail(o, &scan, discover ? "discover" : "show");
	if (ex)
		return ex;
	ex = print_volumes(&scan, discover ? NULL : (o->nargs ? o->args[0] : NULL), o->json,
			   discover);
	cvm_scan_free(&scan);
	return ex;
}

static int cmd_check(struct opts *o)
{
	if (o->nargs != 1)
		return usage_error("%s needs exactly one volume name", "check");
	struct change_lock cl = {0};
	struct cvm_scan scan;
	int ex = o->repair ? change_lock_take(o, o->args[0], &cl) : EXIT_OK;
	if (ex || (ex = scan_or_fail(o, &scan, "check"))) {
		change_lock_drop(&cl);
		return ex;
	}
	struct cvm_check_report rep;
	int rc = cvm_volume_check(&scan, o->args[0], o->repair, print_line, NULL, &rep);
	cvm_scan_free(&scan);
	change_lock_drop(&cl);
	if (rc)
		return fail("check", rc);
	if (rep.problems == 0) {
		printf("volume %s: clean\n", o->args[0]);
		return EXIT_OK;
	}
	if (o->repair && rep.repaired == rep.problems) {
		printf("volume %s: %u problems repaired\n", o->args[0], rep.repaired);
		return EXIT_CHECK_REPAIRED;
	}
	printf("volume %s: %u problems%s\n", o->args[0], rep.problems - rep.repaired,
	       o->repair ? " left" : "; run 'cvm check --repair' to fix what can be fixed");
	return EXIT_CHECK_PROBLEMS;
}

static int cmd_remove(struct opts *o)
{
	if (o->nargs != 1)
		return usage_error("%s needs exactly one volume name", "remove");
	struct change_lock cl;
	struct cvm_scan scan;
	int ex = begin_change(o, "remove", &cl, &scan);
	if (ex)
		return ex;
	int rc = cvm_volume_remove(&scan, o->args[0], o->force);
	cvm_scan_free(&scan);
	change_lock_drop(&cl);
	if (rc)
		return fail("remove", rc);
	printf("volume %s removed\n", o->args[0]);
	return EXIT_OK;
}

static volatile int restripe_stop;

static void stop_restripe(int sig)
{
	(void)sig;
	restripe_stop = 1;
}

/* On standard error, at most once a second and at the end: done, rate, time left. */
static void restripe_progress(void *arg, const struct cvm_restripe_progress *p)
{
	static double last = -1;
	const char *name = arg;
	bool end = p->moves_done == p->moves_total;
	if (!end && last >= 0 && p->seconds - last < 1)
		return;
	last = p->seconds;
	char done[32], total[32];
	cvm_format_size(p->moves_done * p->chunk_bytes, done, sizeof done);
	cvm_format_size(p->moves_total * p->chunk_bytes, total, sizeof total);
	double rate = p->seconds > 0 ? (double)p->moved_bytes / p->seconds : 0;
	double left = rate > 0 ? (double)(p->moves_total - p->moves_done) * (double)p->chunk_bytes / rate
			       : 0;
	fprintf(stderr, "cvm restripe: %s: %.0f%% (%s of %s), %.1f MB/s, %.0f s left", name,
		p->moves_total ? 100.0 * (double)p->moves_done / (double)p->moves_total : 100.0, done,
		total, rate / 1e6, left);
	if (p->io_waits || p->io_held) /* online: what the volume's users waited */
		fprintf(stderr, "; %" PRIu64 " I/Os waited for a batch, at most %.1f ms; %" PRIu64
			" asynchronous held", p->io_waits, (double)p->io_wait_max_ns / 1e6, p->io_held);
	fputc('\n', stderr);
}

/* --luns LIST: LUN paths or uuids, comma-separated, into out (room for CVM_MAX_LUNS);
 * "all" gives none. */
static int parse_luns(const char *list, const struct cvm_scan *scan, cvm_uuid *out, uint32_t *n)
{
	*n = 0;
	if (!strcmp(list, "all"))
		return EXIT_OK;
	char *copy = strdup(list), *save = NULL;
	int ex = copy ? EXIT_OK : EXIT_FAILED;
	for (char *item = copy ? strtok_r(copy, ",", &save) : NULL; item && !ex;
	     item = strtok_r(NULL, ",", &save)) {
		const struct cvm_found_lun *f = cvm_scan_lun_at(scan, item);
		if (*n == CVM_MAX_LUNS) {
			fprintf(stderr, "cvm restripe: --luns names more than %d LUNs\n", CVM_MAX_LUNS);
			ex = EXIT_USAGE;
		} else if (f && !cvm_uuid_is_zero(&f->lun_uuid)) {
			out[(*n)++] = f->lun_uuid;
		} else if (f || cvm_uuid_parse(item, &out[*n])) {
			fprintf(stderr, "cvm restripe: --luns: %s is %s; give the LUNs whose stripe "
					"sets are to become one, by path or uuid, comma-separated "
					"('cvm show' lists them), or all\n", item,
				f ? "a LUN without a label" : access(item, F_OK) ? "neither a path nor a uuid"
								 : "not a LUN the scan found (see --scan)");
			ex = EXIT_USAGE;
		} else {
			(*n)++;
		}
	}
	if (!ex && *n == 0) {
		fprintf(stderr, "cvm restripe: --luns '%s' names no LUN\n", list);
		ex = EXIT_USAGE;
	}
	free(copy);
	return ex;
}

/* What the restripe did or why not; the exit status. */
static int restripe_said(int rc, const char *name, const struct cvm_config *cfg)
{
	if (rc == 0) {
		char size[32], sets[256];
		cvm_format_size(cvm_config_size(cfg), size, sizeof size);
		printf("volume %s restriped: %s, %s, generation %" PRIu64 "\n", cfg->name,
		       cvm_describe_sets(cfg, sets, sizeof sets), size, cfg->generation);
	} else if (rc == -EINTR) {
		printf("volume %s: restripe paused; the volume can be used meanwhile, and "
		       "'cvm restripe %s' goes on with it\n", cfg->name, cfg->name);
	} else if (rc == -EALREADY) {
		printf("volume %s: nothing to do: %s\n", name, cvm_last_error());
	}
	return rc == 0 || rc == -EALREADY ? EXIT_OK
	       : rc == -EINTR		  ? EXIT_RESTRIPE_PAUSED
					  : fail("restripe", rc);
}

static int cmd_restripe(struct opts *o)
{
	if (o->nargs != 1)
		return usage_error("%s needs exactly one volume name", "restripe");
	struct change_lock cl;
	struct cvm_scan scan;
	int ex = begin_change(o, "restripe", &cl, &scan);
	if (ex)
		return ex;
	struct sigaction sa = {.sa_handler = stop_restripe};
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	cvm_uuid *luns = calloc(CVM_MAX_LUNS, sizeof *luns);
	struct cvm_restripe_opts ropts = {.stripe_width = o->stripe_width,
					  .rate_bytes = (uint64_t)(o->rate_mb * 1e6), .luns = luns,
					  .stop = &restripe_stop, .progress = restripe_progress,
					  .arg = o->args[0]};
	struct cvm_config *cfg = malloc(sizeof *cfg);
	char dir[PATH_MAX];
	int rc = cfg && luns ? cvm_scan_find_volume(&scan, o->args[0], cfg) : -ENOMEM;
	if (!rc && o->luns && (ex = parse_luns(o->luns, &scan, luns, &ropts.nluns)))
		goto out;
	if (!rc) /* everything it would refuse, before the daemon drops a map */
		rc = cvm_restripe_check(cfg, &ropts);
	if (!rc && tool_mount_of("cvm restripe", cfg, dir, sizeof dir)) {
		rc = restripe_mounted(dir, &ropts);
		cvm_scan_free(&scan);
		if (rc && rc != -EINTR) { /* said on stderr */
			ex = EXIT_FAILED;
			goto out_unscanned;
		}
		if (cvm_scan_paths(o->scan.paths, o->scan.n, &scan) == 0) /* the config it left */
			cvm_scan_find_volume(&scan, o->args[0], cfg);
	} else if (!rc) {
		rc = cvm_volume_restripe(&scan, o->args[0], &ropts, cfg);
	}
	ex = restripe_said(rc, o->args[0], cfg);
out:
	cvm_scan_free(&scan);
out_unscanned:
	change_lock_drop(&cl);
	free(cfg);
	free(luns);
	return ex;
}

static int parse(int argc, char **argv, struct opts *o)
{
	static const struct option longopts[] = {
		{"scan", required_argument, NULL, 's'}, {"stripe-width", required_argument, NULL, 'w'},
		{"json", no_argument, NULL, 'j'},	{"force", no_argument, NULL, 'f'},
		{"repair", no_argument, NULL, 'r'},	{"version", no_argument, NULL, 'V'}, {"help", no_argument, NULL, 'h'},
		{"locks", required_argument, NULL, 'L'}, {"rate", required_argument, NULL, 'R'},
		{"luns", required_argument, NULL, 'l'}, {NULL, 0, NULL, 0}};
	int c;
	o->locks = getenv("CFSLOCK_BACKEND") ? getenv("CFSLOCK_BACKEND") : "local";
	while ((c = getopt_long(argc, argv, "s:w:jfrhL:VR:", longopts, NULL)) != -1) {
		switch (c) {
		case 's': scan_paths_add(&o->scan, optarg); break;
		case 'w':
			if (cvm_parse_size(optarg, &o->stripe_width) ||
			    cvm_check_stripe_width(o->stripe_width)) {
				fprintf(stderr, "cvm: --stripe-width %s: not a power of two multiple "
						"of 4k between 4k and 64M (e.g. 256k)\n", optarg);
				return EXIT_USAGE;
			}
			break;
		case 'j': o->json = true; break;
		case 'f': o->force = true; break;
		case 'r': o->repair = true; break;
		case 'L': o->locks = optarg; break;
		case 'l': o->luns = optarg; break;
		case 'R': {
			char *end;
			o->rate_mb = strtod(optarg, &end);
			if (end == optarg || *end || !(o->rate_mb > 0)) {
				fprintf(stderr, "cvm: --rate %s: give megabytes a second, more than 0 "
						"(e.g. 50)\n", optarg);
				return EXIT_USAGE;
			}
			break;
		}
		case 'V': print_version("cvm"); exit(0);
		case 'h': usage(stdout); exit(EXIT_OK);
		default: fprintf(stderr, "Try 'cvm --help'.\n"); return EXIT_USAGE;
		}
	}
	if (optind >= argc)
		return usage_error("%s", "no command given");
	o->command = argv[optind];
	o->args = argv + optind + 1;
	o->nargs = argc - optind - 1;
	return EXIT_OK;
}

/* Options that mean nothing to a command are refused rather than ignored. */
static int check_option_fits(const struct opts *o)
{
	const char *c = o->command;
	bool sizes = !strcmp(c, "create") || !strcmp(c, "grow") || !strcmp(c, "restripe");
	if ((o->rate_mb > 0 || o->luns) && strcmp(c, "restripe"))
		return usage_error("--rate and --luns apply to 'restripe' only, not to '%s'", c);
	if (o->stripe_width && !sizes)
		return usage_error("--stripe-width does not apply to '%s'", c);
	if (o->json && strcmp(c, "show") && strcmp(c, "discover"))
		return usage_error("--json does not apply to '%s'", c);
	if (o->force && strcmp(c, "remove"))
		return usage_error("--force does not apply to '%s'", c);
	if (o->repair && strcmp(c, "check"))
		return usage_error("--repair does not apply to '%s'", c);
	return EXIT_OK;
}

int main(int argc, char **argv)
{
	struct opts o = {0};
	int ex = parse(argc, argv, &o);
	if (ex == EXIT_OK)
		ex = check_option_fits(&o);
	if (ex != EXIT_OK) {
		scan_paths_free(&o.scan);
		return ex;
	}
	const char *c = o.command;
	if (!strcmp(c, "create") || !strcmp(c, "grow"))
		ex = cmd_create_or_grow(&o, !strcmp(c, "grow"));
	else if (!strcmp(c, "show") || !strcmp(c, "discover"))
		ex = cmd_show(&o, !strcmp(c, "discover"));
	else if (!strcmp(c, "check"))
		ex = cmd_check(&o);
	else if (!strcmp(c, "remove"))
		ex = cmd_remove(&o);
	else if (!strcmp(c, "restripe"))
		ex = cmd_restripe(&o);
	else
		ex = usage_error("unknown command '%s'", c);
	scan_paths_free(&o.scan);
	return ex;
}
