/* SPDX-License-Identifier: GPL-2.0-or-later */
/* cfsd's side of the control socket: status, grow, and the ODM clients' requests.
 *
 * A database node has hundreds to thousands of ODM clients (every process of every instance
 * connects), so no thread is a client's: one thread reads every connection (epoll), answers
 * revoke acknowledgements at once (a revoke in a worker waits for them), and queues the other
 * requests; a pool of workers serves them, one request per connection at a time, in order.
 * Workers are started as requests wait for one, up to MAX_WORKERS, and stay. */
#include "release.h"
#include "cfs/control.h"
#include "cfs/internal.h"
#include "cfsd/dev_direct.h"
#include "cfsd/fuse_ops.h"
#include "cfsd/fuse_uring.h"
#include "cfsd/quota_server.h"
#include "cfsd/odm_server.h"
#include "cfsd/check_server.h"
#include "cfsd/restripe.h"
#include "dlm-client/cfslock.h"
#include "proto/control.pb-c.h"
#include "tools/common.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#define MAX_WORKERS 64
#define MAX_QUEUED 16 /* a client sends one request at a time: this only bounds a rogue */

struct conn;
struct cfs_control {
	struct cfsd *d;
	int fd, wake[2], epoll;
	char path[108];
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t conns_changed, work;
	struct conn *conns;         /* open; closed ones may still be served, counted in nalive */
	unsigned nalive;
	struct conn *run_head, *run_tail; /* connections with a request and no worker */
	pthread_t workers[MAX_WORKERS];
	unsigned nworkers, idle;
	bool stopping;
};

/* The volume again, as its config is now (grown by `cvm grow`). */
static int open_again(struct cfsd *d, struct cvm_volume **vol)
{
	struct cvm_scan scan;
	*vol = NULL;
	int rc = cvm_scan_paths(d->scan->paths, d->scan->n, &scan);
	if (!rc) {
		rc = cvm_volume_open(&scan, d->volume, CVM_OPEN_RDWR, vol);
		cvm_scan_free(&scan);
	}
	return rc;
}

int cfsd_reopen_volume(void *arg, struct cvm_volume **vol)
{
	struct cfsd *d = arg;
	struct cvm_volume **v = realloc(d->reopened, (d->nreopened + 1) * sizeof *v);
	if (!v)
		return -ENOMEM;
	d->reopened = v;
	int rc = open_again(d, vol);
	if (rc)
		cfs_log(d->fs, "volume %s: %s", d->volume, cvm_last_error());
	else
		v[d->nreopened++] = *vol;
	return rc;
}

static int grow(struct cfsd *d, uint64_t *added, char *msg, size_t msglen)
{
	struct cvm_volume *vol;
	int rc = open_again(d, &vol);
	if (rc) {
		snprintf(msg, msglen, "volume %s: %s", d->volume, cvm_last_error());
		return rc;
	}
	rc = cfs_grow(d->fs, vol, added);
	if (rc) {
		snprintf(msg, msglen, "%s", cfs_last_error());
		cvm_volume_close(vol);
		return rc;
	}
	/* The filesystem now uses the new handle; the old one is ours to close. */
	struct cvm_volume *old = d->vol;
	d->vol = vol;
	cvm_volume_close(old);
	return 0;
}

/* RESTRIPE: start it as the request asks. */
static int restripe_asked(struct cfsd *d, const ControlRequest *req, char *msg, size_t msglen)
{
	cvm_uuid luns[CVM_MAX_LUNS];
	struct cvm_restripe_opts asked = {.stripe_width = req->has_size ? req->size : 0,
					  .rate_bytes = req->has_rate ? req->rate : 0,
					  .luns = luns, .nluns = (uint32_t)req->n_luns};
	/* Checked here, so that a bad request is refused, not started to fail a moment later. */
	if (asked.stripe_width && cvm_check_stripe_width(asked.stripe_width)) {
		snprintf(msg, msglen, "restripe: %s", cvm_last_error());
		return -EINVAL;
	}
	const struct cvm_config *cfg = cvm_volume_config(d->fs->vol);
	for (size_t i = 0; i < req->n_luns; i++) {
		if (i == CVM_MAX_LUNS || req->luns[i].len != sizeof luns[i].b) {
			snprintf(msg, msglen, "a restripe request names a LUN by something not a uuid");
			return -EINVAL;
		}
		memcpy(luns[i].b, req->luns[i].data, sizeof luns[i].b);
		bool member = false;
		for (uint32_t k = 0; k < cfg->nluns; k++)
			member |= cvm_uuid_equal(&cfg->luns[k].uuid, &luns[i]);
		if (!member) {
			char u[CVM_UUID_STR];
			cvm_uuid_format(&luns[i], u);
			snprintf(msg, msglen, "restripe: LUN %s is not one of volume %s's", u, d->volume);
			return -EINVAL;
		}
	}
	return cfsd_restripe_start(d, &asked, false, msg, msglen);
}

