/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Quotas: usage and limits per user, group and project (the ro_compat feature 'quota';
 * docs/quota.md has the design, and what is left for clusters).
 *
 * Each type has a quota inode (superblock quota_ino) whose logical block L holds the records
 * of ids L * R .. L * R + R - 1; a hole is a block of zero records.  Usage is charged where an
 * inode's block is written (cfs_iwrite): the difference between what the block says (its
 * owner's ids, its block count, whether it is an inode at all) and what it will say goes into
 * the records in the same transaction, so the records always equal the sum of the inodes as
 * they are on disk, through every commit, crash and replay: no quotacheck.  The limits are
 * checked before an allocation (cfs_quota_room, cfs_quota_may_create), which is then refused
 * with EDQUOT having changed nothing. */
#include "cfs/internal.h"

#include <errno.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

static const char *const type_names[CFS_QUOTA_TYPES] = {"user", "group", "project"};

const char *cfs_quota_type_name(unsigned type)
{
	return type < CFS_QUOTA_TYPES ? type_names[type] : "?";
}

bool cfs_quota_on(const struct cfs_fs *fs)
{
	return fs->sb.features[CFS_RO_COMPAT] & CFS_FEAT_QUOTA;
}

/* Why the metadata glock and not a glock per record block: under EX no other node is in an
 * operation, so a record read there is the last one written, and the charge goes through
 * this node's journal with the allocation it is for; a dead node's charges are replayed with
 * its allocations before anyone else may take the glock.  Exact and crash-safe with no lock
 * of its own; the price is that allocating operations on two nodes take turns
 * (docs/quota.md, step 4, for the grants that lift it). */
bool cfs_quota_needs_meta_ex(const struct cfs_fs *fs)
{
	return cfs_quota_on(fs) && !cfs_may_allocate(fs);
}

struct counting {
	cfs_progress_fn progress;
	void *arg;
};

/* fsck's steps, named as what the caller (mkfs, tune) is doing. */
static void counting_progress(void *arg, const char *what, unsigned long long done,
			      unsigned long long total)
{
	const struct counting *c = arg;
	char step[64];
	snprintf(step, sizeof step, "quota usage: %s", what);
	c->progress(c->arg, step, done, total);
}

int cfs_quota_build(struct cvm_volume *vol, cfs_progress_fn progress, void *arg)
{
	struct cfs_fsck_report r;
	struct counting c = {progress, arg};
	int rc = cfs_fsck(vol, true, NULL, &c, progress ? counting_progress : NULL, &r);
	if (rc && !cfs_last_error()[0])
		cfs_set_error("volume %s: counting the usage of the files failed: %s: run fsck.cfs "
			      "-y", cvm_volume_config(vol)->name, strerror(-rc));
	return rc;
}

bool cfs_quota_exempt(const struct cfs_fs *fs, uint64_t ino)
{
	for (unsigned t = 0; t < CFS_QUOTA_TYPES; t++)
		if (fs->sb.quota_ino[t] == ino)
			return true;
	for (uint32_t s = 0; s < fs->sb.nslots; s++)
		if (fs->sb.orphan_dir[s] == ino || fs->sb.quota_slot_ino[s] == ino)
			return true;
	return cfs_making_system_inode;
}

/* The ids an inode is charged to; a type that does not apply (project ids off) is UINT32_MAX
 * and charges nothing. */
void cfs_quota_ids(const struct cfs_fs *fs, const struct cfs_dinode *d, uint32_t id[CFS_QUOTA_TYPES])
{
	id[CFS_QUOTA_USER] = d->uid;
	id[CFS_QUOTA_GROUP] = d->gid;
	id[CFS_QUOTA_PROJECT] = cfs_project_on(fs) ? d->projid : UINT32_MAX;
}

static int quota_inode(struct cfs_fs *fs, unsigned type, struct cfs_inode **ip)
{
	uint64_t ino = fs->sb.quota_ino[type];
	if (!ino) {
		cfs_log(fs, "the %s quota inode is missing: run fsck.cfs -y", type_names[type]);
		return -EIO;
	}
	/* Its glock PR even to change records: they are the metadata glock's, changed only under
	 * it EX (quota_grant.c).  EX only when its map changes (add_block): so a charge under EX
	 * does not take from every node the span it shares with the root. */
	int imode = cfs_op_imode;
	cfs_op_imode = CFSLOCK_PR;
	int rc = cfs_iget(fs, ino, ip);
	cfs_op_imode = imode;
	return rc;
}

