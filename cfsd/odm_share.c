/* SPDX-License-Identifier: GPL-2.0-or-later */
/* ODM's counts across the cluster (see odm_share.h).  Poll-driven CPG, as corosync's
 * test/testcpg.c: one thread waits on the CPG descriptor and sends this node's rows at each
 * period; the callbacks run in that thread. */
#include "cfsd/odm_share.h"
#include "cfs/internal.h"
#include "odm/rows.h"

#include <corosync/cpg.h>
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PERIOD_MS 1000
/* The version of the rows this node shares (OdmNodeStats in proto/control.proto). */
#define SHARE_MAJOR 1
#define SHARE_MINOR 1

struct node_rows {
	uint32_t node;
	bool alive;        /* a member, as corosync says (a goodbye in blob says it unmounted) */
	bool foreign;      /* its rows are of another major version: told once, not kept */
	uint64_t heard_ns; /* when these rows came */
	uint8_t *blob;     /* a packed OdmNodeStats */
	size_t len;
	struct node_rows *next;
};

struct odm_share {
	struct cfs_fs *fs;
	uint32_t node;   /* corosync's id of this node; 0 on a mount of one node */
	char label[96];  /* this node in the rows' keys: host name, and #id on a cluster */
	cpg_handle_t cpg;
	bool cpg_open;
	pthread_t thread;
	int wake[2];
	pthread_mutex_t lock;
	struct node_rows *nodes; /* the other nodes' last rows */
};

/* This node's rows now, packed; goodbye: the last ones, at the unmount. */
static int pack_own(struct odm_share *sh, bool goodbye, uint8_t **blob, size_t *len)
{
	struct odm_rows rows = {0};
	int rc = odm_rows_take(&rows, ODM_BY_ALL, NULL, sh->label, false);
	OdmNodeStats st = ODM_NODE_STATS__INIT;
	OdmStatsRow *w = rc < 0 ? NULL : calloc(rows.n ? rows.n : 1, sizeof *w);
	OdmStatsRow **wp = w ? calloc(rows.n ? rows.n : 1, sizeof *wp) : NULL;
	uint64_t(*words)[ODM_WIRE_WORDS] = wp ? calloc(rows.n ? rows.n : 1, sizeof *words) : NULL;
	*blob = NULL;
	if (words) {
		for (size_t i = 0; i < rows.n; i++) {
			odm_row_to_wire(&rows.rows[i], &w[i], words[i]);
			wp[i] = &w[i];
		}
		st.node_id = sh->node;
		st.has_proto_major = st.has_proto_minor = true;
		st.proto_major = SHARE_MAJOR;
		st.proto_minor = SHARE_MINOR;
		st.has_unmounted = st.unmounted = goodbye;
		st.has_since = true;
		st.since = rows.since;
		st.n_rows = rows.n;
		st.rows = wp;
		*len = odm_node_stats__get_packed_size(&st);
		if ((*blob = malloc(*len ? *len : 1)))
			odm_node_stats__pack(&st, *blob);
	}
	free(words);
	free(wp);
	free(w);
	odm_rows_free(&rows);
	return rc < 0 ? rc : *blob ? 0 : -ENOMEM;
}

/* sh->lock held. */
static struct node_rows *node_rows(struct odm_share *sh, uint32_t node)
{
	for (struct node_rows *n = sh->nodes; n; n = n->next)
		if (n->node == node)
			return n;
	struct node_rows *n = calloc(1, sizeof *n);
	if (n) {
		n->node = node;
		n->next = sh->nodes;
		sh->nodes = n;
	}
	return n;
}

