#include "common.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

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