/* A new block of zero records at logical block lblk of the quota inode. */
static int add_block(struct cfs_fs *fs, struct cfs_inode *qip, uint64_t lblk,
		     struct cfs_buf **b)
{
	uint64_t pblk;
	int rc = cfs_iglock_get(fs, qip->ino, CFSLOCK_EX); /* under EX: waited for, fs->lock held */
	if (rc || (rc = cfs_alloc_meta(fs, qip->ino, &pblk)))
		return rc;
	struct cfs_dextent e = {lblk, pblk, 1, 0};
	if ((rc = cfs_bnew(fs, pblk, CFS_B_QUOTA, qip->ino, b)) || (rc = cfs_ext_insert(qip, &e))) {
		cfs_free(fs, pblk, 1);
		return rc;
	}
	qip->d.nblocks++;
	qip->d.size = qip->d.size > (lblk + 1) * fs->bs ? qip->d.size : (lblk + 1) * fs->bs;
	return cfs_iwrite(fs, qip);
}

/* The record of id, in its block (made if create and missing); *q NULL: a hole, zeros. */
int cfs_quota_record(struct cfs_fs *fs, unsigned type, uint32_t id, bool create,
		     struct cfs_buf **b, struct cfs_dquot **q)
{
	*q = NULL;
	struct cfs_inode *qip;
	int rc = quota_inode(fs, type, &qip);
	if (rc)
		return rc;
	uint64_t per = CFS_DQUOTS_PER_BLOCK(fs->bs), lblk = id / per;
	bool unwritten;
	uint64_t pblk = cfs_ext_bmap(qip, lblk, &unwritten);
	if (!pblk && !create)
		return 0;
	rc = pblk ? cfs_bread(fs, pblk, CFS_B_QUOTA, qip->ino, b) : add_block(fs, qip, lblk, b);
	if (!rc)
		*q = (struct cfs_dquot *)((*b)->data + CFS_DQUOT_OFF) + id % per;
	return rc;
}

/* A soft limit passed or left: the time it was passed, and a log line each way. */
static void note_soft(struct cfs_fs *fs, unsigned type, uint32_t id, const char *what,
		      uint64_t used, uint64_t soft, int64_t *since)
{
	bool over = soft && used > soft;
	if (over && !*since) {
		*since = (int64_t)time(NULL);
		cfs_log(fs, "quota: %s %u is over its soft %s limit (%llu of %llu)", type_names[type],
			id, what, (unsigned long long)used, (unsigned long long)soft);
	} else if (!over && *since) {
		*since = 0;
		cfs_log(fs, "quota: %s %u is under its soft %s limit again", type_names[type], id,
			what);
	}
}

static uint64_t add_signed(uint64_t v, int64_t d)
{
	return d < 0 && (uint64_t)-d > v ? 0 : v + (uint64_t)d;
}

static int charge_one(struct cfs_fs *fs, unsigned type, uint32_t id, int64_t bytes,
		      int64_t inodes)
{
	if (id == UINT32_MAX || (!bytes && !inodes))
		return 0;
	if (!cfs_may_allocate(fs)) /* under the metadata glock PR: against this node's grant */
		return cfs_quota_grant_charge(fs, type, id, bytes, inodes);
	struct cfs_buf *b;
	struct cfs_dquot *q;
	int rc = cfs_quota_record(fs, type, id, true, &b, &q);
	if (rc)
		return rc;
	cfs_bdirty(fs, b); /* before the grant's blocks are allocated */
	if ((rc = cfs_quota_fold_own(fs, type, id, q)))
		return rc;
	if ((bytes < 0 && (uint64_t)-bytes > q->used_bytes) ||
	    (inodes < 0 && (uint64_t)-inodes > q->used_inodes))
		cfs_log(fs, "quota: %s %u would be charged below zero: fsck.cfs will count it again",
			type_names[type], id);
	q->used_bytes = add_signed(q->used_bytes, bytes);
	q->used_inodes = add_signed(q->used_inodes, inodes);
	note_soft(fs, type, id, "block", q->used_bytes, q->soft_bytes, &q->bytes_over_since);
	note_soft(fs, type, id, "inode", q->used_inodes, q->soft_inodes, &q->inodes_over_since);
	return cfs_quota_regrant(fs, type, id, q);
}

