/* SPDX-License-Identifier: GPL-2.0-or-later */
/* cvm restripe of a volume mounted on this node: its daemon runs it (restripe_mounted.c). */
#ifndef TOOLS_RESTRIPE_MOUNTED_H
#define TOOLS_RESTRIPE_MOUNTED_H

#include "../cvm/cvm.h"

#include <stdbool.h>
#include <stddef.h>

/* Ask the daemon serving dir to run the restripe, report its progress through opts->progress
 * until it ends, and ask it to pause once *opts->stop is set.  0 done, -EINTR paused, other
 * -errno failed (said on stderr). */
int restripe_mounted(const char *dir, const struct cvm_restripe_opts *opts);

#endif
