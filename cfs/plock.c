/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* fcntl(2) record locks across the nodes of a cluster mount: libcfslock's replicated table
 * (dlm-client/plock.c), one ordered message per lock or unlock, as GFS2's plocks over
 * dlm_controld.  The file is named by its inode handle (a new inode in a freed block is
 * another handle on a cluster).  A request that waits does not hold the caller: its outcome
 * comes through done, from the lock library's thread.  A holder on another node is reported
 * by F_GETLK with pid 0: its pid means nothing on this node.
 *
 * The kernel tells the daemon of a close through FLUSH, with the closing process's lock
 * owner: that drops its classic record locks.  An open file description lock (F_OFD_SETLK)
 * belongs to the description, and its last close says nothing about it (the kernel looks
 * for such locks only in its own table, empty where the daemon keeps them); so the owners
 * that locked through each description are noted here, and their locks go at its RELEASE.
 * A classic owner's are gone by then (it closed the file, or it would still be open). */
#include "cfs/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>

static struct cfslock_plock plock_of(uint64_t ino, uint64_t owner, const struct flock *fl)
{
	uint64_t start = (uint64_t)fl->l_start;
	return (struct cfslock_plock){.file = ino, .owner = owner, .start = start,
				      .end = fl->l_len > 0 ? start + (uint64_t)fl->l_len - 1
							   : UINT64_MAX,
				      .pid = (uint32_t)fl->l_pid, .type = fl->l_type};
}

/* A request that may wait, until its answer: what an interrupt cancels. */
struct pending {
	void *arg;
	uint64_t reqid;
	bool cancel;   /* interrupted before its reqid was known */
	cfs_flock_done_fn done;
	struct cfs_fs *fs;
	struct pending *next;
};

/* An owner that took a lock through an open file description. */
struct lock_user {
	uint64_t open_id, ino, owner;
	struct lock_user *next;
};

/* fs->flock_mutex held. */
static int note_user(struct cfs_fs *fs, uint64_t open_id, uint64_t ino, uint64_t owner)
{
	for (struct lock_user *u = fs->plock_users; u; u = u->next)
		if (u->open_id == open_id && u->owner == owner)
			return 0;
	struct lock_user *u = malloc(sizeof *u);
	if (!u)
		return -ENOMEM;
	*u = (struct lock_user){.open_id = open_id, .ino = ino, .owner = owner,
				.next = fs->plock_users};
	fs->plock_users = u;
	return 0;
}

static void unlink_pending(struct cfs_fs *fs, struct pending *p)
{
	for (struct pending **pp = &fs->plocks_pending; *pp; pp = &(*pp)->next)
		if (*pp == p) {
			*pp = p->next;
			return;
		}
}

static void answered(void *arg, int status)
{
	struct pending *p = arg;
	struct cfs_fs *fs = p->fs;
	pthread_mutex_lock(&fs->flock_mutex);
	unlink_pending(fs, p);
	pthread_mutex_unlock(&fs->flock_mutex);
	p->done(p->arg, cfs_applock_errno(status));
	free(p);
}

int cfs_plock_set(struct cfs_fs *fs, uint64_t ino, uint64_t owner, uint64_t open_id,
		  const struct flock *fl, bool wait, cfs_flock_done_fn done, void *arg)
{
	if (!fs->cluster)
		return -EOPNOTSUPP; /* the kernel keeps a one-node mount's record locks */
	struct pending *p = calloc(1, sizeof *p);
	if (!p)
		return -ENOMEM;
	*p = (struct pending){.arg = arg, .done = done, .fs = fs};
	struct cfslock_plock lk = plock_of(ino, owner, fl);
	pthread_mutex_lock(&fs->flock_mutex);
	int noted = fl->l_type == F_UNLCK ? 0 : note_user(fs, open_id, ino, owner);
	if (!noted) {
		p->next = fs->plocks_pending;
		fs->plocks_pending = p;
	}
	pthread_mutex_unlock(&fs->flock_mutex);
	if (noted) {
		free(p);
		return noted;
	}
	uint64_t reqid = 0;
	int rc = cfslock_plock(fs->space, &lk, wait, answered, p, &reqid);
	/* Once sent, p is answered's: touched only while still on the list (answered takes it
	 * off, under the same mutex, before it frees it). */
	bool listed = false, cancel = false;
	pthread_mutex_lock(&fs->flock_mutex);
	for (struct pending *q = fs->plocks_pending; q && !listed; q = q->next)
		listed = q == p;
	if (listed && rc) {
		unlink_pending(fs, p);
		free(p);
	} else if (listed) {
		p->reqid = reqid;
		cancel = p->cancel;
	}
	pthread_mutex_unlock(&fs->flock_mutex);
	if (cancel)
		(void)cfslock_plock_cancel(fs->space, reqid);
	return cfs_lock_errno(rc);
}

