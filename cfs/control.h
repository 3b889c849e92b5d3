/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* cfsd's control socket: a Unix socket per mount, protobuf-c messages (proto/control.proto)
 * framed by a 4-byte little-endian length.  Its path is derived from the mount point, so
 * `cfs status DIR` and `cfs grow DIR` find it. */
#ifndef CFS_CONTROL_H
#define CFS_CONTROL_H

#include <limits.h>
#include <protobuf-c/protobuf-c.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CFS_CONTROL_DIR "/run/cfs"
#define CFS_CONTROL_MAX (1u << 20)

struct cfsd;
struct cfs_control;

/* The socket path for a mount point (resolved with realpath).  -errno if it does not exist. */
int cfs_control_path(const char *mountpoint, char *out, size_t outlen);
/* A mount as /proc/self/mountinfo lists it: its device ("MAJOR:MINOR"), its mount point
 * (unescaped) and its filesystem type ("fuse.cfs" for CFS). */
struct cfs_mount_entry {
	char dev[32];
	char dir[PATH_MAX];
	char fstype[64];
	char source[PATH_MAX]; /* as mounted: cfs:VOLUME for ours */
};
/* Call fn for every mount, oldest first; -errno if mountinfo cannot be read.  Reading it
 * asks no filesystem anything (a stat of a mount point would wait for its daemon). */
int cfs_mountinfo_each(void (*fn)(const struct cfs_mount_entry *m, void *arg), void *arg);
/* The mounts of a volume here (source cfs:NAME or cfs:UUID, its name or UUID as mounted):
 * whether one is at dir (NULL: none asked), and the first one elsewhere, into other. */
struct cfs_volume_mounts {
	bool at_dir, elsewhere;
	char other[PATH_MAX];
};
int cfs_volume_mounts(const char *name, const char *uuid, const char *dir,
		      struct cfs_volume_mounts *out);

/* Framing: one message each way. */
int cfs_control_recv(int fd, uint8_t **msg, uint32_t *len);
/* Pack a protobuf-c message and send it, whole, under lock (NULL: no other writer). */
int cfs_control_send_message(int fd, pthread_mutex_t *lock, const ProtobufCMessage *msg);
/* The same with a descriptor passed along (SCM_RIGHTS on the length header; -1: none), and
 * its receiving side: *passed is the descriptor that came, or -1. */
int cfs_control_send_message_fd(int fd, pthread_mutex_t *lock, const ProtobufCMessage *msg,
				int pass);
int cfs_control_recv_fd(int fd, uint8_t **msg, uint32_t *len, int *passed);

/* In cfsd: serve requests on a thread of their own. */
int cfs_control_start(struct cfsd *d, const char *mountpoint, struct cfs_control **out);
void cfs_control_stop(struct cfs_control *c);

#endif
