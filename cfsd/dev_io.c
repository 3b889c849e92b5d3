/* SPDX-License-Identifier: GPL-2.0-or-later */
/* What cfsd changes in the requests and replies libfuse reads and writes on /dev/fuse, for
 * what libfuse 3.14 (Debian 12's) does not know.  Done through its custom I/O hooks.
 *
 * INIT flags it cannot ask for are added to its INIT reply, and only if the kernel offered
 * them in its INIT request:
 * - FUSE_HANDLE_KILLPRIV_V2: cfsd drops set-ID bits and file capabilities itself on write,
 *   truncate, fallocate and chown, by the file as it is on the LUNs and the caller's
 *   privileges (cfs/setid.c), so the kernel may mark a file it has checked once S_NOSEC.
 *   Without it the kernel asks for security.capability before every write(2): a round trip
 *   to cfsd for each, a third of a cached write's time, and on a cluster mount (whose writes
 *   all reach cfsd) a GETXATTR for each of an unpack's 32,000 writes, 137,000 requests in all
 *   against 96,000 on one node.  A file another node gives set-ID bits or capabilities after
 *   this kernel marked it loses them at the next write here all the same: cfsd drops them.
 * - FUSE_DIRECT_IO_ALLOW_MMAP (protocol 7.39, kernels since 6.6): MAP_SHARED mappings of
 *   files opened for direct I/O (cfs(8), "mmap"), on every mount but a dboptimized one of a
 *   cluster: there other nodes write a file without taking its glock, so nothing would drop
 *   the mapped pages their writes make stale.  Elsewhere mapped pages are dropped as any
 *   cached page is (kernel_inval.c), and an O_DIRECT open of a cluster mount can be mapped
 *   as on a kernel filesystem (xfstests' fsx does, generic/091 and 263).
 * - FUSE_OVER_IO_URING (protocol 7.42, kernels since 6.14 with the fuse module's
 *   enable_uring set): requests through rings (fuse_uring.c) unless "nouring" was asked
 *   for, on every mount but a dboptimized one of a cluster: its direct I/O leaves the
 *   workers (dev_direct.c), where the rings' threads would do it one request at a time.
 *   Once the INIT answer is written the rings' threads start, and the answers to their
 *   requests go back through them (fuse_uring_take_reply).
 * The kernel sends nothing else before the INIT reply, so the INIT request's identity needs
 * no lock: one thread reads and answers it.
 *
 * FUSE_TMPFILE (an open with O_TMPFILE, kernels since 6.1) is unknown to libfuse, which would
 * answer ENOSYS, and the kernel would fail every O_TMPFILE with EOPNOTSUPP from then on.  Its
 * request and reply are those of FUSE_CREATE, so it is handed to libfuse as a CREATE of the
 * name "/", which no name in a directory can be, and op_create makes an unnamed file for it. */
#define FUSE_USE_VERSION 312
#include "cfsd/fuse_ops.h"
#include "cfsd/fuse_uring.h"

#include <errno.h>
#include <fuse_lowlevel.h>
#include <linux/fuse.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#ifndef FUSE_DIRECT_IO_ALLOW_MMAP
#define FUSE_DIRECT_IO_ALLOW_MMAP (1ull << 36)
#endif

#ifndef FUSE_TMPFILE
#define FUSE_TMPFILE 51
#endif

/* A FUSE_TMPFILE request as the CREATE of CFSD_UNNAMED (see the top of this file). */
void dev_io_as_libfuse_knows(struct fuse_in_header *in, size_t n)
{
	size_t name_at = sizeof *in + sizeof(struct fuse_create_in);
	if (in->opcode != FUSE_TMPFILE || n < name_at + sizeof CFSD_UNNAMED)
		return; /* libfuse answers ENOSYS: O_TMPFILE fails with EOPNOTSUPP */
	in->opcode = FUSE_CREATE;
	memcpy((char *)in + name_at, CFSD_UNNAMED, sizeof CFSD_UNNAMED);
}

