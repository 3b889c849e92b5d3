/* The "corosync" backend: every process that uses it is a member of the CPG group "cfslock"
 * and keeps a replica of every lockspace's table.  Requests are multicast in agreed (total)
 * order and every member applies the same stream, so grants are deterministic and need no
 * master.  A new member gets the state from a snapshot (see proto/cfslock.proto); a member that
 * leaves has its locks marked recovering until cfslock_recovery_done.  Quorum comes from the
 * quorum API: without it calls fail with CFSLOCK_ENOQUORUM, and a member that regains it
 * rejoins as a new owner, since its table is stale by then.
 *
 * A backend thread polls the CPG and quorum descriptors; callbacks reach the client through
 * its event queue like every other backend's. */
#include "client.h"
#include "plock.h"
#include "plock_own.h"
#include "proto/cfslock.pb-c.h"
#include "version.h"

#include <corosync/cpg.h>
#include <corosync/quorum.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <syslog.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

#define GROUP "cfslock"
#define MAX_MEMBERS 1024
#define LKMAP_BUCKETS 4096
#define SYNC_TIMEOUT_S 20

struct member {
	uint32_t nodeid, pid;
	uint64_t owner;
	bool synced;
	uint32_t hello_seq; /* its latest Hello; only the snapshot answering it syncs it */
	uint64_t last_beat_ns;  /* CLOCK_BOOTTIME when its latest beat came (0: none seen) */
	uint64_t evict_sent_ns; /* when we last asked for it to be evicted */
	bool refused; /* of another major version: nothing it sends is applied */
	uint32_t minor; /* of its lock protocol, as its Hello said */
};

struct replica {
	char name[CFSLOCK_NAME_MAX + 1];
	struct lt_table *table;
	struct pl_table *plocks;
	struct po_table *owners; /* files whose record locks a member owns */
	struct cs *cs;
	struct replica *next;
};

struct lkmap_entry {
	uint64_t lkid;
	struct cfslock *lk;
	struct lkmap_entry *next;
};

/* A record lock request of ours, until its answer comes in the ordered stream. */
struct plock_req {
	uint64_t reqid, file;
	cfslock_plock_done_fn done;
	void *arg;
	struct plock_req *next;
};

/* A message, or (len 0) a member that joined: both are kept in order while we wait for our
 * snapshot, and replayed after it. */
struct message {
	struct message *next;
	uint32_t nodeid, pid;
	size_t len;
	uint8_t data[];
};

/* Members whose node went (CPG_REASON_NODEDOWN) since the last stateful merge, and the
 * nodes we had before the first of them went and have kept since (see stateful_merge). */
struct split {
	bool open;
	uint32_t prev[MAX_MEMBERS], kept[MAX_MEMBERS];
	size_t nprev, nkept;
	struct gone {
		uint32_t nodeid, pid;
		uint64_t owner;
		bool back; /* joined again, stale */
	} gone[MAX_MEMBERS];
	size_t ngone;
};

struct cs {
	struct cfslock_client *c;
	cpg_handle_t cpg;
	quorum_handle_t quorum;
	pthread_t thread;
	int wake[2];
	pthread_mutex_t lock;
	pthread_mutex_t send_lock; /* one cpg_mcast_joined at a time (see mcast) */
	pthread_cond_t changed;
	bool stop, connected, quorate, lost_quorum, synced, hello_seen;
	bool refused; /* our Hello was refused: the cluster speaks another major version */
	char refusal[400];
	uint32_t nodeid, pid, hello_seq;
	uint64_t owner, want_seq;
	bool evicted;           /* removed while we stalled: we rejoin as a new owner */
	uint64_t beat_sent_ns;  /* our last beat (CLOCK_BOOTTIME) */
	uint64_t own_beat_ns;   /* our latest beat came back then */
	uint64_t stretch_ns;    /* our beats have come back without a gap since, in one ring */
	uint64_t ring_start_ns; /* the latest membership change */
	uint32_t beat_ms, token_ms;
	uint64_t hello_ns; /* when our latest Hello was queued */
	uint64_t unconfirmed_ns; /* our latest beat delivered, no other node's message since */
	uint64_t alive_ns; /* a thread of ours last ran then (atomic; see tick) */
	bool stalled;      /* this process stood still a token timeout since its lease renewed */
	bool ticking;      /* the ticker runs (atomic) */
	bool quorum_asked; /* corosync said quorate since the latest membership change */
	struct split split;
	struct member members[MAX_MEMBERS];
	size_t nmembers;
	uint64_t failed[MAX_MEMBERS];
	size_t nfailed;
	struct replica *replicas;
	struct lkmap_entry *lkmap[LKMAP_BUCKETS];
	struct plock_req *plock_reqs;
	struct message *buffered, *buffered_tail; /* delivered after our Hello, before sync */
	struct message *outbox, *outbox_tail;     /* to multicast from the thread */
};

static void log_msg(struct cs *cs, int prio, const char *fmt, const char *arg)
{
	char what[224], line[256];
	snprintf(what, sizeof what, fmt, arg);
	snprintf(line, sizeof line, "node %u: %s", cs->nodeid, what);
	if (cs->c->events.log)
		cs->c->events.log(cs->c->events.arg, prio, line);
	else
		syslog(prio, "cfslock %s", line);
}

static uint64_t lease_ns(const struct cs *cs) { return (uint64_t)cs->c->lease_ms * 1000000ull; }

/* A thread of ours runs: if none did for a token timeout, the whole process stood still (a
 * pause, SIGSTOP), which decides a stateful merge against us (stateful_merge). */
