/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The lock protocol's versions and what two processes of the corosync backend do when they
 * meet (docs/upgrading.md): one major version works together whatever the minor; another
 * major is refused.  Internal to libcfslock. */
#ifndef CFSLOCK_VERSION_H
#define CFSLOCK_VERSION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct lock_version {
	uint32_t major, minor;
	const char *release; /* NULL: not said */
};

/* This process's. */
struct lock_version lock_version_own(void);
/* What a Hello or Snapshot says; one without version fields comes from release 0.1: 1.0. */
struct lock_version lock_version_said(bool has_version, uint32_t major, uint32_t minor,
				      const char *release);

enum lock_meeting { LOCK_SAME_VERSION, LOCK_OTHER_MINOR, LOCK_REFUSED };
enum lock_meeting lock_version_meet(struct lock_version ours, struct lock_version theirs);

/* "lock protocol 1.0 (release 0.1)" into out. */
void lock_version_text(struct lock_version v, char *out, size_t len);

#endif
