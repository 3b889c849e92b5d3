/* SPDX-License-Identifier: GPL-2.0-or-later */
/* cfs quota's requests on the control socket (QUOTA_GET, QUOTA_SET, QUOTA_REPORT). */
#ifndef CFSD_QUOTA_SERVER_H
#define CFSD_QUOTA_SERVER_H

#include "cfsd/fuse_ops.h"
#include "proto/control.pb-c.h"

#include <sys/types.h>

/* What a reply points into until it is sent. */
struct quota_reply_mem {
	QuotaRecord *v, **ptrs;
	size_t n;
	char message[512];
};

bool quota_is_request(const ControlRequest *req);
/* asker: the uid of the process on the other end (root alone may). */
void quota_handle(struct cfsd *d, uid_t asker, const ControlRequest *req, ControlReply *reply,
		  struct quota_reply_mem *mem);
/* For STATUS: the ids at or past 90 % of a limit, or over a soft one. */
void quota_status(struct cfsd *d, ControlReply *reply, struct quota_reply_mem *mem);
void quota_reply_mem_free(struct quota_reply_mem *mem);

#endif
