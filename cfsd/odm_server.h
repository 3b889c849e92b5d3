/* SPDX-License-Identifier: GPL-2.0-or-later */
/* cfsd's side of libodm: which client holds which file's map, the files clients created and
 * have not committed, and revoking maps before anything frees or moves blocks under them.
 *
 * A held file stays open in the filesystem (its blocks outlive an unlink).  A client with a
 * map writes straight to the LUNs, so anything that frees blocks of a held file (resize,
 * truncate, hole punch) or changes the volume under it (grow) first revokes the map: it asks
 * each holder to drop it and waits until the holder says no I/O is in flight on it.  While
 * that runs, nobody gets a new map of the file. */
#ifndef CFS_ODM_SERVER_H
#define CFS_ODM_SERVER_H

#include "cfsd/odm_share.h"
#include "proto/control.pb-c.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct cfsd;
struct odm_server;
struct odm_client;

#define ODM_REVOKE_TIMEOUT_S 10

int odm_server_create(struct cfsd *d, struct odm_server **out);
void odm_server_destroy(struct odm_server *s);

/* A connection: notices go out on fd under send_lock (shared with the replies). */
struct odm_client *odm_client_new(struct odm_server *s, int fd, pthread_mutex_t *send_lock);
/* The client's uid (SO_PEERCRED; UINT32_MAX if unknown). */
uint32_t odm_client_uid(const struct odm_client *c);
/* Who it is, for log lines: "pid N", then the instance and process once it said hello. */
const char *odm_client_owner(const struct odm_client *c);
/* The connection closed: drop its maps, free its uncommitted files, free it. */
void odm_client_gone(struct odm_client *c);

/* What a reply points to, freed after it is sent. */
struct odm_reply_mem {
	OdmMap map;
	OdmExtent *ext, **extp;
	OdmLayout layout;
	char vol_uuid[40];
	char **lun_paths;
	char message[512];
	struct odm_share_mem share;
};
bool odm_is_request(const ControlRequest *req);
/* Serve one ODM request (never ODM_REVOKED: see odm_revoked). */
void odm_handle(struct odm_client *c, const ControlRequest *req, ControlReply *reply,
		struct odm_reply_mem *mem);
void odm_reply_mem_free(struct odm_reply_mem *mem);
/* The client dropped its map of ino and has no I/O in flight on it. */
void odm_revoked(struct odm_client *c, uint64_t ino);

/* Revoke every map of ino (0: of every file) held by clients other than except, and keep new
 * maps of it from being handed out until odm_revoke_end, which is due after a 0.  On a
 * cluster, the maps of every other node's clients too (odm_cluster.h), and except's own.
 * -EBUSY (with a message) when a holder did not answer within ODM_REVOKE_TIMEOUT_S. */
int odm_revoke_begin(struct odm_server *s, uint64_t ino, const struct odm_client *except,
		     char *msg, size_t msglen);
void odm_revoke_end(struct odm_server *s, uint64_t ino);

/* Is the file held by some client (opens through the mount then bypass the page cache)? */
bool odm_held(struct odm_server *s, uint64_t ino);
void odm_counts(struct odm_server *s, uint32_t *clients, uint32_t *files);

#endif
