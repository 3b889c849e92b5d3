/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The corosync backend's insides, shared by its files (how it works: corosync.c):
 *   corosync.c           the backend: CPG transport, the ordered stream, quorum, its thread,
 *                        the lock calls
 *   corosync_members.c   members, versions (hellos, refusals), beats, the membership lease,
 *                        evictions, splits and stateful merges
 *   corosync_replica.c   the lockspaces' tables every member keeps, and the lock requests
 *                        applied to them
 *   corosync_snapshot.c  the snapshot that brings a new member up to date, and taking it in
 *   corosync_plock.c     fcntl record locks: requests in the ordered stream, files one member
 *                        owns
 * Functions one file uses of another are named cs_*. */
#ifndef CFS_DLM_CLIENT_COROSYNC_INTERNAL_H
#define CFS_DLM_CLIENT_COROSYNC_INTERNAL_H

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
	bool withdrawn;         /* cfslock_withdraw: no more beats */
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

/* ---- corosync.c ---- */
void cs_log_msg(struct cs *cs, int prio, const char *fmt, const char *arg);
int cs_multicast(struct cs *cs, const Envelope *env);
void cs_queue_out(struct cs *cs, const Envelope *env);
struct lkmap_entry **cs_lkmap_slot(struct cs *cs, uint64_t lkid);
void cs_fail_all_local(struct cs *cs, int status);
int64_t cs_now_ms(void);
void cs_apply(struct cs *cs, uint32_t nodeid, uint32_t pid, const Envelope *env);
bool cs_ring_quorate(struct cs *cs);

/* ---- corosync_members.c ---- */
uint64_t cs_lease_ns(const struct cs *cs);
void cs_tick(struct cs *cs);
void *cs_ticker(void *arg);
struct member *cs_member(struct cs *cs, uint32_t nodeid, uint32_t pid);
bool cs_owner_failed(const struct cs *cs, uint64_t owner);
bool cs_owner_live(const struct cs *cs, uint64_t owner);
void cs_log_meeting(struct cs *cs, int prio, uint32_t nodeid, uint32_t pid,
		    struct lock_version theirs, const char *how);
void cs_take_refusal(struct cs *cs, struct lock_version theirs);
void cs_apply_hello(struct cs *cs, uint32_t nodeid, const Hello *h);
void cs_evict_self(struct cs *cs, const char *why);
void cs_confirm_beat(struct cs *cs, uint64_t sent_ns);
void cs_apply_beat(struct cs *cs, const Beat *b);
void cs_apply_evict(struct cs *cs, const Evict *e);
void cs_try_beat(struct cs *cs);
void cs_evict_silent(struct cs *cs);
void cs_member_left(struct cs *cs, uint32_t nodeid, uint32_t pid);
void cs_member_joined(struct cs *cs, uint32_t nodeid, uint32_t pid);
void cs_split_before_left(struct cs *cs, const struct cpg_address *left, size_t nleft);
void cs_split_after_left(struct cs *cs);
bool cs_stateful_merge(struct cs *cs, const struct cpg_address *joined, size_t njoined);

/* ---- corosync_replica.c ---- */
struct replica *cs_replica(struct cs *cs, const char *name, bool create);
void cs_drop_replicas(struct cs *cs);
void cs_apply_op(struct cs *cs, const LockOp *op);
void cs_answer_sender(struct cs *cs, uint64_t sender, uint64_t reqid, int status);

/* ---- corosync_snapshot.c ---- */
void cs_snap_add_plock(void *arg, const struct pl_lock *l, uint64_t reqid);
void cs_free_builder_plocks(struct snap_builder *b);
void cs_answer_hello(struct cs *cs, const Hello *h);
void cs_lease_from_sync(struct cs *cs);
void cs_restore_plock(struct replica *r, const SnapshotPlock *p);
void cs_hold_back(struct po_file *f, const PlockOp *op);
void cs_take_snapshot(struct cs *cs, const Snapshot *s);

/* ---- corosync_plock.c ---- */
void cs_plock_answered(struct cs *cs, uint64_t reqid, int status);
void cs_plock_emit(void *arg, const struct pl_event *ev);
void cs_release_failed_owner(struct cs *cs, struct replica *r, uint64_t owner);
void cs_apply_plock(struct cs *cs, const PlockOp *op, bool replayed);
void cs_fail_nowait_on_owned(struct cs *cs, struct replica *r, uint64_t owner);
bool cs_forgotten_failed_owner(struct cs *cs, uint64_t owner);
int cs_plock(struct cfslock_space *s, const struct cfslock_plock *l, bool wait,
	     cfslock_plock_done_fn done, void *arg, uint64_t reqid);
int cs_plock_cancel(struct cfslock_space *s, uint64_t reqid);
int cs_plock_get(struct cfslock_space *s, const struct cfslock_plock *l,
		 struct cfslock_plock *holder, uint32_t *holder_node);
int cs_plock_dump(struct cfslock_space *s, cfslock_plock_dump_fn fn, void *arg);
int cs_plock_close(struct cfslock_space *s, uint64_t file, uint64_t owner,
		   cfslock_plock_done_fn done, void *arg, uint64_t reqid);

#endif
