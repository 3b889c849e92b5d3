/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Quota grants: how the nodes of a cluster charge one id at once, exactly, without a cluster
 * lock per charge (docs/quota.md, "Exact on a cluster: grants"; Lustre's quota slaves).
 *
 * An id's global record (quota.c) says what was used as of its last fold and how much of its
 * limit the slots' grants hold (granted).  Each slot has a change file (the superblock's
 * quota_slot_ino) with, per id its node was granted, the grant and what the node charged
 * since the last fold (delta).  A node holding the metadata glock PR charges only its own
 * change file, in its own journal, in the allocation's transaction, under that file's inode
 * glock EX, and only while the delta fits the grant: the check comes before the operation
 * changes anything (cfs_quota_granted), with a little slack for the map and directory blocks
 * no check counts.  So the truth (used + every delta) stays within used + granted, which a
 * grant never takes past the limit.  The global records change only under the metadata glock
 * EX, where nobody else is in an operation:
 *   - fold: used += delta, granted -= grant, the slot's record zeroed;
 *   - recall: every slot's record of the id folded, when what is left of the limit is short
 *     of what an operation asks; each node lets its change file's glock go first, and so
 *     commits and writes in place what it charged (the glock rule).  So an operation is
 *     refused (EDQUOT) only after a recall, against the exact usage: never early;
 *   - grant: after a charge under EX, this node's grant is topped up to a share of what is
 *     left (a quarter, at most QUNIT: as headroom falls, grants shrink, so that near a limit
 *     every charge goes under EX and is checked against the exact usage).
 * A dead node's charges are in its change file and its journal: the survivor replays the
 * journal before anyone may take its locks, and the first recall folds what it charged and
 * takes back its grant.  fsck.cfs adds the deltas to the records it compares and folds them. */
#include "cfs/internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#define QUNIT_BYTES (64ull << 20)
#define QUNIT_INODES 1024ull
#define SLACK_BLOCKS 32ull /* map, bucket and overflow blocks of one operation */
#define SLACK_INODES 2ull

static bool finite(uint64_t grant)
{
	return grant != CFS_QUOTA_UNLIMITED;
}

static bool empty(const struct cfs_dquot_change *c)
{
	return !c->delta_bytes && !c->delta_inodes && !c->grant_bytes && !c->grant_inodes;
}

static uint64_t add_signed(uint64_t v, int64_t d)
{
	return d < 0 && (uint64_t)-d > v ? 0 : v + (uint64_t)d;
}

/* The change record of (type, id) in the change file ip: *c NULL if its block is a hole and
 * !create.  Blocks are added only under the metadata glock EX (the file's map changes). */
static int change_record(struct cfs_fs *fs, struct cfs_inode *ip, unsigned type, uint32_t id,
			 bool create, struct cfs_buf **b, struct cfs_dquot_change **c)
{
	*c = NULL;
	if (!ip)
		return 0; /* the slot has no change file */
	uint64_t per = CFS_QCHANGES_PER_BLOCK(fs->bs);
	uint64_t lblk = type * CFS_QCHANGE_TYPE_SPAN + id / per;
	bool unwritten;
	uint64_t pblk = cfs_ext_bmap(ip, lblk, &unwritten);
	int rc;
	if (pblk) {
		rc = cfs_bread(fs, pblk, CFS_B_QUOTA, ip->ino, b);
	} else if (!create) {
		return 0;
	} else {
		if ((rc = cfs_alloc_meta(fs, ip->ino, &pblk)))
			return rc;
		struct cfs_dextent e = {lblk, pblk, 1, 0};
		if ((rc = cfs_bnew(fs, pblk, CFS_B_QUOTA, ip->ino, b)) ||
		    (rc = cfs_ext_insert(ip, &e))) {
			cfs_free(fs, pblk, 1);
			return rc;
		}
		ip->d.nblocks++;
		uint64_t end = (lblk + 1) * fs->bs;
		ip->d.size = ip->d.size > end ? ip->d.size : end;
		rc = cfs_iwrite(fs, ip);
	}
	if (!rc)
		*c = (struct cfs_dquot_change *)((*b)->data + CFS_DQUOT_OFF) + id % per;
	return rc;
}

/* A slot's change file made (under the metadata glock EX): named by the superblock, which
 * other nodes read again when they next get the metadata glock. */