static void tick(struct cs *cs)
{
	uint64_t now = cfslock_boottime_ns();
	/* Two threads tick (the ticker, and the thread it wakes at once to send a beat): the
	 * time only moves on.  A plain exchange let the thread whose clock reading was the older
	 * one store it over the newer, and the next difference wrapped round to a "stood still"
	 * (survivors were evicted when a node died). */
	uint64_t before = __atomic_load_n(&cs->alive_ns, __ATOMIC_ACQUIRE);
	while (now > before && !__atomic_compare_exchange_n(&cs->alive_ns, &before, now, false,
							    __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		;
	if (before && now > before && now - before >= (uint64_t)cs->token_ms * 1000000ull)
		__atomic_store_n(&cs->stalled, true, __ATOMIC_RELEASE);
}

/* Ticks every 50 ms and, when a beat may be due, wakes the thread that sends it: a gap in
 * the ticks means the process stood still, not that one thread was busy (answering a Hello
 * with a large snapshot, say).  It never calls corosync: cpg_mcast_joined waits for
 * corosync's answer, which a corosync busy re-forming the ring after a death gives late, and
 * a ticker waiting there (with the sending thread waiting for it) would make the process look
 * stood still just when that death is delivered.  It runs at the lowest real-time priority where it
 * may (cfsd runs as root): corosync itself runs real-time, and on a machine whose cores its
 * busy instances kept to themselves, a cfsd's ordinary threads went 5 s without a beat and
 * the others evicted it. */
static void *ticker(void *arg)
{
	struct cs *cs = arg;
	const struct timespec period = {.tv_nsec = 50000000};
	struct sched_param rt = {.sched_priority = sched_get_priority_min(SCHED_RR)};
	(void)pthread_setschedparam(pthread_self(), SCHED_RR, &rt); /* else as it was */
	while (__atomic_load_n(&cs->ticking, __ATOMIC_ACQUIRE)) {
		tick(cs);
		uint64_t last = __atomic_load_n(&cs->beat_sent_ns, __ATOMIC_RELAXED);
		if (cfslock_boottime_ns() - last >= (uint64_t)cs->beat_ms * 1000000ull &&
		    write(cs->wake[1], "b", 1) < 0) {
			/* full: the thread has wakeups enough */
		}
		nanosleep(&period, NULL);
	}
	return NULL;
}

/* ---- sending: agreed order, flow control retried, never dropped ---- */
static int mcast(struct cs *cs, void *data, size_t len)
{
	struct iovec iov = {.iov_base = data, .iov_len = len};
	cs_error_t err;
	/* Serialized: two threads multicasting at once on one cpg handle lost a message (a
	 * flock's unlock and an open lock's, sent together: the second never came back). */
	pthread_mutex_lock(&cs->send_lock);
	while ((err = cpg_mcast_joined(cs->cpg, CPG_TYPE_AGREED, &iov, 1)) == CS_ERR_TRY_AGAIN &&
	       cs->connected)
		usleep(1000);
	pthread_mutex_unlock(&cs->send_lock);
	return err == CS_OK ? 0 : -ENOTCONN;
}

static int multicast(struct cs *cs, const Envelope *env)
{
	size_t len = envelope__get_packed_size(env);
	uint8_t *buf = malloc(len ? len : 1);
	if (!buf)
		return -ENOMEM;
	envelope__pack(env, buf);
	int rc = mcast(cs, buf, len);
	free(buf);
	/* Lock traffic, what caching saves: beats and evictions are not. */
	if (!rc && !env->beat && !env->evict)
		__atomic_add_fetch(&cs->c->messages_sent, 1, __ATOMIC_RELAXED);
	return rc;
}

/* From inside a CPG callback: queue it for the thread, which sends after dispatch returns. */
static void queue_out(struct cs *cs, const Envelope *env)
{
	size_t len = envelope__get_packed_size(env);
	struct message *m = malloc(sizeof *m + len);
	if (!m)
		abort(); /* a lost snapshot or hello would leave a member waiting forever */
	m->next = NULL;
	m->len = len;
	envelope__pack(env, m->data);
	if (cs->outbox_tail)
		cs->outbox_tail->next = m;
	else
		cs->outbox = m;
	cs->outbox_tail = m;
}

static void send_outbox(struct cs *cs)
{
	pthread_mutex_lock(&cs->lock);
	struct message *m = cs->outbox;
	cs->outbox = cs->outbox_tail = NULL;
	pthread_mutex_unlock(&cs->lock);
	while (m) {
		struct message *next = m->next;
		if (!mcast(cs, m->data, m->len))
			__atomic_add_fetch(&cs->c->messages_sent, 1, __ATOMIC_RELAXED);
		free(m);
		m = next;
	}
}

static void queue_hello(struct cs *cs)
{
	Envelope env = ENVELOPE__INIT;
	Hello h = HELLO__INIT;
	h.owner = cs->owner;
	h.pid = cs->pid;
	h.needs_sync = !cs->synced;
	h.seq = ++cs->hello_seq;
	struct lock_version own = lock_version_own();
	h.has_proto_major = h.has_proto_minor = true;
	h.proto_major = own.major;
	h.proto_minor = own.minor;
	h.release = (char *)own.release;
	env.hello = &h;
	cs->hello_ns = cfslock_boottime_ns();
	cs->hello_seen = false;
	queue_out(cs, &env);
}

/* ---- local lock handles by lock id ---- */
static struct lkmap_entry **lkmap_slot(struct cs *cs, uint64_t lkid)
{
	struct lkmap_entry **pp = &cs->lkmap[lkid % LKMAP_BUCKETS];
	while (*pp && (*pp)->lkid != lkid)
		pp = &(*pp)->next;
	return pp;
}

static int lkmap_add(struct cs *cs, struct cfslock *lk)
{
	struct lkmap_entry **pp = lkmap_slot(cs, lk->lkid);
	if (*pp)
		return 0;
	struct lkmap_entry *e = malloc(sizeof *e);
	if (!e)
		return -ENOMEM;
	*e = (struct lkmap_entry){.lkid = lk->lkid, .lk = lk};
	*pp = e;
	return 0;
}

/* Every local lock ends with `status` (quorum lost, corosync gone): the table that knew them
 * is no longer ours. */
static void fail_all_local(struct cs *cs, int status)
{
	for (size_t b = 0; b < LKMAP_BUCKETS; b++)
		for (struct lkmap_entry *e = cs->lkmap[b], *n; e; e = n) {
			n = e->next;
			struct lt_event ev = {.type = LT_EV_FAILED, .lkid = e->lkid, .mode = -1,
					      .status = status};
			if (e->lk->pending || e->lk->granted >= 0)
				cfslock_deliver(cs->c, e->lk, &ev);
			free(e);
		}
	memset(cs->lkmap, 0, sizeof cs->lkmap);
	for (struct plock_req *q = cs->plock_reqs, *n; q; q = n) {
		n = q->next;
		cfslock_deliver_plock(cs->c, q->done, q->arg, status);
		free(q);
	}
	cs->plock_reqs = NULL;
}

/* Our request reqid is answered: its done runs at the next dispatch.  cs->lock held. */
static void plock_answered(struct cs *cs, uint64_t reqid, int status)
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

static void plock_emit(void *arg, const struct pl_event *ev)
{
	struct cs *cs = ((struct replica *)arg)->cs;
	if (ev->node == cs->owner && cs->synced)
		plock_answered(cs, ev->reqid, ev->type == PL_EV_GRANTED ? 0 : ev->status);
}

/* ---- replicas ---- */
static void emit(void *arg, const struct lt_event *ev)
{
	struct replica *r = arg;
	struct cs *cs = r->cs;
	if (ev->node != cs->owner || !cs->synced)
		return;
	struct lkmap_entry *e = *lkmap_slot(cs, ev->lkid);
	if (!e)
		return;
	/* Quorum is checked before every grant reaches the caller. */
	if (ev->type == LT_EV_GRANTED && !cs->quorate) {
		struct lt_event fail = *ev;
		fail.type = LT_EV_FAILED;
		fail.status = -CFSLOCK_ENOQUORUM;
		fail.mode = -1;
		cfslock_deliver(cs->c, e->lk, &fail);
		return;
	}
	cfslock_deliver(cs->c, e->lk, ev);
}

static struct replica *replica(struct cs *cs, const char *name, bool create)
{
	struct replica *r = cs->replicas;
	while (r && strcmp(r->name, name) != 0)
		r = r->next;
	if (r || !create || strlen(name) > CFSLOCK_NAME_MAX)
		return r;
	r = calloc(1, sizeof *r);
	if (!r || !(r->table = lt_create(emit, r)) || !(r->plocks = pl_create(plock_emit, r)) ||
	    !(r->owners = po_create())) {
		if (r) {
			lt_destroy(r->table);
			pl_destroy(r->plocks);
		}
		free(r);
		return NULL;
	}
	snprintf(r->name, sizeof r->name, "%s", name);
	r->cs = cs;
	r->next = cs->replicas;
	cs->replicas = r;
	return r;
}

static void drop_replicas(struct cs *cs)
{
	for (struct replica *r = cs->replicas, *n; r; r = n) {
		n = r->next;
		lt_destroy(r->table);
		pl_destroy(r->plocks);
		po_destroy(r->owners);
		free(r);
	}
	cs->replicas = NULL;
}

/* ---- members ---- */
static struct member *member(struct cs *cs, uint32_t nodeid, uint32_t pid)
{
	for (size_t i = 0; i < cs->nmembers; i++)
		if (cs->members[i].nodeid == nodeid && cs->members[i].pid == pid)
			return &cs->members[i];
	return NULL;
}

static bool owner_failed(const struct cs *cs, uint64_t owner)
{
	for (size_t i = 0; i < cs->nfailed; i++)
		if (cs->failed[i] == owner)
			return true;
	return false;
}

static bool owner_live(const struct cs *cs, uint64_t owner)
{
	for (size_t i = 0; i < cs->nmembers; i++)
		if (cs->members[i].owner == owner)
			return true;
	return false;
}

static unsigned members_on_node(const struct cs *cs, uint32_t nodeid)
{
	unsigned n = 0;
	for (size_t i = 0; i < cs->nmembers; i++)
		n += cs->members[i].nodeid == nodeid;
	return n;
}

/* The synced member that answers a Hello: the lowest owner id, the same choice everywhere. */
static bool i_answer(const struct cs *cs)
{
	uint64_t lowest = UINT64_MAX;
	for (size_t i = 0; i < cs->nmembers; i++)
		if (cs->members[i].synced && cs->members[i].owner < lowest)
			lowest = cs->members[i].owner;
	return lowest == cs->owner;
}

/* ---- snapshots ---- */
struct snap_builder {
	Snapshot *snap;
	const char *space;
	const struct po_table *owners; /* of the replica walked */
	uint64_t only_file;            /* a STATE's file, or 0 for a snapshot */
	SnapshotPlock **plocks;
	PlockOwner **owned;
	size_t cap, n_plocks, plock_cap, n_owned, owned_cap;
	bool oom;
};

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

static void snap_add_plock(void *arg, const struct pl_lock *l, uint64_t reqid)
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

static void free_builder_plocks(struct snap_builder *b)
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

static void answer_hello(struct cs *cs, const Hello *h)
{
	Snapshot snap = SNAPSHOT__INIT;
	snap.for_owner = h->owner;
	snap.for_seq = h->seq;
	struct snap_builder b = {.snap = &snap};
	for (struct replica *r = cs->replicas; r; r = r->next) {
		b.space = r->name;
		b.owners = r->owners;
		lt_walk(r->table, snap_add, &b);
		pl_walk(r->plocks, snap_add_plock, &b);
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
	queue_out(cs, &env);
	for (size_t i = 0; i < snap.n_locks; i++)
		free(snap.locks[i]);
	free(snap.locks);
	free_builder_plocks(&b);
	free(mo);
	free(mv);
}

static void apply(struct cs *cs, uint32_t nodeid, uint32_t pid, const Envelope *env);
static void member_joined(struct cs *cs, uint32_t nodeid, uint32_t pid);
static void member_left(struct cs *cs, uint32_t nodeid, uint32_t pid);

/* In sync: our Hello's delivery proved we were a member when we sent it. */
static bool ring_quorate(struct cs *cs);
static void lease_from_sync(struct cs *cs)
{
	cs->stretch_ns = cs->own_beat_ns = cfslock_boottime_ns();
	if (ring_quorate(cs))
		cfslock_lease_renew(cs->c, cs->hello_ns + lease_ns(cs));
}

/* A held range or waiter as a snapshot or a STATE carries it, into r's copy. */
static void restore_plock(struct replica *r, const SnapshotPlock *p)
{
	struct pl_lock l = {.file = p->file, .node = p->owner, .owner = p->lock_owner,
			    .start = p->start, .end = p->end, .pid = p->pid,
			    .type = (enum pl_type)p->type};
	if (pl_restore(r->plocks, &l, p->has_waiting_reqid ? p->waiting_reqid : 0))
		abort(); /* a copy that differs from the others' would answer differently */
}

/* Keep op back until f is released (the packed op, and what finds it again). */
static void hold_back(struct po_file *f, const PlockOp *op)
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
	struct replica *r = replica(cs, o->space, true);
	struct po_file *f = r ? po_claim(r->owners, o->file, o->owner) : NULL;
	if (!f)
		abort();
	f->frozen = o->frozen;
	for (size_t i = 0; i < o->n_held_back; i++) {
		PlockOp *op = plock_op__unpack(NULL, o->held_back[i].len, o->held_back[i].data);
		if (!op)
			abort();
		hold_back(f, op);
		plock_op__free_unpacked(op, NULL);
	}
}

static void take_snapshot(struct cs *cs, const Snapshot *s)
{
	drop_replicas(cs);
	for (size_t i = 0; i < s->n_locks; i++) {
		const SnapshotLock *l = s->locks[i];
		struct replica *r = replica(cs, l->space, true);
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
		struct replica *r = replica(cs, s->plocks[i]->space, true);
		if (r)
			restore_plock(r, s->plocks[i]);
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
	lease_from_sync(cs);
	struct member *me = member(cs, cs->nodeid, cs->pid);
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
			apply(cs, m->nodeid, m->pid, e);
			envelope__free_unpacked(e, NULL);
		} else if (m->len == 0) {
			member_joined(cs, m->nodeid, m->pid);
		}
		free(m);
		m = next;
	}
	pthread_cond_broadcast(&cs->changed);
}

/* ---- applying the ordered stream ---- */
static void release_failed_owner(struct cs *cs, struct replica *r, uint64_t owner);
static bool forgotten_failed_owner(struct cs *cs, uint64_t owner);

static void apply_op(struct cs *cs, const LockOp *op)
{
	if (!owner_live(cs, op->owner) && op->kind != LOCK_OP__KIND__RECOVERY_DONE)
		return; /* from an owner that failed meanwhile: its requests died with it */
	struct replica *r = replica(cs, op->space, true);
	if (!r)
		return;
	const uint8_t *lvb = op->has_lvb && op->lvb.len == LT_LVB_LEN ? op->lvb.data : NULL;
	unsigned flags = op->has_flags ? op->flags & LT_FLAGS : 0;
	int rc = 0;
	switch (op->kind) {
	case LOCK_OP__KIND__REQUEST:
		rc = lt_request(r->table, op->owner, op->lkid, (const char *)op->resource.data,
				op->resource.len, op->mode, flags);
		break;
	case LOCK_OP__KIND__CONVERT:
		rc = lt_convert(r->table, op->owner, op->lkid, op->mode, flags, lvb);
		break;
	case LOCK_OP__KIND__UNLOCK: rc = lt_unlock(r->table, op->owner, op->lkid, lvb); break;
	case LOCK_OP__KIND__CANCEL: rc = lt_cancel(r->table, op->owner, op->lkid); break;
	case LOCK_OP__KIND__RECOVERY_DONE:
		lt_recovery_done(r->table, op->lkid);
		pl_drop(r->plocks, op->lkid, 0, 0, true);
		release_failed_owner(cs, r, op->lkid);
		(void)forgotten_failed_owner(cs, op->lkid); /* else the list only ever grows */
		break;
	default: break;
	}
	/* A refused call of ours still completes, or its caller would wait forever. */
	if (rc && op->owner == cs->owner && op->kind != LOCK_OP__KIND__CANCEL) {
		struct lkmap_entry *e = *lkmap_slot(cs, op->lkid);
		struct lt_event ev = {.type = LT_EV_FAILED, .node = op->owner, .lkid = op->lkid,
				      .mode = e ? e->lk->granted : -1, .status = rc};
		if (e)
			cfslock_deliver(cs->c, e->lk, &ev);
	}
}

static struct pl_lock pl_lock_of(const PlockOp *op)
{
	return (struct pl_lock){.file = op->file, .node = op->owner, .owner = op->lock_owner,
				.start = op->start, .end = op->end, .pid = op->pid,
				.type = (enum pl_type)op->type};
}

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The answer to a call goes to the member that made it. */
static void answer_sender(struct cs *cs, uint64_t sender, uint64_t reqid, int status)
{
	if (sender == cs->owner)
		plock_answered(cs, reqid, status);
}

static void apply_plock(struct cs *cs, const PlockOp *op, bool replayed);

/* Nobody owns f any more: the calls it held back are applied, in order. */
static void release_owned(struct cs *cs, struct replica *r, struct po_file *f)
{
	struct po_call *c = po_release(r->owners, f, now_ms());
	while (c) {
		struct po_call *next = c->next;
		PlockOp *op = plock_op__unpack(NULL, c->len, c->data);
		if (!op)
			abort();
		apply_plock(cs, op, true);
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
static void release_failed_owner(struct cs *cs, struct replica *r, uint64_t owner)
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
	pl_walk(r->plocks, snap_add_plock, &b);
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
	queue_out(cs, &env);
	free_builder_plocks(&b);
}

static void take_state(struct cs *cs, struct replica *r, const PlockOp *op)
{
	struct po_file *f = po_find(r->owners, op->file);
	if (!f || f->owner != op->owner || !f->frozen)
		return;
	if (op->owner != cs->owner) /* the owner's copy has them already */
		for (size_t i = 0; i < op->n_state; i++)
			restore_plock(r, op->state[i]);
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
			answer_sender(cs, op->owner, op->reqid, -ECANCELED);
			return true;
		}
	}
	if (op->kind == PLOCK_OP__KIND__SET && !op->wait && owner_failed(cs, f->owner)) {
		/* A dead owner's locks stay until its recovery, and nobody knows their ranges. */
		answer_sender(cs, op->owner, op->reqid, -EAGAIN);
		return true;
	}
	hold_back(f, op);
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

static void apply_plock(struct cs *cs, const PlockOp *op, bool replayed)
{
	if (!owner_live(cs, op->owner))
		return; /* from an owner that failed meanwhile */
	struct replica *r = replica(cs, op->space, true);
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
		answer_sender(cs, op->owner, op->reqid, 0);
		break;
	case PLOCK_OP__KIND__WANT: answer_sender(cs, op->owner, op->reqid, 0); break;
	default: break;
	}
	if (rc) /* refused: it still ends */
		answer_sender(cs, op->owner, op->reqid, rc);
}

