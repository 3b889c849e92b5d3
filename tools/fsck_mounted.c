/* SPDX-License-Identifier: GPL-2.0-or-later */
/* fsck.cfs -n of a volume mounted on this node: the mount's daemon checks it while it is in
 * use (cfs/check.c, cfsd/check_server.c); this starts the check, prints what it finds as it
 * goes, and stops it on Ctrl-C.  A cluster volume this node has not mounted is mounted here
 * read-only for the check, if other nodes have it mounted. */
#include "tools/fsck_mounted.h"

#include "tools/ask.h"
#include "tools/common.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define POLL_MS 200

static volatile sig_atomic_t interrupted;

static void on_interrupt(int sig)
{
	(void)sig;
	interrupted = 1;
}

static int ask_check(const char *dir, ControlRequest__Op op, uint64_t arg, ControlReply **r)
{
	ControlRequest req = CONTROL_REQUEST__INIT;
	req.op = op;
	if (op == CONTROL_REQUEST__OP__CHECK)
		req.has_rate = true, req.rate = arg;
	else
		req.has_size = true, req.size = arg;
	int rc = tool_ask("fsck.cfs", dir, &req, r);
	if (!rc && !(*r)->check) {
		fprintf(stderr, "fsck.cfs: the daemon of %s does not check mounted filesystems (an "
				"older release?): unmount the volume on every node, then run fsck.cfs\n",
			dir);
		control_reply__free_unpacked(*r, NULL);
		rc = -EPROTO;
	}
	return rc;
}

static void show_progress(const CheckStatus *cs, bool done)
{
	static time_t last;
	time_t now = time(NULL);
	if (!done && now - last < 2 && !isatty(STDERR_FILENO))
		return;
	last = now;
	fprintf(stderr, "%sfsck.cfs: %llu inodes, %llu directories, groups %u/%u, %llu problems%s",
		isatty(STDERR_FILENO) ? "\r" : "", (unsigned long long)cs->inodes,
		(unsigned long long)cs->directories, cs->groups, cs->groups_total,
		(unsigned long long)cs->problems, isatty(STDERR_FILENO) && !done ? "" : "\n");
}

static void print_json(FILE *f, const char *volume, const char *dir, const CheckStatus *cs,
		       char **lines, size_t n, int code)
{
	fprintf(f, "{\"volume\": ");
	json_string(f, volume);
	fprintf(f, ", \"mounted_at\": ");
	json_string(f, dir);
	fprintf(f, ", \"online\": true, \"clean\": %s, \"state\": ", code == 0 ? "true" : "false");
	json_string(f, cs->state);
	fprintf(f, ", \"problems\": %llu, \"inodes\": %llu, \"directories\": %llu, \"groups\": %u, "
		   "\"unconfirmed\": %llu, \"seconds\": %.1f, \"lines\": [",
		(unsigned long long)cs->problems, (unsigned long long)cs->inodes,
		(unsigned long long)cs->directories, cs->groups, (unsigned long long)cs->unconfirmed,
		cs->seconds);
	for (size_t i = 0; i < n; i++) {
		fputs(i ? ", " : "", f);
		json_string(f, lines[i]);
	}
	fprintf(f, "], \"exit\": %d}\n", code);
}

/* The lines of reply r from index *seen on: printed (text) or kept (json). */
static int take_lines(const ControlReply *r, bool json, uint64_t *seen, char ***kept, size_t *n)
{
	for (size_t i = 0; i < r->check->n_lines; i++, (*seen)++) {
		if (!json) {
			printf("fsck.cfs: %s\n", r->check->lines[i]);
			continue;
		}
		char **v = realloc(*kept, (*n + 1) * sizeof **kept);
		if (!v || !(v[*n] = strdup(r->check->lines[i]))) {
			*kept = v ? v : *kept;
			return -ENOMEM;
		}
		*kept = v;
		(*n)++;
	}
	fflush(stdout);
	return 0;
}

