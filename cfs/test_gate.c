/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Test gates: a test holds a thread of the daemon at a chosen point by making a file, sees
 * that the thread got there (PATH.held), does what it needs the moment for, and lets the
 * thread go by removing the file.  An event held open instead of a race with a timer. */
#include "cfs/internal.h"

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

void cfs_test_gate(const char *path)
{
	if (!path || access(path, F_OK))
		return;
	char held[PATH_MAX];
	snprintf(held, sizeof held, "%s.held", path);
	int fd = open(held, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	if (fd >= 0)
		close(fd);
	while (access(path, F_OK) == 0)
		nanosleep(&(struct timespec){0, 1000 * 1000}, NULL);
}