/* Is the block's content an inode that counts (a freed inode's block says mode 0)? */
static bool counts(const struct cfs_dinode *d)
{
	return d->mode != 0;
}

int cfs_quota_charge(struct cfs_fs *fs, uint64_t ino, const struct cfs_dinode *was,
		     const struct cfs_dinode *now)
{
	/* fsck.cfs counts the files and writes the records itself (cfs_quota_set_usage) */
	if (!cfs_quota_on(fs) || fs->checking || cfs_quota_exempt(fs, ino))
		return 0;
	uint32_t a[CFS_QUOTA_TYPES], b[CFS_QUOTA_TYPES];
	cfs_quota_ids(fs, was, a);
	cfs_quota_ids(fs, now, b);
	if (cfs_quota_needs_meta_ex(fs) && memcmp(a, b, sizeof a) && counts(was) && counts(now)) {
		/* A charge moved to other ids under PR: chown, chgrp and project changes go
		 * under EX (cfs_quota_may_move looks at the exact usage there). */
		cfs_log(fs, "quota: inode %llu moved to other ids without the metadata glock EX: "
			    "refused", (unsigned long long)ino);
		return -EIO;
	}
	int64_t was_bytes = counts(was) ? (int64_t)(was->nblocks * fs->bs) : 0;
	int64_t now_bytes = counts(now) ? (int64_t)(now->nblocks * fs->bs) : 0;
	int64_t was_inodes = counts(was), now_inodes = counts(now);
	int rc = 0;
	for (unsigned t = 0; t < CFS_QUOTA_TYPES && !rc; t++) {
		if (a[t] == b[t] || !was_inodes || !now_inodes) {
			rc = charge_one(fs, t, counts(now) ? b[t] : a[t], now_bytes - was_bytes,
					now_inodes - was_inodes);
			continue;
		}
		rc = charge_one(fs, t, a[t], -was_bytes, -was_inodes); /* moved to other ids */
		if (!rc)
			rc = charge_one(fs, t, b[t], now_bytes, now_inodes);
	}
	return rc;
}

/* What id may still take of a limit pair, used counted: UINT64_MAX no limit, 0 none. */
static uint64_t left(uint64_t used, uint64_t soft, uint64_t hard, int64_t since, uint64_t grace)
{
	uint64_t limit = hard ? hard : UINT64_MAX;
	if (soft && since && (uint64_t)(time(NULL) - since) >= (grace ? grace : CFS_QUOTA_GRACE))
		limit = limit < soft ? limit : soft; /* grace over: the soft limit is a hard one */
	if (limit == UINT64_MAX)
		return UINT64_MAX;
	return used >= limit ? 0 : limit - used;
}

/* The uncharged part of ip: its blocks now against its block as written. */
static int uncharged_bytes(struct cfs_fs *fs, const struct cfs_inode *ip, int64_t *bytes)
{
	struct cfs_buf *b;
	int rc = cfs_bread(fs, ip->ino, CFS_B_INODE, ip->ino, &b);
	if (rc)
		return rc;
	const struct cfs_dinode *d = (const void *)b->data;
	*bytes = ((int64_t)ip->d.nblocks - (int64_t)(counts(d) ? d->nblocks : 0)) * fs->bs;
	return 0;
}

/* What of q's byte limits is left for want more bytes, taken is already used: others' grants
 * count as used (what they charged is within them); if that leaves less than want, they are
 * recalled and the exact usage counts (under the metadata glock EX). */
static int bytes_left(struct cfs_fs *fs, unsigned type, uint32_t id, struct cfs_buf *b,
		      struct cfs_dquot *q, int64_t pending, uint64_t want, uint64_t *out)
{
	uint64_t used = add_signed(q->used_bytes, pending);
	*out = left(used + q->granted_bytes, q->soft_bytes, q->hard_bytes, q->bytes_over_since,
		    q->grace);
	if (*out >= want)
		return 0;
	int rc = cfs_quota_recall(fs, type, id, q);
	if (rc)
		return rc;
	cfs_bdirty(fs, b);
	*out = left(add_signed(q->used_bytes, pending) + q->granted_bytes, q->soft_bytes,
		    q->hard_bytes, q->bytes_over_since, q->grace);
	return 0;
}

