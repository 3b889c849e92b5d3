/* Dropping the kernel's cached pages of files another node may change (cluster mounts), and
 * of the range a direct write changed under pages cached through a buffered open.
 *
 * libcfs calls us, with its lock held, for every regular file the kernel may cache pages of
 * when this node gives up the metadata glock.  We only queue the inode; this thread sends
 * FUSE_NOTIFY_INVAL_INODE for it.  Sending it from a FUSE worker, or before the glock goes,
 * could deadlock: the kernel locks the pages of a read or write before it sends the request,
 * the request waits for the glock, and the invalidation waits for those pages.
 *
 * Between the glock going and the invalidation landing, a process that keeps the file open
 * may still read an old page from the kernel's cache; an open after the change never does
 * (cfs_keep_cache), which is the close-to-open coherence cfs(8) promises.
 *
 * Kernels before 6.16 do not drop the pages of a direct write's range that a buffered reader
 * cached while an asynchronous (libaio) write was in flight; cfsd drops them here, just after
 * the answer.  Not before it: the pages are locked by a readahead that waits for a slot among
 * the kernel's background requests, which the unanswered writes hold. */
#define FUSE_USE_VERSION 312
#include "cfsd/fuse_ops.h"

#include <errno.h>
#include <fuse_lowlevel.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

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
	bool stop;
	pthread_t thread;
};

static int enqueue(struct kernel_inval *k, const struct inval *v)
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
	pthread_cond_signal(&k->wake);
	pthread_mutex_unlock(&k->lock);
	return 0;
}

/* Dropped if there is no memory: the next open of the file still reads it anew. */
static void enqueue_file(void *arg, uint64_t ino) { enqueue(arg, &(struct inval){.ino = ino}); }

void kernel_inval_range(struct cfsd *d, uint64_t ino, off_t off, off_t len)
{
	if (d->inval && len > 0)
		enqueue(d->inval, &(struct inval){ino, off, len});
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
		for (size_t i = 0; i < n; i++)
			invalidate(k, &batch[i]);
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
	pthread_mutex_init(&k->lock, NULL);
	pthread_cond_init(&k->wake, NULL);
	int rc = pthread_create(&k->thread, NULL, run, k);
	if (rc) {
		pthread_mutex_destroy(&k->lock);
		pthread_cond_destroy(&k->wake);
		free(k);
		return -rc;
	}
	d->inval = k;
	if (d->cluster)
		cfs_set_invalidate(d->fs, enqueue_file, k);
	return 0;
}

void kernel_inval_stop(struct cfsd *d)
{
	struct kernel_inval *k = d->inval;
	if (!k)
		return;
	if (d->cluster)
		cfs_set_invalidate(d->fs, NULL, NULL);
	pthread_mutex_lock(&k->lock);
	k->stop = true;
	pthread_cond_signal(&k->wake);
	pthread_mutex_unlock(&k->lock);
	pthread_join(k->thread, NULL);
	pthread_mutex_destroy(&k->lock);
	pthread_cond_destroy(&k->wake);
	free(k->queue);
	free(k);
	d->inval = NULL;
}