static void delivered(cpg_handle_t h, const struct cpg_name *group, uint32_t nodeid, uint32_t pid,
		      void *msg, size_t len)
{
	(void)group, (void)pid;
	struct odm_share *sh;
	uint8_t *copy = malloc(len ? len : 1);
	if (cpg_context_get(h, (void **)&sh) != CS_OK || !copy || nodeid == sh->node) {
		free(copy);
		return;
	}
	memcpy(copy, msg, len);
	OdmNodeStats *st = odm_node_stats__unpack(NULL, len, msg);
	uint32_t major = !st ? 0 : st->has_proto_major ? st->proto_major : 1;
	uint32_t minor = !st ? 0 : st->has_proto_major ? st->proto_minor : 0;
	bool readable = st != NULL;
	if (st)
		odm_node_stats__free_unpacked(st, NULL);
	pthread_mutex_lock(&sh->lock);
	struct node_rows *n = node_rows(sh, nodeid);
	if (n && major != SHARE_MAJOR) {
		if (!n->foreign)
			cfs_log(sh->fs, "ODM statistics of node %u are %s%u.%u, this node's %u.%u: "
				"not shown", nodeid, readable ? "of version " : "unreadable, ", major, minor,
				SHARE_MAJOR, SHARE_MINOR);
		n->foreign = true;
		free(copy);
	} else if (n) {
		n->foreign = false;
		free(n->blob);
		n->blob = copy;
		n->len = len;
		n->alive = true;
		n->heard_ns = cfs_now_ns();
	} else {
		free(copy);
	}
	pthread_mutex_unlock(&sh->lock);
}

static void members_changed(cpg_handle_t h, const struct cpg_name *group,
			    const struct cpg_address *members, size_t nmembers,
			    const struct cpg_address *left, size_t nleft,
			    const struct cpg_address *joined, size_t njoined)
{
	(void)group, (void)members, (void)nmembers, (void)joined, (void)njoined;
	struct odm_share *sh;
	if (cpg_context_get(h, (void **)&sh) != CS_OK)
		return;
	pthread_mutex_lock(&sh->lock);
	for (size_t i = 0; i < nleft; i++)
		for (struct node_rows *n = sh->nodes; n; n = n->next)
			if (n->node == left[i].nodeid)
				n->alive = false; /* its last rows stay */
	pthread_mutex_unlock(&sh->lock);
}

static void send_own(struct odm_share *sh, bool goodbye)
{
	uint8_t *blob;
	size_t len;
	if (pack_own(sh, goodbye, &blob, &len))
		return;
	struct iovec iov = {blob, len};
	/* Not sent (corosync busy for long): the next period sends newer counts. */
	for (int tries = 0; cpg_mcast_joined(sh->cpg, CPG_TYPE_AGREED, &iov, 1) == CS_ERR_TRY_AGAIN &&
			    tries < 10; tries++)
		usleep(10000);
	free(blob);
}

static void *share_thread(void *arg)
{
	struct odm_share *sh = arg;
	int fd;
	if (cpg_fd_get(sh->cpg, &fd) != CS_OK)
		return NULL;
	uint64_t next = cfs_now_ns();
	for (;;) {
		uint64_t now = cfs_now_ns();
		if (now >= next) {
			send_own(sh, false);
			next = now + PERIOD_MS * 1000000ull;
		}
		struct pollfd p[2] = {{.fd = fd, .events = POLLIN}, {.fd = sh->wake[0], .events = POLLIN}};
		if (poll(p, 2, (int)((next - now) / 1000000ull) + 1) < 0 && errno != EINTR)
			break;
		if (p[1].revents) { /* the unmount: the others keep these, marked unmounted */
			send_own(sh, true);
			break;
		}
		if (p[0].revents && cpg_dispatch(sh->cpg, CS_DISPATCH_ALL) != CS_OK) {
			cfs_log(sh->fs, "ODM counts: corosync went away; odmstat --cluster shows the "
				"other nodes' counts as last heard");
			break;
		}
	}
	return NULL;
}

static int join(struct odm_share *sh)
{
	cpg_callbacks_t cb = {.cpg_deliver_fn = delivered, .cpg_confchg_fn = members_changed};
	if (cpg_initialize(&sh->cpg, &cb) != CS_OK)
		return -ENOTCONN;
	sh->cpg_open = true;
	cpg_context_set(sh->cpg, sh);
	cvm_uuid u;
	char us[CVM_UUID_STR];
	memcpy(u.b, sh->fs->sb.fs_uuid, 16);
	cvm_uuid_format(&u, us);
	struct cpg_name name;
	name.length = (uint32_t)snprintf(name.value, sizeof name.value, "cfs-odmstat-%.36s", us);
	cs_error_t err;
	for (int tries = 0; (err = cpg_join(sh->cpg, &name)) == CS_ERR_TRY_AGAIN && tries < 100;
	     tries++)
		usleep(10000);
	if (err != CS_OK || pipe(sh->wake))
		return -ENOTCONN;
	int rc = -pthread_create(&sh->thread, NULL, share_thread, sh);
	if (rc) {
		close(sh->wake[0]);
		close(sh->wake[1]);
		sh->wake[0] = sh->wake[1] = -1;
	}
	return rc;
}

