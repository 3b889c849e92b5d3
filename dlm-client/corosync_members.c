/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The corosync backend's members: who is in the group and of which version, their beats
 * and this process's membership lease, evictions of silent members and of the losing side
 * of a stateful merge (corosync.c, cfslock.h). */
#include "corosync_internal.h"

uint64_t cs_lease_ns(const struct cs *cs) { return (uint64_t)cs->c->lease_ms * 1000000ull; }

/* A thread of ours runs: if none did for a token timeout, the whole process stood still (a
 * pause, SIGSTOP), which decides a stateful merge against us (stateful_merge). */
void cs_tick(struct cs *cs)
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
void *cs_ticker(void *arg)
{
	struct cs *cs = arg;
	const struct timespec period = {.tv_nsec = 50000000};
	struct sched_param rt = {.sched_priority = sched_get_priority_min(SCHED_RR)};
	(void)pthread_setschedparam(pthread_self(), SCHED_RR, &rt); /* else as it was */
	while (__atomic_load_n(&cs->ticking, __ATOMIC_ACQUIRE)) {
		cs_tick(cs);
		uint64_t last = __atomic_load_n(&cs->beat_sent_ns, __ATOMIC_RELAXED);
		if (cfslock_boottime_ns() - last >= (uint64_t)cs->beat_ms * 1000000ull &&
		    write(cs->wake[1], "b", 1) < 0) {
			/* full: the thread has wakeups enough */
		}
		nanosleep(&period, NULL);
	}
	return NULL;
}

/* ---- members ---- */
struct member *cs_member(struct cs *cs, uint32_t nodeid, uint32_t pid)
{
	for (size_t i = 0; i < cs->nmembers; i++)
		if (cs->members[i].nodeid == nodeid && cs->members[i].pid == pid)
			return &cs->members[i];
	return NULL;
}

bool cs_owner_failed(const struct cs *cs, uint64_t owner)
{
	for (size_t i = 0; i < cs->nfailed; i++)
		if (cs->failed[i] == owner)
			return true;
	return false;
}

bool cs_owner_live(const struct cs *cs, uint64_t owner)
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

/* ---- versions (version.h, docs/upgrading.md) ---- */
/* "node N (pid P) speaks VERSION, this node M.m: HOW" to the log. */
void cs_log_meeting(struct cs *cs, int prio, uint32_t nodeid, uint32_t pid,
		    struct lock_version theirs, const char *how)
{
	char text[96], line[224];
	struct lock_version ours = lock_version_own();
	lock_version_text(theirs, text, sizeof text);
	snprintf(line, sizeof line, "node %u (pid %u) speaks %s, this node %u.%u: %s", nodeid, pid,
		 text, ours.major, ours.minor, how);
	cs_log_msg(cs, prio, "%s", line);
}

/* A Hello of a major version we do not speak: the process is never admitted, and the member
 * that would have answered it tells it so. */
static void refuse_hello(struct cs *cs, struct member *m, const Hello *h,
			 struct lock_version theirs)
{
	if (!m->refused)
		cs_log_meeting(cs, LOG_WARNING, m->nodeid, m->pid, theirs, "it is not admitted");
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
	cs_queue_out(cs, &env);
}

/* Our own Hello refused: we speak another major version than the cluster. */
void cs_take_refusal(struct cs *cs, struct lock_version theirs)
{
	char text[96], own[96];
	lock_version_text(theirs, text, sizeof text);
	lock_version_text(lock_version_own(), own, sizeof own);
	snprintf(cs->refusal, sizeof cs->refusal, "the cluster speaks %s; this node speaks %s: "
		 "run a release of the cluster's major version here, or upgrade every node "
		 "(docs/upgrading.md)", text, own);
	cs_log_msg(cs, LOG_ERR, "refused: %s", cs->refusal);
	cs->refused = true;
	pthread_cond_broadcast(&cs->changed);
}

