/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The lock table: DLM grant rules (compatibility matrix, conversions before new requests, FIFO
 * so nobody starves, NOQUEUE, cancel, LVB on release from PW/EX, blocking notifications) over
 * resources and locks kept in two hash tables.  No I/O, no clocks, no randomness: given the same
 * calls it emits the same events, in the same order, on every node. */
#include "table.h"
#include "cfslock.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct lt_lock;
struct lt_list {
	struct lt_lock *first, *last;
};

struct lt_resource {
	char name[LT_NAME_MAX];
	size_t len;
	struct lt_list queue[3]; /* indexed by enum lt_queue */
	bool lvb_valid;
	uint8_t lvb[LT_LVB_LEN];
	unsigned nrecovering; /* granted locks of failed nodes (0: nothing here is held up) */
	struct lt_resource *hnext;
};

struct lt_lock {
	uint64_t node;
	uint64_t lkid;
	int granted, requested;
	enum lt_queue queue;
	unsigned flags;
	bool recovering;
	int bast_sent; /* mode of the last blocking notice, -1 for none since the last grant */
	struct lt_resource *res;
	struct lt_lock *prev, *next; /* in res->queue[queue] */
	struct lt_lock *hnext;
};

struct lt_table {
	lt_emit_fn emit;
	void *arg;
	struct lt_resource **res_buckets;
	struct lt_lock **lock_buckets;
	size_t nbuckets, nres, nlocks;
};

/* DLM compatibility matrix, modes NL CR CW PR PW EX. */
static const bool compat[6][6] = {
	{1, 1, 1, 1, 1, 1}, {1, 1, 1, 1, 1, 0}, {1, 1, 1, 0, 0, 0},
	{1, 1, 0, 1, 0, 0}, {1, 1, 0, 0, 0, 0}, {1, 0, 0, 0, 0, 0},
};

bool lt_modes_compatible(int a, int b)
{
	return compat[a][b];
}

static bool valid_mode(int m)
{
	return m >= CFSLOCK_NL && m <= CFSLOCK_EX;
}

static uint64_t hash_name(const char *name, size_t len)
{
	uint64_t h = 1469598103934665603ull;
	for (size_t i = 0; i < len; i++)
		h = (h ^ (uint8_t)name[i]) * 1099511628211ull;
	return h;
}

static uint64_t hash_lock(uint64_t node, uint64_t lkid)
{
	uint64_t h = (lkid ^ (node * 0xff51afd7ed558ccdull)) * 0x9e3779b97f4a7c15ull;
	return h ^ (h >> 29);
}

struct lt_table *lt_create(lt_emit_fn emit, void *arg)
{
	struct lt_table *t = calloc(1, sizeof *t);
	if (!t)
		return NULL;
	t->emit = emit;
	t->arg = arg;
	t->nbuckets = 1024;
	t->res_buckets = calloc(t->nbuckets, sizeof *t->res_buckets);
	t->lock_buckets = calloc(t->nbuckets, sizeof *t->lock_buckets);
	if (!t->res_buckets || !t->lock_buckets) {
		lt_destroy(t);
		return NULL;
	}
	return t;
}

void lt_destroy(struct lt_table *t)
{
	if (!t)
		return;
	for (size_t b = 0; t->lock_buckets && b < t->nbuckets; b++)
		for (struct lt_lock *l = t->lock_buckets[b], *n; l; l = n) {
			n = l->hnext;
			free(l);
		}
	for (size_t b = 0; t->res_buckets && b < t->nbuckets; b++)
		for (struct lt_resource *r = t->res_buckets[b], *n; r; r = n) {
			n = r->hnext;
			free(r);
		}
	free(t->res_buckets);
	free(t->lock_buckets);
	free(t);
}

