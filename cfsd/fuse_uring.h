/* FUSE over io_uring for cfsd (fuse_uring.c): the kernel hands requests to threads of each
 * core through rings of shared buffers instead of /dev/fuse. */
#ifndef CFSD_FUSE_URING_H
#define CFSD_FUSE_URING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct fuse_session;
struct fuse_uring;
struct iovec;

/* The INIT flag that asks for it (protocol 7.42, Linux 6.14; offered only where the fuse
 * module's enable_uring is set). */
#define CFSD_FUSE_OVER_IO_URING (1ull << 41)

/* Whether this process can make the rings (io_uring may be turned off by sysctl): once the
 * INIT answer asks for io_uring the kernel holds every request until they are there. */
bool fuse_uring_possible(void);

/* Start a thread for each core's queue of session se, whose INIT answer asked for io_uring
 * and said the kernel's largest request payload is payload_size.  On failure (negative
 * errno) *out may still be set, to be stopped; the kernel goes on with /dev/fuse. */
int fuse_uring_start(struct fuse_session *se, size_t payload_size, struct fuse_uring **out);
/* Stop and free the threads (after the session loop ended, before the unmount). */
void fuse_uring_stop(struct fuse_uring *u);

/* The answer libfuse writes (iov[0] a fuse_out_header) if it is one to a request that came
 * through a ring: put it in that request's entry and return its length; -1 if it is not. */
ssize_t fuse_uring_take_reply(struct fuse_uring *u, const struct iovec *iov, int count);

/* Where the calling thread may put up to size bytes of the answer to the ring request it is
 * answering, so that fuse_uring_take_reply finds them in place; NULL if it is not answering
 * one or they do not fit.  The request's own payload is overwritten. */
void *fuse_uring_reply_space(size_t size);

/* Requests answered through the rings so far. */
uint64_t fuse_uring_answered(const struct fuse_uring *u);

#endif
