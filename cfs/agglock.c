/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Allocation group glocks: "g<index>", EX to allocate or free in the group (GFS2's resource
 * group glocks).  The group header and its bitmap are the lock's; a node that holds it EX
 * keeps the header cached and changes it, everyone else reads it only for hints (free
 * counts for statfs and for choosing where to allocate, "is this block in use" for a handle),
 * with CFS_BREAD_RACY, and drops such a copy when the glock comes.
 *
 * Who may take one, and how (docs/cfs-cluster.md, "Per-object glocks"):
 *   - under the metadata glock EX (a link or rename in directories other nodes hold, and
 *     whatever could not reserve its groups) nobody else is in an operation, so nobody
 *     holds a group glock; a group is asked for when the allocator or a free reaches it,
 *     waiting with fs->lock held, as inode glocks are there;
 *   - under the metadata glock PR (a write that allocates, a preallocation, a hole punch
 *     or zeroing, a truncate down, a create, remove, link or rename, the free after a
 *     remove) an operation reserves its groups before it changes anything
 *     (cfs_alloc_reserve: one to allocate in; cfs_group_reserve_set: those it frees in)
 *     and holds them to its end.  It takes only groups this node holds already; for one
 *     it does not, it lets its reserved ones go, waits for that one and starts over.  So
 *     it waits while holding no group, and a holder has all its inode glocks already and
 *     waits for nothing more: a node waiting for a group held elsewhere waits for an
 *     operation that ends.
 * With quotas on, an operation that reserves under PR charges its node's grants: each reserve
 * asks cfs_quota_granted first (quota_grant.c).
 * Nodes start in their own groups (the slot's share of the volume), so a node allocating
 * alone sends no message once its groups are cached.  Nodes that share a group (more slots
 * than groups) keep it for a minimum hold time while they use it, as the metadata glock. */
#include "cfs/internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

/* The groups this thread's operation reserved under the metadata glock PR. */
static _Thread_local uint32_t op_groups[CFS_OP_GROUPS_MAX];
static _Thread_local unsigned op_ngroups;

/* The inode whose free those groups were reserved for (cfs_ifree_reserve), 0 none. */
static _Thread_local uint64_t op_free_of;

static bool reserved(uint32_t ag)
{
	for (unsigned i = 0; i < op_ngroups; i++)
		if (op_groups[i] == ag)
			return true;
	return false;
}

static void forget_header(struct cfs_fs *fs, const struct cfs_glock *gl)
{
	if (gl->ag < fs->sb.nags)
		cfs_bcache_drop_block(fs, fs->ags[gl->ag].start);
}

/* Group glocks count towards the mount's lock_cache limit but are never given back for it
 * (there is one per group at most): the lock library keeps that many fewer. */
static void count_granted(struct cfs_fs *fs, int change)
{
	fs->group_glocks_granted += (size_t)change;
	size_t limit = fs->lock_cache_limit, n = fs->group_glocks_granted;
	cfslock_set_cache_limit(fs->locks, limit > n ? limit - n : 1);
}

/* What another node may have changed since: read at the next use under the grant. */
static void group_go_invalidate(struct cfs_fs *fs, struct cfs_glock *gl)
{
	if (gl->ag < fs->ags_n)
		fs->ags[gl->ag].changes++;
	forget_header(fs, gl);
	count_granted(fs, -1);
}

/* A copy read without the grant (a hint) may be older than the last holder's change. */
static int group_go_granted(struct cfs_fs *fs, struct cfs_glock *gl, int was)
{
	(void)was; /* a group glock is never converted */
	forget_header(fs, gl);
	count_granted(fs, 1);
	return 0;
}

static const struct cfs_glock_ops group_glops = {
	.go_invalidate = group_go_invalidate,
	.go_granted = group_go_granted,
	.min_hold = true,
};

static struct cfs_glock *group_glock(struct cfs_fs *fs, uint32_t ag)
{
	if (ag >= fs->ngroup_glocks) { /* first use, or the filesystem grew */
		uint32_t n = fs->sb.nags > ag ? fs->sb.nags : ag + 1;
		struct cfs_glock **v = realloc(fs->group_glocks, n * sizeof *v);
		if (!v)
			return NULL;
		for (uint32_t i = fs->ngroup_glocks; i < n; i++)
			v[i] = NULL;
		fs->group_glocks = v;
		fs->ngroup_glocks = n;
	}
	struct cfs_glock *gl = fs->group_glocks[ag];
	if (gl)
		return gl;
	if (!(gl = malloc(sizeof *gl)))
		return NULL;
	char name[16];
	snprintf(name, sizeof name, "g%u", ag);
	if (cfs_glock_new(fs, gl, name, &group_glops)) {
		free(gl);
		return NULL;
	}
	gl->ag = ag;
	return fs->group_glocks[ag] = gl;
}

void cfs_group_glocks_free(struct cfs_fs *fs)
{
	for (uint32_t i = 0; i < fs->ngroup_glocks; i++)
		if (fs->group_glocks[i]) {
			cfs_glock_free(fs->group_glocks[i]);
			free(fs->group_glocks[i]);
		}
	free(fs->group_glocks);
	fs->group_glocks = NULL;
	fs->ngroup_glocks = 0;
}

bool cfs_group_is_ours(struct cfs_fs *fs, uint32_t ag)
{
	if (!fs->cluster)
		return true;
	const struct cfs_glock *gl = ag < fs->ngroup_glocks ? fs->group_glocks[ag] : NULL;
	return gl && gl->mode == CFSLOCK_EX && !gl->requesting;
}

int cfs_group_ensure(struct cfs_fs *fs, uint32_t ag)
{
	if (!fs->cluster || reserved(ag))
		return 0;
	if (fs->meta.mode != CFSLOCK_EX) {
		cfs_log(fs, "group %u: allocation or free without its glock or the metadata glock "
			"EX: refused", ag);
		return -EIO;
	}
	struct cfs_glock *gl = group_glock(fs, ag);
	if (!gl)
		return -ENOMEM;
	while (gl->mode != CFSLOCK_EX || gl->requesting) {
		if (cfs_fenced(fs))
			return -EIO;
		if (gl->requesting) {
			cfs_glock_wait(fs);
			continue;
		}
		int rc = cfs_glock_request(fs, gl, CFSLOCK_EX, false); /* see the top of this file */
		if (rc)
			return rc;
	}
	return 0;
}

int cfs_group_hold_cached(struct cfs_fs *fs, uint32_t ag)
{
	if (!fs->cluster)
		return 0;
	if (reserved(ag))
		return 0;
	if (op_ngroups == CFS_OP_GROUPS_MAX)
		return -ENOSPC;
	if (!cfs_group_is_ours(fs, ag) || cfs_fenced(fs))
		return -EAGAIN;
	fs->group_glocks[ag]->holders++;
	op_groups[op_ngroups++] = ag;
	return 0;
}

int cfs_group_set_add(const struct cfs_fs *fs, uint64_t blk, uint32_t *v, unsigned *n)
{
	uint32_t ag = cfs_ag_of(fs, blk);
	for (unsigned i = 0; i < *n; i++)
		if (v[i] == ag)
			return 0;
	if (*n == CFS_OP_GROUPS_MAX)
		return -ENOSPC;
	v[(*n)++] = ag;
	return 0;
}

int cfs_group_reserve_set(struct cfs_fs *fs, const uint32_t *v, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		int rc = cfs_group_hold_cached(fs, v[i]);
		if (rc != -EAGAIN) {
			if (rc)
				return rc;
			continue;
		}
		cfs_group_unreserve(fs); /* wait holding none (the top of this file) */
		rc = cfs_group_fetch(fs, v[i], true);
		return rc ? rc : -EAGAIN;
	}
	return 0;
}

int cfs_group_fetch(struct cfs_fs *fs, uint32_t ag, bool wait)
{
	struct cfs_glock *gl = group_glock(fs, ag);
	if (!gl)
		return -ENOMEM;
	if (gl->requesting) {
		cfs_glock_wait(fs);
		return 0;
	}
	if (gl->mode == CFSLOCK_EX)
		return 0;
	if (wait)
		return cfs_glock_request(fs, gl, CFSLOCK_EX, true);
	int rc = cfs_glock_try_hold(fs, gl, CFSLOCK_EX);
	if (!rc)
		cfs_glock_unhold(fs, gl); /* kept cached: the caller looks again */
	return rc;
}

int64_t cfs_group_reserved(void)
{
	return op_ngroups ? (int64_t)op_groups[0] : -1;
}

void cfs_group_reserved_for_free(uint64_t ino)
{
	op_free_of = ino;
}

bool cfs_group_may_free(uint64_t ino)
{
	return op_free_of == ino;
}

void cfs_group_unreserve(struct cfs_fs *fs)
{
	op_free_of = 0;
	while (op_ngroups)
		cfs_glock_unhold(fs, fs->group_glocks[op_groups[--op_ngroups]]);
}
