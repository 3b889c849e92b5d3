/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The corosync backend's fcntl record locks: lock and unlock requests in the ordered stream,
 * and files whose locks only one member uses, owned and decided there without messages
 * until another member wants them (plock.c, plock_own.c, docs/cfs-cluster.md). */
#include "corosync_internal.h"

/* Our request reqid is answered: its done runs at the next dispatch.  cs->lock held. */
void cs_plock_answered(struct cs *cs, uint64_t reqid, int status)
{
	for (struct plock_req **pp = &cs->plock_reqs; *pp; pp = &(*pp)->next)
		if ((*pp)->reqid == reqid) {
			struct plock_req *q = *pp;
			*pp = q->next;
			cfslock_deliver_plock(cs->c, q->done, q->arg, status);
			free(q);
			return;
		}
}

void cs_plock_emit(void *arg, const struct pl_event *ev)
{
	struct cs *cs = ((struct replica *)arg)->cs;
	if (ev->node == cs->owner && cs->synced)
		cs_plock_answered(cs, ev->reqid, ev->type == PL_EV_GRANTED ? 0 : ev->status);
}

static struct pl_lock pl_lock_of(const PlockOp *op)
{
	return (struct pl_lock){.file = op->file, .node = op->owner, .owner = op->lock_owner,
				.start = op->start, .end = op->end, .pid = op->pid,
				.type = (enum pl_type)op->type};
}


