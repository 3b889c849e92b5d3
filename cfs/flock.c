/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* flock(2) across the nodes of a cluster mount, as OCFS2 does it: one cluster lock per open
 * file description that uses flock, on the resource "f<inode>.<generation>" (EX for LOCK_EX,
 * PR for LOCK_SH).  Two descriptions on one node conflict as they would on two nodes, since
 * each has its own lock.  A dead node's flocks go when its recovery is done, with the rest of
 * its locks.
 *
 * A request that has to wait does not hold the caller: its outcome arrives through done,
 * called from the lock library's dispatching thread, so a node with many waiters keeps its
 * FUSE workers free (a holder on this node must be able to unlock).  A conversion is an
 * unlock and a new request, as in Linux: two holders of LOCK_SH both asking for LOCK_EX do
 * not deadlock, one of them gets it. */
#include "cfs/internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

struct cfs_flock {
	uint64_t owner, ino;
	struct cfs_fs *fs;
	struct cfslock *lk;
	bool busy;              /* a call or a request of this description is under way */
	cfs_flock_done_fn done; /* set while a request waits */
	void *arg;
	struct cfs_flock *next;
};

/* The description's lock; fs->flock_mutex held. */
static struct cfs_flock *find(struct cfs_fs *fs, uint64_t owner)
{
	for (struct cfs_flock *f = fs->flocks; f; f = f->next)
		if (f->owner == owner)
			return f;
	return NULL;
}

/* The lock's completion, on whichever thread dispatches: brief. */
static void granted_or_not(void *arg, struct cfslock *lk, int status)
{
	(void)lk;
	struct cfs_flock *f = arg;
	pthread_mutex_lock(&f->fs->flock_mutex);
	cfs_flock_done_fn done = f->done;
	void *done_arg = f->arg;
	f->done = NULL;
	f->busy = false;
	pthread_mutex_unlock(&f->fs->flock_mutex);
	if (done)
		done(done_arg, cfs_applock_errno(status));
}

static struct cfs_flock *new_flock(struct cfs_fs *fs, uint64_t ino, uint64_t gen, uint64_t owner)
{
	struct cfs_flock *f = calloc(1, sizeof *f);
	if (!f)
		return NULL;
	char name[48];
	snprintf(name, sizeof name, "f%" PRIx64 ".%" PRIx64, ino, gen);
	*f = (struct cfs_flock){.owner = owner, .ino = ino, .fs = fs};
	if (!(f->lk = cfslock_new(fs->space, name, granted_or_not, NULL, f))) {
		free(f);
		return NULL;
	}
	f->next = fs->flocks;
	fs->flocks = f;
	return f;
}

/* Without fs->flock_mutex: a sync call runs other locks' completions on this thread.  EBUSY:
 * the library is letting a cached grant go already. */
static int unlock_flock(struct cfs_fs *fs, struct cfs_flock *f)
{
	int rc = cfslock_mode(f->lk) >= 0 ? cfslock_unlock_sync(f->lk) : 0;
	if (rc == -EBUSY)
		return 0;
	if (rc)
		cfs_log(fs, "inode %" PRIu64 ": flock: unlock: %s", f->ino, strerror(-rc));
	return cfs_applock_errno(rc);
}

static void unlink_flock(struct cfs_fs *fs, struct cfs_flock *f)
{
	for (struct cfs_flock **p = &fs->flocks; *p; p = &(*p)->next)
		if (*p == f) {
			*p = f->next;
			return;
		}
}

/* Claim the description's lock for this call (created if asked); NULL and *rc if it cannot be
 * had.  A close takes it off the list at once. */
static struct cfs_flock *claim(struct cfs_fs *fs, uint64_t ino, uint64_t owner, bool create,
			       bool closing, int *rc)
{
	/* Not under flock_mutex: completions take it on threads that may hold fs->lock. */
	uint64_t gen = create ? cfs_generation(fs, ino) : 0;
	pthread_mutex_lock(&fs->flock_mutex);
	struct cfs_flock *f = find(fs, owner);
	*rc = 0;
	if (f && f->busy)
		*rc = -EBUSY; /* another thread's flock on the same description is under way */
	else if (!f && create && !(f = new_flock(fs, ino, gen, owner)))
		*rc = -ENOMEM;
	if (f && !*rc) {
		f->busy = true;
		if (closing)
			unlink_flock(fs, f);
	}
	pthread_mutex_unlock(&fs->flock_mutex);
	return *rc ? NULL : f;
}

static void unclaim(struct cfs_fs *fs, struct cfs_flock *f)
{
	pthread_mutex_lock(&fs->flock_mutex);
	f->busy = false;
	pthread_mutex_unlock(&fs->flock_mutex);
}

/* LOCK_UN keeps the grant cached here (GFS2's glocks, OCFS2's flock locks do too): taking it
 * again asks nobody while no other description wants it, and when one does (here or on
 * another node) the lock library lets it go by itself. */