/* nodes and node_ptrs: room for the mounted nodes, then the recovering ones. */
static void fill_nodes(MountedNode *nodes, MountedNode **ptrs, uint32_t n, const uint32_t *slot,
		       const uint32_t *node)
{
	for (uint32_t i = 0; i < n; i++) {
		mounted_node__init(&nodes[i]);
		nodes[i].slot = slot[i];
		nodes[i].node_id = node[i];
		ptrs[i] = &nodes[i];
	}
}

static void fill_status(struct cfsd *d, ControlStatus *s, struct cfs_status *st,
			MountedNode *nodes, MountedNode **node_ptrs)
{
	cfs_status(d->fs, st);
	s->lockproto = st->lockproto;
	s->features = st->features;
	s->release = (char *)CFS_RELEASE;
	s->has_node_id = s->has_lock_messages = s->has_fenced = s->has_fence_interval_ms = true;
	s->node_id = st->node_id;
	s->lock_messages = st->lock_messages;
	s->has_lock_waits = s->has_lock_wait_ms = true;
	s->lock_waits = st->lock_waits;
	s->lock_wait_ms = st->lock_wait_ms;
	s->fenced = st->fenced;
	s->fence_interval_ms = st->fence_interval_ms;
	s->has_lease_ms = s->has_evict_ms = s->has_evicted = s->has_beat_gap_max_ms = true;
	s->beat_gap_max_ms = st->beat_gap_max_ms;
	s->lease_ms = st->lease_ms;
	s->evict_ms = st->evict_ms;
	s->evicted = st->evicted;
	s->has_locks_cached = s->has_lock_cache_limit = s->has_locks_given_back = true;
	s->locks_cached = st->locks_cached;
	s->lock_cache_limit = st->lock_cache_limit;
	s->locks_given_back = st->locks_given_back;
	fill_nodes(nodes, node_ptrs, st->nmounted, st->mounted_slot, st->mounted_node);
	s->n_mounted = st->nmounted;
	s->mounted = node_ptrs;
	fill_nodes(nodes + st->nmounted, node_ptrs + st->nmounted, st->nrecovering,
		   st->recovering_slot, st->recovering_node);
	s->n_recovering = st->nrecovering;
	s->recovering = node_ptrs + st->nmounted;
	s->volume = (char *)d->volume;
	static _Thread_local char vol_uuid[CVM_UUID_STR]; /* until this thread's reply is sent */
	cvm_uuid_format(&cvm_volume_config(d->fs->vol)->vol_uuid, vol_uuid);
	s->volume_uuid = vol_uuid;
	s->label = st->label;
	s->fs_uuid = st->fs_uuid;
	s->block_size = (uint32_t)st->block_size;
	s->total_blocks = st->total_blocks;
	s->free_blocks = st->free_blocks;
	s->groups = st->nags;
	s->slot = st->slot;
	s->slots = st->nslots;
	s->dboptimized = d->fs_dboptimized;
	s->has_writeback = true;
	s->writeback = d->writeback;
	s->has_kernel_names = true;
	s->kernel_names = !d->cluster || __atomic_load_n(&d->names_cached, __ATOMIC_ACQUIRE);
	s->commits = st->stats.commits;
	s->commit_blocks = st->stats.commit_blocks;
	s->has_journal_anchors = true;
	s->journal_anchors = st->stats.anchors;
	struct fuse_uring *u = __atomic_load_n(&d->uring, __ATOMIC_ACQUIRE);
	s->has_uring_requests = u != NULL;
	s->uring_requests = fuse_uring_answered(u);
	s->has_uring_direct = u != NULL;
	s->uring_direct = fuse_uring_direct(u);
	s->has_uring_waiting = u != NULL;
	s->uring_waiting = fuse_uring_waiting(u);
	struct dev_direct *direct = __atomic_load_n(&d->dev_direct, __ATOMIC_ACQUIRE);
	s->has_dev_direct = direct != NULL;
	s->dev_direct = dev_direct_answered(direct);
	s->has_checkpoint_blocks = true;
	s->checkpoint_blocks = st->stats.home_blocks;
	s->has_writebehind_mib = s->has_behind_writes = s->has_behind_flushed = true;
	s->has_behind_kept = true;
	s->writebehind_mib = st->writebehind_mib;
	s->behind_writes = st->stats.behind_writes;
	s->behind_flushed = st->stats.behind_flushed;
	s->behind_kept = st->stats.behind_kept;
	s->has_inodes_read_ahead = true;
	s->inodes_read_ahead = st->stats.inodes_read_ahead;
	s->has_flushes = true;
	s->flushes = st->stats.flushes;
	s->reads = st->stats.reads;
	s->writes = st->stats.writes;
	s->read_bytes = st->stats.read_bytes;
	s->write_bytes = st->stats.write_bytes;
	s->pid = getpid();
	s->has_odm_clients = s->has_odm_files = true;
	odm_counts(d->odm, &s->odm_clients, &s->odm_files);
}

