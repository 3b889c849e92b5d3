/* SPDX-License-Identifier: GPL-2.0-or-later */
/* ODM across the nodes of a cluster mount: two cluster locks per file that clients hold.
 *
 * "odm-map-<ino>" is held PR by every node that has maps of the file out.  Whatever changes
 * the file's size or frees its blocks, on any node, takes it EX first: each node with maps
 * out hears of it (the blocking callback), revokes them (the clients answer once no I/O is in
 * flight on them) and lets it go.  So no I/O from any node reaches space freed elsewhere.
 *
 * "odm-use-<ino>" is held PR by every node where a client holds the file; a delete asks for
 * it EX without waiting, so a file in use on another node is not removed (EBUSY), as on one
 * node.
 *
 * Both are asked for outside any filesystem call, so they come before the metadata glock in
 * the lock order.  A node that fenced itself revokes every map it gave out; a map of a file
 * that a dead node had maps of waits for that node's recovery (its writes in flight).
 * Every function is a no-op on a NULL odm_cluster (a mount that is not a cluster's). */
#ifndef CFS_ODM_CLUSTER_H
#define CFS_ODM_CLUSTER_H

#include <stddef.h>
#include <stdint.h>

struct cfs_fs;
struct odm_server;
struct odm_cluster;

/* *out is NULL when fs is not a cluster mount. */
int odm_cluster_create(struct odm_server *s, struct cfs_fs *fs, struct odm_cluster **out);
void odm_cluster_destroy(struct odm_cluster *oc);

/* A map of ino is being handed out here / is no longer out. */
int odm_cluster_map_begin(struct odm_cluster *oc, uint64_t ino);
void odm_cluster_map_end(struct odm_cluster *oc, uint64_t ino);
/* A client here holds ino / no longer does. */
int odm_cluster_use_begin(struct odm_cluster *oc, uint64_t ino);
void odm_cluster_use_end(struct odm_cluster *oc, uint64_t ino);
/* About to change ino's size or free its blocks: every other node's maps are revoked first.
 * No map of ino may be out here (revoke them first).  change_end is due after a 0. */
int odm_cluster_change_begin(struct odm_cluster *oc, uint64_t ino);
void odm_cluster_change_end(struct odm_cluster *oc, uint64_t ino);
/* May ino be deleted: -EBUSY (with a message naming the node) while a client of another node
 * holds it. */
int odm_cluster_may_delete(struct odm_cluster *oc, uint64_t ino, char *msg, size_t msglen);

/* odm_server.c, for the revoker: revoke every map of ino (0: all) given out here, and wait. */
int odm_revoke_here(struct odm_server *s, uint64_t ino, char *msg, size_t msglen);

#endif
