/* Helpers shared by the command-line tools (not a library API). */
#ifndef TOOLS_COMMON_H
#define TOOLS_COMMON_H

#include <stdbool.h>
#include <stdio.h>

/* Exit codes of every tool: 0 done, 1 failed (the message says why), 2 bad usage. */
enum { EXIT_OK = 0, EXIT_FAILED = 1, EXIT_USAGE = 2 };

/* Write s as a JSON string literal, quotes included. */
void json_string(FILE *out, const char *s);

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

#endif
