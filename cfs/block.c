/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Metadata blocks: the checksummed header every one carries, and the block cache.
 *
 * All metadata access happens under fs->lock, so a buffer handed out stays valid until that
 * lock is released: clean blocks are only evicted by cfs_bcache_trim, at the end of an
 * operation.  Dirty blocks belong to the running transaction until it is committed. */
#include "cfs/internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static __thread char last_error[512];

const char *cfs_last_error(void) { return last_error; }

void cfs_set_error(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(last_error, sizeof last_error, fmt, ap);
	va_end(ap);
}

static int log_copy_fd = -1;

/* The check of a mounted filesystem (check.c) reads what it checks from the LUNs, not from
 * this node's clean copies, and hears what cfs_log says meanwhile (why a read failed). */
static _Thread_local bool fresh_reads;
static _Thread_local char *heard;
static _Thread_local size_t heard_len;
/* Each stretch of fresh reads is numbered: a block read from the LUNs in it (cfs_buf.read_in)
 * is not read again in it (an inode's group header, once per extent). */
static uint64_t fresh_stretches;
static _Thread_local uint64_t fresh_stretch;

void cfs_bcache_fresh(bool on, char *said, size_t len)
{
	fresh_reads = on;
	fresh_stretch = on ? __atomic_add_fetch(&fresh_stretches, 1, __ATOMIC_RELAXED) : 0;
	heard = on ? said : NULL;
	heard_len = len;
	if (heard && len)
		heard[0] = '\0';
}

void cfs_log_copy(int fd)
{
	__atomic_store_n(&log_copy_fd, fd, __ATOMIC_RELEASE);
}

void cfs_log(const struct cfs_fs *fs, const char *fmt, ...)
{
	char line[512], whole[640];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	if (fs)
		snprintf(whole, sizeof whole, "%s: %s slot %u: %s\n", fs->who ? fs->who : "cfsd",
			 fs->sb.label[0] ? fs->sb.label : "-", fs->slot, line);
	else
		snprintf(whole, sizeof whole, "cfs: %s\n", line);
	fputs(whole, stderr);
	if (heard)
		snprintf(heard, heard_len, "%s", line);
	int copy = __atomic_load_n(&log_copy_fd, __ATOMIC_ACQUIRE);
	if (copy >= 0 && write(copy, whole, strlen(whole)) < 0) {
		/* the copy is a courtesy: stderr has the line */
	}
}

int cfs_reserve(void **v, size_t *cap, size_t n, size_t size)
{
	if (n <= *cap)
		return 0;
	size_t c = *cap ? *cap : 16;
	while (c < n)
		c *= 2;
	void *nv = realloc(*v, c * size);
	if (!nv)
		return -ENOMEM;
	*v = nv;
	*cap = c;
	return 0;
}

static uint64_t key_at(const void *v, size_t i, size_t size)
{
	uint64_t key;
	memcpy(&key, (const char *)v + i * size, sizeof key);
	return key;
}

/* The slot of key in a table of cap slots: its element's, or the free one it would take. */
static size_t probe(const void *v, size_t cap, size_t size, uint64_t key)
{
	size_t j = key % cap;
	while (key_at(v, j, size) && key_at(v, j, size) != key)
		j = (j + 1) % cap;
	return j;
}

void *cfs_table_slot(void **v, size_t *cap, size_t *n, size_t size, uint64_t key, bool *added)
{
	if (2 * (*n + 1) > *cap) {
		size_t ncap = *cap ? 2 * *cap : 1024;
		char *nv = calloc(ncap, size);
		if (!nv)
			return NULL;
		for (size_t i = 0; i < *cap; i++)
			if (key_at(*v, i, size))
				memcpy(nv + probe(nv, ncap, size, key_at(*v, i, size)) * size,
				       (char *)*v + i * size, size);
		free(*v);
		*v = nv;
		*cap = ncap;
	}
	char *slot = (char *)*v + probe(*v, *cap, size, key) * size;
	*added = !key_at(slot, 0, size);
	if (*added) {
		memcpy(slot, &key, sizeof key);
		++*n;
	}
	return slot;
}

void *cfs_table_find(void *v, size_t cap, size_t size, uint64_t key)
{
	if (!cap)
		return NULL;
	size_t j = probe(v, cap, size, key);
	return key_at(v, j, size) ? (char *)v + j * size : NULL;
}

