/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Internals of libodm shared between its source files; not installed. */
#ifndef ODM_INTERNAL_H
#define ODM_INTERNAL_H

#include "cfs/cfs.h"
#include "cvm/cvm.h"
#include "odm/odm.h"
#include "odm/stats.h"
#include "proto/control.pb-c.h"

#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <unistd.h>

#define ODM_AIO_DEPTH 1024u
#define ODM_FILE_CHUNK 256u

#define ODM_NOTICES_KEPT 64 /* revoke notices a mount remembers (struct odm_mount) */

/* One CFS mount this process talks to: cfsd's socket and the volume under it. */
struct odm_mount {
	char root[PATH_MAX];
	int sock;
	pthread_t reader;
	pthread_mutex_t rpc_lock;  /* one request at a time */
	pthread_mutex_t send_lock; /* requests and revoke acknowledgements */
	pthread_mutex_t reply_lock;
	pthread_cond_t reply_ready;
	ControlReply *reply;       /* handed from the reader to the requester */
	bool closed;
	struct cvm_volume *vol;    /* opened from cfsd's layout; NULL until the first map */
	uint64_t layout_generation;
	struct cvm_aio *aio;       /* made at the first asynchronous request */
	bool aio_refused_said;     /* the line about fs.aio-max-nr, once */
	const struct cfs_lease_page *lease; /* cfsd's membership lease; NULL on one node */
	uint64_t errors_told[CVM_MAX_LUNS]; /* vol's failed I/O per LUN cfsd knows of (atomic) */
	/* The inodes of the last revoke notices (the reader's), numbered: a map asked for while
	 * one came for its inode is void, also when the file did not know its inode yet. */
	pthread_mutex_t notice_lock;
	uint64_t notice_seq;
	uint64_t noticed[ODM_NOTICES_KEPT];
	struct odm_mount *next;
};

/* This process's view of an instance file (index = the file table's). */
struct odm_file {
	uint32_t gen;             /* of the table entry this is about; 0: not in use here */
	struct odm_mount *m;
	uint64_t ino, key, size;
	uint32_t block_size, type;
	bool uncommitted;
	pthread_mutex_t lock;     /* mapped/inflight/ack_due, against the reader thread */
	bool mapped, ack_due;
	unsigned inflight, notices;
	OdmExtent *ext;           /* the map, file order */
	size_t next;
};

struct odm_proc {
	pid_t pid;                /* odm_init's: the creator of the files this process creates */
	struct odm_segment *seg;
	struct odm_proc_slot *slot;
	pthread_mutex_t lock;     /* every call: one at a time per process */
	struct odm_mount *mounts;
	/* This process's files, by table index, made a chunk at a time as indexes are used:
	 * memory follows the files this process touches, not ODM_MAX_FILES. */
	struct odm_file *file_chunk[ODM_MAX_FILES / ODM_FILE_CHUNK];
	struct odm_ioc *done_head, *done_tail; /* completed, not yet waited for or reaped */
	unsigned inflight;
	char owner[2 * ODM_NAME_MAX + 2];
};

extern struct odm_proc odm_proc;

/* odm_init ran in this process (not only in a parent before a fork: the fork handler odm_init
 * registers clears odm_proc in the child).  Not getpid(): that is a system call per I/O. */
static inline bool odm_ready(void)
{
	return odm_proc.seg != NULL;
}

/* ---- mounts and cfsd (client.c) ---- */
/* The CFS mount holding path (made absolute, symlinks resolved): its root, and the rest. */
int odm_find_mount(const char *path, bool may_not_exist, char *root, size_t rootlen,
		   char *rel, size_t rellen);
int odm_mount_get(const char *root, struct odm_mount **out);
void odm_mount_close(struct odm_mount *m);
/* Send a request and wait for its reply (freed by the caller with control_reply__free_unpacked). */
int odm_rpc(struct odm_mount *m, ControlRequest *req, ControlReply **reply);
/* Revoke notices on m: how many so far, and whether one since `seq` was about ino (or more
 * came than are kept). */
uint64_t odm_notice_seq(struct odm_mount *m);
bool odm_noticed_since(struct odm_mount *m, uint64_t seq, uint64_t ino);
void odm_send_revoked(struct odm_mount *m, uint64_t ino);
/* Tell cfsd of the failed LUN I/O of this process it does not know of yet (cfs status
 * counts them per LUN). */
void odm_tell_lun_errors(struct odm_mount *m);
/* Open (again) the volume a reply's layout names. */
int odm_mount_layout(struct odm_mount *m, const OdmLayout *layout);
/* Make the mount's AIO context if it has none yet (a line on stderr says why not). */
int odm_mount_aio(struct odm_mount *m);

/* ---- files (file.c) ---- */
/* This process's file of table index i; with make, its chunk is made if new (NULL without
 * memory), else NULL if it has none. */
struct odm_file *odm_file_at(unsigned i, bool make);
/* The first file of this process at index *i or above (*i set to its index), or NULL. */
struct odm_file *odm_file_next(unsigned *i);
/* Free every chunk (after a fork, or at odm_fini, with no I/O in flight). */
void odm_files_free(void);
int odm_file_of(odm_fid fid, struct odm_file **out, unsigned *index);
/* Take a new map from a reply (the file's lock is not held). */
int odm_file_install(struct odm_file *f, const ControlReply *reply);
/* (Re)identify a file whose map was revoked. */
int odm_file_remap(struct odm_file *f, unsigned index);
void odm_file_drop(struct odm_file *f);
/* Abort this process's uncommitted files (odm_fini). */
void odm_files_abort_uncommitted(void);
/* Wait until no I/O of this process is in flight on f. */
int odm_file_drain(struct odm_file *f);

/* ---- I/O (io.c) ---- */
int odm_io_poll(struct odm_mount *m, bool block, int64_t timeout_us);
int odm_io_drain_all(void);
/* What completed of this process's I/O, done now (odm_proc.lock held). */
void odm_io_reap(void);

#endif
