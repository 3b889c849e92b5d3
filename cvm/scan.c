/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Discovery: find LUNs by their labels under given paths, recognise several paths to one LUN,
 * and pick each volume's winning config (the highest valid generation). */
#include "internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct candidates {
	char **paths;
	size_t n, cap;
};

static int add_candidate(struct candidates *c, const char *path)
{
	if (c->n == c->cap) {
		size_t cap = c->cap ? c->cap * 2 : 16;
		char **p = realloc(c->paths, cap * sizeof *p);
		if (!p)
			return -ENOMEM;
		c->paths = p;
		c->cap = cap;
	}
	if (!(c->paths[c->n] = strdup(path)))
		return -ENOMEM;
	c->n++;
	return 0;
}

static bool is_lun_type(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 && (S_ISREG(st.st_mode) || S_ISBLK(st.st_mode));
}

static int add_directory(struct candidates *c, const char *dir)
{
	DIR *d = opendir(dir);
	if (!d) {
		int e = errno;
		cvm_set_error("scan path %s: %s", dir, strerror(e));
		return -e;
	}
	int rc = 0;
	struct dirent *de;
	while (rc == 0 && (de = readdir(d))) {
		/* The type readdir gives saves a stat of directories: one that is a mount point
		 * would be asked of its filesystem, cfsd itself when it scans again after another
		 * node grew the volume (it holds its own lock then). */
		if (de->d_name[0] == '.' || (de->d_type != DT_UNKNOWN && de->d_type != DT_REG &&
					     de->d_type != DT_BLK && de->d_type != DT_LNK))
			continue;
		char path[4096];
		if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, de->d_name) >= sizeof path)
			continue;
		if (is_lun_type(path))
			rc = add_candidate(c, path);
	}
	closedir(d);
	return rc;
}

static int add_scan_path(struct candidates *c, const char *path)
{
	if (strpbrk(path, "*?[")) {
		glob_t g;
		int grc = glob(path, 0, NULL, &g);
		if (grc == GLOB_NOMATCH)
			return 0;
		if (grc) {
			cvm_set_error("scan path %s: glob failed", path);
			return -EINVAL;
		}
		int rc = 0;
		for (size_t i = 0; rc == 0 && i < g.gl_pathc; i++)
			if (is_lun_type(g.gl_pathv[i]))
				rc = add_candidate(c, g.gl_pathv[i]);
		globfree(&g);
		return rc;
	}
	struct stat st;
	if (stat(path, &st) < 0) {
		int e = errno;
		cvm_set_error("scan path %s: %s", path, strerror(e));
		return -e;
	}
	if (S_ISDIR(st.st_mode))
		return add_directory(c, path);
	if (!S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode)) {
		cvm_set_error("scan path %s: not a directory, block device or regular file", path);
		return -EINVAL;
	}
	return add_candidate(c, path);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int add_alt_path(struct cvm_found_lun *l, const char *path)
{
	char **p = realloc(l->alt_paths, (l->nalt + 1) * sizeof *p);
	if (!p)
		return -ENOMEM;
	l->alt_paths = p;
	if (!(p[l->nalt] = strdup(path)))
		return -ENOMEM;
	l->nalt++;
	return 0;
}

/* Read one candidate's metadata.  Returns 1 if it carries a label or config, 0 if not. */
static int read_candidate(const char *path, uint8_t *meta, struct cvm_found_lun *l,
			  struct cvm_lun_id *id)
{
	uint64_t size;
	int fd = cvm_lun_open(path, O_RDONLY, &size, id);
	if (fd < 0)
		return 0; /* unreadable entries of a directory are not ours to judge */
	int rc = size >= CVM_META_BYTES ? cvm_lun_read_meta(fd, meta) : -ENOSPC;
	close(fd);
	if (rc < 0)
		return 0;