/* ---- versions (version.h, docs/upgrading.md) ---- */
/* "node N (pid P) speaks VERSION, this node M.m: HOW" to the log. */
static void log_meeting(struct cs *cs, int prio, uint32_t nodeid, uint32_t pid,
			struct lock_version theirs, const char *how)
{
	char text[96], line[224];
	struct lock_version ours = lock_version_own();
	lock_version_text(theirs, text, sizeof text);
	snprintf(line, sizeof line, "node %u (pid %u) speaks %s, this node %u.%u: %s", nodeid, pid,
		 text, ours.major, ours.minor, how);
	log_msg(cs, prio, "%s", line);
}

/* A Hello of a major version we do not speak: the process is never admitted, and the member
 * that would have answered it tells it so. */
static void refuse_hello(struct cs *cs, struct member *m, const Hello *h,
			 struct lock_version theirs)
{
	if (!m->refused)
		log_meeting(cs, LOG_WARNING, m->nodeid, m->pid, theirs, "it is not admitted");
	m->refused = true;
	if (!i_answer(cs) || !cs->quorate || cs->lost_quorum)
		return;
	struct lock_version ours = lock_version_own();
	Refusal r = REFUSAL__INIT;
	r.for_owner = h->owner;
	r.for_seq = h->seq;
	r.proto_major = ours.major;
	r.proto_minor = ours.minor;
	r.release = (char *)ours.release;
	Envelope env = ENVELOPE__INIT;
	env.refusal = &r;
	queue_out(cs, &env);
}

