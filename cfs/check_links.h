/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Files' link counts against their names, for the check of a mounted filesystem (check.c). */
#ifndef CFS_CHECK_LINKS_H
#define CFS_CHECK_LINKS_H

#include <stdint.h>
#include <time.h>

struct cfs_fs;
struct cfs_links;

/* Room for the names of a filesystem of blocks blocks: a bit a block, and a record for each
 * file met with other than one link.  NULL: out of memory. */
struct cfs_links *cfs_links_new(uint64_t blocks);
void cfs_links_free(struct cfs_links *l);
/* The walk met a name of file ino (a block number), whose inode said nlink and ctime. */
int cfs_links_met(struct cfs_links *l, uint64_t ino, uint32_t nlink, const struct timespec *ctime);
/* The files whose names met differ from their link counts, or whose counts changed while
 * the walk went on. */
size_t cfs_links_suspects(const struct cfs_links *l);

struct cfs_links_confirm {
	unsigned tries;           /* counts of the suspects' names, at most */
	const volatile int *stop; /* set: stop (-ECANCELED) */
	void (*problem)(void *arg, const char *line);
	void *arg;
	uint64_t unconfirmed;     /* out: suspects no count could settle */
};
/* Count the suspects' names again, walking the names alone, until a count is one of the
 * tree as it was at one moment; say each file whose count then differs from its link count. */
int cfs_links_confirm(struct cfs_fs *fs, struct cfs_links *l, struct cfs_links_confirm *c);

#endif
