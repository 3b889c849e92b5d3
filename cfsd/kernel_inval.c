/* SPDX-License-Identifier: GPL-2.0-or-later */
/* What the kernel caches of files other nodes change (cluster mounts), and of the range a
 * direct write changed under pages cached through a buffered open.
 *
 * Attributes and names: libcfs calls us as it gives up an inode glock (or the metadata
 * glock), with its lock held, and the kernel forgets them before the glock goes.  Both
 * notifications take no lock a request may hold: FUSE_NOTIFY_INVAL_INODE without a range
 * only marks the attributes stale, and FUSE_NOTIFY_INC_EPOCH (Linux 6.16) makes every name
 * the kernel holds be looked up again.  Forgetting names one by one (INVAL_ENTRY) would take
 * the directory's lock, which a create there waiting for a glock of the node that waits for
 * this let-go may hold.  The epoch's cost: every name the kernel holds is dropped, not just
 * expired, so a directory that is a process's working directory is unhashed until the next
 * lookup through it (a getcwd meanwhile fails with ENOENT) and a mount point is taken off its
 * mount.  Hence names are kept on a cluster only when asked for (namecache), and cfsd stops
 * having them kept (and waits out the ones handed) once something is mounted inside.
 *
 * Pages: libcfs calls us for every regular file the kernel may cache pages of when this node
 * gives up its glock.  We only queue the inode; this thread sends FUSE_NOTIFY_INVAL_INODE for
 * it.  Sending it from a FUSE worker, or before the glock goes, could deadlock: the kernel
 * locks the pages of a read or write before it sends the request, the request waits for the
 * glock, and the invalidation waits for those pages.
 *
 * Between the glock going and the invalidation landing, a process that keeps the file open
 * may still read an old page from the kernel's cache; an open after the change never does
 * (cfs_keep_cache), which is the close-to-open coherence cfs(8) promises.
 *
 * The kernel does not drop the pages of an asynchronous (libaio) direct write's range that a
 * buffered reader cached while it was in flight (6.18 neither); cfsd drops them here, and
 * the write's answer waits for that (kernel_inval_range_wait), for a bounded time: the pages
 * may be locked by a readahead that waits for a slot among the kernel's background requests,
 * which the unanswered writes hold, and then the drop lands just after the answer. */
#define FUSE_USE_VERSION 312
#include "cfsd/fuse_ops.h"

#include "cfs/control.h"
#include "cfs/internal.h" /* cfs_deadline_after_ns */

#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <linux/fuse.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifndef FUSE_NOTIFY_INC_EPOCH
#define FUSE_NOTIFY_INC_EPOCH 8
#endif

struct inval {
	uint64_t ino;
	off_t off, len; /* len 0: to the end of the file */
};

struct kernel_inval {
	struct cfsd *d;
	pthread_mutex_t lock;
	pthread_cond_t wake;
	struct inval *queue;
	size_t n, cap;
	uint64_t queued, sent; /* invalidations queued and sent so far, in that order */
	pthread_cond_t progressed;
	bool stop;
	pthread_t thread;
	/* /proc/self/mountinfo, polled for changes of the mount table (-1: read it every time),
	 * and whether it was looked at since it last changed (forget_names, under libcfs's lock) */
	int mounts_fd;
	bool mounts_seen;
};

/* *ticket (if not NULL): what k->sent reaches once v is sent. */
static int enqueue(struct kernel_inval *k, const struct inval *v, uint64_t *ticket)
{
	pthread_mutex_lock(&k->lock);
	if (k->n == k->cap) {
		size_t cap = k->cap ? k->cap * 2 : 256;
		struct inval *q = realloc(k->queue, cap * sizeof *q);
		if (!q) {
			pthread_mutex_unlock(&k->lock);
			fprintf(stderr, "cfsd: inode %llu: no memory to queue a page invalidation\n",
				(unsigned long long)v->ino);
			return -ENOMEM;
		}
		k->queue = q;
		k->cap = cap;
	}
	k->queue[k->n++] = *v;
	k->queued++;
	if (ticket)
		*ticket = k->queued;
	pthread_cond_signal(&k->wake);
	pthread_mutex_unlock(&k->lock);
	return 0;
}

