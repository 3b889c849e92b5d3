/* SPDX-License-Identifier: GPL-2.0-or-later */
/* fsck.cfs -n of the mounted filesystem: the daemon runs the check (cfs/check.c) on a thread
 * of its own and keeps what it found for fsck.cfs to fetch (check_server.c). */
#ifndef CFSD_CHECK_SERVER_H
#define CFSD_CHECK_SERVER_H

#include "cfsd/fuse_ops.h"
#include "proto/control.pb-c.h"

#include <stdbool.h>

/* Room a reply points into until it is sent. */
struct check_reply_mem {
	CheckStatus status;
	char state[16], error[256];
	char **lines;
	size_t nlines;
};

bool check_is_request(const ControlRequest *req);
/* CHECK, CHECK_STOP or CHECK_STATUS (root's: the caller made sure). */
void check_handle(struct cfsd *d, const ControlRequest *req, ControlReply *reply,
		  struct check_reply_mem *mem);
void check_reply_mem_free(struct check_reply_mem *mem);
/* At unmount: stop it and wait for its thread. */
void check_server_end(struct cfsd *d);

#endif
