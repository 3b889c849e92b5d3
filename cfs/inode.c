/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Inodes: one block each, its number being its block number.  The in-memory inode holds the
 * decoded fields, the inline xattr area and the whole extent map; cfs_iwrite puts them back
 * into the inode block and its extent overflow chain, inside the running transaction.  An
 * inode stays in memory while the kernel holds a lookup reference or a file handle on it. */
#include "cfs/internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

static struct cfs_inode **ihash_slot(struct cfs_fs *fs, uint64_t ino)
{
	return &fs->ihash[(ino * 0x9E3779B97F4A7C15ull) >> 50 & (CFS_ICACHE_BUCKETS - 1)];
}

static void times_unlist(struct cfs_fs *fs, struct cfs_inode *ip)
{
	for (size_t i = 0; ip->times_listed && i < fs->ntimes; i++)
		if (fs->times_list[i] == ip) {
			fs->times_list[i] = fs->times_list[--fs->ntimes];
			ip->times_listed = false;
		}
}

static void ihash_remove(struct cfs_fs *fs, struct cfs_inode *ip)
{
	times_unlist(fs, ip);
	for (struct cfs_inode **p = ihash_slot(fs, ip->ino); *p; p = &(*p)->hnext)
		if (*p == ip) {
			*p = ip->hnext;
			return;
		}
}

static void inode_free_mem(struct cfs_inode *ip)
{
	pthread_rwlock_destroy(&ip->io);
	free(ip->ext);
	free(ip->xattr);
	free(ip);
}

void cfs_icache_destroy(struct cfs_fs *fs)
{
	if (!fs->ihash)
		return;
	for (size_t i = 0; i < CFS_ICACHE_BUCKETS; i++)
		for (struct cfs_inode *ip = fs->ihash[i], *n; ip; ip = n) {
			n = ip->hnext;
			cfs_wb_truncate(fs, ip, 0); /* kept past the unmount's last commit: failed */
			cfs_iopen_forget(fs, ip);
			inode_free_mem(ip);
		}
	free(fs->ihash);
	fs->ihash = NULL;
	free(fs->times_list);
	fs->times_list = NULL;
	fs->ntimes = fs->times_cap = 0;
	fs->times_list_lost = false;
}

static struct cfs_inode *inode_new_mem(struct cfs_fs *fs, uint64_t ino)
{
	struct cfs_inode *ip = calloc(1, sizeof *ip);
	if (!ip)
		return NULL;
	ip->ino = ino;
	ip->iopen_mode = -1;
	ip->kcache_epoch = UINT64_MAX; /* the kernel's pages of a block's former inode: dropped */
	pthread_rwlock_init(&ip->io, NULL);
	struct cfs_inode **s = ihash_slot(fs, ino);
	ip->hnext = *s;
	*s = ip;
	return ip;
}

/* Its fields and inline xattrs verified (what is wrong in *why). */
static int inode_decode(struct cfs_fs *fs, const uint8_t *block, struct cfs_inode *ip,
			const char **why)
{
	memcpy(&ip->d, block, sizeof ip->d);
	uint32_t n = ip->d.nextents, inl = CFS_INODE_EXTENTS(fs->bs);
	if (cfs_inode_verify(&fs->sb, &ip->d, why))
		return -EIO;
	if (cfs_xattrs_verify(block + CFS_INODE_XATTR_OFF, ip->d.xattr_len)) {
		*why = "damaged inline xattrs";
		return -EIO;
	}
	if (ip->d.xattr_len) {
		if (!(ip->xattr = malloc(CFS_INODE_XATTR_LEN)))
			return -ENOMEM;
		memcpy(ip->xattr, block + CFS_INODE_XATTR_OFF, CFS_INODE_XATTR_LEN);
	}
	ip->ext = malloc((n ? n : 1) * sizeof *ip->ext);
	if (!ip->ext)
		return -ENOMEM;
	ip->ext_cap = n ? n : 1;
	ip->next = n < inl ? n : inl;
	memcpy(ip->ext, block + CFS_INODE_EXT_OFF, ip->next * sizeof *ip->ext);
	return 0;
}