int odm_share_start(struct cfs_fs *fs, struct odm_share **out)
{
	struct odm_share *sh = calloc(1, sizeof *sh);
	if (!sh)
		return -ENOMEM;
	sh->fs = fs;
	sh->wake[0] = sh->wake[1] = -1;
	pthread_mutex_init(&sh->lock, NULL);
	char host[64] = "?";
	gethostname(host, sizeof host - 1);
	sh->node = fs->cluster ? cfslock_node_id(fs->locks) : 0;
	if (fs->cluster)
		snprintf(sh->label, sizeof sh->label, "%s#%" PRIu32, host, sh->node);
	else
		snprintf(sh->label, sizeof sh->label, "%s", host);
	if (fs->cluster && join(sh)) { /* the counts stay this node's own */
		cfs_log(fs, "ODM counts: cannot join corosync's group for them: odmstat --cluster "
			"shows this node only");
		if (sh->cpg_open)
			cpg_finalize(sh->cpg);
		sh->cpg_open = false;
	}
	*out = sh;
	return 0;
}

void odm_share_stop(struct odm_share *sh)
{
	if (!sh)
		return;
	if (sh->wake[1] >= 0) {
		if (write(sh->wake[1], "x", 1) == 1)
			pthread_join(sh->thread, NULL);
		close(sh->wake[0]);
		close(sh->wake[1]);
	}
	if (sh->cpg_open)
		cpg_finalize(sh->cpg);
	while (sh->nodes) {
		struct node_rows *n = sh->nodes;
		sh->nodes = n->next;
		free(n->blob);
		free(n);
	}
	pthread_mutex_destroy(&sh->lock);
	free(sh);
}

/* A node's rows into the reply; a node that said goodbye is no longer alive. */
static int add_node(struct odm_share_mem *mem, const uint8_t *blob, size_t len, bool member,
		    uint64_t age_ns)
{
	OdmNodeStats *st = odm_node_stats__unpack(NULL, len, blob);
	OdmNodeStats **v = st ? realloc(mem->nodes, (mem->n + 1) * sizeof *v) : NULL;
	if (!v) {
		if (st)
			odm_node_stats__free_unpacked(st, NULL);
		return st ? -ENOMEM : -EPROTO;
	}
	st->has_alive = st->has_age_ms = true;
	st->alive = member && !st->unmounted;
	st->age_ms = age_ns / 1000000ull;
	v[mem->n++] = st;
	mem->nodes = v;
	return 0;
}

int odm_share_fill(struct odm_share *sh, ControlReply *reply, struct odm_share_mem *mem)
{
	uint8_t *own;
	size_t len;
	int rc = pack_own(sh, false, &own, &len);
	if (!rc)
		rc = add_node(mem, own, len, true, 0);
	free(own);
	pthread_mutex_lock(&sh->lock);
	uint64_t now = cfs_now_ns();
	for (struct node_rows *n = sh->nodes; n && !rc; n = n->next)
		if (n->blob)
			rc = add_node(mem, n->blob, n->len, n->alive, now - n->heard_ns);
	pthread_mutex_unlock(&sh->lock);
	reply->n_node_stats = mem->n;
	reply->node_stats = mem->nodes;
	return rc;
}

void odm_share_mem_free(struct odm_share_mem *mem)
{
	for (size_t i = 0; i < mem->n; i++)
		odm_node_stats__free_unpacked(mem->nodes[i], NULL);
	free(mem->nodes);
	*mem = (struct odm_share_mem){0};
}