/* The volume's LUNs for a status: their paths copied, since a grow may swap the handle
 * before the reply is sent. */
struct lun_list {
	LunStatus *luns;
	LunStatus **ptrs;
};

static void lun_list_fill(struct cfsd *d, ControlStatus *s, struct lun_list *l)
{
	struct cfs_fs *fs = d->fs;
	pthread_rwlock_rdlock(&fs->vol_lock);
	uint32_t n = cvm_volume_config(fs->vol)->nluns;
	l->luns = calloc(n, sizeof *l->luns);
	l->ptrs = calloc(n, sizeof *l->ptrs);
	for (uint32_t i = 0; l->luns && l->ptrs && i < n; i++) {
		char *path = strdup(cvm_volume_lun_path(fs->vol, i));
		if (!path)
			break;
		lun_status__init(&l->luns[i]);
		l->luns[i].path = path;
		l->luns[i].io_errors = cvm_volume_lun_errors(fs->vol, i);
		l->ptrs[s->n_luns++] = &l->luns[i];
	}
	pthread_rwlock_unlock(&fs->vol_lock);
	s->luns = l->ptrs;
}

static void lun_list_free(struct lun_list *l, size_t n)
{
	for (size_t i = 0; l->luns && i < n; i++)
		free(l->luns[i].path);
	free(l->luns);
	free(l->ptrs);
}

/* A request waiting for a worker. */
struct request {
	ControlRequest *req;
	bool malformed; /* not what its encoding said (see take_message) */
	struct request *next;
};

/* A client.  Its reads happen in the control thread alone (the partial message lives here
 * between them); everything else under ctl->lock. */
struct conn {
	struct cfs_control *ctl;
	int fd;
	pthread_mutex_t send_lock;
	uint8_t hdr[4];
	uint32_t got, len; /* of the header, then of the body */
	uint8_t *body;
	struct request *queue, *queue_tail;
	unsigned queued;
	bool serving, in_run, closing;
	struct odm_client *odm;
	struct conn *next, *run_next;
	/* its reports of failed LUN I/O: said at most every 10 s, with what came meanwhile */
	time_t lun_errors_said;
	uint64_t lun_errors_unsaid;
};

/* ---- the lock table (cfs locks) ---- */
#define LOCKS_SHOWN 5000 /* a reply stays well under CFS_CONTROL_MAX */
struct lock_list {
	LockInfo *v;
	LockInfo **ptrs;
	size_t n, cap, left_out;
	int error;
};

static char *dup_or_fail(struct lock_list *l, const char *s)
{
	char *d = strdup(s);
	if (!d)
		l->error = -ENOMEM;
	return d;
}