static int make_change_file(struct cfs_fs *fs, uint32_t slot, struct cfs_inode **ip)
{
	int rc = cfs_ialloc_system(fs, S_IFREG | 0600, ip);
	if (rc)
		return rc;
	struct cfs_dsuper sb = fs->sb;
	sb.quota_slot_ino[slot] = (*ip)->ino;
	sb.generation++;
	if (!(rc = cfs_super_journal(fs, &sb)))
		fs->sb = sb;
	cfs_log(fs, "quota: slot %u keeps its grants in inode %llu", slot,
		(unsigned long long)(*ip)->ino);
	return rc;
}

/* Slot's change file with its glock EX, or NULL if it has none and !create.  Under the
 * metadata glock PR only this node's own, only if its glock is EX here already (-ENOSPC: the
 * caller goes under EX, where it may be waited for). */
static int change_file(struct cfs_fs *fs, uint32_t slot, bool create, struct cfs_inode **ip)
{
	*ip = NULL;
	uint64_t ino = fs->sb.quota_slot_ino[slot];
	if (!cfs_may_allocate(fs)) {
		if (slot != fs->slot || !ino || cfs_iglock_mode(fs, ino) != CFSLOCK_EX)
			return -ENOSPC;
		return cfs_iget(fs, ino, ip);
	}
	if (!ino && !create)
		return 0;
	if (!ino)
		return make_change_file(fs, slot, ip);
	int rc = cfs_iglock_get(fs, ino, CFSLOCK_EX);
	return rc ? rc : cfs_iget(fs, ino, ip);
}

static int put(struct cfs_fs *fs, struct cfs_inode *ip, int rc)
{
	int p = ip ? cfs_iput_check(fs, ip) : 0;
	return rc ? rc : p;
}

/* Slot's change file's glock EX here (under the metadata glock EX), for
 * cfs_quota_changes_each, which gets the inode itself: the cache counts no references, so
 * an inode got twice would be freed by the first put. */
static int lock_change_file(struct cfs_fs *fs, uint32_t slot)
{
	struct cfs_inode *ip;
	int rc = change_file(fs, slot, false, &ip);
	return put(fs, ip, rc);
}

/* A slot's charges c moved into the id's global record q. */
static void charges_into(struct cfs_dquot *q, struct cfs_dquot_change *c)
{
	q->used_bytes = add_signed(q->used_bytes, c->delta_bytes);
	q->used_inodes = add_signed(q->used_inodes, c->delta_inodes);
	c->delta_bytes = c->delta_inodes = 0;
}

/* n of a grant given back: out of it, and out of the record's granted. */
static void give_back(uint64_t *grant, uint64_t *granted, uint64_t n)
{
	if (!finite(*grant))
		return;
	n = n < *grant ? n : *grant;
	*grant -= n;
	*granted -= n < *granted ? n : *granted;
}

/* A slot's record c (in block cb) folded into the id's global record q: its charges into
 * used, its grant given back. */
static void fold_change(struct cfs_fs *fs, struct cfs_dquot *q, struct cfs_dquot_change *c,
			struct cfs_buf *cb)
{
	if (empty(c))
		return;
	charges_into(q, c);
	give_back(&c->grant_bytes, &q->granted_bytes, c->grant_bytes);
	give_back(&c->grant_inodes, &q->granted_inodes, c->grant_inodes);
	memset(c, 0, sizeof *c);
	cfs_bdirty(fs, cb);
}

/* One slot's record of the id folded into q (its grant given back). */
static int fold_slot(struct cfs_fs *fs, uint32_t slot, unsigned type, uint32_t id,
		     struct cfs_dquot *q)
{
	struct cfs_inode *ip;
	struct cfs_buf *b;
	struct cfs_dquot_change *c = NULL;
	int rc = change_file(fs, slot, false, &ip);
	if (!rc && ip)
		rc = change_record(fs, ip, type, id, false, &b, &c);
	if (!rc && c)
		fold_change(fs, q, c, b);
	return put(fs, ip, rc);
}

int cfs_quota_fold_own(struct cfs_fs *fs, unsigned type, uint32_t id, struct cfs_dquot *q)
{
	return fold_slot(fs, fs->slot, type, id, q);
}

int cfs_quota_recall(struct cfs_fs *fs, unsigned type, uint32_t id, struct cfs_dquot *q)
{
	int rc = 0;
	for (uint32_t s = 0; s < fs->sb.nslots && !rc; s++)
		rc = fold_slot(fs, s, type, id, q);
	return rc;
}

