/* SPDX-License-Identifier: GPL-2.0-or-later */
/* fsck.cfs: check and repair a CFS filesystem.  See man/fsck.cfs.8. */
#include "cfs/cfs.h"
#include "tools/version.h"
#include "tools/ask.h"
#include "tools/common.h"
#include "tools/fsck_mounted.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *out)
{
	fprintf(out,
		"usage: fsck.cfs [-n|-y] [--json] [--rate N] [-s|--scan PATH]... VOLUME\n"
		"Check the CFS filesystem on CVM volume VOLUME.  Mounted on this node, it is\n"
		"checked while in use, by the mount's daemon (-n only); -y needs it unmounted\n"
		"on every node.\n"
		"  -n               check only, change nothing (the default)\n"
		"  -y               repair what is found\n"
		"  --json           the summary as JSON on stdout\n"
		"  --rate N         mounted: check N inodes a second at most (default no limit)\n"
		"  -s, --scan PATH  where to look for LUNs (default $CVM_SCAN)\n"
		"Exit status (as fsck(8)): 0 clean, 1 problems repaired, 4 problems left,\n"
		"8 could not check, 16 bad usage, 32 stopped.  See fsck.cfs(8).\n");
}

static void progress(void *arg, const char *what, unsigned long long done,
		     unsigned long long total)
{
	(void)arg;
	print_progress("fsck.cfs", what, done, total);
}

static void print_line(void *arg, const char *line)
{
	fprintf(arg, "fsck.cfs: %s\n", line);
}

int main(int argc, char **argv)
{
	static const struct option longs[] = {{"json", no_argument, NULL, 'j'},
					      {"scan", required_argument, NULL, 's'},
					      {"rate", required_argument, NULL, 'r'},
					      {"version", no_argument, NULL, 'V'}, {"help", no_argument, NULL, 'h'}, {0}};
	struct scan_paths scan = {0};
	bool repair = false, check = false, json = false;
	uint64_t rate = 0;
	int c;
	while ((c = getopt_long(argc, argv, "nyfps:hV", longs, NULL)) != -1) {
		switch (c) {
		case 'n': check = true; break;
		case 'y': case 'p': repair = true; break;
		case 'f': break; /* always a full check */
		case 'j': json = true; break;
		case 's': scan_paths_add(&scan, optarg); break;
		case 'r':
			if (!parse_number(optarg, &rate)) {
				fprintf(stderr, "fsck.cfs: --rate %s: give a number of inodes a second "
						"(0: no limit)\n", optarg);
				return FSCK_USAGE;
			}
			break;
		case 'V': print_version("fsck.cfs"); exit(0);
		case 'h': usage(stdout); return FSCK_OK;
		default: usage(stderr); return FSCK_USAGE;
		}
	}
	if (repair && check) {
		fprintf(stderr, "fsck.cfs: -n and -y contradict each other: give one\n");
		return FSCK_USAGE;
	}
	if (argc - optind != 1) {
		fprintf(stderr, "fsck.cfs: give one volume\n");
		usage(stderr);
		return FSCK_USAGE;
	}
	const char *name = argv[optind];
	struct cvm_volume *vol;
	if (open_volume("fsck.cfs", &scan, name, repair ? CVM_OPEN_RDWR : CVM_OPEN_RDONLY, &vol)) {
		scan_paths_free(&scan);
		return FSCK_ERROR;
	}

	char dir[4096];
	if (tool_mount_of("fsck.cfs", cvm_volume_config(vol), dir, sizeof dir)) {
		cvm_volume_close(vol);
		scan_paths_free(&scan);
		if (!repair)
			return fsck_mounted(name, dir, rate, json);
		fprintf(stderr, "fsck.cfs: volume %s is mounted at %s: fsck.cfs -y repairs only a "
				"filesystem unmounted on every node (fsck.cfs -n checks it mounted)\n",
			name, dir);
		return FSCK_ERROR;
	}
	char proto[16] = "";
	if (!repair && !cfs_get_lockproto(vol, proto, sizeof proto) && strcmp(proto, "local")) {
		int code = fsck_through_own_mount(name, &scan, rate, json);
		if (code >= 0) {
			cvm_volume_close(vol);
			scan_paths_free(&scan);
			return code;
		}
	}
	struct cfs_fsck_report r;
	FILE *msgs = json ? stderr : stdout;
	int rc = cfs_fsck(vol, repair, print_line, msgs, progress, &r);
	cvm_volume_close(vol);
	scan_paths_free(&scan);
	int code = rc ? FSCK_ERROR : r.problems == 0 ? FSCK_OK
				   : r.repaired >= r.problems ? FSCK_FIXED : FSCK_LEFT;
	if (rc && rc != -EUCLEAN && rc != -ENODATA && rc != -EBUSY && rc != -EPROTONOSUPPORT &&
	    rc != -EROFS)
		fprintf(stderr, "fsck.cfs: volume %s: check stopped: %s\n", name, strerror(-rc));
	if (json) {
		printf("{\"volume\": ");
		json_string(stdout, name);
		printf(", \"clean\": %s, \"problems\": %u, \"repaired\": %u, \"inodes\": %llu, "
		       "\"directories\": %llu, \"files\": %llu, \"blocks_used\": %llu, \"exit\": %d}\n",
		       code == FSCK_OK ? "true" : "false", r.problems, r.repaired,
		       (unsigned long long)r.inodes, (unsigned long long)r.directories,
		       (unsigned long long)r.files, (unsigned long long)r.blocks_used, code);
	} else if (!rc) {
		printf("fsck.cfs: volume %s: %s: %llu directories, %llu files, %llu blocks in use; "
		       "%u problem%s, %u repaired\n", name,
		       code == FSCK_OK ? "clean" : code == FSCK_FIXED ? "repaired" : "NOT CLEAN",
		       (unsigned long long)r.directories, (unsigned long long)r.files,
		       (unsigned long long)r.blocks_used, r.problems, r.problems == 1 ? "" : "s",
		       r.repaired);
		if (code == FSCK_LEFT && !repair)
			printf("fsck.cfs: run fsck.cfs -y %s to repair\n", name);
	}
	return code;
}
