/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Helpers shared by the command-line tools (not a library API). */
#ifndef TOOLS_COMMON_H
#define TOOLS_COMMON_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

/* Exit codes of every tool: 0 done, 1 failed (the message says why), 2 bad usage. */
enum { EXIT_OK = 0, EXIT_FAILED = 1, EXIT_USAGE = 2 };

/* Run prog (args[0] its name) from beside this program, or else from the PATH; says why not
 * as "who: ..." and exits 1 if neither can be run. */
void exec_beside(const char *who, const char *prog, char **args) __attribute__((noreturn));
/* Wait for child pid to end: its exit status, or -1 if it was killed or cannot be waited for. */
int wait_child(pid_t pid);

/* Write s as a JSON string literal, quotes included. */
void json_string(FILE *out, const char *s);
/* A decimal number, all of s; false if not. */
bool parse_number(const char *s, uint64_t *out);

/* Scan paths for finding LUNs: those given with --scan, else $CVM_SCAN (colon-separated), else
 * /dev/disk/by-id when it exists.  Returns how many; *paths is owned by the helper. */
struct scan_paths {
	const char **paths;
	size_t n, cap;
	char *env_copy;
};
void scan_paths_add(struct scan_paths *s, const char *path);
void scan_paths_defaults(struct scan_paths *s);
void scan_paths_free(struct scan_paths *s);

/* Open CVM volume `name` from the scan paths (defaults if none given); prints why not as
 * "prog: ..." and returns -errno. */
struct cvm_volume;
int open_volume(const char *prog, struct scan_paths *s, const char *name, int flags,
		struct cvm_volume **out);

/* A cfs_progress_fn: "prog: what done/total (pct%)" on stderr, redrawn in place on a
 * terminal, a line per tenth otherwise.  arg is the program name. */
void print_progress(void *arg, const char *what, unsigned long long done,
		    unsigned long long total);

/* The first len bytes of v as a Prometheus label value: backslash, quote and newline
 * escaped. */
void prom_label_value(FILE *f, const char *v, size_t len);

/* Write what fill writes, whole: to standard output (to "-"), or to a file that replaces to
 * at once (for node_exporter's textfile collector: a reader never sees half).  EXIT_OK, or
 * EXIT_FAILED with "prog: ..." said. */
int write_whole(const char *prog, const char *to, void (*fill)(FILE *f, void *arg), void *arg);

#endif