static int read_chain(struct cfs_fs *fs, struct cfs_inode *ip)
{
	uint64_t blk = ip->d.ext_next;
	uint32_t per = CFS_EXTB_EXTENTS(fs->bs);
	while (blk && ip->next < ip->d.nextents) {
		struct cfs_buf *b;
		int rc = cfs_bread(fs, blk, CFS_B_EXTENTS, ip->ino, &b);
		if (rc)
			return rc;
		const struct cfs_dextb *x = (const void *)b->data;
		if (x->count == 0 || x->count > per || x->count > ip->d.nextents - ip->next)
			return -EIO;
		memcpy(&ip->ext[ip->next], b->data + CFS_EXTB_OFF, x->count * sizeof *ip->ext);
		ip->next += x->count;
		blk = x->next;
	}
	return ip->next == ip->d.nextents && !blk ? 0 : -EIO;
}

/* Read an inode's block and extent chain into ip (its fields, xattrs and map).  On a cluster
 * the block of an inode we knew may hold anything now: another node freed and reused it. */
static int inode_read(struct cfs_fs *fs, uint64_t ino, struct cfs_inode *ip)
{
	if (ino < fs->sb.ag_start || ino >= fs->sb.total_blocks ||
	    (!fs->checking && !cfs_block_in_use(fs, ino, cfs_iglock_grant_seq(fs, ino))))
		return -ESTALE; /* a handle to an inode freed meanwhile */
	struct cfs_buf *b;
	int rc = cfs_bread_flags(fs, ino, CFS_B_INODE, ino,
				 fs->cluster ? CFS_BREAD_MAY_BE_REUSED : 0, &b);
	if (rc)
		return rc;
	const char *why = "damaged extent map";
	rc = inode_decode(fs, b->data, ip, &why);
	if (!rc)
		rc = read_chain(fs, ip);
	if (!rc && cfs_extents_verify(&fs->sb, ip->ext, ip->next, &why))
		rc = -EIO;
	if (!rc && ip->d.nlink == 0 && ip->d.mode == 0)
		rc = -ESTALE; /* a freed inode block that was not reused */
	if (rc == -EIO)
		cfs_log(fs, "block %llu (inode %llu): %s: EIO", (unsigned long long)ino,
			(unsigned long long)ino, why);
	return rc;
}

int cfs_inode_read_copy(struct cfs_fs *fs, uint64_t ino, struct cfs_inode *copy)
{
	*copy = (struct cfs_inode){.ino = ino};
	int rc = inode_read(fs, ino, copy);
	if (rc)
		cfs_inode_copy_free(copy);
	return rc;
}

int cfs_inode_copy_blocks(struct cfs_fs *fs, const struct cfs_inode *c,
			  int (*fn)(void *arg, uint64_t blk, uint64_t len, const char *what),
			  void *arg)
{
	int rc = fn(arg, c->ino, 1, "inode block");
	for (uint32_t i = 0; !rc && i < c->next; i++)
		rc = fn(arg, c->ext[i].pblk, c->ext[i].len, "extent");
	for (uint64_t blk = c->d.ext_next; !rc && blk;) {
		struct cfs_buf *b;
		if ((rc = fn(arg, blk, 1, "extent block")) ||
		    cfs_bread(fs, blk, CFS_B_EXTENTS, c->ino, &b))
			break; /* read and verified by cfs_inode_read_copy */
		blk = ((const struct cfs_dextb *)b->data)->next;
	}
	if (!rc && c->d.xattr_block)
		rc = fn(arg, c->d.xattr_block, 1, "xattr block");
	return rc;
}

void cfs_inode_copy_free(struct cfs_inode *copy)
{
	free(copy->ext);
	free(copy->xattr);
	copy->ext = NULL;
	copy->xattr = NULL;
}

/* ---- handles: how the kernel and the callers of cfs.h name an inode ----
 * On a cluster another node may free an inode and make a new one in its block while this node
 * still knows the old one (the kernel holds it, a file is open here).  So a handle carries a
 * tag of the inode's generation above its block number: to the kernel the old and the new
 * inode are two inodes, and the old one answers ESTALE.  Local mounts use the block number. */
#define HANDLE_BLK_BITS 40
#define HANDLE_BLK_MASK ((1ull << HANDLE_BLK_BITS) - 1)

static uint64_t gen_tag(uint64_t generation)
{
	return generation % 0xffffffu + 1; /* 24 bits, never 0 */
}

uint64_t cfs_handle(const struct cfs_fs *fs, const struct cfs_inode *ip)
{
	if (ip->ino == fs->sb.root_ino)
		return CFS_ROOT;
	return fs->cluster ? ip->ino | gen_tag(ip->d.generation) << HANDLE_BLK_BITS : ip->ino;
}

