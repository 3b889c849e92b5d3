/* SPDX-License-Identifier: GPL-2.0-or-later */
/* 'cfs quota': set, get and report quotas through a mount's daemon (tools/cfs_quota.c). */
#ifndef TOOLS_CFS_QUOTA_H
#define TOOLS_CFS_QUOTA_H

#include "proto/control.pb-c.h"

#include <stdio.h>

/* argv[0] is "quota". */
int cfs_quota_main(int argc, char **argv);
void cfs_quota_usage(FILE *out);
/* One record as cfs quota get --json prints it (no newline). */
void cfs_quota_print_json(const QuotaRecord *r);
/* A line of cfs status for an id near or past a limit. */
void cfs_quota_print_near(const QuotaRecord *r);

#endif