/* The same for inodes. */
static int inodes_left(struct cfs_fs *fs, unsigned type, uint32_t id, struct cfs_buf *b,
		       struct cfs_dquot *q, uint64_t want, uint64_t *out)
{
	*out = left(q->used_inodes + q->granted_inodes, q->soft_inodes, q->hard_inodes,
		    q->inodes_over_since, q->grace);
	if (*out >= want)
		return 0;
	int rc = cfs_quota_recall(fs, type, id, q);
	if (rc)
		return rc;
	cfs_bdirty(fs, b);
	*out = left(q->used_inodes + q->granted_inodes, q->soft_inodes, q->hard_inodes,
		    q->inodes_over_since, q->grace);
	return 0;
}

/* Under the metadata glock PR: what this node's grant of the id leaves. */
static int granted_room(struct cfs_fs *fs, unsigned type, uint32_t id, int64_t pending,
			uint64_t *out)
{
	int rc = cfs_quota_grant_room(fs, type, id, out);
	if (!rc && *out != UINT64_MAX)
		*out = add_signed(*out, -pending);
	return rc;
}

int cfs_quota_room(struct cfs_fs *fs, const struct cfs_inode *ip, uint64_t want,
		   uint64_t *blocks)
{
	*blocks = UINT64_MAX;
	if (!cfs_quota_on(fs) || cfs_quota_exempt(fs, ip->ino))
		return 0;
	int64_t pending;
	int rc = uncharged_bytes(fs, ip, &pending);
	uint32_t id[CFS_QUOTA_TYPES];
	cfs_quota_ids(fs, &ip->d, id);
	for (unsigned t = 0; t < CFS_QUOTA_TYPES && !rc; t++) {
		struct cfs_buf *b;
		struct cfs_dquot *q;
		uint64_t bytes;
		if (id[t] == UINT32_MAX)
			continue;
		if (!cfs_may_allocate(fs))
			rc = granted_room(fs, t, id[t], pending, &bytes);
		else if ((rc = cfs_quota_record(fs, t, id[t], false, &b, &q)) || !q)
			continue;
		else
			rc = bytes_left(fs, t, id[t], b, q, pending, want * fs->bs, &bytes);
		uint64_t n = bytes == UINT64_MAX ? UINT64_MAX : bytes / fs->bs;
		*blocks = n < *blocks ? n : *blocks;
	}
	return rc ? rc : *blocks ? 0 : -EDQUOT;
}

/* -EDQUOT unless id of type may take one more inode and blocks more (metadata glock EX). */
static int may_take(struct cfs_fs *fs, unsigned type, uint32_t id, uint64_t blocks)
{
	struct cfs_buf *b;
	struct cfs_dquot *q;
	if (id == UINT32_MAX)
		return 0;
	int rc = cfs_quota_record(fs, type, id, false, &b, &q);
	if (rc || !q)
		return rc;
	uint64_t inodes, bytes;
	if ((rc = inodes_left(fs, type, id, b, q, 1, &inodes)) ||
	    (rc = bytes_left(fs, type, id, b, q, 0, blocks * fs->bs, &bytes)))
		return rc;
	return !inodes || bytes < blocks * fs->bs ? -EDQUOT : 0;
}

int cfs_quota_may_create(struct cfs_fs *fs, const struct cfs_dinode *d, uint64_t blocks)
{
	if (!cfs_quota_on(fs))
		return 0;
	if (!cfs_may_allocate(fs)) { /* this node's grants, or under EX */
		int rc = cfs_quota_granted(fs, d, 0, blocks, 1);
		return rc == -EAGAIN ? -CFS_ERETRY : rc == -ENOSPC ? -CFS_ENEEDMETA : rc;
	}
	uint32_t id[CFS_QUOTA_TYPES];
	cfs_quota_ids(fs, d, id);
	int rc = 0;
	for (unsigned t = 0; t < CFS_QUOTA_TYPES && !rc; t++)
		rc = may_take(fs, t, id[t], blocks);
	return rc;
}

int cfs_quota_may_move(struct cfs_fs *fs, const struct cfs_inode *ip, const struct cfs_dinode *now)
{
	if (!cfs_quota_on(fs) || cfs_quota_exempt(fs, ip->ino))
		return 0;
	uint32_t a[CFS_QUOTA_TYPES], b[CFS_QUOTA_TYPES];
	cfs_quota_ids(fs, &ip->d, a);
	cfs_quota_ids(fs, now, b);
	int rc = 0;
	for (unsigned t = 0; t < CFS_QUOTA_TYPES && !rc; t++)
		if (a[t] != b[t])
			rc = may_take(fs, t, b[t], ip->d.nblocks);
	return rc;
}