/* A grant of what is left below ceiling (0: no limit), in unit steps at most. */
static uint64_t grant_of(uint64_t ceiling, uint64_t taken, uint64_t unit, uint64_t slack)
{
	if (!ceiling)
		return CFS_QUOTA_UNLIMITED;
	if (taken >= ceiling)
		return 0;
	uint64_t g = (ceiling - taken) / 4;
	g = g < unit ? g : unit;
	return g > 2 * slack ? g : 0; /* less would be used up by the next operation */
}

int cfs_quota_regrant(struct cfs_fs *fs, unsigned type, uint32_t id, struct cfs_dquot *q)
{
	if (!fs->cluster || fs->ro)
		return 0; /* one node: every charge goes to the records, none waits for a lock */
	struct cfs_inode *ip;
	struct cfs_buf *b;
	struct cfs_dquot_change *c;
	int rc = cfs_quota_fold_own(fs, type, id, q);
	if (rc || (rc = change_file(fs, fs->slot, true, &ip)))
		return rc;
	if (!(rc = change_record(fs, ip, type, id, true, &b, &c)) && c) {
		/* A soft limit is the ceiling: past it, each charge is checked for its grace. */
		uint64_t cb = q->soft_bytes ? q->soft_bytes : q->hard_bytes;
		uint64_t ci = q->soft_inodes ? q->soft_inodes : q->hard_inodes;
		c->grant_bytes = grant_of(cb, q->used_bytes + q->granted_bytes, QUNIT_BYTES,
					  SLACK_BLOCKS * fs->bs);
		c->grant_inodes = grant_of(ci, q->used_inodes + q->granted_inodes, QUNIT_INODES,
					   SLACK_INODES);
		if (finite(c->grant_bytes))
			q->granted_bytes += c->grant_bytes;
		if (finite(c->grant_inodes))
			q->granted_inodes += c->grant_inodes;
		cfs_bdirty(fs, b);
	}
	return put(fs, ip, rc);
}

/* May this node charge n more to a grant (with slack for what no check counts)? */
static bool fits(int64_t delta, uint64_t grant, uint64_t n, uint64_t slack)
{
	if (!finite(grant))
		return true;
	if (grant < n + slack)
		return false;
	return delta <= (int64_t)(grant - n - slack);
}

int cfs_quota_granted(struct cfs_fs *fs, const struct cfs_dinode *d, uint64_t ino,
		      uint64_t blocks, uint64_t inodes)
{
	if (!cfs_quota_needs_meta_ex(fs) || cfs_quota_exempt(fs, ino))
		return 0;
	uint64_t own = fs->sb.quota_slot_ino[fs->slot];
	if (own && cfs_iglock_mode(fs, own) != CFSLOCK_EX) {
		/* Taken by a node that folded it, or given up for another inode of its span:
		 * fetched holding no group (agglock.c), then the operation starts over. */
		cfs_group_unreserve(fs);
		int rc = cfs_iglock_get(fs, own, CFSLOCK_EX);
		return rc ? rc : -EAGAIN;
	}
	uint32_t id[CFS_QUOTA_TYPES];
	cfs_quota_ids(fs, d, id);
	struct cfs_inode *ip;
	int rc = change_file(fs, fs->slot, false, &ip);
	for (unsigned t = 0; t < CFS_QUOTA_TYPES && !rc; t++) {
		struct cfs_buf *b;
		struct cfs_dquot_change *c;
		if (id[t] == UINT32_MAX)
			continue;
		if (!(rc = change_record(fs, ip, t, id[t], false, &b, &c)) &&
		    (!c || !fits(c->delta_bytes, c->grant_bytes, blocks * fs->bs,
				 SLACK_BLOCKS * fs->bs) ||
		     !fits(c->delta_inodes, c->grant_inodes, inodes, SLACK_INODES)))
			rc = -ENOSPC;
	}
	return put(fs, ip, rc);
}

