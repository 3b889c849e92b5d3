/* SPDX-License-Identifier: GPL-2.0-or-later */
/* mkfs.cfs: make a CFS filesystem on a CVM volume.  See man/mkfs.cfs.8. */
#include "cfs/cfs.h"
#include "tools/version.h"
#include "tools/common.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *out)
{
	fprintf(out,
		"usage: mkfs.cfs [-b BLOCKSIZE] [-J SLOTS] [-L LABEL] [-p PROTOCOL]\n"
		"                [--journal-size SIZE] [-O FEATURES] [--feature-level LEVEL]\n"
		"                [--force] [-s|--scan PATH]... VOLUME\n"
		"Make a CFS filesystem on CVM volume VOLUME.\n"
		"  -b SIZE          block size: 4k (default), 8k, 16k, 32k or 64k\n"
		"  -J SLOTS         node slots, one journal each (default 4, at most 64)\n"
		"  -L LABEL         filesystem label (at most 63 characters)\n"
		"  -p PROTOCOL      lock protocol every mount uses: local (default, one node),\n"
		"                   corosync or dlm (mounted on every node of a cluster)\n"
		"  --journal-size S journal size per slot (default 4M)\n"
		"  -O FEATURES      features to turn on, or off with '^' (a,^b), over those of\n"
		"                   the level (cfs(5) lists them)\n"
		"  --feature-level L max-compat (none: every release reads it), default or\n"
		"                   max-features\n"
		"  --force          overwrite a filesystem already on the volume\n"
		"  -s, --scan PATH  where to look for LUNs (default $CVM_SCAN)\n"
		"Exit status: 0 made, 1 failed, 2 bad usage.  See mkfs.cfs(8).\n");
}

static int parse_u32(const char *what, const char *s, uint64_t max, uint32_t *out, bool size)
{
	uint64_t v;
	char *end;
	if (size ? cvm_parse_size(s, &v) : (v = strtoull(s, &end, 10), !*s || *end) ? -1 : 0) {
		fprintf(stderr, "mkfs.cfs: %s '%s' is not a %s\n", what, s, size ? "size" : "number");
		return -1;
	}
	if (v == 0 || v > max) {
		fprintf(stderr, "mkfs.cfs: %s %s is out of range (1 to %llu)\n", what, s,
			(unsigned long long)max);
		return -1;
	}
	*out = (uint32_t)v;
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option longs[] = {
		{"force", no_argument, NULL, 'f'}, {"scan", required_argument, NULL, 's'},
		{"journal-size", required_argument, NULL, 'j'}, {"version", no_argument, NULL, 'V'}, {"help", no_argument, NULL, 'h'},
		{"lockproto", required_argument, NULL, 'p'},
		{"feature-level", required_argument, NULL, 'F'},
		{0}};
	struct cfs_mkfs_opts o = {0};
	struct scan_paths scan = {0};
	uint32_t journal_bytes = 0;
	int c;
	while ((c = getopt_long(argc, argv, "b:J:L:p:s:O:hV", longs, NULL)) != -1) {
		switch (c) {
		case 'b':
			if (parse_u32("block size", optarg, 65536, &o.block_size, true))
				return EXIT_USAGE;
			break;
		case 'J':
			if (parse_u32("slot count", optarg, 64, &o.slots, false))
				return EXIT_USAGE;
			break;
		case 'j':
			if (parse_u32("journal size", optarg, 1u << 30, &journal_bytes, true))
				return EXIT_USAGE;
			break;
		case 'L': o.label = optarg; break;
		case 'p':
			if (!cfs_lockproto_valid(optarg)) {
				fprintf(stderr, "mkfs.cfs: lock protocol '%s': give local, corosync or "
						"dlm\n", optarg);
				return EXIT_USAGE;
			}
			o.lockproto = optarg;
			break;
		case 'f': o.force = true; break;
		case 'O': o.features = optarg; break;
		case 'F': o.feature_level = optarg; break;
		case 's': scan_paths_add(&scan, optarg); break;
		case 'V': print_version("mkfs.cfs"); exit(0);
		case 'h': usage(stdout); return EXIT_OK;
		default: usage(stderr); return EXIT_USAGE;
		}
	}
	if (argc - optind != 1) {
		fprintf(stderr, "mkfs.cfs: give one volume\n");
		usage(stderr);
		return EXIT_USAGE;
	}
	const char *name = argv[optind];
	struct cvm_volume *vol;
	if (open_volume("mkfs.cfs", &scan, name, CVM_OPEN_RDWR, &vol)) {
		scan_paths_free(&scan);
		return EXIT_FAILED;
	}

	uint32_t bs = o.block_size ? o.block_size : 4096;
	o.journal_blocks = journal_bytes ? (journal_bytes + bs - 1) / bs : 0;
	int rc = cfs_mkfs(vol, &o, print_progress, "mkfs.cfs");
	if (rc)
		fprintf(stderr, "mkfs.cfs: %s\n", cfs_last_error());
	else {
		char size[32];
		cvm_format_size(cvm_volume_size(vol), size, sizeof size);
		printf("mkfs.cfs: made a CFS filesystem on volume %s: %s, %u-byte blocks, %u node "
		       "slots, lock protocol %s%s%s\n", name, size, bs, o.slots ? o.slots : 4,
		       o.lockproto ? o.lockproto : "local", o.label ? ", label " : "",
		       o.label ? o.label : "");
		struct cfs_info in;
		if (!cfs_info(vol, &in))
			printf("mkfs.cfs: format %u, features: %s\n", in.format,
			       in.feature_list[0] ? in.feature_list : "none");
	}
	cvm_volume_close(vol);
	scan_paths_free(&scan);
	return rc ? EXIT_FAILED : EXIT_OK;
}
