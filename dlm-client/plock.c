/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The POSIX record lock table (plock.h).  Held ranges and waiters are plain lists: a first
 * step sized for the handful of record locks a database's files carry, not for millions
 * (a deadlock check walks them once for every owner on its way).
 * What a lock does follows fcntl(2): an owner's new lock replaces what it held in the range
 * (splitting what sticks out), touching ranges of one type merge, an unlock may punch a hole,
 * and locks of different owners conflict when they overlap and one of them writes.  Waiters
 * are retried in arrival order whenever something on their file is released. */
#include "dlm-client/plock.h"

#include <errno.h>
#include <stdlib.h>

struct held {
	struct pl_lock l;
	struct held *next;
};

struct waiter {
	uint64_t reqid;
	struct pl_lock l;
	struct waiter *next;
};

struct pl_table {
	pl_emit_fn emit;
	void *arg;
	struct held *held;
	struct waiter *waiters, **waiters_tail;
	size_t nheld, nwaiters;
};

struct pl_table *pl_create(pl_emit_fn emit, void *arg)
{
	struct pl_table *t = calloc(1, sizeof *t);
	if (!t)
		return NULL;
	*t = (struct pl_table){.emit = emit, .arg = arg};
	t->waiters_tail = &t->waiters;
	return t;
}

void pl_destroy(struct pl_table *t)
{
	if (!t)
		return;
	for (struct held *h = t->held, *n; h; h = n) {
		n = h->next;
		free(h);
	}
	for (struct waiter *w = t->waiters, *n; w; w = n) {
		n = w->next;
		free(w);
	}
	free(t);
}

size_t pl_count(const struct pl_table *t) { return t->nheld + t->nwaiters; }

bool pl_file_busy(const struct pl_table *t, uint64_t file)
{
	for (const struct held *h = t->held; h; h = h->next)
		if (h->l.file == file)
			return true;
	for (const struct waiter *w = t->waiters; w; w = w->next)
		if (w->l.file == file)
			return true;
	return false;
}

bool pl_owns(const struct pl_table *t, uint64_t node, uint64_t owner, uint64_t file)
{
	for (const struct held *h = t->held; h; h = h->next)
		if (h->l.node == node && h->l.owner == owner && h->l.file == file)
			return true;
	for (const struct waiter *w = t->waiters; w; w = w->next)
		if (w->l.node == node && w->l.owner == owner && w->l.file == file)
			return true;
	return false;
}

void pl_walk(const struct pl_table *t, pl_visit_fn fn, void *arg)
{
	for (const struct held *h = t->held; h; h = h->next)
		fn(arg, &h->l, 0);
	for (const struct waiter *w = t->waiters; w; w = w->next)
		fn(arg, &w->l, w->reqid);
}

static void emit(struct pl_table *t, enum pl_event_type type, uint64_t node, uint64_t reqid,
		 int status)
{
	struct pl_event ev = {.type = type, .node = node, .reqid = reqid, .status = status};
	t->emit(t->arg, &ev);
}

static bool same_owner(const struct pl_lock *a, const struct pl_lock *b)
{
	return a->node == b->node && a->owner == b->owner;
}

static bool overlap(const struct pl_lock *a, const struct pl_lock *b)
{
	return a->file == b->file && a->start <= b->end && b->start <= a->end;
}

static bool conflict(const struct pl_lock *a, const struct pl_lock *b)
{
	return !same_owner(a, b) && overlap(a, b) && (a->type == PL_WR || b->type == PL_WR);
}

static const struct held *first_conflict(const struct pl_table *t, const struct pl_lock *l)
{
	for (const struct held *h = t->held; h; h = h->next)
		if (conflict(&h->l, l))
			return h;
	return NULL;
}

static int add_held(struct pl_table *t, const struct pl_lock *l)
{
	struct held *h = malloc(sizeof *h);
	if (!h)
		return -ENOMEM;
	*h = (struct held){.l = *l, .next = t->held};
	t->held = h;
	t->nheld++;
	return 0;
}