/* One pair of a statfs answer: total and free, cut down to a limit and what is left of it. */
static void cut_to(uint64_t limit, uint64_t used, uint64_t unit, fsblkcnt_t *total,
		   fsblkcnt_t *free, fsblkcnt_t *avail)
{
	if (!limit)
		return;
	uint64_t t = limit / unit, left = used >= limit ? 0 : (limit - used) / unit;
	*total = t;
	*free = left < *free ? left : *free;
	*avail = left < *avail ? left : *avail;
}

int cfs_quota_statfs(struct cfs_fs *fs, const struct cfs_inode *dir, struct statvfs *st)
{
	if (!cfs_project_on(fs) || !S_ISDIR(dir->d.mode) || !(dir->d.flags & FS_PROJINHERIT_FL))
		return 0;
	struct cfs_buf *b;
	struct cfs_dquot *q;
	int64_t bytes, inodes; /* this node's charges not folded yet; other nodes' are not seen */
	int rc = cfs_quota_record(fs, CFS_QUOTA_PROJECT, dir->d.projid, false, &b, &q);
	if (rc || !q || (rc = cfs_quota_grant_delta(fs, CFS_QUOTA_PROJECT, dir->d.projid, &bytes,
						    &inodes)))
		return rc;
	cut_to(q->hard_bytes ? q->hard_bytes : q->soft_bytes, add_signed(q->used_bytes, bytes),
	       fs->bs, &st->f_blocks, &st->f_bfree, &st->f_bavail);
	fsfilcnt_t favail = st->f_favail;
	cut_to(q->hard_inodes ? q->hard_inodes : q->soft_inodes, add_signed(q->used_inodes, inodes),
	       1, &st->f_files, &st->f_ffree, &favail);
	st->f_favail = favail;
	return 0;
}

/* ---- what the admin sees and sets (cfs quota) ---- */

static void to_rec(unsigned type, uint32_t id, const struct cfs_dquot *q, struct cfs_quota_rec *r)
{
	static const struct cfs_dquot zero;
	q = q ? q : &zero;
	*r = (struct cfs_quota_rec){.type = type, .id = id, .used_bytes = q->used_bytes,
				    .used_inodes = q->used_inodes, .soft_bytes = q->soft_bytes,
				    .hard_bytes = q->hard_bytes, .soft_inodes = q->soft_inodes,
				    .hard_inodes = q->hard_inodes,
				    .grace = q->grace ? q->grace : CFS_QUOTA_GRACE,
				    .bytes_over_since = q->bytes_over_since,
				    .inodes_over_since = q->inodes_over_since};
}

static int usable(struct cfs_fs *fs, unsigned type)
{
	if (!cfs_quota_on(fs)) {
		cfs_set_error("the filesystem has no quotas: turn them on with 'cfs tune VOLUME -O "
			      "quota' (unmounted)");
		return -EOPNOTSUPP;
	}
	if (type >= CFS_QUOTA_TYPES) {
		cfs_set_error("quota type %u: give user, group or project", type);
		return -EINVAL;
	}
	if (type == CFS_QUOTA_PROJECT && !cfs_project_on(fs)) {
		cfs_set_error("project quotas need project ids: 'cfs tune VOLUME -O project'");
		return -EOPNOTSUPP;
	}
	return 0;
}

/* The exact usage of an id: every node's charges folded into its record (metadata glock EX). */
static int recalled(struct cfs_fs *fs, unsigned type, uint32_t id, struct cfs_buf *b,
		    struct cfs_dquot *q)
{
	int rc = cfs_quota_recall(fs, type, id, q);
	if (!rc)
		cfs_bdirty(fs, b);
	return rc;
}

int cfs_quota_get(struct cfs_fs *fs, unsigned type, uint32_t id, struct cfs_quota_rec *out)
{
	int rc = usable(fs, type);
	if (rc || (rc = cfs_op_begin(fs, !fs->ro)))
		return rc;
	struct cfs_buf *b;
	struct cfs_dquot *q;
	if (!(rc = cfs_quota_record(fs, type, id, false, &b, &q)) && q && !fs->ro)
		rc = recalled(fs, type, id, b, q);
	if (!rc)
		to_rec(type, id, q, out);
	cfs_op_end(fs);
	return rc;
}

