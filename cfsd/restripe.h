/* SPDX-License-Identifier: GPL-2.0-or-later */
/* cvm restripe on a mounted volume, run by the daemon (restripe.c). */
#ifndef CFSD_RESTRIPE_H
#define CFSD_RESTRIPE_H

#include "cfsd/fuse_ops.h"
#include "proto/control.pb-c.h"

#include <stddef.h>
#include <stdint.h>

/* Start it on a thread of its own, as asked (stripe width, rate, LUNs; NULL: the restripe
 * under way as it is): 0, or -errno with msg saying why not.  staged_only: pause once a
 * batch left staged is finished. */
int cfsd_restripe_start(struct cfsd *d, const struct cvm_restripe_opts *asked, bool staged_only,
			char *msg, size_t msglen);
/* Pause it after the batch in hand (returns at once); -ENOENT if none runs. */
int cfsd_restripe_stop(struct cfsd *d);
/* Whether one runs, here or (a cluster's) on another node: cfs grow waits for none. */
bool cfsd_restripe_running(struct cfsd *d);
/* The last one's state into *rs (its strings in state, error: room for 16 and 256 bytes);
 * false if this daemon has run none. */
bool cfsd_restripe_status(struct cfsd *d, RestripeStatus *rs, char *state, char *error);
/* The volume's config as the LUNs hold it now (the handle's is as it was opened). */
int cfsd_config_now(struct cfsd *d, struct cvm_config *cfg);
/* At unmount: pause it and wait for its thread. */
void cfsd_restripe_end(struct cfsd *d);

#endif