static void add_lock(void *arg, const struct cfs_lock_info *x)
{
	struct lock_list *l = arg;
	if (l->error)
		return;
	if (l->n == LOCKS_SHOWN) {
		l->left_out++;
		return;
	}
	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 32;
		LockInfo *v = realloc(l->v, cap * sizeof *v);
		if (!v) {
			l->error = -ENOMEM;
			return;
		}
		l->v = v;
		l->cap = cap;
	}
	LockInfo *i = &l->v[l->n];
	lock_info__init(i);
	i->resource = dup_or_fail(l, x->resource);
	i->object = dup_or_fail(l, x->object);
	i->has_ino = x->ino != 0;
	i->ino = x->ino;
	i->path = x->path ? dup_or_fail(l, x->path) : NULL;
	i->node_id = x->node;
	i->owner = x->owner;
	i->granted = (char *)cfslock_mode_name(x->granted);
	i->requested = (char *)cfslock_mode_name(x->requested);
	i->state = dup_or_fail(l, x->state);
	i->has_recovering = true;
	i->recovering = x->recovering;
	l->n++;
}

static void lock_list_free(struct lock_list *l)
{
	for (size_t i = 0; i < l->n; i++) {
		free(l->v[i].resource);
		free(l->v[i].object);
		free(l->v[i].path);
		free(l->v[i].state);
	}
	free(l->v);
	free(l->ptrs);
}

/* The reply points into l until it is sent. */
static int fill_locks(struct cfsd *d, ControlReply *reply, struct lock_list *l)
{
	int rc = cfs_locks(d->fs, add_lock, l);
	rc = rc ? rc : l->error;
	if (!rc && l->n && !(l->ptrs = calloc(l->n, sizeof *l->ptrs)))
		rc = -ENOMEM;
	for (size_t i = 0; !rc && i < l->n; i++)
		l->ptrs[i] = &l->v[i];
	if (!rc) {
		reply->n_locks = l->n;
		reply->locks = l->ptrs;
	}
	return rc;
}

static void send_reply(struct conn *c, const ControlReply *reply, int pass)
{
	cfs_control_send_message_fd(c->fd, &c->send_lock, &reply->base, pass);
}

