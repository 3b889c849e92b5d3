/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Directory listings without open directories, on one-node mounts.
 *
 * An OPENDIR and a RELEASEDIR were a third of a file server's requests (dbench), though the
 * kernel keeps what it read of a directory and rarely asks for the entries.  Answered ENOSYS,
 * OPENDIR is never sent again on the connection, nor RELEASEDIR, and the kernel keeps
 * listings as cfsd asked before (FOPEN_KEEP_CACHE | FOPEN_CACHE_DIR).  A READDIR then comes
 * with no handle: only the directory and the offset to go on from.
 *
 * So the offset of an entry is its own, whatever else changes in the directory: a 62-bit
 * hash of its name (. and .. are 1 and 2, names 3 and up), entries listed in that order.  A
 * listing that goes on after others changed the directory shows every name that was there
 * throughout exactly once (names made or removed meanwhile may be shown or not, as POSIX
 * allows); seekdir(3) goes back to any telldir(3).  Names of equal hash are never split
 * between two answers, so none is skipped (only a run of them larger than an answer could
 * be, which needs dozens of 62-bit collisions in one directory).
 *
 * Each READDIR of a long listing would read the whole directory again: the last few
 * directories listed are kept, sorted, and used while the directory's ctime, mtime and link
 * count are those they were read under (every change of a directory's entries sets its
 * ctime and mtime to the nanosecond, on one node all through this daemon). */
#define FUSE_USE_VERSION 312
#include "cfsd/fuse_ops.h"

#include <errno.h>
#include <fuse_lowlevel.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define LISTINGS_KEPT 8
#define COOKIE_FIRST_NAME 3

struct listed {
	uint64_t cookie, ino;
	uint32_t name_at;
	uint8_t type;
};

struct dir_stamp {
	struct timespec ctime, mtime;
	nlink_t nlink;
};

struct listing {
	uint64_t ino; /* 0: an empty slot */
	struct dir_stamp stamp;
	struct listed *v;
	size_t n;
	char *names;
	uint64_t last_used;
};

struct dir_listings {
	pthread_mutex_t lock;
	uint64_t clock;
	struct listing kept[LISTINGS_KEPT];
};

int dir_listings_new(struct dir_listings **out)
{
	struct dir_listings *ls = calloc(1, sizeof *ls);
	if (!ls)
		return -ENOMEM;
	pthread_mutex_init(&ls->lock, NULL);
	*out = ls;
	return 0;
}

static void listing_clear(struct listing *l)
{
	free(l->v);
	free(l->names);
	*l = (struct listing){0};
}

void dir_listings_free(struct dir_listings *ls)
{
	if (!ls)
		return;
	for (unsigned i = 0; i < LISTINGS_KEPT; i++)
		listing_clear(&ls->kept[i]);
	pthread_mutex_destroy(&ls->lock);
	free(ls);
}

/* FNV-1a, then a 64-bit finalizer (FNV's low bits mix poorly), cut to 62 bits and moved
 * past . and .. (telldir's long stays positive). */
static uint64_t name_cookie(const char *name)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (const unsigned char *p = (const unsigned char *)name; *p; p++)
		h = (h ^ *p) * 0x100000001b3ull;
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	return (h >> 2) + COOKIE_FIRST_NAME;
}

static int by_cookie(const void *a, const void *b)
{
	const struct listed *x = a, *y = b;
	return x->cookie < y->cookie ? -1 : x->cookie > y->cookie;
}

/* The directory's entries, in cookie order (. and .. first, as cfs_readdir_all has them). */
static int listing_read(struct cfsd *d, uint64_t ino, struct listing *l)
{
	struct cfs_dirent *v;
	size_t n, bytes = 0;
	int rc = cfs_readdir_all(d->fs, ino, &v, &n);
	if (rc)
		return rc;
	for (size_t i = 0; i < n; i++)
		bytes += strlen(v[i].name) + 1;
	l->v = malloc((n ? n : 1) * sizeof *l->v);
	l->names = malloc(bytes ? bytes : 1);
	if (!l->v || !l->names) {
		free(v);
		listing_clear(l);
		return -ENOMEM;
	}
	size_t at = 0;
	for (size_t i = 0; i < n; i++) {
		size_t len = strlen(v[i].name) + 1;
		memcpy(l->names + at, v[i].name, len);
		l->v[i] = (struct listed){.cookie = i < 2 ? i + 1 : name_cookie(v[i].name),
					  .ino = v[i].ino, .name_at = (uint32_t)at, .type = v[i].type};
		at += len;
	}
	free(v);
	l->n = n;
	if (n > 2)
		qsort(l->v + 2, n - 2, sizeof *l->v, by_cookie);
	l->ino = ino;
	return 0;
}