static int add_waiter(struct pl_table *t, const struct pl_lock *l, uint64_t reqid)
{
	struct waiter *w = malloc(sizeof *w);
	if (!w)
		return -ENOMEM;
	*w = (struct waiter){.reqid = reqid, .l = *l};
	*t->waiters_tail = w;
	t->waiters_tail = &w->next;
	t->nwaiters++;
	return 0;
}

/* The held list is walked newest first: restoring appends, so the copy walks alike. */
int pl_restore(struct pl_table *t, const struct pl_lock *l, uint64_t reqid)
{
	if (reqid)
		return add_waiter(t, l, reqid);
	struct held *h = malloc(sizeof *h);
	if (!h)
		return -ENOMEM;
	*h = (struct held){.l = *l};
	struct held **pp = &t->held;
	while (*pp)
		pp = &(*pp)->next;
	*pp = h;
	t->nheld++;
	return 0;
}

static void remove_held(struct pl_table *t, struct held **pp)
{
	struct held *h = *pp;
	*pp = h->next;
	free(h);
	t->nheld--;
}

/* Take [l->start, l->end] out of what l's owner holds on l's file. */
static int carve(struct pl_table *t, const struct pl_lock *l)
{
	for (struct held **pp = &t->held; *pp;) {
		struct pl_lock *h = &(*pp)->l;
		if (!same_owner(h, l) || !overlap(h, l)) {
			pp = &(*pp)->next;
			continue;
		}
		if (h->start < l->start && h->end > l->end) { /* a hole in the middle */
			struct pl_lock tail = *h;
			tail.start = l->end + 1;
			h->end = l->start - 1;
			return add_held(t, &tail); /* nothing else of this owner overlaps */
		}
		if (h->start < l->start)
			h->end = l->start - 1;
		else if (h->end > l->end)
			h->start = l->end + 1;
		else {
			remove_held(t, pp);
			continue;
		}
		pp = &(*pp)->next;
	}
	return 0;
}

/* l's owner now holds l: what it held there is replaced, touching ranges of its type join. */
static int apply(struct pl_table *t, const struct pl_lock *l)
{
	int rc = carve(t, l);
	if (rc || l->type == PL_UN)
		return rc;
	struct pl_lock n = *l;
	for (struct held **pp = &t->held; *pp;) {
		const struct pl_lock *h = &(*pp)->l;
		bool joins = same_owner(h, &n) && h->file == n.file && h->type == n.type &&
			     ((h->end != PL_MAX && h->end + 1 == n.start) ||
			      (n.end != PL_MAX && n.end + 1 == h->start));
		if (joins) {
			n.start = h->start < n.start ? h->start : n.start;
			n.end = h->end > n.end ? h->end : n.end;
			remove_held(t, pp);
		} else {
			pp = &(*pp)->next;
		}
	}
	return add_held(t, &n);
}

/* Unlink waiter *pp, fixing the tail. */
static struct waiter *take_waiter(struct pl_table *t, struct waiter **pp)
{
	struct waiter *w = *pp;
	*pp = w->next;
	if (t->waiters_tail == &w->next)
		t->waiters_tail = pp;
	t->nwaiters--;
	return w;
}

/* Grant, in arrival order, every waiter on file that nothing blocks any more. */
static void retry_waiters(struct pl_table *t, uint64_t file)
{
	for (struct waiter **pp = &t->waiters; *pp;) {
		struct waiter *w = *pp;
		if ((file && w->l.file != file) || first_conflict(t, &w->l)) {
			pp = &w->next;
			continue;
		}
		take_waiter(t, pp);
		int rc = apply(t, &w->l);
		emit(t, rc ? PL_EV_FAILED : PL_EV_GRANTED, w->l.node, w->reqid, rc);
		free(w);
	}
}

/* ---- deadlock detection ---- */

/* The owners met on the way, each once: (node, owner) pairs, and how many of them the walk
 * has followed so far. */
struct owners_seen {
	uint64_t (*v)[2];
	size_t n, followed, cap;
};

static int meet(struct owners_seen *s, const struct pl_lock *l)
{
	for (size_t i = 0; i < s->n; i++)
		if (s->v[i][0] == l->node && s->v[i][1] == l->owner)
			return 0;
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 16;
		uint64_t(*v)[2] = realloc(s->v, cap * sizeof *v);
		if (!v)
			return -ENOMEM;
		s->v = v;
		s->cap = cap;
	}
	s->v[s->n][0] = l->node;
	s->v[s->n][1] = l->owner;
	s->n++;
	return 0;
}