int fsck_mounted(const char *volume, const char *dir, uint64_t rate, bool json)
{
	ControlReply *r = NULL;
	if (ask_check(dir, CONTROL_REQUEST__OP__CHECK, rate, &r))
		return FSCK_ERROR;
	control_reply__free_unpacked(r, NULL);
	r = NULL;
	struct sigaction sa = {.sa_handler = on_interrupt};
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	fprintf(stderr, "fsck.cfs: volume %s is mounted at %s: its daemon checks it while it is in "
			"use, read-only (Ctrl-C stops the check)\n", volume, dir);
	uint64_t seen = 0;
	char **kept = NULL;
	size_t nkept = 0;
	bool stop_asked = false, running = true;
	int rc = 0;
	for (;;) {
		if (interrupted && !stop_asked) {
			stop_asked = true;
			if (!ask_check(dir, CONTROL_REQUEST__OP__CHECK_STOP, 0, &r))
				control_reply__free_unpacked(r, NULL);
		}
		if ((rc = ask_check(dir, CONTROL_REQUEST__OP__CHECK_STATUS, seen, &r))) {
			r = NULL;
			break;
		}
		running = !strcmp(r->check->state, "running") || !strcmp(r->check->state, "stopping");
		bool more = r->check->n_lines > 0;
		if ((rc = take_lines(r, json, &seen, &kept, &nkept)) || (!running && !more))
			break;
		show_progress(r->check, false);
		control_reply__free_unpacked(r, NULL);
		r = NULL;
		if (!more)
			nanosleep(&(struct timespec){0, POLL_MS * 1000000L}, NULL);
	}
	int code = FSCK_ERROR;
	if (!rc) {
		const CheckStatus *cs = r->check;
		show_progress(cs, true);
		bool done = !strcmp(cs->state, "done");
		code = !strcmp(cs->state, "stopped") ? FSCK_CANCELED
		       : cs->problems ? FSCK_LEFT : done ? FSCK_OK : FSCK_ERROR;
		if (cs->error)
			fprintf(stderr, "fsck.cfs: volume %s: %s\n", volume, cs->error);
		if (cs->problems > cs->lines_kept)
			fprintf(stderr, "fsck.cfs: %llu more problems not kept by the daemon: its log "
					"has every one\n", (unsigned long long)(cs->problems - cs->lines_kept));
		if (json)
			print_json(stdout, volume, dir, cs, kept, nkept, code);
		else if (cs->unconfirmed)
			printf("fsck.cfs: volume %s (mounted): %llu suspicions left unsettled: what they "
			       "are about changed all through the check (link counts of files renamed, "
			       "blocks of groups in use); run it again when the filesystem is quieter\n",
			       volume, (unsigned long long)cs->unconfirmed);
		if (!json)
			printf("fsck.cfs: volume %s (mounted): %s: %llu directories, %llu files checked "
			       "in %.1f s; %llu problem%s%s\n", volume,
			       code == FSCK_OK ? "clean" : code == FSCK_LEFT ? "NOT CLEAN" : cs->state,
			       (unsigned long long)cs->directories, (unsigned long long)cs->inodes,
			       cs->seconds, (unsigned long long)cs->problems,
			       cs->problems == 1 ? "" : "s",
			       code == FSCK_LEFT ? ": unmount it on every node and run fsck.cfs -y to "
						   "repair" : "");
	}
	if (r)
		control_reply__free_unpacked(r, NULL);
	for (size_t i = 0; i < nkept; i++)
		free(kept[i]);
	free(kept);
	return code;
}

/* Run the tool prog beside this one with args, its output to the file out; its exit status. */
static int run_tool(const char *prog, char **args, const char *out)
{
	pid_t pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		if (fd >= 0) {
			dup2(fd, STDOUT_FILENO);
			dup2(fd, STDERR_FILENO);
		}
		exec_beside("fsck.cfs", prog, args);
	}
	return wait_child(pid);
}

/* The last line of file path, for a message (room: len bytes). */
static void last_line(const char *path, char *line, size_t len)
{
	FILE *f = fopen(path, "r");
	line[0] = '\0';
	for (char buf[512]; f && fgets(buf, sizeof buf, f);)
		snprintf(line, len, "%.*s", (int)strcspn(buf, "\n"), buf);
	if (f)
		fclose(f);
}

/* Is mnt, a directory in dir, mounted on? */
static bool is_mount_point(const char *dir, const char *mnt)
{
	struct stat a, b;
	return !stat(dir, &a) && !stat(mnt, &b) && a.st_dev != b.st_dev;
}

/* How many nodes the daemon of dir says have the filesystem mounted; 0 if it cannot say. */
static size_t nodes_mounted(const char *dir)
{
	ControlRequest req = CONTROL_REQUEST__INIT;
	req.op = CONTROL_REQUEST__OP__STATUS;
	ControlReply *r;
	if (tool_ask("fsck.cfs", dir, &req, &r))
		return 0;
	size_t n = r->status ? r->status->n_mounted : 0;
	control_reply__free_unpacked(r, NULL);
	return n;
}

int fsck_through_own_mount(const char *volume, const struct scan_paths *scan, uint64_t rate,
			   bool json)
{
	char dir[] = "/tmp/fsck.cfs.XXXXXX", mnt[64], out[64], why[512];
	if (!mkdtemp(dir))
		return -1;
	snprintf(mnt, sizeof mnt, "%s/mnt", dir);
	snprintf(out, sizeof out, "%s/out", dir);
	char *args[8 + 2 * 64] = {"cfs", "mount", (char *)volume, mnt, "-o", "ro"};
	size_t n = 6;
	for (size_t i = 0; i < scan->n && n + 3 < sizeof args / sizeof *args; i++) {
		args[n++] = "-s";
		args[n++] = (char *)scan->paths[i];
	}
	args[n] = NULL;
	int code = -1;
	char *umount[] = {"cfs", "umount", mnt, NULL};
	if (mkdir(mnt, 0700) || run_tool("cfs", args, out) != 0) {
		last_line(out, why, sizeof why);
		if (is_mount_point(dir, mnt)) /* a failure on the way out: it is mounted */
			run_tool("cfs", umount, out);
		fprintf(stderr, "fsck.cfs: volume %s is a cluster's, and this node cannot mount it to "
				"check it beside the nodes that may have it mounted (%s): checking it as "
				"unmounted on every node\n", volume, why);
		unlink(out);
		rmdir(mnt);
		rmdir(dir);
		return -1;
	}
	if (nodes_mounted(mnt) > 1) {
		fprintf(stderr, "fsck.cfs: volume %s is mounted on other nodes: mounted here "
				"read-only at %s for the check\n", volume, mnt);
		code = fsck_mounted(volume, mnt, rate, json);
	}
	if (run_tool("cfs", umount, out) != 0) {
		last_line(out, why, sizeof why);
		fprintf(stderr, "fsck.cfs: unmounting %s: %s (unmount it by hand)\n", mnt, why);
		return code < 0 ? FSCK_ERROR : code;
	}
	unlink(out);
	rmdir(mnt);
	rmdir(dir);
	return code;
}
