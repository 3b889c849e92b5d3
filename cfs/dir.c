/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Directories, indexed by name hash with linear hashing: 2^level + split buckets, bucket b
 * being logical block b of the directory.  A name lives in bucket hash mod 2^level, or mod
 * 2^(level+1) if that bucket was already split.  When the directory averages more than
 * SPLIT_LOAD entries a bucket, the next bucket splits in two; so lookups read one bucket (and
 * its overflow chain, rarely more than a block) however large the directory grows, and every
 * change touches a handful of blocks, which keeps journal transactions small. */
#include "cfs/internal.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SPLIT_LOAD(bs) (((bs) - CFS_DIRB_OFF) / 48u)

struct dent {
	uint32_t hash;
	uint64_t ino;
	uint8_t type, len;
	const char *name;
};

static size_t dent_size(size_t len) { return CFS_DIRENT_FIXED + len; }

static void dent_get(const uint8_t *p, struct dent *d)
{
	memcpy(&d->hash, p, 4);
	memcpy(&d->ino, p + 4, 8);
	d->type = p[12];
	d->len = p[13];
	d->name = (const char *)p + 14;
}

static void dent_put(uint8_t *p, uint32_t hash, uint64_t ino, uint8_t type, const char *name,
		     size_t len)
{
	memcpy(p, &hash, 4);
	memcpy(p + 4, &ino, 8);
	p[12] = type;
	p[13] = (uint8_t)len;
	memcpy(p + 14, name, len);
}

uint32_t cfs_dir_hash(const struct cfs_fs *fs, const char *name, size_t len)
{
	return cvm_crc32c(fs->sb.hash_seed, name, len);
}

static uint64_t nbuckets(const struct cfs_inode *dir)
{
	return (1ull << dir->d.dir_level) + dir->d.dir_split;
}

static uint64_t bucket_of(const struct cfs_inode *dir, uint32_t hash)
{
	uint64_t b = hash & ((1ull << dir->d.dir_level) - 1);
	if (b < dir->d.dir_split)
		b = hash & ((2ull << dir->d.dir_level) - 1);
	return b;
}

static int read_bucket(struct cfs_fs *fs, struct cfs_inode *dir, uint64_t bucket,
		       struct cfs_buf **out)
{
	bool unwritten;
	uint64_t pblk = cfs_ext_bmap(dir, bucket, &unwritten);
	if (!pblk) {
		cfs_log(fs, "inode %llu: directory bucket %llu is not mapped: EIO",
			(unsigned long long)dir->ino, (unsigned long long)bucket);
		return -EIO;
	}
	return cfs_bread(fs, pblk, CFS_B_BUCKET, dir->ino, out);
}

/* The overflow block after b, or NULL.  *hops counts the blocks followed from the bucket: a
 * chain longer than the blocks its directory holds loops (a damaged next), and ends in EIO
 * rather than in a thread that never comes back. */
static int read_next(struct cfs_fs *fs, struct cfs_inode *dir, struct cfs_buf *b,
		     struct cfs_buf **out, uint64_t *hops)
{
	uint64_t next = ((struct cfs_ddirb *)b->data)->next;
	if (!next) {
		*out = NULL;
		return 0;
	}
	if (++*hops > dir->d.nblocks) {
		cfs_log(fs, "block %llu (directory %llu): its overflow chain loops: EIO",
			(unsigned long long)b->blkno, (unsigned long long)dir->ino);
		return -EIO;
	}
	return cfs_bread(fs, next, CFS_B_DIROVF, dir->ino, out);
}

/* The header's byte count fits the block and the entries fill exactly that many bytes, so
 * the loops below may step from entry to entry without checking. */
static bool block_sane(const struct cfs_fs *fs, const struct cfs_buf *b)
{
	const struct cfs_ddirb *h = (const void *)b->data;
	if (h->used > fs->bs - CFS_DIRB_OFF)
		return false;
	uint32_t o = 0;
	while (o < h->used) {
		uint8_t len = b->data[CFS_DIRB_OFF + o + 13];
		if (len == 0 || o + dent_size(len) > h->used)
			return false;
		o += (uint32_t)dent_size(len);
	}
	return true;
}

/* Every entry of a bucket's chain, each block checked first.  visit returns 0 to go on, > 0
 * to stop (found), < 0 an error; so does each_entry. */
typedef int (*entry_fn)(void *arg, struct cfs_buf *b, uint32_t off, const struct dent *d);