uint64_t cfs_handle_ino(uint64_t handle)
{
	return handle & HANDLE_BLK_MASK;
}

uint64_t cfs_handle_block(const struct cfs_fs *fs, uint64_t handle)
{
	return handle == CFS_ROOT ? fs->sb.root_ino : cfs_handle_ino(handle);
}

static void handle_split(const struct cfs_fs *fs, uint64_t h, uint64_t *blk, uint64_t *tag)
{
	*blk = cfs_handle_block(fs, h);
	*tag = h == CFS_ROOT ? 0 : h >> HANDLE_BLK_BITS;
}

struct cfs_inode *cfs_icache_find(struct cfs_fs *fs, uint64_t handle)
{
	uint64_t blk, tag;
	handle_split(fs, handle, &blk, &tag);
	for (struct cfs_inode *ip = *ihash_slot(fs, blk); ip; ip = ip->hnext)
		if (ip->ino == blk && (!tag || gen_tag(ip->d.generation) == tag))
			return ip;
	return NULL;
}

/* The in-memory inode of a block that is not known dead. */
static struct cfs_inode *find_live(struct cfs_fs *fs, uint64_t blk)
{
	for (struct cfs_inode *ip = *ihash_slot(fs, blk); ip; ip = ip->hnext)
		if (ip->ino == blk && !ip->dead)
			return ip;
	return NULL;
}

uint64_t cfs_generation(struct cfs_fs *fs, uint64_t handle)
{
	pthread_mutex_lock(&fs->lock);
	struct cfs_inode *ip = cfs_icache_find(fs, handle);
	uint64_t gen = ip ? ip->d.generation : 0;
	pthread_mutex_unlock(&fs->lock);
	return gen;
}

/* The inode's glock in this operation's mode, before anything of it is read (a block that
 * cannot be an inode needs none: reading it says ESTALE). */
static int lock_inode(struct cfs_fs *fs, uint64_t blk)
{
	if (blk < fs->sb.ag_start || blk >= fs->sb.total_blocks)
		return 0;
	return cfs_iglock_get(fs, blk, cfs_op_imode);
}

/* Read again an inode cached under a glock grant given up since (its glock held now).  If
 * another node freed it, or freed it and made another inode in its block, it is dead here:
 * ESTALE from now on, and it leaves memory when nothing here holds it any more. */
static int refresh_locked(struct cfs_fs *fs, struct cfs_inode *ip)
{
	if (ip->dead)
		return -ESTALE;
	if (!ip->stale)
		return 0;
	struct cfs_inode fresh = {.ino = ip->ino};
	int rc = inode_read(fs, ip->ino, &fresh);
	if (!rc && fresh.d.generation != ip->d.generation)
		rc = -ESTALE;
	if (rc) {
		free(fresh.ext);
		free(fresh.xattr);
		ip->dead = rc == -ESTALE;
		return rc;
	}
	free(ip->ext);
	free(ip->xattr);
	ip->d = fresh.d;
	ip->xattr = fresh.xattr;
	ip->ext = fresh.ext;
	ip->next = fresh.next;
	ip->ext_cap = fresh.ext_cap;
	ip->stale = false;
	return 0;
}

int cfs_irefresh(struct cfs_fs *fs, struct cfs_inode *ip)
{
	if (ip->dead)
		return -ESTALE;
	ip->pins++; /* fs->lock may be released while the glock is asked for */
	int rc = lock_inode(fs, ip->ino);
	ip->pins--;
	return rc ? rc : refresh_locked(fs, ip);
}

static int iget_new(struct cfs_fs *fs, uint64_t blk, uint64_t tag, struct cfs_inode **out)
{
	struct cfs_inode *ip = inode_new_mem(fs, blk);
	if (!ip)
		return -ENOMEM;
	int rc = inode_read(fs, blk, ip);
	if (!rc && tag && gen_tag(ip->d.generation) != tag)
		rc = -ESTALE; /* the handle names an inode freed since */
	if (rc) {
		ihash_remove(fs, ip);
		inode_free_mem(ip);
		return rc;
	}
	*out = ip;
	return 0;
}

