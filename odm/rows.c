/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* This node's ODM statistics segments read as rows (see rows.h). */
#include "odm/rows.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

const char *const odm_by_names[ODM_BY_ALL + 1] = {"instance", "database", "node", "ptype",
						  "file", "all"};

/* The index slot of key: its row's, or the empty one where it would go. */
static size_t *index_slot(const struct odm_rows *s, const char *key)
{
	size_t mask = 2 * s->cap - 1;
	for (size_t i = (size_t)odm_string_hash(key) & mask;; i = (i + 1) & mask)
		if (!s->index[i] || !strcmp(s->rows[s->index[i] - 1].key, key))
			return &s->index[i];
}

static const struct odm_row *find_row(const struct odm_rows *s, const char *key)
{
	if (!s->n)
		return NULL;
	size_t *slot = index_slot(s, key);
	return *slot ? &s->rows[*slot - 1] : NULL;
}

/* Room for one row more: twice the rows and a new index when full (cap a power of two). */
static int make_room(struct odm_rows *s)
{
	if (s->n < s->cap)
		return 0;
	size_t cap = s->cap ? s->cap * 2 : 16;
	struct odm_row *v = realloc(s->rows, cap * sizeof *v);
	size_t *index = calloc(2 * cap, sizeof *index);
	if (!v || !index) {
		if (v)
			s->rows = v;
		free(index);
		return -ENOMEM;
	}
	free(s->index);
	s->rows = v;
	s->cap = cap;
	s->index = index;
	for (size_t i = 0; i < s->n; i++)
		*index_slot(s, s->rows[i].key) = i + 1;
	return 0;
}

struct odm_row *odm_rows_row(struct odm_rows *s, const char *key, uint32_t block_size)
{
	struct odm_row *r = (struct odm_row *)find_row(s, key);
	if (r)
		return r;
	if (make_room(s) || !s->rows)
		return NULL;
	r = &s->rows[s->n++];
	memset(r, 0, sizeof *r);
	snprintf(r->key, sizeof r->key, "%s", key);
	r->block_size = block_size;
	*index_slot(s, r->key) = s->n;
	return r;
}

static void add_counts(struct odm_row *r, const struct odm_count c[2][2])
{
	for (int d = 0; d < 2; d++)
		for (int m = 0; m < 2; m++) {
			r->c[d][m].ops += c[d][m].ops;
			r->c[d][m].bytes += c[d][m].bytes;
			r->c[d][m].usec += c[d][m].usec;
		}
}

int odm_rows_add(struct odm_rows *s, const char *key, const struct odm_row *src)
{
	struct odm_row *r = odm_rows_row(s, key, src->block_size);
	if (!r)
		return -ENOMEM;
	add_counts(r, src->c);
	for (int m = 0; m < 2; m++)
		for (unsigned b = 0; b < ODM_HIST_BINS; b++)
			r->hist[m][b] += src->hist[m][b];
	return 0;
}

/* A row per file, with what every process of the instance did on it. */
static int add_files(struct odm_rows *s, const struct odm_segment *seg)
{
	for (unsigned f = 0; f < seg->nfiles; f++) {
		const struct odm_file_slot *fs = &seg->files[f];
		if (fs->state == ODM_FILE_FREE)
			continue;
		struct odm_row *r = odm_rows_row(s, fs->path, fs->block_size ? fs->block_size : ODM_ALIGN);
		if (!r)
			return -ENOMEM;
		add_counts(r, fs->count);
	}
	return 0;
}

static int add_slot(struct odm_rows *s, const struct odm_segment *seg, const struct odm_proc_slot *p,
		    enum odm_by by, const char *node)
{
	char key[ODM_KEY_MAX];
	struct odm_row *r;
	const char *ptype = odm_ptype_names[p->ptype < ODM_PT_COUNT ? p->ptype : 0];
	node = node ? node : seg->node;
	if (by == ODM_BY_INSTANCE)
		snprintf(key, sizeof key, "%s/%s", seg->database, seg->instance);
	else if (by == ODM_BY_DATABASE)
		snprintf(key, sizeof key, "%s", seg->database);
	else if (by == ODM_BY_NODE)
		snprintf(key, sizeof key, "%s", node);
	else if (by == ODM_BY_ALL)
		snprintf(key, sizeof key, "%s%c%s%c%s%c%s", seg->database, ODM_KEY_SEP, seg->instance,
			 ODM_KEY_SEP, node, ODM_KEY_SEP, ptype);
	else
		snprintf(key, sizeof key, "%s", ptype);
	if (!(r = odm_rows_row(s, key, 0)))
		return -ENOMEM;
	add_counts(r, p->total);
	for (int d = 0; d < 2; d++)
		for (int m = 0; m < 2; m++)
			for (unsigned b = 0; b < ODM_HIST_BINS; b++)
				r->hist[m][b] += p->hist[d][m][b];
	return 0;
}

static bool segment_path(const struct dirent *e, const char *instance, char *path, size_t len)
{
	size_t n = strlen(e->d_name), pl = strlen(ODM_SEG_PREFIX);
	if (strncmp(e->d_name, ODM_SEG_PREFIX, pl) || (n > 4 && !strcmp(e->d_name + n - 4, ".tmp")))
		return false;
	const char *dot = strchr(e->d_name + pl, '.');
	if (!dot || (instance && strcmp(dot + 1, instance)))
		return false;
	snprintf(path, len, "%s/%s", ODM_SEG_DIR, e->d_name);
	return true;
}