static int each_entry(struct cfs_fs *fs, struct cfs_inode *dir, uint64_t bucket, entry_fn visit,
		      void *arg)
{
	struct cfs_buf *b;
	uint64_t hops = 0;
	int rc = read_bucket(fs, dir, bucket, &b);
	while (!rc && b) {
		if (!block_sane(fs, b))
			return -EIO;
		const struct cfs_ddirb *h = (const void *)b->data;
		for (uint32_t o = 0; o < h->used;) {
			struct dent d;
			dent_get(b->data + CFS_DIRB_OFF + o, &d);
			if ((rc = visit(arg, b, o, &d)))
				return rc;
			o += (uint32_t)dent_size(d.len);
		}
		rc = read_next(fs, dir, b, &b, &hops);
	}
	return rc;
}

struct search {
	const char *name;
	size_t len;
	uint32_t hash;
	bool any_hash; /* fsck: the name's bytes, whatever hash the entry says */
	struct cfs_buf *blk;
	uint32_t off;
	struct dent found;
};

static int match(void *arg, struct cfs_buf *b, uint32_t off, const struct dent *d)
{
	struct search *s = arg;
	if ((!s->any_hash && d->hash != s->hash) || d->len != s->len ||
	    memcmp(d->name, s->name, s->len))
		return 0;
	s->blk = b;
	s->off = off;
	s->found = *d;
	return 1;
}

/* Find name in the bucket chain: the block and the entry's offset in it. */
static int find(struct cfs_fs *fs, struct cfs_inode *dir, const char *name, size_t len,
		uint32_t hash, struct cfs_buf **blk, uint32_t *off, struct dent *out)
{
	struct search s = {.name = name, .len = len, .hash = hash};
	int rc = each_entry(fs, dir, bucket_of(dir, hash), match, &s);
	if (rc <= 0)
		return rc ? rc : -ENOENT;
	*blk = s.blk;
	*off = s.off;
	if (out)
		*out = s.found;
	return 0;
}

int cfs_dir_lookup(struct cfs_fs *fs, struct cfs_inode *dir, const char *name, uint64_t *ino,
		   uint8_t *type)
{
	size_t len = strlen(name);
	if (len > CFS_NAME_MAX)
		return -ENAMETOOLONG;
	struct cfs_buf *b;
	uint32_t off;
	struct dent d;
	int rc = find(fs, dir, name, len, cfs_dir_hash(fs, name, len), &b, &off, &d);
	if (rc == -EIO)
		cfs_log(fs, "inode %llu: damaged directory block: EIO", (unsigned long long)dir->ino);
	if (!rc) {
		*ino = d.ino;
		if (type)
			*type = d.type;
	}
	return rc;
}

/* reserve: the block completes a change begun (a split), not a new name: it may take the
 * blocks kept for maps (cfs_alloc_meta). */
static int new_overflow(struct cfs_fs *fs, struct cfs_inode *dir, bool reserve,
			struct cfs_buf **out)
{
	uint64_t blk = 0, room;
	uint32_t got;
	int rc = reserve ? 0 : cfs_quota_room(fs, dir, 1, &room); /* a new name: its owner's quota */
	if (!rc)
		rc = reserve ? cfs_alloc_meta(fs, dir->ino, &blk) : cfs_alloc(fs, dir->ino, 1, &blk, &got);
	if (rc)
		return rc;
	if ((rc = cfs_bnew(fs, blk, CFS_B_DIROVF, dir->ino, out)))
		return rc;
	dir->d.nblocks++;
	return 0;
}

/* Put packed entries (bytes long) into a bucket's chain, reusing and freeing its blocks. */
static int write_bucket(struct cfs_fs *fs, struct cfs_inode *dir, struct cfs_buf *b,
			const uint8_t *ents, uint32_t bytes)
{
	uint32_t cap = fs->bs - CFS_DIRB_OFF, pos = 0;
	uint64_t hops = 0;
	for (;;) {
		struct cfs_ddirb *h = (void *)b->data;
		uint32_t used = 0, count = 0;
		while (pos + used < bytes) {
			size_t sz = dent_size(ents[pos + used + 13]);
			if (used + sz > cap)
				break;
			used += (uint32_t)sz;
			count++;
		}
		memcpy(b->data + CFS_DIRB_OFF, ents + pos, used);
		memset(b->data + CFS_DIRB_OFF + used, 0, cap - used);
		h->used = used;
		h->count = count;
		pos += used;
		cfs_bdirty(fs, b);
		struct cfs_buf *next;
		int rc = read_next(fs, dir, b, &next, &hops);
		if (rc)
			return rc;
		if (pos == bytes) {
			h->next = 0;
			while (next) { /* the rest of the old chain */
				uint64_t blk = next->blkno;
				if ((rc = read_next(fs, dir, next, &next, &hops)) ||
				    (rc = cfs_free(fs, blk, 1)))
					return rc;
				dir->d.nblocks--;
			}
			return 0;
		}
		if (!next && (rc = new_overflow(fs, dir, true, &next)))
			return rc;
		h->next = next->blkno;
		b = next;
	}
}