static bool sees(const struct pl_scope *scope, uint64_t file)
{
	return !scope || scope->sees(scope->arg, file);
}

/* Meet every owner holding what w conflicts with. */
static int meet_blockers(const struct pl_table *t, const struct pl_lock *w,
			 const struct pl_scope *scope, struct owners_seen *s)
{
	for (const struct held *h = t->held; h; h = h->next)
		if (conflict(&h->l, w) && sees(scope, h->l.file) && meet(s, &h->l))
			return -ENOMEM;
	return 0;
}

/* Would l, waiting, close a cycle of owners each waiting for the next?  From the owners l
 * would wait for, follow what each of them waits for (every holder in a waiter's way, as
 * a waiter here is granted only when none is left) until l's owner comes up or nobody new
 * does.  Out of memory counts as no. */
static bool would_deadlock(const struct pl_table *t, const struct pl_lock *l,
			   const struct pl_scope *scope)
{
	struct owners_seen s = {0};
	bool cycle = false;
	int rc = meet_blockers(t, l, scope, &s);
	while (!rc && !cycle && s.followed < s.n) {
		const uint64_t *o = s.v[s.followed++];
		if (o[0] == l->node && o[1] == l->owner) {
			cycle = true;
			break;
		}
		for (const struct waiter *w = t->waiters; w && !rc; w = w->next)
			if (w->l.node == o[0] && w->l.owner == o[1] && sees(scope, w->l.file))
				rc = meet_blockers(t, &w->l, scope, &s);
	}
	free(s.v);
	return cycle;
}

int pl_set(struct pl_table *t, uint64_t reqid, const struct pl_lock *l, bool wait,
	   const struct pl_scope *scope)
{
	if (l->start > l->end || (l->type != PL_RD && l->type != PL_WR && l->type != PL_UN))
		return -EINVAL;
	if (l->type != PL_UN && first_conflict(t, l)) {
		if (!wait || would_deadlock(t, l, scope)) {
			emit(t, PL_EV_FAILED, l->node, reqid, wait ? -EDEADLK : -EAGAIN);
			return 0;
		}
		return add_waiter(t, l, reqid);
	}
	int rc = apply(t, l);
	emit(t, rc ? PL_EV_FAILED : PL_EV_GRANTED, l->node, reqid, rc);
	retry_waiters(t, l->file); /* what l gave up (an unlock, a write lock made a read one) */
	return 0;
}

bool pl_get(const struct pl_table *t, const struct pl_lock *l, struct pl_lock *holder)
{
	const struct held *h = first_conflict(t, l);
	if (h)
		*holder = h->l;
	return h != NULL;
}

int pl_cancel(struct pl_table *t, uint64_t node, uint64_t reqid)
{
	for (struct waiter **pp = &t->waiters; *pp; pp = &(*pp)->next)
		if ((*pp)->l.node == node && (*pp)->reqid == reqid) {
			free(take_waiter(t, pp));
			emit(t, PL_EV_FAILED, node, reqid, -ECANCELED);
			return 0;
		}
	return -ENOENT;
}

void pl_drop(struct pl_table *t, uint64_t node, uint64_t owner, uint64_t file, bool held)
{
	for (struct held **pp = &t->held; held && *pp;) {
		const struct pl_lock *h = &(*pp)->l;
		if (h->node == node && (!owner || h->owner == owner) && (!file || h->file == file))
			remove_held(t, pp);
		else
			pp = &(*pp)->next;
	}
	for (struct waiter **pp = &t->waiters; *pp;) {
		const struct pl_lock *w = &(*pp)->l;
		if (w->node == node && (!owner || w->owner == owner) && (!file || w->file == file)) {
			struct waiter *gone = take_waiter(t, pp);
			emit(t, PL_EV_FAILED, node, gone->reqid, -ECANCELED);
			free(gone);
		} else {
			pp = &(*pp)->next;
		}
	}
	retry_waiters(t, file);
}