void cfs_block_init(void *block, uint32_t bs, uint64_t blkno, uint16_t type, uint64_t owner)
{
	memset(block, 0, bs);
	struct cfs_bhdr *h = block;
	h->magic = CFS_MAGIC;
	h->type = type;
	h->version = CFS_VERSION;
	h->blkno = blkno;
	h->owner = owner;
}

void cfs_block_seal(void *block, uint32_t bs)
{
	struct cfs_bhdr *h = block;
	h->crc = 0;
	h->crc = cvm_crc32c(0, block, bs);
}

int cfs_block_verify(const void *block, uint32_t bs, uint64_t blkno, uint16_t type,
		     uint64_t owner, const char **why)
{
	const struct cfs_bhdr *h = block;
	struct cfs_bhdr copy = *h;
	copy.crc = 0;
	uint32_t crc = cvm_crc32c(0, &copy, sizeof copy);
	crc = cvm_crc32c(crc, (const uint8_t *)block + sizeof copy, bs - sizeof copy);
	if (h->magic != CFS_MAGIC)
		*why = "not a CFS metadata block (bad magic)";
	else if (crc != h->crc)
		*why = "checksum mismatch";
	else if (h->blkno != blkno)
		*why = "block belongs elsewhere (misdirected write)";
	else if (h->type != type)
		*why = "wrong block type";
	else if (owner && h->owner != owner)
		*why = "block belongs to another object";
	else
		return 0;
	return -EIO;
}

/* ---- cache ---- */
static struct cfs_buf **slot_of(struct cfs_fs *fs, uint64_t blkno)
{
	return &fs->bhash[(blkno * 0x9E3779B97F4A7C15ull) >> 48 & (CFS_BCACHE_BUCKETS - 1)];
}

static void lru_unlink(struct cfs_fs *fs, struct cfs_buf *b)
{
	if (!b->prev)
		return;
	b->prev->next = b->next;
	b->next->prev = b->prev;
	b->prev = b->next = NULL;
	fs->nclean--;
}

static void lru_push(struct cfs_fs *fs, struct cfs_buf *b)
{
	b->prev = fs->lru.prev;
	b->next = &fs->lru;
	fs->lru.prev->next = b;
	fs->lru.prev = b;
	fs->nclean++;
}

int cfs_bcache_init(struct cfs_fs *fs)
{
	fs->bhash = calloc(CFS_BCACHE_BUCKETS, sizeof *fs->bhash);
	fs->lru.prev = fs->lru.next = &fs->lru;
	return fs->bhash ? 0 : -ENOMEM;
}

/* Buffers that left the cache are kept for the next ones, up to a few: a walk replaces
 * cached blocks all the time, and block-aligned buffers freed and taken again among the
 * small allocations of in-memory inodes scattered the heap (a walk's cfsd grew three times
 * what it kept). */
#define SPARE_BUFS 256u

static void buf_destroy(struct cfs_buf *b)
{
	free(b->data);
	free(b);
}

static void buf_free(struct cfs_fs *fs, struct cfs_buf *b)
{
	if (fs->nspare_bufs < SPARE_BUFS) {
		b->hnext = fs->spare_bufs;
		fs->spare_bufs = b;
		fs->nspare_bufs++;
		return;
	}
	buf_destroy(b);
}

void cfs_bcache_destroy(struct cfs_fs *fs)
{
	if (!fs->bhash)
		return;
	for (size_t i = 0; i < CFS_BCACHE_BUCKETS; i++)
		for (struct cfs_buf *b = fs->bhash[i], *n; b; b = n) {
			n = b->hnext;
			buf_destroy(b);
		}
	free(fs->bhash);
	fs->bhash = NULL;
	while (fs->spare_bufs) {
		struct cfs_buf *b = fs->spare_bufs;
		fs->spare_bufs = b->hnext;
		buf_destroy(b);
	}
	fs->nspare_bufs = 0;
	free(fs->txn.bufs);
	fs->txn.bufs = NULL;
	free(fs->unhome);
	fs->unhome = NULL;
	fs->nunhome = fs->unhome_cap = 0;
}

static struct cfs_buf *lookup(struct cfs_fs *fs, uint64_t blkno)
{
	for (struct cfs_buf *b = *slot_of(fs, blkno); b; b = b->hnext)
		if (b->blkno == blkno)
			return b;
	return NULL;
}