/* Our own Hello refused: we speak another major version than the cluster. */
static void take_refusal(struct cs *cs, struct lock_version theirs)
{
	char text[96], own[96];
	lock_version_text(theirs, text, sizeof text);
	lock_version_text(lock_version_own(), own, sizeof own);
	snprintf(cs->refusal, sizeof cs->refusal, "the cluster speaks %s; this node speaks %s: "
		 "run a release of the cluster's major version here, or upgrade every node "
		 "(docs/upgrading.md)", text, own);
	log_msg(cs, LOG_ERR, "refused: %s", cs->refusal);
	cs->refused = true;
	pthread_cond_broadcast(&cs->changed);
}

static void apply_hello(struct cs *cs, uint32_t nodeid, const Hello *h)
{
	struct member *m = member(cs, nodeid, h->pid);
	if (!m) /* it left again before its hello was delivered */
		return;
	struct lock_version theirs = lock_version_said(h->has_proto_major, h->proto_major,
						       h->proto_minor, h->release);
	enum lock_meeting meeting = lock_version_meet(lock_version_own(), theirs);
	if (meeting == LOCK_REFUSED) {
		refuse_hello(cs, m, h, theirs);
		return;
	}
	if (meeting == LOCK_OTHER_MINOR && (m->minor != theirs.minor || !m->owner))
		log_meeting(cs, LOG_INFO, nodeid, h->pid, theirs, "they work together");
	m->minor = theirs.minor;
	m->owner = h->owner;
	if (!h->needs_sync) {
		m->synced = true;
		m->hello_seq = h->seq;
		return;
	}
	/* A member that found itself alone in the group is synced although its Hello, sent
	 * before it knew, asks for a snapshot. */
	if (m->synced && h->seq <= m->hello_seq)
		return;
	/* A new Hello (also a second one, sent because a member left before the answer to the
	 * first came) is answered even if the answer to the first came meanwhile. */
	m->synced = false;
	m->hello_seq = h->seq;
	/* A member that lost quorum holds a table the majority has moved past: it must not
	 * answer, even if its stale view makes it the lowest synced owner. */
	if (i_answer(cs) && cs->quorate && !cs->lost_quorum)
		answer_hello(cs, h);
}

/* ---- beats, the lease, evictions (cfslock.h) ---- */

static Envelope *evict_envelope(Envelope *env, Evict *e, uint64_t owner, uint32_t nodeid,
				uint32_t pid)
{
	e->owner = owner;
	e->nodeid = nodeid;
	e->pid = pid;
	env->evict = e;
	return env;
}

/* Removed from the cluster: nothing of our view may be acted on.  Our calls fail, the
 * caller hears it (and fences), and the thread rejoins as a new owner, as after a lost
 * quorum, so that the process can still let go of everything and leave. */
static void evict_self(struct cs *cs, const char *why)
{
	if (cs->evicted)
		return;
	cs->evicted = true;
	cs->lost_quorum = true;
	log_msg(cs, LOG_ERR, "evicted: %s", why);
	cfslock_deliver_evicted(cs->c, why);
	fail_all_local(cs, -CFSLOCK_ENOQUORUM);
}

/* Our beat sent at sent_ns was delivered in a ring with the others: the lease runs from
 * then. */
static void confirm_beat(struct cs *cs, uint64_t sent_ns)
{
	uint64_t now = cfslock_boottime_ns();
	uint64_t until = sent_ns + lease_ns(cs);
	if (cs->evicted || until <= now || !ring_quorate(cs))
		return;
	__atomic_store_n(&cs->stalled, false, __ATOMIC_RELEASE); /* nobody removed us meanwhile */
	cfslock_lease_renew(cs->c, until);
}

static void apply_beat(struct cs *cs, const Beat *b)
{
	if (b->owner != cs->owner)
		return; /* counted in apply(), as any message of its sender */
	uint64_t now = cfslock_boottime_ns();
	/* Ours: a gap in their coming back (our corosync stood still, or the ring re-formed)
	 * starts a new stretch, from which others' silence is counted (evict_silent). */
	if (now - cs->own_beat_ns > lease_ns(cs))
		cs->stretch_ns = now;
	uint32_t gap = (uint32_t)((now - cs->own_beat_ns) / 1000000u);
	if (cs->own_beat_ns > cs->ring_start_ns && gap > cs->c->beat_gap_max_ms)
		__atomic_store_n(&cs->c->beat_gap_max_ms, gap, __ATOMIC_RELAXED);
	cs->own_beat_ns = now;
	/* A corosync that stood still and wakes still holding the ring's token orders
	 * what we sent meanwhile in the old ring, which the others have left, and delivers it
	 * to us alone before it notices: our beat proves something once a message of another
	 * node follows it in the same ring (confirm_beat), at once only if no other node is a
	 * member. */
	bool alone = true;
	for (size_t i = 0; i < cs->nmembers && alone; i++)
		alone = cs->members[i].nodeid == cs->nodeid;
	if (alone)
		confirm_beat(cs, b->sent_ns);
	else if (b->sent_ns > cs->unconfirmed_ns)
		cs->unconfirmed_ns = b->sent_ns;
}

static void apply_evict(struct cs *cs, const Evict *e)
{
	if (e->owner == cs->owner) {
		char why[128];
		snprintf(why, sizeof why, "the other members had no beat from this process for "
			 "%u ms (it was stopped or hung)", cs->c->evict_ms);
		evict_self(cs, why);
		return;
	}
	struct member *m = member(cs, e->nodeid, e->pid);
	if (m && m->owner == e->owner) {
		char who[64];
		snprintf(who, sizeof who, "%u (pid %u)", e->nodeid, e->pid);
		log_msg(cs, LOG_WARNING, "member on node %s evicted: no beat from it", who);
		member_left(cs, e->nodeid, e->pid); /* its later messages come from nobody */
	}
}

/* From the thread, woken by the ticker: our beat when due.  With another thread sending (it
 * holds send_lock while corosync's flow control makes it try again) or corosync asking to
 * try again, this beat is skipped, and the next wakeup tries. */
static void try_beat(struct cs *cs)
{
	uint64_t now = cfslock_boottime_ns();
	pthread_mutex_lock(&cs->lock);
	/* A beat a quarter of a lease apart: the next message of another node, which confirms
	 * it, may come a quarter later.  With four members or more, half a lease apart: the
	 * others' beats then follow ours within a sixth of a lease.  Every beat costs each
	 * member's corosync a delivery: on 14 nodes sharing two cores, beats four times a lease
	 * doubled corosync's CPU time (bench/cluster/randio_nodes.sh). */
	uint64_t beat_ns = (uint64_t)cs->beat_ms * 1000000ull * (cs->nmembers > 3 ? 2 : 1);
	bool due = cs->synced && !cs->evicted && !cs->lost_quorum && cs->connected &&
		   now - __atomic_load_n(&cs->beat_sent_ns, __ATOMIC_RELAXED) >= beat_ns;
	Beat b = BEAT__INIT;
	b.owner = cs->owner;
	b.sent_ns = now;
	pthread_mutex_unlock(&cs->lock);
	if (!due || pthread_mutex_trylock(&cs->send_lock))
		return;
	Envelope env = ENVELOPE__INIT;
	env.beat = &b;
	uint8_t buf[64];
	size_t len = envelope__get_packed_size(&env);
	struct iovec iov = {.iov_base = buf, .iov_len = len};
	if (len <= sizeof buf) {
		envelope__pack(&env, buf);
		if (cpg_mcast_joined(cs->cpg, CPG_TYPE_AGREED, &iov, 1) == CS_OK)
			__atomic_store_n(&cs->beat_sent_ns, now, __ATOMIC_RELAXED);
	}
	pthread_mutex_unlock(&cs->send_lock);
}