int cfs_iget(struct cfs_fs *fs, uint64_t handle, struct cfs_inode **out)
{
	*out = NULL; /* also on failure: callers put what they got on every way out */
	uint64_t blk, tag;
	handle_split(fs, handle, &blk, &tag);
	int rc = lock_inode(fs, blk);
	if (rc)
		return rc;
	struct cfs_inode *ip = cfs_icache_find(fs, handle);
	if (!ip && tag && find_live(fs, blk))
		return -ESTALE; /* another inode lives in the block now */
	if (!ip)
		return iget_new(fs, blk, tag, out);
	rc = refresh_locked(fs, ip);
	if (!rc)
		*out = ip;
	return rc;
}

int cfs_iget_entry(struct cfs_fs *fs, uint64_t ino, struct cfs_inode **out)
{
	*out = NULL;
	int rc = lock_inode(fs, ino);
	if (rc)
		return rc;
	/* Each one we knew that turns out dead leaves memory with its last reference, or at the
	 * next invalidation; if none is current, what the entry names now is read. */
	for (struct cfs_inode *ip; (ip = find_live(fs, ino));) {
		if ((rc = refresh_locked(fs, ip)) != -ESTALE) {
			*out = rc ? NULL : ip;
			return rc;
		}
	}
	return iget_new(fs, ino, 0, out);
}

size_t cfs_icache_find_all(struct cfs_fs *fs, uint64_t blk, struct cfs_inode **v, size_t max)
{
	size_t n = 0;
	for (struct cfs_inode *ip = *ihash_slot(fs, blk); ip && n < max; ip = ip->hnext)
		if (ip->ino == blk)
			v[n++] = ip;
	return n;
}

static int write_chain(struct cfs_fs *fs, struct cfs_inode *ip)
{
	uint32_t per = CFS_EXTB_EXTENTS(fs->bs), inl = CFS_INODE_EXTENTS(fs->bs);
	uint32_t over = ip->next > inl ? ip->next - inl : 0;
	uint32_t need = (over + per - 1) / per, have = 0;
	uint64_t *blks = calloc(need + 1, sizeof *blks);
	if (!blks)
		return -ENOMEM;
	int rc = 0;
	/* The chain as it is: keep the first `need` blocks, free the rest. */
	for (uint64_t blk = ip->d.ext_next; blk && !rc;) {
		struct cfs_buf *b;
		if ((rc = cfs_bread(fs, blk, CFS_B_EXTENTS, ip->ino, &b)))
			break;
		uint64_t next = ((struct cfs_dextb *)b->data)->next;
		if (have < need) {
			blks[have++] = blk;
		} else {
			rc = cfs_free(fs, blk, 1);
			ip->d.nblocks--;
		}
		blk = next;
	}
	uint32_t kept = have;
	for (; have < need && !rc; have++) {
		struct cfs_buf *b;
		if ((rc = cfs_alloc_meta(fs, ip->ino, &blks[have])))
			break;
		ip->d.nblocks++;
		if ((rc = cfs_bnew(fs, blks[have], CFS_B_EXTENTS, ip->ino, &b))) {
			have++; /* freed below */
			break;
		}
	}
	/* Not linked into the chain: give back what this call took. */
	for (uint32_t i = kept; rc && i < have; i++) {
		cfs_free(fs, blks[i], 1);
		ip->d.nblocks--;
	}
	for (uint32_t i = 0; i < need && !rc; i++) {
		struct cfs_buf *b;
		if ((rc = cfs_bread(fs, blks[i], CFS_B_EXTENTS, ip->ino, &b)))
			break;
		struct cfs_dextb *x = (void *)b->data;
		uint32_t from = inl + i * per;
		uint32_t n = ip->next - from < per ? ip->next - from : per;
		size_t bytes = n * sizeof *ip->ext;
		if (x->count != n || x->next != blks[i + 1] ||
		    memcmp(b->data + CFS_EXTB_OFF, &ip->ext[from], bytes)) {
			x->count = n;
			x->next = blks[i + 1];
			memcpy(b->data + CFS_EXTB_OFF, &ip->ext[from], bytes);
			cfs_bdirty(fs, b);
		}
	}
	if (!rc)
		ip->d.ext_next = blks[0];
	free(blks);
	return rc;
}

