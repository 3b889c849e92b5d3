/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The corosync backend's snapshots: the member that answers a new member's Hello sends the
 * tables, record locks and owned files; the new member takes them in, then replays what it
 * was delivered meanwhile (corosync.c, proto/cfslock.proto). */
#include "corosync_internal.h"

/* An array of n pointers with room for one more (doubled from first), or NULL. */
static void *room_for_one(void *v, size_t n, size_t *cap, size_t first)
{
	if (n < *cap)
		return v;
	size_t more = *cap ? *cap * 2 : first;
	void *grown = realloc(v, more * sizeof(void *));
	if (grown)
		*cap = more;
	return grown;
}

void cs_snap_add_plock(void *arg, const struct pl_lock *l, uint64_t reqid)
{
	struct snap_builder *b = arg;
	/* An owned file's locks are its owner's copy: a snapshot leaves them out (the owner
	 * sends them in a STATE when it gives the file up), a STATE has only its file's. */
	if (b->only_file ? l->file != b->only_file : po_find(b->owners, l->file) != NULL)
		return;
	SnapshotPlock **v = room_for_one(b->plocks, b->n_plocks, &b->plock_cap, 16);
	if (!v) {
		b->oom = true;
		return;
	}
	b->plocks = v;
	SnapshotPlock *p = malloc(sizeof *p);
	if (!p) {
		b->oom = true;
		return;
	}
	snapshot_plock__init(p);
	p->space = (char *)b->space;
	p->file = l->file;
	p->owner = l->node;
	p->lock_owner = l->owner;
	p->start = l->start;
	p->end = l->end;
	p->pid = l->pid;
	p->type = (uint32_t)l->type;
	p->has_waiting_reqid = reqid != 0;
	p->waiting_reqid = reqid;
	b->plocks[b->n_plocks++] = p;
}

static void snap_add_owned(void *arg, const struct po_file *f)
{
	struct snap_builder *b = arg;
	PlockOwner **v = room_for_one(b->owned, b->n_owned, &b->owned_cap, 16);
	if (!v) {
		b->oom = true;
		return;
	}
	b->owned = v;
	size_t n = 0;
	for (const struct po_call *c = f->held_back; c; c = c->next)
		n++;
	PlockOwner *o = malloc(sizeof *o + n * sizeof(ProtobufCBinaryData));
	if (!o) {
		b->oom = true;
		return;
	}
	plock_owner__init(o);
	o->space = (char *)b->space;
	o->file = f->file;
	o->owner = f->owner;
	o->frozen = f->frozen;
	o->n_held_back = n;
	o->held_back = (ProtobufCBinaryData *)(o + 1);
	n = 0;
	for (const struct po_call *c = f->held_back; c; c = c->next)
		o->held_back[n++] = (ProtobufCBinaryData){.len = c->len, .data = (uint8_t *)c->data};
	b->owned[b->n_owned++] = o;
}

void cs_free_builder_plocks(struct snap_builder *b)
{
	for (size_t i = 0; i < b->n_plocks; i++)
		free(b->plocks[i]);
	free(b->plocks);
	for (size_t i = 0; i < b->n_owned; i++)
		free(b->owned[i]);
	free(b->owned);
}

static void snap_add(void *arg, const struct lt_lock_info *i)
{
	struct snap_builder *b = arg;
	SnapshotLock **v = room_for_one(b->snap->locks, b->snap->n_locks, &b->cap, 64);
	if (!v) {
		b->oom = true;
		return;
	}
	b->snap->locks = v;
	SnapshotLock *l = malloc(sizeof *l + i->name_len + LT_LVB_LEN);
	if (!l) {
		b->oom = true;
		return;
	}
	snapshot_lock__init(l);
	uint8_t *extra = (uint8_t *)(l + 1);
	memcpy(extra, i->name, i->name_len);
	memcpy(extra + i->name_len, i->lvb, LT_LVB_LEN);
	l->space = (char *)b->space;
	l->resource = (ProtobufCBinaryData){.len = i->name_len, .data = extra};
	l->owner = i->node;
	l->lkid = i->lkid;
	l->granted = i->granted;
	l->requested = i->requested;
	l->queue = i->queue;
	l->recovering = i->recovering;
	l->bast_sent = i->bast_sent;
	l->lvb_valid = i->lvb_valid;
	l->has_lvb = true;
	l->lvb = (ProtobufCBinaryData){.len = LT_LVB_LEN, .data = extra + i->name_len};
	b->snap->locks[b->snap->n_locks++] = l;
}