/* Visit every instance segment (locked while visited). */
int odm_each_segment(const char *instance, bool report, void (*fn)(void *, struct odm_segment *),
		     void *arg)
{
	DIR *d = opendir(ODM_SEG_DIR);
	if (!d)
		return 0;
	int found = 0;
	struct dirent *e;
	char path[512];
	while ((e = readdir(d))) {
		struct odm_segment *seg;
		if (!segment_path(e, instance, path, sizeof path))
			continue;
		int rc = odm_segment_open_path(path, true, &seg);
		if (rc && report) {
			fprintf(stderr, "odmstat: %s: %s\n", path, rc == -EPROTO ?
				"made by another version of libodm (remove it once its instance is down)"
				: strerror(-rc));
		}
		if (rc)
			continue;
		if (odm_segment_lock(seg) == 0) {
			fn(arg, seg);
			odm_segment_unlock(seg);
			found++;
		}
		odm_segment_close(seg);
	}
	closedir(d);
	return found;
}

struct take_arg {
	struct odm_rows *s;
	enum odm_by by;
	const char *node;
	int rc;
};

static void take_one(void *arg, struct odm_segment *seg)
{
	struct take_arg *a = arg;
	double age = difftime(time(NULL), (time_t)seg->created);
	if (age > a->s->since)
		a->s->since = age;
	if (a->by == ODM_BY_FILE) {
		a->rc = add_files(a->s, seg);
		return;
	}
	for (unsigned t = 0; t < ODM_PT_COUNT && !a->rc; t++)
		a->rc = add_slot(a->s, seg, &seg->retired[t], a->by, a->node);
	for (unsigned i = 0; i < seg->nprocs && !a->rc; i++)
		if (seg->procs[i].state == ODM_SLOT_LIVE)
			a->rc = add_slot(a->s, seg, &seg->procs[i], a->by, a->node);
}

int odm_rows_take(struct odm_rows *s, enum odm_by by, const char *instance, const char *node,
		  bool report)
{
	odm_rows_clear(s);
	s->since = 1;
	struct take_arg a = {s, by, node, 0};
	int found = odm_each_segment(instance, report, take_one, &a);
	return a.rc ? a.rc : found;
}

void odm_rows_subtract(struct odm_rows *now, const struct odm_rows *before)
{
	for (size_t i = 0; i < now->n; i++) {
		struct odm_row *r = &now->rows[i];
		const struct odm_row *b = find_row(before, r->key);
		if (!b)
			continue;
		for (int d = 0; d < 2; d++)
			for (int m = 0; m < 2; m++) {
				r->c[d][m].ops -= b->c[d][m].ops;
				r->c[d][m].bytes -= b->c[d][m].bytes;
				r->c[d][m].usec -= b->c[d][m].usec;
			}
		for (int m = 0; m < 2; m++)
			for (unsigned k = 0; k < ODM_HIST_BINS; k++)
				r->hist[m][k] -= b->hist[m][k];
	}
}

bool odm_row_empty(const struct odm_row *r)
{
	return !(r->c[0][0].ops | r->c[0][1].ops | r->c[1][0].ops | r->c[1][1].ops);
}

void odm_rows_clear(struct odm_rows *s)
{
	s->n = 0;
	if (s->index)
		memset(s->index, 0, 2 * s->cap * sizeof *s->index);
}

void odm_rows_free(struct odm_rows *s)
{
	free(s->rows);
	free(s->index);
	*s = (struct odm_rows){0};
}

void odm_row_to_wire(const struct odm_row *r, OdmStatsRow *w, uint64_t buf[ODM_WIRE_WORDS])
{
	odm_stats_row__init(w);
	w->key = (char *)r->key;
	for (int d = 0; d < 2; d++)
		for (int m = 0; m < 2; m++) {
			uint64_t *c = buf + (d * 2 + m) * 3;
			c[0] = r->c[d][m].ops, c[1] = r->c[d][m].bytes, c[2] = r->c[d][m].usec;
		}
	memcpy(buf + 12, r->hist, sizeof r->hist);
	w->counts = buf;
	w->n_counts = 12;
	w->hist = buf + 12;
	w->n_hist = 2 * ODM_HIST_BINS;
}

int odm_row_from_wire(const OdmStatsRow *w, struct odm_row *r)
{
	if (w->n_counts != 12 || w->n_hist != 2 * ODM_HIST_BINS || strlen(w->key) >= ODM_KEY_MAX)
		return -EPROTO;
	memset(r, 0, sizeof *r);
	snprintf(r->key, sizeof r->key, "%s", w->key);
	for (int d = 0; d < 2; d++)
		for (int m = 0; m < 2; m++) {
			const uint64_t *c = w->counts + (d * 2 + m) * 3;
			r->c[d][m] = (struct odm_count){c[0], c[1], c[2]};
		}
	memcpy(r->hist, w->hist, sizeof r->hist);
	return 0;
}
