/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* ETXTBSY across the nodes of a cluster mount.  On one node the kernel refuses to open a
 * running program for writing, and to run a program open for writing ("Text file busy"); it
 * knows nothing of other nodes, and a program overwritten by another node dies of SIGBUS when
 * it next faults in a page.  So each program run here, and each executable file open for
 * writing here, holds a cluster lock "x<inode>.<generation>": PR while it runs (PR shares
 * with PR: any number of nodes run it), CW while it is open for writing (CW shares with CW).
 * The two conflict, so the open that comes second, on any node, fails with ETXTBSY.
 *
 * The kernel's open of a program for exec carries __FMODE_EXEC, which FUSE passes on.  An
 * open for writing of a file with an execute bit takes CW at once.  Other opens for writing
 * (of files made by the open, which cost no message that way, or without an execute bit)
 * are only counted, in the in-memory inode ("unchecked"): nobody elsewhere can run the file
 * before this node lets its inode glock go, and then, if the file has an execute bit by that
 * time, they take CW (cfs_text_before_let_go).  A file given an execute bit on another node
 * while open for writing here is not caught (cfs(8)).  The lock is released into the lock library's cache
 * at the last close here, so running the same program again, or rewriting one's own
 * scripts, sends no message; another node's conflicting request makes the library give a
 * cached grant back (cfs_lock_now, as flock's LOCK_NB). */
#include "cfs/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define FMODE_EXEC_FLAG 0x20 /* the kernel's __FMODE_EXEC in an open's flags */
#define IDLE_KEPT 256        /* locks kept for files nobody here runs or writes any more */

struct cfs_text {
	uint64_t ino;
	struct cfslock *lk;
	unsigned runs, writes; /* this node's opens of each kind */
	struct cfs_text *next; /* most recently used first */
};

enum use { NONE, RUN, WRITE, UNCHECKED };

static enum use use_of(struct cfs_fs *fs, uint64_t ino, int flags)
{
	if (flags & FMODE_EXEC_FLAG)
		return RUN;
	struct stat st;
	if ((flags & O_ACCMODE) == O_RDONLY || cfs_getattr(fs, ino, &st) || !S_ISREG(st.st_mode))
		return NONE;
	return st.st_mode & 0111 ? WRITE : UNCHECKED;
}

/* One unchecked open more (delta 1) or fewer (-1): false if there was none to take away
 * (or the inode is not in memory, which an open file always is). */
static bool count_unchecked(struct cfs_fs *fs, uint64_t ino, int delta)
{
	pthread_mutex_lock(&fs->lock);
	struct cfs_inode *ip = cfs_icache_find(fs, ino);
	bool counted = ip && (delta > 0 || ip->text_unchecked);
	if (counted)
		ip->text_unchecked += (uint32_t)delta;
	pthread_mutex_unlock(&fs->lock);
	return counted;
}

/* The file's entry, moved to the front; created if asked.  fs->text_mutex held. */
static struct cfs_text *find(struct cfs_fs *fs, uint64_t ino, uint64_t gen, bool create)
{
	for (struct cfs_text **p = &fs->texts, *t; (t = *p); p = &t->next)
		if (t->ino == ino) {
			*p = t->next;
			t->next = fs->texts;
			fs->texts = t;
			return t;
		}
	if (!create)
		return NULL;
	struct cfs_text *t = calloc(1, sizeof *t);
	char name[48];
	snprintf(name, sizeof name, "x%" PRIx64 ".%" PRIx64, ino, gen);
	if (!t || !(t->lk = cfslock_new(fs->space, name, NULL, NULL, NULL))) {
		free(t);
		return NULL;
	}
	t->ino = ino;
	t->next = fs->texts;
	fs->texts = t;
	return t;
}

static void drop(struct cfs_text *t)
{
	if (cfslock_mode(t->lk) >= 0)
		(void)cfslock_unlock_sync(t->lk); /* -EBUSY: the library lets it go already */
	cfslock_free(t->lk);
	free(t);
}

/* Past IDLE_KEPT entries nobody here uses, the least recently used go.  fs->text_mutex held. */
static void trim(struct cfs_fs *fs)
{
	unsigned idle = 0;
	for (struct cfs_text **p = &fs->texts, *t; (t = *p);) {
		if (!t->runs && !t->writes && ++idle > IDLE_KEPT) {
			*p = t->next;
			drop(t);
		} else {
			p = &t->next;
		}
	}
}

/* The lock in mode, here and now: nobody waits for a program to end. */
static int take(struct cfs_text *t, int mode)
{
	int held = cfslock_mode(t->lk);
	if (held >= 0 && held != mode)
		(void)cfslock_unlock_sync(t->lk); /* -EBUSY: the library lets it go already */
	/* A grant cached here in this mode is taken back at once, without a message. */
	int rc = cfs_lock_now(t->lk, mode);
	return rc == -EAGAIN ? -ETXTBSY : cfs_lock_errno(rc);
}

static unsigned *count_of(struct cfs_text *t, enum use kind)
{
	return kind == RUN ? &t->runs : &t->writes;
}

/* The lock for one more use of the kind; fs->text_mutex held. */
static int add_use(struct cfs_fs *fs, struct cfs_text *t, enum use kind)
{
	if (*count_of(t, kind == RUN ? WRITE : RUN))
		return -ETXTBSY; /* this node's own opens of the other kind (the kernel's race) */
	int rc = t->runs || t->writes ? 0 : take(t, kind == RUN ? CFSLOCK_PR : CFSLOCK_CW);
	if (!rc)
		++*count_of(t, kind);
	else if (rc != -ETXTBSY)
		cfs_log(fs, "inode %" PRIu64 ": text lock: %s", t->ino, strerror(-rc));
	return rc;
}

/* One use fewer; at the last, the grant goes into the library's cache: the next run or write
 * here asks nobody.  fs->text_mutex held. */
static void drop_use(struct cfs_text *t, enum use kind)
{
	unsigned *n = count_of(t, kind);
	if (*n && --*n == 0 && !t->runs && !t->writes && cfslock_mode(t->lk) >= 0)
		(void)cfslock_release(t->lk);
}

static int with_entry(struct cfs_fs *fs, uint64_t ino, enum use kind, bool keep)
{
	uint64_t gen = cfs_generation(fs, ino);
	pthread_mutex_lock(&fs->text_mutex);
	struct cfs_text *t = find(fs, ino, gen, true);
	int rc = t ? add_use(fs, t, kind) : -ENOMEM;
	if (!rc && !keep)
		drop_use(t, kind);
	trim(fs);
	pthread_mutex_unlock(&fs->text_mutex);
	return rc;
}

int cfs_text_open(struct cfs_fs *fs, uint64_t ino, int flags)
{
	enum use kind = fs->cluster ? use_of(fs, ino, flags) : NONE;
	if (kind == NONE)
		return 0;
	if (kind == UNCHECKED)
		return count_unchecked(fs, ino, 1);
	int rc = with_entry(fs, ino, kind, true);
	return rc ? rc : 1;
}

int cfs_text_made(struct cfs_fs *fs, uint64_t ino)
{
	return fs->cluster && count_unchecked(fs, ino, 1);
}

void cfs_text_release(struct cfs_fs *fs, uint64_t ino, int flags)
{
	/* Opens for writing are alike: one closing while another is unchecked leaves the lock,
	 * if any, to the one that remains. */
	if (!(flags & FMODE_EXEC_FLAG) && count_unchecked(fs, ino, -1))
		return;
	pthread_mutex_lock(&fs->text_mutex);
	struct cfs_text *t = find(fs, ino, 0, false);
	if (t)
		drop_use(t, flags & FMODE_EXEC_FLAG ? RUN : WRITE);
	pthread_mutex_unlock(&fs->text_mutex);
}

void cfs_text_before_let_go(struct cfs_fs *fs, struct cfs_inode *ip)
{
	if (!ip->text_unchecked || !S_ISREG(ip->d.mode) || !(ip->d.mode & 0111))
		return;
	pthread_mutex_lock(&fs->text_mutex);
	/* Nobody can run it yet: it takes this node's let-go for another to read it.  Run here
	 * too is the kernel's race: let be. */
	struct cfs_text *t = find(fs, cfs_handle(fs, ip), ip->d.generation, true);
	int rc = !t ? -ENOMEM : t->runs || t->writes ? 0 : take(t, CFSLOCK_CW);
	if (rc)
		cfs_log(fs, "inode %" PRIu64 ": open for writing here, not guarded against runs "
			    "elsewhere: text lock: %s", ip->ino, strerror(-rc));
	else if (!t->runs) {
		t->writes += ip->text_unchecked;
		ip->text_unchecked = 0;
	}
	trim(fs);
	pthread_mutex_unlock(&fs->text_mutex);
}

int cfs_text_truncate(struct cfs_fs *fs, uint64_t ino)
{
	if (!fs->cluster || use_of(fs, ino, O_WRONLY) != WRITE)
		return 0;
	return with_entry(fs, ino, WRITE, false);
}

void cfs_text_free(struct cfs_fs *fs)
{
	pthread_mutex_lock(&fs->text_mutex);
	struct cfs_text *list = fs->texts;
	fs->texts = NULL;
	pthread_mutex_unlock(&fs->text_mutex);
	for (struct cfs_text *t = list, *next; t; t = next) {
		next = t->next;
		drop(t);
	}
}