void cfs_plock_interrupt(struct cfs_fs *fs, void *arg)
{
	uint64_t reqid = 0;
	pthread_mutex_lock(&fs->flock_mutex);
	for (struct pending *p = fs->plocks_pending; p; p = p->next)
		if (p->arg == arg) {
			reqid = p->reqid;
			p->cancel = !reqid; /* not sent yet: cfs_plock_set cancels once it is */
		}
	pthread_mutex_unlock(&fs->flock_mutex);
	if (reqid)
		(void)cfslock_plock_cancel(fs->space, reqid);
}

int cfs_plock_get(struct cfs_fs *fs, uint64_t ino, uint64_t owner, struct flock *fl)
{
	if (!fs->cluster)
		return -EOPNOTSUPP;
	struct cfslock_plock probe = plock_of(ino, owner, fl), h;
	uint32_t node;
	int rc = cfslock_plock_get(fs->space, &probe, &h, &node);
	if (rc <= 0) {
		fl->l_type = F_UNLCK;
		return rc;
	}
	fl->l_type = (short)h.type;
	fl->l_whence = SEEK_SET;
	fl->l_start = (off_t)h.start;
	fl->l_len = h.end == UINT64_MAX ? 0 : (off_t)(h.end - h.start + 1);
	fl->l_pid = node == cfslock_node_id(fs->locks) ? (pid_t)h.pid : 0;
	return 0;
}

static bool same_owner(const struct lock_user *u, uint64_t ino, uint64_t owner)
{
	return u->ino == ino && u->owner == owner;
}

static bool same_open(const struct lock_user *u, uint64_t open_id, uint64_t unused)
{
	(void)unused;
	return u->open_id == open_id;
}

static void dropped(void *arg, int status)
{
	(void)arg;
	(void)status; /* nobody waits for a release's unlocks */
}

/* Forget the users that match (ino and owner, or open_id); with drop, their locks go too. */
static void forget_users(struct cfs_fs *fs, bool (*match)(const struct lock_user *, uint64_t,
							  uint64_t),
			 uint64_t a, uint64_t b, bool drop)
{
	struct lock_user *gone = NULL;
	pthread_mutex_lock(&fs->flock_mutex);
	for (struct lock_user **p = &fs->plock_users, *u; (u = *p);) {
		if (match(u, a, b)) {
			*p = u->next;
			u->next = gone;
			gone = u;
		} else {
			p = &u->next;
		}
	}
	pthread_mutex_unlock(&fs->flock_mutex);
	for (struct lock_user *u = gone, *next; u; u = next) {
		next = u->next;
		if (drop)
			(void)cfslock_plock_close(fs->space, u->ino, u->owner, dropped, NULL);
		free(u);
	}
}

int cfs_plock_close(struct cfs_fs *fs, uint64_t ino, uint64_t owner, cfs_flock_done_fn done,
		    void *arg)
{
	if (!fs->cluster)
		return 1;
	forget_users(fs, same_owner, ino, owner, false); /* the close below drops them all */
	return cfs_lock_errno(cfslock_plock_close(fs->space, ino, owner, done, arg));
}

void cfs_plock_release(struct cfs_fs *fs, uint64_t open_id)
{
	if (fs->cluster)
		forget_users(fs, same_open, open_id, 0, true);
}

void cfs_plock_free(struct cfs_fs *fs)
{
	for (struct lock_user *u = fs->plock_users, *next; u; u = next) {
		next = u->next;
		free(u);
	}
	fs->plock_users = NULL;
}
