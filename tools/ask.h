/* SPDX-License-Identifier: GPL-2.0-or-later */
/* One request to the daemon of a CFS mount, for the tools (cfs, odmstat). */
#ifndef TOOLS_ASK_H
#define TOOLS_ASK_H

#include "cvm/cvm.h"
#include "proto/control.pb-c.h"

#include <stdbool.h>

/* Send req to the daemon serving dir and read its reply into *out (free it with
 * control_reply__free_unpacked).  Says why not on stderr as "prog: ...": -errno, or -EIO
 * when the daemon answered with an error. */
int tool_ask(const char *prog, const char *dir, const ControlRequest *req, ControlReply **out);

/* Whether a daemon accepts a connection on dir's control socket (says nothing). */
bool tool_daemon_answers(const char *dir);

/* Where the volume is mounted on this node with CFS (the first such mount, its daemon asked
 * which volume it serves), if it is. */
bool tool_mount_of(const char *prog, const struct cvm_config *cfg, char *dir, size_t len);

#endif
