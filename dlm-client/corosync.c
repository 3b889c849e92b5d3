/* SPDX-License-Identifier: LGPL-2.1-or-later */
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
#include "corosync_internal.h"

void cs_log_msg(struct cs *cs, int prio, const char *fmt, const char *arg)
{
	char what[224], line[256];
	snprintf(what, sizeof what, fmt, arg);
	snprintf(line, sizeof line, "node %u: %s", cs->nodeid, what);
	if (cs->c->events.log)
		cs->c->events.log(cs->c->events.arg, prio, line);
	else
		syslog(prio, "cfslock %s", line);
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

int cs_multicast(struct cs *cs, const Envelope *env)
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
void cs_queue_out(struct cs *cs, const Envelope *env)
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
	cs_queue_out(cs, &env);
}

/* ---- local lock handles by lock id ---- */
struct lkmap_entry **cs_lkmap_slot(struct cs *cs, uint64_t lkid)
{
	struct lkmap_entry **pp = &cs->lkmap[lkid % LKMAP_BUCKETS];
	while (*pp && (*pp)->lkid != lkid)
		pp = &(*pp)->next;
	return pp;
}

static int lkmap_add(struct cs *cs, struct cfslock *lk)
{
	struct lkmap_entry **pp = cs_lkmap_slot(cs, lk->lkid);
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
void cs_fail_all_local(struct cs *cs, int status)
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

int64_t cs_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void cs_apply(struct cs *cs, uint32_t nodeid, uint32_t pid, const Envelope *env)
{
	/* Any message shows its sender alive: a member busy sending (its beats wait behind
	 * corosync's flow control) is not silent. */
	struct member *from = cs_member(cs, nodeid, pid);
	if (from && from->refused && !env->hello)
		return;
	if (from)
		from->last_beat_ns = cfslock_boottime_ns();
	if (nodeid != cs->nodeid && cs->unconfirmed_ns) {
		cs_confirm_beat(cs, cs->unconfirmed_ns);
		cs->unconfirmed_ns = 0;
	}
	if (env->hello)
		cs_apply_hello(cs, nodeid, env->hello);
	else if (env->snapshot) {
		for (size_t i = 0; i < cs->nmembers; i++)
			if (cs->members[i].owner == env->snapshot->for_owner &&
			    cs->members[i].hello_seq == env->snapshot->for_seq)
				cs->members[i].synced = true;
	} else if (env->op)
		cs_apply_op(cs, env->op);
	else if (env->plock)
		cs_apply_plock(cs, env->plock, false);
	else if (env->beat)
		cs_apply_beat(cs, env->beat);
	else if (env->evict)
		cs_apply_evict(cs, env->evict);
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
		cs_apply(cs, nodeid, pid, env);
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
			cs_take_refusal(cs, theirs);
		} else {
			if (meeting == LOCK_OTHER_MINOR)
				cs_log_meeting(cs, LOG_INFO, nodeid, pid, theirs, "they work together");
			cs_take_snapshot(cs, sn);
		}
	} else if (env->refusal && env->refusal->for_owner == cs->owner &&
		   env->refusal->for_seq == cs->hello_seq) {
		const Refusal *r = env->refusal;
		cs_take_refusal(cs, lock_version_said(true, r->proto_major, r->proto_minor, r->release));
	} else {
		buffer_message(cs, nodeid, pid, msg, len);
	}
	pthread_mutex_unlock(&cs->lock);
	envelope__free_unpacked(env, NULL);
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
			cs_lease_from_sync(cs);
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
			cs_evict_self(cs, "nodes left the membership while this process stood still "
				       "(a pause or a freeze): the others may have removed it");
			pthread_mutex_unlock(&cs->lock);
			return;
		}
	cs_split_before_left(cs, left, nleft);
	for (size_t i = 0; i < nleft; i++)
		cs_member_left(cs, left[i].nodeid, left[i].pid);
	cs_split_after_left(cs);
	if (cs_stateful_merge(cs, joined, njoined)) {
		pthread_mutex_unlock(&cs->lock);
		return;
	}
	for (size_t i = 0; i < njoined; i++)
		cs_member_joined(cs, joined[i].nodeid, joined[i].pid);
	pthread_mutex_unlock(&cs->lock);
}


