/* SPDX-License-Identifier: GPL-2.0-or-later */
/* FUSE over io_uring for cfsd (fuse_uring.c): the kernel hands requests to threads of each
 * core through rings of shared buffers instead of /dev/fuse. */
#ifndef CFSD_FUSE_URING_H
#define CFSD_FUSE_URING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct cfs_direct_io;
struct fuse_in_header;
struct fuse_session;
struct fuse_uring;
struct iovec;

/* The INIT flag that asks for it (protocol 7.42, Linux 6.14; offered only where the fuse
 * module's enable_uring is set). */
#define CFSD_FUSE_OVER_IO_URING (1ull << 41)

/* Whether this process can make the rings (io_uring may be turned off by sysctl): once the
 * INIT answer asks for io_uring the kernel holds every request until they are there. */
bool fuse_uring_possible(void);

/* How data threads map a READ or WRITE request (in, its first argument op_in, its data or
 * the room for the answer's in payload, room bytes) to LUN I/O they submit themselves:
 * cfs_direct_io_begin's answers (0, or -EAGAIN for libfuse's handlers). */
struct fuse_uring_data_path {
	int (*begin)(void *arg, const struct fuse_in_header *in, const void *op_in,
		     void *payload, size_t room, bool may_wait, struct cfs_direct_io *io);
	void *arg;
};

/* Start the threads for each core's queue of session se, whose INIT answer asked for
 * io_uring and said the kernel's largest request payload is payload_size: data threads
 * if data is given, else threads that hand every request to libfuse.  answers_later: NULL,
 * or the mount point of a mount whose requests may be answered later from another thread
 * (a cluster mount's lock waits): the thread whose request that is leaves it in its entry
 * and goes on dispatching to helpers, and the queue is poked through the mount point for
 * the requests that came meanwhile (ring_poke.c).  On failure (negative errno) *out may
 * still be set, to be stopped; the kernel goes on with /dev/fuse. */
int fuse_uring_start(struct fuse_session *se, size_t payload_size,
		     const struct fuse_uring_data_path *data, const char *answers_later,
		     struct fuse_uring **out);
/* Stop and free the threads (after the session loop ended, before the unmount). */
void fuse_uring_stop(struct fuse_uring *u);

/* The answer libfuse writes (iov[0] a fuse_out_header) if it is one to a request that came
 * through a ring: put it in that request's entry and return its length; -1 if it is not. */
ssize_t fuse_uring_take_reply(struct fuse_uring *u, const struct iovec *iov, int count);

/* Where the calling thread may put up to size bytes of the answer to the ring request it is
 * answering, so that fuse_uring_take_reply finds them in place; NULL if it is not answering
 * one or they do not fit.  The request's own payload is overwritten. */
void *fuse_uring_reply_space(size_t size);

/* Requests answered through the rings so far, and of them by data threads' own LUN I/O. */
uint64_t fuse_uring_answered(const struct fuse_uring *u);
uint64_t fuse_uring_direct(const struct fuse_uring *u);
/* Requests whose entries wait now for an answer from another thread (parked). */
uint64_t fuse_uring_waiting(struct fuse_uring *u);

#endif
