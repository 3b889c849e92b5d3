/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Who makes a request, as libcfs's set-user-ID and set-group-ID rules and its permission
 * checks ask: whether the caller has CAP_FSETID and whether a group is one of its groups.
 * FUSE gives the caller's uid, gid and thread id, SO_PEERCRED an ODM client's uid, gid and
 * pid, but neither their capabilities nor their supplementary groups, so they are read from
 * /proc, and only when asked. */
#define FUSE_USE_VERSION 312
#include "cfsd/fuse_ops.h"

#include <fuse_lowlevel.h>
#include <linux/capability.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool has_group(const char *list, uint32_t gid)
{
	char *end;
	for (const char *p = list; *p;) {
		unsigned long g = strtoul(p, &end, 10);
		if (end == p)
			break;
		if (g == gid)
			return true;
		p = end;
	}
	return false;
}

unsigned pid_privileges(int pid, const struct cfs_cred *cr, uint32_t gid)
{
	unsigned p = cr->gid == gid ? CFS_CRED_IN_GROUP : 0;
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/status", pid);
	FILE *f = pid > 0 ? fopen(path, "re") : NULL;
	if (!f) /* gone, or in a pid namespace we cannot see: what its ids say */
		return p | (cr->uid == 0 ? CFS_CRED_FSETID : 0);
	char *line = NULL;
	size_t cap = 0;
	while (getline(&line, &cap, f) > 0) {
		unsigned long long eff;
		if (sscanf(line, "CapEff: %llx", &eff) == 1 && (eff & (1ull << CAP_FSETID)))
			p |= CFS_CRED_FSETID;
		else if (!strncmp(line, "Groups:", 7) && has_group(line + 7, gid))
			p |= CFS_CRED_IN_GROUP;
	}
	free(line);
	fclose(f);
	return p;
}

static unsigned privileges(const struct cfs_cred *cr, uint32_t gid)
{
	struct caller *who = cr->ctx;
	who->asked = true;
	return pid_privileges(fuse_req_ctx(who->req)->pid, cr, gid);
}

struct cfs_cred caller_cred(fuse_req_t req, struct caller *who)
{
	const struct fuse_ctx *c = fuse_req_ctx(req);
	*who = (struct caller){.req = req};
	return (struct cfs_cred){c->uid, c->gid, c->umask, privileges, who, (uint32_t)c->pid};
}
