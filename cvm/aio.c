/* Asynchronous volume I/O with libaio.  A request is mapped to LUN pieces; each piece is one
 * iocb; the request completes (its callback runs, from cvm_aio_poll) when its last piece does.
 * Pieces the kernel cannot take yet (io_submit EAGAIN) wait in a queue that every poll
 * resubmits, so one large request never needs more iocb slots than the context has. */
#include "internal.h"

#include <errno.h>
#include <libaio.h>
#include <stdlib.h>
#include <string.h>

#define INLINE_IOCBS 4
#define EVENTS_PER_REQUEST 4

struct aio_req {
	cvm_aio_done_fn done;
	void *arg;
	uint64_t len;
	int64_t error;
	uint32_t pending;
	struct iocb inline_cbs[INLINE_IOCBS];
	struct iocb *cbs;
	struct aio_req *next; /* free list, or list of requests failed at submit */
};

struct cvm_aio {
	struct cvm_volume *vol;
	io_context_t ctx;
	unsigned depth, inflight;  /* requests */
	unsigned kernel_pieces;    /* iocbs submitted and not yet reaped */
	unsigned nevents;
	struct io_event *events;
	struct aio_req *reqs, *free, *failed;
	struct iocb **queue;       /* pieces waiting for io_submit */
	size_t qhead, qlen, qcap;
};

int cvm_aio_create(struct cvm_volume *vol, unsigned depth, struct cvm_aio **out)
{
	if (depth == 0 || depth > 4096)
		return -EINVAL;
	struct cvm_aio *a = calloc(1, sizeof *a);
	if (!a)
		return -ENOMEM;
	a->vol = vol;
	a->depth = depth;
	a->nevents = depth * EVENTS_PER_REQUEST;
	a->events = calloc(a->nevents, sizeof *a->events);
	a->reqs = calloc(depth, sizeof *a->reqs);
	a->qcap = a->nevents;
	a->queue = calloc(a->qcap, sizeof *a->queue);
	int rc = (a->events && a->reqs && a->queue) ? io_setup((int)a->nevents, &a->ctx) : -ENOMEM;
	if (rc < 0) {
		free(a->events);
		free(a->reqs);
		free(a->queue);
		free(a);
		return rc;
	}
	for (unsigned i = 0; i < depth; i++) {
		a->reqs[i].next = a->free;
		a->free = &a->reqs[i];
	}
	*out = a;
	return 0;
}

void cvm_aio_destroy(struct cvm_aio *aio)
{
	if (!aio)
		return;
	/* Requests still in the kernel must finish before their buffers may be reused. */
	while (aio->inflight)
		if (cvm_aio_poll(aio, 1, NULL) < 0)
			break;
	io_destroy(aio->ctx);
	free(aio->events);
	free(aio->reqs);
	free(aio->queue);
	free(aio);
}

unsigned cvm_aio_inflight(const struct cvm_aio *aio)
{
	return aio->inflight;
}

static int queue_push(struct cvm_aio *a, struct iocb *cb)
{
	if (a->qhead + a->qlen == a->qcap) {
		if (a->qhead) {
			memmove(a->queue, a->queue + a->qhead, a->qlen * sizeof *a->queue);
			a->qhead = 0;
		} else {
			struct iocb **q = realloc(a->queue, a->qcap * 2 * sizeof *q);
			if (!q)
				return -ENOMEM;
			a->queue = q;
			a->qcap *= 2;
		}
	}
	a->queue[a->qhead + a->qlen++] = cb;
	return 0;
}

static void piece_failed(struct cvm_aio *a, struct aio_req *r, int64_t err)
{
	if (r->error == 0)
		r->error = err;
	if (--r->pending == 0) {
		r->next = a->failed;
		a->failed = r;
	}
}

static void submit_queue(struct cvm_aio *a)
{
	/* Queued before a fence, or now behind a write gate that says no: not sent. */
	int gate = a->qlen ? cvm_volume_may_write(a->vol) : 0;
	while (a->qlen && gate) {
		piece_failed(a, a->queue[a->qhead]->data, gate);
		a->qhead++;
		a->qlen--;
	}
	while (a->qlen) {
		unsigned room = a->nevents - a->kernel_pieces;
		if (room == 0)
			return;
		long batch = (long)(a->qlen < room ? a->qlen : room);
		int n = io_submit(a->ctx, batch, a->queue + a->qhead);
		if (n == -EAGAIN || n == -EINTR || n == 0)
			return;
		if (n < 0) { /* the first iocb was refused: fail it alone and go on */
			struct iocb *cb = a->queue[a->qhead];
			a->qhead++;
			a->qlen--;
			piece_failed(a, cb->data, n);
			continue;
		}
		a->kernel_pieces += (unsigned)n;
		a->qhead += (size_t)n;
		a->qlen -= (size_t)n;
	}
	a->qhead = 0;
}