bool cfs_quota_near(struct cfs_fs *fs, uint64_t ino, uint64_t bytes)
{
	if (!cfs_quota_on(fs) || cfs_quota_exempt(fs, ino) || cfs_op_begin(fs, false))
		return false;
	struct cfs_inode *ip;
	bool near = false;
	if (!cfs_iget(fs, ino, &ip)) {
		uint32_t id[CFS_QUOTA_TYPES];
		cfs_quota_ids(fs, &ip->d, id);
		for (unsigned t = 0; t < CFS_QUOTA_TYPES && !near; t++) {
			struct cfs_buf *b;
			struct cfs_dquot *q;
			if (id[t] == UINT32_MAX || cfs_quota_record(fs, t, id[t], false, &b, &q) || !q)
				continue;
			/* the soft limit too: its grace may end before the pages are written */
			uint64_t soft = q->soft_bytes ? q->soft_bytes : q->hard_bytes;
			uint64_t limit = q->hard_bytes && q->hard_bytes < soft ? q->hard_bytes : soft;
			near = left(q->used_bytes, 0, limit, 0, 0) < bytes;
		}
		cfs_iput_check(fs, ip);
	}
	cfs_op_end(fs);
	return near;
}

/* One pair of limits (of bytes, or of inodes) against each other and what is used. */
static int check_pair(const char *who, uint32_t id, bool blocks, uint64_t soft, uint64_t hard,
		      uint64_t used)
{
	if (soft && hard && soft > hard) {
		cfs_set_error("%s %u: the soft %s limit (%llu%s) is above the hard one (%llu): give "
			      "a soft limit at or below the hard one", who, id,
			      blocks ? "block" : "inode", (unsigned long long)soft,
			      blocks ? " bytes" : "", (unsigned long long)hard);
		return -EINVAL;
	}
	if (hard && hard < used) {
		cfs_set_error("%s %u %s %llu %s already, more than the hard limit %llu: remove files "
			      "first, or give a higher limit", who, id, blocks ? "uses" : "has",
			      (unsigned long long)used, blocks ? "bytes" : "inodes",
			      (unsigned long long)hard);
		return -EINVAL;
	}
	return 0;
}

/* Limits that make sense together and with what is used (checked before any change). */
static int check_limits(const struct cfs_quota_rec *want, const struct cfs_dquot *q)
{
	const char *who = cfs_quota_type_name(want->type);
	int rc = check_pair(who, want->id, true, want->soft_bytes, want->hard_bytes,
			    q ? q->used_bytes : 0);
	return rc ? rc : check_pair(who, want->id, false, want->soft_inodes, want->hard_inodes,
				   q ? q->used_inodes : 0);
}

int cfs_quota_set(struct cfs_fs *fs, const struct cfs_quota_rec *want, unsigned set)
{
	int rc = usable(fs, want->type);
	if (rc)
		return rc;
	if (fs->ro) {
		cfs_set_error("the filesystem is mounted read-only");
		return -EROFS;
	}
	if ((rc = cfs_op_begin(fs, true)))
		return rc;
	struct cfs_buf *b;
	struct cfs_dquot *q;
	struct cfs_quota_rec r = {0};
	rc = cfs_quota_record(fs, want->type, want->id, false, &b, &q);
	if (!rc && q) /* the grants taken under the old limits come back */
		rc = recalled(fs, want->type, want->id, b, q);
	if (!rc) { /* the limits as they will be, checked before anything changes */
		to_rec(want->type, want->id, q, &r);
		if (set & CFS_QUOTA_SET_SOFT_BYTES)
			r.soft_bytes = want->soft_bytes;
		if (set & CFS_QUOTA_SET_HARD_BYTES)
			r.hard_bytes = want->hard_bytes;
		if (set & CFS_QUOTA_SET_SOFT_INODES)
			r.soft_inodes = want->soft_inodes;
		if (set & CFS_QUOTA_SET_HARD_INODES)
			r.hard_inodes = want->hard_inodes;
		if (set & CFS_QUOTA_SET_GRACE)
			r.grace = want->grace;
		rc = check_limits(&r, q);
	}
	if (!rc && !q)
		rc = cfs_quota_record(fs, want->type, want->id, true, &b, &q);
	if (!rc) {
		q->soft_bytes = r.soft_bytes;
		q->hard_bytes = r.hard_bytes;
		q->soft_inodes = r.soft_inodes;
		q->hard_inodes = r.hard_inodes;
		q->grace = r.grace == CFS_QUOTA_GRACE ? 0 : r.grace;
		note_soft(fs, want->type, want->id, "block", q->used_bytes, q->soft_bytes,
			  &q->bytes_over_since);
		note_soft(fs, want->type, want->id, "inode", q->used_inodes, q->soft_inodes,
			  &q->inodes_over_since);
		cfs_bdirty(fs, b);
	}
	cfs_op_end(fs);
	return rc ? rc : cfs_sync(fs); /* on the LUNs when the command returns */
}

