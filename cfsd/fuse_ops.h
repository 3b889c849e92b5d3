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
struct cfsd {
	struct cfs_fs *fs;
	struct cvm_volume *vol;
	bool fs_dboptimized;
	bool cluster;                  /* other nodes change the filesystem too */
	struct kernel_inval *inval;    /* drops the kernel's pages of files others change */
	const char *volume;
	const struct scan_paths *scan; /* to find the LUNs again after a cvm grow */
	struct fuse_session *se;
	struct odm_server *odm;        /* ODM clients' maps (NULL without a control socket) */
	gid_t odm_gid;                 /* may use the control socket for ODM; -1: root only */
	/* Direct writes done to files the kernel may cache pages of (atomic): a buffered read
	 * that saw it change may have cached what such a write replaced (fuse_ops.c). */
	uint64_t direct_writes_done;
	/* Handles of the volume opened after other nodes grew it, closed after the unmount. */
	struct cvm_volume **reopened;
	unsigned nreopened;
};
/* control_server.c: a cfs_reopen_fn (cfs.h); arg is the cfsd. */
int cfsd_reopen_volume(void *arg, struct cvm_volume **vol);

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

/* kernel_inval.c: a thread that tells the kernel to drop the cached pages of files whose
 * metadata lock this node gave up, and of the range of a direct write.  It runs apart from
 * the FUSE workers: an invalidation waits for page locks that a request blocked on the lock,
 * or waiting for a worker, may hold. */
int kernel_inval_start(struct cfsd *d);
void kernel_inval_stop(struct cfsd *d);
/* Have the kernel drop the pages it cached of [off, off + len) of a file, soon. */
void kernel_inval_range(struct cfsd *d, uint64_t ino, off_t off, off_t len);

#endif
