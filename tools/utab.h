/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The userspace mount table entry that has umount(8) run umount.cfs (utab.c). */
#ifndef CFS_TOOLS_UTAB_H
#define CFS_TOOLS_UTAB_H

/* Record, for the CFS mount at dir, that umount(8) should run umount.cfs; says so on stderr
 * if that fails (the mount works, a plain umount only does not wait for the daemon). */
void utab_record_helper(const char *dir);
/* Drop that record (before cfs umount unmounts dir itself); nothing if there is none.  It
 * looks at dir, which waits for the daemon: given up after seconds, when not 0. */
void utab_forget(const char *dir, unsigned seconds);

#endif
