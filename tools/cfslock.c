/* SPDX-License-Identifier: GPL-2.0-or-later */
/* cfslock: take, convert and release cluster locks from the shell, dump a lockspace's table,
 * and the workloads of the cluster tests.  See man/cfslock.8. */
#include "../dlm-client/cfslock.h"
#include "tools/version.h"
#include "common.h"

#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct opts {
	const char *backend, *space, *log_path;
	bool json, noqueue;
	double hold;
};

static FILE *event_log; /* grants and releases with times, for the overlap checker */

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void log_event(struct cfslock_client *c, const char *what, const struct cfslock *lk,
		      int mode)
{
	if (!event_log)
		return;
	fprintf(event_log, "%" PRIu64 " %u %d %s %s %s\n", now_ns(), cfslock_node_id(c),
		(int)getpid(), what, cfslock_name(lk), cfslock_mode_name(mode));
	fflush(event_log);
}

static void usage(FILE *out)
{
	fprintf(out,
		"Usage: cfslock [OPTIONS] COMMAND [ARGS]\n"
		"\n"
		"Cluster locks from the shell.\n"
		"\n"
		"Commands:\n"
		"  lock NAME MODE         take NAME in MODE (NL CR CW PR PW EX), hold it --hold SEC\n"
		"                         (default: until interrupted), then release it\n"
		"  dump                   print the lockspace's table as this node sees it\n"
		"  recovery-done NODE     declare recovery of a failed node done\n"
		"  shell                  read commands from standard input, one per line:\n"
		"                           lock NAME MODE [noqueue] | convert NAME MODE [noqueue] |\n"
		"                           unlock NAME | cancel NAME | lvb NAME TEXT | show NAME |\n"
		"                           recovery-done NODE | dump | sleep SEC\n"
		"                         and print every completion and blocking callback, and\n"
		"                         membership (member N joined|left) and quorum changes\n"
		"  counter NAME FILE ROUNDS   ROUNDS times: take NAME in EX, add one to the counter\n"
		"                         in the first 8 bytes of FILE (O_DIRECT, fsync), release\n"
		"\n"
		"Options:\n"
		"  -b, --backend NAME     local, corosync or dlm (default corosync, or $CFSLOCK_BACKEND)\n"
		"  -s, --space NAME       lockspace (default \"cfs\")\n"
		"  -t, --hold SEC         how long lock holds the lock\n"
		"  -n, --noqueue          lock: fail at once if the lock is busy\n"
		"  -l, --log FILE         append grants and releases with times (for checkers)\n"
		"  -j, --json             dump as JSON\n"
		"  -h, --help             this text\n"
		"\n"
		"Exit status: 0 done; 1 failed; 2 bad usage; 3 busy (noqueue); 4 no quorum.\n");
}

static int exit_for(int rc)
{
	if (rc == -EAGAIN)
		return 3;
	if (rc == -CFSLOCK_ENOQUORUM)
		return 4;
	return rc ? EXIT_FAILED : EXIT_OK;
}

static int fail(const char *what, int rc)
{
	fprintf(stderr, "cfslock: %s: %s\n", what,
		rc == -CFSLOCK_ENOQUORUM ? "this node has no quorum" : strerror(-rc));
	return exit_for(rc);
}

/* ---- dump ---- */
struct dump_ctx {
	bool json, first;
};

static void dump_one(void *arg, const struct cfslock_dump_entry *e)
{
	struct dump_ctx *d = arg;
	if (d->json) {
		printf("%s{\"resource\":", d->first ? "" : ",");
		json_string(stdout, e->resource);
		printf(",\"node\":%u,\"owner\":\"%016" PRIx64 "\",\"lkid\":%" PRIu64
		       ",\"granted\":\"%s\",\"requested\":\"%s\",\"state\":\"%s\","
		       "\"recovering\":%s}",
		       e->node, e->owner, e->lkid, cfslock_mode_name(e->granted),
		       cfslock_mode_name(e->requested), e->state, e->recovering ? "true" : "false");
	} else {
		printf("%-24s node %-3u owner %016" PRIx64 " lkid %-6" PRIu64 " %-10s %s%s%s\n",
		       e->resource, e->node, e->owner, e->lkid, e->state,
		       cfslock_mode_name(e->granted),
		       strcmp(e->state, "granted") ? " -> " : "",
		       strcmp(e->state, "granted") ? cfslock_mode_name(e->requested) : "");
		if (e->recovering)
			printf("%-24s   (recovering: its node failed; waiting for recovery-done)\n", "");
	}
	d->first = false;
}