/* Grow both hash tables when they fill, so lookups stay O(1) for a million resources. */
static void maybe_rehash(struct lt_table *t)
{
	if (t->nres < t->nbuckets && t->nlocks < t->nbuckets)
		return;
	size_t nb = t->nbuckets * 4;
	struct lt_resource **rb = calloc(nb, sizeof *rb);
	struct lt_lock **lb = calloc(nb, sizeof *lb);
	if (!rb || !lb) { /* keep the old, slower tables */
		free(rb);
		free(lb);
		return;
	}
	for (size_t b = 0; b < t->nbuckets; b++) {
		for (struct lt_resource *r = t->res_buckets[b], *n; r; r = n) {
			n = r->hnext;
			size_t i = hash_name(r->name, r->len) & (nb - 1);
			r->hnext = rb[i];
			rb[i] = r;
		}
		for (struct lt_lock *l = t->lock_buckets[b], *n; l; l = n) {
			n = l->hnext;
			size_t i = hash_lock(l->node, l->lkid) & (nb - 1);
			l->hnext = lb[i];
			lb[i] = l;
		}
	}
	free(t->res_buckets);
	free(t->lock_buckets);
	t->res_buckets = rb;
	t->lock_buckets = lb;
	t->nbuckets = nb;
}

static struct lt_lock *find_lock(const struct lt_table *t, uint64_t node, uint64_t lkid)
{
	struct lt_lock *l = t->lock_buckets[hash_lock(node, lkid) & (t->nbuckets - 1)];
	while (l && (l->node != node || l->lkid != lkid))
		l = l->hnext;
	return l;
}

static struct lt_resource *find_resource(struct lt_table *t, const char *name, size_t len,
					 bool create)
{
	size_t b = hash_name(name, len) & (t->nbuckets - 1);
	for (struct lt_resource *r = t->res_buckets[b]; r; r = r->hnext)
		if (r->len == len && memcmp(r->name, name, len) == 0)
			return r;
	if (!create)
		return NULL;
	struct lt_resource *r = calloc(1, sizeof *r);
	if (!r)
		return NULL;
	memcpy(r->name, name, len);
	r->len = len;
	r->hnext = t->res_buckets[b];
	t->res_buckets[b] = r;
	t->nres++;
	return r;
}

static void list_append(struct lt_list *q, struct lt_lock *l)
{
	l->next = NULL;
	l->prev = q->last;
	if (q->last)
		q->last->next = l;
	else
		q->first = l;
	q->last = l;
}

static void list_remove(struct lt_list *q, struct lt_lock *l)
{
	if (l->prev)
		l->prev->next = l->next;
	else
		q->first = l->next;
	if (l->next)
		l->next->prev = l->prev;
	else
		q->last = l->prev;
	l->prev = l->next = NULL;
}

static void move_to(struct lt_lock *l, enum lt_queue q)
{
	list_remove(&l->res->queue[l->queue], l);
	l->queue = q;
	list_append(&l->res->queue[q], l);
}

static void forget_lock(struct lt_table *t, struct lt_lock *l)
{
	l->res->nrecovering -= l->recovering;
	list_remove(&l->res->queue[l->queue], l);
	struct lt_lock **pp = &t->lock_buckets[hash_lock(l->node, l->lkid) & (t->nbuckets - 1)];
	while (*pp != l) /* NOLINT(clang-analyzer-core.NullDereference): l is in its bucket */
		pp = &(*pp)->hnext;
	*pp = l->hnext;
	t->nlocks--;
	free(l);
}

/* A resource goes when its last lock does, unless it carries a value block: that must survive
 * until the next holder reads it. */
static void forget_resource_if_unused(struct lt_table *t, struct lt_resource *r)
{
	if (r->lvb_valid)
		return;
	for (int q = 0; q < 3; q++)
		if (r->queue[q].first)
			return;
	struct lt_resource **pp = &t->res_buckets[hash_name(r->name, r->len) & (t->nbuckets - 1)];
	while (*pp != r)
		pp = &(*pp)->hnext;
	*pp = r->hnext;
	t->nres--;
	free(r);
}