/* Read a bucket's whole chain into one packed array. */
static int gather(struct cfs_fs *fs, struct cfs_inode *dir, uint64_t bucket, uint8_t **out,
		  uint32_t *bytes, struct cfs_buf **first)
{
	struct cfs_buf *b = NULL;
	uint64_t hops = 0;
	int rc = read_bucket(fs, dir, bucket, &b);
	*first = b;
	uint8_t *v = NULL;
	uint32_t n = 0;
	while (!rc && b) {
		const struct cfs_ddirb *h = (const void *)b->data;
		if (!block_sane(fs, b)) {
			rc = -EIO;
			break;
		}
		uint8_t *nv = realloc(v, n + h->used + 1);
		if (!nv) {
			rc = -ENOMEM;
			break;
		}
		v = nv;
		memcpy(v + n, b->data + CFS_DIRB_OFF, h->used);
		n += h->used;
		rc = read_next(fs, dir, b, &b, &hops);
	}
	if (rc) {
		free(v);
		return rc;
	}
	*out = v;
	*bytes = n;
	return 0;
}

static int new_bucket(struct cfs_fs *fs, struct cfs_inode *dir, uint64_t bucket,
		      struct cfs_buf **out)
{
	int rc = cfs_ext_fill(fs, dir, bucket, 1);
	if (!rc)
		rc = cfs_ext_mark_written(dir, bucket, 1);
	bool unwritten;
	if (!rc)
		rc = cfs_bnew(fs, cfs_ext_bmap(dir, bucket, &unwritten), CFS_B_BUCKET, dir->ino, out);
	return rc;
}

/* split_one found no block for the new bucket and changed nothing. */
#define SPLIT_NO_SPACE 1

/* Only the new bucket is allocated before entries move; the overflow blocks of its chain may
 * take the reserve, so that a split once begun ends whole. */
static int split_one(struct cfs_fs *fs, struct cfs_inode *dir)
{
	uint64_t old = dir->d.dir_split, add = old + (1ull << dir->d.dir_level);
	uint64_t mask = (2ull << dir->d.dir_level) - 1;
	uint8_t *ents;
	uint32_t bytes;
	struct cfs_buf *ob, *nb;
	int rc = gather(fs, dir, old, &ents, &bytes, &ob);
	if (rc)
		return rc;
	uint8_t *stay = malloc(bytes + 1), *move = malloc(bytes + 1);
	uint32_t ns = 0, nm = 0;
	rc = stay && move ? new_bucket(fs, dir, add, &nb) : -ENOMEM;
	if (rc == -ENOSPC)
		rc = SPLIT_NO_SPACE;
	for (uint32_t o = 0; !rc && o < bytes;) {
		struct dent d;
		dent_get(ents + o, &d);
		uint32_t sz = (uint32_t)dent_size(d.len);
		if ((d.hash & mask) == old) {
			memcpy(stay + ns, ents + o, sz);
			ns += sz;
		} else {
			memcpy(move + nm, ents + o, sz);
			nm += sz;
		}
		o += sz;
	}
	if (!rc)
		rc = write_bucket(fs, dir, ob, stay, ns);
	if (!rc)
		rc = write_bucket(fs, dir, nb, move, nm);
	if (!rc && ++dir->d.dir_split == 1ull << dir->d.dir_level) {
		dir->d.dir_level++;
		dir->d.dir_split = 0;
	}
	free(ents);
	free(stay);
	free(move);
	return rc;
}

int cfs_dir_init(struct cfs_fs *fs, struct cfs_inode *dir)
{
	struct cfs_buf *b;
	dir->d.dir_level = 0;
	dir->d.dir_split = 0;
	dir->d.dir_entries = 0;
	return new_bucket(fs, dir, 0, &b);
}