static int do_dump(struct cfslock_space *s, bool json)
{
	struct dump_ctx d = {.json = json, .first = true};
	if (json)
		printf("{\"locks\":[");
	int rc = cfslock_dump(s, dump_one, &d);
	if (json)
		printf("]}\n");
	return rc;
}

/* ---- lock ---- */
static volatile sig_atomic_t interrupted;
static void on_signal(int sig)
{
	(void)sig;
	interrupted = 1;
}

static void wait_seconds(struct cfslock_client *c, double secs)
{
	uint64_t end = secs > 0 ? now_ns() + (uint64_t)(secs * 1e9) : UINT64_MAX;
	while (!interrupted && now_ns() < end) {
		struct pollfd p = {.fd = cfslock_client_fd(c), .events = POLLIN};
		poll(&p, 1, 100);
		cfslock_dispatch(c);
	}
}

static int cmd_lock(struct cfslock_client *c, struct cfslock_space *s, const struct opts *o,
		    char **args, int nargs)
{
	if (nargs != 2)
		return fprintf(stderr, "cfslock: lock needs NAME and MODE\n"), EXIT_USAGE;
	int mode = cfslock_parse_mode(args[1]);
	if (mode < 0)
		return fprintf(stderr, "cfslock: mode '%s': use NL CR CW PR PW EX\n", args[1]),
		       EXIT_USAGE;
	struct cfslock *lk = cfslock_new(s, args[0], NULL, NULL, NULL);
	if (!lk)
		return fprintf(stderr, "cfslock: bad lock name '%s'\n", args[0]), EXIT_USAGE;
	int rc = cfslock_request_sync(lk, mode, o->noqueue ? CFSLOCK_NOQUEUE : 0);
	if (rc) {
		cfslock_free(lk);
		return fail("lock", rc);
	}
	log_event(c, "grant", lk, mode);
	printf("granted %s %s\n", args[0], cfslock_mode_name(mode));
	fflush(stdout);
	wait_seconds(c, o->hold);
	log_event(c, "release", lk, mode);
	rc = cfslock_unlock_sync(lk);
	cfslock_free(lk);
	return rc ? fail("unlock", rc) : EXIT_OK;
}

/* ---- counter: the mutual exclusion workload ---- */
static int cmd_counter(struct cfslock_client *c, struct cfslock_space *s, char **args,
		       int nargs)
{
	if (nargs != 3)
		return fprintf(stderr, "cfslock: counter needs NAME FILE ROUNDS\n"), EXIT_USAGE;
	long rounds = strtol(args[2], NULL, 10);
	int fd = open(args[1], O_RDWR | O_DIRECT);
	void *buf = NULL;
	if (fd < 0 || rounds <= 0 || posix_memalign(&buf, 4096, 4096))
		return fprintf(stderr, "cfslock: counter: cannot use %s\n", args[1]), EXIT_FAILED;
	struct cfslock *lk = cfslock_new(s, args[0], NULL, NULL, NULL);
	int rc = lk ? 0 : -EINVAL;
	for (long i = 0; i < rounds && rc == 0; i++) {
		if ((rc = cfslock_request_sync(lk, CFSLOCK_EX, 0)))
			break;
		log_event(c, "grant", lk, CFSLOCK_EX);
		uint64_t v;
		if (pread(fd, buf, 4096, 0) != 4096) {
			rc = -EIO;
			break;
		}
		memcpy(&v, buf, sizeof v);
		v++;
		memcpy(buf, &v, sizeof v);
		if (pwrite(fd, buf, 4096, 0) != 4096 || fdatasync(fd) < 0) {
			rc = -EIO;
			break;
		}
		log_event(c, "release", lk, CFSLOCK_EX);
		rc = cfslock_unlock_sync(lk);
	}
	cfslock_free(lk);
	free(buf);
	close(fd);
	return rc ? fail("counter", rc) : EXIT_OK;
}

/* ---- shell ---- */
struct named {
	struct cfslock *lk;
	struct named *next;
};
static struct named *named_locks;

static void on_done(void *arg, struct cfslock *lk, int status)
{
	struct cfslock_client *c = arg;
	if (status == 0 && cfslock_mode(lk) >= 0)
		log_event(c, "grant", lk, cfslock_mode(lk));
	printf("done %s %s %s\n", cfslock_name(lk), status ? strerror(-status) : "ok",
	       cfslock_mode_name(cfslock_mode(lk)));
	fflush(stdout);
}