static void emit(struct lt_table *t, enum lt_event_type type, const struct lt_lock *l, int mode,
		 int status)
{
	struct lt_event ev = {.type = type, .node = l->node, .lkid = l->lkid, .mode = mode,
			      .status = status, .lvb_valid = l->res->lvb_valid};
	memcpy(ev.lvb, l->res->lvb, LT_LVB_LEN);
	t->emit(t->arg, &ev);
}

/* Can `mode` be granted to `self` beside every granted lock but itself? */
static bool fits_granted(const struct lt_resource *r, const struct lt_lock *self, int mode)
{
	if (mode == CFSLOCK_NL)
		return true;
	/* NOLINTNEXTLINE(clang-analyzer-unix.Malloc): forget_lock unlinks before it frees */
	for (const struct lt_lock *g = r->queue[LT_GRANTED].first; g; g = g->next)
		if (g != self && !compat[g->granted][mode]) /* NOLINT(clang-analyzer-unix.Malloc) */
			return false;
	/* Converting locks still hold their granted mode. */
	for (const struct lt_lock *g = r->queue[LT_CONVERTING].first; g; g = g->next)
		if (g != self && !compat[g->granted][mode])
			return false;
	return true;
}

/* Does l wait for a dead node's grant (recovering)?  Then nothing is granted to it before that
 * node's recovery is done, whatever else happens on the resource. */
static bool held_up_by_recovery(const struct lt_resource *r, const struct lt_lock *l)
{
	if (!r->nrecovering) /* the common case, on the path of every request */
		return false;
	/* NOLINTNEXTLINE(clang-analyzer-unix.Malloc): forget_lock unlinks before it frees */
	for (const struct lt_lock *g = r->queue[LT_GRANTED].first; g; g = g->next)
		if (g->recovering && !compat[g->granted][l->requested]) /* NOLINT(clang-analyzer-unix.Malloc) */
			return true;
	return false;
}

static void grant(struct lt_table *t, struct lt_lock *l)
{
	l->granted = l->requested;
	l->bast_sent = -1;
	move_to(l, LT_GRANTED);
	emit(t, LT_EV_GRANTED, l, l->granted, 0);
}

/* Tell the holders that block lock w from mode, once per wanted mode. */
static void tell_holders(struct lt_table *t, const struct lt_lock *w, int mode)
{
	for (int hq = LT_GRANTED; hq <= LT_CONVERTING; hq++)
		for (struct lt_lock *h = w->res->queue[hq].first; h; h = h->next)
			if (h != w && !h->recovering && !compat[h->granted][mode] &&
			    h->bast_sent != mode) {
				h->bast_sent = mode;
				emit(t, LT_EV_BLOCKING, h, mode, 0);
			}
}

/* Tell holders that block a queued request.  One held up by a recovery tells nobody until the
 * recovery is done (recovery-done sends them): the holders keep their grants meanwhile. */
static void send_blocking(struct lt_table *t, struct lt_resource *r)
{
	for (int q = LT_CONVERTING; q <= LT_WAITING; q++)
		for (struct lt_lock *w = r->queue[q].first; w; w = w->next)
			if (!held_up_by_recovery(r, w))
				tell_holders(t, w, w->requested);
}

/* A NOQUEUE request of lock l for mode failed (l->granted is what it keeps): with
 * LT_NOQUEUEBAST the holders in its way hear of it all the same, as of a queued request. */
static void refused(struct lt_table *t, struct lt_lock *l, int mode, unsigned flags)
{
	emit(t, LT_EV_FAILED, l, l->granted, -EAGAIN);
	if (flags & LT_NOQUEUEBAST)
		tell_holders(t, l, mode);
}

/* May a lock behind every queued lock of q up to stop (all of q if stop is not in it) be
 * granted now, if it fits?  Only if each of those is held up by a recovery: waiting behind
 * them would make a survivor's reader wait for the dead node's recovery because another
 * survivor wants EX of what the dead node only read (FIFO order resumes at recovery-done,
 * when they are no longer held up). */
static bool only_held_up_ahead(const struct lt_resource *r, enum lt_queue q,
			       const struct lt_lock *stop)
{
	for (const struct lt_lock *l = r->queue[q].first; l && l != stop; l = l->next)
		if (!held_up_by_recovery(r, l))
			return false;
	return true;
}

