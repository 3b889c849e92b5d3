/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* This node's ODM statistics segments read as rows: one per instance, database, node, process
 * type or file (odmstat's --by), or per database, instance, node and process type at once
 * (ODM_BY_ALL, what odmstat --prometheus shows and what cfsd shares with the other nodes). */
#ifndef ODM_ROWS_H
#define ODM_ROWS_H

#include "odm/stats.h"
#include "proto/control.pb-c.h"

#include <stdbool.h>
#include <stddef.h>

enum odm_by { ODM_BY_INSTANCE, ODM_BY_DATABASE, ODM_BY_NODE, ODM_BY_PTYPE, ODM_BY_FILE, ODM_BY_ALL };
extern const char *const odm_by_names[ODM_BY_ALL + 1];
#define ODM_KEY_SEP '\037' /* between the labels of an ODM_BY_ALL key */
#define ODM_KEY_MAX 600

struct odm_row {
	char key[ODM_KEY_MAX];
	uint32_t block_size;
	struct odm_count c[2][2];        /* [dir][mode] */
	uint64_t hist[2][ODM_HIST_BINS]; /* [mode], reads and writes together */
};

struct odm_rows {
	struct odm_row *rows;
	size_t n, cap;
	size_t *index;  /* open addressing by key: row number + 1, 0 empty; 2 x cap slots */
	double since; /* seconds covered by the counts (the oldest instance's age) */
};

/* The row of key, added (zero) if new; NULL without memory. */
struct odm_row *odm_rows_row(struct odm_rows *s, const char *key, uint32_t block_size);
/* Add what src counted into the row of key; -ENOMEM. */
int odm_rows_add(struct odm_rows *s, const char *key, const struct odm_row *src);
/* Replace s by the segments' counts (only instance's, if not NULL); node, if not NULL, names
 * the node in the keys instead of each segment's node name; report: say on stderr which
 * segments cannot be read.  How many segments were read, or -ENOMEM. */
int odm_rows_take(struct odm_rows *s, enum odm_by by, const char *instance, const char *node,
		  bool report);
/* now - before, row by row (a row new since then counts whole). */
void odm_rows_subtract(struct odm_rows *now, const struct odm_rows *before);
bool odm_row_empty(const struct odm_row *r);
/* No rows (the memory stays for the next ones). */
void odm_rows_clear(struct odm_rows *s);
void odm_rows_free(struct odm_rows *s);

/* A row as it travels between nodes (OdmStatsRow): w's arrays point into buf. */
#define ODM_WIRE_WORDS (12 + 2 * ODM_HIST_BINS)
void odm_row_to_wire(const struct odm_row *r, OdmStatsRow *w, uint64_t buf[ODM_WIRE_WORDS]);
/* -EPROTO if w is not one. */
int odm_row_from_wire(const OdmStatsRow *w, struct odm_row *r);

/* Visit every segment (of instance, if not NULL), locked while visited; how many. */
int odm_each_segment(const char *instance, bool report, void (*fn)(void *, struct odm_segment *),
		     void *arg);

#endif