void cs_answer_hello(struct cs *cs, const Hello *h)
{
	Snapshot snap = SNAPSHOT__INIT;
	snap.for_owner = h->owner;
	snap.for_seq = h->seq;
	struct snap_builder b = {.snap = &snap};
	for (struct replica *r = cs->replicas; r; r = r->next) {
		b.space = r->name;
		b.owners = r->owners;
		lt_walk(r->table, snap_add, &b);
		pl_walk(r->plocks, cs_snap_add_plock, &b);
		po_walk(r->owners, snap_add_owned, &b);
	}
	snap.n_plocks = b.n_plocks;
	snap.plocks = b.plocks;
	snap.n_plock_owners = b.n_owned;
	snap.plock_owners = b.owned;
	MemberOwner *mo = calloc(cs->nmembers + 1, sizeof *mo);
	MemberOwner **mv = calloc(cs->nmembers + 1, sizeof *mv);
	if (!mo || !mv || b.oom)
		abort();
	for (size_t i = 0; i < cs->nmembers; i++) {
		member_owner__init(&mo[i]);
		mo[i].nodeid = cs->members[i].nodeid;
		mo[i].pid = cs->members[i].pid;
		mo[i].owner = cs->members[i].owner;
		mo[i].synced = cs->members[i].synced;
		mo[i].has_hello_seq = true;
		mo[i].hello_seq = cs->members[i].hello_seq;
		mv[i] = &mo[i];
	}
	snap.n_members = cs->nmembers;
	snap.members = mv;
	snap.n_failed_owners = cs->nfailed;
	snap.failed_owners = cs->failed;
	struct lock_version own = lock_version_own();
	snap.has_proto_major = snap.has_proto_minor = true;
	snap.proto_major = own.major;
	snap.proto_minor = own.minor;
	snap.release = (char *)own.release;
	Envelope env = ENVELOPE__INIT;
	env.snapshot = &snap;
	cs_queue_out(cs, &env);
	for (size_t i = 0; i < snap.n_locks; i++)
		free(snap.locks[i]);
	free(snap.locks);
	cs_free_builder_plocks(&b);
	free(mo);
	free(mv);
}


/* In sync: our Hello's delivery proved we were a member when we sent it. */
void cs_lease_from_sync(struct cs *cs)
{
	cs->stretch_ns = cs->own_beat_ns = cfslock_boottime_ns();
	if (cs_ring_quorate(cs))
		cfslock_lease_renew(cs->c, cs->hello_ns + cs_lease_ns(cs));
}

/* A held range or waiter as a snapshot or a STATE carries it, into r's copy. */
void cs_restore_plock(struct replica *r, const SnapshotPlock *p)
{
	struct pl_lock l = {.file = p->file, .node = p->owner, .owner = p->lock_owner,
			    .start = p->start, .end = p->end, .pid = p->pid,
			    .type = (enum pl_type)p->type};
	if (pl_restore(r->plocks, &l, p->has_waiting_reqid ? p->waiting_reqid : 0))
		abort(); /* a copy that differs from the others' would answer differently */
}