/* Grant in queue order what fits, stopping at the first that does not fit and is not held up
 * by a recovery; false if it stopped. */
static bool grant_queue(struct lt_table *t, struct lt_resource *r, enum lt_queue q)
{
	for (struct lt_lock *l = r->queue[q].first, *next; l; l = next) {
		next = l->next;
		if (fits_granted(r, l, l->requested))
			grant(t, l);
		else if (!held_up_by_recovery(r, l))
			return false;
	}
	return true;
}

/* Conversions first, then new requests, each queue in order, stopping at the first that does
 * not fit: a request is never overtaken, so nobody starves (but see only_held_up_ahead). */
static void grant_pending(struct lt_table *t, struct lt_resource *r)
{
	if (grant_queue(t, r, LT_CONVERTING))
		grant_queue(t, r, LT_WAITING);
	send_blocking(t, r);
}

int lt_request(struct lt_table *t, uint64_t node, uint64_t lkid, const char *name, size_t len,
	       int mode, unsigned flags)
{
	if (!valid_mode(mode) || len == 0 || len > LT_NAME_MAX)
		return -EINVAL;
	if (find_lock(t, node, lkid))
		return -EEXIST;
	maybe_rehash(t);
	struct lt_resource *r = find_resource(t, name, len, true);
	struct lt_lock *l = r ? calloc(1, sizeof *l) : NULL;
	if (!l) {
		if (r)
			forget_resource_if_unused(t, r);
		return -ENOMEM;
	}
	*l = (struct lt_lock){.node = node, .lkid = lkid, .granted = -1, .requested = mode,
			      .queue = LT_WAITING, .flags = flags, .bast_sent = -1, .res = r};
	size_t b = hash_lock(node, lkid) & (t->nbuckets - 1);
	l->hnext = t->lock_buckets[b];
	t->lock_buckets[b] = l;
	t->nlocks++;
	list_append(&r->queue[LT_WAITING], l);
	/* NL conflicts with nothing, so it never waits (as in the Linux DLM). */
	bool nobody_ahead = only_held_up_ahead(r, LT_CONVERTING, NULL) &&
			    only_held_up_ahead(r, LT_WAITING, l);
	if ((nobody_ahead || mode == CFSLOCK_NL) && fits_granted(r, l, mode)) {
		grant(t, l);
	} else if (flags & LT_NOQUEUE) {
		refused(t, l, mode, flags);
		forget_lock(t, l);
		forget_resource_if_unused(t, r);
	} else {
		send_blocking(t, r);
	}
	return 0;
}

static void store_lvb(struct lt_lock *l, const uint8_t *lvb)
{
	if (lvb && l->granted >= CFSLOCK_PW) {
		memcpy(l->res->lvb, lvb, LT_LVB_LEN);
		l->res->lvb_valid = true;
	}
}

/* Would conversion l wait for a converting lock that waits for l?  Both keep their granted
 * modes while they wait, so neither would ever be granted (two holders of PR converting to
 * EX, say).  The later one is refused, as the DLM does without CONVDEADLK: every replica
 * sees the same order, so they all refuse the same one. */
static bool conversion_deadlock(const struct lt_resource *r, const struct lt_lock *l)
{
	for (const struct lt_lock *c = r->queue[LT_CONVERTING].first; c; c = c->next)
		if (!compat[c->granted][l->requested] && !compat[l->granted][c->requested])
			return true;
	return false;
}