void cs_apply_hello(struct cs *cs, uint32_t nodeid, const Hello *h)
{
	struct member *m = cs_member(cs, nodeid, h->pid);
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
		cs_log_meeting(cs, LOG_INFO, nodeid, h->pid, theirs, "they work together");
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
		cs_answer_hello(cs, h);
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
void cs_evict_self(struct cs *cs, const char *why)
{
	if (cs->evicted)
		return;
	cs->evicted = true;
	cs->lost_quorum = true;
	cs_log_msg(cs, LOG_ERR, "evicted: %s", why);
	cfslock_deliver_evicted(cs->c, why);
	cs_fail_all_local(cs, -CFSLOCK_ENOQUORUM);
}

/* Our beat sent at sent_ns was delivered in a ring with the others: the lease runs from
 * then. */
void cs_confirm_beat(struct cs *cs, uint64_t sent_ns)
{
	uint64_t now = cfslock_boottime_ns();
	uint64_t until = sent_ns + cs_lease_ns(cs);
	if (cs->evicted || until <= now || !cs_ring_quorate(cs))
		return;
	__atomic_store_n(&cs->stalled, false, __ATOMIC_RELEASE); /* nobody removed us meanwhile */
	cfslock_lease_renew(cs->c, until);
}

void cs_apply_beat(struct cs *cs, const Beat *b)
{
	if (b->owner != cs->owner)
		return; /* counted in apply(), as any message of its sender */
	uint64_t now = cfslock_boottime_ns();
	/* Ours: a gap in their coming back (our corosync stood still, or the ring re-formed)
	 * starts a new stretch, from which others' silence is counted (evict_silent). */
	if (now - cs->own_beat_ns > cs_lease_ns(cs))
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
		cs_confirm_beat(cs, b->sent_ns);
	else if (b->sent_ns > cs->unconfirmed_ns)
		cs->unconfirmed_ns = b->sent_ns;
}

void cs_apply_evict(struct cs *cs, const Evict *e)
{
	if (e->owner == cs->owner) {
		char why[128];
		snprintf(why, sizeof why, "the other members had no beat from this process for "
			 "%u ms (it was stopped or hung)", cs->c->evict_ms);
		cs_evict_self(cs, why);
		return;
	}
	struct member *m = cs_member(cs, e->nodeid, e->pid);
	if (m && m->owner == e->owner) {
		char who[64];
		snprintf(who, sizeof who, "%u (pid %u)", e->nodeid, e->pid);
		cs_log_msg(cs, LOG_WARNING, "member on node %s evicted: no beat from it", who);
		cs_member_left(cs, e->nodeid, e->pid); /* its later messages come from nobody */
	}
}

/* From the thread, woken by the ticker: our beat when due.  With another thread sending (it
 * holds send_lock while corosync's flow control makes it try again) or corosync asking to
 * try again, this beat is skipped, and the next wakeup tries. */
void cs_try_beat(struct cs *cs)
{
	uint64_t now = cfslock_boottime_ns();
	pthread_mutex_lock(&cs->lock);
	/* A beat a quarter of a lease apart: the next message of another node, which confirms
	 * it, may come a quarter later.  With four members or more, half a lease apart: the
	 * others' beats then follow ours within a sixth of a lease.  Every beat costs each
	 * member's corosync a delivery: on 14 nodes sharing two cores, beats four times a lease
	 * doubled corosync's CPU time (bench/cluster/randio_nodes.sh). */
	uint64_t beat_ns = (uint64_t)cs->beat_ms * 1000000ull * (cs->nmembers > 3 ? 2 : 1);
	bool due = cs->synced && !cs->evicted && !cs->withdrawn && !cs->lost_quorum && cs->connected &&
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
	(void)cs_multicast(cs, evict_envelope(&env, &e, m->owner, m->nodeid, m->pid));
}

/* From the thread, every round: the eviction of a member silent past evict_ms, counted from
 * the start of the stretch in which our own beats have come back without a gap: a member whose corosync or process stood still must not take the others'
 * silence for theirs.  Not our lease: with one other member, frozen, it runs out (nothing
 * of another node confirms our beats) until we evict that member. */
void cs_evict_silent(struct cs *cs)
{
	uint64_t now = cfslock_boottime_ns();
	pthread_mutex_lock(&cs->lock);
	struct member silent[8];
	size_t nsilent = 0;
	bool hearing = now - cs->own_beat_ns < cs_lease_ns(cs);
	if (cs->synced && !cs->evicted && !cs->lost_quorum && cs_ring_quorate(cs) && hearing &&
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

void cs_member_left(struct cs *cs, uint32_t nodeid, uint32_t pid)
{
	struct member *m = cs_member(cs, nodeid, pid);
	if (!m)
		return;
	uint64_t owner = m->owner;
	*m = cs->members[--cs->nmembers];
	if (owner && !cs_owner_failed(cs, owner) && cs->nfailed < MAX_MEMBERS) {
		cs->failed[cs->nfailed++] = owner;
		for (struct replica *r = cs->replicas; r; r = r->next)
			lt_node_failed(r->table, owner);
		/* A clean unmount let go of every lock: it owned files all the same. */
		if (!cs_forgotten_failed_owner(cs, owner))
			for (struct replica *r = cs->replicas; r; r = r->next) {
				pl_drop(r->plocks, owner, 0, 0, false); /* they go at recovery */
				cs_fail_nowait_on_owned(cs, r, owner);
			}
	}
	if (members_on_node(cs, nodeid) == 0)
		cfslock_deliver_membership(cs->c, nodeid, false);
}

void cs_member_joined(struct cs *cs, uint32_t nodeid, uint32_t pid)
{
	if (cs_member(cs, nodeid, pid) || cs->nmembers == MAX_MEMBERS)
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

void cs_split_before_left(struct cs *cs, const struct cpg_address *left, size_t nleft)
{
	struct split *s = &cs->split;
	for (size_t i = 0; i < nleft; i++) {
		const struct member *m = cs_member(cs, left[i].nodeid, left[i].pid);
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

void cs_split_after_left(struct cs *cs)
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
bool cs_stateful_merge(struct cs *cs, const struct cpg_address *joined, size_t njoined)
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
		cs_evict_self(cs, why);
		return true;
	}
	cs_log_msg(cs, LOG_WARNING, "stateful merge: %s; the other side is evicted", why);
	/* It decides so itself; told all the same, in case its view of the split differs. */
	for (size_t j = 0; j < s->ngone; j++) {
		if (!s->gone[j].back || !s->gone[j].owner)
			continue;
		Evict e = EVICT__INIT;
		Envelope env = ENVELOPE__INIT;
		cs_queue_out(cs, evict_envelope(&env, &e, s->gone[j].owner, s->gone[j].nodeid,
					     s->gone[j].pid));
	}
	return false;
}