static ssize_t read_request(int fd, void *buf, size_t len, void *userdata)
{
	struct cfsd *d = userdata;
	ssize_t n = read(fd, buf, len);
	struct fuse_in_header *in = buf;
	if (n >= (ssize_t)sizeof *in)
		dev_io_as_libfuse_knows(in, (size_t)n);
	if (n >= (ssize_t)(sizeof *in + offsetof(struct fuse_init_in, flags2) + 4) &&
	    in->opcode == FUSE_INIT) {
		const struct fuse_init_in *init = (const void *)(in + 1);
		uint64_t offered = init->flags;
		if (offered & FUSE_INIT_EXT)
			offered |= (uint64_t)init->flags2 << 32;
		d->init_unique = in->unique;
		d->init_added = d->init_wanted & offered;
	}
	return n;
}

/* The kernel's largest request payload, which each ring entry must hold (the kernel's
 * fuse_uring_create), from the INIT answer. */
static size_t largest_payload(const struct fuse_init_out *init)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE), pages = init->max_pages;
	if (!(init->flags & FUSE_MAX_PAGES) || pages < 32) /* the kernel's default */
		pages = 32;
	size_t n = init->max_write > 8192 ? init->max_write : 8192;
	return n > pages * page ? n : pages * page;
}

/* The INIT answer asked for io_uring and went through: the kernel takes entries now. */
static void start_rings(struct cfsd *d, const struct fuse_init_out *init)
{
	struct fuse_uring *u = NULL;
	/* a dboptimized mount's direct I/O from the data threads (fuse_uring.c) */
	struct fuse_uring_data_path data = {cfsd_direct_begin, d};
	bool direct = d->fs_dboptimized && !d->cluster;
	int rc = fuse_uring_start(d->se, largest_payload(init), direct ? &data : NULL,
				  d->cluster ? d->mount_abs : NULL, &u);
	if (rc) {
		fprintf(stderr, "cfsd: io_uring: %s (requests go through /dev/fuse)\n",
			strerror(-rc));
		fuse_uring_stop(u);
		return;
	}
	__atomic_store_n(&d->uring, u, __ATOMIC_RELEASE);
}

static ssize_t write_reply(int fd, struct iovec *iov, int count, void *userdata)
{
	struct cfsd *d = userdata;
	const struct fuse_out_header *out = iov[0].iov_base;
	ssize_t taken = fuse_uring_take_reply(__atomic_load_n(&d->uring, __ATOMIC_ACQUIRE), iov,
					      count);
	if (taken >= 0)
		return taken;
	struct fuse_init_out init;
	if (!d->init_added || count != 2 || iov[0].iov_len < sizeof *out ||
	    out->unique != d->init_unique || out->error ||
	    iov[1].iov_len < offsetof(struct fuse_init_out, flags2) + 4 ||
	    iov[1].iov_len > sizeof init)
		return writev(fd, iov, count);
	memcpy(&init, iov[1].iov_base, iov[1].iov_len);
	init.flags |= (uint32_t)d->init_added;
	if (d->init_added >> 32) {
		init.flags |= FUSE_INIT_EXT;
		init.flags2 |= (uint32_t)(d->init_added >> 32);
	}
	bool rings = d->init_added & CFSD_FUSE_OVER_IO_URING;
	d->init_added = 0;
	struct iovec patched[2] = {iov[0], {&init, iov[1].iov_len}};
	ssize_t n = writev(fd, patched, 2);
	if (n > 0 && rings)
		start_rings(d, &init);
	return n;
}

int dev_io_hook(struct cfsd *d, struct fuse_session *se)
{
	/* see the top of this file */
	if (!d->cluster || !d->fs_dboptimized)
		d->init_wanted = FUSE_DIRECT_IO_ALLOW_MMAP;
	d->init_wanted |= FUSE_HANDLE_KILLPRIV_V2;
	if ((!d->cluster || !d->fs_dboptimized) && !d->nouring && fuse_uring_possible())
		d->init_wanted |= CFSD_FUSE_OVER_IO_URING;
	static const struct fuse_custom_io io = {.read = read_request, .writev = write_reply};
	return fuse_session_custom_io(se, &io, fuse_session_fd(se));
}
