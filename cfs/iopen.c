/* Who frees an unlinked inode on a cluster: the last node to have it open (GFS2's iopen glock,
 * taken lazily).
 *
 * Each inode has a cluster lock "o<block>.<generation>" (a new inode in a freed block is another
 * resource, so nothing said about the old one holds up the new one), and the filesystem has one
 * lock "opens".  Only a node holding the metadata glock EX unlinks or frees, and while a node
 * holds the glock (PR or EX) nobody else holds it EX.  So a node needs the open locks only when
 * it lets the glock go: then it takes the inode's lock PR for every file it has open, and
 * "opens" PR if it has any, and keeps them until those files are closed here.  A node working
 * alone sends no message for them.
 *
 * A node frees an unlinked inode nothing of its own holds any more:
 *   - at once if it gets "opens" EX without waiting (no node has anything open: the grant is
 *     kept, so a node removing files alone asks once), or the inode's lock EX without waiting;
 *   - else the inode stays on the unlinker's orphan list (every unlink on a cluster puts it
 *     there, so a crash leaves it to that slot's next mount) and a reap is queued: an EX
 *     request that waits until the holders have closed it.  The grant wakes the committer,
 *     which frees the inode under the metadata glock EX if it is still the same unlinked one.
 * Lock callbacks may run on any thread waiting for the lock manager, one holding fs->lock
 * included: a reap's grant only sets a flag and wakes the committer. */
#include "cfs/internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct cfs_reap {
	uint64_t blk, generation;
	struct cfslock *lk;
	int state; /* atomic: 0 waiting, 1 granted, -errno failed */
	struct cfs_reap *next;
	struct cfs_fs *fs;
};

static void lock_name(const struct cfs_inode *ip, char *buf, size_t len)
{
	snprintf(buf, len, "o%" PRIx64 ".%" PRIx64, ip->ino, ip->d.generation);
}

static int iopen_request(struct cfs_fs *fs, struct cfs_inode *ip, int mode, unsigned flags)
{
	if (!ip->iopen) {
		char name[48];
		lock_name(ip, name, sizeof name);
		if (!(ip->iopen = cfslock_new(fs->space, name, NULL, NULL, NULL)))
			return -ENOMEM;
	}
	if (ip->iopen_mode >= mode)
		return 0;
	int rc = cfslock_request_sync(ip->iopen, mode, flags);
	if (!rc)
		ip->iopen_mode = mode;
	return rc;
}

static int iopen_unlock(struct cfs_fs *fs, struct cfs_inode *ip)
{
	if (ip->iopen_mode < 0)
		return 0;
	ip->iopen_mode = -1;
	int rc = cfslock_unlock_sync(ip->iopen);
	if (rc)
		cfs_log(fs, "inode %" PRIu64 ": open lock: unlock: %s", ip->ino, strerror(-rc));
	return rc;
}

/* "opens" PR: this node has files open while it does not hold the metadata glock.  A grant kept
 * from a check (EX, unused) is converted down, not asked for again. */
static int opens_lock(struct cfs_fs *fs)
{
	if (!fs->opens && !(fs->opens = cfslock_new(fs->space, "opens", NULL, NULL, NULL)))
		return -ENOMEM;
	return 0;
}

static int opens_share(struct cfs_fs *fs)
{
	if (fs->opens_shared)
		return 0;
	int rc = opens_lock(fs);
	if (rc)
		return rc;
	if (cfslock_mode(fs->opens) == CFSLOCK_EX &&
	    cfslock_request_sync(fs->opens, CFSLOCK_EX, CFSLOCK_NOQUEUE) == 0)
		rc = cfslock_request_sync(fs->opens, CFSLOCK_PR, 0); /* down: granted at once */
	else
		rc = cfslock_request_sync(fs->opens, CFSLOCK_PR, 0);
	fs->opens_shared = !rc;
	return rc;
}

static void hold_if_open(struct cfs_fs *fs, struct cfs_inode *ip)
{
	if (!ip->nopen || ip->iopen_mode >= 0 || ip->dead || fs->iopen_error)
		return;
	int rc = iopen_request(fs, ip, CFSLOCK_PR, 0);
	if (rc) {
		cfs_log(fs, "inode %" PRIu64 ": open lock: %s", ip->ino, strerror(-rc));
		fs->iopen_error = rc;
		return;
	}
	fs->iopen_count++;
}

