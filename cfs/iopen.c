/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Who frees an unlinked inode on a cluster: the last node to close it (GFS2's iopen glock,
 * taken lazily).
 *
 * Each inode has a cluster lock "o<block>.<generation>" (a new inode in a freed block is another
 * resource, so nothing said about the old one holds up the new one), and the filesystem has one
 * lock "opens".  Only a node holding the inode's glock EX unlinks or frees it, and while a node
 * holds an inode's glock (PR or EX) nobody else holds it EX.  So a node needs the open lock
 * only when it lets the inode's glock go with the file open: then it takes the inode's lock
 * PR, and "opens" PR, and keeps them until the file is closed here.  A node working alone
 * sends no message for them.
 *
 * A node under the inode's glock EX frees an unlinked inode nothing of its own holds any more if no
 * other node has it open: "opens" EX granted without waiting (nobody has anything open; the
 * grant is kept, so a node removing files alone asks once; a node keeping it from earlier frees
 * is told, and gives it back for the next try), or the inode's lock EX without waiting.
 * Otherwise it stays on the unlinker's orphan list (every unlink on a cluster puts it there, so
 * a crash leaves it to that slot's next mount), and each node that closes it gives its lock
 * back before it looks again: the last one finds no holder and frees it.
 *
 * Nobody ever waits for an open lock EX: it is only asked for without waiting, by the holder
 * of the inode's glock EX, and let go (or left to the library's cache) before anything else
 * is waited for.  So the PR requests of a node letting a glock go (made with fs->lock held)
 * wait at most for a kept "opens" grant, which the lock library gives back on its own. */
#include "cfs/internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>


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

/* "opens" PR: this node has files open while it does not hold the metadata glock; EX (kept
 * after a free): no node has. */
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
	/* A kept EX grant (from a free) is taken back first, so that the PR below converts it
	 * down, granted at once, rather than racing the library's own release of it. */
	if (cfslock_mode(fs->opens) == CFSLOCK_EX)
		(void)cfslock_request_sync(fs->opens, CFSLOCK_EX, CFSLOCK_NOQUEUE);
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

void cfs_iopen_before_let_go(struct cfs_fs *fs, struct cfs_inode *ip)
{
	hold_if_open(fs, ip);
	if (!fs->iopen_error && fs->iopen_count)
		fs->iopen_error = opens_share(fs);
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

/* Take the inode off the orphan lists: ours if it is on it (we unlinked it, or cfs_ifree put
 * it there to free it over several commits), and if another node unlinked it (on a cluster)
 * whichever slot's list names it, or that slot's next mount would free it again. */
static int orphans_forget(struct cfs_fs *fs, struct cfs_inode *ip, bool unlinked_here)
{
	int rc = ip->in_orphans ? cfs_orphan_remove(fs, ip) : 0;
	for (uint32_t s = 0; fs->cluster && !unlinked_here && s < fs->sb.nslots && !rc; s++)
		rc = cfs_orphan_remove_from(fs, s, ip->ino);
	return rc;
}

/* Free an unlinked inode nobody has open (its lock EX here), its glock EX held. */
static int free_unlinked(struct cfs_fs *fs, struct cfs_inode *ip)
{
	bool unlinked_here = ip->in_orphans;
	int rc = cfs_ifree(fs, ip);
	if (!rc)
		rc = orphans_forget(fs, ip, unlinked_here);
	if (rc)
		cfs_log(fs, "inode %" PRIu64 ": freeing the unlinked inode: %s", ip->ino, strerror(-rc));
	return rc;
}

/* After "opens" EX was refused, how long unlinks ask inode by inode before asking for it again.
 * The refusal is often brief (the kernel's release of a file another node just closed arrives
 * after its glock went), and an rm -rf asking per inode sends two messages per file. */
#define OPENS_RETRY_NS 100000000ull

static bool opens_worth_asking(struct cfs_fs *fs)
{
	if (fs->opens_shared)
		return false;
	return !fs->opens_refused_ns || cfs_now_ns() - fs->opens_refused_ns >= OPENS_RETRY_NS;
}

/* Does no other node have this inode open?  Then its lock (or "opens") is held EX here. */
static int nobody_else_has_it(struct cfs_fs *fs, struct cfs_inode *ip, bool *by_opens)
{
	*by_opens = false;
	if (opens_worth_asking(fs) && !opens_lock(fs)) {
		int rc = cfslock_request_sync(fs->opens, CFSLOCK_EX,
					      CFSLOCK_NOQUEUE | CFSLOCK_NOQUEUEBAST);
		if (!rc) {
			fs->opens_refused_ns = 0;
			*by_opens = true;
			return 0;
		}
		if (rc == -EAGAIN)
			fs->opens_refused_ns = cfs_now_ns();
	}
	return iopen_request(fs, ip, CFSLOCK_EX, CFSLOCK_NOQUEUE);
}

/* Made here, and its glock EX here ever since: no other node has read it, so none has it
 * open (a node opens a file only under its glock, and takes its open lock before letting that
 * go).  Files a node makes and removes alone are freed without a message. */
static bool never_shared(struct cfs_fs *fs, const struct cfs_inode *ip)
{
	return ip->made_at && cfs_iglock_mode(fs, ip->ino) == CFSLOCK_EX &&
	       cfs_iglock_grant_seq(fs, ip->ino) <= ip->made_at;
}

int cfs_iopen_unlinked(struct cfs_fs *fs, struct cfs_inode *ip)
{
	if (!fs->cluster || never_shared(fs, ip)) {
		int rc = free_unlinked(fs, ip);
		ip->dead = fs->cluster && !rc;
		return rc;
	}
	bool by_opens;
	int rc = nobody_else_has_it(fs, ip, &by_opens);
	if (!rc) {
		/* Nobody else has it open, and nobody opens it again without its glock, which we
		 * hold EX: the open locks go before the free, which may wait for other glocks (an
		 * orphan list's), while a node letting one of those go may ask for them PR. */
		if (by_opens)
			cfslock_release(fs->opens); /* kept: the next unlink asks nobody */
		else
			iopen_unlock(fs, ip);
		rc = free_unlinked(fs, ip);
		ip->dead = !rc; /* its block is free: what still names it here gets ESTALE */
		return rc;
	}
	if (rc == -EAGAIN)
		return 0; /* open elsewhere: on its unlinker's orphan list until the last close */
	return cfs_lock_errno(rc);
}

void cfs_iopen_free(struct cfs_fs *fs)
{
	cfs_lock_put(&fs->opens);
}
