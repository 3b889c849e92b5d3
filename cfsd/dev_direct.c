/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Direct reads and writes read from /dev/fuse, sent to the LUNs without holding a worker.
 *
 * Why: through /dev/fuse each worker (workers.c) answered a dboptimized mount's direct READ
 * or WRITE with one synchronous LUN I/O, so at most CFSD_WORKERS were at the LUNs at once,
 * and each cost the worker two context switches.  4 KiB random I/O at depth 32 went at about
 * half the raw LUN files' rate (issue 12).  Every kernel without FUSE over io_uring (Debian's
 * own, any where the fuse module's enable_uring is not set) takes this path.
 *
 * So a request that cfs_direct_io_begin maps without allocating (fuse_ops.c's
 * cfsd_direct_begin, the same as io_uring's data threads use) goes to the LUNs with libaio
 * from the worker that read it, which goes back to reading requests; one completion thread
 * reaps the LUN I/O and writes each answer to /dev/fuse (a request may be answered from any
 * thread through the descriptor it was read from).  The request's buffer goes with it: a
 * WRITE's data stays where the worker read it, and the worker takes a free buffer of a slot
 * in exchange; a READ's data lands in the slot's own buffer.  At most SLOTS requests are in
 * flight so; past that, and for everything else, the worker answers as before.
 *
 * An O_SYNC or O_DSYNC write is written and flushed by the worker itself (as io_uring's data
 * threads do, see fuse_uring.c's write_through), and so is a request that finds no other in
 * flight when the one before found none either: one at a time, the hand-off to the
 * completion thread only added its wake-up (4 KiB reads at depth 1 took 140-150 us, the raw
 * LUN files' 80-90 us).  Not a lone request of a deeper queue: at depth 4, moving each that
 * found none other in flight in its worker made reads an eighth slower. */
#define FUSE_USE_VERSION 312
#include "cfsd/dev_direct.h"

#include "cfs/cfs.h"
#include "cfs/internal.h"
#include "cfsd/fuse_uring.h"

#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <libaio.h>
#include <limits.h>
#include <linux/fuse.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define SLOTS 64 /* requests in flight; each holds a request buffer (a megabyte) */
#define REAP_MAX 64
/* Larger requests stay with their worker: their pieces go to the LUNs together either way,
 * and one completion thread writing every 1 MiB answer (the kernel copies it then) held
 * 1 MiB direct reads and writes at depth 4 back by a tenth to a quarter. */
#define ASYNC_MAX (128 * 1024)

struct dev_direct_slot {
	struct dev_direct *dd;
	struct dev_direct_slot *next_free;
	void *region; /* the request buffer, laid out as cfsd_request_buffer's */
	char *mem;
	uint64_t unique;
	struct cfs_direct_io io;
	struct iocb iocbs[CFS_DIRECT_IO_PIECES];
	unsigned pending; /* pieces not done, and one for the submitter while it submits (atomic) */
	struct dev_direct_slot *next_later;
	int error;	  /* the first piece's error (atomic) */
	uint64_t bytes;	  /* what the pieces moved (atomic) */
};

struct dev_direct {
	int fd; /* /dev/fuse */
	struct fuse_uring_data_path data;
	size_t room; /* a request buffer's room for data, past its first page */
	io_context_t aio;
	pthread_t completer;
	pthread_mutex_t lock;
	pthread_cond_t idle; /* nothing in flight any more */
	struct dev_direct_slot *free;
	unsigned nslots, inflight;
	bool last_found_none; /* the request before found none other in flight */
	bool stopping;
	uint64_t answered; /* atomic */
	struct dev_direct_slot *later; /* done, their end to try again (the completion thread's) */
	const char *hold; /* CFSD_TEST_HOLD_COMPLETIONS */
	struct dev_direct_slot slots[SLOTS];
};

int cfsd_request_buffer(void **region, char **mem, size_t *size)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	*size = 256 * page + page;
	if (posix_memalign(region, page, *size + page))
		return -ENOMEM;
	*mem = (char *)*region + page - CFSD_WRITE_DATA_AT;
	return 0;
}

/* A free slot with its buffer, or NULL when SLOTS are in flight or the memory is short;
 * *alone if neither this request nor the one before found another in flight. */
static struct dev_direct_slot *slot_get(struct dev_direct *dd, bool *alone)
{
	pthread_mutex_lock(&dd->lock);
	struct dev_direct_slot *s = dd->free;
	if (s) {
		dd->free = s->next_free;
	} else if (dd->nslots < SLOTS && !dd->stopping) {
		s = &dd->slots[dd->nslots];
		size_t size;
		if (cfsd_request_buffer(&s->region, &s->mem, &size))
			s = NULL;
		else
			s->dd = dd, dd->nslots++;
	}
	if (s) {
		bool none = !dd->inflight++;
		*alone = none && dd->last_found_none;
		dd->last_found_none = none;
	}
	pthread_mutex_unlock(&dd->lock);
	return s;
}

static void slot_put(struct dev_direct_slot *s)
{
	struct dev_direct *dd = s->dd;
	pthread_mutex_lock(&dd->lock);
	s->next_free = dd->free;
	dd->free = s;
	if (!--dd->inflight)
		pthread_cond_broadcast(&dd->idle);
	pthread_mutex_unlock(&dd->lock);
}

/* The end of s let its locks go: its answer is written. */
static void answer(struct dev_direct_slot *s, int64_t n)
{
	struct fuse_out_header out = {.unique = s->unique};
	struct fuse_write_out written = {.size = n > 0 ? (uint32_t)n : 0};
	struct iovec iov[2] = {{&out, sizeof out}};
	int count = 1;
	if (n < 0)
		out.error = (int32_t)n;
	else if (s->io.write)
		iov[count++] = (struct iovec){&written, sizeof written};
	else if (n > 0)
		iov[count++] = (struct iovec){s->mem + CFSD_WRITE_DATA_AT, (size_t)n};
	out.len = (uint32_t)(sizeof out + (count > 1 ? iov[1].iov_len : 0));
	/* ENOENT: the kernel gave up on the request (interrupted); ENODEV: unmounted */
	if (writev(s->dd->fd, iov, count) < 0 && errno != ENOENT && errno != ENODEV)
		fprintf(stderr, "cfsd: answer to direct request %llu: %s\n",
			(unsigned long long)s->unique, strerror(errno));
	__atomic_add_fetch(&s->dd->answered, 1, __ATOMIC_RELAXED);
	slot_put(s);
}

/* What one piece of s moved: bytes, or -errno. */
static void record(struct dev_direct_slot *s, long res)
{
	int none = 0;
	if (res < 0)
		__atomic_compare_exchange_n(&s->error, &none, (int)res, false, __ATOMIC_RELEASE,
					    __ATOMIC_RELAXED);
	else
		__atomic_add_fetch(&s->bytes, (uint64_t)res, __ATOMIC_RELEASE);
}

/* Every piece of s is done: its locks go and its answer is written.  The completion thread
 * (in_completer) does not wait for the filesystem's lock: its other requests' ends would wait
 * meanwhile, and a grow that holds it waits for them.  Such an end is tried again later. */
static void finish(struct dev_direct_slot *s, bool in_completer)
{
	int64_t n;
	if (cfs_direct_io_end(&s->io, __atomic_load_n(&s->error, __ATOMIC_ACQUIRE),
			      __atomic_load_n(&s->bytes, __ATOMIC_ACQUIRE), !in_completer, &n)) {
		answer(s, n);
	} else {
		s->next_later = s->dd->later;
		s->dd->later = s;
	}
}

/* The completion thread: the ends put off, tried again; false if some still are. */
static bool finish_later(struct dev_direct *dd)
{
	struct dev_direct_slot *s = dd->later;
	dd->later = NULL;
	while (s) {
		struct dev_direct_slot *next = s->next_later;
		finish(s, true);
		s = next;
	}
	return !dd->later;
}

/* count more of s's pending are done; the last answers. */
static void release(struct dev_direct_slot *s, unsigned count, bool in_completer)
{
	if (!__atomic_sub_fetch(&s->pending, count, __ATOMIC_ACQ_REL))
		finish(s, in_completer);
}

static void *completer_main(void *arg)
{
	struct dev_direct *dd = arg;
	struct io_event events[REAP_MAX];
	bool all_ended = true;
	for (;;) {
		/* The timeout lets a stop end the wait when nothing is in flight, and ends it
		 * soon while ends are put off (their glocks held, their answers not sent). */
		struct timespec tick = {0, (all_ended ? 100 : 1) * 1000 * 1000};
		int n = io_getevents(dd->aio, 1, REAP_MAX, events, &tick);
		if (n < 0 && n != -EINTR) {
			fprintf(stderr, "cfsd: direct I/O completions: %s\n", strerror(-n));
			break;
		}
		/* Test hook (test_cfs_grow_direct.sh): two completions or more reaped at once are
		 * held, their requests still in flight. */
		if (n >= 2)
			cfs_test_gate(dd->hold);
		for (int i = 0; i < n; i++) {
			struct dev_direct_slot *s = events[i].data;
			long res = (long)events[i].res;
			if (res < 0 || (unsigned long)res < events[i].obj->u.c.nbytes)
				cfs_direct_io_failed(&s->io, (unsigned)(events[i].obj - s->iocbs),
						     res < 0 ? (int)res : -EIO);
			record(s, res);
			release(s, 1, true);
		}
		all_ended = finish_later(dd);
		pthread_mutex_lock(&dd->lock);
		bool done = dd->stopping && !dd->inflight;
		pthread_mutex_unlock(&dd->lock);
		if (done)
			break;
	}
	return NULL;
}

void dev_direct_run_here(struct dev_direct_slot *s)
{
	uint64_t moved;
	int rc = cfs_direct_io_now(&s->io, s->mem + CFSD_WRITE_DATA_AT, &moved);
	record(s, rc ? rc : (long)moved);
	release(s, s->io.n + 1, false);
}

static void submit(struct dev_direct_slot *s)
{
	struct iocb *list[CFS_DIRECT_IO_PIECES];
	for (unsigned i = 0; i < s->io.n; i++) {
		const struct cfs_lun_io *piece = &s->io.io[i];
		char *at = s->mem + CFSD_WRITE_DATA_AT + piece->buf_offset;
		if (s->io.write)
			io_prep_pwrite(&s->iocbs[i], piece->fd, at, piece->len, (long long)piece->offset);
		else
			io_prep_pread(&s->iocbs[i], piece->fd, at, piece->len, (long long)piece->offset);
		s->iocbs[i].data = s;
		list[i] = &s->iocbs[i];
	}
	unsigned sent = 0;
	int rc = cfs_direct_io_may_submit(&s->io);
	if (rc) {
		record(s, rc);
		release(s, s->io.n + 1, false);
		return;
	}
	while (sent < s->io.n) {
		int n = io_submit(s->dd->aio, (long)(s->io.n - sent), list + sent);
		if (n == -EINTR || n == -EAGAIN)
			continue;
		if (n <= 0) { /* the rest never go: they count as failed */
			record(s, n < 0 ? n : -EIO);
			release(s, s->io.n - sent, false);
			break;
		}
		sent += (unsigned)n;
	}
	release(s, 1, false); /* the submitter's own count */
}

/* The bytes a READ or WRITE request of len bytes at in moves, or 0 if it is not one this
 * path takes. */
static uint32_t direct_size(const struct fuse_in_header *in, size_t len)
{
	if (len < CFSD_WRITE_DATA_AT || in->len != len)
		return 0;
	uint32_t size = 0;
	if (in->opcode == FUSE_READ)
		size = ((const struct fuse_read_in *)(in + 1))->size;
	else if (in->opcode == FUSE_WRITE)
		size = ((const struct fuse_write_in *)(in + 1))->size;
	if (in->opcode == FUSE_WRITE && len - CFSD_WRITE_DATA_AT < size)
		return 0;
	return size <= ASYNC_MAX ? size : 0;
}

bool dev_direct_take(struct dev_direct *dd, void **region, void **mem, size_t len,
		     struct dev_direct_slot **here)
{
	*here = NULL;
	const struct fuse_in_header *in = (const void *)*mem;
	if (!dd || !direct_size(in, len))
		return false;
	bool alone;
	struct dev_direct_slot *s = slot_get(dd, &alone);
	if (!s)
		return false;
	bool write = in->opcode == FUSE_WRITE;
	char *payload = (write ? (char *)*mem : s->mem) + CFSD_WRITE_DATA_AT;
	if (dd->data.begin(dd->data.arg, in, in + 1, payload, dd->room, true, &s->io)) {
		slot_put(s);
		return false;
	}
	s->unique = in->unique;
	if (write) { /* the data stays in this buffer; the worker reads into the slot's */
		void *kept_region = *region, *kept_mem = *mem;
		*region = s->region, *mem = s->mem;
		s->region = kept_region, s->mem = kept_mem;
	}
	s->error = 0;
	s->bytes = 0;
	s->pending = s->io.n + 1;
	if (s->io.flush || alone)
		*here = s;
	else
		submit(s);
	return true;
}

int dev_direct_start(struct fuse_session *se, const struct fuse_uring_data_path *data,
		     struct dev_direct **out)
{
	*out = NULL;
	struct dev_direct *dd = calloc(1, sizeof *dd);
	if (!dd)
		return -ENOMEM;
	dd->fd = fuse_session_fd(se);
	dd->data = *data;
	dd->room = 256 * (size_t)sysconf(_SC_PAGESIZE);
	dd->hold = getenv("CFSD_TEST_HOLD_COMPLETIONS");
	pthread_mutex_init(&dd->lock, NULL);
	pthread_cond_init(&dd->idle, NULL);
	int rc = io_setup(SLOTS * CFS_DIRECT_IO_PIECES, &dd->aio);
	if (!rc) {
		rc = -pthread_create(&dd->completer, NULL, completer_main, dd);
		if (rc)
			io_destroy(dd->aio);
	}
	if (rc) {
		pthread_cond_destroy(&dd->idle);
		pthread_mutex_destroy(&dd->lock);
		free(dd);
		return rc;
	}
	*out = dd;
	return 0;
}

void dev_direct_stop(struct dev_direct *dd)
{
	if (!dd)
		return;
	pthread_mutex_lock(&dd->lock);
	dd->stopping = true;
	while (dd->inflight)
		pthread_cond_wait(&dd->idle, &dd->lock);
	pthread_mutex_unlock(&dd->lock);
	pthread_join(dd->completer, NULL);
	io_destroy(dd->aio);
	for (unsigned i = 0; i < dd->nslots; i++)
		free(dd->slots[i].region);
	pthread_cond_destroy(&dd->idle);
	pthread_mutex_destroy(&dd->lock);
	free(dd);
}

uint64_t dev_direct_answered(const struct dev_direct *dd)
{
	return dd ? __atomic_load_n(&dd->answered, __ATOMIC_RELAXED) : 0;
}