static bool in_use(const struct cfs_dquot *q)
{
	return q->used_bytes || q->used_inodes || q->soft_bytes || q->hard_bytes ||
	       q->soft_inodes || q->hard_inodes || q->grace;
}

int cfs_quota_each(struct cfs_fs *fs, unsigned type,
		   int (*fn)(void *arg, uint32_t id, const struct cfs_dquot *q), void *arg)
{
	struct cfs_inode *qip;
	uint64_t per = CFS_DQUOTS_PER_BLOCK(fs->bs);
	int rc = quota_inode(fs, type, &qip);
	for (uint32_t i = 0; !rc && i < qip->next; i++)
		for (uint32_t k = 0; !rc && k < qip->ext[i].len; k++) {
			struct cfs_buf *b;
			uint64_t lblk = qip->ext[i].lblk + k;
			if ((rc = cfs_bread(fs, qip->ext[i].pblk + k, CFS_B_QUOTA, qip->ino, &b)))
				break;
			const struct cfs_dquot *q = (const void *)(b->data + CFS_DQUOT_OFF);
			for (uint64_t j = 0; j < per && !rc; j++)
				if (in_use(&q[j]))
					rc = fn(arg, (uint32_t)(lblk * per + j), &q[j]);
		}
	return rc;
}

int cfs_quota_set_usage(struct cfs_fs *fs, unsigned type, uint32_t id, uint64_t bytes,
			uint64_t inodes)
{
	struct cfs_buf *b;
	struct cfs_dquot *q;
	int rc = cfs_quota_record(fs, type, id, bytes || inodes, &b, &q);
	if (rc || !q)
		return rc;
	q->used_bytes = bytes;
	q->used_inodes = inodes;
	q->granted_bytes = q->granted_inodes = 0; /* the change files are cleared after */
	q->bytes_over_since = q->soft_bytes && bytes > q->soft_bytes ? q->bytes_over_since : 0;
	q->inodes_over_since = q->soft_inodes && inodes > q->soft_inodes ? q->inodes_over_since : 0;
	cfs_bdirty(fs, b);
	return 0;
}

struct report {
	unsigned type;
	struct cfs_quota_rec *v;
	size_t n, cap;
};

static int report_one(void *arg, uint32_t id, const struct cfs_dquot *q)
{
	struct report *r = arg;
	if (cfs_reserve((void **)&r->v, &r->cap, r->n + 1, sizeof *r->v))
		return -ENOMEM;
	to_rec(r->type, id, q, &r->v[r->n++]);
	return 0;
}

int cfs_quota_report(struct cfs_fs *fs, unsigned type, bool wait, struct cfs_quota_rec **out,
		     size_t *n)
{
	*out = NULL;
	*n = 0;
	if (type == CFS_QUOTA_PROJECT && cfs_quota_on(fs) && !cfs_project_on(fs))
		return 0; /* no project ids: none to report */
	int rc = usable(fs, type);
	bool exact = wait && !fs->ro; /* else what the records say, this node's grants aside */
	if (rc || (rc = exact ? cfs_op_begin(fs, true) : cfs_op_begin_now(fs)))
		return rc;
	struct report r = {.type = type};
	rc = exact ? cfs_quota_fold_all(fs) : 0;
	if (!rc)
		rc = cfs_quota_each(fs, type, report_one, &r);
	cfs_op_end(fs);
	if (rc) {
		free(r.v);
		return rc;
	}
	*out = r.v;
	*n = r.n;
	return 0;
}
