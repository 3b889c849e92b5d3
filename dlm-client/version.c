/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The lock protocol's version rules (version.h). */
#include "version.h"
#include "cfslock.h"
#include "release.h"

#include <stdio.h>

struct lock_version lock_version_own(void)
{
	return (struct lock_version){CFSLOCK_PROTO_MAJOR, CFSLOCK_PROTO_MINOR, CFS_RELEASE};
}

struct lock_version lock_version_said(bool has_version, uint32_t major, uint32_t minor,
				      const char *release)
{
	if (!has_version)
		return (struct lock_version){1, 0, "0.1"};
	return (struct lock_version){major, minor, release};
}

enum lock_meeting lock_version_meet(struct lock_version ours, struct lock_version theirs)
{
	if (theirs.major != ours.major)
		return LOCK_REFUSED;
	return theirs.minor == ours.minor ? LOCK_SAME_VERSION : LOCK_OTHER_MINOR;
}

void lock_version_text(struct lock_version v, char *out, size_t len)
{
	snprintf(out, len, "lock protocol %u.%u (release %s)", v.major, v.minor,
		 v.release ? v.release : "unknown");
}