static void serve(struct conn *c, const ControlRequest *req, bool malformed)
{
	struct cfsd *d = c->ctl->d;
	ControlReply reply = CONTROL_REPLY__INIT;
	ControlStatus status = CONTROL_STATUS__INIT;
	struct cfs_status st;
	MountedNode nodes[2 * CFS_STATUS_MAX_NODES], *node_ptrs[2 * CFS_STATUS_MAX_NODES];
	struct odm_reply_mem mem = {0};
	struct lock_list locks = {0};
	int pass = -1;
	struct quota_reply_mem quota = {0};
	struct check_reply_mem check = {0};
	if (malformed) {
		reply.error = EINVAL;
		reply.message = "the request is not as it was sent: a string with a NUL byte in it, "
				"a field given twice or an encoding longer than needed; nothing done";
		cfs_log(d->fs, "control: %s sent a malformed request (op %d): refused",
			odm_client_owner(c->odm), (int)req->op);
	} else if (quota_is_request(req)) {
		quota_handle(d, odm_client_uid(c->odm), req, &reply, &quota);
	} else if (!odm_is_request(req) && req->op != CONTROL_REQUEST__OP__STATUS &&
		   odm_client_uid(c->odm) != 0) {
		reply.error = EPERM;
		reply.message = "only root may do this (members of odm_group may use libodm)";
	} else if (check_is_request(req)) {
		check_handle(d, req, &reply, &check);
	} else if (req->op == CONTROL_REQUEST__OP__GROW && cfsd_restripe_running(d)) {
		reply.error = EBUSY;
		reply.message = "the volume is being restriped: grow after it is done";
	} else if (req->op == CONTROL_REQUEST__OP__RESTRIPE) {
		int rc = restripe_asked(d, req, mem.message, sizeof mem.message);
		reply.error = -rc;
		if (rc)
			reply.message = mem.message;
	} else if (req->op == CONTROL_REQUEST__OP__RESTRIPE_STOP) {
		if (cfsd_restripe_stop(d)) {
			reply.error = ENOENT;
			reply.message = "no restripe runs here";
		}
	} else if (req->op == CONTROL_REQUEST__OP__GROW) {
		uint64_t added = 0;
		/* Maps handed out name the old layout: every one goes first. */
		int rc = odm_revoke_begin(d->odm, 0, NULL, mem.message, sizeof mem.message);
		if (!rc) {
			rc = grow(d, &added, mem.message, sizeof mem.message);
			odm_revoke_end(d->odm, 0);
		}
		reply.error = -rc;
		reply.has_added_blocks = !rc;
		reply.added_blocks = added;
		if (rc)
			reply.message = mem.message;
	} else if (req->op == CONTROL_REQUEST__OP__ADD_SLOTS) {
		uint32_t nslots;
		int rc = cfs_add_slots(d->fs, req->has_size && req->size <= CFS_MAX_SLOTS
						      ? (uint32_t)req->size : 0, &nslots);
		reply.error = -rc;
		if (rc) {
			snprintf(mem.message, sizeof mem.message, "%s", cfs_last_error());
			reply.message = mem.message;
		}
	} else if (req->op == CONTROL_REQUEST__OP__READ_ONLY && req->has_size && req->size > 1) {
		reply.error = EINVAL;
		reply.message = "read-only: size 1 (refuse changes) or 0 (take them again)";
	} else if (req->op == CONTROL_REQUEST__OP__READ_ONLY) {
		int rc = cfs_set_read_only(d->fs, req->has_size && req->size);
		reply.error = -rc;
		if (rc) {
			snprintf(mem.message, sizeof mem.message, "%s",
				 rc == -EROFS ? "read-only since it was mounted, or since an I/O error "
						"(the daemon's log says which): unmount and mount it again"
					      : strerror(-rc));
			reply.message = mem.message;
		}
	} else if (req->op == CONTROL_REQUEST__OP__SYNC) {
		int rc = cfs_sync(d->fs);
		reply.error = -rc;
		if (rc) {
			snprintf(mem.message, sizeof mem.message,
				 "writing back to the LUNs of %s failed: %s (the daemon's log says more)",
				 d->volume, strerror(-rc));
			reply.message = mem.message;
		}
	} else if (req->op == CONTROL_REQUEST__OP__LOCKS) {
		int rc = fill_locks(d, &reply, &locks);
		reply.error = -rc;
		if (rc || locks.left_out) {
			if (rc)
				snprintf(mem.message, sizeof mem.message, "the lock table: %s",
					 strerror(-rc));
			else
				snprintf(mem.message, sizeof mem.message, "%zu more locks not shown",
					 locks.left_out);
			reply.message = mem.message;
		}
	} else if (req->op == CONTROL_REQUEST__OP__ODM_LEASE) {
		pass = cfs_lease_fd(d->fs); /* none (-ENOENT) on one node: no lease to wait for */
		reply.error = pass < 0 && pass != -ENOENT ? -pass : 0;
	} else if (odm_is_request(req)) {
		odm_handle(c->odm, req, &reply, &mem);
	} else if (req->op != CONTROL_REQUEST__OP__STATUS) {
		reply.error = EINVAL;
		snprintf(mem.message, sizeof mem.message, "request %d is not one this daemon (release "
			 "%s) knows: a newer tool's?", (int)req->op, CFS_RELEASE);
		reply.message = mem.message;
	}
	RestripeStatus restripe;
	char restripe_state[16], restripe_error[256];
	struct lun_list luns = {0};
	if (!reply.error && (req->op == CONTROL_REQUEST__OP__STATUS ||
			     req->op == CONTROL_REQUEST__OP__GROW || req->op == CONTROL_REQUEST__OP__SYNC ||
			     req->op == CONTROL_REQUEST__OP__ADD_SLOTS)) {
		fill_status(d, &status, &st, nodes, node_ptrs);
		lun_list_fill(d, &status, &luns);
		quota_status(d, &reply, &quota);
		if (cfsd_restripe_status(d, &restripe, restripe_state, restripe_error))
			status.restripe = &restripe;
		reply.status = &status;
	}
	send_reply(c, &reply, pass);
	if (pass >= 0)
		close(pass);
	odm_reply_mem_free(&mem);
	quota_reply_mem_free(&quota);
	check_reply_mem_free(&check);
	lock_list_free(&locks);
	lun_list_free(&luns, status.n_luns);
}

static void conn_free(struct conn *c)
{
	odm_client_gone(c->odm);
	close(c->fd);
	while (c->queue) {
		struct request *r = c->queue;
		c->queue = r->next;
		control_request__free_unpacked(r->req, NULL);
		free(r);
	}
	free(c->body);
	pthread_mutex_destroy(&c->send_lock);
	struct cfs_control *ctl = c->ctl;
	free(c);
	pthread_mutex_lock(&ctl->lock);
	ctl->nalive--;
	pthread_cond_broadcast(&ctl->conns_changed);
	pthread_mutex_unlock(&ctl->lock);
}

/* Off the list; freed now, or by the worker serving it when it is done (ctl->lock held).
 * True if the caller is to free it. */