static void on_blocking(void *arg, struct cfslock *lk, int wanted)
{
	(void)arg;
	printf("blocking %s %s\n", cfslock_name(lk), cfslock_mode_name(wanted));
	fflush(stdout);
}

static void on_membership(void *arg, uint32_t node, bool joined)
{
	(void)arg;
	printf("member %u %s\n", node, joined ? "joined" : "left");
	fflush(stdout);
}

static void on_quorum(void *arg, bool quorate)
{
	(void)arg;
	printf("quorum %s\n", quorate ? "yes" : "no");
	fflush(stdout);
}

static void on_log(void *arg, int prio, const char *line)
{
	(void)arg;
	(void)prio;
	fprintf(stderr, "cfslock: %s\n", line);
}

static struct cfslock *named(struct cfslock_client *c, struct cfslock_space *s, const char *n)
{
	for (struct named *x = named_locks; x; x = x->next)
		if (strcmp(cfslock_name(x->lk), n) == 0)
			return x->lk;
	struct named *x = calloc(1, sizeof *x);
	if (!x || !(x->lk = cfslock_new(s, n, on_done, on_blocking, c))) {
		free(x);
		return NULL;
	}
	x->next = named_locks;
	named_locks = x;
	return x->lk;
}

static void shell_line(struct cfslock_client *c, struct cfslock_space *s, char *line)
{
	char *w[4] = {0};
	int n = 0;
	for (char *save = NULL, *t = strtok_r(line, " \t\n", &save); t && n < 4;
	     t = strtok_r(NULL, " \t\n", &save))
		w[n++] = t;
	if (n == 0 || w[0][0] == '#')
		return;
	int rc = 0;
	struct cfslock *lk = n >= 2 ? named(c, s, w[1]) : NULL;
	if ((!strcmp(w[0], "lock") || !strcmp(w[0], "convert")) && n >= 3 && lk) {
		int mode = cfslock_parse_mode(w[2]);
		unsigned flags = n == 4 && !strcmp(w[3], "noqueue") ? CFSLOCK_NOQUEUE : 0;
		rc = mode < 0 ? -EINVAL : cfslock_request(lk, mode, flags);
	} else if (!strcmp(w[0], "unlock") && lk) {
		log_event(c, "release", lk, cfslock_mode(lk));
		rc = cfslock_unlock(lk);
	} else if (!strcmp(w[0], "cancel") && lk) {
		rc = cfslock_cancel(lk);
	} else if (!strcmp(w[0], "lvb") && n >= 3 && lk) {
		uint8_t v[CFSLOCK_LVB_LEN] = {0};
		strncpy((char *)v, w[2], sizeof v - 1);
		cfslock_set_lvb(lk, v);
	} else if (!strcmp(w[0], "show") && lk) {
		printf("show %s %s lvb %s %.*s\n", w[1], cfslock_mode_name(cfslock_mode(lk)),
		       cfslock_lvb_valid(lk) ? "valid" : "invalid", CFSLOCK_LVB_LEN,
		       (const char *)cfslock_lvb(lk));
	} else if (!strcmp(w[0], "recovery-done") && n == 2) {
		rc = cfslock_recovery_done(s, (uint32_t)strtoul(w[1], NULL, 10));
	} else if (!strcmp(w[0], "dump")) {
		rc = do_dump(s, false);
	} else if (!strcmp(w[0], "sleep") && n == 2) {
		wait_seconds(c, strtod(w[1], NULL));
	} else {
		printf("error unknown command: %s\n", w[0]);
	}
	if (rc)
		printf("error %s %s\n", w[0], rc == -CFSLOCK_ENOQUORUM ? "no quorum" : strerror(-rc));
	fflush(stdout);
}

static int cmd_shell(struct cfslock_client *c, struct cfslock_space *s)
{
	char line[512];
	size_t have = 0;
	printf("ready node %u\n", cfslock_node_id(c));
	fflush(stdout);
	while (!interrupted) {
		struct pollfd p[2] = {{.fd = 0, .events = POLLIN},
				      {.fd = cfslock_client_fd(c), .events = POLLIN}};
		poll(p, 2, 200);
		cfslock_dispatch(c);
		if (!(p[0].revents & (POLLIN | POLLHUP)))
			continue;
		ssize_t got = read(0, line + have, sizeof line - 1 - have);
		if (got <= 0)
			break;
		have += (size_t)got;
		line[have] = '\0';
		char *nl;
		while ((nl = strchr(line, '\n'))) {
			*nl = '\0';
			shell_line(c, s, line);
			have -= (size_t)(nl + 1 - line);
			memmove(line, nl + 1, have + 1);
		}
		if (have == sizeof line - 1)
			have = 0; /* an overlong line is dropped */
	}
	return EXIT_OK;
}