int cfs_quota_grant_room(struct cfs_fs *fs, unsigned type, uint32_t id, uint64_t *bytes)
{
	struct cfs_inode *ip;
	struct cfs_buf *b;
	struct cfs_dquot_change *c = NULL;
	int rc = change_file(fs, fs->slot, false, &ip);
	if (!rc)
		rc = change_record(fs, ip, type, id, false, &b, &c);
	*bytes = 0;
	if (!rc && c)
		*bytes = !finite(c->grant_bytes) ? UINT64_MAX
			 : c->delta_bytes >= (int64_t)c->grant_bytes ? 0
			 : (uint64_t)((int64_t)c->grant_bytes - c->delta_bytes);
	return put(fs, ip, rc == -ENOSPC ? 0 : rc);
}

int cfs_quota_grant_charge(struct cfs_fs *fs, unsigned type, uint32_t id, int64_t bytes,
			   int64_t inodes)
{
	struct cfs_inode *ip;
	struct cfs_buf *b;
	struct cfs_dquot_change *c = NULL;
	int rc = change_file(fs, fs->slot, false, &ip);
	if (!rc)
		rc = change_record(fs, ip, type, id, false, &b, &c);
	if (!rc && !c)
		rc = -ENOSPC;
	if (rc) {
		/* A path that reserved its groups without asking cfs_quota_granted first. */
		cfs_log(fs, "quota: %s %u charged under the metadata glock PR with no grant here: "
			    "refused", cfs_quota_type_name(type), id);
		return put(fs, ip, -EIO);
	}
	c->delta_bytes += bytes;
	c->delta_inodes += inodes;
	if ((finite(c->grant_bytes) && c->delta_bytes > (int64_t)c->grant_bytes) ||
	    (finite(c->grant_inodes) && c->delta_inodes > (int64_t)c->grant_inodes))
		cfs_log(fs, "quota: %s %u charged past this node's grant (%lld of %llu bytes, %lld "
			    "of %llu inodes)", cfs_quota_type_name(type), id,
			(long long)c->delta_bytes, (unsigned long long)c->grant_bytes,
			(long long)c->delta_inodes, (unsigned long long)c->grant_inodes);
	cfs_bdirty(fs, b);
	fs->quota_charged = true;
	return put(fs, ip, 0);
}

int cfs_quota_grant_delta(struct cfs_fs *fs, unsigned type, uint32_t id, int64_t *bytes,
			  int64_t *inodes)
{
	*bytes = *inodes = 0;
	uint64_t ino = fs->sb.quota_slot_ino[fs->slot];
	if (!ino || (fs->cluster && cfs_iglock_mode(fs, ino) != CFSLOCK_EX))
		return 0; /* none, or folded by another node since */
	struct cfs_inode *ip;
	struct cfs_buf *b;
	struct cfs_dquot_change *c = NULL;
	int rc = cfs_iget(fs, ino, &ip);
	if (!rc)
		rc = change_record(fs, ip, type, id, false, &b, &c);
	if (!rc && c) {
		*bytes = c->delta_bytes;
		*inodes = c->delta_inodes;
	}
	return put(fs, ip, rc);
}

int cfs_quota_changes_each(struct cfs_fs *fs, uint32_t slot, cfs_quota_change_fn fn, void *arg)
{
	uint64_t ino = fs->sb.quota_slot_ino[slot], per = CFS_QCHANGES_PER_BLOCK(fs->bs);
	struct cfs_inode *ip;
	if (!ino)
		return 0;
	int rc = cfs_iget(fs, ino, &ip);
	for (uint32_t i = 0; !rc && i < ip->next; i++)
		for (uint32_t k = 0; !rc && k < ip->ext[i].len; k++) {
			struct cfs_buf *b;
			uint64_t lblk = ip->ext[i].lblk + k;
			if ((rc = cfs_bread(fs, ip->ext[i].pblk + k, CFS_B_QUOTA, ino, &b)))
				break;
			struct cfs_dquot_change *c = (void *)(b->data + CFS_DQUOT_OFF);
			unsigned type = (unsigned)(lblk / CFS_QCHANGE_TYPE_SPAN);
			uint64_t first = (lblk % CFS_QCHANGE_TYPE_SPAN) * per;
			for (uint64_t j = 0; j < per && !rc; j++)
				if (!empty(&c[j]) && first + j <= UINT32_MAX)
					rc = fn(arg, type, (uint32_t)(first + j), &c[j], b);
		}
	return put(fs, ip, rc);
}