static bool conn_close_locked(struct conn *c)
{
	struct cfs_control *ctl = c->ctl;
	if (!c->closing) {
		c->closing = true;
		for (struct conn **p = &ctl->conns; *p; p = &(*p)->next)
			if (*p == c) {
				*p = c->next;
				break;
			}
	}
	return !c->serving && !c->in_run;
}

static struct conn *run_pop(struct cfs_control *ctl)
{
	struct conn *c = ctl->run_head;
	ctl->run_head = c->run_next;
	if (!ctl->run_head)
		ctl->run_tail = NULL;
	c->in_run = false;
	return c;
}

static void run_push(struct cfs_control *ctl, struct conn *c)
{
	c->run_next = NULL;
	c->in_run = true;
	if (ctl->run_tail)
		ctl->run_tail->run_next = c;
	else
		ctl->run_head = c;
	ctl->run_tail = c;
}

static void *worker_thread(void *arg)
{
	struct cfs_control *ctl = arg;
	pthread_mutex_lock(&ctl->lock);
	for (;;) {
		ctl->idle++;
		while (!ctl->run_head && !ctl->stopping)
			pthread_cond_wait(&ctl->work, &ctl->lock);
		ctl->idle--;
		if (!ctl->run_head)
			break;
		struct conn *c = run_pop(ctl);
		if (!c->closing) {
			struct request *r = c->queue;
			c->queue = r->next;
			if (!c->queue)
				c->queue_tail = NULL;
			c->queued--;
			c->serving = true;
			pthread_mutex_unlock(&ctl->lock);
			serve(c, r->req, r->malformed);
			control_request__free_unpacked(r->req, NULL);
			free(r);
			pthread_mutex_lock(&ctl->lock);
			c->serving = false;
		}
		if (c->closing) {
			pthread_mutex_unlock(&ctl->lock);
			conn_free(c);
			pthread_mutex_lock(&ctl->lock);
		} else if (c->queue) {
			run_push(ctl, c); /* behind the others: one request per turn */
		}
	}
	pthread_mutex_unlock(&ctl->lock);
	return NULL;
}

/* A request for the workers (ctl->lock held); a worker more if none is idle. */
static int queue_request(struct conn *c, ControlRequest *req, bool malformed)
{
	struct cfs_control *ctl = c->ctl;
	struct request *r = malloc(sizeof *r);
	if (!r || c->queued == MAX_QUEUED) {
		free(r);
		return -ENOBUFS;
	}
	*r = (struct request){.req = req, .malformed = malformed};
	if (c->queue_tail)
		c->queue_tail->next = r;
	else
		c->queue = r;
	c->queue_tail = r;
	c->queued++;
	if (!c->serving && !c->in_run)
		run_push(ctl, c);
	if (!ctl->idle && ctl->nworkers < MAX_WORKERS &&
	    !pthread_create(&ctl->workers[ctl->nworkers], NULL, worker_thread, ctl))
		ctl->nworkers++;
	pthread_cond_signal(&ctl->work);
	return 0;
}

/* A whole message from the client.  False: the connection is to be closed. */
/* An ODM client's failed LUN I/O, counted with the daemon's own (cfs status); a report that
 * names no LUN of the volume, or counts none or absurdly many, is logged and dropped. */
static void odm_lun_errors(struct conn *c, const ControlRequest *req, bool malformed)
{
	struct cfs_fs *fs = c->ctl->d->fs;
	cvm_uuid lun;
	uint32_t index = 0;
	bool sound = !malformed && req->n_luns == 1 && req->luns[0].len == sizeof lun.b &&
		     req->has_size && req->size > 0 && req->size <= UINT32_MAX;
	if (sound)
		memcpy(lun.b, req->luns[0].data, sizeof lun.b);
	pthread_rwlock_rdlock(&fs->vol_lock);
	int rc = sound ? cvm_volume_count_errors(fs->vol, &lun, req->size, &index) : -EINVAL;
	const char *path = rc ? NULL : cvm_volume_lun_path(fs->vol, index);
	time_t now = time(NULL);
	if (!rc)
		c->lun_errors_unsaid += req->size;
	if (rc)
		cfs_log(fs, "control: %s reported failed LUN I/O of no LUN of this volume, or a "
			"count of none or too many: ignored", odm_client_owner(c->odm));
	else if (now - c->lun_errors_said >= 10) {
		cfs_log(fs, "LUN %u (%s): %llu failed I/O of ODM client %s since its last such line "
			"(its log says which)", index, path, (unsigned long long)c->lun_errors_unsaid,
			odm_client_owner(c->odm));
		c->lun_errors_said = now;
		c->lun_errors_unsaid = 0;
	}
	pthread_rwlock_unlock(&fs->vol_lock);
}