/* Dropped if there is no memory: the next open of the file still reads it anew. */
static void enqueue_file(void *arg, uint64_t ino)
{
	enqueue(arg, &(struct inval){.ino = ino}, NULL);
}

void kernel_inval_range(struct cfsd *d, uint64_t ino, off_t off, off_t len)
{
	if (d->inval && len > 0)
		enqueue(d->inval, &(struct inval){ino, off, len}, NULL);
}

void kernel_inval_range_wait(struct cfsd *d, uint64_t ino, off_t off, off_t len, unsigned wait_ms)
{
	struct kernel_inval *k = d->inval;
	uint64_t ticket;
	if (!k || len <= 0 || enqueue(k, &(struct inval){ino, off, len}, &ticket))
		return;
	struct timespec until = cfs_deadline_after_ns(wait_ms * 1000000ull);
	pthread_mutex_lock(&k->lock);
	while (k->sent < ticket && !k->stop &&
	       !pthread_cond_timedwait(&k->progressed, &k->lock, &until))
		;
	pthread_mutex_unlock(&k->lock);
}

void kernel_size_changed(struct cfsd *d, uint64_t ino, uint64_t size)
{
	fuse_lowlevel_notify_inval_inode(d->se, ino, 0, 0);
	if (!d->writeback)
		return;
	/* A write-back cache keeps the kernel's own size of a file, which a store of nothing
	 * at the new end raises; nothing lowers it while the kernel knows the inode. */
	struct fuse_bufvec none = FUSE_BUFVEC_INIT(0);
	int rc = fuse_lowlevel_notify_store(d->se, ino, (off_t)size, &none, 0);
	if (rc && rc != -ENOENT)
		fprintf(stderr, "cfsd: inode %llu: size %llu not told to the kernel: %d\n",
			(unsigned long long)ino, (unsigned long long)size, rc);
}

void kernel_forget_attrs(struct cfsd *d, uint64_t ino)
{
	int rc = fuse_lowlevel_notify_inval_inode(d->se, ino, -1, 0);
	if (rc && rc != -ENOENT) /* ENOENT: the kernel has forgotten it already */
		fprintf(stderr, "cfsd: inode %llu: attribute invalidation failed: %d\n",
			(unsigned long long)ino, rc);
}

struct submount_scan {
	const char *top;
	size_t len;
	char found[PATH_MAX];
};

static void note_submount(const struct cfs_mount_entry *m, void *arg)
{
	struct submount_scan *s = arg;
	if (!strncmp(m->dir, s->top, s->len) && m->dir[s->len] == '/')
		snprintf(s->found, sizeof s->found, "%s", m->dir);
}

/* Why the kernel may not be told to drop every name: a mount on a directory inside ours, or
 * no way to tell (in why); false if there is none. */
static bool submount(const char *top, char *why, size_t len)
{
	struct submount_scan s = {.top = top, .len = strlen(top)};
	if (cfs_mountinfo_each(note_submount, &s))
		snprintf(why, len, "/proc/self/mountinfo cannot be read");
	else if (s.found[0])
		snprintf(why, len, "%s is mounted inside", s.found);
	else
		return false;
	return true;
}

/* Has the mount table changed since forget_names last looked, or has it never looked? */
static bool mounts_changed(struct kernel_inval *k)
{
	if (k->mounts_fd < 0 || !k->mounts_seen)
		return true;
	struct pollfd p = {.fd = k->mounts_fd, .events = POLLPRI};
	return poll(&p, 1, 0) != 0; /* the kernel re-arms it as it reports: an error counts too */
}

/* From now on names are handed without a timeout; those handed with one expire first, a
 * second after they were handed (the margin: the kernel sets the time just after our
 * answer, and an answer made just before the switch may be written just after it). */
static void stop_caching_names(struct cfsd *d, const char *why)
{
	__atomic_store_n(&d->names_cached, false, __ATOMIC_RELEASE);
	fprintf(stderr, "cfsd: %s: %s: the kernel keeps no names of this cluster mount from now on "
			"(remount to have them kept again)\n", d->mount_abs, why);
	struct timespec wait = {(time_t)CFSD_CACHE_SECONDS, 50000000};
	while (nanosleep(&wait, &wait) && errno == EINTR)
		;
}