static struct cfs_buf *buf_new(struct cfs_fs *fs, uint64_t blkno)
{
	struct cfs_buf *b = fs->spare_bufs;
	if (b) {
		fs->spare_bufs = b->hnext;
		fs->nspare_bufs--;
		*b = (struct cfs_buf){.data = b->data};
	} else if (!(b = calloc(1, sizeof *b)) || posix_memalign((void **)&b->data, 4096, fs->bs)) {
		free(b);
		return NULL;
	}
	b->blkno = blkno;
	struct cfs_buf **s = slot_of(fs, blkno);
	b->hnext = *s;
	*s = b;
	return b;
}

static void unhash(struct cfs_fs *fs, struct cfs_buf *b)
{
	for (struct cfs_buf **p = slot_of(fs, b->blkno); *p; p = &(*p)->hnext)
		if (*p == b) {
			*p = b->hnext;
			return;
		}
}

/* A block that is another kind, or another object's, may have been freed and reused. */
static bool reused(const uint8_t *data, uint16_t type, uint64_t owner)
{
	const struct cfs_bhdr *h = (const void *)data;
	return h->magic != CFS_MAGIC || h->type != type || (owner && h->owner != owner);
}

int cfs_bread(struct cfs_fs *fs, uint64_t blkno, uint16_t type, uint64_t owner,
	      struct cfs_buf **out)
{
	return cfs_bread_flags(fs, blkno, type, owner, 0, out);
}

/* A block its inode's glock covers (iglock.c). */
static bool of_inode(uint16_t type)
{
	return type == CFS_B_INODE || type == CFS_B_BUCKET || type == CFS_B_DIROVF ||
	       type == CFS_B_EXTENTS || type == CFS_B_XATTR || type == CFS_B_QUOTA;
}

/* A clean copy read again from the LUNs (cfs_bcache_fresh): what is there replaces it if it is
 * sound as a block; if not, the copy stays, the damage is logged and the read fails.  A block
 * that is dirty, or committed and not yet home, is newer here than there: it is not read. */
static int read_again(struct cfs_fs *fs, struct cfs_buf *b, uint16_t type, uint64_t owner,
		      unsigned flags)
{
	uint8_t *disk;
	if (posix_memalign((void **)&disk, 4096, fs->bs))
		return -ENOMEM;
	const char *why = NULL;
	int rc = cvm_volume_read(fs->vol, disk, fs->bs, b->blkno * fs->bs);
	if (!rc && memcmp(disk, b->data, fs->bs)) {
		if ((flags & CFS_BREAD_MAY_BE_REUSED) && reused(disk, type, owner)) {
			rc = -ESTALE;
		} else if (cfs_block_verify(disk, fs->bs, b->blkno, type, owner, &why)) {
			cfs_log(fs, "block %llu (type %u, owner %llu): %s on the LUNs (this node's "
				"copy is sound): EIO", (unsigned long long)b->blkno, type,
				(unsigned long long)owner, why);
			rc = -EIO;
		} else {
			memcpy(b->data, disk, fs->bs);
			b->checked = false;
		}
	} else if (rc) {
		cfs_log(fs, "block %llu (type %u, owner %llu): %s: EIO", (unsigned long long)b->blkno,
			type, (unsigned long long)owner, strerror(-rc));
		rc = -EIO;
	}
	free(disk);
	return rc;
}

/* A one-node mount reads an inode block with the blocks around it, and keeps those that are
 * inode blocks in use (ext4's inode table readahead): a tree made on one node has each file's
 * inode block before its data, in the order the files were made, so a directory's lookups find
 * most of its inodes in one read.  Blocks this cache holds are not taken (its copy is the newer
 * one); on a cluster a block another glock covers may not be cached without its grant. */
#define INODES_AROUND_BYTES (64u << 10)

static void take_inode_block(struct cfs_fs *fs, uint64_t blkno, const uint8_t *data)
{
	const char *why;
	if (lookup(fs, blkno) || cfs_block_verify(data, fs->bs, blkno, CFS_B_INODE, blkno, &why) ||
	    !cfs_block_in_use(fs, blkno, 0))
		return;
	struct cfs_buf *b = buf_new(fs, blkno);
	if (!b)
		return;
	memcpy(b->data, data, fs->bs);
	b->read_in = fresh_stretch;
	lru_push(fs, b);
	fs->stats.inodes_read_ahead++;
}