static bool take_message(struct conn *c, uint8_t *msg, uint32_t len)
{
	ControlRequest *req = control_request__unpack(NULL, len, msg);
	if (!req) {
		ControlReply bad = CONTROL_REPLY__INIT;
		bad.error = EBADMSG;
		bad.message = "not a control request";
		send_reply(c, &bad, -1);
		return false;
	}
	/* protobuf-c ends a string at its first NUL byte and keeps the last of a field given
	 * twice: what the daemon would act on is then not what was sent (a path "a\0b" names
	 * "a").  Packed again, such a request comes out shorter than it came. */
	bool malformed = control_request__get_packed_size(req) != len;
	if (req->op == CONTROL_REQUEST__OP__ODM_REVOKED && !malformed) {
		odm_revoked(c->odm, req->ino); /* a worker's revoke may be waiting for it */
		control_request__free_unpacked(req, NULL);
		return true;
	}
	if (req->op == CONTROL_REQUEST__OP__ODM_LUN_ERRORS) { /* no reply either */
		odm_lun_errors(c, req, malformed);
		control_request__free_unpacked(req, NULL);
		return true;
	}
	pthread_mutex_lock(&c->ctl->lock);
	int rc = queue_request(c, req, malformed);
	pthread_mutex_unlock(&c->ctl->lock);
	if (rc) {
		cfs_log(c->ctl->d->fs, "control: %s sent more than %u requests without waiting for "
			"the replies: disconnected", odm_client_owner(c->odm), MAX_QUEUED);
		control_request__free_unpacked(req, NULL);
	}
	return !rc;
}

/* What the client sent, as far as it is there: length-prefixed messages, read without
 * waiting.  False: the connection ended or broke. */
static bool read_conn(struct conn *c)
{
	for (;;) {
		bool in_body = c->body != NULL;
		uint8_t *to = in_body ? c->body + c->got : c->hdr + c->got;
		size_t want = (in_body ? c->len : sizeof c->hdr) - c->got;
		ssize_t n = want ? recv(c->fd, to, want, MSG_DONTWAIT) : 0;
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return true;
		if (want && n <= 0)
			return false;
		c->got += (uint32_t)n;
		if (c->got < (in_body ? c->len : sizeof c->hdr))
			continue;
		if (!in_body) {
			c->len = c->hdr[0] | (uint32_t)c->hdr[1] << 8 | (uint32_t)c->hdr[2] << 16 |
				 (uint32_t)c->hdr[3] << 24;
			if (c->len > CFS_CONTROL_MAX || !(c->body = malloc(c->len ? c->len : 1)))
				return false;
			c->got = 0;
			continue;
		}
		uint8_t *msg = c->body;
		uint32_t len = c->len;
		c->body = NULL;
		c->got = c->len = 0;
		bool ok = take_message(c, msg, len);
		free(msg);
		if (!ok)
			return false;
	}
}

static void close_conn(struct conn *c)
{
	epoll_ctl(c->ctl->epoll, EPOLL_CTL_DEL, c->fd, NULL);
	pthread_mutex_lock(&c->ctl->lock);
	bool free_now = conn_close_locked(c);
	pthread_mutex_unlock(&c->ctl->lock);
	if (free_now)
		conn_free(c);
}

static void start_conn(struct cfs_control *ctl, int fd)
{
	struct conn *c = calloc(1, sizeof *c);
	if (!c) {
		close(fd);
		return;
	}
	c->ctl = ctl;
	c->fd = fd;
	pthread_mutex_init(&c->send_lock, NULL);
	c->odm = odm_client_new(ctl->d->odm, fd, &c->send_lock);
	struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
	if (!c->odm || epoll_ctl(ctl->epoll, EPOLL_CTL_ADD, fd, &ev)) {
		if (c->odm)
			odm_client_gone(c->odm);
		close(fd);
		pthread_mutex_destroy(&c->send_lock);
		free(c);
		return;
	}
	pthread_mutex_lock(&ctl->lock);
	c->next = ctl->conns;
	ctl->conns = c;
	ctl->nalive++;
	pthread_mutex_unlock(&ctl->lock);
}

