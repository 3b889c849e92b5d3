/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The corosync backend's replicas: every member keeps every lockspace's table and applies
 * the same lock requests in the same order (corosync.c). */
#include "corosync_internal.h"

/* ---- replicas ---- */
static void emit(void *arg, const struct lt_event *ev)
{
	struct replica *r = arg;
	struct cs *cs = r->cs;
	if (ev->node != cs->owner || !cs->synced)
		return;
	struct lkmap_entry *e = *cs_lkmap_slot(cs, ev->lkid);
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

struct replica *cs_replica(struct cs *cs, const char *name, bool create)
{
	struct replica *r = cs->replicas;
	while (r && strcmp(r->name, name) != 0)
		r = r->next;
	if (r || !create || strlen(name) > CFSLOCK_NAME_MAX)
		return r;
	r = calloc(1, sizeof *r);
	if (!r || !(r->table = lt_create(emit, r)) || !(r->plocks = pl_create(cs_plock_emit, r)) ||
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

void cs_drop_replicas(struct cs *cs)
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

/* ---- applying the ordered stream ---- */

void cs_apply_op(struct cs *cs, const LockOp *op)
{
	if (!cs_owner_live(cs, op->owner) && op->kind != LOCK_OP__KIND__RECOVERY_DONE)
		return; /* from an owner that failed meanwhile: its requests died with it */
	struct replica *r = cs_replica(cs, op->space, true);
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
		cs_release_failed_owner(cs, r, op->lkid);
		(void)cs_forgotten_failed_owner(cs, op->lkid); /* else the list only ever grows */
		break;
	default: break;
	}
	/* A refused call of ours still completes, or its caller would wait forever. */
	if (rc && op->owner == cs->owner && op->kind != LOCK_OP__KIND__CANCEL) {
		struct lkmap_entry *e = *cs_lkmap_slot(cs, op->lkid);
		struct lt_event ev = {.type = LT_EV_FAILED, .node = op->owner, .lkid = op->lkid,
				      .mode = e ? e->lk->granted : -1, .status = rc};
		if (e)
			cfslock_deliver(cs->c, e->lk, &ev);
	}
}

/* The answer to a call goes to the member that made it. */
void cs_answer_sender(struct cs *cs, uint64_t sender, uint64_t reqid, int status)
{
	if (sender == cs->owner)
		cs_plock_answered(cs, reqid, status);
}
