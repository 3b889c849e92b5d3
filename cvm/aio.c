/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Asynchronous volume I/O with libaio.  A request is mapped to LUN pieces; each piece is one
 * iocb; the request completes (its callback runs, from cvm_aio_poll) when its last piece does.
 * Pieces the kernel cannot take yet (io_submit EAGAIN, or the context full) wait in a queue
 * that every poll resubmits, so one large request never needs more iocb slots than the
 * context has.
 *
 * Every io_setup counts against the machine's fs.aio-max-nr (65,536 by default), shared by
 * every process: a database node runs hundreds of processes, each with a context.  So a
 * context starts small and grows, doubling, while pieces queue for want of room in it; the
 * old one drains and goes.  A growth the limit refuses leaves the process with the context
 * it has (its pieces queue a little longer); only the first, smallest one must be had. */
#include "internal.h"

#include <errno.h>
#include <libaio.h>
#include <stdlib.h>
#include <string.h>

#define INLINE_IOCBS 4
#define EVENTS_PER_REQUEST 4
#define FIRST_EVENTS 16u
#define GROW_RETRY 256u /* fills of a context between growths the limit refused */

struct aio_req {
	cvm_aio_done_fn done;
	void *arg;
	enum cvm_op op;
	void *buf;
	uint64_t len, offset;
	bool entered; /* counted in by the restripe gate: left when it completes */
	int64_t error;
	uint32_t pending;
	struct iocb inline_cbs[INLINE_IOCBS];
	struct iocb *cbs;
	struct aio_req *next; /* free list, or list of requests failed at submit */
	struct aio_req *all;  /* every request made, to free them */
};

/* One kernel context and the pieces submitted to it and not yet reaped. */
struct kernel_ctx {
	io_context_t ctx;
	unsigned nevents, pieces;
};

struct cvm_aio {
	struct cvm_volume *vol;
	struct kernel_ctx cur, old; /* old: a smaller one draining after a growth */
	unsigned depth, inflight;   /* requests */
	unsigned max_events, refused_fills;
	struct io_event *events;    /* room for cur.nevents */
	struct aio_req *free, *failed, *all;
	struct aio_req *held, **held_tail; /* turned away by a restripe's batch in motion */
	unsigned made;              /* requests allocated, at most depth */
	struct iocb **queue;        /* pieces waiting for io_submit */
	size_t qhead, qlen, qcap;
};

static int kernel_ctx_open(struct kernel_ctx *k, unsigned nevents)
{
	*k = (struct kernel_ctx){.nevents = nevents};
	int rc = io_setup((int)nevents, &k->ctx);
	return rc < 0 ? rc : 0;
}

int cvm_aio_create(struct cvm_volume *vol, unsigned depth, struct cvm_aio **out)
{
	if (depth == 0 || depth > 4096)
		return -EINVAL;
	struct cvm_aio *a = calloc(1, sizeof *a);
	if (!a)
		return -ENOMEM;
	a->vol = vol;
	a->held_tail = &a->held;
	a->depth = depth;
	a->max_events = depth * EVENTS_PER_REQUEST;
	unsigned first = a->max_events < FIRST_EVENTS ? a->max_events : FIRST_EVENTS;
	a->events = calloc(first, sizeof *a->events);
	a->qcap = first;
	a->queue = calloc(a->qcap, sizeof *a->queue);
	int rc = (a->events && a->queue) ? kernel_ctx_open(&a->cur, first) : -ENOMEM;
	if (rc < 0) {
		if (rc == -EAGAIN)
			cvm_set_error("no asynchronous I/O context of %u events is left: the "
				      "machine's limit fs.aio-max-nr is used up (see fs.aio-nr); "
				      "raise it, e.g. sysctl -w fs.aio-max-nr=1048576", first);
		else
			cvm_set_error("io_setup of %u events: %s", first, strerror(-rc));
		free(a->events);
		free(a->queue);
		free(a);
		return rc;
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
	io_destroy(aio->cur.ctx);
	if (aio->old.ctx)
		io_destroy(aio->old.ctx);
	while (aio->all) {
		struct aio_req *r = aio->all;
		aio->all = r->all;
		free(r);
	}
	free(aio->events);
	free(aio->queue);
	free(aio);
}

unsigned cvm_aio_inflight(const struct cvm_aio *aio)
{
	return aio->inflight;
}

unsigned cvm_aio_context_events(const struct cvm_aio *aio)
{
	return aio->cur.nevents;
}

/* The context is full and pieces wait: a context twice as big takes the next ones, the
 * current one drains into the events of the next polls.  Never two draining at once. */
static void grow(struct cvm_aio *a)
{
	if (a->old.ctx || a->cur.nevents >= a->max_events)
		return;
	if (a->refused_fills && ++a->refused_fills % GROW_RETRY)
		return;
	unsigned n = a->cur.nevents * 2 < a->max_events ? a->cur.nevents * 2 : a->max_events;
	struct io_event *ev = realloc(a->events, n * sizeof *ev);
	if (!ev)
		return;
	a->events = ev;
	struct kernel_ctx k;
	if (kernel_ctx_open(&k, n)) {
		a->refused_fills = 1; /* fs.aio-max-nr: go on with what we have */
		return;
	}
	a->refused_fills = 0;
	a->old = a->cur;
	a->cur = k;
	if (!a->old.pieces) {
		io_destroy(a->old.ctx);
		a->old = (struct kernel_ctx){0};
	}
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
		unsigned room = a->cur.nevents - a->cur.pieces;
		if (room == 0)
			grow(a);
		room = a->cur.nevents - a->cur.pieces;
		if (room == 0)
			return;
		long batch = (long)(a->qlen < room ? a->qlen : room);
		int n = io_submit(a->cur.ctx, batch, a->queue + a->qhead);
		if (n == -EAGAIN || n == -EINTR || n == 0)
			return;
		if (n < 0) { /* the first iocb was refused: fail it alone and go on */
			struct iocb *cb = a->queue[a->qhead];
			a->qhead++;
			a->qlen--;
			piece_failed(a, cb->data, n);
			continue;
		}
		a->cur.pieces += (unsigned)n;
		a->qhead += (size_t)n;
		a->qlen -= (size_t)n;
	}
	a->qhead = 0;
}

