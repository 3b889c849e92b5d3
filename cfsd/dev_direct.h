/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Direct reads and writes from /dev/fuse's workers sent to the LUNs asynchronously
 * (dev_direct.c): many in flight while the workers read the next requests. */
#ifndef CFSD_DEV_DIRECT_H
#define CFSD_DEV_DIRECT_H

#include <linux/fuse.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct dev_direct;
struct dev_direct_slot;
struct fuse_session;
struct fuse_uring_data_path;

/* Where a WRITE request's data starts in the buffer it is read into (protocol 7.9+). */
#define CFSD_WRITE_DATA_AT (sizeof(struct fuse_in_header) + sizeof(struct fuse_write_in))

/* A buffer for the largest request the kernel sends (256 pages of data and a page of
 * header) whose WRITE data starts on a page, for the LUNs' O_DIRECT: read requests into
 * *mem (*size bytes), free *region. */
int cfsd_request_buffer(void **region, char **mem, size_t *size);

/* Start the completion thread for session se's direct requests, mapped by data. */
int dev_direct_start(struct fuse_session *se, const struct fuse_uring_data_path *data,
		     struct dev_direct **out);
/* The request of len bytes a worker read into *mem (a cfsd_request_buffer): true if it is
 * taken and will be answered from here; a WRITE's buffer is then kept, and *region and *mem
 * are another buffer for the worker.  False: the worker answers it.  dd may be NULL.
 * A taken request either went to the LUNs (*here NULL) or is one the worker itself moves now
 * with dev_direct_run_here: an O_SYNC/O_DSYNC write (a redo log's writes come one at a time),
 * or a request of a run that each found none other in flight.  A hand-off to the completion
 * thread would only add a wake-up to each. */
bool dev_direct_take(struct dev_direct *dd, void **region, void **mem, size_t len,
		     struct dev_direct_slot **here);
/* Move (and flush, if asked) and answer a request dev_direct_take left in *here. */
void dev_direct_run_here(struct dev_direct_slot *here);
/* Wait for the requests in flight to be answered, then free (NULL: nothing). */
void dev_direct_stop(struct dev_direct *dd);
/* Requests answered so (dd may be NULL). */
uint64_t dev_direct_answered(const struct dev_direct *dd);

#endif