static void *control_thread(void *arg)
{
	struct cfs_control *ctl = arg;
	struct epoll_event ev[64];
	for (;;) {
		int n = epoll_wait(ctl->epoll, ev, 64, -1);
		for (int i = 0; i < n; i++) {
			if (ev[i].data.ptr == &ctl->wake)
				return NULL;
			if (ev[i].data.ptr == ctl) {
				int fd = accept4(ctl->fd, NULL, NULL, SOCK_CLOEXEC);
				if (fd >= 0)
					start_conn(ctl, fd);
				continue;
			}
			struct conn *c = ev[i].data.ptr;
			if (!read_conn(c))
				close_conn(c);
		}
	}
}

int cfs_control_start(struct cfsd *d, const char *mountpoint, struct cfs_control **out)
{
	struct cfs_control *c = calloc(1, sizeof *c);
	if (!c)
		return -ENOMEM;
	c->d = d;
	c->fd = c->epoll = c->wake[0] = c->wake[1] = -1;
	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->conns_changed, NULL);
	pthread_cond_init(&c->work, NULL);
	int rc = odm_server_create(d, &d->odm);
	if (!rc)
		rc = cfs_control_path(mountpoint, c->path, sizeof c->path);
	if (!rc && mkdir(CFS_CONTROL_DIR, 0755) && errno != EEXIST)
		rc = -errno;
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	if (!rc) {
		snprintf(a.sun_path, sizeof a.sun_path, "%s", c->path);
		unlink(c->path); /* a daemon that died left it */
		c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		/* A database's group reaches the ODM requests, and only those (serve). */
		bool group = d->odm_gid != (gid_t)-1;
		if (c->fd < 0 || bind(c->fd, (struct sockaddr *)&a, sizeof a) ||
		    listen(c->fd, SOMAXCONN) || (group && chown(c->path, 0, d->odm_gid)) ||
		    chmod(c->path, group ? 0660 : 0600) || pipe(c->wake))
			rc = -errno;
	}
	if (!rc && (c->epoll = epoll_create1(EPOLL_CLOEXEC)) < 0)
		rc = -errno;
	struct epoll_event listen_ev = {.events = EPOLLIN, .data.ptr = c};
	struct epoll_event wake_ev = {.events = EPOLLIN, .data.ptr = &c->wake};
	if (!rc && (epoll_ctl(c->epoll, EPOLL_CTL_ADD, c->fd, &listen_ev) ||
		    epoll_ctl(c->epoll, EPOLL_CTL_ADD, c->wake[0], &wake_ev)))
		rc = -errno;
	if (!rc && (rc = -pthread_create(&c->thread, NULL, control_thread, c)) == 0) {
		*out = c;
		return 0;
	}
	cfs_set_error("%s: %s", c->path, strerror(-rc));
	int fds[] = {c->fd, c->epoll, c->wake[0], c->wake[1]};
	for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	odm_server_destroy(d->odm);
	d->odm = NULL;
	free(c);
	return rc;
}

void cfs_control_stop(struct cfs_control *c)
{
	if (!c)
		return;
	if (write(c->wake[1], "x", 1) < 0) {
		/* the thread is gone already */
	}
	pthread_join(c->thread, NULL);
	/* Clients see the end of their connection; what they held is dropped before unmount.
	 * Requests being served finish first. */
	pthread_mutex_lock(&c->lock);
	while (c->conns) {
		struct conn *k = c->conns;
		shutdown(k->fd, SHUT_RDWR);
		if (conn_close_locked(k)) {
			pthread_mutex_unlock(&c->lock);
			conn_free(k);
			pthread_mutex_lock(&c->lock);
		}
	}
	while (c->nalive)
		pthread_cond_wait(&c->conns_changed, &c->lock);
	c->stopping = true;
	pthread_cond_broadcast(&c->work);
	pthread_mutex_unlock(&c->lock);
	for (unsigned i = 0; i < c->nworkers; i++)
		pthread_join(c->workers[i], NULL);
	odm_server_destroy(c->d->odm);
	c->d->odm = NULL;
	close(c->fd);
	close(c->epoll);
	close(c->wake[0]);
	close(c->wake[1]);
	unlink(c->path);
	free(c);
}
