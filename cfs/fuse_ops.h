/* cfsd's FUSE operations and the state they share with its main. */
#ifndef CFS_FUSE_OPS_H
#define CFS_FUSE_OPS_H

#include "cfs/cfs.h"

#include <stdbool.h>

struct scan_paths;
struct fuse_session;
struct odm_server;
struct cfsd {
	struct cfs_fs *fs;
	struct cvm_volume *vol;
	bool fs_dboptimized;
	const char *volume;
	const struct scan_paths *scan; /* to find the LUNs again after a cvm grow */
	struct fuse_session *se;
	struct odm_server *odm;        /* ODM clients' maps (NULL without a control socket) */
};

struct fuse_lowlevel_ops;
extern const struct fuse_lowlevel_ops cfsd_ops;

#endif
