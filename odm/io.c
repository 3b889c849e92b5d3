/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* odm_io: requests split at extent boundaries, each piece a libaio request on the volume
 * (libcvm splits it again at stripe boundaries), completions counted in the statistics.
 * A call that submits one request and waits for it (a foreground's single-block read, the
 * log writer's write) does it with pread/pwrite instead: one system call, as a database's
 * own synchronous I/O would be, and no AIO context needed.
 *
 * A request's life: submitted (in flight) -> completed (on the done list) -> handed back by
 * a wait or a reap (idle again).  The file's inflight count is what a revoke waits for. */
#include "odm/internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { IOC_IDLE, IOC_INFLIGHT, IOC_DONE };
#define IOC_SYNC_MARK 2u /* in wait[] of the call that submits it */

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void to_done(struct odm_ioc *ioc)
{
	ioc->_state = IOC_DONE;
	ioc->_next = NULL;
	if (odm_proc.done_tail)
		odm_proc.done_tail->_next = ioc;
	else
		odm_proc.done_head = ioc;
	odm_proc.done_tail = ioc;
}

static void take_done(struct odm_ioc *ioc)
{
	struct odm_ioc *prev = NULL;
	for (struct odm_ioc *p = odm_proc.done_head; p; prev = p, p = p->_next)
		if (p == ioc) {
			if (prev)
				prev->_next = p->_next;
			else
				odm_proc.done_head = p->_next;
			if (odm_proc.done_tail == p)
				odm_proc.done_tail = prev;
			break;
		}
	ioc->_state = IOC_IDLE;
}

static void fail_now(struct odm_ioc *ioc, int error)
{
	ioc->status = error;
	ioc->elapsed_us = 0;
	to_done(ioc);
}

/* The request no longer counts in flight on f; the last one out acknowledges a revoke. */
static void unpin_file(struct odm_file *f)
{
	pthread_mutex_lock(&f->lock);
	bool ack = --f->inflight == 0 && f->ack_due;
	if (ack)
		f->ack_due = false;
	pthread_mutex_unlock(&f->lock);
	if (ack)
		odm_send_revoked(f->m, f->ino);
}

static void complete(struct odm_ioc *ioc)
{
	ioc->elapsed_us = (now_ns() - ioc->_start_ns) / 1000;
	ioc->status = ioc->_error;
	if (!ioc->_error)
		odm_stats_count(odm_proc.slot, &odm_proc.seg->files[ioc->_file],
				ioc->op == ODM_WRITE ? ODM_DIR_WRITE : ODM_DIR_READ,
				ioc->_sync ? ODM_MODE_SYNC : ODM_MODE_ASYNC, ioc->size,
				ioc->elapsed_us);
	struct odm_file *f = odm_file_at(ioc->_file, false); /* pinned: it has one */
	if (ioc->_error)
		odm_tell_lun_errors(f->m);
	unpin_file(f);
	odm_proc.inflight--;
	to_done(ioc);
}

static void piece_done(void *arg, int64_t result)
{
	struct odm_ioc *ioc = arg;
	if (result < 0 && !ioc->_error)
		ioc->_error = (int)result;
	if (--ioc->_pieces == 0)
		complete(ioc);
}

int odm_io_poll(struct odm_mount *m, bool block, int64_t timeout_us)
{
	if (!m || !m->aio || !cvm_aio_inflight(m->aio))
		return 0;
	struct timespec ts = {(time_t)(timeout_us / 1000000), (long)(timeout_us % 1000000) * 1000};
	return cvm_aio_poll(m->aio, block ? 1 : 0, block && timeout_us < 0 ? NULL : &ts);
}

void odm_io_reap(void)
{
	for (struct odm_mount *m = odm_proc.mounts; m; m = m->next)
		odm_io_poll(m, false, 0);
}

/* Index of the extent holding off (the map covers [0, size) without gaps). */
static size_t find_extent(const struct odm_file *f, uint64_t off)
{
	size_t lo = 0, hi = f->next;
	while (hi - lo > 1) {
		size_t mid = (lo + hi) / 2;
		if (f->ext[mid].file_off <= off)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

/* The file of a request, mapped, with the request counted in flight on it. */
static int pin_file(struct odm_ioc *ioc, struct odm_file **out)
{
	struct odm_file *f;
	unsigned index;
	int rc = odm_file_of(ioc->fid, &f, &index);
	if (rc)
		return rc;
	if (f->gen != (uint32_t)(ioc->fid >> 32)) { /* another process identified it */
		odm_file_drop(f);
		f->gen = (uint32_t)(ioc->fid >> 32);
	}
	for (int tries = 0; tries < 8; tries++) {
		pthread_mutex_lock(&f->lock);
		bool mapped = f->mapped;
		if (mapped)
			f->inflight++;
		pthread_mutex_unlock(&f->lock);
		if (mapped) {
			ioc->_file = index;
			*out = f;
			return 0;
		}
		if ((rc = odm_file_remap(f, index)))
			return rc;
	}
	return -EAGAIN; /* revoked again and again: resizes storm on this file */
}

/* The piece of a request at file offset pos (left bytes to go) that extent *e holds: its
 * length and volume offset; *e moves on to the next extent. */
static uint64_t next_piece(const struct odm_file *f, size_t *e, uint64_t pos, uint64_t left,
			   uint64_t *vol_off)
{
	const OdmExtent *x = &f->ext[(*e)++];
	uint64_t in = pos - x->file_off;
	*vol_off = x->vol_off + in;
	return x->len - in < left ? x->len - in : left;
}

static int submit_pieces(struct odm_file *f, struct odm_ioc *ioc, uint64_t off)
{
	int rc = odm_mount_aio(f->m);
	enum cvm_op op = ioc->op == ODM_WRITE ? CVM_WRITE : CVM_READ;
	size_t e = find_extent(f, off);
	for (uint64_t done = 0, at, len; !rc && done < ioc->size; done += len) {
		len = next_piece(f, &e, off + done, ioc->size - done, &at);
		ioc->_pieces++;
		while ((rc = cvm_aio_submit(f->m->aio, op, (uint8_t *)ioc->buf + done, len, at,
					    piece_done, ioc)) == -EAGAIN)
			if ((rc = odm_io_poll(f->m, true, -1)) < 0)
				break;
		if (rc < 0)
			ioc->_pieces--;
	}
	return rc < 0 ? rc : 0;
}

/* The pieces one pread or pwrite each, done when this returns (the write gate is asked
 * before every write, as for an asynchronous one). */
static int sync_pieces(struct odm_file *f, struct odm_ioc *ioc, uint64_t off)
{
	int rc = 0;
	size_t e = find_extent(f, off);
	for (uint64_t done = 0, at, len; !rc && done < ioc->size; done += len) {
		len = next_piece(f, &e, off + done, ioc->size - done, &at);
		uint8_t *b = (uint8_t *)ioc->buf + done;
		rc = ioc->op == ODM_WRITE ? cvm_volume_write(f->m->vol, b, len, at)
					  : cvm_volume_read(f->m->vol, b, len, at);
	}
	return rc;
}

/* Start a request: asynchronously, or (now) done before this returns. */
static void submit_one(struct odm_ioc *ioc, bool now)
{
	ioc->_sync = ioc->_sync == IOC_SYNC_MARK;
	ioc->_error = 0;
	ioc->_pieces = 0;
	if ((ioc->op != ODM_READ && ioc->op != ODM_WRITE) || !ioc->size ||
	    ioc->size % ODM_ALIGN || (uintptr_t)ioc->buf % ODM_ALIGN) {
		fail_now(ioc, -EINVAL);
		return;
	}
	struct odm_file *f;
	int rc = pin_file(ioc, &f);
	if (rc) {
		fail_now(ioc, rc);
		return;
	}
	uint64_t off = ioc->block * f->block_size;
	if (ioc->block > UINT64_MAX / f->block_size || off > f->size || ioc->size > f->size - off) {
		unpin_file(f);
		fail_now(ioc, -ERANGE); /* database files are preallocated: never write past them */
		return;
	}
	ioc->status = ODM_PENDING;
	ioc->_state = IOC_INFLIGHT;
	ioc->_start_ns = now_ns();
	odm_proc.inflight++;
	ioc->_pieces = 1; /* held until every piece is submitted */
	if ((rc = now ? sync_pieces(f, ioc, off) : submit_pieces(f, ioc, off)))
		ioc->_error = rc;
	piece_done(ioc, 0);
}

static bool mount_busy(const struct odm_mount *m) { return m->aio && cvm_aio_inflight(m->aio); }

/* Run completions until done() or the deadline (-1: none).  false on timeout. */
static bool run_until(bool (*done)(void *), void *arg, int64_t deadline_ns)
{
	while (!done(arg)) {
		int busy = 0;
		for (struct odm_mount *m = odm_proc.mounts; m; m = m->next)
			busy += mount_busy(m);
		if (!busy)
			return done(arg);
		int64_t left = deadline_ns < 0 ? -1 : deadline_ns - (int64_t)now_ns();
		if (deadline_ns >= 0 && left <= 0) {
			for (struct odm_mount *m = odm_proc.mounts; m; m = m->next)
				odm_io_poll(m, false, 0);
			return done(arg);
		}
		int64_t slice_us = busy > 1 ? 1000 : left < 0 ? -1 : left / 1000;
		if (busy > 1 && left >= 0 && left / 1000 < slice_us)
			slice_us = left / 1000;
		for (struct odm_mount *m = odm_proc.mounts; m; m = m->next)
			if (mount_busy(m))
				odm_io_poll(m, true, slice_us);
	}
	return true;
}

struct wait_set {
	struct odm_ioc *const *v;
	unsigned n;
};

static bool all_done(void *arg)
{
	const struct wait_set *w = arg;
	for (unsigned i = 0; i < w->n; i++)
		if (w->v[i]->_state == IOC_INFLIGHT)
			return false;
	return true;
}

static bool any_done(void *arg)
{
	(void)arg;
	return odm_proc.done_head != NULL;
}

static int check_call(struct odm_ioc *const *submit, unsigned nsubmit, struct odm_ioc *const *wait,
		      unsigned nwait, struct odm_ioc **reaped, unsigned reap_max, unsigned *nreaped)
{
	if ((nsubmit && !submit) || (nwait && !wait) || (reap_max && (!reaped || !nreaped)))
		return -EINVAL;
	for (unsigned i = 0; i < nsubmit; i++)
		if (!submit[i] || submit[i]->_state == IOC_INFLIGHT)
			return -EINVAL; /* a request cannot be in flight twice */
	for (unsigned i = 0; i < nwait; i++)
		if (!wait[i])
			return -EINVAL;
	return 0;
}

int odm_io(struct odm_ioc *const *submit, unsigned nsubmit, struct odm_ioc *const *wait,
	   unsigned nwait, struct odm_ioc **reaped, unsigned reap_max, unsigned *nreaped,
	   int64_t timeout_us)
{
	if (!odm_ready())
		return -ENXIO;
	if (nreaped)
		*nreaped = 0;
	int rc = check_call(submit, nsubmit, wait, nwait, reaped, reap_max, nreaped);
	if (rc)
		return rc;
	int64_t deadline = timeout_us < 0 ? -1 : (int64_t)(now_ns() + (uint64_t)timeout_us * 1000);
	pthread_mutex_lock(&odm_proc.lock);
	for (unsigned i = 0; i < nwait; i++)
		if (wait[i]->_state != IOC_INFLIGHT)
			wait[i]->_sync = IOC_SYNC_MARK;
	/* One request, waited for in the same call: done with one system call. */
	bool now = nsubmit == 1 && nwait == 1 && submit[0] == wait[0];
	for (unsigned i = 0; i < nsubmit; i++)
		submit_one(submit[i], now);
	for (unsigned i = 0; i < nwait; i++)
		if (wait[i]->_sync == IOC_SYNC_MARK)
			wait[i]->_sync = 0;
	int result = nsubmit ? ODM_IO_POSTED : ODM_IO_NOTHING;
	if (nwait) {
		struct wait_set w = {wait, nwait};
		result = run_until(all_done, &w, deadline) ? ODM_IO_WAITED : ODM_IO_TIMEDOUT;
		for (unsigned i = 0; i < nwait; i++)
			if (wait[i]->_state == IOC_DONE)
				take_done(wait[i]);
	} else if (reap_max && !nsubmit && (odm_proc.inflight || odm_proc.done_head)) {
		result = run_until(any_done, NULL, deadline) ? ODM_IO_WAITED : ODM_IO_TIMEDOUT;
	}
	for (struct odm_mount *m = odm_proc.mounts; reap_max && m; m = m->next)
		odm_io_poll(m, false, 0); /* whatever else completed meanwhile */
	unsigned got = 0;
	while (reap_max && odm_proc.done_head && got < reap_max) {
		struct odm_ioc *ioc = odm_proc.done_head;
		take_done(ioc);
		reaped[got++] = ioc;
	}
	if (nreaped)
		*nreaped = got;
	pthread_mutex_unlock(&odm_proc.lock);
	return result;
}

int odm_cancel(struct odm_ioc *ioc)
{
	if (!odm_ready())
		return -ENXIO;
	if (!ioc)
		return -EINVAL;
	pthread_mutex_lock(&odm_proc.lock);
	int rc = 0;
	if (ioc->_state == IOC_INFLIGHT) {
		struct wait_set w = {&ioc, 1};
		run_until(all_done, &w, -1);
	} else if (ioc->_state != IOC_DONE && ioc->status == ODM_PENDING) {
		rc = -EINVAL;
	}
	pthread_mutex_unlock(&odm_proc.lock);
	return rc;
}

static bool none_inflight(void *arg)
{
	(void)arg;
	return odm_proc.inflight == 0;
}

int odm_io_drain_all(void)
{
	return run_until(none_inflight, NULL, -1) ? 0 : -EIO;
}