/* b's block read from the LUNs, in one read with the blocks around it where that pays. */
static int read_block(struct cfs_fs *fs, struct cfs_buf *b, uint16_t type)
{
	uint64_t per = INODES_AROUND_BYTES / fs->bs;
	uint64_t first = b->blkno / per * per, end = first + per;
	first = first < fs->sb.ag_start ? fs->sb.ag_start : first;
	end = end > fs->sb.total_blocks ? fs->sb.total_blocks : end;
	uint8_t *around = NULL;
	if (type != CFS_B_INODE || fs->cluster || fs->checking || b->blkno < first ||
	    end - first < 2 || posix_memalign((void **)&around, 4096, (end - first) * fs->bs))
		return cvm_volume_read(fs->vol, b->data, fs->bs, b->blkno * fs->bs);
	int rc = cvm_volume_read(fs->vol, around, (end - first) * fs->bs, first * fs->bs);
	if (!rc) {
		memcpy(b->data, around + (b->blkno - first) * fs->bs, fs->bs);
		for (uint64_t k = first; k < end; k++)
			if (k != b->blkno)
				take_inode_block(fs, k, around + (k - first) * fs->bs);
	}
	free(around);
	return rc;
}

int cfs_bread_flags(struct cfs_fs *fs, uint64_t blkno, uint16_t type, uint64_t owner,
		    unsigned flags, struct cfs_buf **out)
{
	const char *why = NULL;
	struct cfs_buf *b = lookup(fs, blkno);
	if (b) {
		const struct cfs_bhdr *h = (const void *)b->data;
		if ((flags & CFS_BREAD_MAY_BE_REUSED) && reused(b->data, type, owner))
			return -ESTALE;
		if (h->type != type || (owner && h->owner != owner)) {
			cfs_log(fs, "block %llu: %s (wanted type %u owner %llu): EIO",
				(unsigned long long)blkno, "cached block of another kind", type,
				(unsigned long long)owner);
			return -EIO;
		}
		if (b->prev && fresh_reads && b->read_in != fresh_stretch &&
		    !(flags & CFS_BREAD_RACY)) { /* a hint stays one */
			int rc = read_again(fs, b, type, owner, flags);
			if (rc)
				return rc;
			b->read_in = fresh_stretch;
		}
		if (b->prev) { /* on the LRU (not dirty, pinned nor waiting for a checkpoint) */
			lru_unlink(fs, b);
			lru_push(fs, b);
		}
		*out = b;
		return 0;
	}
	if (blkno < 2 || blkno >= fs->sb.total_blocks) {
		cfs_log(fs, "block %llu: outside the filesystem (%llu blocks): EIO",
			(unsigned long long)blkno, (unsigned long long)fs->sb.total_blocks);
		return -EIO;
	}
	b = buf_new(fs, blkno);
	if (!b)
		return -ENOMEM;
	b->read_in = fresh_stretch;
	int rc = read_block(fs, b, type);
	for (int again = (flags & CFS_BREAD_RACY) ? 3 : 0;
	     !rc && again && cfs_block_verify(b->data, fs->bs, blkno, type, owner, &why); again--)
		rc = cvm_volume_read(fs->vol, b->data, fs->bs, blkno * fs->bs);
	if (!rc && (flags & CFS_BREAD_MAY_BE_REUSED) && reused(b->data, type, owner)) {
		unhash(fs, b);
		buf_free(fs, b);
		return -ESTALE;
	}
	if (!rc && cfs_block_verify(b->data, fs->bs, blkno, type, owner, &why))
		rc = -EIO;
	if (rc) {
		/* A fenced node's reads fail by design, as its FENCED line said: no damage. */
		if (why || !cfs_fenced(fs))
			cfs_log(fs, "block %llu (type %u, owner %llu): %s: EIO",
				(unsigned long long)blkno, type, (unsigned long long)owner,
				why ? why : strerror(-rc));
		unhash(fs, b);
		buf_free(fs, b);
		return -EIO;
	}
	/* Read with no grant of its inode's glock here (an operation reading on after a wait,
	 * before it starts over): it may be older than another node's change by the time the
	 * next grant comes (cfs_bcache_drop_ungranted). */
	if (fs->cluster && owner && of_inode(type) && cfs_iglock_mode(fs, owner) < 0)
		fs->unlocked_reads++;
	lru_push(fs, b);
	*out = b;
	return 0;
}

