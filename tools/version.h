/* SPDX-License-Identifier: GPL-2.0-or-later */
/* --version of every tool. */
#ifndef TOOLS_VERSION_H
#define TOOLS_VERSION_H

/* "PROG (cfs) RELEASE (built from COMMIT)" on stdout. */
void print_version(const char *prog);

#endif