static void send_evict(struct cs *cs, const struct member *m)
{
	Evict e = EVICT__INIT;
	Envelope env = ENVELOPE__INIT;
	(void)multicast(cs, evict_envelope(&env, &e, m->owner, m->nodeid, m->pid));
}

/* From the thread, every round: the eviction of a member silent past evict_ms, counted from the start of the stretch in which our own beats have come back
 * without a gap: a member whose corosync or process stood still must not take the others'
 * silence for theirs.  Not our lease: with one other member, frozen, it runs out (nothing
 * of another node confirms our beats) until we evict that member. */
static void evict_silent(struct cs *cs)
{
	uint64_t now = cfslock_boottime_ns();
	pthread_mutex_lock(&cs->lock);
	struct member silent[8];
	size_t nsilent = 0;
	bool hearing = now - cs->own_beat_ns < lease_ns(cs);
	if (cs->synced && !cs->evicted && !cs->lost_quorum && ring_quorate(cs) && hearing &&
	    !__atomic_load_n(&cs->stalled, __ATOMIC_ACQUIRE)) {
		uint64_t limit = (uint64_t)cs->c->evict_ms * 1000000ull;
		for (size_t i = 0; i < cs->nmembers; i++) {
			struct member *m = &cs->members[i];
			if (m->owner == cs->owner || !m->synced || !m->owner)
				continue;
			if (!m->last_beat_ns)
				m->last_beat_ns = now; /* counted from when we first look */
			uint64_t since = m->last_beat_ns > cs->stretch_ns ? m->last_beat_ns
									  : cs->stretch_ns;
			if (now - since > limit && now - m->evict_sent_ns > limit && nsilent < 8) {
				m->evict_sent_ns = now;
				silent[nsilent++] = *m;
			}
		}
	}
	pthread_mutex_unlock(&cs->lock);
	for (size_t i = 0; i < nsilent; i++)
		send_evict(cs, &silent[i]);
}

static void apply(struct cs *cs, uint32_t nodeid, uint32_t pid, const Envelope *env)
{
	/* Any message shows its sender alive: a member busy sending (its beats wait behind
	 * corosync's flow control) is not silent. */
	struct member *from = member(cs, nodeid, pid);
	if (from && from->refused && !env->hello)
		return;
	if (from)
		from->last_beat_ns = cfslock_boottime_ns();
	if (nodeid != cs->nodeid && cs->unconfirmed_ns) {
		confirm_beat(cs, cs->unconfirmed_ns);
		cs->unconfirmed_ns = 0;
	}
	if (env->hello)
		apply_hello(cs, nodeid, env->hello);
	else if (env->snapshot) {
		for (size_t i = 0; i < cs->nmembers; i++)
			if (cs->members[i].owner == env->snapshot->for_owner &&
			    cs->members[i].hello_seq == env->snapshot->for_seq)
				cs->members[i].synced = true;
	} else if (env->op)
		apply_op(cs, env->op);
	else if (env->plock)
		apply_plock(cs, env->plock, false);
	else if (env->beat)
		apply_beat(cs, env->beat);
	else if (env->evict)
		apply_evict(cs, env->evict);
}

static void buffer_message(struct cs *cs, uint32_t nodeid, uint32_t pid, const void *msg,
			   size_t len)
{
	struct message *m = malloc(sizeof *m + len);
	if (!m)
		abort();
	*m = (struct message){.nodeid = nodeid, .pid = pid, .len = len};
	if (len)
		memcpy(m->data, msg, len);
	if (cs->buffered_tail)
		cs->buffered_tail->next = m;
	else
		cs->buffered = m;
	cs->buffered_tail = m;
}

static void on_deliver(cpg_handle_t h, const struct cpg_name *group, uint32_t nodeid,
		       uint32_t pid, void *msg, size_t len)
{
	(void)group;
	struct cs *cs;
	if (cpg_context_get(h, (void **)&cs) != CS_OK)
		return;
	Envelope *env = envelope__unpack(NULL, len, msg);
	if (!env)
		return; /* not ours, or damaged: ignore, as every member does */
	pthread_mutex_lock(&cs->lock);
	if (cs->synced) {
		apply(cs, nodeid, pid, env);
	} else if (!cs->hello_seen) {
		/* Before our own Hello: the snapshot that answers it will include this. */
		if (env->hello && nodeid == cs->nodeid && pid == cs->pid &&
		    env->hello->seq == cs->hello_seq)
			cs->hello_seen = true;
	} else if (env->snapshot && env->snapshot->for_owner == cs->owner &&
		   env->snapshot->for_seq == cs->hello_seq) {
		const Snapshot *sn = env->snapshot;
		struct lock_version theirs = lock_version_said(sn->has_proto_major, sn->proto_major,
							       sn->proto_minor, sn->release);
		enum lock_meeting meeting = lock_version_meet(lock_version_own(), theirs);
		if (meeting == LOCK_REFUSED) { /* the rule is to refuse, not answer: all the same */
			take_refusal(cs, theirs);
		} else {
			if (meeting == LOCK_OTHER_MINOR)
				log_meeting(cs, LOG_INFO, nodeid, pid, theirs, "they work together");
			take_snapshot(cs, sn);
		}
	} else if (env->refusal && env->refusal->for_owner == cs->owner &&
		   env->refusal->for_seq == cs->hello_seq) {
		const Refusal *r = env->refusal;
		take_refusal(cs, lock_version_said(true, r->proto_major, r->proto_minor, r->release));
	} else {
		buffer_message(cs, nodeid, pid, msg, len);
	}
	pthread_mutex_unlock(&cs->lock);
	envelope__free_unpacked(env, NULL);
}

/* The owner of files died: their locks stay until its recovery, and nobody knows their
 * ranges, so the F_SETLKs held back on them fail now (as later ones do at once). */
static void fail_nowait_on_owned(struct cs *cs, struct replica *r, uint64_t owner)
{
	struct file_ids o = owned_by(r, owner);
	for (size_t i = 0; i < o.n; i++) {
		struct po_file *f = po_find(r->owners, o.files[i]);
		for (struct po_call *c; (c = po_take_nowait(f)); free(c))
			answer_sender(cs, c->sender, c->reqid, -EAGAIN);
	}
	free(o.files);
}

/* A failed owner with no lock left in any table: no recovery will look for it (recoveries
 * find the dead by their recovering locks), so whatever else it had goes now: its record
 * locks and the files it owned, whose held-back calls go on. */
static bool forgotten_failed_owner(struct cs *cs, uint64_t owner)
{
	for (struct replica *r = cs->replicas; r; r = r->next)
		if (lt_node_holds(r->table, owner))
			return false;
	for (struct replica *r = cs->replicas; r; r = r->next) {
		pl_drop(r->plocks, owner, 0, 0, true);
		release_failed_owner(cs, r, owner);
	}
	for (size_t i = 0; i < cs->nfailed; i++)
		if (cs->failed[i] == owner)
			cs->failed[i--] = cs->failed[--cs->nfailed];
	return true;
}

static void member_left(struct cs *cs, uint32_t nodeid, uint32_t pid)
{
	struct member *m = member(cs, nodeid, pid);
	if (!m)
		return;
	uint64_t owner = m->owner;
	*m = cs->members[--cs->nmembers];
	if (owner && !owner_failed(cs, owner) && cs->nfailed < MAX_MEMBERS) {
		cs->failed[cs->nfailed++] = owner;
		for (struct replica *r = cs->replicas; r; r = r->next)
			lt_node_failed(r->table, owner);
		/* A clean unmount let go of every lock: it owned files all the same. */
		if (!forgotten_failed_owner(cs, owner))
			for (struct replica *r = cs->replicas; r; r = r->next) {
				pl_drop(r->plocks, owner, 0, 0, false); /* they go at recovery */
				fail_nowait_on_owned(cs, r, owner);
			}
	}
	if (members_on_node(cs, nodeid) == 0)
		cfslock_deliver_membership(cs->c, nodeid, false);
}

static void member_joined(struct cs *cs, uint32_t nodeid, uint32_t pid)
{
	if (member(cs, nodeid, pid) || cs->nmembers == MAX_MEMBERS)
		return;
	if (members_on_node(cs, nodeid) == 0)
		cfslock_deliver_membership(cs->c, nodeid, true);
	/* Owner unknown until its Hello; until then it may not lock anything. */
	cs->members[cs->nmembers++] = (struct member){.nodeid = nodeid, .pid = pid};
}

