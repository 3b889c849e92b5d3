/* SPDX-License-Identifier: GPL-2.0-or-later */
/* ODM's counts across the cluster, for odmstat --cluster.
 *
 * Every second the daemon of a cluster mount reads this node's statistics segments as rows
 * per database, instance, node and process type and sends them to the other daemons of the
 * same filesystem over corosync (CPG group "cfs-odmstat-<filesystem uuid>"); each keeps the
 * last rows it heard from every node, and marks a node down (keeping its rows) once corosync
 * says it left, or unmounted if it said goodbye first.  This node's own rows are read afresh for every request, so the cluster view
 * is at most a second behind each node's own.  On a mount of one node only its own rows. */
#ifndef CFS_ODM_SHARE_H
#define CFS_ODM_SHARE_H

#include "proto/control.pb-c.h"

#include <stddef.h>

struct cfs_fs;
struct odm_share;

int odm_share_start(struct cfs_fs *fs, struct odm_share **out);
void odm_share_stop(struct odm_share *sh);

/* What a reply points to, freed after it is sent. */
struct odm_share_mem {
	OdmNodeStats **nodes;
	size_t n;
};
/* Every node's rows into reply->node_stats. */
int odm_share_fill(struct odm_share *sh, ControlReply *reply, struct odm_share_mem *mem);
void odm_share_mem_free(struct odm_share_mem *mem);

#endif
