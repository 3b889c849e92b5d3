/* SPDX-License-Identifier: GPL-2.0-or-later */
/* How many dirty pages the kernel may keep for a mount with a write-back cache.
 *
 * The kernel lets a FUSE mount's dirty pages take 1% of the system's dirty limit, and holds
 * that strictly (its bdi's strict_limit): a safeguard against a daemon an unprivileged user
 * runs.  With it, a program rewriting a few hundred megabytes at random is throttled to the
 * speed at which every page it dirties goes to cfsd and the LUNs, as if there were no cache
 * (bench/cfs's database-like load: 146,000 IOPS at 1%, 430,000 at 10-50%, ext4 322,000).
 * cfsd runs as root and answers for its pages, so it gives its mount DIRTY_SHARE_PERCENT of
 * the limit, as a local filesystem's disk would have. */
#include "cfs/control.h"
#include "cfsd/fuse_ops.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysinfo.h>

#define DIRTY_SHARE_PERCENT 20

/* The device of what is mounted at dir (the last listed: the newest mount there). */
struct device_of {
	const char *dir;
	char dev[32];
};

static void match_dir(const struct cfs_mount_entry *m, void *arg)
{
	struct device_of *d = arg;
	if (!strcmp(m->dir, d->dir))
		snprintf(d->dev, sizeof d->dev, "%s", m->dev);
}

void dirty_limit_raise(const char *mountpoint)
{
	struct device_of d = {.dir = mountpoint};
	char path[96];
	if (cfs_mountinfo_each(match_dir, &d) || !d.dev[0]) {
		fprintf(stderr, "cfsd: %s: not in /proc/self/mountinfo: the kernel's 1%% share of "
				"dirty pages stays\n", mountpoint);
		return;
	}
	snprintf(path, sizeof path, "/sys/class/bdi/%s/max_ratio", d.dev);
	FILE *f = fopen(path, "we");
	int rc = f && fprintf(f, "%d\n", DIRTY_SHARE_PERCENT) > 0 ? 0 : -errno;
	if (f && fclose(f) && !rc)
		rc = -errno;
	if (rc)
		fprintf(stderr, "cfsd: %s: %s: %s (writes are throttled to the LUNs' speed sooner)\n",
			mountpoint, path, strerror(-rc));
}

static uint64_t vm_setting(const char *name)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/sys/vm/%s", name);
	FILE *f = fopen(path, "re");
	unsigned long long v = 0;
	if (f) {
		if (fscanf(f, "%llu", &v) != 1)
			v = 0;
		fclose(f);
	}
	return v;
}

uint64_t dirty_limit_bytes(void)
{
	/* The kernel's global limit is of the memory it can write back (less than MemTotal):
	 * counted of all of it, the bound is above what it lets the mount keep, never below. */
	uint64_t global = vm_setting("dirty_bytes");
	if (!global) {
		struct sysinfo si;
		uint64_t ram = sysinfo(&si) ? 0 : (uint64_t)si.totalram * si.mem_unit;
		uint64_t ratio = vm_setting("dirty_ratio");
		global = ram / 100 * (ratio ? ratio : 20);
	}
	return global / 100 * DIRTY_SHARE_PERCENT;
}
