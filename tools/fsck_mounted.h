/* SPDX-License-Identifier: GPL-2.0-or-later */
/* fsck.cfs -n of a volume mounted on this node, run by its daemon (fsck_mounted.c). */
#ifndef TOOLS_FSCK_MOUNTED_H
#define TOOLS_FSCK_MOUNTED_H

#include <stdbool.h>
#include <stdint.h>

/* fsck(8)'s exit codes */
enum { FSCK_OK = 0, FSCK_FIXED = 1, FSCK_LEFT = 4, FSCK_ERROR = 8, FSCK_USAGE = 16,
       FSCK_CANCELED = 32 };

/* Have the daemon of the mount at dir check volume (rate: inodes a second at most, 0 none),
 * printing each problem (json: a report at the end); an fsck(8) exit code. */
int fsck_mounted(const char *volume, const char *dir, uint64_t rate, bool json);

struct scan_paths;
/* A volume of a cluster (its lock protocol not local) that this node has not mounted: mounted
 * here read-only; if other nodes have it mounted, checked through that mount (fsck_mounted),
 * then unmounted: its exit code.  -1 if no other node has it mounted or it could not be
 * mounted here (said): the caller checks it unmounted. */
int fsck_through_own_mount(const char *volume, const struct scan_paths *scan, uint64_t rate,
			   bool json);

#endif