int cvm_aio_submit(struct cvm_aio *aio, enum cvm_op op, void *buf, uint64_t len,
		   uint64_t offset, cvm_aio_done_fn done, void *arg)
{
	struct cvm_volume *v = aio->vol;
	const struct cvm_config *cfg = cvm_volume_config(v);
	if ((offset | len | (uintptr_t)buf) % CVM_IO_ALIGN || len == 0)
		return -EINVAL;
	if (cvm_volume_fenced(v))
		return -EIO; /* a write gate is asked in submit_queue, just before the kernel */
	struct cvm_map_iter it;
	struct cvm_piece p;
	if (cvm_map_begin(&it, cfg, offset, len))
		return -ERANGE;
	if (!aio->free)
		return -EAGAIN;

	uint32_t npieces = 0;
	for (struct cvm_map_iter count = it; cvm_map_next(&count, &p);)
		npieces++;
	struct aio_req *r = aio->free;
	r->cbs = npieces <= INLINE_IOCBS ? r->inline_cbs : calloc(npieces, sizeof *r->cbs);
	if (!r->cbs)
		return -ENOMEM;
	aio->free = r->next;
	*r = (struct aio_req){.done = done, .arg = arg, .len = len, .pending = npieces,
			      .cbs = r->cbs};
	aio->inflight++;
	for (uint32_t i = 0; cvm_map_next(&it, &p); i++) {
		struct iocb *cb = &r->cbs[i];
		int fd = cvm_volume_lun_fd(v, p.lun);
		void *b = (uint8_t *)buf + p.buf_offset;
		long long at = (long long)(CVM_META_BYTES + p.lun_offset);
		if (op == CVM_READ)
			io_prep_pread(cb, fd, b, p.len, at);
		else
			io_prep_pwrite(cb, fd, b, p.len, at);
		cb->data = r;
		if (queue_push(aio, cb))
			piece_failed(aio, r, -ENOMEM);
	}
	submit_queue(aio);
	return 0;
}

static void complete(struct cvm_aio *a, struct aio_req *r)
{
	if (r->cbs != r->inline_cbs)
		free(r->cbs);
	cvm_aio_done_fn done = r->done;
	void *arg = r->arg;
	int64_t result = r->error ? r->error : (int64_t)r->len;
	r->next = a->free;
	a->free = r;
	a->inflight--;
	done(arg, result);
}

int cvm_aio_poll(struct cvm_aio *aio, unsigned min, const struct timespec *timeout)
{
	int completed = 0;
	while (aio->failed) {
		struct aio_req *r = aio->failed;
		aio->failed = r->next;
		complete(aio, r);
		completed++;
	}
	while (aio->kernel_pieces > 0) {
		/* Wait for pieces until `min` whole requests are done, or the timeout passes. */
		long want = (completed < (int)min) ? 1 : 0;
		struct timespec ts = timeout ? *timeout : (struct timespec){0};
		int n = io_getevents(aio->ctx, want, (long)aio->nevents, aio->events,
				     want && !timeout ? NULL : &ts);
		if (n == -EINTR)
			continue;
		if (n < 0)
			return n;
		for (int i = 0; i < n; i++) {
			struct io_event *ev = &aio->events[i];
			struct aio_req *r = ev->data;
			aio->kernel_pieces--;
			long long res = (long long)ev->res;
			if (res != (long long)ev->obj->u.c.nbytes && r->error == 0)
				r->error = res < 0 ? res : -EIO;
			if (ev->obj->aio_lio_opcode == IO_CMD_PWRITE)
				cvm_volume_written_fd(aio->vol, ev->obj->aio_fildes);
			if (--r->pending == 0) {
				complete(aio, r);
				completed++;
			}
		}
		submit_queue(aio);
		if (n == 0 || completed >= (int)min)
			break;
	}
	return completed;
}