int cfs_dir_add(struct cfs_fs *fs, struct cfs_inode *dir, const char *name, uint64_t ino,
		uint8_t type)
{
	size_t len = strlen(name);
	if (len > CFS_NAME_MAX)
		return -ENAMETOOLONG;
	uint32_t hash = cfs_dir_hash(fs, name, len);
	struct cfs_buf *b;
	uint32_t off;
	int rc = find(fs, dir, name, len, hash, &b, &off, NULL);
	if (rc != -ENOENT)
		return rc ? rc : -EEXIST;
	size_t sz = dent_size(len);
	uint64_t hops = 0;
	if ((rc = read_bucket(fs, dir, bucket_of(dir, hash), &b)))
		return rc;
	for (;;) {
		struct cfs_ddirb *h = (void *)b->data;
		if (h->used + sz <= fs->bs - CFS_DIRB_OFF)
			break;
		struct cfs_buf *next;
		if ((rc = read_next(fs, dir, b, &next, &hops)))
			return rc;
		if (!next) {
			if ((rc = new_overflow(fs, dir, false, &next)))
				return rc;
			h->next = next->blkno;
			cfs_bdirty(fs, b);
		}
		b = next;
	}
	struct cfs_ddirb *h = (void *)b->data;
	dent_put(b->data + CFS_DIRB_OFF + h->used, hash, ino, type, name, len);
	h->used += (uint32_t)sz;
	h->count++;
	cfs_bdirty(fs, b);
	dir->d.dir_entries++;
	cfs_iglock_names_changed(fs, dir->ino);
	/* The name is in: a split that finds no space for its new bucket changes nothing and
	 * waits for the next add (chains are only longer meanwhile). */
	if (dir->d.dir_entries > nbuckets(dir) * SPLIT_LOAD(fs->bs))
		rc = split_one(fs, dir);
	return rc == SPLIT_NO_SPACE ? 0 : rc;
}

/* What adding one name may take: the groups it may free in (added to the set v of *n) and
 * the most blocks it allocates. */
static int add_needs(struct cfs_fs *fs, struct cfs_inode *dir, uint32_t *v, unsigned *n,
		     uint32_t *need)
{
	*need = 1; /* an overflow block for the name's bucket */
	int rc = cfs_ext_chain_groups(fs, dir, v, n); /* a new bucket may merge extents */
	if (rc || dir->d.dir_entries + 1 <= nbuckets(dir) * SPLIT_LOAD(fs->bs))
		return rc;
	/* It splits a bucket: a new one and its overflow blocks, a block for the longer map,
	 * and the split bucket's overflow blocks may be freed. */
	struct cfs_buf *b;
	uint32_t blocks = 1;
	uint64_t hops = 0;
	rc = read_bucket(fs, dir, dir->d.dir_split, &b);
	while (!rc && (rc = read_next(fs, dir, b, &b, &hops)) == 0 && b) {
		blocks++;
		rc = cfs_group_set_add(fs, b->blkno, v, n);
	}
	*need += 2 * blocks + 2;
	return rc;
}

int cfs_dir_add_reserve(struct cfs_fs *fs, struct cfs_inode *dir, uint32_t more)
{
	if (cfs_may_allocate(fs))
		return 0;
	uint32_t v[CFS_OP_GROUPS_MAX], need;
	unsigned n = 0;
	int rc = add_needs(fs, dir, v, &n, &need);
	if (!rc) /* its buckets and overflow blocks are its owner's */
		rc = cfs_quota_granted(fs, &dir->d, dir->ino, need, 0);
	if (!rc)
		rc = cfs_alloc_reserve(fs, 0, need + more, -1, more > 0);
	return rc ? rc : cfs_group_reserve_set(fs, v, n);
}

static void remove_at(struct cfs_fs *fs, struct cfs_inode *dir, struct cfs_buf *b, uint32_t off,
		      size_t len)
{
	struct cfs_ddirb *h = (void *)b->data;
	uint32_t sz = (uint32_t)dent_size(len);
	uint8_t *p = b->data + CFS_DIRB_OFF;
	memmove(p + off, p + off + sz, h->used - off - sz);
	memset(p + h->used - sz, 0, sz);
	h->used -= sz;
	h->count--;
	cfs_bdirty(fs, b);
	dir->d.dir_entries--;
	cfs_iglock_names_changed(fs, dir->ino);
}

int cfs_dir_remove(struct cfs_fs *fs, struct cfs_inode *dir, const char *name)
{
	size_t len = strlen(name);
	uint32_t hash = cfs_dir_hash(fs, name, len);
	struct cfs_buf *b;
	uint32_t off;
	int rc = find(fs, dir, name, len, hash, &b, &off, NULL);
	if (!rc)
		remove_at(fs, dir, b, off, len);
	return rc;
}