static int fold_one(void *arg, unsigned type, uint32_t id, struct cfs_dquot_change *c,
		    struct cfs_buf *cb)
{
	struct cfs_fs *fs = arg;
	struct cfs_dquot *q;
	struct cfs_buf *b;
	cfs_bdirty(fs, cb); /* first: dirty, it stays in the cache while the record is read */
	int rc = cfs_quota_record(fs, type, id, true, &b, &q);
	if (!rc) {
		fold_change(fs, q, c, cb);
		cfs_bdirty(fs, b);
	}
	return rc;
}

int cfs_quota_fold_all(struct cfs_fs *fs)
{
	int rc = 0;
	for (uint32_t s = 0; s < fs->sb.nslots && !rc; s++)
		if (!(rc = lock_change_file(fs, s)))
			rc = cfs_quota_changes_each(fs, s, fold_one, fs);
	return rc;
}

/* ---- the folder: what this node charged reaches the records within quota_fold_s ---- */

/* The folder's fold of c: its charges into q, and its grant less what they took, so that
 * used + granted stays what it was and the node may charge what it could before (frees
 * keep the grant: the node could charge more before, not less). */
static int fold_charges(void *arg, unsigned type, uint32_t id, struct cfs_dquot_change *c,
			struct cfs_buf *cb)
{
	struct cfs_fs *fs = arg;
	struct cfs_dquot *q;
	struct cfs_buf *b;
	int64_t bytes = c->delta_bytes, inodes = c->delta_inodes;
	if (!bytes && !inodes)
		return 0;
	cfs_bdirty(fs, cb); /* first: dirty, it stays in the cache while the record is read */
	int rc = cfs_quota_record(fs, type, id, true, &b, &q);
	if (rc)
		return rc;
	charges_into(q, c);
	give_back(&c->grant_bytes, &q->granted_bytes, bytes > 0 ? (uint64_t)bytes : 0);
	give_back(&c->grant_inodes, &q->granted_inodes, inodes > 0 ? (uint64_t)inodes : 0);
	cfs_bdirty(fs, b);
	cfs_bdirty(fs, cb); /* again: a commit on the way may have written it */
	return 0;
}

/* Under the metadata glock EX.  The change file and the records change in one transaction:
 * a crash leaves the charges in one or the other, never both or neither. */
static int fold_charges_here(struct cfs_fs *fs)
{
	int rc = cfs_op_begin(fs, true);
	if (rc)
		return rc;
	if (fs->quota_charged && !(rc = lock_change_file(fs, fs->slot)))
		rc = cfs_quota_changes_each(fs, fs->slot, fold_charges, fs);
	if (!rc)
		fs->quota_charged = false;
	cfs_op_end(fs);
	return rc;
}

static bool charged(struct cfs_fs *fs)
{
	pthread_mutex_lock(&fs->lock);
	bool due = fs->quota_charged;
	pthread_mutex_unlock(&fs->lock);
	return due;
}

static void *folder(void *arg)
{
	struct cfs_fs *fs = arg;
	int last = 0;
	pthread_mutex_lock(&fs->folder_lock);
	while (!fs->folder_stop) {
		struct timespec until = cfs_deadline_after_ns(fs->quota_fold_s * 1000000000ull);
		pthread_cond_timedwait(&fs->folder_wake, &fs->folder_lock, &until);
		if (fs->folder_stop)
			break;
		pthread_mutex_unlock(&fs->folder_lock);
		int rc = charged(fs) ? fold_charges_here(fs) : 0;
		if (rc && rc != last) /* once per kind of failure, not every round */
			cfs_log(fs, "quota: folding this node's charges into the records: %s",
				strerror(-rc));
		last = rc;
		pthread_mutex_lock(&fs->folder_lock);
	}
	pthread_mutex_unlock(&fs->folder_lock);
	return NULL;
}

int cfs_quota_folder_start(struct cfs_fs *fs)
{
	if (!fs->cluster || fs->ro || !cfs_quota_on(fs) || fs->quota_fold_s == CFS_QUOTA_FOLD_NEVER)
		return 0;
	int rc = -pthread_create(&fs->folder, NULL, folder, fs);
	fs->folder_running = !rc;
	return rc;
}

void cfs_quota_folder_stop(struct cfs_fs *fs)
{
	if (!fs->folder_running)
		return;
	pthread_mutex_lock(&fs->folder_lock);
	fs->folder_stop = true;
	pthread_cond_broadcast(&fs->folder_wake);
	pthread_mutex_unlock(&fs->folder_lock);
	pthread_join(fs->folder, NULL);
	fs->folder_running = false;
}