static const char *backend_hint(const char *backend)
{
	if (backend && !strcmp(backend, "corosync"))
		return " (is corosync running?)";
	if (backend && !strcmp(backend, "dlm"))
		return " (load the dlm module, start dlm_controld)";
	return "";
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"backend", required_argument, NULL, 'b'}, {"space", required_argument, NULL, 's'},
		{"hold", required_argument, NULL, 't'},	   {"noqueue", no_argument, NULL, 'n'},
		{"log", required_argument, NULL, 'l'},	   {"json", no_argument, NULL, 'j'},
		{"version", no_argument, NULL, 'V'}, {"help", no_argument, NULL, 'h'},	   {NULL, 0, NULL, 0}};
	struct opts o = {.backend = getenv("CFSLOCK_BACKEND"), .space = "cfs"};
	if (!o.backend)
		o.backend = "corosync";
	int opt;
	while ((opt = getopt_long(argc, argv, "b:s:t:nl:jhV", longopts, NULL)) != -1) {
		switch (opt) {
		case 'b': o.backend = optarg; break;
		case 's': o.space = optarg; break;
		case 't': o.hold = strtod(optarg, NULL); break;
		case 'n': o.noqueue = true; break;
		case 'l': o.log_path = optarg; break;
		case 'j': o.json = true; break;
		case 'V': print_version("cfslock"); exit(0);
		case 'h': usage(stdout); return EXIT_OK;
		default: fprintf(stderr, "Try 'cfslock --help'.\n"); return EXIT_USAGE;
		}
	}
	if (optind >= argc) {
		fprintf(stderr, "cfslock: no command given\nTry 'cfslock --help'.\n");
		return EXIT_USAGE;
	}
	const char *cmd = argv[optind];
	char **args = argv + optind + 1;
	int nargs = argc - optind - 1;
	if (strcmp(cmd, "lock") && strcmp(cmd, "dump") && strcmp(cmd, "shell") &&
	    strcmp(cmd, "counter") && strcmp(cmd, "recovery-done")) {
		fprintf(stderr, "cfslock: unknown command '%s'\nTry 'cfslock --help'.\n", cmd);
		return EXIT_USAGE;
	}
	if (o.log_path && !(event_log = fopen(o.log_path, "a"))) {
		perror(o.log_path);
		return EXIT_FAILED;
	}
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	setvbuf(stdout, NULL, _IOLBF, 0);
	struct cfslock_client *c;
	struct cfslock_space *s;
	/* The shell reports membership and quorum changes as they reach the client; every
	 * command says why it lost quorum or was evicted. */
	struct cfslock_events events = {.log = on_log};
	if (!strcmp(cmd, "shell"))
		events = (struct cfslock_events){
			.membership = on_membership, .quorum = on_quorum, .log = on_log};
	int rc = cfslock_client_open(o.backend, &events, &c);
	if (rc == -EPROTONOSUPPORT)
		return fprintf(stderr, "cfslock: backend '%s': use local, corosync or dlm\n",
			       o.backend), EXIT_USAGE;
	if (rc && cfslock_last_error()[0])
		return fprintf(stderr, "cfslock: the %s lock manager refused this process: %s\n",
			       o.backend, cfslock_last_error()), EXIT_FAILED;
	if (rc)
		return fprintf(stderr, "cfslock: cannot reach the %s lock manager: %s%s\n",
			       o.backend, strerror(-rc), backend_hint(o.backend)),
		       EXIT_FAILED;
	if ((rc = cfslock_space_open(c, o.space, &s))) {
		cfslock_client_close(c);
		return fail("lockspace", rc);
	}
	int ex;
	if (!strcmp(cmd, "lock"))
		ex = cmd_lock(c, s, &o, args, nargs);
	else if (!strcmp(cmd, "dump"))
		ex = exit_for(do_dump(s, o.json));
	else if (!strcmp(cmd, "counter"))
		ex = cmd_counter(c, s, args, nargs);
	else if (!strcmp(cmd, "recovery-done"))
		ex = nargs == 1 ? exit_for(cfslock_recovery_done(s, (uint32_t)strtoul(args[0], NULL, 10)))
				: EXIT_USAGE;
	else
		ex = cmd_shell(c, s);
	cfslock_space_close(s);
	cfslock_client_close(c);
	if (event_log)
		fclose(event_log);
	return ex;
}