int cfs_iopen_before_let_go(struct cfs_fs *fs)
{
	if (!fs->cluster)
		return 0;
	fs->iopen_error = 0;
	fs->opens_busy = false; /* asked again in the next tenure */
	cfs_icache_each(fs, hold_if_open);
	int rc = fs->iopen_error;
	if (!rc && fs->iopen_count)
		rc = opens_share(fs);
	return rc == -CFSLOCK_ENOQUORUM ? -EIO : rc;
}

void cfs_iopen_closed(struct cfs_fs *fs, struct cfs_inode *ip)
{
	if (ip->iopen_mode < 0)
		return;
	iopen_unlock(fs, ip);
	if (--fs->iopen_count == 0 && fs->opens_shared) {
		fs->opens_shared = false;
		cfslock_unlock_sync(fs->opens);
	}
}

void cfs_iopen_forget(struct cfs_fs *fs, struct cfs_inode *ip)
{
	if (!ip->iopen)
		return;
	cfs_iopen_closed(fs, ip);
	cfslock_free(ip->iopen);
	ip->iopen = NULL;
}

/* ---- freeing ---- */

/* Take the inode's block off the orphan list of every slot that names it. */
static int orphans_forget(struct cfs_fs *fs, struct cfs_inode *ip)
{
	int rc = 0;
	for (uint32_t s = 0; s < fs->sb.nslots && !rc; s++)
		rc = cfs_orphan_remove_from(fs, s, ip->ino);
	if (!rc)
		ip->in_orphans = false;
	return rc;
}

/* Free an unlinked inode nobody has open (its lock EX here), metadata glock EX held. */
static int free_unlinked(struct cfs_fs *fs, struct cfs_inode *ip)
{
	int rc = cfs_ifree(fs, ip);
	if (!rc)
		rc = fs->cluster ? orphans_forget(fs, ip) : ip->in_orphans ? cfs_orphan_remove(fs, ip) : 0;
	if (rc)
		cfs_log(fs, "inode %" PRIu64 ": freeing the unlinked inode: %s", ip->ino, strerror(-rc));
	return rc;
}

static void reap_done(void *arg, struct cfslock *lk, int status)
{
	(void)lk;
	struct cfs_reap *r = arg;
	__atomic_store_n(&r->state, status ? status : 1, __ATOMIC_RELEASE);
	pthread_cond_signal(&r->fs->commit_wake);
}

static int reap_queue(struct cfs_fs *fs, const struct cfs_inode *ip)
{
	for (struct cfs_reap *r = fs->reaps; r; r = r->next)
		if (r->blk == ip->ino && r->generation == ip->d.generation)
			return 0;
	struct cfs_reap *r = calloc(1, sizeof *r);
	char name[48];
	lock_name(ip, name, sizeof name);
	if (!r || !(r->lk = cfslock_new(fs->space, name, reap_done, NULL, r))) {
		free(r);
		return -ENOMEM;
	}
	*r = (struct cfs_reap){.blk = ip->ino, .generation = ip->d.generation, .lk = r->lk,
			       .next = fs->reaps, .fs = fs};
	int rc = cfslock_request(r->lk, CFSLOCK_EX, 0);
	if (rc) {
		cfslock_free(r->lk);
		free(r);
		return rc;
	}
	fs->reaps = r;
	return 0;
}

/* Does no other node have this inode open?  Then its lock (or "opens") is held EX here. */
static int nobody_else_has_it(struct cfs_fs *fs, struct cfs_inode *ip, bool *by_opens)
{
	*by_opens = false;
	if (!fs->opens_shared && !fs->opens_busy && !opens_lock(fs)) {
		int rc = cfslock_request_sync(fs->opens, CFSLOCK_EX, CFSLOCK_NOQUEUE);
		if (!rc) {
			*by_opens = true;
			return 0;
		}
		/* Somebody has something open: while this node holds the glock EX nobody lets
		 * go of "opens" for long, ask inode by inode. */
		fs->opens_busy = rc == -EAGAIN;
	}
	return iopen_request(fs, ip, CFSLOCK_EX, CFSLOCK_NOQUEUE);
}