int cfs_iwrite(struct cfs_fs *fs, struct cfs_inode *ip)
{
	if (fs->ro)
		return -EROFS;
	if (cfs_iglock_mode(fs, ip->ino) != CFSLOCK_EX) {
		cfs_log(fs, "inode %llu: written without its glock EX: refused",
			(unsigned long long)ip->ino);
		return -EIO;
	}
	int rc = write_chain(fs, ip);
	struct cfs_buf *b;
	if (rc || (rc = cfs_bread(fs, ip->ino, CFS_B_INODE, ip->ino, &b)))
		return rc;
	/* Before the block takes the new fields: it says what was charged. */
	if ((rc = cfs_quota_charge(fs, ip->ino, (const struct cfs_dinode *)b->data, &ip->d)))
		return rc;
	ip->d.nextents = ip->next;
	uint32_t inl = CFS_INODE_EXTENTS(fs->bs);
	uint32_t n = ip->next < inl ? ip->next : inl;
	size_t hdr = sizeof(struct cfs_bhdr);
	memcpy(b->data + hdr, (const uint8_t *)&ip->d + hdr, sizeof ip->d - hdr);
	if (ip->xattr)
		memcpy(b->data + CFS_INODE_XATTR_OFF, ip->xattr, CFS_INODE_XATTR_LEN);
	else
		memset(b->data + CFS_INODE_XATTR_OFF, 0, CFS_INODE_XATTR_LEN);
	memset(b->data + CFS_INODE_EXT_OFF, 0, fs->bs - CFS_INODE_EXT_OFF);
	if (n)
		memcpy(b->data + CFS_INODE_EXT_OFF, ip->ext, n * sizeof *ip->ext);
	cfs_bdirty(fs, b);
	ip->times_dirty = false;
	return 0;
}

static void now(int64_t *sec, uint32_t *nsec)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	*sec = ts.tv_sec;
	*nsec = (uint32_t)ts.tv_nsec;
}

void cfs_itouch(struct cfs_inode *ip, bool m, bool c)
{
	if (m)
		now(&ip->d.mtime, &ip->d.mtime_ns);
	if (c)
		now(&ip->d.ctime, &ip->d.ctime_ns);
}

/* On a cluster new inodes go in this node's own groups, not near their directory: two nodes'
 * inodes in one span (one inode glock) would pass it back and forth whenever each changes its
 * own (400 chmods of a file of its own on each of 2 nodes, in their own directories: some
 * 1,000 lock messages).  Past the spans of the group's first blocks, which in group 0 hold the
 * root and the orphan directories (each in a span of its own since mkfs places them so). */
static uint64_t own_inode_goal(const struct cfs_fs *fs)
{
	uint32_t ag = (uint32_t)((uint64_t)fs->slot * fs->sb.nags / fs->sb.nslots);
	const struct cfs_ag *g = &fs->ags[ag];
	uint64_t first_free = g->start + 3; /* header, root, its bucket */
	for (uint32_t s = 0; s < fs->sb.nslots; s++) {
		uint64_t o = fs->sb.orphan_dir[s];
		if (o >= g->start && o < g->start + g->nblocks && o + 2 > first_free)
			first_free = o + 2;
	}
	return (first_free | (CFS_IGLOCK_SPAN - 1)) + 1;
}

/* Not in a span whose files another node changes (cfs_iglock_away): the new inode would take
 * that span's glock EX, and from then on this node's work on it and the other node's on its
 * file would wait for each other (a span's glock covers every inode in it).  Nor in a span
 * held PR here, a hole in a tree another node has read since this one wrote it: its
 * conversion waits for that node's let-go, for the few inodes the hole has room for (a git
 * clone after such a read converted some 20 spans one at a time); a span nobody holds costs
 * one request and has room for a run of creates.  Nor in the root's and the orphan
 * directories' spans (cfs_alloc_inode says why).  The search goes some spans at a time and
 * the next one starts where it ended, while creates follow each other within a second.  It
 * stays in the group the allocation will search (the one this operation reserved, or
 * goal's): looking further would take other groups' glocks.  A reserved group whose room is
 * all in such spans is passed over for a while (-EAGAIN: reserve again). */
#define IALLOC_TRIES 64u
#define IALLOC_CURSOR_NS 1000000000ull

static bool costly_span(struct cfs_fs *fs, uint64_t blk)
{
	return cfs_iglock_away(fs, blk) || cfs_iglock_mode(fs, blk) == CFSLOCK_PR ||
	       cfs_system_span(fs, blk);
}