int lt_convert(struct lt_table *t, uint64_t node, uint64_t lkid, int mode, unsigned flags,
	       const uint8_t *lvb)
{
	struct lt_lock *l = find_lock(t, node, lkid);
	if (!valid_mode(mode))
		return -EINVAL;
	if (!l)
		return -ENOENT;
	if (l->queue != LT_GRANTED)
		return -EBUSY;
	struct lt_resource *r = l->res;
	if (mode < l->granted)
		store_lvb(l, lvb);
	l->requested = mode;
	if ((only_held_up_ahead(r, LT_CONVERTING, NULL) || mode == CFSLOCK_NL) &&
	    fits_granted(r, l, mode)) {
		bool down = mode < l->granted;
		grant(t, l);
		if (down)
			grant_pending(t, r);
	} else if (flags & LT_NOQUEUE) {
		l->requested = l->granted;
		refused(t, l, mode, flags);
	} else if (conversion_deadlock(r, l)) {
		l->requested = l->granted;
		emit(t, LT_EV_FAILED, l, l->granted, -EDEADLK);
	} else {
		move_to(l, LT_CONVERTING);
		send_blocking(t, r);
	}
	return 0;
}

int lt_unlock(struct lt_table *t, uint64_t node, uint64_t lkid, const uint8_t *lvb)
{
	struct lt_lock *l = find_lock(t, node, lkid);
	if (!l)
		return -ENOENT;
	if (l->queue != LT_GRANTED)
		return -EBUSY;
	struct lt_resource *r = l->res;
	store_lvb(l, lvb);
	emit(t, LT_EV_UNLOCKED, l, -1, 0);
	forget_lock(t, l);
	grant_pending(t, r);
	forget_resource_if_unused(t, r);
	return 0;
}

int lt_cancel(struct lt_table *t, uint64_t node, uint64_t lkid)
{
	struct lt_lock *l = find_lock(t, node, lkid);
	if (!l)
		return -ENOENT;
	struct lt_resource *r = l->res;
	if (l->queue == LT_GRANTED)
		return -ENOENT; /* nothing pending to cancel */
	if (l->queue == LT_CONVERTING) {
		l->requested = l->granted;
		move_to(l, LT_GRANTED);
		emit(t, LT_EV_FAILED, l, l->granted, -ECANCELED);
	} else {
		emit(t, LT_EV_FAILED, l, -1, -ECANCELED);
		forget_lock(t, l);
	}
	grant_pending(t, r);
	forget_resource_if_unused(t, r);
	return 0;
}

/* Resources touched by a node's locks, sorted by name, so every replica visits them in one
 * order whatever its hash layout. */
static int cmp_res(const void *a, const void *b)
{
	const struct lt_resource *x = *(struct lt_resource *const *)a;
	const struct lt_resource *y = *(struct lt_resource *const *)b;
	size_t n = x->len < y->len ? x->len : y->len;
	int c = memcmp(x->name, y->name, n);
	return c ? c : (x->len > y->len) - (x->len < y->len);
}

static size_t resources_of_node(const struct lt_table *t, uint64_t node,
				struct lt_resource ***out)
{
	size_t n = 0;
	struct lt_resource **v = malloc((t->nlocks + 1) * sizeof *v);
	if (!v) {
		*out = NULL;
		return 0;
	}
	for (size_t b = 0; b < t->nbuckets; b++)
		for (struct lt_lock *l = t->lock_buckets[b]; l; l = l->hnext)
			if (l->node == node) {
				size_t i;
				for (i = 0; i < n && v[i] != l->res; i++)
					;
				if (i == n)
					v[n++] = l->res;
			}
	qsort(v, n, sizeof *v, cmp_res);
	*out = v;
	return n;
}

void lt_node_failed(struct lt_table *t, uint64_t node)
{
	struct lt_resource **rs;
	size_t n = resources_of_node(t, node, &rs);
	for (size_t i = 0; i < n; i++) {
		struct lt_resource *r = rs[i];
		for (int q = 0; q < 3; q++)
			for (struct lt_lock *l = r->queue[q].first, *next; l; l = next) {
				next = l->next;
				if (l->node != node)
					continue;
				if (q == LT_WAITING) {
					forget_lock(t, l);
					continue;
				}
				l->recovering = true;
				r->nrecovering++;
				if (q == LT_CONVERTING) {
					l->requested = l->granted;
					move_to(l, LT_GRANTED);
				}
			}
		grant_pending(t, r);
		forget_resource_if_unused(t, r);
	}
	free(rs);
}

