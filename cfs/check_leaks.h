/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Blocks marked in use that nothing uses, for the check of a mounted filesystem (check.c). */
#ifndef CFS_CHECK_LEAKS_H
#define CFS_CHECK_LEAKS_H

#include <stdbool.h>
#include <stdint.h>

struct cfs_fs;
struct cfs_leaks;

/* Room for a filesystem of blocks blocks: three bits a block.  NULL: out of memory. */
struct cfs_leaks *cfs_leaks_new(uint64_t blocks);
void cfs_leaks_free(struct cfs_leaks *l);
/* The walk met blocks [blk, blk + len) in use by what it read. */
void cfs_leaks_met(struct cfs_leaks *l, uint64_t blk, uint64_t len);
/* The walk read inode ino (a block number). */
void cfs_leaks_inode(struct cfs_leaks *l, uint64_t ino);

struct cfs_leaks_confirm {
	unsigned tries;           /* rounds at most */
	const volatile int *stop; /* set: stop (-ECANCELED) */
	void (*problem)(void *arg, const char *line);
	void (*read)(void *arg); /* after each inode read again (the check's pace) */
	void *arg;
	bool damaged;             /* inodes the walk could not read: their blocks are not known */
	uint64_t unconfirmed;     /* out: suspect blocks no round could settle */
};
/* The blocks the groups mark in use that the walk did not meet, settled (check_leaks.c);
 * a line said for each group with blocks that belong to nothing. */
int cfs_leaks_confirm(struct cfs_fs *fs, struct cfs_leaks *l, struct cfs_leaks_confirm *c);

#endif