/* Keep op back until f is released (the packed op, and what finds it again). */
void cs_hold_back(struct po_file *f, const PlockOp *op)
{
	size_t len = plock_op__get_packed_size(op);
	uint8_t *buf = malloc(len ? len : 1);
	if (!buf)
		abort(); /* a copy that differs from the others' would answer differently */
	plock_op__pack(op, buf);
	struct po_call call = {.sender = op->owner, .reqid = op->reqid, .lock_owner = op->lock_owner,
			       .kind = (int)op->kind,
			       .nowait = op->kind == PLOCK_OP__KIND__SET && !op->wait};
	if (po_hold_back(f, &call, buf, len))
		abort();
	free(buf);
}

static void restore_owned(struct cs *cs, const PlockOwner *o)
{
	struct replica *r = cs_replica(cs, o->space, true);
	struct po_file *f = r ? po_claim(r->owners, o->file, o->owner) : NULL;
	if (!f)
		abort();
	f->frozen = o->frozen;
	for (size_t i = 0; i < o->n_held_back; i++) {
		PlockOp *op = plock_op__unpack(NULL, o->held_back[i].len, o->held_back[i].data);
		if (!op)
			abort();
		cs_hold_back(f, op);
		plock_op__free_unpacked(op, NULL);
	}
}

void cs_take_snapshot(struct cs *cs, const Snapshot *s)
{
	cs_drop_replicas(cs);
	for (size_t i = 0; i < s->n_locks; i++) {
		const SnapshotLock *l = s->locks[i];
		struct replica *r = cs_replica(cs, l->space, true);
		struct lt_lock_info info = {
			.name = (const char *)l->resource.data, .name_len = l->resource.len,
			.node = l->owner, .lkid = l->lkid, .granted = l->granted,
			.requested = l->requested, .queue = (enum lt_queue)l->queue,
			.recovering = l->recovering, .bast_sent = l->bast_sent,
			.lvb_valid = l->lvb_valid,
			.lvb = l->has_lvb && l->lvb.len == LT_LVB_LEN ? l->lvb.data : NULL};
		if (r)
			lt_restore(r->table, &info);
	}
	for (size_t i = 0; i < s->n_plocks; i++) {
		struct replica *r = cs_replica(cs, s->plocks[i]->space, true);
		if (r)
			cs_restore_plock(r, s->plocks[i]);
	}
	for (size_t i = 0; i < s->n_plock_owners; i++)
		restore_owned(cs, s->plock_owners[i]);
	cs->nmembers = 0;
	for (size_t i = 0; i < s->n_members && i < MAX_MEMBERS; i++)
		cs->members[cs->nmembers++] = (struct member){
			.nodeid = s->members[i]->nodeid, .pid = s->members[i]->pid,
			.owner = s->members[i]->owner, .synced = s->members[i]->synced,
			.hello_seq = s->members[i]->hello_seq};
	cs->nfailed = 0;
	for (size_t i = 0; i < s->n_failed_owners && i < MAX_MEMBERS; i++)
		cs->failed[cs->nfailed++] = s->failed_owners[i];
	cs->synced = true;
	cs_lease_from_sync(cs);
	struct member *me = cs_member(cs, cs->nodeid, cs->pid);
	if (!me && cs->nmembers < MAX_MEMBERS)
		me = &cs->members[cs->nmembers++];
	if (me)
		*me = (struct member){.nodeid = cs->nodeid, .pid = cs->pid, .owner = cs->owner,
				       .synced = true, .hello_seq = cs->hello_seq};
	/* Then everything delivered after our Hello, in order. */
	struct message *m = cs->buffered;
	cs->buffered = cs->buffered_tail = NULL;
	while (m) {
		struct message *next = m->next;
		Envelope *e = m->len ? envelope__unpack(NULL, m->len, m->data) : NULL;
		if (e) {
			cs_apply(cs, m->nodeid, m->pid, e);
			envelope__free_unpacked(e, NULL);
		} else if (m->len == 0) {
			cs_member_joined(cs, m->nodeid, m->pid);
		}
		free(m);
		m = next;
	}
	pthread_cond_broadcast(&cs->changed);
}