void lt_recovery_done(struct lt_table *t, uint64_t node)
{
	struct lt_resource **rs;
	size_t n = resources_of_node(t, node, &rs);
	for (size_t i = 0; i < n; i++) {
		struct lt_resource *r = rs[i];
		for (struct lt_lock *l = r->queue[LT_GRANTED].first, *next; l; l = next) {
			next = l->next;
			if (l->node != node || !l->recovering)
				continue;
			/* A writer died holding it: its value block cannot be trusted. */
			if (l->granted >= CFSLOCK_PW)
				r->lvb_valid = false;
			forget_lock(t, l);
		}
		grant_pending(t, r);
		forget_resource_if_unused(t, r);
	}
	free(rs);
}

bool lt_node_holds(const struct lt_table *t, uint64_t node)
{
	for (size_t b = 0; b < t->nbuckets; b++)
		for (const struct lt_lock *l = t->lock_buckets[b]; l; l = l->hnext)
			if (l->node == node)
				return true;
	return false;
}

size_t lt_count(const struct lt_table *t)
{
	return t->nlocks;
}

void lt_walk(const struct lt_table *t, lt_visit_fn visit, void *arg)
{
	struct lt_resource **v = malloc((t->nres + 1) * sizeof *v);
	size_t n = 0;
	if (!v)
		return;
	for (size_t b = 0; b < t->nbuckets; b++)
		for (struct lt_resource *r = t->res_buckets[b]; r; r = r->hnext)
			v[n++] = r;
	qsort(v, n, sizeof *v, cmp_res);
	for (size_t i = 0; i < n; i++) {
		if (!v[i]->queue[0].first && !v[i]->queue[1].first && !v[i]->queue[2].first) {
			struct lt_lock_info info = {.name = v[i]->name, .name_len = v[i]->len,
						    .granted = -1, .requested = -1, .bast_sent = -1,
						    .lvb_valid = v[i]->lvb_valid, .lvb = v[i]->lvb};
			visit(arg, &info);
		}
		for (int q = 0; q < 3; q++)
			for (const struct lt_lock *l = v[i]->queue[q].first; l; l = l->next) {
				struct lt_lock_info info = {
					.name = v[i]->name, .name_len = v[i]->len, .node = l->node,
					.lkid = l->lkid, .granted = l->granted, .requested = l->requested,
					.queue = l->queue, .recovering = l->recovering,
					.bast_sent = l->bast_sent, .lvb_valid = v[i]->lvb_valid, .lvb = v[i]->lvb};
				visit(arg, &info);
			}
	}
	free(v);
}

int lt_restore(struct lt_table *t, const struct lt_lock_info *info)
{
	if (info->name_len == 0 || info->name_len > LT_NAME_MAX)
		return -EINVAL;
	if (info->lkid && find_lock(t, info->node, info->lkid))
		return -EEXIST;
	maybe_rehash(t);
	struct lt_resource *r = find_resource(t, info->name, info->name_len, true);
	if (r && info->lkid == 0) {
		r->lvb_valid = info->lvb_valid;
		if (info->lvb)
			memcpy(r->lvb, info->lvb, LT_LVB_LEN);
		return 0;
	}
	struct lt_lock *l = r ? calloc(1, sizeof *l) : NULL;
	if (!l)
		return -ENOMEM;
	*l = (struct lt_lock){.node = info->node, .lkid = info->lkid, .granted = info->granted,
			      .requested = info->requested, .queue = info->queue,
			      .recovering = info->recovering, .bast_sent = info->bast_sent,
			      .res = r};
	r->lvb_valid = info->lvb_valid;
	if (info->lvb)
		memcpy(r->lvb, info->lvb, LT_LVB_LEN);
	size_t b = hash_lock(l->node, l->lkid) & (t->nbuckets - 1);
	l->hnext = t->lock_buckets[b];
	t->lock_buckets[b] = l;
	t->nlocks++;
	r->nrecovering += l->recovering;
	list_append(&r->queue[l->queue], l);
	return 0;
}