/* ---- splits and stateful merges ----
 * A member that the others removed (its node paused, frozen or cut off past the token
 * timeout) and that comes back with the same process merges back with a stale view: it saw
 * the others leave and come back, they saw it do so, and each side has recovered the
 * other's locks.  Both sides see a stateful merge (dlm_controld's term) when a process they
 * saw leave with its node joins again, and decide the same way which side goes on: not one
 * that stood still (tick) since its lease was last renewed; else the side that kept a
 * majority of the nodes there were before the split, or half of them with the lowest node
 * id.  The other side is evicted. */
static size_t member_nodes(const struct cs *cs, uint32_t *nodes)
{
	size_t n = 0;
	for (size_t i = 0; i < cs->nmembers; i++) {
		size_t j = 0;
		while (j < n && nodes[j] != cs->members[i].nodeid)
			j++;
		if (j == n)
			nodes[n++] = cs->members[i].nodeid;
	}
	return n;
}

static bool in_nodes(const uint32_t *nodes, size_t n, uint32_t node)
{
	for (size_t i = 0; i < n; i++)
		if (nodes[i] == node)
			return true;
	return false;
}

static void split_before_left(struct cs *cs, const struct cpg_address *left, size_t nleft)
{
	struct split *s = &cs->split;
	for (size_t i = 0; i < nleft; i++) {
		const struct member *m = member(cs, left[i].nodeid, left[i].pid);
		if (left[i].reason != CPG_REASON_NODEDOWN || !m)
			continue;
		if (!s->open) {
			s->nprev = member_nodes(cs, s->prev);
			s->ngone = 0;
			s->open = true;
		}
		if (s->ngone < MAX_MEMBERS)
			s->gone[s->ngone++] = (struct gone){m->nodeid, m->pid, m->owner, false};
	}
}

static void split_after_left(struct cs *cs)
{
	if (cs->split.open)
		cs->split.nkept = member_nodes(cs, cs->split.kept);
}

static bool kept_majority(const struct split *s)
{
	if (2 * s->nkept != s->nprev)
		return 2 * s->nkept > s->nprev;
	uint32_t lowest = UINT32_MAX;
	for (size_t i = 0; i < s->nprev; i++)
		lowest = s->prev[i] < lowest ? s->prev[i] : lowest;
	return in_nodes(s->kept, s->nkept, lowest);
}

/* True if it evicted us. */
static bool stateful_merge(struct cs *cs, const struct cpg_address *joined, size_t njoined)
{
	struct split *s = &cs->split;
	uint32_t back = 0;
	for (size_t i = 0; i < njoined && s->open; i++)
		for (size_t j = 0; j < s->ngone; j++)
			if (s->gone[j].nodeid == joined[i].nodeid && s->gone[j].pid == joined[i].pid) {
				back = joined[i].nodeid;
				s->gone[j].back = true;
			}
	if (!back)
		return false;
	bool stood_still = __atomic_load_n(&cs->stalled, __ATOMIC_ACQUIRE);
	bool lose = stood_still || !kept_majority(s);
	char why[200];
	snprintf(why, sizeof why, "node %u came back with the view it had before the membership "
		 "split, and this side %s", back,
		 stood_still ? "stood still meanwhile (a pause or a freeze)"
		 : lose ? "kept no majority of the nodes" : "kept the majority");
	s->open = false;
	if (lose) {
		evict_self(cs, why);
		return true;
	}
	log_msg(cs, LOG_WARNING, "stateful merge: %s; the other side is evicted", why);
	/* It decides so itself; told all the same, in case its view of the split differs. */
	for (size_t j = 0; j < s->ngone; j++) {
		if (!s->gone[j].back || !s->gone[j].owner)
			continue;
		Evict e = EVICT__INIT;
		Envelope env = ENVELOPE__INIT;
		queue_out(cs, evict_envelope(&env, &e, s->gone[j].owner, s->gone[j].nodeid,
					     s->gone[j].pid));
	}
	return false;
}

static void on_confchg(cpg_handle_t h, const struct cpg_name *group,
		       const struct cpg_address *members, size_t nmembers,
		       const struct cpg_address *left, size_t nleft,
		       const struct cpg_address *joined, size_t njoined)
{
	(void)group;
	struct cs *cs;
	if (cpg_context_get(h, (void **)&cs) != CS_OK)
		return;
	pthread_mutex_lock(&cs->lock);
	if (!cs->synced) {
		if (nmembers == 1 && members[0].nodeid == cs->nodeid && members[0].pid == cs->pid) {
			/* Alone in the group: the table is empty by definition. */
			cs->synced = true;
			cs->nmembers = 1;
			cs->members[0] =
				(struct member){.nodeid = cs->nodeid, .pid = cs->pid, .owner = cs->owner,
				       .synced = true, .hello_seq = cs->hello_seq};
			lease_from_sync(cs);
			pthread_cond_broadcast(&cs->changed);
		} else if (nleft == 0 && cs->hello_seen) {
			for (size_t i = 0; i < njoined; i++)
				buffer_message(cs, joined[i].nodeid, joined[i].pid, NULL, 0);
		} else if (nleft > 0 && cs->hello_seen) {
			/* The member answering us may have gone: ask again, with a new cut. */
			struct message *m = cs->buffered;
			cs->buffered = cs->buffered_tail = NULL;
			while (m) {
				struct message *n = m->next;
				free(m);
				m = n;
			}
			queue_hello(cs);
		}
		pthread_mutex_unlock(&cs->lock);
		return;
	}
	if (cs->evicted) { /* our view is worth nothing until we rejoin */
		pthread_mutex_unlock(&cs->lock);
		return;
	}
	cs->unconfirmed_ns = 0; /* a beat is confirmed within its ring */
	cs->quorum_asked = false;
	cs->stretch_ns = cs->ring_start_ns = cfslock_boottime_ns();
	/* Nodes went while this process stood still: it may be the one the others removed, and
	 * its lease, renewed in whatever membership its corosync forms now, proves nothing. */
	for (size_t i = 0; i < nleft; i++)
		if (left[i].reason == CPG_REASON_NODEDOWN &&
		    __atomic_load_n(&cs->stalled, __ATOMIC_ACQUIRE)) {
			evict_self(cs, "nodes left the membership while this process stood still "
				       "(a pause or a freeze): the others may have removed it");
			pthread_mutex_unlock(&cs->lock);
			return;
		}
	split_before_left(cs, left, nleft);
	for (size_t i = 0; i < nleft; i++)
		member_left(cs, left[i].nodeid, left[i].pid);
	split_after_left(cs);
	if (stateful_merge(cs, joined, njoined)) {
		pthread_mutex_unlock(&cs->lock);
		return;
	}
	for (size_t i = 0; i < njoined; i++)
		member_joined(cs, joined[i].nodeid, joined[i].pid);
	pthread_mutex_unlock(&cs->lock);
}


/* Asked of corosync once after each membership change (a quorum notification does not come
 * for every ring: one re-formed with the same members after a lost token brings none, and
 * waiting for it left leases out for good on a loaded machine); a loss of quorum after that
 * comes as a notification. */
static bool ring_quorate(struct cs *cs)
{
	int quorate = 0;
	if (!cs->quorum_asked)
		cs->quorum_asked = quorum_getquorate(cs->quorum, &quorate) == CS_OK && quorate;
	return cs->quorate && cs->quorum_asked;
}

static cs_error_t open_cpg(struct cs *cs)
{
	cpg_callbacks_t cb = {.cpg_deliver_fn = on_deliver, .cpg_confchg_fn = on_confchg};
	cs_error_t err = cpg_initialize(&cs->cpg, &cb);
	if (err == CS_OK)
		cpg_context_set(cs->cpg, cs);
	return err;
}

static void on_quorum(quorum_handle_t h, uint32_t quorate, uint64_t ring, uint32_t n,
		      uint32_t *view)
{
	(void)ring;
	(void)n;
	(void)view;
	struct cs *cs;
	if (quorum_context_get(h, (const void **)&cs) != CS_OK)
		return;
	pthread_mutex_lock(&cs->lock);
	bool was = cs->quorate;
	cs->quorate = quorate != 0;
	if (was && !cs->quorate) {
		cs->lost_quorum = true;
		log_msg(cs, LOG_ERR, "lost quorum%s", ": lock calls fail until it returns");
	}
	pthread_mutex_unlock(&cs->lock);
	if (was != (quorate != 0))
		cfslock_deliver_quorum(cs->c, quorate != 0);
}

