/* Who frees an unlinked inode on a cluster: the last node to have it open (GFS2's iopen glock).
 *
 * Each inode has a cluster lock "o<block>.<generation>" (a new inode in a freed block is another
 * resource, so nothing said about the old one holds up the new one).  A node holds it PR while it
 * has the file open, and keeps the grant after the last close until another node asks for it.
 * A node frees an inode only under that lock EX, so never while any node has it open:
 *   - whoever drops the last link puts the inode on its slot's orphan list (a crash leaves it to
 *     that slot's next mount);
 *   - whoever then finds no reference of its own (the unlinker right away, every other node at
 *     its last close) tries EX without waiting; granted, it frees the inode and takes it off
 *     every orphan list;
 *   - refused, it queues a reap: an EX request that waits.  Holders that still have the file
 *     open let go at their last close, cached grants at the committer's next round; the grant
 *     wakes the committer, which frees the inode under the metadata glock EX if it is still the
 *     same unlinked inode.
 * The lock's callbacks may run on any thread waiting for the lock manager, one that holds
 * fs->lock included: they only set flags and wake the committer. */
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

static void iopen_wanted(void *arg, struct cfslock *lk, int mode)
{
	(void)lk, (void)mode;
	struct cfs_inode *ip = arg;
	__atomic_store_n(&ip->iopen_wanted, true, __ATOMIC_RELEASE);
	__atomic_add_fetch(&ip->fs->iopen_wishes, 1, __ATOMIC_ACQ_REL);
	pthread_cond_signal(&ip->fs->commit_wake);
}

static int iopen_request(struct cfs_fs *fs, struct cfs_inode *ip, int mode)
{
	if (!ip->iopen) {
		char name[48];
		lock_name(ip, name, sizeof name);
		ip->fs = fs;
		if (!(ip->iopen = cfslock_new(fs->space, name, NULL, iopen_wanted, ip)))
			return -ENOMEM;
	}
	if (ip->iopen_mode >= mode)
		return 0;
	int rc = cfslock_request_sync(ip->iopen, mode, CFSLOCK_NOQUEUE);
	if (!rc)
		ip->iopen_mode = mode;
	return rc;
}

static int iopen_unlock(struct cfs_fs *fs, struct cfs_inode *ip)
{
	if (ip->iopen_mode < 0)
		return 0;
	__atomic_store_n(&ip->iopen_wanted, false, __ATOMIC_RELEASE);
	ip->iopen_mode = -1;
	int rc = cfslock_unlock_sync(ip->iopen);
	if (rc)
		cfs_log(fs, "inode %" PRIu64 ": open lock: unlock: %s", ip->ino, strerror(-rc));
	return rc;
}

int cfs_iopen_hold(struct cfs_fs *fs, struct cfs_inode *ip)
{
	if (!fs->cluster)
		return 0;
	int rc = iopen_request(fs, ip, CFSLOCK_PR);
	/* Refused: a node is freeing it (its last link is gone), so it is gone for us too. */
	return rc == -EAGAIN ? -ESTALE : rc == -CFSLOCK_ENOQUORUM ? -EIO : rc;
}

void cfs_iopen_closed(struct cfs_fs *fs, struct cfs_inode *ip)
{
	if (ip->iopen_mode >= 0 && __atomic_load_n(&ip->iopen_wanted, __ATOMIC_ACQUIRE))
		iopen_unlock(fs, ip);
}

void cfs_iopen_forget(struct cfs_fs *fs, struct cfs_inode *ip)
{
	if (!ip->iopen)
		return;
	iopen_unlock(fs, ip);
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

int cfs_iopen_unlinked(struct cfs_fs *fs, struct cfs_inode *ip)
{
	if (!fs->cluster)
		return free_unlinked(fs, ip);
	int rc = iopen_request(fs, ip, CFSLOCK_EX);
	if (!rc) {
		rc = free_unlinked(fs, ip);
		iopen_unlock(fs, ip);
		return rc;
	}
	if (rc != -EAGAIN)
		return rc == -CFSLOCK_ENOQUORUM ? -EIO : rc;
	/* Open elsewhere: the last node to close it frees it. */
	iopen_unlock(fs, ip);
	rc = ip->in_orphans ? 0 : cfs_orphan_add(fs, ip);
	return rc ? rc : reap_queue(fs, ip);
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

static void let_go_unused(struct cfs_fs *fs, struct cfs_inode *ip)
{
	if (!ip->nopen)
		cfs_iopen_closed(fs, ip);
}

void cfs_iopen_work(struct cfs_fs *fs)
{
	if (!fs->cluster)
		return;
	/* Open locks another node asked for, held here by nothing open, go. */
	unsigned wishes = __atomic_load_n(&fs->iopen_wishes, __ATOMIC_ACQUIRE);
	if (wishes != fs->iopen_wishes_seen) {
		fs->iopen_wishes_seen = wishes;
		cfs_icache_each(fs, let_go_unused);
	}
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