int cfs_dir_overflow_groups(struct cfs_fs *fs, struct cfs_inode *dir, uint32_t *v, unsigned *n)
{
	int rc = 0;
	for (uint64_t bucket = 0; bucket < nbuckets(dir) && !rc; bucket++) {
		struct cfs_buf *b;
		uint64_t hops = 0;
		rc = read_bucket(fs, dir, bucket, &b);
		while (!rc && (rc = read_next(fs, dir, b, &b, &hops)) == 0 && b)
			rc = cfs_group_set_add(fs, b->blkno, v, n);
	}
	return rc;
}

int cfs_dir_free_overflow(struct cfs_fs *fs, struct cfs_inode *dir)
{
	for (uint64_t bucket = 0; bucket < nbuckets(dir); bucket++) {
		struct cfs_buf *b, *next;
		uint64_t hops = 0;
		int rc = read_bucket(fs, dir, bucket, &b);
		if (!rc && (rc = read_next(fs, dir, b, &next, &hops)) == 0 && next) {
			/* A bucket never names a freed block, whatever commits come before its own
			 * free. */
			((struct cfs_ddirb *)b->data)->next = 0;
			cfs_bdirty(fs, b);
		}
		while (!rc && next) {
			uint64_t blk = next->blkno;
			if (!(rc = read_next(fs, dir, next, &next, &hops)) &&
			    !(rc = cfs_free(fs, blk, 1)))
				dir->d.nblocks--;
		}
		if (rc)
			return rc;
	}
	return 0;
}

int cfs_dir_replace(struct cfs_fs *fs, struct cfs_inode *dir, const char *name, uint64_t ino,
		    uint8_t type)
{
	size_t len = strlen(name);
	struct cfs_buf *b;
	uint32_t off;
	int rc = find(fs, dir, name, len, cfs_dir_hash(fs, name, len), &b, &off, NULL);
	if (rc)
		return rc;
	uint8_t *p = b->data + CFS_DIRB_OFF + off;
	memcpy(p + 4, &ino, 8);
	p[12] = type;
	cfs_bdirty(fs, b);
	cfs_iglock_names_changed(fs, dir->ino);
	return 0;
}

struct walk {
	cfs_dir_visit_fn fn;
	void *arg;
};

static int walk_one(void *arg, struct cfs_buf *b, uint32_t off, const struct dent *d)
{
	(void)b, (void)off;
	struct walk *w = arg;
	return w->fn(w->arg, d->name, d->len, d->ino, d->type);
}

int cfs_dir_walk(struct cfs_fs *fs, struct cfs_inode *dir, cfs_dir_visit_fn fn, void *arg)
{
	struct walk w = {fn, arg};
	uint64_t n = nbuckets(dir);
	for (uint64_t bucket = 0; bucket < n; bucket++) {
		int rc = each_entry(fs, dir, bucket, walk_one, &w);
		if (rc)
			return rc;
	}
	return 0;
}

/* ---- for fsck: every block and entry, going on past damaged blocks ---- */
/* A name the kernel takes: not empty, ".", "..", and no '/' or NUL in it. */
static bool name_valid(const char *name, size_t len)
{
	return len && memchr(name, '/', len) == NULL && memchr(name, '\0', len) == NULL &&
	       !(len == 1 && name[0] == '.') && !(len == 2 && name[0] == '.' && name[1] == '.');
}

static void check_entries(struct cfs_fs *fs, struct cfs_inode *dir, uint64_t bucket,
			  struct cfs_buf *b, const struct cfs_dir_check *cb, int *rc)
{
	const struct cfs_ddirb *h = (const void *)b->data;
	uint32_t n = 0;
	for (uint32_t o = 0; o < h->used && !*rc; n++) {
		struct dent d;
		dent_get(b->data + CFS_DIRB_OFF + o, &d);
		bool misplaced = d.hash != cfs_dir_hash(fs, d.name, d.len) ||
				 bucket_of(dir, d.hash) != bucket || !name_valid(d.name, d.len);
		*rc = cb->entry(cb->arg, d.name, d.len, d.ino, d.type, misplaced ? &bucket : NULL);
		o += (uint32_t)dent_size(d.len);
	}
	if (!*rc && n != h->count)
		cb->count(cb->arg, b, n);
}

