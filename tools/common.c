/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "common.h"
#include "cvm/cvm.h"

#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <unistd.h>

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

void json_string(FILE *out, const char *s)
{
	fputc('"', out);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '"' || *p == '\\')
			fprintf(out, "\\%c", *p);
		else if (*p < 0x20)
			fprintf(out, "\\u%04x", *p);
		else
			fputc(*p, out);
	}
	fputc('"', out);
}

void scan_paths_add(struct scan_paths *s, const char *path)
{
	if (s->n == s->cap) {
		s->cap = s->cap ? s->cap * 2 : 8;
		s->paths = realloc(s->paths, s->cap * sizeof *s->paths);
		if (!s->paths) {
			perror("realloc");
			exit(EXIT_FAILED);
		}
	}
	s->paths[s->n++] = path;
}

void scan_paths_defaults(struct scan_paths *s)
{
	if (s->n)
		return;
	const char *env = getenv("CVM_SCAN");
	if (env && *env) {
		s->env_copy = strdup(env);
		for (char *save = NULL, *tok = strtok_r(s->env_copy, ":", &save); tok;
		     tok = strtok_r(NULL, ":", &save))
			scan_paths_add(s, tok);
		return;
	}
	struct stat st;
	if (stat("/dev/disk/by-id", &st) == 0)
		scan_paths_add(s, "/dev/disk/by-id");
}

void scan_paths_free(struct scan_paths *s)
{
	free(s->paths);
	free(s->env_copy);
	memset(s, 0, sizeof *s);
}

int open_volume(const char *prog, struct scan_paths *s, const char *name, int flags,
		struct cvm_volume **out)
{
	scan_paths_defaults(s);
	if (s->n == 0) {
		fprintf(stderr, "%s: no place to look for LUNs: give them with --scan (-o scan= when mounting) or set CVM_SCAN\n",
			prog);
		return -ENOENT;
	}
	struct cvm_scan scan;
	int rc = cvm_scan_paths(s->paths, s->n, &scan);
	if (!rc) {
		rc = cvm_volume_open(&scan, name, flags, out);
		cvm_scan_free(&scan);
	}
	if (rc)
		fprintf(stderr, "%s: volume %s: %s\n", prog, name,
			cvm_last_error()[0] ? cvm_last_error() : strerror(-rc));
	return rc;
}

void print_progress(void *arg, const char *what, unsigned long long done,
		    unsigned long long total)
{
	static unsigned last_tenth = 11;
	unsigned pct = total ? (unsigned)(done * 100 / total) : 100;
	if (isatty(STDERR_FILENO)) {
		fprintf(stderr, "\r%s: %s %llu/%llu (%u%%)%s", (const char *)arg, what, done, total,
			pct, done == total ? "\n" : "");
		return;
	}
	if (pct / 10 != last_tenth || done == total) {
		last_tenth = pct / 10;
		fprintf(stderr, "%s: %s %llu/%llu (%u%%)\n", (const char *)arg, what, done, total, pct);
	}
}

int wait_child(pid_t pid)
{
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

int write_whole(const char *prog, const char *to, void (*fill)(FILE *f, void *arg), void *arg)
{
	char tmp[PATH_MAX];
	FILE *f = stdout;
	if (strcmp(to, "-")) {
		snprintf(tmp, sizeof tmp, "%s.%d.tmp", to, (int)getpid());
		if (!(f = fopen(tmp, "w"))) {
			fprintf(stderr, "%s: %s: %s\n", prog, tmp, strerror(errno));
			return EXIT_FAILED;
		}
	}
	fill(f, arg);
	if (f == stdout)
		return fflush(f) ? EXIT_FAILED : EXIT_OK;
	if (fclose(f) || rename(tmp, to)) {
		fprintf(stderr, "%s: %s: %s\n", prog, to, strerror(errno));
		unlink(tmp);
		return EXIT_FAILED;
	}
	return EXIT_OK;
}

void prom_label_value(FILE *f, const char *v, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		if (v[i] == '\\' || v[i] == '"')
			fputc('\\', f);
		if (v[i] == '\n')
			fputs("\\n", f);
		else
			fputc(v[i], f);
	}
}

bool parse_number(const char *s, uint64_t *out)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || end == s || *end || s[0] == '-')
		return false;
	*out = v;
	return true;
}

void exec_beside(const char *who, const char *prog, char **args)
{
	char self[PATH_MAX], path[PATH_MAX + 64];
	ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
	if (n > 0) {
		self[n] = '\0';
		snprintf(path, sizeof path, "%s/%s", dirname(self), prog);
		if (access(path, X_OK) == 0)
			execv(path, args);
	}
	execvp(prog, args);
	fprintf(stderr, "%s: cannot run %s: %s (is it installed?)\n", who, prog, strerror(errno));
	exit(EXIT_FAILED);
}