static void forget_names(void *arg)
{
	struct kernel_inval *k = arg;
	struct cfsd *d = k->d;
	if (!__atomic_load_n(&d->names_cached, __ATOMIC_ACQUIRE))
		return;
	char why[PATH_MAX + 64];
	if (mounts_changed(k)) {
		if (submount(d->mount_abs, why, sizeof why)) {
			stop_caching_names(d, why);
			return;
		}
		k->mounts_seen = true;
	}
	struct fuse_out_header epoch = {.len = sizeof epoch, .error = FUSE_NOTIFY_INC_EPOCH};
	if (write(fuse_session_fd(d->se), &epoch, sizeof epoch) != (ssize_t)sizeof epoch) {
		snprintf(why, sizeof why, "the kernel refused a new name epoch (%s)", strerror(errno));
		stop_caching_names(d, why);
	}
}

static void forget_attrs(void *arg, uint64_t ino)
{
	struct kernel_inval *k = arg;
	if (__atomic_load_n(&k->d->kernel_ready, __ATOMIC_ACQUIRE))
		kernel_forget_attrs(k->d, ino);
}

static void invalidate(struct kernel_inval *k, const struct inval *v)
{
	int rc = fuse_lowlevel_notify_inval_inode(k->d->se, v->ino, v->off, v->len);
	if (rc && rc != -ENOENT) /* ENOENT: the kernel has forgotten it already */
		fprintf(stderr, "cfsd: inode %llu: page invalidation failed: %d\n",
			(unsigned long long)v->ino, rc);
}

static void *run(void *arg)
{
	struct kernel_inval *k = arg;
	struct inval *batch = NULL;
	pthread_mutex_lock(&k->lock);
	while (!k->stop) {
		if (!k->n) {
			pthread_cond_wait(&k->wake, &k->lock);
			continue;
		}
		size_t n = k->n;
		free(batch);
		batch = k->queue; /* take the whole queue; a new one grows meanwhile */
		k->queue = NULL;
		k->n = k->cap = 0;
		pthread_mutex_unlock(&k->lock);
		for (size_t i = 0; i < n; i++) {
			invalidate(k, &batch[i]);
			pthread_mutex_lock(&k->lock);
			k->sent++;
			pthread_cond_broadcast(&k->progressed);
			pthread_mutex_unlock(&k->lock);
		}
		pthread_mutex_lock(&k->lock);
	}
	pthread_mutex_unlock(&k->lock);
	free(batch);
	return NULL;
}

int kernel_inval_start(struct cfsd *d)
{
	struct kernel_inval *k = calloc(1, sizeof *k);
	if (!k)
		return -ENOMEM;
	k->d = d;
	k->mounts_fd = d->cluster ? open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC) : -1;
	pthread_mutex_init(&k->lock, NULL);
	pthread_cond_init(&k->wake, NULL);
	pthread_cond_init(&k->progressed, NULL);
	int rc = pthread_create(&k->thread, NULL, run, k);
	if (rc) {
		pthread_mutex_destroy(&k->lock);
		pthread_cond_destroy(&k->wake);
		pthread_cond_destroy(&k->progressed);
		if (k->mounts_fd >= 0)
			close(k->mounts_fd);
		free(k);
		return -rc;
	}
	d->inval = k;
	if (d->cluster)
		cfs_set_kernel_caches(d->fs, &(struct cfs_kernel_caches){
			.pages = enqueue_file, .attrs = forget_attrs, .names = forget_names, .arg = k});
	return 0;
}

void kernel_inval_stop(struct cfsd *d)
{
	struct kernel_inval *k = d->inval;
	if (!k)
		return;
	if (d->cluster)
		cfs_set_kernel_caches(d->fs, NULL);
	pthread_mutex_lock(&k->lock);
	k->stop = true;
	pthread_cond_signal(&k->wake);
	pthread_mutex_unlock(&k->lock);
	pthread_join(k->thread, NULL);
	pthread_mutex_destroy(&k->lock);
	pthread_cond_destroy(&k->wake);
	pthread_cond_destroy(&k->progressed);
	free(k->queue);
	if (k->mounts_fd >= 0)
		close(k->mounts_fd);
	free(k);
	d->inval = NULL;
}