static int past_costly_spans(struct cfs_fs *fs, uint64_t *goal)
{
	int64_t reserved = cfs_group_reserved();
	struct cfs_ag *g = &fs->ags[reserved >= 0 ? (uint32_t)reserved : cfs_ag_of(fs, *goal)];
	uint64_t blk, at = *goal, now = cfs_now_ns();
	if (fs->ialloc_cursor > at && fs->ialloc_cursor < g->start + g->nblocks &&
	    now - fs->ialloc_cursor_ns < IALLOC_CURSOR_NS)
		at = fs->ialloc_cursor;
	at = at < g->start ? g->start : at;
	for (unsigned tries = 0; tries < IALLOC_TRIES; tries++) {
		bool found = at < g->start + g->nblocks && !cfs_alloc_peek(fs, at, &blk);
		if (found && !costly_span(fs, blk))
			break;
		if (!found || blk < at) { /* came round */
			fs->ialloc_cursor = 0;
			if (reserved < 0 || now - g->inode_room_costly_ns < CFS_INODE_ROOM_COSTLY_NS)
				return 0; /* the allocator's own choice, from goal */
			g->inode_room_costly_ns = now;
			return -EAGAIN;
		}
		at = (blk | (CFS_IGLOCK_SPAN - 1)) + 1;
	}
	fs->ialloc_cursor = at & ~(uint64_t)(CFS_IGLOCK_SPAN - 1);
	fs->ialloc_cursor_ns = now;
	*goal = at;
	return 0;
}

/* Up to want spans past blk's with room for an inode in its group, where this node's next new
 * inodes will go, that nobody holds here and that are not costly: cfs_iglock_take_fresh's. */
static size_t fresh_spans_ahead(struct cfs_fs *fs, uint64_t blk, unsigned want, uint64_t *ahead)
{
	const struct cfs_ag *g = &fs->ags[cfs_ag_of(fs, blk)];
	uint64_t at = (blk | (CFS_IGLOCK_SPAN - 1)) + 1, next;
	size_t n = 0;
	for (unsigned tries = 0; n < want && tries < want * 4 && at < g->start + g->nblocks;
	     tries++) {
		if (cfs_alloc_peek(fs, at, &next) || next < at)
			break; /* came round */
		if (cfs_iglock_mode(fs, next) < 0 && !costly_span(fs, next))
			ahead[n++] = next;
		at = (next | (CFS_IGLOCK_SPAN - 1)) + 1;
	}
	return n;
}

/* parent: whose project the new inode takes (NULL: none), before its first write, which
 * charges it: under the metadata glock PR a charge may not move between ids. */
static int ialloc_in(struct cfs_fs *fs, const struct cfs_inode *parent, uint64_t near,
		     uint32_t mode, uint32_t uid, uint32_t gid, struct cfs_inode **out)
{
	uint64_t blk = 0, goal = fs->cluster ? own_inode_goal(fs) : near;
	bool shared = !cfs_may_allocate(fs);
	int rc = fs->cluster ? past_costly_spans(fs, &goal) : 0;
	if (rc == -EAGAIN) {
		cfs_group_unreserve(fs);
		return rc;
	}
	if (!rc && shared)
		rc = cfs_alloc_peek(fs, goal, &blk);
	if (!rc && shared && cfs_iglock_mode(fs, blk) != CFSLOCK_EX) {
		/* Under the metadata glock PR the new inode's glock is ours before anything
		 * changes, fetched holding no group (agglock.c); then the operation starts
		 * over. */
		uint64_t ahead[CFS_IGLOCK_FRESH_MAX];
		bool fresh = cfs_iglock_mode(fs, blk) < 0;
		size_t n = fresh ? fresh_spans_ahead(fs, blk, cfs_iglock_fresh_window(fs, blk), ahead)
				 : 0;
		cfs_group_unreserve(fs);
		rc = fresh ? cfs_iglock_take_fresh(fs, blk, ahead, n)
			   : cfs_iglock_get(fs, blk, CFSLOCK_EX);
		return rc ? rc : -EAGAIN;
	}
	if (rc || (rc = cfs_alloc_inode(fs, goal, &blk)))
		return rc;
	struct cfs_buf *b;
	if ((rc = cfs_iglock_get(fs, blk, CFSLOCK_EX)) ||
	    (rc = cfs_bnew(fs, blk, CFS_B_INODE, blk, &b))) {
		cfs_free(fs, blk, 1);
		return rc;
	}
	/* What is still in memory of a former inode of the block (another node freed it while
	 * the kernel here held it) is dead: lookups must find only the new one. */
	for (struct cfs_inode *old = *ihash_slot(fs, blk); old; old = old->hnext)
		old->dead |= old->ino == blk;
	struct cfs_inode *ip = inode_new_mem(fs, blk);
	if (!ip)
		return -ENOMEM;
	memcpy(&ip->d, b->data, sizeof(struct cfs_bhdr));
	ip->d.mode = mode;
	ip->d.uid = uid;
	ip->d.gid = gid;
	ip->d.generation = fs->next_generation++;
	ip->made_at = fs->grants;
	now(&ip->d.btime, &ip->d.btime_ns);
	ip->d.atime = ip->d.mtime = ip->d.ctime = ip->d.btime;
	ip->d.atime_ns = ip->d.mtime_ns = ip->d.ctime_ns = ip->d.btime_ns;
	if (parent)
		cfs_project_inherit(fs, parent, ip);
	*out = ip;
	return cfs_iwrite(fs, ip);
}