/* Nobody owns f any more: the calls it held back are applied, in order. */
static void release_owned(struct cs *cs, struct replica *r, struct po_file *f)
{
	struct po_call *c = po_release(r->owners, f, cs_now_ms());
	while (c) {
		struct po_call *next = c->next;
		PlockOp *op = plock_op__unpack(NULL, c->len, c->data);
		if (!op)
			abort();
		cs_apply_plock(cs, op, true);
		plock_op__free_unpacked(op, NULL);
		free(c);
		c = next;
	}
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

/* Files picked from an owners table by po_walk (the table may not change while walked). */
struct file_ids {
	uint64_t owner; /* whose files, or (collect_others) who is asking */
	uint64_t *files;
	size_t n, cap;
	bool oom;
};

static void add_file_id(struct file_ids *o, uint64_t file)
{
	if (o->oom)
		return;
	if (o->n == o->cap) {
		uint64_t *v = realloc(o->files, (o->cap ? o->cap * 2 : 16) * sizeof *v);
		if (!v) {
			o->oom = true;
			return;
		}
		o->files = v;
		o->cap = o->cap ? o->cap * 2 : 16;
	}
	o->files[o->n++] = file;
}

static void collect_owned_by(void *arg, const struct po_file *f)
{
	struct file_ids *o = arg;
	if (f->owner == o->owner)
		add_file_id(o, f->file);
}

/* owner's files: the same list on every member, or none at all. */
static struct file_ids owned_by(struct replica *r, uint64_t owner)
{
	struct file_ids o = {.owner = owner};
	po_walk(r->owners, collect_owned_by, &o);
	if (o.oom)
		abort(); /* a copy that differs from the others' would answer differently */
	return o;
}

/* A failed owner is recovered: its files' locks went with it, the calls held back go on
 * (in file order, the same everywhere). */
void cs_release_failed_owner(struct cs *cs, struct replica *r, uint64_t owner)
{
	struct file_ids o = owned_by(r, owner);
	if (o.n)
		qsort(o.files, o.n, sizeof *o.files, cmp_u64);
	for (size_t i = 0; i < o.n; i++)
		release_owned(cs, r, po_find(r->owners, o.files[i]));
	free(o.files);
}

/* The owner of a frozen file sends its copy of the file's locks. */
static void send_state(struct cs *cs, struct replica *r, uint64_t file)
{
	struct snap_builder b = {.space = r->name, .only_file = file};
	pl_walk(r->plocks, cs_snap_add_plock, &b);
	if (b.oom)
		abort(); /* the file would stay frozen */
	PlockOp op = PLOCK_OP__INIT;
	op.kind = PLOCK_OP__KIND__STATE;
	op.space = r->name;
	op.owner = cs->owner;
	op.has_file = true;
	op.file = file;
	op.n_state = b.n_plocks;
	op.state = b.plocks;
	Envelope env = ENVELOPE__INIT;
	env.plock = &op;
	cs_queue_out(cs, &env);
	cs_free_builder_plocks(&b);
}

static void take_state(struct cs *cs, struct replica *r, const PlockOp *op)
{
	struct po_file *f = po_find(r->owners, op->file);
	if (!f || f->owner != op->owner || !f->frozen)
		return;
	if (op->owner != cs->owner) /* the owner's copy has them already */
		for (size_t i = 0; i < op->n_state; i++)
			cs_restore_plock(r, op->state[i]);
	release_owned(cs, r, f);
}

/* A call on an owned file: true if dealt with here (held back, or the owner's alone). */
static bool owned_call(struct cs *cs, struct replica *r, struct po_file *f, const PlockOp *op)
{
	if (op->owner == f->owner && !f->frozen) /* sent before its claim came back */
		return op->owner != cs->owner;   /* only the owner's copy takes it */
	if (op->kind == PLOCK_OP__KIND__CANCEL) {
		struct po_call *c = po_take(f, op->owner, op->reqid, PLOCK_OP__KIND__SET);
		if (c) {
			free(c);
			cs_answer_sender(cs, op->owner, op->reqid, -ECANCELED);
			return true;
		}
	}
	if (op->kind == PLOCK_OP__KIND__SET && !op->wait && cs_owner_failed(cs, f->owner)) {
		/* A dead owner's locks stay until its recovery, and nobody knows their ranges. */
		cs_answer_sender(cs, op->owner, op->reqid, -EAGAIN);
		return true;
	}
	cs_hold_back(f, op);
	if (!f->frozen) {
		f->frozen = true;
		if (f->owner == cs->owner)
			send_state(cs, r, f->file);
	}
	return true;
}

/* A SET that claims its file: the sender owns it from now on if nobody holds or waits for
 * anything on it.  True if the call is then the new owner's alone. */
static bool claimed(struct cs *cs, struct replica *r, const PlockOp *op)
{
	if (!op->claim || pl_file_busy(r->plocks, op->file) || po_count(r->owners) >= PO_MAX_FILES)
		return false;
	if (!po_claim(r->owners, op->file, op->owner))
		abort(); /* a copy that differs from the others' would answer differently */
	return op->owner != cs->owner;
}

static bool not_owned(void *owners, uint64_t file) { return !po_find(owners, file); }

void cs_apply_plock(struct cs *cs, const PlockOp *op, bool replayed)
{
	if (!cs_owner_live(cs, op->owner))
		return; /* from an owner that failed meanwhile */
	struct replica *r = cs_replica(cs, op->space, true);
	if (!r)
		return;
	if (op->kind == PLOCK_OP__KIND__STATE) {
		take_state(cs, r, op);
		return;
	}
	struct po_file *f = op->has_file ? po_find(r->owners, op->file) : NULL;
	if (f ? owned_call(cs, r, f, op)
	      : op->kind == PLOCK_OP__KIND__SET && !replayed && claimed(cs, r, op))
		return;
	struct pl_lock l = pl_lock_of(op);
	int rc = 0;
	switch (op->kind) {
	case PLOCK_OP__KIND__SET: {
		/* Owned files' locks are in their owner's copy only: a deadlock check of the
		 * ordered stream leaves them out, so that every copy answers alike. */
		struct pl_scope common = {.sees = not_owned, .arg = r->owners};
		rc = pl_set(r->plocks, op->reqid, &l, op->wait, &common);
		break;
	}
	case PLOCK_OP__KIND__CANCEL: (void)pl_cancel(r->plocks, op->owner, op->reqid); break;
	case PLOCK_OP__KIND__CLOSE:
		pl_drop(r->plocks, op->owner, op->lock_owner, op->file, true);
		cs_answer_sender(cs, op->owner, op->reqid, 0);
		break;
	case PLOCK_OP__KIND__WANT: cs_answer_sender(cs, op->owner, op->reqid, 0); break;
	default: break;
	}
	if (rc) /* refused: it still ends */
		cs_answer_sender(cs, op->owner, op->reqid, rc);
}

/* The owner of files died: their locks stay until its recovery, and nobody knows their
 * ranges, so the F_SETLKs held back on them fail now (as later ones do at once). */
void cs_fail_nowait_on_owned(struct cs *cs, struct replica *r, uint64_t owner)
{
	struct file_ids o = owned_by(r, owner);
	for (size_t i = 0; i < o.n; i++) {
		struct po_file *f = po_find(r->owners, o.files[i]);
		for (struct po_call *c; (c = po_take_nowait(f)); free(c))
			cs_answer_sender(cs, c->sender, c->reqid, -EAGAIN);
	}
	free(o.files);
}

/* A failed owner with no lock left in any table: no recovery will look for it (recoveries
 * find the dead by their recovering locks), so whatever else it had goes now: its record
 * locks and the files it owned, whose held-back calls go on. */
bool cs_forgotten_failed_owner(struct cs *cs, uint64_t owner)
{
	for (struct replica *r = cs->replicas; r; r = r->next)
		if (lt_node_holds(r->table, owner))
			return false;
	for (struct replica *r = cs->replicas; r; r = r->next) {
		pl_drop(r->plocks, owner, 0, 0, true);
		cs_release_failed_owner(cs, r, owner);
	}
	for (size_t i = 0; i < cs->nfailed; i++)
		if (cs->failed[i] == owner)
			cs->failed[i--] = cs->failed[--cs->nfailed];
	return true;
}

/* ---- POSIX record locks ---- */
static int multicast_plock(struct cs *cs, PlockOp *op)
{
	pthread_mutex_lock(&cs->lock);
	op->owner = cs->owner;
	pthread_mutex_unlock(&cs->lock);
	Envelope env = ENVELOPE__INIT;
	env.plock = op;
	return cs_multicast(cs, &env);
}

/* A call of ours that waits for its answer.  cs->lock held. */
static struct plock_req *add_req(struct cs *cs, uint64_t reqid, uint64_t file,
				 cfslock_plock_done_fn done, void *arg)
{
	struct plock_req *q = malloc(sizeof *q);
	if (q) {
		*q = (struct plock_req){.reqid = reqid, .file = file, .done = done, .arg = arg,
					.next = cs->plock_reqs};
		cs->plock_reqs = q;
	}
	return q;
}

/* Send op, whose answer (a grant or a failure in the ordered stream) goes to done. */
static int send_plock(struct cs *cs, PlockOp *op, cfslock_plock_done_fn done, void *arg)
{
	pthread_mutex_lock(&cs->lock);
	int rc = cs->connected && cs->synced ? 0 : -CFSLOCK_ENOQUORUM;
	struct plock_req *q = rc ? NULL : add_req(cs, op->reqid, op->file, done, arg);
	pthread_mutex_unlock(&cs->lock);
	if (rc || !q)
		return rc ? rc : -ENOMEM;
	if ((rc = multicast_plock(cs, op))) { /* never sent, so never answered: still listed */
		pthread_mutex_lock(&cs->lock);
		struct plock_req **pp = &cs->plock_reqs;
		while (*pp && *pp != q)
			pp = &(*pp)->next;
		if (*pp)
			*pp = q->next;
		pthread_mutex_unlock(&cs->lock);
		free(q);
	}
	// cppcheck-suppress memleak ; q is on cs->plock_reqs until its answer frees it
	return rc;
}

static enum pl_type pl_type_of(int fcntl_type)
{
	return fcntl_type == F_RDLCK ? PL_RD : fcntl_type == F_WRLCK ? PL_WR : PL_UN;
}

/* A lock of this member's in the table's terms.  cs->lock held. */
static struct pl_lock our_pl_lock(const struct cs *cs, const struct cfslock_plock *l)
{
	return (struct pl_lock){.file = l->file, .node = cs->owner, .owner = l->owner,
				.start = l->start, .end = l->end, .pid = l->pid,
				.type = pl_type_of(l->type)};
}

/* The replica if this member owns file and may answer calls on it from its own copy, or
 * NULL.  cs->lock held. */
static struct replica *owning(struct cs *cs, const char *space, uint64_t file)
{
	struct replica *r = cs_replica(cs, space, false);
	const struct po_file *f = r ? po_find(r->owners, file) : NULL;
	bool mine = f && f->owner == cs->owner && !f->frozen;
	return mine && cs->connected && cs->synced && cs->quorate ? r : NULL;
}

/* Should our next call on file claim it?  When nobody owns it and nobody holds anything on
 * it, unless it was given up a moment ago: members that take turns on a file would pass it
 * back and forth, two messages each time instead of one.  cs->lock held. */
#define CLAIM_AGAIN_AFTER_MS 1000
static bool worth_claiming(struct cs *cs, const char *space, uint64_t file)
{
	const struct replica *r = cs_replica(cs, space, false);
	return !r || (!po_find(r->owners, file) && !pl_file_busy(r->plocks, file) &&
		      !po_recent(r->owners, file, cs_now_ms(), CLAIM_AGAIN_AFTER_MS));
}

int cs_plock(struct cfslock_space *s, const struct cfslock_plock *l, bool wait,
	     cfslock_plock_done_fn done, void *arg, uint64_t reqid)
{
	struct cs *cs = s->c->backend;
	pthread_mutex_lock(&cs->lock);
	struct replica *r = owning(cs, s->name, l->file);
	if (r) { /* ours: no message */
		struct pl_lock pl = our_pl_lock(cs, l);
		bool listed = add_req(cs, reqid, l->file, done, arg) != NULL;
		int rc = listed ? pl_set(r->plocks, reqid, &pl, wait, NULL) : 0;
		if (rc)
			cs_plock_answered(cs, reqid, rc); /* refused: it still ends */
		pthread_mutex_unlock(&cs->lock);
		return listed ? 0 : -ENOMEM;
	}
	bool claim = worth_claiming(cs, s->name, l->file);
	pthread_mutex_unlock(&cs->lock);
	PlockOp op = PLOCK_OP__INIT;
	op.kind = PLOCK_OP__KIND__SET;
	op.space = s->name;
	op.reqid = reqid;
	op.has_file = op.has_lock_owner = op.has_start = op.has_end = op.has_pid = true;
	op.has_type = op.has_wait = op.has_claim = true;
	op.file = l->file;
	op.lock_owner = l->owner;
	op.start = l->start;
	op.end = l->end;
	op.pid = l->pid;
	op.type = (uint32_t)pl_type_of(l->type);
	op.wait = wait;
	op.claim = claim;
	return send_plock(cs, &op, done, arg);
}

static void plock_ignored(void *arg, int status) { (void)arg, (void)status; }

int cs_plock_cancel(struct cfslock_space *s, uint64_t reqid)
{
	struct cs *cs = s->c->backend;
	pthread_mutex_lock(&cs->lock);
	const struct plock_req *q = cs->plock_reqs;
	while (q && q->reqid != reqid)
		q = q->next;
	uint64_t file = q ? q->file : 0;
	struct replica *r = q ? owning(cs, s->name, file) : NULL;
	if (r)
		(void)pl_cancel(r->plocks, cs->owner, reqid);
	pthread_mutex_unlock(&cs->lock);
	if (!q || r)
		return 0; /* answered already, or here */
	PlockOp op = PLOCK_OP__INIT;
	op.kind = PLOCK_OP__KIND__CANCEL;
	op.space = s->name;
	op.reqid = reqid; /* the waiting request's: its answer is the cancel's */
	op.has_file = true;
	op.file = file;
	return multicast_plock(cs, &op);
}

/* ---- files another member owns: WANT them into every copy, and wait ---- */
struct want_wait {
	pthread_mutex_t m;
	pthread_cond_t c;
	size_t left;
	int status;
};

static void wanted(void *arg, int status)
{
	struct want_wait *w = arg;
	pthread_mutex_lock(&w->m);
	if (status && !w->status)
		w->status = status;
	w->left--;
	pthread_cond_broadcast(&w->c);
	pthread_mutex_unlock(&w->m);
}

/* Until our copy has these files' locks (their owners sent them, or were recovered). */
static int want_files(struct cs *cs, const char *space, const uint64_t *files, size_t n)
{
	struct want_wait w = {.m = PTHREAD_MUTEX_INITIALIZER, .c = PTHREAD_COND_INITIALIZER};
	int rc = 0;
	for (size_t i = 0; i < n && !rc; i++) {
		PlockOp op = PLOCK_OP__INIT;
		op.kind = PLOCK_OP__KIND__WANT;
		op.space = (char *)space;
		pthread_mutex_lock(&cs->lock);
		op.reqid = 1ull << 63 | ++cs->want_seq; /* apart from the client's reqids */
		pthread_mutex_unlock(&cs->lock);
		op.has_file = true;
		op.file = files[i];
		pthread_mutex_lock(&w.m);
		w.left++;
		pthread_mutex_unlock(&w.m);
		if ((rc = send_plock(cs, &op, wanted, &w))) {
			pthread_mutex_lock(&w.m);
			w.left--;
			pthread_mutex_unlock(&w.m);
		}
	}
	pthread_mutex_lock(&w.m);
	while (w.left)
		pthread_cond_wait(&w.c, &w.m);
	pthread_mutex_unlock(&w.m);
	return rc ? rc : w.status;
}

/* Files whose locks our copy does not have: another's, or ours on their way out. */
static void collect_others(void *arg, const struct po_file *f)
{
	struct file_ids *o = arg;
	if (f->owner != o->owner || f->frozen)
		add_file_id(o, f->file);
}

/* Bring the locks of file (every file if 0) that another member owns into our copy. */
static int want_others_files(struct cs *cs, const char *space, uint64_t file)
{
	struct file_ids o = {0};
	pthread_mutex_lock(&cs->lock);
	o.owner = cs->owner;
	struct replica *r = cs_replica(cs, space, false);
	const struct po_file *f = r && file ? po_find(r->owners, file) : NULL;
	if (f)
		collect_others(&o, f);
	else if (r && !file)
		po_walk(r->owners, collect_others, &o);
	pthread_mutex_unlock(&cs->lock);
	int rc = o.oom ? -ENOMEM : o.n ? want_files(cs, space, o.files, o.n) : 0;
	free(o.files);
	return rc;
}

int cs_plock_get(struct cfslock_space *s, const struct cfslock_plock *l,
		 struct cfslock_plock *holder, uint32_t *holder_node)
{
	struct cs *cs = s->c->backend;
	int rc = want_others_files(cs, s->name, l->file);
	if (rc)
		return rc;
	pthread_mutex_lock(&cs->lock);
	struct replica *r = cs_replica(cs, s->name, false);
	struct pl_lock probe = our_pl_lock(cs, l), h;
	bool found = r && pl_get(r->plocks, &probe, &h);
	pthread_mutex_unlock(&cs->lock);
	if (found) {
		*holder = (struct cfslock_plock){.file = h.file, .owner = h.owner, .start = h.start,
						 .end = h.end, .pid = h.pid,
						 .type = h.type == PL_RD ? F_RDLCK : F_WRLCK};
		*holder_node = (uint32_t)(h.node >> 32);
	}
	return found;
}

struct plock_dump {
	cfslock_plock_dump_fn fn;
	void *arg;
};

static void plock_dump_one(void *arg, const struct pl_lock *l, uint64_t reqid)
{
	const struct plock_dump *d = arg;
	struct cfslock_plock p = {.file = l->file, .owner = l->owner, .start = l->start,
				  .end = l->end, .pid = l->pid,
				  .type = l->type == PL_RD ? F_RDLCK : F_WRLCK};
	d->fn(d->arg, &p, (uint32_t)(l->node >> 32), reqid != 0);
}

int cs_plock_dump(struct cfslock_space *s, cfslock_plock_dump_fn fn, void *arg)
{
	struct cs *cs = s->c->backend;
	int rc = want_others_files(cs, s->name, 0);
	if (rc)
		return rc;
	struct plock_dump d = {fn, arg};
	pthread_mutex_lock(&cs->lock);
	struct replica *r = cs_replica(cs, s->name, false);
	if (r)
		pl_walk(r->plocks, plock_dump_one, &d);
	pthread_mutex_unlock(&cs->lock);
	return 0;
}

int cs_plock_close(struct cfslock_space *s, uint64_t file, uint64_t owner,
		   cfslock_plock_done_fn done, void *arg, uint64_t reqid)
{
	struct cs *cs = s->c->backend;
	pthread_mutex_lock(&cs->lock);
	struct replica *r = owning(cs, s->name, file);
	if (r) { /* ours: no message */
		pl_drop(r->plocks, cs->owner, owner, file, true);
		pthread_mutex_unlock(&cs->lock);
		return 1;
	}
	r = cs_replica(cs, s->name, false);
	const struct po_file *f = r ? po_find(r->owners, file) : NULL;
	bool owns = r && (pl_owns(r->plocks, cs->owner, owner, file) ||
			  (f && po_holds_back(f, cs->owner, owner)));
	pthread_mutex_unlock(&cs->lock);
	if (!owns)
		return 1; /* nothing of its here: no message on every close */
	PlockOp op = PLOCK_OP__INIT;
	op.kind = PLOCK_OP__KIND__CLOSE;
	op.space = s->name;
	op.reqid = reqid;
	op.has_file = op.has_lock_owner = true;
	op.file = file;
	op.lock_owner = owner;
	return send_plock(cs, &op, done ? done : plock_ignored, arg);
}
