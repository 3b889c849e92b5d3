/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* libodm: Oracle-Disk-Manager-style file management and asynchronous I/O on CFS.
 *
 * Written from the published semantics of Oracle Disk Manager (its header is not public).  A
 * database process calls odm_init once, identifies (or creates) its files, and moves data
 * with odm_io.  Data goes from the caller's buffer straight to the LUNs with libaio: cfsd
 * hands out each file's extent map over its control socket and is not on the I/O path.
 *
 * Every call returns 0 (or a documented positive value) on success and a negative errno
 * value on failure:
 *   -ENXIO      odm_init has not been called in this process
 *   -EXDEV      the path is not on a CFS mount (odm_discover says which are)
 *   -EBADF      a file identifier this instance never gave out, or one deleted or aborted
 *   -ESTALE     the file behind an identifier was replaced (same path, other file)
 *   -EINVAL     a bad argument: buffer or size not 512-byte aligned, size 0, unknown op...
 *   -ERANGE     an I/O (or a part of it) outside the file's size
 *   -EBUSY      delete of a file another process holds; resize while a holder did not let go
 *   -EEXIST     create of a path that exists; -ENOENT identify of one that does not
 *   -ENFILE     the instance's file table (ODM_MAX_FILES) is full
 *   -EUSERS     odm_init: the instance has ODM_MAX_PROCS (4,096) processes already
 * The same codes land in odm_ioc.status for a request that fails. */
#ifndef ODM_H
#define ODM_H

#include <stdint.h>

#define ODM_API_VERSION 1
#define ODM_ALIGN 512u     /* buffers, sizes and file offsets of odm_io */
#define ODM_MAX_FILES 65536u /* files an instance can identify */

typedef uint64_t odm_fid;  /* valid in every process of the instance; 0 is never one */

enum odm_ftype {
	ODM_FT_DATA, ODM_FT_REDO, ODM_FT_CONTROL, ODM_FT_ARCHIVE, ODM_FT_TEMP, ODM_FT_OTHER,
	ODM_FT_COUNT
};

/* What a process does, for the statistics.  odm_init takes it from Oracle-style process
 * names (ora_lgwr_SID, ora_dbw0_SID, ora_ckpt_SID, ora_arc0_SID, ora_p000_SID, oracleSID);
 * odm_set_ptype overrides it. */
enum odm_ptype {
	ODM_PT_OTHER, ODM_PT_FOREGROUND, ODM_PT_LGWR, ODM_PT_DBWR, ODM_PT_CKPT, ODM_PT_ARCH,
	ODM_PT_PQ, ODM_PT_COUNT
};

/* 1 if the path (existing, or a file to create there) is on CFS, 0 if not, -errno. */
int odm_discover(const char *path);

/* Once per process, before anything else; again after a fork.  Names: 1-31 characters of
 * [A-Za-z0-9_$#-].  The statistics segment /dev/shm/odm.DATABASE.INSTANCE is made on first
 * use and shared by the instance's processes. */
int odm_init(const char *database, const char *instance);
int odm_set_ptype(enum odm_ptype ptype);
/* Waits for this process's I/O in flight, aborts its uncommitted files, drops its maps. */
int odm_fini(void);

/* key: tells this file from a later one at the same path (the inode's generation). */
int odm_identify(const char *path, odm_fid *fid, uint64_t *key);
/* This process stops using the file (others keep their maps). */
int odm_unidentify(odm_fid fid);

/* A new file of size bytes (a multiple of block_size; block_size a power of two from 512 to
 * 1 MiB), allocated and zeroed, invisible at path until odm_commit.  odm_abort removes it;
 * so does the end of the process or of cfsd, whichever comes first. */
int odm_create(const char *path, uint64_t size, uint32_t block_size, enum odm_ftype type,
	       odm_fid *fid);
int odm_commit(odm_fid fid);
int odm_abort(odm_fid fid);
/* New size (a multiple of the block size): growing allocates and zeroes, shrinking frees.
 * Other processes' maps are revoked first; they re-map on their next I/O. */
int odm_resize(odm_fid fid, uint64_t size);
/* Remove a committed file; refused (-EBUSY) while another process holds it. */
int odm_delete(const char *path);

struct odm_fileinfo {
	uint64_t size;        /* bytes */
	uint64_t key;
	uint64_t ino;
	uint32_t block_size;  /* of odm_create; 512 for files made otherwise */
	uint32_t type;        /* enum odm_ftype */
	int committed;
	char path[512];
};
int odm_getfileinfo(odm_fid fid, struct odm_fileinfo *info);

/* ---- I/O ---- */
enum odm_op { ODM_READ = 1, ODM_WRITE = 2 };
#define ODM_PENDING 1 /* odm_ioc.status while the request is in flight */

struct odm_ioc {
	/* set by the caller */
	int op;              /* ODM_READ or ODM_WRITE */
	odm_fid fid;
	uint64_t block;      /* file offset, in the file's blocks */
	void *buf;           /* ODM_ALIGN-aligned */
	uint32_t size;       /* bytes, a multiple of ODM_ALIGN */
	void *user;          /* the caller's */
	/* filled by libodm */
	int status;          /* ODM_PENDING, then 0 (all of size moved) or -errno */
	uint64_t elapsed_us; /* from submission to completion */
	/* libodm's own */
	struct odm_ioc *_next;
	uint64_t _start_ns;
	uint32_t _pieces, _state, _file, _sync;
	int _error;
};

enum odm_io_result {
	ODM_IO_NOTHING = 0,  /* nothing to submit, wait for or reap */
	ODM_IO_POSTED = 1,   /* requests submitted, none waited for */
	ODM_IO_WAITED = 2,   /* every request of wait (or at least one to reap) completed */
	ODM_IO_TIMEDOUT = 3, /* the timeout passed first */
};

/* In one call: submit the requests of submit[], wait until every request of wait[] has
 * completed (a request in both is synchronous I/O), then reap up to reap_max other completed
 * requests into reaped[] (*nreaped says how many).  With nothing to wait for, a call that only
 * reaps waits for at least one completion.  timeout_us: -1 forever, 0 do not block.  Returns
 * an odm_io_result, or -errno when the call itself is wrong (nothing is submitted then). */
int odm_io(struct odm_ioc *const *submit, unsigned nsubmit, struct odm_ioc *const *wait,
	   unsigned nwait, struct odm_ioc **reaped, unsigned reap_max, unsigned *nreaped,
	   int64_t timeout_us);
/* Returns 0 once the request is no longer in flight, its status set.  Linux AIO cannot take
 * back a read or write it has accepted for a file or block device, so this waits for the
 * request to complete; a completed request is left for odm_io to reap or wait for.  -EINVAL
 * for a request this process never submitted. */
int odm_cancel(struct odm_ioc *ioc);

#endif
