/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The owners of files' record locks (plock_own.h): a hash of the owned files, each with the
 * calls held back while it is frozen, and a small ring of recently released files. */
#include "dlm-client/plock_own.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define BUCKETS 1024
#define RECENT 64

struct po_table {
	struct po_file *buckets[BUCKETS];
	size_t count;
	struct {
		uint64_t file;
		int64_t at_ms;
	} recent[RECENT];
	size_t next_recent;
};

static struct po_file **bucket(const struct po_table *t, uint64_t file)
{
	return (struct po_file **)&t->buckets[(file * 0x9E3779B97F4A7C15ull) >> 54];
}

struct po_table *po_create(void) { return calloc(1, sizeof(struct po_table)); }

static void free_calls(struct po_call *c)
{
	for (struct po_call *n; c; c = n) {
		n = c->next;
		free(c);
	}
}

void po_destroy(struct po_table *t)
{
	if (!t)
		return;
	for (size_t b = 0; b < BUCKETS; b++)
		for (struct po_file *f = t->buckets[b], *n; f; f = n) {
			n = f->next;
			free_calls(f->held_back);
			free(f);
		}
	free(t);
}

size_t po_count(const struct po_table *t) { return t->count; }

struct po_file *po_find(const struct po_table *t, uint64_t file)
{
	struct po_file *f = *bucket(t, file);
	while (f && f->file != file)
		f = f->next;
	return f;
}

struct po_file *po_claim(struct po_table *t, uint64_t file, uint64_t owner)
{
	struct po_file *f = po_find(t, file);
	if (f) {
		f->owner = owner;
		return f;
	}
	if (!(f = calloc(1, sizeof *f)))
		return NULL;
	struct po_file **head = bucket(t, file);
	*f = (struct po_file){.file = file, .owner = owner, .next = *head};
	f->tail = &f->held_back;
	*head = f;
	t->count++;
	return f;
}

int po_hold_back(struct po_file *f, const struct po_call *call, const void *data, size_t len)
{
	struct po_call *c = malloc(sizeof *c + len);
	if (!c)
		return -ENOMEM;
	*c = *call;
	c->len = len;
	c->next = NULL;
	memcpy(c->data, data, len);
	*f->tail = c;
	f->tail = &c->next;
	return 0;
}

static struct po_call *unlink_call(struct po_file *f, struct po_call **pp)
{
	struct po_call *c = *pp;
	*pp = c->next;
	if (f->tail == &c->next)
		f->tail = pp;
	return c;
}

struct po_call *po_take(struct po_file *f, uint64_t sender, uint64_t reqid, int want_kind)
{
	for (struct po_call **pp = &f->held_back; *pp; pp = &(*pp)->next)
		if ((*pp)->sender == sender && (*pp)->reqid == reqid && (*pp)->kind == want_kind)
			return unlink_call(f, pp);
	return NULL;
}

struct po_call *po_take_nowait(struct po_file *f)
{
	for (struct po_call **pp = &f->held_back; *pp; pp = &(*pp)->next)
		if ((*pp)->nowait)
			return unlink_call(f, pp);
	return NULL;
}

bool po_holds_back(const struct po_file *f, uint64_t sender, uint64_t lock_owner)
{
	for (const struct po_call *c = f->held_back; c; c = c->next)
		if (c->sender == sender && c->lock_owner == lock_owner)
			return true;
	return false;
}

struct po_call *po_release(struct po_table *t, struct po_file *f, int64_t now_ms)
{
	struct po_file **pp = bucket(t, f->file);
	while (*pp != f)
		pp = &(*pp)->next;
	*pp = f->next;
	t->count--;
	t->recent[t->next_recent].file = f->file;
	t->recent[t->next_recent].at_ms = now_ms;
	t->next_recent = (t->next_recent + 1) % RECENT;
	struct po_call *calls = f->held_back;
	free(f);
	return calls;
}

bool po_recent(const struct po_table *t, uint64_t file, int64_t now_ms, int64_t window_ms)
{
	for (size_t i = 0; i < RECENT; i++)
		if (t->recent[i].file == file && t->recent[i].at_ms &&
		    now_ms - t->recent[i].at_ms < window_ms)
			return true;
	return false;
}

void po_walk(const struct po_table *t, po_visit_fn fn, void *arg)
{
	for (size_t b = 0; b < BUCKETS; b++)
		for (const struct po_file *f = t->buckets[b]; f; f = f->next)
			fn(arg, f);
}
