/* How many dirty pages the kernel may keep for a mount with a write-back cache.
 *
 * The kernel lets a FUSE mount's dirty pages take 1% of the system's dirty limit, and holds
 * that strictly (its bdi's strict_limit): a safeguard against a daemon an unprivileged user
 * runs.  With it, a program rewriting a few hundred megabytes at random is throttled to the
 * speed at which every page it dirties goes to cfsd and the LUNs, as if there were no cache
 * (bench/cfs's database-like load: 146,000 IOPS at 1%, 430,000 at 10-50%, ext4 322,000).
 * cfsd runs as root and answers for its pages, so it gives its mount DIRTY_SHARE_PERCENT of
 * the limit, as a local filesystem's disk would have. */
#include "cfsd/fuse_ops.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DIRTY_SHARE_PERCENT 20

/* mountinfo escapes blanks and backslashes in paths as \ooo. */
static void unescape(char *s)
{
	char *out = s;
	for (; *s; s++) {
		unsigned o;
		if (s[0] == '\\' && sscanf(s + 1, "%3o", &o) == 1) {
			*out++ = (char)o;
			s += 3;
		} else {
			*out++ = *s;
		}
	}
	*out = 0;
}

/* "MAJOR:MINOR" of the filesystem mounted at dir, from mountinfo: a stat(2) of the mount
 * would wait for the daemon, which is not serving yet.  The last match is the newest. */
static int mount_device(const char *dir, char *dev, size_t len)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return -errno;
	char *line = NULL;
	size_t cap = 0;
	int rc = -ENOENT;
	while (getline(&line, &cap, f) > 0) {
		char majmin[32], mnt[PATH_MAX];
		if (sscanf(line, "%*u %*u %31s %*s %4095s", majmin, mnt) != 2)
			continue;
		unescape(mnt);
		if (!strcmp(mnt, dir)) {
			snprintf(dev, len, "%s", majmin);
			rc = 0;
		}
	}
	free(line);
	fclose(f);
	return rc;
}

void dirty_limit_raise(const char *mountpoint)
{
	char dev[32], path[96];
	if (mount_device(mountpoint, dev, sizeof dev)) {
		fprintf(stderr, "cfsd: %s: not in /proc/self/mountinfo: the kernel's 1%% share of "
				"dirty pages stays\n", mountpoint);
		return;
	}
	snprintf(path, sizeof path, "/sys/class/bdi/%s/max_ratio", dev);
	FILE *f = fopen(path, "we");
	int rc = f && fprintf(f, "%d\n", DIRTY_SHARE_PERCENT) > 0 ? 0 : -errno;
	if (f && fclose(f) && !rc)
		rc = -errno;
	if (rc)
		fprintf(stderr, "cfsd: %s: %s: %s (writes are throttled to the LUNs' speed sooner)\n",
			mountpoint, path, strerror(-rc));
}