int cfs_bpeek(struct cfs_fs *fs, uint64_t blkno, struct cfs_bhdr *hdr)
{
	const struct cfs_buf *b = lookup(fs, blkno);
	if (b && !b->prev) { /* dirty, pinned or not yet home: newer here than there */
		*hdr = *(const struct cfs_bhdr *)b->data;
		return 0;
	}
	uint8_t *disk;
	if (posix_memalign((void **)&disk, 4096, fs->bs))
		return -ENOMEM;
	const char *why;
	int rc = cvm_volume_read(fs->vol, disk, fs->bs, blkno * fs->bs);
	memcpy(hdr, disk, sizeof *hdr);
	if (!rc && cfs_block_verify(disk, fs->bs, blkno, hdr->type, 0, &why))
		rc = -ENODATA;
	free(disk);
	return rc;
}

int cfs_bnew(struct cfs_fs *fs, uint64_t blkno, uint16_t type, uint64_t owner,
	     struct cfs_buf **out)
{
	struct cfs_buf *b = lookup(fs, blkno);
	if (!b && !(b = buf_new(fs, blkno)))
		return -ENOMEM;
	cfs_block_init(b->data, fs->bs, blkno, type, owner);
	b->checked = false;
	cfs_bdirty(fs, b);
	*out = b;
	return 0;
}

int cfs_bcache_preload(struct cfs_fs *fs, uint64_t blkno, const void *data)
{
	struct cfs_buf *b = lookup(fs, blkno);
	if (!b && !(b = buf_new(fs, blkno)))
		return -ENOMEM;
	lru_unlink(fs, b); /* pinned: never evicted, or the disk's old copy would come back */
	b->pinned = true;
	b->checked = false;
	memcpy(b->data, data, fs->bs);
	return 0;
}

void cfs_bdirty(struct cfs_fs *fs, struct cfs_buf *b)
{
	if (b->dirty)
		return;
	lru_unlink(fs, b);
	b->pinned = false;
	struct cfs_txn *t = &fs->txn;
	if (t->n == t->cap) {
		uint32_t cap = t->cap ? t->cap * 2 : 256;
		struct cfs_buf **v = realloc(t->bufs, cap * sizeof *v);
		if (!v)
			abort(); /* a lost metadata change would corrupt the filesystem */
		t->bufs = v;
		t->cap = cap;
	}
	t->bufs[t->n++] = b;
	b->dirty = true;
}

static void unhome_remove(struct cfs_fs *fs, struct cfs_buf *b)
{
	struct cfs_buf *last = fs->unhome[--fs->nunhome];
	fs->unhome[b->unhome_at] = last;
	last->unhome_at = b->unhome_at;
	b->unhome = false;
}

static void forget(struct cfs_fs *fs, struct cfs_buf *b)
{
	if (b->dirty) {
		struct cfs_txn *t = &fs->txn;
		for (uint32_t i = 0; i < t->n; i++)
			if (t->bufs[i] == b) {
				t->bufs[i] = t->bufs[--t->n];
				break;
			}
	} else {
		lru_unlink(fs, b);
	}
	/* Freed: its place is not written again (it may be file data by then).  Until the free
	 * is committed the log still holds its last image: no checkpoint comes before that. */
	if (b->unhome)
		unhome_remove(fs, b);
	unhash(fs, b);
	buf_free(fs, b);
}

void cfs_bforget(struct cfs_fs *fs, uint64_t blkno)
{
	struct cfs_buf *b = lookup(fs, blkno);
	if (b)
		forget(fs, b);
}

/* Past this many blocks one walk of the whole cache is cheaper than a lookup of each (a big
 * file is freed up to a group's worth of blocks per extent). */
#define FORGET_LOOKUPS_MAX 8192u

static bool in_extents(const struct cfs_dextent *e, uint32_t n, uint64_t blkno)
{
	for (uint32_t i = 0; i < n; i++)
		if (blkno - e[i].pblk < e[i].len)
			return true;
	return false;
}

