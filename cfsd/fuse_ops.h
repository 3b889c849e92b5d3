/* SPDX-License-Identifier: GPL-2.0-or-later */
/* cfsd's FUSE operations and the state they share with its main. */
#ifndef CFS_FUSE_OPS_H
#define CFS_FUSE_OPS_H

#include "cfs/cfs.h"

#include <stdbool.h>
#include <sys/types.h>

struct scan_paths;
struct fuse_session;
struct odm_server;
struct kernel_inval;
struct dev_direct;
struct cfsd {
	struct cfs_fs *fs;
	struct cvm_volume *vol;
	bool fs_dboptimized;
	bool cluster;                  /* other nodes change the filesystem too */
	bool nowriteback;              /* asked for: no write-back page cache */
	/* The kernel caches writes and sends them later (a one-node normal mount): fuse_ops.c */
	bool writeback;
	/* Its dirty pages' bound (dirty_limit_bytes): a file whose quota has less room left is
	 * opened past the cache, so that its writes meet the limit in write(2). */
	uint64_t dirty_bound;
	struct kernel_inval *inval;    /* drops the kernel's pages of files others change */
	bool namecache;                /* asked for: the kernel keeps names of a cluster mount */
	/* It does (atomic; kernel_inval.c): it can be told to forget them all without a lock
	 * (protocol 7.44, Linux 6.16). */
	bool names_cached;
	bool nouring;                  /* asked for: requests through /dev/fuse only */
	struct fuse_uring *uring;      /* the rings requests come through, if any (atomic) */
	struct dev_direct *dev_direct; /* /dev/fuse's direct I/O sent from its workers (atomic) */
	bool kernel_ready;             /* INIT answered: notifications may be sent (atomic) */
	const char *volume;
	const char *mount_abs;         /* the mount point as mountinfo shows it */
	const struct scan_paths *scan; /* to find the LUNs again after a cvm grow */
	struct fuse_session *se;
	struct odm_server *odm;        /* ODM clients' maps (NULL without a control socket) */
	gid_t odm_gid;                 /* may use the control socket for ODM; -1: root only */
	/* Direct writes done to files the kernel may cache pages of (atomic): a buffered read
	 * that saw it change may have cached what such a write replaced (fuse_ops.c). */
	uint64_t direct_writes_done;
	/* dev_io.c: INIT flags libfuse cannot ask for, those the kernel offered of them, and
	 * the INIT request being answered. */
	uint64_t init_wanted, init_added, init_unique;
	/* Directories listed without being opened, on one-node mounts (dir_listing.c). */
	struct dir_listings *listings;
	/* Handles of the volume opened after other nodes grew it, closed after the unmount. */
	struct cvm_volume **reopened;
	unsigned nreopened;
	struct restripe_cluster *restripe_cluster; /* cluster: restripes of other nodes followed */
};
/* control_server.c: a cfs_reopen_fn (cfs.h); arg is the cfsd. */
int cfsd_reopen_volume(void *arg, struct cvm_volume **vol);

/* fuse_ops.c: an io_uring data thread's READ and WRITE (struct fuse_uring_data_path); arg is
 * the cfsd. */
struct fuse_in_header;
int cfsd_direct_begin(void *arg, const struct fuse_in_header *in, const void *op_in,
		      void *payload, size_t room, bool may_wait, struct cfs_direct_io *io);

struct fuse_lowlevel_ops;
extern const struct fuse_lowlevel_ops cfsd_ops;

/* caller.c: the credentials of the caller of req, with the privileges the set-ID rules ask
 * about looked up when asked; who->asked says whether they were (the kernel's cached mode of
 * the file may then be out of date). */
typedef struct fuse_req *fuse_req_t;
struct caller {
	fuse_req_t req;
	bool asked;
};
struct cfs_cred caller_cred(fuse_req_t req, struct caller *who);
/* The privileges (CFS_CRED_*) of process pid, from /proc, as a cfs_cred's function says. */
unsigned pid_privileges(int pid, const struct cfs_cred *cr, uint32_t gid);

/* dev_io.c: have the mounted session se ask for the kernel flags cfsd needs that libfuse
 * cannot ask for, and pass O_TMPFILE opens to op_create as creates of CFSD_UNNAMED (before
 * the session's loop starts). */
int dev_io_hook(struct cfsd *d, struct fuse_session *se);
/* Make a request of n bytes one libfuse 3.14 answers (O_TMPFILE's, see dev_io.c). */
struct fuse_in_header;
void dev_io_as_libfuse_knows(struct fuse_in_header *in, size_t n);
#define CFSD_UNNAMED "/"

/* dir_listing.c: READDIRs without OPENDIR (one-node mounts): the entries of directory ino
 * from offset off, at most size bytes, as the answer to req. */
struct dir_listings;
int dir_listings_new(struct dir_listings **out);
void dir_listings_free(struct dir_listings *ls);
void dir_listing_reply(struct cfsd *d, fuse_req_t req, uint64_t ino, size_t size, off_t off);

/* workers.c: read and answer the requests of the mounted session se until it is unmounted or
 * a signal ends it (0), or reading fails (negative errno); direct reads and writes through
 * direct if not NULL (dev_direct.c). */
int cfsd_serve_requests(struct fuse_session *se, struct dev_direct *direct);

/* dirty_limit.c: let the kernel keep more of the write-back cache's dirty pages of the
 * mount at mountpoint (absolute, as mounted) than FUSE's default 1% share. */
void dirty_limit_raise(const char *mountpoint);
/* The most dirty pages the kernel keeps for such a mount, in bytes (an upper bound). */
uint64_t dirty_limit_bytes(void);

/* How long the kernel may keep the attributes and names cfsd hands it.  On a cluster that
 * is only the longest: another node's change makes this node forget them first. */
#define CFSD_CACHE_SECONDS 1.0

/* kernel_inval.c: a thread that tells the kernel to drop the cached pages of files whose
 * metadata lock this node gave up, and of the range of a direct write.  It runs apart from
 * the FUSE workers: an invalidation waits for page locks that a request blocked on the lock,
 * or waiting for a worker, may hold. */
int kernel_inval_start(struct cfsd *d);
void kernel_inval_stop(struct cfsd *d);
/* Tell the kernel a file's size changed behind its back (ODM's resize): its attributes
 * and pages go; with a write-back cache, which keeps the kernel's own size, a larger size
 * is stored there too (a smaller one shows once the kernel forgets the inode). */
void kernel_size_changed(struct cfsd *d, uint64_t ino, uint64_t size);
/* Have the kernel drop the pages it cached of [off, off + len) of a file, soon. */
void kernel_inval_range(struct cfsd *d, uint64_t ino, off_t off, off_t len);
/* The same, and back once the kernel has dropped the range, or after wait_ms. */
void kernel_inval_range_wait(struct cfsd *d, uint64_t ino, off_t off, off_t len, unsigned wait_ms);
/* Have the kernel forget a file's attributes now (no pages: no lock of a request waited for). */
void kernel_forget_attrs(struct cfsd *d, uint64_t ino);

#endif
