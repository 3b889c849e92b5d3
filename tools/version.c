/* SPDX-License-Identifier: GPL-2.0-or-later */
/* --version of every tool: the release (release.h) and the commit it was built from. */
#include "tools/version.h"
#include "build_id.h"
#include "release.h"

#include <stdio.h>

void print_version(const char *prog)
{
	printf("%s (cfs) %s (built from %s)\n", prog, CFS_RELEASE, CFS_BUILD_ID);
}