int cfs_ialloc(struct cfs_fs *fs, uint64_t near, uint32_t mode, uint32_t uid, uint32_t gid,
	       struct cfs_inode **out)
{
	return ialloc_in(fs, NULL, near, mode, uid, gid, out);
}

int cfs_ialloc_in(struct cfs_fs *fs, const struct cfs_inode *dir, uint32_t mode, uint32_t uid,
		  uint32_t gid, struct cfs_inode **out)
{
	return ialloc_in(fs, dir, dir->ino, mode, uid, gid, out);
}

_Thread_local bool cfs_making_system_inode;

int cfs_ialloc_system(struct cfs_fs *fs, uint32_t mode, struct cfs_inode **out)
{
	cfs_making_system_inode = true; /* no quota counts it, from its first write on */
	int rc = cfs_ialloc(fs, 0, mode, 0, 0, out);
	if (!rc) {
		(*out)->d.nlink = 1;
		rc = cfs_iwrite(fs, *out);
	}
	cfs_making_system_inode = false;
	return rc;
}

int cfs_ifree(struct cfs_fs *fs, struct cfs_inode *ip)
{
	int rc = 0;
	/* A big file may be freed over several commits: on the orphan list meanwhile, so a
	 * crash half way leaves it to the next mount to finish. */
	if (!ip->in_orphans && ip->next > 16)
		rc = cfs_orphan_add(fs, ip);
	if (!rc && S_ISDIR(ip->d.mode))
		rc = cfs_dir_free_overflow(fs, ip);
	/* Data kept for it (cfs/writebehind.c) has no file to go to: dropped before its blocks
	 * are freed, not written out after (git clone's files renamed over were). */
	if (!rc)
		cfs_wb_truncate(fs, ip, 0);
	if (!rc) { /* what still names it gets ESTALE while fs->lock may be let go */
		bool dead = ip->dead;
		ip->dead = true;
		rc = cfs_ext_punch(fs, ip, 0, UINT64_MAX);
		ip->dead = dead;
	}
	if (!rc && ip->d.xattr_block) {
		rc = cfs_free(fs, ip->d.xattr_block, 1);
		ip->d.xattr_block = 0;
	}
	if (!rc)
		rc = cfs_iwrite(fs, ip); /* frees the extent chain */
	static const struct cfs_dinode gone;
	if (!rc)
		rc = cfs_quota_charge(fs, ip->ino, &ip->d, &gone);
	if (!rc)
		rc = cfs_free(fs, ip->ino, 1);
	return rc;
}

int cfs_ifree_reserve(struct cfs_fs *fs, struct cfs_inode *ip)
{
	if (cfs_may_allocate(fs))
		return 0;
	if (!ip->in_orphans) /* another node unlinked it: every list is looked at, under EX */
		return -ENOSPC;
	uint32_t v[CFS_OP_GROUPS_MAX];
	unsigned n = 0;
	int rc = cfs_quota_granted(fs, &ip->d, ip->ino, 0, 0); /* what it frees goes there */
	if (!rc)
		rc = cfs_group_set_add(fs, ip->ino, v, &n);
	for (uint32_t i = 0; i < ip->next && !rc; i++)
		rc = cfs_group_set_add(fs, ip->ext[i].pblk, v, &n);
	if (!rc)
		rc = cfs_ext_chain_groups(fs, ip, v, &n);
	if (!rc && ip->d.xattr_block)
		rc = cfs_group_set_add(fs, ip->d.xattr_block, v, &n);
	if (!rc && S_ISDIR(ip->d.mode))
		rc = cfs_dir_overflow_groups(fs, ip, v, &n);
	if (!rc)
		rc = cfs_group_reserve_set(fs, v, n);
	uint64_t orphans = fs->sb.orphan_dir[fs->slot];
	if (!rc && cfs_iglock_mode(fs, orphans) != CFSLOCK_EX) { /* fetched holding no group */
		cfs_group_unreserve(fs);
		rc = cfs_iglock_get(fs, orphans, CFSLOCK_EX);
		rc = rc ? rc : -EAGAIN;
	}
	if (!rc)
		cfs_group_reserved_for_free(ip->ino);
	return rc;
}

