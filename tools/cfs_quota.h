/* 'cfs quota': set, get and report quotas through a mount's daemon (tools/cfs_quota.c). */
#ifndef TOOLS_CFS_QUOTA_H
#define TOOLS_CFS_QUOTA_H

#include <stdio.h>

/* argv[0] is "quota". */
int cfs_quota_main(int argc, char **argv);
void cfs_quota_usage(FILE *out);

#endif
