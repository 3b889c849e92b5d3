/* SPDX-License-Identifier: GPL-2.0-or-later */
/* cfs quota's requests: the records of libcfs (cfs/quota.c) to and from the wire, for root
 * (the control socket lets only root and odm_group's members in; those are not admins). */
#include "cfsd/quota_server.h"

#include "cfs/cfs.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool quota_is_request(const ControlRequest *req)
{
	return req->op == CONTROL_REQUEST__OP__QUOTA_GET ||
	       req->op == CONTROL_REQUEST__OP__QUOTA_SET ||
	       req->op == CONTROL_REQUEST__OP__QUOTA_REPORT;
}

static void to_wire(const struct cfs_quota_rec *r, QuotaRecord *w)
{
	quota_record__init(w);
	w->type = r->type;
	w->has_id = w->has_used_bytes = w->has_used_inodes = true;
	w->has_soft_bytes = w->has_hard_bytes = w->has_soft_inodes = w->has_hard_inodes = true;
	w->has_grace = w->has_bytes_over_since = w->has_inodes_over_since = true;
	w->id = r->id;
	w->used_bytes = r->used_bytes;
	w->used_inodes = r->used_inodes;
	w->soft_bytes = r->soft_bytes;
	w->hard_bytes = r->hard_bytes;
	w->soft_inodes = r->soft_inodes;
	w->hard_inodes = r->hard_inodes;
	w->grace = r->grace;
	w->bytes_over_since = r->bytes_over_since;
	w->inodes_over_since = r->inodes_over_since;
}

/* The limits a SET request carries, and which of them it carries. */
static unsigned from_wire(const QuotaRecord *w, struct cfs_quota_rec *r)
{
	*r = (struct cfs_quota_rec){.type = w->type, .id = w->id, .soft_bytes = w->soft_bytes,
				    .hard_bytes = w->hard_bytes, .soft_inodes = w->soft_inodes,
				    .hard_inodes = w->hard_inodes, .grace = w->grace};
	return (w->has_soft_bytes ? CFS_QUOTA_SET_SOFT_BYTES : 0) |
	       (w->has_hard_bytes ? CFS_QUOTA_SET_HARD_BYTES : 0) |
	       (w->has_soft_inodes ? CFS_QUOTA_SET_SOFT_INODES : 0) |
	       (w->has_hard_inodes ? CFS_QUOTA_SET_HARD_INODES : 0) |
	       (w->has_grace ? CFS_QUOTA_SET_GRACE : 0);
}

static int reply_with(struct quota_reply_mem *mem, const struct cfs_quota_rec *v, size_t n,
		      ControlReply *reply)
{
	if (n && (!(mem->v = calloc(n, sizeof *mem->v)) || !(mem->ptrs = calloc(n, sizeof *mem->ptrs))))
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		to_wire(&v[i], &mem->v[i]);
		mem->ptrs[i] = &mem->v[i];
	}
	mem->n = n;
	reply->n_quotas = n;
	reply->quotas = mem->ptrs;
	return 0;
}

static int handle(struct cfsd *d, uid_t asker, const ControlRequest *req, ControlReply *reply,
		  struct quota_reply_mem *mem)
{
	const QuotaRecord *q = req->quota;
	if (!q || (req->op != CONTROL_REQUEST__OP__QUOTA_REPORT && !q->has_id)) {
		cfs_set_error("a quota request names a type and an id");
		return -EINVAL;
	}
	if (asker != 0) {
		cfs_set_error("only root may see or set quotas");
		return -EPERM;
	}
	int rc;
	struct cfs_quota_rec r, *all = NULL;
	size_t n = 0;
	if (req->op == CONTROL_REQUEST__OP__QUOTA_REPORT) {
		if (!(rc = cfs_quota_report(d->fs, q->type, true, &all, &n)))
			rc = reply_with(mem, all, n, reply);
		free(all);
		return rc;
	}
	if (req->op == CONTROL_REQUEST__OP__QUOTA_SET) {
		unsigned set = from_wire(q, &r);
		if ((rc = cfs_quota_set(d->fs, &r, set)))
			return rc;
	}
	if (!(rc = cfs_quota_get(d->fs, q->type, q->id, &r)))
		rc = reply_with(mem, &r, 1, reply);
	return rc;
}

void quota_handle(struct cfsd *d, uid_t asker, const ControlRequest *req, ControlReply *reply,
		  struct quota_reply_mem *mem)
{
	cfs_set_error("%s", "");
	int rc = handle(d, asker, req, reply, mem);
	reply->error = -rc;
	if (rc) {
		snprintf(mem->message, sizeof mem->message, "%s",
			 cfs_last_error()[0] ? cfs_last_error() : strerror(-rc));
		reply->message = mem->message;
	}
}

/* Worth a look: at or past 90 % of a limit, or over a soft one. */
static bool near_limit(const struct cfs_quota_rec *r)
{
	uint64_t b = r->hard_bytes ? r->hard_bytes : r->soft_bytes;
	uint64_t i = r->hard_inodes ? r->hard_inodes : r->soft_inodes;
	return (b && r->used_bytes >= b / 10 * 9) || (i && r->used_inodes >= i / 10 * 9) ||
	       r->bytes_over_since || r->inodes_over_since;
}

void quota_status(struct cfsd *d, ControlReply *reply, struct quota_reply_mem *mem)
{
	struct cfs_quota_rec *all[CFS_QUOTA_TYPES] = {0}, *near = NULL;
	size_t n[CFS_QUOTA_TYPES] = {0}, total = 0, nnear = 0;
	for (unsigned t = 0; t < CFS_QUOTA_TYPES; t++) {
		int rc = cfs_quota_report(d->fs, t, false, &all[t], &n[t]);
		if (!rc)
			total += n[t];
		else if (rc == -EAGAIN)
			reply->has_quotas_unread = reply->quotas_unread = true;
		/* else no quotas of that type */
	}
	if (total && !(near = calloc(total, sizeof *near)))
		total = 0;
	for (unsigned t = 0; t < CFS_QUOTA_TYPES && total; t++)
		for (size_t i = 0; i < n[t]; i++)
			if (near_limit(&all[t][i]))
				near[nnear++] = all[t][i];
	if (reply_with(mem, near, nnear, reply))
		reply->n_quotas = 0;
	free(near);
	for (unsigned t = 0; t < CFS_QUOTA_TYPES; t++)
		free(all[t]);
}

void quota_reply_mem_free(struct quota_reply_mem *mem)
{
	free(mem->v);
	free(mem->ptrs);
}