void cfs_bforget_extents(struct cfs_fs *fs, const struct cfs_dextent *e, uint32_t n)
{
	uint64_t blocks = 0;
	for (uint32_t i = 0; i < n; i++)
		blocks += e[i].len;
	if (blocks <= FORGET_LOOKUPS_MAX) {
		for (uint32_t i = 0; i < n; i++)
			for (uint32_t j = 0; j < e[i].len; j++)
				cfs_bforget(fs, e[i].pblk + j);
		return;
	}
	uint64_t lo = UINT64_MAX, hi = 0; /* most cached blocks lie outside [lo, hi) */
	for (uint32_t i = 0; i < n; i++) {
		lo = e[i].pblk < lo ? e[i].pblk : lo;
		hi = e[i].pblk + e[i].len > hi ? e[i].pblk + e[i].len : hi;
	}
	for (size_t i = 0; i < CFS_BCACHE_BUCKETS; i++)
		for (struct cfs_buf *b = fs->bhash[i], *next; b; b = next) {
			next = b->hnext;
			if (b->blkno >= lo && b->blkno < hi && in_extents(e, n, b->blkno))
				forget(fs, b);
		}
}

/* A clean block leaves the cache. */
static void evict(struct cfs_fs *fs, struct cfs_buf *b)
{
	lru_unlink(fs, b);
	unhash(fs, b);
	buf_free(fs, b);
}

void cfs_bcache_drop_block(struct cfs_fs *fs, uint64_t blkno)
{
	struct cfs_buf *b = lookup(fs, blkno);
	if (b && b->prev) /* on the LRU: clean, and in place on disk */
		evict(fs, b);
}

void cfs_bcache_trim(struct cfs_fs *fs)
{
	/* The analyzer loses track of the list across iterations: the head is never freed. */
	/* NOLINTBEGIN(clang-analyzer-unix.Malloc) */
	while (fs->nclean > CFS_BCACHE_CLEAN_MAX) {
		struct cfs_buf *b = fs->lru.next;
		evict(fs, b);
	}
	/* NOLINTEND(clang-analyzer-unix.Malloc) */
}

void cfs_bcache_drop(struct cfs_fs *fs)
{
	for (size_t i = 0; i < CFS_BCACHE_BUCKETS; i++)
		for (struct cfs_buf *b = fs->bhash[i], *n; b; b = n) {
			n = b->hnext;
			if (b->dirty || b->unhome)
				continue;
			evict(fs, b);
		}
}

/* Drop the clean blocks of the inodes in [first, first + count), and if ungranted_too those of
 * every inode whose glock is not granted here. */
static void drop_inode_blocks(struct cfs_fs *fs, uint64_t first, uint64_t count,
			      bool ungranted_too)
{
	for (struct cfs_buf *b = fs->lru.next, *n; b != &fs->lru; b = n) {
		n = b->next;
		const struct cfs_bhdr *h = (const void *)b->data;
		if (b->pinned || !of_inode(h->type))
			continue;
		if ((h->owner >= first && h->owner - first < count) ||
		    (ungranted_too && cfs_iglock_mode(fs, h->owner) < 0))
			evict(fs, b);
	}
}

void cfs_bcache_drop_owned(struct cfs_fs *fs, uint64_t first, uint64_t count)
{
	drop_inode_blocks(fs, first, count, false);
}

void cfs_bcache_drop_ungranted(struct cfs_fs *fs, uint64_t first, uint64_t count)
{
	drop_inode_blocks(fs, first, count, true);
}

/* Committed blocks stay out of the LRU until they are in place: the disk's copy is older. */
void cfs_bcache_committed(struct cfs_fs *fs)
{
	for (uint32_t i = 0; i < fs->txn.n; i++) {
		struct cfs_buf *b = fs->txn.bufs[i];
		b->dirty = false;
		if (b->unhome)
			continue;
		if (cfs_reserve((void **)&fs->unhome, &fs->unhome_cap, fs->nunhome + 1,
				sizeof *fs->unhome))
			abort(); /* as in cfs_bdirty: the block would be lost */
		b->unhome = true;
		b->unhome_at = fs->nunhome;
		fs->unhome[fs->nunhome++] = b;
	}
	fs->txn.n = 0;
}

void cfs_bcache_homed_block(struct cfs_fs *fs, uint64_t blkno)
{
	struct cfs_buf *b = lookup(fs, blkno);
	if (b && b->unhome && !b->dirty) {
		unhome_remove(fs, b);
		lru_push(fs, b);
	}
}

void cfs_bcache_homed(struct cfs_fs *fs)
{
	for (uint32_t i = 0; i < fs->nunhome; i++) {
		fs->unhome[i]->unhome = false;
		lru_push(fs, fs->unhome[i]);
	}
	fs->nunhome = 0;
}