/* Requests are made as the depth in use needs them, not all at once: memory follows use. */
static int alloc_req(struct cvm_aio *a)
{
	if (a->made == a->depth)
		return -EAGAIN;
	struct aio_req *r = calloc(1, sizeof *r);
	if (!r)
		return -ENOMEM;
	r->all = a->all;
	a->all = r;
	r->next = a->free;
	a->free = r;
	a->made++;
	return 0;
}

/* The request's LUN pieces, queued for the kernel. */
static int queue_pieces(struct cvm_aio *aio, struct aio_req *r)
{
	struct cvm_volume *v = aio->vol;
	struct cvm_volume_map_iter it;
	struct cvm_piece p;
	if (cvm_volume_map_begin(&it, v, r->offset, r->len))
		return -ERANGE;
	uint32_t npieces = 0;
	for (struct cvm_volume_map_iter count = it; cvm_volume_map_next(&count, &p);)
		npieces++;
	r->cbs = npieces <= INLINE_IOCBS ? r->inline_cbs : calloc(npieces, sizeof *r->cbs);
	if (!r->cbs)
		return -ENOMEM;
	r->pending = npieces;
	for (uint32_t i = 0; cvm_volume_map_next(&it, &p); i++) {
		struct iocb *cb = &r->cbs[i];
		int fd = cvm_volume_lun_fd(v, p.lun);
		void *b = (uint8_t *)r->buf + p.buf_offset;
		long long at = (long long)p.dev_offset;
		if (r->op == CVM_READ)
			io_prep_pread(cb, fd, b, p.len, at);
		else
			io_prep_pwrite(cb, fd, b, p.len, at);
		cb->data = r;
		if (queue_push(aio, cb))
			piece_failed(aio, r, -ENOMEM);
	}
	return 0;
}

/* Into the gate, then to the kernel; else held until the batch in its way has moved. */
static void start(struct cvm_aio *aio, struct aio_req *r)
{
	int rc = cvm_volume_enter(aio->vol, r->offset, r->len, false);
	if (rc == -EBUSY) {
		r->next = NULL;
		*aio->held_tail = r;
		aio->held_tail = &r->next;
		return;
	}
	r->entered = rc == 0;
	if (!rc)
		rc = queue_pieces(aio, r);
	if (rc) { /* a failed request still completes, from the next poll */
		r->error = rc;
		r->pending = 1;
		piece_failed(aio, r, rc);
	}
}

static void start_held(struct cvm_aio *aio)
{
	struct aio_req *r = aio->held;
	aio->held = NULL;
	aio->held_tail = &aio->held;
	while (r) {
		struct aio_req *next = r->next;
		start(aio, r);
		r = next;
	}
}