static int check_chain(struct cfs_fs *fs, struct cfs_inode *dir, uint64_t bucket,
		       const struct cfs_dir_check *cb)
{
	struct cfs_buf *b = NULL;
	bool unwritten;
	uint64_t blk = cfs_ext_bmap(dir, bucket, &unwritten), prev = 0, hops = 0;
	int rc = blk ? cfs_bread(fs, blk, CFS_B_BUCKET, dir->ino, &b) : -EIO;
	while (!rc && b) {
		if (!block_sane(fs, b)) {
			rc = -EIO;
			break;
		}
		if (prev) /* buckets are in the extent map already */
			cb->block(cb->arg, b->blkno);
		check_entries(fs, dir, bucket, b, cb, &rc);
		prev = b->blkno;
		blk = ((const struct cfs_ddirb *)b->data)->next;
		if (!rc)
			rc = read_next(fs, dir, b, &b, &hops);
	}
	if (rc == -EIO)
		cb->damaged(cb->arg, bucket, blk, prev);
	return rc == -EIO ? 0 : rc;
}

int cfs_dir_check(struct cfs_fs *fs, struct cfs_inode *dir, const struct cfs_dir_check *cb)
{
	int rc = 0;
	for (uint64_t bucket = 0; bucket < nbuckets(dir) && !rc; bucket++)
		rc = check_chain(fs, dir, bucket, cb);
	return rc;
}

int cfs_dir_cut_chain(struct cfs_fs *fs, struct cfs_inode *dir, uint64_t bucket, uint64_t prev)
{
	bool unwritten;
	uint64_t first = cfs_ext_bmap(dir, bucket, &unwritten);
	struct cfs_buf *b;
	if (!prev && !first)
		return new_bucket(fs, dir, bucket, &b);
	if (!prev) /* its entries and overflow chain are lost */
		return cfs_bnew(fs, first, CFS_B_BUCKET, dir->ino, &b);
	int rc = cfs_bread(fs, prev, prev == first ? CFS_B_BUCKET : CFS_B_DIROVF, dir->ino, &b);
	if (rc)
		return rc;
	((struct cfs_ddirb *)b->data)->next = 0;
	cfs_bdirty(fs, b);
	return 0;
}

/* The name an entry whose name the kernel would refuse gets: each '/' and NUL a '_'. */
static void valid_name(const char *raw, size_t len, char *out)
{
	for (size_t i = 0; i < len; i++)
		out[i] = raw[i] == '/' || raw[i] == '\0' ? '_' : raw[i];
	out[len] = '\0';
	if (!len || !strcmp(out, ".") || !strcmp(out, ".."))
		snprintf(out, CFS_NAME_MAX + 1, "%.*s_", (int)len, raw);
}

/* The entry whose name is these bytes, in bucket, or else in any bucket (moved meanwhile by
 * a split that another mended entry's add made). */
static int find_bytes(struct cfs_fs *fs, struct cfs_inode *dir, uint64_t bucket,
		      struct search *s)
{
	int rc = each_entry(fs, dir, bucket, match, s);
	for (uint64_t other = 0; !rc && other < nbuckets(dir); other++)
		rc = other == bucket ? 0 : each_entry(fs, dir, other, match, s);
	return rc < 0 ? rc : s->blk ? 0 : -ENOENT;
}

int cfs_dir_remove_bytes(struct cfs_fs *fs, struct cfs_inode *dir, uint64_t bucket,
			 const char *raw, size_t len)
{
	struct search s = {.name = raw, .len = len, .any_hash = true};
	int rc = find_bytes(fs, dir, bucket, &s);
	if (!rc)
		remove_at(fs, dir, s.blk, s.off, len);
	return rc;
}

int cfs_dir_rehome(struct cfs_fs *fs, struct cfs_inode *dir, uint64_t bucket, const char *raw,
		   size_t len, char *name)
{
	struct search s = {.name = raw, .len = len, .any_hash = true};
	int rc = find_bytes(fs, dir, bucket, &s);
	if (rc)
		return rc;
	remove_at(fs, dir, s.blk, s.off, len);
	valid_name(raw, len, name);
	rc = cfs_dir_add(fs, dir, name, s.found.ino, s.found.type);
	if (rc == -EEXIST) { /* its name, mended, is another entry's: it gets its inode's */
		snprintf(name, CFS_NAME_MAX + 1, "#%llu", (unsigned long long)s.found.ino);
		rc = cfs_dir_add(fs, dir, name, s.found.ino, s.found.type);
	}
	return rc;
}

