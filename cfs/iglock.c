/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Inode glocks: a cluster lock per span of CFS_IGLOCK_SPAN blocks, "i<first block>" (GFS2's inode
 * glocks, for a few inodes at once), PR to read and cache the inodes in it and every block
 * they own (extent chain, xattr block, a directory's buckets), EX to change them.  Named by
 * block number, not generation: the generation is known only once the block is read, and
 * reading it without its lock can catch another node's write.
 *
 * What it buys: when another node changes the filesystem, this node forgets only the inodes
 * that node touched; every other in-memory inode, and the kernel's pages and attributes of
 * it, stay valid.  A change of one inode (a write, a hole punch, chmod, chown, utimes), a
 * create, remove, link or rename (also of a directory to another parent) holds the metadata
 * glock PR and the glocks of the inodes it changes EX, and the groups it allocates or frees
 * in; what cannot be done so holds it EX (docs/cfs-cluster.md, "Per-object glocks").  So
 *   - under the metadata glock EX nobody else holds any inode glock (only caches it, and
 *     gives it up when asked): a request here may wait with fs->lock held, which keeps this
 *     node's other operations off the objects of a half-done change;
 *   - under the metadata glock PR an inode glock is asked for with fs->lock released (as the
 *     metadata glock is), since another node's committer may need to give up an inode glock
 *     this node waits for while our committer must give up one that node waits for.  EX
 *     there is a conversion that keeps the PR while it waits; of two nodes converting at
 *     once the lock manager refuses the later (EDEADLK), whose PR then goes before it asks
 *     again.  An operation that changes one inode waits for no other glock once it has
 *     that one; one that changes several (a create, a remove) starts over after any wait
 *     (cfs_op_waits), so it never waits while counting on a glock: no cycle forms.
 * An operation does not hold inode glocks: fs->lock, held from an operation's first look at
 * an inode to its end, keeps them from being given up.  Data I/O, which runs without fs->lock,
 * holds its inode's glock (cfs_iglock_hold) from mapping to completion.
 *
 * The lock manager's blocking callback queues the glock; the committer thread or the next
 * operation boundary acts on it once nothing here holds it (sync, open lock, forget the
 * inode, unlock).  Granted glocks are kept in least-recently-used order and given up past the
 * mount's lock_cache limit, so a walk of a big tree leaves a bounded number behind. */
#include "cfs/internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#define IGLOCK_BUCKETS 16384u
static uint64_t span_of(uint64_t blk)
{
	return blk & ~(uint64_t)(CFS_IGLOCK_SPAN - 1);
}

_Thread_local int cfs_op_imode = CFSLOCK_PR;

static struct cfs_glock **bucket(struct cfs_fs *fs, uint64_t blk)
{
	return &fs->iglocks[(blk * 0x9E3779B97F4A7C15ull) >> 50 & (IGLOCK_BUCKETS - 1)];
}

static struct cfs_glock *find(struct cfs_fs *fs, uint64_t blk)
{
	for (struct cfs_glock *gl = *bucket(fs, blk); gl; gl = gl->hnext)
		if (gl->blk == blk)
			return gl;
	return NULL;
}

/* ---- least recently used order of granted glocks ---- */

static void lru_remove(struct cfs_fs *fs, struct cfs_glock *gl)
{
	if (!gl->lru_prev)
		return;
	gl->lru_prev->lru_next = gl->lru_next;
	gl->lru_next->lru_prev = gl->lru_prev;
	gl->lru_prev = gl->lru_next = NULL;
	fs->iglocks_granted--;
}

static void lru_touch(struct cfs_fs *fs, struct cfs_glock *gl)
{
	if (gl->lru_prev)
		lru_remove(fs, gl);
	struct cfs_glock *head = &fs->iglock_lru;
	gl->lru_prev = head->lru_prev;
	gl->lru_next = head;
	head->lru_prev->lru_next = gl;
	head->lru_prev = gl;
	fs->iglocks_granted++;
}

/* ---- the glock type's operations ---- */

/* fn for every in-memory inode the glock covers (fn may take it out of memory). */
static void each_inode_of(struct cfs_fs *fs, const struct cfs_glock *gl,
			  void (*fn)(struct cfs_fs *, struct cfs_inode *))
{
	for (uint64_t blk = gl->blk; blk < gl->blk + CFS_IGLOCK_SPAN; blk++) {
		struct cfs_inode *v[8];
		size_t n = cfs_icache_find_all(fs, blk, v, 8);
		for (size_t i = 0; i < n; i++)
			fn(fs, v[i]);
	}
}

/* Another node may read the inode from now on, and run it. */
static void inode_go_demote(struct cfs_fs *fs, struct cfs_glock *gl)
{
	each_inode_of(fs, gl, cfs_text_before_let_go);
}

static int inode_go_unlock(struct cfs_fs *fs, struct cfs_glock *gl)
{
	inode_go_demote(fs, gl);
	fs->iopen_error = 0;
	each_inode_of(fs, gl, cfs_iopen_before_let_go);
	return cfs_lock_errno(fs->iopen_error);
}

/* Does the kernel hold this inode (attributes, and names in it if a directory)? */
static bool kernel_knows(const struct cfs_fs *fs, const struct cfs_inode *ip)
{
	return ip->nlookup || ip->ino == fs->sb.root_ino;
}

/* Read again at its next use; out of memory now if nothing here refers to it.  The kernel
 * forgets its attributes now and drops its pages of it soon, and does not keep them at the
 * next open (cfs_keep_cache). */
static void forget_inode(struct cfs_fs *fs, struct cfs_inode *ip)
{
	if (!kernel_knows(fs, ip) && !ip->nopen && !ip->pins) {
		cfs_iforget(fs, ip);
		return;
	}
	ip->stale = true;
	ip->lock_gone++;
	if (!kernel_knows(fs, ip))
		return;
	if (fs->kernel.attrs)
		fs->kernel.attrs(fs->kernel.arg, cfs_handle(fs, ip));
	if (fs->kernel.pages && S_ISREG(ip->d.mode) && !ip->dead)
		fs->kernel.pages(fs->kernel.arg, cfs_handle(fs, ip));
	if (S_ISDIR(ip->d.mode))
		fs->kernel_names_stale = true;
}

static void inode_go_invalidate(struct cfs_fs *fs, struct cfs_glock *gl)
{
	lru_remove(fs, gl);
	cfs_bcache_drop_owned(fs, gl->blk, CFS_IGLOCK_SPAN);
	fs->kernel_names_stale = false;
	each_inode_of(fs, gl, forget_inode);
	if (fs->kernel_names_stale && fs->kernel.names)
		fs->kernel.names(fs->kernel.arg);
}

/* Blocks its inodes own read while this node held no grant (an operation that waited for
 * another glock meanwhile reads on before it starts over) may be older than the last
 * holder's change: forgotten, so that nothing is changed from them.  Only when there were
 * such reads since the cache was last cleared of them: then the blocks of every span not
 * granted here go too (this walk of the cache at every new grant cost a cold read of 50,000
 * files on another node some 9 s of 42).  A conversion from PR kept the grant, and all it
 * read. */
static int inode_go_granted(struct cfs_fs *fs, struct cfs_glock *gl, int was)
{
	if (was < 0 && fs->unlocked_reads != fs->unlocked_reads_dropped) {
		cfs_bcache_drop_ungranted(fs, gl->blk, CFS_IGLOCK_SPAN);
		fs->unlocked_reads_dropped = fs->unlocked_reads;
	}
	return 0;
}

static const struct cfs_glock_ops inode_glops = {
	.go_unlock = inode_go_unlock,
	.go_demote = inode_go_demote,
	.go_invalidate = inode_go_invalidate,
	.go_granted = inode_go_granted,
};

/* ---- the table ---- */

static struct cfs_glock *get(struct cfs_fs *fs, uint64_t blk)
{
	struct cfs_glock *gl = find(fs, blk);
	if (gl)
		return gl;
	if (!(gl = malloc(sizeof *gl)))
		return NULL;
	char name[24];
	snprintf(name, sizeof name, "i%" PRIx64, blk);
	if (cfs_glock_new(fs, gl, name, &inode_glops)) {
		free(gl);
		return NULL;
	}
	gl->blk = blk;
	gl->inode = true;
	struct cfs_glock **b = bucket(fs, blk);
	gl->hnext = *b;
	*b = gl;
	return gl;
}

/* Out of the table once nothing is granted, asked for or held (group glocks, which share the
 * wish queue, stay). */
static void put(struct cfs_fs *fs, struct cfs_glock *gl)
{
	if (!gl->inode || gl->mode >= 0 || gl->holders || gl->waiters || gl->requesting ||
	    __atomic_load_n(&gl->queued, __ATOMIC_ACQUIRE))
		return;
	for (struct cfs_glock **p = bucket(fs, gl->blk); *p; p = &(*p)->hnext)
		if (*p == gl) {
			*p = gl->hnext;
			break;
		}
	cfs_glock_free(gl); /* no callback names it from here on */
	pthread_mutex_lock(&fs->wish_lock);
	for (struct cfs_glock **p = &fs->wishes; *p; p = &(*p)->wnext)
		if (*p == gl) { /* queued by a callback that ran just before the free */
			*p = gl->wnext;
			break;
		}
	pthread_mutex_unlock(&fs->wish_lock);
	free(gl);
}

int cfs_iglock_init(struct cfs_fs *fs)
{
	pthread_mutex_init(&fs->wish_lock, NULL);
	fs->iglock_lru.lru_prev = fs->iglock_lru.lru_next = &fs->iglock_lru;
	if (!fs->cluster)
		return 0;
	fs->iglocks = calloc(IGLOCK_BUCKETS, sizeof *fs->iglocks);
	return fs->iglocks ? 0 : -ENOMEM;
}

void cfs_iglock_shutdown(struct cfs_fs *fs)
{
	if (fs->iglocks)
		for (size_t i = 0; i < IGLOCK_BUCKETS; i++)
			for (struct cfs_glock *gl = fs->iglocks[i], *n; gl; gl = n) {
				n = gl->hnext;
				cfs_glock_free(gl);
				free(gl);
			}
	free(fs->iglocks);
	fs->iglocks = NULL;
	free(fs->idle_spans);
	fs->idle_spans = NULL;
	fs->nidle_spans = fs->idle_spans_cap = 0;
	fs->wishes = NULL;
	pthread_mutex_destroy(&fs->wish_lock);
}

/* ---- asking ---- */

/* Conversions ahead.  A node removing (or changing) a tree that another node has read
 * converts the tree's spans from PR to EX one after another, a lock round trip each while the
 * operation waits: rm -rf of 9,000 files another node read took 660 of them, 4x the time of
 * a one-node mount.  As a file's readahead does, a conversion shortly after the one before
 * in block order (a tree made by one node lies in its spans in the order it was made) has
 * the next spans this node holds PR converted with it, all asked for together, and the
 * window doubles with each batch while the spans taken ahead are used: a removal goes from
 * one directory's spans to another's far away and back, so the use, not the place, keeps the
 * window open.  It closes after a pause (the next conversions are likely another task's).  A
 * span given to another node's change in the last second is left out (it is in use there);
 * one taken ahead and not used goes back when another node asks for it. */
#define AHEAD_FIRST 4u  /* spans taken ahead by the batch that opens the window */
#define AHEAD_MAX 64u   /* and at most, by any */
#define AHEAD_GAP 64u   /* spans from one conversion to the next that opens the window */
#define AHEAD_REACH 4u  /* spans looked at per span taken (data blocks' spans have no glock) */
#define AHEAD_IDLE_NS 500000000ull /* no conversion for this long: the window closes */

static unsigned ahead_window(struct cfs_fs *fs, uint64_t span)
{
	uint64_t now = cfs_now_ns();
	unsigned w = now - fs->ahead_ns < AHEAD_IDLE_NS ? fs->ahead_window : 0;
	fs->ahead_ns = now;
	if (w && fs->ahead_used * 2 >= fs->ahead_taken)
		return w * 2 < AHEAD_MAX ? w * 2 : AHEAD_MAX;
	fs->ahead_taken = fs->ahead_used = 0;
	bool follows = span > fs->ahead_span && span - fs->ahead_span <= AHEAD_GAP * CFS_IGLOCK_SPAN;
	return follows ? AHEAD_FIRST : 0;
}

/* A span taken ahead is used: the window stays open. */
static void ahead_used(struct cfs_fs *fs, struct cfs_glock *gl)
{
	if (gl->ahead) {
		gl->ahead = false;
		fs->ahead_used++;
	}
}

/* Converts gl (PR here), and the window's spans ahead of it, to EX together, fs->lock
 * released meanwhile; what is refused stays PR.  False, having asked nothing, when there is
 * nothing to take ahead: gl converts alone (ex_under_shared_meta). */
static bool convert_ahead(struct cfs_fs *fs, struct cfs_glock *gl)
{
	unsigned window = ahead_window(fs, gl->blk);
	struct cfs_glock *v[AHEAD_MAX + 1] = {gl};
	size_t n = 1;
	for (unsigned k = 1; k <= window * AHEAD_REACH && n <= window; k++) {
		uint64_t span = gl->blk + (uint64_t)k * CFS_IGLOCK_SPAN;
		struct cfs_glock *next = find(fs, span);
		if (next && next->mode == CFSLOCK_PR && !next->requesting &&
		    !cfs_iglock_contended(fs, span))
			v[n++] = next;
	}
	fs->ahead_span = gl->blk;
	fs->ahead_window = window;
	if (n == 1)
		return false;
	for (size_t i = 0; i < n; i++)
		v[i]->waiters++; /* kept in the table until the end */
	cfs_glock_request_all(fs, v, n, CFSLOCK_EX, 0);
	for (size_t i = 0; i < n; i++) {
		v[i]->waiters--;
		v[i]->ahead = i && v[i]->mode == CFSLOCK_EX;
		fs->ahead_taken += v[i]->ahead;
		if (v[i]->mode >= 0)
			lru_touch(fs, v[i]);
		if (i)
			put(fs, v[i]);
	}
	return true;
}

/* A change of one inode under the metadata glock PR (one step of cfs_iglock_get's loop).
 * Other nodes may hold this glock PR and want EX too: PR to EX is a conversion that keeps the
 * PR (and the caches) while it waits, fs->lock released; if another node's conversion is
 * already waiting for ours, that one goes first: the PR goes (once nothing here holds it) and
 * EX is asked for anew. */
static int ex_under_shared_meta(struct cfs_fs *fs, struct cfs_glock *gl)
{
	if (gl->mode == CFSLOCK_PR) {
		int rc = cfs_glock_convert_up(fs, gl);
		if (rc != -EDEADLK)
			return rc;
		if (gl->holders) { /* data I/O here relies on the PR: wait for its unhold */
			gl->waiters++; /* kept in memory meanwhile: the unhold lets the PR go */
			cfs_glock_wait(fs);
			gl->waiters--;
			return 0;
		}
		if (cfs_glock_wait_names(fs, gl))
			return 0;
		if ((rc = cfs_glock_drop(fs, gl)))
			return rc;
	}
	return cfs_glock_request(fs, gl, CFSLOCK_EX, true);
}

int cfs_iglock_get(struct cfs_fs *fs, uint64_t blk, int mode)
{
	if (!fs->cluster)
		return 0;
	struct cfs_glock *gl = get(fs, span_of(blk));
	if (!gl)
		return -ENOMEM;
	int rc = 0;
	bool ahead_asked = false;
	while (!rc) {
		if (cfs_fenced(fs)) {
			rc = -EIO;
		} else if (gl->requesting) { /* another thread asks, fs->lock released */
			gl->waiters++; /* not a holder: a wish acted on meanwhile must not be lost */
			cfs_glock_wait(fs);
			gl->waiters--;
		} else if (gl->mode >= mode) {
			lru_touch(fs, gl);
			if (mode == CFSLOCK_EX)
				ahead_used(fs, gl);
			return 0;
		} else if (mode == CFSLOCK_EX && fs->meta.mode != CFSLOCK_EX) {
			/* With spans ahead once; if refused there, alone (looked at again first). */
			bool batched = !ahead_asked && gl->mode == CFSLOCK_PR && convert_ahead(fs, gl);
			ahead_asked = true;
			if (!batched)
				rc = ex_under_shared_meta(fs, gl);
		} else {
			/* EX over a PR granted here is a conversion: nobody else holds the lock
			 * under our metadata EX.  PR is asked for with fs->lock released (see the
			 * top of this file). */
			bool release = fs->meta.mode != CFSLOCK_EX;
			rc = cfs_glock_request(fs, gl, mode, release);
		}
	}
	put(fs, gl);
	return rc;
}

static int by_block(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

/* One batch of at most CFS_IGLOCK_PREFETCH_MAX spans (sorted) asked for together. */
static void prefetch_batch(struct cfs_fs *fs, const uint64_t *spans, size_t n, int mode,
			   unsigned flags, struct cfs_glock **v)
{
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		struct cfs_glock *gl;
		/* A span given to another node's change within the last second is likely still
		 * being changed there: a reader asks for it when it uses it, not before. */
		if ((i && spans[i] == spans[i - 1]) ||
		    (mode == CFSLOCK_PR && cfs_iglock_contended(fs, spans[i])) ||
		    !(gl = get(fs, spans[i])))
			continue;
		gl->waiters++; /* kept in the table until the end */
		v[k++] = gl;
	}
	cfs_glock_request_all(fs, v, k, mode, flags);
	for (size_t i = 0; i < k; i++) {
		v[i]->waiters--;
		if (v[i]->mode >= 0)
			lru_touch(fs, v[i]);
		put(fs, v[i]);
	}
}

void cfs_iglock_prefetch(struct cfs_fs *fs, const uint64_t *blks, size_t n, int mode)
{
	/* PR under the metadata glock PR (EX there is asked for held); EX under it EX, where
	 * other nodes only cache inode glocks, and give them up when asked. */
	bool meta_ex = fs->meta.mode == CFSLOCK_EX;
	if (!fs->cluster || !n || meta_ex != (mode == CFSLOCK_EX))
		return;
	uint64_t *spans = malloc(n * sizeof *spans);
	struct cfs_glock **v = calloc(CFS_IGLOCK_PREFETCH_MAX, sizeof *v);
	if (spans && v) {
		for (size_t i = 0; i < n; i++)
			spans[i] = span_of(blks[i]);
		qsort(spans, n, sizeof *spans, by_block);
		for (size_t at = 0; at < n; at += CFS_IGLOCK_PREFETCH_MAX) {
			size_t len = n - at < CFS_IGLOCK_PREFETCH_MAX ? n - at : CFS_IGLOCK_PREFETCH_MAX;
			prefetch_batch(fs, spans + at, len, mode, 0, v);
		}
	}
	free(spans);
	free(v);
}

/* Fresh spans ahead.  A node making many files (tar x) moves into a span nobody holds every
 * few dozen creates, and asked for each alone, a lock round trip while the create waited:
 * 673 of them, some 1 ms each, for /usr/include.  Its next spans are the next ones with room
 * in its own part of the group, so when the new span wanted follows the last batch (the
 * creates went through it) the next few are asked for with it, the window doubling with each
 * such batch; by place, not time, like a file's readahead.  Not waited for where another
 * node holds them (NOQUEUE, and no notice to that node: they may be its files); one taken
 * and never used stays cached here like any, and goes when another node asks for it. */
#define FRESH_FIRST 4u
#define FRESH_GAP 64u /* spans past the last batch's end a follower may be */

unsigned cfs_iglock_fresh_window(struct cfs_fs *fs, uint64_t blk)
{
	uint64_t span = span_of(blk);
	bool follows = fs->fresh_first && span > fs->fresh_first &&
		       span <= fs->fresh_last + FRESH_GAP * CFS_IGLOCK_SPAN;
	unsigned w = !follows ? 0 : fs->fresh_window ? fs->fresh_window * 2 : FRESH_FIRST;
	return w < CFS_IGLOCK_FRESH_MAX ? w : CFS_IGLOCK_FRESH_MAX;
}

int cfs_iglock_take_fresh(struct cfs_fs *fs, uint64_t blk, const uint64_t *ahead, size_t n)
{
	if (!fs->cluster)
		return 0;
	uint64_t spans[CFS_IGLOCK_FRESH_MAX + 1] = {span_of(blk)};
	struct cfs_glock *v[CFS_IGLOCK_FRESH_MAX + 1];
	size_t k = 1;
	for (size_t i = 0; i < n && k <= CFS_IGLOCK_FRESH_MAX; i++)
		if (span_of(ahead[i]) > spans[k - 1])
			spans[k++] = span_of(ahead[i]);
	fs->fresh_window = cfs_iglock_fresh_window(fs, blk);
	fs->fresh_first = spans[0];
	fs->fresh_last = spans[k - 1];
	if (k > 1) /* the one needed now too: refused (held elsewhere), it is waited for below */
		prefetch_batch(fs, spans, k, CFSLOCK_EX, CFSLOCK_NOQUEUE, v);
	return cfs_iglock_get(fs, blk, CFSLOCK_EX);
}

int cfs_iglock_mode(struct cfs_fs *fs, uint64_t blk)
{
	if (!fs->cluster)
		return CFSLOCK_EX;
	struct cfs_glock *gl = find(fs, span_of(blk));
	return gl && !gl->requesting ? gl->mode : -1;
}

#define CONTENDED_NS 1000000000ull

void cfs_iglock_given_to_change(struct cfs_fs *fs, const struct cfs_glock *gl)
{
	unsigned n = sizeof fs->contended / sizeof fs->contended[0];
	unsigned i = fs->contended_next++ % n;
	fs->contended[i].span = gl->blk;
	fs->contended[i].ns = cfs_now_ns();
}

enum gift { NOT_GIVEN, GIVEN, GIVEN_RECENTLY };

/* Did this node give the glock of blk's span to another node's change, among the last such
 * gifts, and in the last second? */
static enum gift given_to_change(struct cfs_fs *fs, uint64_t blk)
{
	uint64_t span = span_of(blk), now = cfs_now_ns();
	enum gift g = NOT_GIVEN;
	for (size_t i = 0; i < sizeof fs->contended / sizeof fs->contended[0]; i++)
		if (fs->contended[i].ns && fs->contended[i].span == span) {
			if (now - fs->contended[i].ns < CONTENDED_NS)
				return GIVEN_RECENTLY;
			g = GIVEN;
		}
	return g;
}

bool cfs_iglock_contended(struct cfs_fs *fs, uint64_t blk)
{
	return given_to_change(fs, blk) == GIVEN_RECENTLY;
}

/* No clock here: a node that takes the span back for a moment (a create in a directory of
 * the span) and gives it again a lock round trip later must still see it as away, however
 * long that round trip is on a loaded machine.  A span wrongly kept away costs a new inode
 * the next span, no more. */
bool cfs_iglock_away(struct cfs_fs *fs, uint64_t blk)
{
	return given_to_change(fs, blk) != NOT_GIVEN;
}

uint64_t cfs_iglock_grant_seq(struct cfs_fs *fs, uint64_t blk)
{
	if (!fs->cluster)
		return 0;
	const struct cfs_glock *gl = find(fs, span_of(blk));
	return gl && gl->mode >= 0 ? gl->grant_seq : UINT64_MAX;
}

int cfs_iglock_hold(struct cfs_fs *fs, uint64_t blk)
{
	if (!fs->cluster)
		return 0;
	struct cfs_glock *gl = find(fs, span_of(blk));
	if (!gl || gl->mode < 0)
		return -EIO; /* callers hold it after cfs_iglock_get, under the same fs->lock */
	gl->holders++;
	return 0;
}

static void unhold(struct cfs_fs *fs, struct cfs_glock *gl)
{
	cfs_glock_unhold(fs, gl);
	put(fs, gl);
}

void cfs_iglock_unhold(struct cfs_fs *fs, uint64_t blk)
{
	struct cfs_glock *gl = fs->cluster ? find(fs, span_of(blk)) : NULL;
	if (gl)
		unhold(fs, gl);
}

/* The rest of a write(2) follows the answer to its first part as soon as its thread runs
 * again, which on a loaded machine may be long after: so the glock waits for the rest, not
 * for a time, while that thread is still in a write.  A write that really ended at the page
 * boundary leaves it in user space or another call, which lets the glock go; this bound only
 * covers a thread we cannot look at, or one computing without a call since. */
#define KEEP_FOR_REST_NS 1000000000ull

void cfs_iglock_unhold_write(struct cfs_fs *fs, uint64_t blk, bool more, uint32_t tid)
{
	struct cfs_glock *gl = fs->cluster ? find(fs, span_of(blk)) : NULL;
	if (!gl)
		return;
	if (more) {
		gl->keep_until_ns = cfs_now_ns() + KEEP_FOR_REST_NS;
		gl->keep_for = blk;
		gl->keep_tid = tid;
	} else if (gl->keep_for == blk) {
		gl->keep_until_ns = 0; /* the rest came */
	}
	unhold(fs, gl);
}

static bool writing_call(long nr)
{
	static const long calls[] = {SYS_write,	  SYS_pwrite64, SYS_writev,	    SYS_pwritev,
				     SYS_pwritev2, SYS_sendfile, SYS_splice, SYS_copy_file_range};
	for (size_t i = 0; i < sizeof calls / sizeof calls[0]; i++)
		if (nr == calls[i])
			return true;
	return false;
}

/* /proc/TID/syscall says "running" for a thread on a CPU or waiting for one (on its way
 * from the first part to the rest, or not), else the call it is blocked in, -1 for none. */
bool cfs_iglock_rest_due(const struct cfs_glock *gl)
{
	if (!gl->keep_tid)
		return true; /* cannot tell: the bound decides */
	char path[48], text[32] = "";
	snprintf(path, sizeof path, "/proc/%u/syscall", gl->keep_tid);
	FILE *f = fopen(path, "r");
	if (!f)
		return errno != ENOENT; /* gone: nothing more comes */
	bool known = fgets(text, sizeof text, f) != NULL;
	fclose(f);
	if (!known || strncmp(text, "running", 7) == 0)
		return true;
	return writing_call(strtol(text, NULL, 10));
}

void cfs_iglock_names_changed(struct cfs_fs *fs, uint64_t blk)
{
	struct cfs_glock *gl = fs->cluster ? find(fs, span_of(blk)) : NULL;
	if (gl && gl->mode == CFSLOCK_EX) {
		gl->names_changed = true;
		gl->last_use_ns = cfs_now_ns();
	}
}

/* Names the kernel keeps on a cluster mount without namecache expire after NAME_LEASE_MS
 * (fuse_dentry_revalidate then looks the name up again, and keeps the dentry if it names the
 * same inode): a path walked again within that time costs no LOOKUP per component.  The
 * kernel counts from when it reads the answer, a little after this: the margin. */
#define NAME_LEASE_MS 100u
#define NAME_LEASE_MARGIN_NS 50000000ull
#define NAME_LEASE_CALM_NS 1000000000ull /* no lease in a directory given up this recently */

unsigned cfs_iglock_lease_names(struct cfs_fs *fs, uint64_t blk, uint64_t since_ns)
{
	struct cfs_glock *gl = fs->cluster ? find(fs, span_of(blk)) : NULL;
	uint64_t now = cfs_now_ns();
	uint64_t calm_from = since_ns > NAME_LEASE_CALM_NS ? since_ns - NAME_LEASE_CALM_NS : 0;
	if (!gl || gl->mode < 0 || __atomic_load_n(&gl->wanted, __ATOMIC_ACQUIRE) >= 0 ||
	    (gl->contested_ns && gl->contested_ns >= calm_from)) /* read before a let-go too */
		return 0;
	gl->names_lease_ns = now + NAME_LEASE_MS * 1000000ull + NAME_LEASE_MARGIN_NS;
	return NAME_LEASE_MS;
}

/* ---- giving up ---- */

/* Spans read here that nothing here uses any more.  A span's PR serves the inodes of it in
 * memory; once the kernel has forgotten them all (memory pressure, drop_caches) it serves
 * only blocks in this daemon's cache, which a read would mostly fetch again anyway, while
 * another node's change of them (an rm -rf of a tree this node read) must wait for this node
 * to let it go: 30 spans a batch, some 1 ms each.  So such a span goes at a committer's
 * round, off any operation's path, as GFS2's and OCFS2's inode locks go with the inodes the
 * kernel evicts.  Paced: each let-go is a message every node's lock manager orders and
 * applies, and a drop_caches after a tree was read frees hundreds of spans at once, whose
 * let-gos all in one go held another node's git clone behind them (0.2 s became 0.65 s).
 * One this node changed since it got it stays: the writer of a tree is the likely next
 * changer of it. */
#define IDLE_SPANS_MAX 65536u
#define IDLE_LET_GO_BATCH 32u /* let-gos of idle spans at most this many a ... */
#define IDLE_LET_GO_EVERY_NS 500000000ull /* ... half second */

static bool span_in_memory(struct cfs_fs *fs, uint64_t span)
{
	struct cfs_inode *ip;
	for (uint64_t blk = span; blk < span + CFS_IGLOCK_SPAN; blk++)
		if (cfs_icache_find_all(fs, blk, &ip, 1))
			return true;
	return false;
}

static bool idle(struct cfs_fs *fs, const struct cfs_glock *gl)
{
	return gl->mode == CFSLOCK_PR && !gl->changed_here && !gl->holders && !gl->requesting &&
	       !gl->waiters && __atomic_load_n(&gl->wanted, __ATOMIC_ACQUIRE) < 0 &&
	       !span_in_memory(fs, gl->blk);
}

void cfs_iglock_inode_gone(struct cfs_fs *fs, uint64_t blk)
{
	struct cfs_glock *gl = fs->cluster ? find(fs, span_of(blk)) : NULL;
	if (!gl || !idle(fs, gl) || fs->nidle_spans >= IDLE_SPANS_MAX ||
	    cfs_reserve((void **)&fs->idle_spans, &fs->idle_spans_cap, fs->nidle_spans + 1,
			sizeof *fs->idle_spans))
		return;
	fs->idle_spans[fs->nidle_spans++] = gl->blk;
}

void cfs_iglock_let_idle_go(struct cfs_fs *fs)
{
	uint64_t now = cfs_now_ns();
	if (!fs->nidle_spans || now < fs->idle_let_go_after_ns)
		return;
	size_t looked = 0, going = 0;
	for (; looked < fs->nidle_spans && going < IDLE_LET_GO_BATCH; looked++) {
		struct cfs_glock *gl = find(fs, fs->idle_spans[looked]);
		int none = -1;
		/* NL: nobody asks, and the let-go is no gift to another node's change.  Not if
		 * it is used again meanwhile, already going, or another node's wish came now. */
		if (gl && idle(fs, gl) &&
		    __atomic_compare_exchange_n(&gl->wanted, &none, CFSLOCK_NL, false,
						__ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
			cfs_iglock_wanted(fs, gl, false);
			going++;
		}
	}
	fs->nidle_spans -= looked;
	memmove(fs->idle_spans, fs->idle_spans + looked, fs->nidle_spans * sizeof *fs->idle_spans);
	if (going)
		fs->idle_let_go_after_ns = now + IDLE_LET_GO_EVERY_NS;
}

void cfs_iglock_wanted(struct cfs_fs *fs, struct cfs_glock *gl, bool wake)
{
	pthread_mutex_lock(&fs->wish_lock);
	if (!gl->queued) {
		__atomic_store_n(&gl->queued, true, __ATOMIC_RELEASE);
		gl->wnext = fs->wishes;
		fs->wishes = gl;
	}
	if (wake) {
		fs->wake_pending = true;
		pthread_cond_signal(&fs->commit_wake);
	}
	pthread_mutex_unlock(&fs->wish_lock);
}

void cfs_iglock_act(struct cfs_fs *fs)
{
	if (!fs->cluster)
		return;
	/* Taken off as a whole; each stays marked queued while it is acted on, so that a wish
	 * arriving meanwhile does not link it into the new list under our walk. */
	pthread_mutex_lock(&fs->wish_lock);
	struct cfs_glock *list = fs->wishes;
	fs->wishes = NULL;
	pthread_mutex_unlock(&fs->wish_lock);
	/* Every let-go begun, then each ended: a burst of wishes (another node reading a tree
	 * this node wrote) is answered in one round trip, not one for each. */
	for (struct cfs_glock *gl = list; gl; gl = gl->wnext)
		cfs_glock_check_begin(fs, gl);
	for (struct cfs_glock *gl = list, *n; gl; gl = n) {
		n = gl->wnext;
		cfs_glock_check_end(fs, gl);
		pthread_mutex_lock(&fs->wish_lock);
		__atomic_store_n(&gl->queued, false, __ATOMIC_RELEASE);
		pthread_mutex_unlock(&fs->wish_lock);
		/* A wish that came while we acted (its callback woke the committer already), or
		 * one that could not be acted on: looked at again in the next round.  One for a
		 * grant already given up is stale; one that waits for holders is their unhold's. */
		bool live = gl->mode >= 0 || gl->requesting;
		if (live && !gl->holders && __atomic_load_n(&gl->wanted, __ATOMIC_ACQUIRE) >= 0)
			cfs_iglock_wanted(fs, gl, false);
		put(fs, gl);
	}
	/* Past the limit (which the lock library's own cached grants and the group glocks count
	 * towards), the least recently used go as if another node had asked. */
	size_t library_cached;
	uint64_t given_back;
	cfslock_cache_counts(fs->locks, &library_cached, &given_back);
	size_t others = library_cached + fs->group_glocks_granted;
	struct cfs_glock *head = &fs->iglock_lru;
	for (struct cfs_glock *gl = head->lru_next, *n; gl != head &&
	     fs->iglocks_granted + others > fs->lock_cache_limit; gl = n) {
		n = gl->lru_next;
		if (gl->holders || gl->requesting)
			continue;
		__atomic_store_n(&gl->wanted, CFSLOCK_EX, __ATOMIC_RELEASE);
		cfs_glock_check(fs, gl);
		fs->iglocks_given_back += gl->mode < 0;
		put(fs, gl);
	}
}