int cvm_aio_submit(struct cvm_aio *aio, enum cvm_op op, void *buf, uint64_t len,
		   uint64_t offset, cvm_aio_done_fn done, void *arg)
{
	struct cvm_volume *v = aio->vol;
	if ((offset | len | (uintptr_t)buf) % CVM_IO_ALIGN || len == 0)
		return -EINVAL;
	if (cvm_volume_fenced(v))
		return -EIO; /* a write gate is asked in submit_queue, just before the kernel */
	if (offset > cvm_volume_size(v) || len > cvm_volume_size(v) - offset)
		return -ERANGE;
	int rc = aio->free ? 0 : alloc_req(aio);
	if (rc)
		return rc;
	struct aio_req *r = aio->free;
	aio->free = r->next;
	*r = (struct aio_req){.done = done, .arg = arg, .op = op, .buf = buf, .len = len,
			      .offset = offset, .all = r->all};
	aio->inflight++;
	start(aio, r);
	submit_queue(aio);
	return 0;
}

static void complete(struct cvm_aio *a, struct aio_req *r)
{
	if (r->cbs && r->cbs != r->inline_cbs)
		free(r->cbs);
	if (r->entered)
		cvm_volume_leave(a->vol, r->offset, r->len);
	cvm_aio_done_fn done = r->done;
	void *arg = r->arg;
	int64_t result = r->error ? r->error : (int64_t)r->len;
	r->next = a->free;
	a->free = r;
	a->inflight--;
	done(arg, result);
}

/* Reap what k has done (waiting for one piece if want), up to its size. */
static int reap(struct cvm_aio *a, struct kernel_ctx *k, long want,
		const struct timespec *timeout, int *completed)
{
	struct timespec ts = timeout ? *timeout : (struct timespec){0};
	int n;
	do
		n = io_getevents(k->ctx, want, (long)k->nevents, a->events,
				 want && !timeout ? NULL : &ts);
	while (n == -EINTR);
	if (n < 0)
		return n;
	for (int i = 0; i < n; i++) {
		struct io_event *ev = &a->events[i];
		struct aio_req *r = ev->data;
		k->pieces--;
		long long res = (long long)ev->res;
		if (res != (long long)ev->obj->u.c.nbytes) {
			r->error = r->error ? r->error : res < 0 ? res : -EIO;
			cvm_volume_io_failed_fd(a->vol, ev->obj->aio_fildes,
						ev->obj->aio_lio_opcode == IO_CMD_PWRITE ? "write" : "read",
						(uint64_t)ev->obj->u.c.offset, ev->obj->u.c.nbytes,
						res < 0 ? (int)res : -EIO);
		}
		if (ev->obj->aio_lio_opcode == IO_CMD_PWRITE)
			cvm_volume_written_fd(a->vol, ev->obj->aio_fildes);
		if (--r->pending == 0) {
			complete(a, r);
			(*completed)++;
		}
	}
	if (k == &a->old && !k->pieces) {
		io_destroy(k->ctx);
		*k = (struct kernel_ctx){0};
	}
	return n;
}

static void complete_failed(struct cvm_aio *aio, int *completed)
{
	while (aio->failed) {
		struct aio_req *r = aio->failed;
		aio->failed = r->next;
		complete(aio, r);
		(*completed)++;
	}
}

static unsigned timeout_ms(const struct timespec *t)
{
	return t ? (unsigned)(t->tv_sec * 1000 + t->tv_nsec / 1000000) : 50;
}

int cvm_aio_poll(struct cvm_aio *aio, unsigned min, const struct timespec *timeout)
{
	int completed = 0;
	for (;;) {
		uint32_t seq = cvm_volume_gate_seq(aio->vol);
		if (aio->held) {
			start_held(aio);
			submit_queue(aio);
		}
		complete_failed(aio, &completed);
		if (aio->cur.pieces + aio->old.pieces > 0) {
			/* Wait for pieces until `min` whole requests are done, or the timeout
			 * passes: on a context draining after a growth first (its pieces are all
			 * in the kernel and finish soon), on the current one once that is gone. */
			struct kernel_ctx *k = aio->old.pieces ? &aio->old : &aio->cur;
			int rc = reap(aio, k, completed < (int)min ? 1 : 0, timeout, &completed);
			if (rc < 0)
				return rc;
			submit_queue(aio);
			if (rc == 0 || completed >= (int)min)
				break;
			continue;
		}
		if (!aio->held || completed >= (int)min || timeout_ms(timeout) == 0)
			break;
		/* Only requests a restripe's batch holds back: wait for it to move on. */
		cvm_volume_gate_wait(aio->vol, seq, timeout_ms(timeout));
		if (timeout)
			timeout = &(struct timespec){0}; /* one more look, then back to the caller */
	}
	return completed;
}