	struct cvm_label label;
	enum cvm_decode ld = cvm_label_decode(meta + CVM_LABEL_OFFSET, &label);
	struct cvm_config *best = NULL;
	cvm_uuid best_on = {{0}};
	memset(l, 0, sizeof *l);
	for (int slot = 0; slot < 2; slot++) {
		struct cvm_config *c = malloc(sizeof *c);
		cvm_uuid on;
		if (!c)
			return -ENOMEM;
		if (cvm_config_decode(meta + CVM_SLOT_OFFSET(slot), c, &on) == CVM_DECODE_OK &&
		    (ld != CVM_DECODE_OK || (cvm_uuid_equal(&on, &label.lun_uuid) &&
					      cvm_uuid_equal(&c->vol_uuid, &label.vol_uuid)))) {
			l->slot_generation[slot] = c->generation;
			if (!best || c->generation > best->generation) {
				free(best);
				best = c;
				best_on = on;
				continue;
			}
		}
		free(c);
	}
	if (ld == CVM_DECODE_ABSENT && !best)
		return 0;

	l->size_bytes = size;
	l->config = best;
	if (ld == CVM_DECODE_OK) {
		l->state = best ? CVM_LUN_OK : CVM_LUN_PREPARED;
		l->lun_uuid = label.lun_uuid;
		l->vol_uuid = label.vol_uuid;
		memcpy(l->vol_name, label.vol_name, sizeof l->vol_name);
		l->label_generation = label.generation;
	} else {
		l->state = CVM_LUN_LABEL_DAMAGED;
		if (best) {
			l->lun_uuid = best_on;
			l->vol_uuid = best->vol_uuid;
			memcpy(l->vol_name, best->name, sizeof l->vol_name);
		}
	}
	if (!(l->path = strdup(path))) {
		free(best);
		return -ENOMEM;
	}
	return 1;
}

/* A labelled LUN without a valid config copy is a member with damaged copies if any config of
 * its volume lists it, and otherwise left over from an interrupted create or grow. */
static void classify_configless(struct cvm_scan *s)
{
	for (size_t i = 0; i < s->nluns; i++) {
		struct cvm_found_lun *l = &s->luns[i];
		if (l->state != CVM_LUN_PREPARED)
			continue;
		for (size_t j = 0; j < s->nluns; j++) {
			const struct cvm_config *c = s->luns[j].config;
			if (!c || !cvm_uuid_equal(&c->vol_uuid, &l->vol_uuid))
				continue;
			for (uint32_t k = 0; k < c->nluns; k++)
				if (cvm_uuid_equal(&c->luns[k].uuid, &l->lun_uuid))
					l->state = CVM_LUN_NO_CONFIG;
		}
	}
}

/* Of several paths to one LUN, keep as primary the one its volume's config last knew, so
 * messages and `cvm show` keep naming the path the admin chose. */
static void prefer_known_paths(struct cvm_scan *s)
{
	for (size_t i = 0; i < s->nluns; i++) {
		struct cvm_found_lun *l = &s->luns[i];
		const struct cvm_config *c = l->config;
		for (uint32_t k = 0; c && l->nalt && k < c->nluns; k++) {
			if (!cvm_uuid_equal(&c->luns[k].uuid, &l->lun_uuid))
				continue;
			for (size_t a = 0; a < l->nalt; a++)
				if (strcmp(l->alt_paths[a], c->luns[k].path) == 0) {
					char *t = l->path;
					l->path = l->alt_paths[a];
					l->alt_paths[a] = t;
				}
		}
	}
}

static void free_found(struct cvm_found_lun *l)
{
	free(l->path);
	for (size_t i = 0; i < l->nalt; i++)
		free(l->alt_paths[i]);
	free(l->alt_paths);
	free(l->config);
}