static int join_group(struct cs *cs)
{
	struct cpg_name name;
	name.length = sizeof GROUP - 1;
	memcpy(name.value, GROUP, sizeof GROUP - 1);
	cs_error_t err;
	while ((err = cpg_join(cs->cpg, &name)) == CS_ERR_TRY_AGAIN)
		usleep(10000);
	if (err != CS_OK)
		return -ENOTCONN;
	pthread_mutex_lock(&cs->lock);
	queue_hello(cs);
	pthread_mutex_unlock(&cs->lock);
	return 0;
}

static uint64_t new_owner(uint32_t nodeid)
{
	uint32_t inc = 0;
	while (inc == 0)
		if (getrandom(&inc, sizeof inc, 0) != sizeof inc)
			inc = (uint32_t)getpid();
	return (uint64_t)nodeid << 32 | inc;
}

/* Back from a lost quorum: our replica may have diverged.  Leave, forget, and join as a new
 * owner; the majority holds our old locks as recovering until recovery is declared done. */
static void rejoin(struct cs *cs)
{
	/* A new CPG connection: leaving and joining on the old one races with our own leave.
	 * Under send_lock: the ticker sends beats on it. */
	pthread_mutex_lock(&cs->send_lock);
	cpg_finalize(cs->cpg);
	cs_error_t err = open_cpg(cs);
	pthread_mutex_unlock(&cs->send_lock);
	if (err != CS_OK) {
		pthread_mutex_lock(&cs->lock);
		cs->connected = false;
		pthread_mutex_unlock(&cs->lock);
		return;
	}
	pthread_mutex_lock(&cs->lock);
	fail_all_local(cs, -CFSLOCK_ENOQUORUM);
	drop_replicas(cs);
	cs->nmembers = cs->nfailed = 0;
	cs->synced = cs->hello_seen = false;
	cs->lost_quorum = cs->evicted = false;
	cs->owner = new_owner(cs->nodeid);
	pthread_mutex_unlock(&cs->lock);
	log_msg(cs, LOG_NOTICE, "quorum is back; %s", "rejoining the lock group");
	join_group(cs);
}

static void *cs_thread(void *arg)
{
	struct cs *cs = arg;
	int cpg_fd = -1, q_fd = -1;
	quorum_fd_get(cs->quorum, &q_fd);
	pthread_t tk;
	__atomic_store_n(&cs->ticking, true, __ATOMIC_RELEASE);
	bool ticker_runs = pthread_create(&tk, NULL, ticker, cs) == 0;
	while (!cs->stop && cs->connected) {
		cpg_fd_get(cs->cpg, &cpg_fd); /* a rejoin opens a new connection */
		send_outbox(cs);
		struct pollfd p[3] = {{.fd = cpg_fd, .events = POLLIN},
				      {.fd = q_fd, .events = POLLIN},
				      {.fd = cs->wake[0], .events = POLLIN}};
		int wait_ms = cs->beat_ms < 200 ? (int)cs->beat_ms : 200;
		int ready = poll(p, 3, wait_ms);
		tick(cs); /* before anything delivered after a pause is looked at */
		if (ready < 0)
			continue;
		if (p[2].revents) {
			char b[16];
			if (read(cs->wake[0], b, sizeof b) < 0) {
				/* nothing: the wakeup did its job */
			}
		}
		try_beat(cs);
		if (p[1].revents && quorum_dispatch(cs->quorum, CS_DISPATCH_ALL) != CS_OK)
			p[0].revents |= POLLHUP;
		if (p[0].revents && cpg_dispatch(cs->cpg, CS_DISPATCH_ALL) != CS_OK) {
			/* corosync is gone: no quorum, no locks, until someone restarts us */
			pthread_mutex_lock(&cs->lock);
			bool was = cs->connected;
			cs->connected = cs->quorate = false;
			fail_all_local(cs, -CFSLOCK_ENOQUORUM);
			pthread_cond_broadcast(&cs->changed);
			pthread_mutex_unlock(&cs->lock);
			if (was)
				cfslock_deliver_quorum(cs->c, false);
			break;
		}
		evict_silent(cs);
		pthread_mutex_lock(&cs->lock);
		bool again = cs->lost_quorum && cs->quorate;
		pthread_mutex_unlock(&cs->lock);
		if (again)
			rejoin(cs);
	}
	__atomic_store_n(&cs->ticking, false, __ATOMIC_RELEASE);
	if (ticker_runs)
		pthread_join(tk, NULL);
	return NULL;
}

/* corosync's token timeout: a member silent this long is declared gone (corosync has no
 * library for its configuration map among our dependencies; its command reads it).  0 if
 * unknown. */
static uint32_t token_timeout_ms(void)
{
	FILE *f = popen("corosync-cmapctl -g runtime.config.totem.token 2>/dev/null", "r");
	if (!f)
		return 0;
	char line[128];
	unsigned ms = 0;
	if (fgets(line, sizeof line, f)) {
		const char *eq = strchr(line, '=');
		if (!eq || sscanf(eq + 1, "%u", &ms) != 1)
			ms = 0;
	}
	pclose(f);
	return ms;
}

/* The lease is the token timeout: a member the others remove for silence (a token timeout
 * at least, counted from after its last beat was sent) finds its lease out when it wakes,
 * and a member cut off or stood still writes nothing after the lease, which with the 500 ms
 * for I/O in the kernel is over before the survivors' fence interval (token + 900 ms) ends.
 * Beats four per lease (two with four members or more: try_beat).  A member
 * silent for four token timeouts, at least 10 s, is evicted: at 5 s, members were evicted
 * on a machine whose one core ran the test suite, busy loops and five corosyncs, which run
 * real-time. */
static void set_lease_times(struct cs *cs, uint32_t token_ms)
{
	uint32_t token = token_ms ? token_ms : 1000; /* unknown: the shortest a site uses */
	cs->token_ms = token;
	cs->c->lease_ms = token;
	cs->beat_ms = cs->c->lease_ms / 4 > 50 ? cs->c->lease_ms / 4 : 50;
	cs->c->evict_ms = 4 * token > 10000 ? 4 * token : 10000;
	__atomic_store_n(&cs->c->lease_until, 0, __ATOMIC_RELEASE); /* fresh once in sync */
}

static int cs_open(struct cfslock_client *c)
{
	struct cs *cs = calloc(1, sizeof *cs);
	if (!cs)
		return -ENOMEM;
	cs->c = c;
	pthread_mutex_init(&cs->lock, NULL);
	pthread_mutex_init(&cs->send_lock, NULL);
	pthread_cond_init(&cs->changed, NULL);
	quorum_callbacks_t qcb = {.quorum_notify_fn = on_quorum};
	uint32_t qtype = 0;
	int quorate = 0;
	int rc = -ENOTCONN;
	if (open_cpg(cs) != CS_OK)
		goto fail;
	if (cpg_local_get(cs->cpg, &cs->nodeid) != CS_OK ||
	    quorum_initialize(&cs->quorum, &qcb, &qtype) != CS_OK)
		goto fail_cpg;
	quorum_context_set(cs->quorum, cs);
	if (quorum_getquorate(cs->quorum, &quorate) != CS_OK ||
	    quorum_trackstart(cs->quorum, CS_TRACK_CHANGES | CS_TRACK_CURRENT) != CS_OK ||
	    pipe2(cs->wake, O_NONBLOCK | O_CLOEXEC) < 0)
		goto fail_quorum;
	cs->quorate = quorate != 0;
	cs->connected = true;
	cs->pid = (uint32_t)getpid();
	cs->owner = new_owner(cs->nodeid);
	set_lease_times(cs, token_timeout_ms());
	c->node = cs->nodeid;
	c->quorate = cs->quorate;
	c->backend = cs;
	if ((rc = join_group(cs)) || pthread_create(&cs->thread, NULL, cs_thread, cs)) {
		rc = rc ? rc : -EAGAIN;
		goto fail_pipe;
	}
	if (!cs->quorate) {
		/* Calls fail until quorum comes; then the thread rejoins and syncs, as after a
		 * lost quorum.  Members without quorum do not answer, so there is nothing to wait
		 * for now. */
		pthread_mutex_lock(&cs->lock);
		cs->lost_quorum = true;
		pthread_mutex_unlock(&cs->lock);
		return 0;
	}
	/* Wait until our replica is in sync (alone, or from a member's snapshot). */
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += SYNC_TIMEOUT_S;
	pthread_mutex_lock(&cs->lock);
	while (!cs->synced && cs->connected && !cs->refused && !rc)
		rc = pthread_cond_timedwait(&cs->changed, &cs->lock, &until) ? -ETIMEDOUT : 0;
	if (cs->refused) {
		cfslock_set_error("%s", cs->refusal);
		rc = -EPROTO;
	}
	pthread_mutex_unlock(&cs->lock);
	if (!rc && cs->connected)
		return 0;
	cs->stop = true;
	pthread_join(cs->thread, NULL);
	rc = rc ? rc : -ENOTCONN;
fail_pipe:
	close(cs->wake[0]);
	close(cs->wake[1]);
fail_quorum:
	quorum_finalize(cs->quorum);
fail_cpg:
	cpg_finalize(cs->cpg);
fail:
	free(cs);
	return rc;
}