static int flock_unlock(struct cfs_fs *fs, uint64_t owner)
{
	int rc;
	struct cfs_flock *f = claim(fs, 0, owner, false, false, &rc);
	if (!f)
		return rc ? rc : 1; /* nothing to unlock */
	if (cfslock_mode(f->lk) >= 0 && !cfslock_cached(f->lk))
		rc = cfs_applock_errno(cfslock_release(f->lk));
	unclaim(fs, f);
	return rc ? rc : 1;
}

int cfs_flock_close(struct cfs_fs *fs, uint64_t owner)
{
	int rc;
	struct cfs_flock *f = claim(fs, 0, owner, false, true, &rc);
	if (!f)
		return rc;
	rc = unlock_flock(fs, f);
	cfslock_free(f->lk);
	free(f);
	return rc;
}

#define NOQUEUE_TRIES 4

int cfs_lock_now(struct cfslock *lk, int mode)
{
	int rc = -EAGAIN;
	for (unsigned i = 0; i < NOQUEUE_TRIES && (rc == -EAGAIN || rc == -EBUSY); i++) {
		if (i)
			usleep(2000u << i); /* 4, 8, 16 ms */
		rc = cfslock_request_sync(lk, mode, CFSLOCK_NOQUEUE | CFSLOCK_NOQUEUEBAST);
	}
	return rc == -EBUSY ? -EAGAIN : rc;
}

/* LOCK_NB, here and now (it waits for nobody). */
static int without_waiting(struct cfs_flock *f, int mode)
{
	int rc = cfs_lock_now(f->lk, mode);
	return rc ? cfs_applock_errno(rc) : 1;
}

int cfs_flock(struct cfs_fs *fs, uint64_t ino, uint64_t owner, int op, cfs_flock_done_fn done,
	      void *arg)
{
	if (!fs->cluster)
		return -EOPNOTSUPP; /* the kernel keeps a one-node mount's flocks */
	int kind = op & ~LOCK_NB, rc;
	if (kind == LOCK_UN)
		return flock_unlock(fs, owner);
	if (kind != LOCK_SH && kind != LOCK_EX)
		return -EINVAL;
	struct cfs_flock *f = claim(fs, ino, owner, true, false, &rc);
	if (!f)
		return rc;
	int mode = kind == LOCK_EX ? CFSLOCK_EX : CFSLOCK_PR;
	/* Pending: the library is letting it go (another description asked after our unlock). */
	bool in_use = !cfslock_cached(f->lk) && !cfslock_pending(f->lk);
	if (cfslock_mode(f->lk) == mode && in_use)
		rc = 1; /* held already */
	else if (cfslock_mode(f->lk) >= 0 && cfslock_mode(f->lk) != mode)
		rc = unlock_flock(fs, f); /* a conversion lets go first, as Linux's flock does */
	if (!rc && (op & LOCK_NB))
		rc = without_waiting(f, mode);
	pthread_mutex_lock(&fs->flock_mutex);
	if (!rc && fs->flock_interrupted == arg)
		rc = -EINTR;
	if (!rc) {
		f->done = done;
		f->arg = arg;
		if ((rc = cfs_applock_errno(cfslock_request(f->lk, mode, 0))))
			f->done = NULL;
	}
	f->busy = f->done != NULL;
	if (fs->flock_interrupted == arg)
		fs->flock_interrupted = NULL;
	pthread_mutex_unlock(&fs->flock_mutex);
	return rc;
}

/* The interrupt may come before cfs_flock has made its request wait: then it is kept for
 * cfs_flock to see (one at a time; one more is lost, and that request just waits on). */
void cfs_flock_interrupt(struct cfs_fs *fs, void *arg)
{
	bool found = false;
	pthread_mutex_lock(&fs->flock_mutex);
	for (struct cfs_flock *f = fs->flocks; f && !found; f = f->next)
		if (f->done && f->arg == arg) {
			found = true;
			if (cfslock_pending(f->lk))
				(void)cfslock_cancel(f->lk); /* completes with -ECANCELED, or granted */
		}
	if (!found)
		fs->flock_interrupted = arg;
	pthread_mutex_unlock(&fs->flock_mutex);
}

/* At unmount every file is closed, so every flock was unlocked: this is for a daemon that
 * stops with files still open. */
void cfs_flock_free(struct cfs_fs *fs)
{
	pthread_mutex_lock(&fs->flock_mutex);
	struct cfs_flock *list = fs->flocks;
	fs->flocks = NULL;
	pthread_mutex_unlock(&fs->flock_mutex);
	for (struct cfs_flock *f = list, *next; f; f = next) {
		next = f->next;
		if (!f->done) { /* a waiting request's lock is the library's to drop */
			unlock_flock(fs, f);
			cfslock_free(f->lk);
			free(f);
		}
	}
}