/* Asked of corosync once after each membership change (a quorum notification does not come
 * for every ring: one re-formed with the same members after a lost token brings none, and
 * waiting for it left leases out for good on a loaded machine); a loss of quorum after that
 * comes as a notification. */
bool cs_ring_quorate(struct cs *cs)
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
		cs_log_msg(cs, LOG_ERR, "lost quorum%s", ": lock calls fail until it returns");
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
	cs_fail_all_local(cs, -CFSLOCK_ENOQUORUM);
	cs_drop_replicas(cs);
	cs->nmembers = cs->nfailed = 0;
	cs->synced = cs->hello_seen = false;
	cs->lost_quorum = cs->evicted = false;
	cs->owner = new_owner(cs->nodeid);
	pthread_mutex_unlock(&cs->lock);
	cs_log_msg(cs, LOG_NOTICE, "quorum is back; %s", "rejoining the lock group");
	join_group(cs);
}

static void *cs_thread(void *arg)
{
	struct cs *cs = arg;
	int cpg_fd = -1, q_fd = -1;
	quorum_fd_get(cs->quorum, &q_fd);
	pthread_t tk;
	__atomic_store_n(&cs->ticking, true, __ATOMIC_RELEASE);
	bool ticker_runs = pthread_create(&tk, NULL, cs_ticker, cs) == 0;
	while (!cs->stop && cs->connected) {
		cpg_fd_get(cs->cpg, &cpg_fd); /* a rejoin opens a new connection */
		send_outbox(cs);
		struct pollfd p[3] = {{.fd = cpg_fd, .events = POLLIN},
				      {.fd = q_fd, .events = POLLIN},
				      {.fd = cs->wake[0], .events = POLLIN}};
		int wait_ms = cs->beat_ms < 200 ? (int)cs->beat_ms : 200;
		int ready = poll(p, 3, wait_ms);
		cs_tick(cs); /* before anything delivered after a pause is looked at */
		if (ready < 0)
			continue;
		if (p[2].revents) {
			char b[16];
			if (read(cs->wake[0], b, sizeof b) < 0) {
				/* nothing: the wakeup did its job */
			}
		}
		cs_try_beat(cs);
		if (p[1].revents && quorum_dispatch(cs->quorum, CS_DISPATCH_ALL) != CS_OK)
			p[0].revents |= POLLHUP;
		if (p[0].revents && cpg_dispatch(cs->cpg, CS_DISPATCH_ALL) != CS_OK) {
			/* corosync is gone: no quorum, no locks, until someone restarts us */
			pthread_mutex_lock(&cs->lock);
			bool was = cs->connected;
			cs->connected = cs->quorate = false;
			cs_fail_all_local(cs, -CFSLOCK_ENOQUORUM);
			pthread_cond_broadcast(&cs->changed);
			pthread_mutex_unlock(&cs->lock);
			if (was)
				cfslock_deliver_quorum(cs->c, false);
			break;
		}
		cs_evict_silent(cs);
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

/* Beats stop; the others' eviction and recovery do the rest (corosync_members.c). */
static int cs_withdraw(struct cfslock_client *c)
{
	struct cs *cs = c->backend;
	pthread_mutex_lock(&cs->lock);
	cs->withdrawn = true;
	pthread_mutex_unlock(&cs->lock);
	return 0;
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
	cs_drop_replicas(cs);
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
	return cs_multicast(cs, &env);
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
		int rc = cs_multicast(cs, &env);
		if (rc)
			return rc;
	}
	return 0;
}

static int cs_dump(struct cfslock_space *s, lt_visit_fn visit, void *arg)
{
	struct cs *cs = s->c->backend;
	pthread_mutex_lock(&cs->lock);
	struct replica *r = cs_replica(cs, s->name, false);
	if (r)
		lt_walk(r->table, visit, arg);
	pthread_mutex_unlock(&cs->lock);
	return 0;
}

static void cs_forget(struct cfslock *lk)
{
	struct cs *cs = lk->s->c->backend;
	pthread_mutex_lock(&cs->lock);
	struct lkmap_entry **pp = cs_lkmap_slot(cs, lk->lkid);
	struct lkmap_entry *e = *pp;
	if (e) {
		*pp = e->next;
		free(e);
	}
	pthread_mutex_unlock(&cs->lock);
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
	.withdraw = cs_withdraw,
};