int cfs_iopen_unlinked(struct cfs_fs *fs, struct cfs_inode *ip)
{
	if (!fs->cluster)
		return free_unlinked(fs, ip);
	bool by_opens;
	int rc = nobody_else_has_it(fs, ip, &by_opens);
	if (!rc) {
		rc = free_unlinked(fs, ip);
		if (by_opens)
			cfslock_release(fs->opens); /* kept: the next unlink asks nobody */
		else
			iopen_unlock(fs, ip);
		return rc;
	}
	if (rc != -EAGAIN)
		return rc == -CFSLOCK_ENOQUORUM ? -EIO : rc;
	/* Open elsewhere: the last node to close it frees it. */
	return reap_queue(fs, ip);
}

/* A granted reap: free the inode if it is still the unlinked one the reap was queued for. */
static int reap_run(struct cfs_fs *fs, struct cfs_reap *r)
{
	struct cfs_inode *ip;
	int rc = cfs_glock_acquire(fs, CFSLOCK_EX);
	if (!rc)
		rc = cfs_iget_entry(fs, r->blk, &ip);
	if (rc)
		return rc == -ESTALE ? 0 : rc; /* ESTALE: freed already */
	if (ip->d.generation == r->generation && ip->d.nlink == 0) {
		rc = free_unlinked(fs, ip);
		ip->dead = !rc;
	}
	if (!ip->nlookup && !ip->nopen && ip->ino != fs->sb.root_ino)
		cfs_iforget(fs, ip);
	return rc;
}

static void reap_free(struct cfs_reap *r)
{
	if (cfslock_mode(r->lk) >= 0)
		cfslock_unlock_sync(r->lk);
	cfslock_free(r->lk);
	free(r);
}

void cfs_iopen_work(struct cfs_fs *fs)
{
	if (!fs->cluster)
		return;
	for (struct cfs_reap **p = &fs->reaps, *r; (r = *p);) {
		int state = __atomic_load_n(&r->state, __ATOMIC_ACQUIRE);
		if (state == 0) {
			p = &r->next;
			continue;
		}
		int rc = state == 1 && !fs->ro ? reap_run(fs, r) : 0;
		if (rc) {
			cfs_log(fs, "inode %" PRIu64 ": unlinked, not freed yet: %s", r->blk,
				strerror(-rc));
			p = &r->next; /* keep the grant: try again at the next round */
			continue;
		}
		*p = r->next;
		reap_free(r);
	}
}

void cfs_iopen_shutdown(struct cfs_fs *fs, unsigned wait_ms)
{
	/* Reaps whose holders close soon are done; the others stay on an orphan list for the
	 * next mount of a slot that lists them, or for the node that closes last. */
	for (unsigned waited = 0; fs->reaps && waited < wait_ms; waited += 20) {
		cfslock_dispatch(fs->locks); /* the dispatcher thread has stopped */
		cfs_iopen_work(fs);
		if (!fs->reaps)
			break;
		pthread_mutex_unlock(&fs->lock);
		usleep(20000);
		pthread_mutex_lock(&fs->lock);
	}
	cfs_iopen_drop_reaps(fs);
}

void cfs_iopen_drop_reaps(struct cfs_fs *fs)
{
	while (fs->reaps) {
		struct cfs_reap *r = fs->reaps;
		if (cfslock_pending(r->lk) && cfslock_cancel(r->lk) == 0)
			while (!__atomic_load_n(&r->state, __ATOMIC_ACQUIRE) &&
			       cfslock_dispatch(fs->locks) >= 0)
				usleep(1000);
		fs->reaps = r->next;
		reap_free(r);
	}
}

void cfs_iopen_free(struct cfs_fs *fs)
{
	if (!fs->opens)
		return;
	if (cfslock_mode(fs->opens) >= 0)
		cfslock_unlock_sync(fs->opens);
	cfslock_free(fs->opens);
	fs->opens = NULL;
}