/* The first entry whose cookie is past off. */
static size_t listing_seek(const struct listing *l, off_t off)
{
	size_t lo = 0, hi = l->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (off >= 0 && l->v[mid].cookie <= (uint64_t)off)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* The entries from off that fit in size bytes, no run of equal cookies split unless it
 * alone fills the answer. */
static size_t listing_fill(fuse_req_t req, const struct listing *l, off_t off, char *buf,
			   size_t size)
{
	size_t used = 0, run_at = 0;
	for (size_t i = listing_seek(l, off), first = i; i < l->n; i++) {
		const struct listed *e = &l->v[i];
		if (i == first || e->cookie != l->v[i - 1].cookie)
			run_at = used;
		struct stat st = {.st_ino = e->ino, .st_mode = (mode_t)e->type << 12};
		size_t need = fuse_add_direntry(req, buf + used, size - used, l->names + e->name_at,
						&st, (off_t)e->cookie);
		if (need > size - used)
			return run_at ? run_at : used;
		used += need;
	}
	return used;
}

static bool same_stamp(const struct dir_stamp *a, const struct dir_stamp *b)
{
	return a->ctime.tv_sec == b->ctime.tv_sec && a->ctime.tv_nsec == b->ctime.tv_nsec &&
	       a->mtime.tv_sec == b->mtime.tv_sec && a->mtime.tv_nsec == b->mtime.tv_nsec &&
	       a->nlink == b->nlink;
}

/* The kept listing of ino as of stamp, or NULL (ls->lock held). */
static struct listing *kept_listing(struct dir_listings *ls, uint64_t ino,
				    const struct dir_stamp *stamp)
{
	for (unsigned i = 0; i < LISTINGS_KEPT; i++) {
		struct listing *l = &ls->kept[i];
		if (l->ino == ino && same_stamp(&l->stamp, stamp))
			return l;
	}
	return NULL;
}

/* Keep l (read under its stamp) in place of ino's old listing or the least recently used
 * (ls->lock held). */
static struct listing *keep_listing(struct dir_listings *ls, struct listing *l)
{
	struct listing *slot = &ls->kept[0];
	for (unsigned i = 0; i < LISTINGS_KEPT; i++) {
		struct listing *k = &ls->kept[i];
		if (k->ino == l->ino) {
			slot = k;
			break;
		}
		if (k->last_used < slot->last_used)
			slot = k;
	}
	listing_clear(slot);
	*slot = *l;
	return slot;
}

/* Answer from ino's kept listing as of stamp; if there is none, from fresh, kept from then
 * on (fresh NULL: answer nothing and say so). */
static bool reply_listing(struct dir_listings *ls, fuse_req_t req, uint64_t ino,
			  const struct dir_stamp *stamp, struct listing *fresh, off_t off,
			  char *buf, size_t size)
{
	pthread_mutex_lock(&ls->lock);
	struct listing *l = kept_listing(ls, ino, stamp);
	if (!l && fresh)
		l = keep_listing(ls, fresh);
	else if (fresh)
		listing_clear(fresh); /* another READDIR kept one meanwhile */
	size_t used = 0;
	if (l) {
		l->last_used = ++ls->clock;
		used = listing_fill(req, l, off, buf, size);
	}
	pthread_mutex_unlock(&ls->lock);
	if (l)
		fuse_reply_buf(req, buf, used);
	return l;
}

void dir_listing_reply(struct cfsd *d, fuse_req_t req, uint64_t ino, size_t size, off_t off)
{
	struct dir_listings *ls = d->listings;
	struct stat st;
	/* The stamp before the entries: a change between the two reads them again next time */
	int rc = cfs_getattr(d->fs, ino, &st);
	if (!rc && !S_ISDIR(st.st_mode))
		rc = -ENOTDIR;
	char *buf = rc ? NULL : malloc(size);
	if (!rc && !buf)
		rc = -ENOMEM;
	struct dir_stamp stamp = {st.st_ctim, st.st_mtim, st.st_nlink};
	if (!rc && !reply_listing(ls, req, ino, &stamp, NULL, off, buf, size)) {
		struct listing fresh = {.stamp = stamp};
		rc = listing_read(d, ino, &fresh);
		if (!rc)
			reply_listing(ls, req, ino, &stamp, &fresh, off, buf, size);
	}
	if (rc)
		fuse_reply_err(req, -rc);
	free(buf);
}