void cfs_itimes_later(struct cfs_fs *fs, struct cfs_inode *ip)
{
	ip->times_dirty = true;
	if (ip->times_listed || fs->times_list_lost)
		return;
	if (cfs_reserve((void **)&fs->times_list, &fs->times_cap, fs->ntimes + 1,
			sizeof *fs->times_list)) {
		fs->times_list_lost = true; /* the next commit looks at every inode */
		return;
	}
	fs->times_list[fs->ntimes++] = ip;
	ip->times_listed = true;
}

static int write_times(struct cfs_fs *fs, struct cfs_inode *ip)
{
	int rc = ip->times_dirty ? cfs_iwrite(fs, ip) : 0;
	if (!rc)
		ip->times_listed = false;
	return rc;
}

int cfs_iflush_times(struct cfs_fs *fs, uint32_t bound)
{
	int rc = 0;
	if (fs->times_list_lost) {
		for (size_t i = 0; i < CFS_ICACHE_BUCKETS && !rc; i++)
			for (struct cfs_inode *ip = fs->ihash[i]; ip && !rc; ip = ip->hnext)
				if (!(rc = write_times(fs, ip)) && fs->txn.n > bound)
					rc = -EAGAIN; /* the walk starts over: written ones are clean */
		if (!rc) {
			fs->ntimes = 0;
			fs->times_list_lost = false;
		}
		return rc;
	}
	while (fs->ntimes && !(rc = write_times(fs, fs->times_list[fs->ntimes - 1])))
		if (--fs->ntimes && fs->txn.n > bound)
			return -EAGAIN;
	return rc;
}

int cfs_iput_check(struct cfs_fs *fs, struct cfs_inode *ip)
{
	if (!ip)
		return 0;
	if (ip->nlookup || ip->nopen || ip->pins || ip->ino == fs->sb.root_ino)
		return 0;
	if (ip->dead || ip->stale) { /* another node's now: nothing of ours to write or free */
		cfs_iforget(fs, ip);
		return 0;
	}
	int rc = ip->times_dirty && ip->d.nlink ? cfs_iwrite(fs, ip) : 0;
	/* On a cluster only under its glock EX, and the metadata glock EX or what the free takes
	 * reserved (cfs_ifree_reserve): a node that sees it unlinked under PR lets it go (the
	 * last node to close it frees it, iopen.c). */
	bool may_free = fs->meta.mode == CFSLOCK_EX || cfs_group_may_free(ip->ino);
	if (ip->d.nlink == 0 && !fs->ro && (!fs->cluster || (may_free &&
	    cfs_iglock_mode(fs, ip->ino) == CFSLOCK_EX)))
		rc = cfs_iopen_unlinked(fs, ip);
	cfs_iforget(fs, ip);
	return rc;
}

void cfs_icache_each(struct cfs_fs *fs, void (*fn)(struct cfs_fs *, struct cfs_inode *))
{
	for (size_t i = 0; i < CFS_ICACHE_BUCKETS; i++)
		for (struct cfs_inode *ip = fs->ihash[i]; ip; ip = ip->hnext)
			fn(fs, ip);
}

void cfs_iforget(struct cfs_fs *fs, struct cfs_inode *ip)
{
	if (ip->wb && cfs_wb_flush(fs, ip))
		cfs_log(fs, "inode %llu: its map could not be changed after a write-behind",
			(unsigned long long)ip->ino);
	cfs_iopen_forget(fs, ip);
	ihash_remove(fs, ip);
	cfs_iglock_inode_gone(fs, ip->ino);
	inode_free_mem(ip);
}