int cvm_scan_paths(const char *const *paths, size_t npaths, struct cvm_scan *out)
{
	struct candidates cand = {0};
	int rc = 0;
	memset(out, 0, sizeof *out);
	for (size_t i = 0; rc == 0 && i < npaths; i++)
		rc = add_scan_path(&cand, paths[i]);
	/* Sorted, so the path a LUN is known by does not depend on the order of the arguments. */
	if (cand.n)
		qsort(cand.paths, cand.n, sizeof *cand.paths, cmp_str);

	uint8_t *meta = cvm_alloc_aligned(CVM_META_BYTES);
	struct cvm_lun_id *ids = calloc(cand.n + 1, sizeof *ids);
	out->luns = calloc(cand.n + 1, sizeof *out->luns);
	if (!meta || !ids || !out->luns)
		rc = -ENOMEM;
	for (size_t i = 0; rc == 0 && i < cand.n; i++) {
		if (i > 0 && strcmp(cand.paths[i], cand.paths[i - 1]) == 0)
			continue; /* the same path given twice */
		struct cvm_found_lun l;
		struct cvm_lun_id id;
		int r = read_candidate(cand.paths[i], meta, &l, &id);
		if (r < 0) {
			rc = r;
			break;
		}
		if (r == 0)
			continue;
		struct cvm_found_lun *same = NULL;
		for (size_t j = 0; j < out->nluns && !same; j++)
			if (cvm_lun_id_equal(&ids[j], &id) ||
			    (!cvm_uuid_is_zero(&l.lun_uuid) &&
			     cvm_uuid_equal(&out->luns[j].lun_uuid, &l.lun_uuid)))
				same = &out->luns[j];
		if (same) {
			rc = add_alt_path(same, l.path);
			free_found(&l);
			continue;
		}
		ids[out->nluns] = id;
		out->luns[out->nluns++] = l;
	}
	for (size_t i = 0; i < cand.n; i++)
		free(cand.paths[i]);
	free(cand.paths);
	free(ids);
	free(meta);
	if (rc) {
		cvm_scan_free(out);
		return rc;
	}
	classify_configless(out);
	prefer_known_paths(out);
	return 0;
}

void cvm_scan_free(struct cvm_scan *scan)
{
	for (size_t i = 0; scan->luns && i < scan->nluns; i++)
		free_found(&scan->luns[i]);
	free(scan->luns);
	memset(scan, 0, sizeof *scan);
}

/* path names the LUN whose identity is *want. */
static bool is_lun(const char *path, const struct cvm_lun_id *want)
{
	struct stat st;
	if (stat(path, &st))
		return false;
	struct cvm_lun_id id = cvm_lun_id_of(&st);
	return cvm_lun_id_equal(&id, want);
}

const struct cvm_found_lun *cvm_scan_lun_at(const struct cvm_scan *scan, const char *path)
{
	struct stat st;
	if (stat(path, &st))
		return NULL;
	struct cvm_lun_id want = cvm_lun_id_of(&st);
	for (size_t i = 0; i < scan->nluns; i++) {
		const struct cvm_found_lun *f = &scan->luns[i];
		bool same = is_lun(f->path, &want);
		for (size_t k = 0; !same && k < f->nalt; k++)
			same = is_lun(f->alt_paths[k], &want);
		if (same)
			return f;
	}
	return NULL;
}

const struct cvm_found_lun *cvm_scan_lun(const struct cvm_scan *scan, const cvm_uuid *uuid)
{
	for (size_t i = 0; i < scan->nluns; i++)
		if (cvm_uuid_equal(&scan->luns[i].lun_uuid, uuid))
			return &scan->luns[i];
	return NULL;
}

int cvm_scan_find_volume(const struct cvm_scan *scan, const char *name_or_uuid,
			 struct cvm_config *cfg)
{
	cvm_uuid want;
	bool by_uuid = cvm_uuid_parse(name_or_uuid, &want) == 0;
	const struct cvm_config *best = NULL;
	for (size_t i = 0; i < scan->nluns; i++) {
		const struct cvm_config *c = scan->luns[i].config;
		if (!c || !(by_uuid ? cvm_uuid_equal(&c->vol_uuid, &want)
				    : strcmp(c->name, name_or_uuid) == 0))
			continue;
		if (best && !cvm_uuid_equal(&best->vol_uuid, &c->vol_uuid)) {
			char a[CVM_UUID_STR], b[CVM_UUID_STR];
			cvm_uuid_format(&best->vol_uuid, a);
			cvm_uuid_format(&c->vol_uuid, b);
			cvm_set_error("two volumes are called '%s' (%s and %s); name one by its uuid",
				      name_or_uuid, a, b);
			return -ENOTUNIQ;
		}
		if (!best || c->generation > best->generation)
			best = c;
	}
	if (!best) {
		cvm_set_error("no volume '%s' on the scanned LUNs; check the scan paths (--scan) "
			      "or run 'cvm discover PATH'", name_or_uuid);
		return -ENOENT;
	}
	memcpy(cfg, best, sizeof *cfg);
	return 0;
}
