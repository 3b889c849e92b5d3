/* SPDX-License-Identifier: GPL-2.0-or-later */
/* An online restripe on a cluster: the node that runs it and every other node's daemon keep
 * each node's I/O out of the batch in motion (restripe_cluster.c, docs/restripe.md). */
#ifndef CFSD_RESTRIPE_CLUSTER_H
#define CFSD_RESTRIPE_CLUSTER_H

#include "cfsd/fuse_ops.h"

#include <stddef.h>
#include <stdint.h>

/* The mount's hooks (cfs_mount_opts.locks_ready, locks_closing; arg: the struct cfsd): a
 * cluster node joins a restripe running elsewhere before its mount reads anything, and
 * follows every one until its I/O is over.  A local mount only checks that no batch is left
 * staged. */
int restripe_cluster_mount(void *d, struct cfs_fs *fs);
void restripe_cluster_unmount(void *d, struct cfs_fs *fs);
/* cfs_mount_opts.recovering: a recovery's replay is not kept out of a closed batch, and a
 * batch its dead restriper left staged is finished first. */
void restripe_cluster_recovering(void *d, struct cfs_fs *fs, uint32_t node, bool before);

/* The restriper's side.  own: no other node runs one (else -EBUSY and msg names it); this
 * node stops following a run that died, leaving its gate for this run to take over.
 * disown: after the run, every node stops following it. */
int restripe_cluster_own(struct cfsd *d, char *msg, size_t msglen);
void restripe_cluster_disown(struct cfsd *d);
/* For cvm_restripe_opts.batch_begin and batch_end.  The first batch_begin makes every other
 * node follow the run; an error says why in msg. */
int restripe_cluster_batch_begin(struct cfsd *d, uint64_t first, char *msg, size_t msglen);
void restripe_cluster_batch_end(struct cfsd *d, uint64_t first, uint32_t n, int rc);

/* The node running a restripe of the volume (0: none), for refusals elsewhere. */
uint32_t restripe_cluster_owner(struct cfsd *d);

#endif