static void cs_close(struct cfslock_client *c)
{
	struct cs *cs = c->backend;
	cs->stop = true;
	if (write(cs->wake[1], "x", 1) < 0) {
		/* the thread wakes within its poll timeout anyway */
	}
	pthread_join(cs->thread, NULL);
	cpg_finalize(cs->cpg);
	quorum_finalize(cs->quorum);
	close(cs->wake[0]);
	close(cs->wake[1]);
	drop_replicas(cs);
	for (size_t b = 0; b < LKMAP_BUCKETS; b++)
		for (struct lkmap_entry *e = cs->lkmap[b], *n; e; e = n) {
			n = e->next;
			free(e);
		}
	for (struct message *m = cs->buffered, *n; m; m = n) {
		n = m->next;
		free(m);
	}
	for (struct message *m = cs->outbox, *n; m; m = n) {
		n = m->next;
		free(m);
	}
	free(cs);
}

static int cs_space_open(struct cfslock_space *s)
{
	(void)s; /* every member replicates every lockspace */
	return 0;
}

static void cs_space_close(struct cfslock_space *s)
{
	(void)s;
}

static int send_op(struct cfslock *lk, LockOp__Kind kind, int mode, unsigned flags,
		   const uint8_t *lvb)
{
	struct cs *cs = lk->s->c->backend;
	pthread_mutex_lock(&cs->lock);
	/* After a rejoin the replica is being rebuilt: wait for it, not for ever. */
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += SYNC_TIMEOUT_S;
	while (cs->connected && !cs->synced &&
	       pthread_cond_timedwait(&cs->changed, &cs->lock, &until) == 0)
		;
	int rc = cs->connected && cs->synced ? lkmap_add(cs, lk) : -CFSLOCK_ENOQUORUM;
	uint64_t owner = cs->owner;
	pthread_mutex_unlock(&cs->lock);
	if (rc)
		return rc;
	LockOp op = LOCK_OP__INIT;
	op.kind = kind;
	op.space = lk->s->name;
	op.owner = owner;
	op.has_lkid = true;
	op.lkid = lk->lkid;
	op.has_resource = true;
	op.resource = (ProtobufCBinaryData){.len = lk->len, .data = (uint8_t *)lk->name};
	op.has_mode = true;
	op.mode = mode;
	op.has_flags = true;
	op.flags = flags;
	if (lvb) {
		op.has_lvb = true;
		op.lvb = (ProtobufCBinaryData){.len = CFSLOCK_LVB_LEN, .data = (uint8_t *)lvb};
	}
	Envelope env = ENVELOPE__INIT;
	env.op = &op;
	return multicast(cs, &env);
}

static int cs_request(struct cfslock *lk, int mode, unsigned flags)
{
	return send_op(lk, LOCK_OP__KIND__REQUEST, mode, flags, NULL);
}

static int cs_convert(struct cfslock *lk, int mode, unsigned flags, const uint8_t *lvb)
{
	return send_op(lk, LOCK_OP__KIND__CONVERT, mode, flags, lvb);
}

static int cs_unlock(struct cfslock *lk, const uint8_t *lvb)
{
	return send_op(lk, LOCK_OP__KIND__UNLOCK, -1, 0, lvb);
}

static int cs_cancel(struct cfslock *lk)
{
	return send_op(lk, LOCK_OP__KIND__CANCEL, -1, 0, NULL);
}

static int cs_recovery_done(struct cfslock_space *s, uint32_t node)
{
	struct cs *cs = s->c->backend;
	uint64_t owners[MAX_MEMBERS];
	size_t n = 0;
	pthread_mutex_lock(&cs->lock);
	for (size_t i = 0; i < cs->nfailed; i++)
		if ((uint32_t)(cs->failed[i] >> 32) == node)
			owners[n++] = cs->failed[i];
	pthread_mutex_unlock(&cs->lock);
	if (n == 0)
		return -ENOENT;
	for (size_t i = 0; i < n; i++) {
		LockOp op = LOCK_OP__INIT;
		op.kind = LOCK_OP__KIND__RECOVERY_DONE;
		op.space = s->name;
		op.owner = cs->owner;
		op.has_lkid = true;
		op.lkid = owners[i]; /* the failed owner */
		Envelope env = ENVELOPE__INIT;
		env.op = &op;
		int rc = multicast(cs, &env);
		if (rc)
			return rc;
	}
	return 0;
}

static int cs_dump(struct cfslock_space *s, lt_visit_fn visit, void *arg)
{
	struct cs *cs = s->c->backend;
	pthread_mutex_lock(&cs->lock);
	struct replica *r = replica(cs, s->name, false);
	if (r)
		lt_walk(r->table, visit, arg);
	pthread_mutex_unlock(&cs->lock);
	return 0;
}

static void cs_forget(struct cfslock *lk)
{
	struct cs *cs = lk->s->c->backend;
	pthread_mutex_lock(&cs->lock);
	struct lkmap_entry **pp = lkmap_slot(cs, lk->lkid);
	struct lkmap_entry *e = *pp;
	if (e) {
		*pp = e->next;
		free(e);
	}
	pthread_mutex_unlock(&cs->lock);
}

/* ---- POSIX record locks ---- */
static int multicast_plock(struct cs *cs, PlockOp *op)
{
	pthread_mutex_lock(&cs->lock);
	op->owner = cs->owner;
	pthread_mutex_unlock(&cs->lock);
	Envelope env = ENVELOPE__INIT;
	env.plock = op;
	return multicast(cs, &env);
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
	struct replica *r = replica(cs, space, false);
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
	const struct replica *r = replica(cs, space, false);
	return !r || (!po_find(r->owners, file) && !pl_file_busy(r->plocks, file) &&
		      !po_recent(r->owners, file, now_ms(), CLAIM_AGAIN_AFTER_MS));
}

static int cs_plock(struct cfslock_space *s, const struct cfslock_plock *l, bool wait,
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
			plock_answered(cs, reqid, rc); /* refused: it still ends */
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

static int cs_plock_cancel(struct cfslock_space *s, uint64_t reqid)
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
	struct replica *r = replica(cs, space, false);
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

static int cs_plock_get(struct cfslock_space *s, const struct cfslock_plock *l,
			struct cfslock_plock *holder, uint32_t *holder_node)
{
	struct cs *cs = s->c->backend;
	int rc = want_others_files(cs, s->name, l->file);
	if (rc)
		return rc;
	pthread_mutex_lock(&cs->lock);
	struct replica *r = replica(cs, s->name, false);
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

static int cs_plock_dump(struct cfslock_space *s, cfslock_plock_dump_fn fn, void *arg)
{
	struct cs *cs = s->c->backend;
	int rc = want_others_files(cs, s->name, 0);
	if (rc)
		return rc;
	struct plock_dump d = {fn, arg};
	pthread_mutex_lock(&cs->lock);
	struct replica *r = replica(cs, s->name, false);
	if (r)
		pl_walk(r->plocks, plock_dump_one, &d);
	pthread_mutex_unlock(&cs->lock);
	return 0;
}

static int cs_plock_close(struct cfslock_space *s, uint64_t file, uint64_t owner,
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
	r = replica(cs, s->name, false);
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

const struct cfslock_backend_ops cfslock_corosync_ops = {
	.name = "corosync", .open = cs_open, .close = cs_close,
	.space_open = cs_space_open, .space_close = cs_space_close,
	.request = cs_request, .convert = cs_convert, .unlock = cs_unlock,
	.cancel = cs_cancel, .recovery_done = cs_recovery_done, .dump = cs_dump,
	.failure_detection_ms = token_timeout_ms,
	.forget = cs_forget,
	.plock = cs_plock, .plock_cancel = cs_plock_cancel, .plock_get = cs_plock_get,
	.plock_dump = cs_plock_dump,
	.plock_close = cs_plock_close,
};
