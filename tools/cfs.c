/* SPDX-License-Identifier: GPL-2.0-or-later */
/* cfs: mount, unmount, status and online growth of CFS filesystems; also the mount and
 * unmount helpers (installed as mount.cfs and umount.cfs, so `mount -t cfs VOLUME DIR -o ...`
 * works and a plain umount(8) waits for the daemon).  See man/cfs.8. */
#include "cfs/cfs.h"
#include "tools/version.h"
#include "release.h"
#include "cfs/control.h"
#include "cvm/cvm.h"
#include "proto/control.pb-c.h"
#include "tools/ask.h"
#include "tools/cfs_quota.h"
#include "tools/common.h"
#include "tools/utab.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/statvfs.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static void usage(FILE *out)
{
	fprintf(out,
		"usage: cfs mount VOLUME DIR [-o OPTIONS] [-s|--scan PATH]...\n"
		"       cfs mount VOLUME DIR -o remount,ro|rw  (also mount -o remount,ro DIR)\n"
		"       cfs umount DIR                          (writes back, then waits for cfsd)\n"
		"       cfs status DIR [--json | --prometheus[=FILE]]\n"
		"       cfs grow DIR [--json]\n"
		"       cfs addslots DIR COUNT [--json]         (more node slots, while mounted)\n"
		"       cfs locks DIR [--json]                  (the lock table, who holds and waits)\n"
		"       cfs lockproto VOLUME [local|corosync|dlm] [-s|--scan PATH]...\n"
		"       cfs show VOLUME [--json] [-s|--scan PATH]...  (its superblock: format,\n"
		"                                               features; read only)\n"
		"       cfs tune VOLUME -O FEATURES [-s|--scan PATH]... (FEATURES: a,^b turns a\n"
		"                                               on, b off; unmounted everywhere)\n"
		"       cfs quota set|get|report DIR ...        (limits and usage per user, group,\n"
		"                                               project: cfs quota --help)\n"
		"       cfs --version\n"
		"       mount.cfs VOLUME DIR [-o OPTIONS]       (as called by mount -t cfs)\n"
		"       umount.cfs DIR [-l] [-f]                (as called by umount DIR)\n"

		"Mount options: dboptimized, cluster=local|corosync|dlm, node=SLOT, ro, rw, nowriteback,\n"
		"namecache, nouring, scan=PATHS, log=FILE, fence=PROGRAM, lock_cache=N, quota_fold=S,\n"
		"odm_group=GROUP, and FUSE's (allow_other, ...).\n"
		"See cfs(8).\n"
		"Exit status: 0 done, 1 failed, 2 bad usage.\n");
}

static int ask(const char *dir, ControlRequest__Op op, ControlReply **out)
{
	ControlRequest req = CONTROL_REQUEST__INIT;
	req.op = op;
	return tool_ask("cfs", dir, &req, out);
}

/* The per-mount flags a remount must give again, or the kernel clears them. */
static unsigned long mount_flags_of(const char *dir)
{
	static const struct { unsigned long st, ms; } map[] = {
		{ST_NOSUID, MS_NOSUID}, {ST_NODEV, MS_NODEV}, {ST_NOEXEC, MS_NOEXEC},
		{ST_NOATIME, MS_NOATIME}, {ST_NODIRATIME, MS_NODIRATIME}, {ST_RELATIME, MS_RELATIME}};
	struct statvfs sv;
	unsigned long flags = 0;
	if (statvfs(dir, &sv) == 0)
		for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
			flags |= sv.f_flag & map[i].st ? map[i].ms : 0;
	return flags;
}

/* What a remount in opts asks for: NOT_REMOUNT, TO_RW, TO_RO (the last of ro and rw wins),
 * or NEITHER. */
enum remount { NOT_REMOUNT, NEITHER, TO_RW, TO_RO };
static enum remount remount_asked(const char *opts)
{
	bool remount = false;
	enum remount to = NEITHER;
	char copy[4096];
	snprintf(copy, sizeof copy, "%s", opts ? opts : "");
	for (char *save, *o = strtok_r(copy, ",", &save); o; o = strtok_r(NULL, ",", &save)) {
		remount |= !strcmp(o, "remount");
		to = !strcmp(o, "ro") ? TO_RO : !strcmp(o, "rw") ? TO_RW : to;
	}
	return remount ? to : NOT_REMOUNT;
}

/* mount -o remount,ro|rw DIR: the daemon commits and refuses changes before the kernel's
 * mount turns read-only, and takes them again before it turns read-write.  The other options
 * of a mount cannot change on a remount and are ignored. */
static int do_remount(const char *dir, enum remount to)
{
	bool ro = to == TO_RO;
	if (to == NEITHER) {
		fprintf(stderr, "cfs: remount of %s: say ro or rw (nothing else changes on a remount)\n",
			dir);
		return EXIT_USAGE;
	}
	unsigned long flags = MS_REMOUNT | mount_flags_of(dir) | (ro ? MS_RDONLY : 0);
	ControlRequest req = CONTROL_REQUEST__INIT;
	req.op = CONTROL_REQUEST__OP__READ_ONLY;
	req.has_size = true;
	req.size = (uint64_t)ro;
	ControlReply *r;
	/* What a write-back cache holds goes to the daemon while it still takes writes. */
	int dfd = ro ? open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
	if (dfd >= 0) {
		syncfs(dfd);
		close(dfd);
	}
	if (ro && mount(NULL, dir, NULL, flags, NULL)) {
		fprintf(stderr, "cfs: remount of %s read-only: %s%s\n", dir, strerror(errno),
			errno == EBUSY ? " (files are open for writing there: close them first)" : "");
		return EXIT_FAILED;
	}
	if (tool_ask("cfs", dir, &req, &r)) {
		if (ro) /* the kernel refuses writes already; what the daemon has may not be written */
			fprintf(stderr, "cfs: %s: the kernel refuses writes, but the daemon did not "
				"commit: unmount it\n", dir);
		return EXIT_FAILED;
	}
	control_reply__free_unpacked(r, NULL);
	if (!ro && mount(NULL, dir, NULL, flags, NULL)) {
		fprintf(stderr, "cfs: remount of %s read-write: %s\n", dir, strerror(errno));
		return EXIT_FAILED;
	}
	return EXIT_OK;
}

static int do_mount(const char *volume, const char *dir, const char *opts,
		    const struct scan_paths *scan)
{
	enum remount to = remount_asked(opts);
	if (to != NOT_REMOUNT)
		return do_remount(dir, to);
	char all[4096] = "";
	size_t len = 0;
	if (opts && *opts)
		len += (size_t)snprintf(all, sizeof all, "%s", opts);
	for (size_t i = 0; i < scan->n && len < sizeof all; i++)
		len += (size_t)snprintf(all + len, sizeof all - len, "%sscan=%s", len ? "," : "",
					scan->paths[i]);
	char *args[] = {"cfsd", "-o", all, (char *)volume, (char *)dir, NULL};
	if (!all[0]) {
		args[1] = (char *)volume;
		args[2] = (char *)dir;
		args[3] = NULL;
	}
	/* cfsd's first process exits once the filesystem is mounted (or could not be). */
	pid_t pid = fork();
	if (pid < 0) {
		fprintf(stderr, "cfs: cannot start cfsd: %s\n", strerror(errno));
		return EXIT_FAILED;
	}
	if (pid == 0)
		exec_beside("cfs", "cfsd", args);
	int rc = wait_child(pid);
	if (rc == EXIT_OK)
		utab_record_helper(dir);
	return rc < 0 ? EXIT_FAILED : rc;
}

static void print_nodes_json(MountedNode *const *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		printf("%s{\"slot\": %u, \"node_id\": %u}", i ? ", " : "", v[i]->slot,
		       v[i]->node_id);
}

/* The daemon's last restripe (cvm restripe of the mounted volume), as ", \"restripe\": {...}". */
static void print_restripe_json(const RestripeStatus *rs)
{
	if (!rs)
		return;
	printf(", \"restripe\": {\"state\": \"%s\", \"moves_done\": %llu, \"moves_total\": %llu, "
	       "\"chunk_bytes\": %llu, \"moved_bytes\": %llu, \"seconds\": %.1f, "
	       "\"io_waits\": %llu, \"io_wait_max_us\": %llu, \"io_held\": %llu, \"error\": ",
	       rs->state, (unsigned long long)rs->moves_done, (unsigned long long)rs->moves_total,
	       (unsigned long long)rs->chunk_bytes, (unsigned long long)rs->moved_bytes, rs->seconds,
	       (unsigned long long)rs->io_waits, (unsigned long long)rs->io_wait_max_us,
	       (unsigned long long)rs->io_held);
	if (rs->error)
		json_string(stdout, rs->error);
	else
		printf("null");
	printf("}");
}

static void print_status(const char *dir, const ControlReply *r, bool json)
{
	const ControlStatus *s = r->status;
	if (!s)
		return;
	if (json) {
		printf("{\"mountpoint\": ");
		json_string(stdout, dir);
		printf(", \"volume\": ");
		json_string(stdout, s->volume);
		printf(", \"label\": ");
		json_string(stdout, s->label);
		printf(", \"uuid\": \"%s\", \"block_size\": %u, \"total_blocks\": %llu, "
		       "\"free_blocks\": %llu, \"groups\": %u, \"slot\": %u, \"slots\": %u, "
		       "\"dboptimized\": %s, \"commits\": %llu, \"commit_blocks\": %llu, "
		       "\"reads\": %llu, \"writes\": %llu, \"read_bytes\": %llu, "
		       "\"write_bytes\": %llu, \"pid\": %d",
		       s->fs_uuid, s->block_size, (unsigned long long)s->total_blocks,
		       (unsigned long long)s->free_blocks, s->groups, s->slot, s->slots,
		       s->dboptimized ? "true" : "false", (unsigned long long)s->commits,
		       (unsigned long long)s->commit_blocks, (unsigned long long)s->reads,
		       (unsigned long long)s->writes, (unsigned long long)s->read_bytes,
		       (unsigned long long)s->write_bytes, s->pid);
		if (r->has_added_blocks)
			printf(", \"added_blocks\": %llu", (unsigned long long)r->added_blocks);
		printf(", \"lockproto\": \"%s\", \"node_id\": %u, \"lock_messages\": %llu, "
		       "\"lock_waits\": %llu, \"lock_wait_ms\": %llu, \"mounted\": [",
		       s->lockproto ? s->lockproto : "local", s->node_id,
		       (unsigned long long)s->lock_messages, (unsigned long long)s->lock_waits,
		       (unsigned long long)s->lock_wait_ms);
		print_nodes_json(s->mounted, s->n_mounted);
		printf("], \"recovering\": [");
		print_nodes_json(s->recovering, s->n_recovering);
		printf("], \"fenced\": %s, \"fence_interval_ms\": %u, \"locks_cached\": %llu, "
		       "\"lock_cache_limit\": %u, \"locks_given_back\": %llu, "
		       "\"journal_anchors\": %llu, \"checkpoint_blocks\": %llu, \"flushes\": %llu, "
		       "\"writeback\": %s, \"kernel_names\": %s, \"fuse_transport\": \"%s\", "
		       "\"uring_requests\": %llu, \"uring_direct\": %llu, \"uring_waiting\": %llu, "
		       "\"dev_direct\": %llu, \"writebehind_mib\": %u, \"behind_writes\": %llu, "
		       "\"behind_flushed\": %llu, \"behind_kept\": %llu, \"inodes_read_ahead\": %llu, "
		       "\"lease_ms\": %u, \"evict_ms\": %u, \"evicted\": %s, \"beat_gap_max_ms\": %u, "
		       "\"release\": \"%s\", \"features\": ",
		       s->fenced ? "true" : "false", s->fence_interval_ms,
		       (unsigned long long)s->locks_cached, s->lock_cache_limit,
		       (unsigned long long)s->locks_given_back,
		       (unsigned long long)s->journal_anchors,
		       (unsigned long long)s->checkpoint_blocks, (unsigned long long)s->flushes,
		       s->writeback ? "true" : "false",
		       s->kernel_names ? "true" : "false", s->has_uring_requests ? "io_uring" : "dev",
		       (unsigned long long)s->uring_requests, (unsigned long long)s->uring_direct,
		       (unsigned long long)s->uring_waiting, (unsigned long long)s->dev_direct,
		       s->writebehind_mib, (unsigned long long)s->behind_writes,
		       (unsigned long long)s->behind_flushed, (unsigned long long)s->behind_kept,
		       (unsigned long long)s->inodes_read_ahead, s->lease_ms, s->evict_ms,
		       s->evicted ? "true" : "false", s->beat_gap_max_ms,
		       s->release ? s->release : "");
		json_string(stdout, s->features ? s->features : "");
		print_restripe_json(s->restripe);
		printf(", \"luns\": [");
		for (size_t i = 0; i < s->n_luns; i++) {
			printf("%s{\"path\": ", i ? ", " : "");
			json_string(stdout, s->luns[i]->path);
			printf(", \"io_errors\": %llu}", (unsigned long long)s->luns[i]->io_errors);
		}
		printf("]");
		printf(", \"quotas\": [");
		for (size_t i = 0; i < r->n_quotas; i++) {
			printf("%s", i ? ", " : "");
			cfs_quota_print_json(r->quotas[i]);
		}
		printf("], \"quotas_unread\": %s}\n", r->quotas_unread ? "true" : "false");
		return;
	}
	char total[32], avail[32];
	cvm_format_size(s->total_blocks * s->block_size, total, sizeof total);
	cvm_format_size(s->free_blocks * s->block_size, avail, sizeof avail);
	printf("%s: volume %s, label '%s', uuid %s\n", dir, s->volume, s->label, s->fs_uuid);
	printf("  size %s (%llu blocks of %u bytes in %u groups), %s free\n", total,
	       (unsigned long long)s->total_blocks, s->block_size, s->groups, avail);
	printf("  node slot %u of %u%s%s, daemon pid %d (release %s)\n", s->slot, s->slots,
	       s->dboptimized ? ", dboptimized" : "", s->writeback ? ", write-back cache" : "",
	       s->pid, s->release ? s->release : "before 0.2");
	printf("  features: %s\n", s->features && s->features[0] ? s->features : "none");
	for (size_t i = 0; i < r->n_quotas; i++)
		cfs_quota_print_near(r->quotas[i]);
	if (r->quotas_unread)
		printf("  quotas: not read now (another node holds the metadata lock, or is being "
		       "recovered): ask again\n");
	printf("  %llu reads (%llu bytes), %llu writes (%llu bytes), %llu journal commits "
	       "(%llu blocks; %llu checkpoints wrote %llu in place), %llu flushes\n",
	       (unsigned long long)s->reads, (unsigned long long)s->read_bytes,
	       (unsigned long long)s->writes, (unsigned long long)s->write_bytes,
	       (unsigned long long)s->commits, (unsigned long long)s->commit_blocks,
	       (unsigned long long)s->journal_anchors,
	       (unsigned long long)s->checkpoint_blocks, (unsigned long long)s->flushes);
	if (s->writebehind_mib)
		printf("  write-behind: up to %u MiB kept, %llu bytes now; %llu writes kept, %llu "
		       "bytes written out since\n", s->writebehind_mib,
		       (unsigned long long)s->behind_kept, (unsigned long long)s->behind_writes,
		       (unsigned long long)s->behind_flushed);
	if (r->has_added_blocks)
		printf("  grown by %llu blocks\n", (unsigned long long)r->added_blocks);
	for (size_t i = 0; i < s->n_luns; i++)
		if (s->luns[i]->io_errors)
			printf("  LUN %zu (%s): %llu failed reads, writes or flushes (the daemon's log "
			       "says which)\n", i, s->luns[i]->path,
			       (unsigned long long)s->luns[i]->io_errors);
	const RestripeStatus *rs = s->restripe;
	if (rs)
		printf("  volume restripe %s: %llu of %llu moves; %llu I/Os waited for a batch, at "
		       "most %.1f ms%s%s\n", rs->state, (unsigned long long)rs->moves_done,
		       (unsigned long long)rs->moves_total, (unsigned long long)rs->io_waits,
		       (double)rs->io_wait_max_us / 1000, rs->error ? ": " : "",
		       rs->error ? rs->error : "");
	if (s->has_uring_requests) {
		printf("  FUSE requests through io_uring (%llu so far",
		       (unsigned long long)s->uring_requests);
		if (s->dboptimized)
			printf("; %llu direct reads and writes sent to the LUNs by its threads",
			       (unsigned long long)s->uring_direct);
		if (s->uring_waiting)
			printf("; %llu waiting for locks other nodes hold",
			       (unsigned long long)s->uring_waiting);
		printf(")\n");
	} else if (s->has_dev_direct) {
		printf("  FUSE requests through /dev/fuse (%llu direct reads and writes sent to the "
		       "LUNs without holding a worker)\n", (unsigned long long)s->dev_direct);
	}
	if (!s->lockproto || !strcmp(s->lockproto, "local")) {
		printf("  lock protocol local: mounted on this node only\n");
		return;
	}
	printf("  lock protocol %s, this node is node %u (%llu lock messages sent); mounted on "
	       "%zu node%s:", s->lockproto, s->node_id, (unsigned long long)s->lock_messages,
	       s->n_mounted, s->n_mounted == 1 ? "" : "s");
	for (size_t i = 0; i < s->n_mounted; i++)
		printf(" node %u (slot %u)%s", s->mounted[i]->node_id, s->mounted[i]->slot,
		       i + 1 < s->n_mounted ? "," : "\n");
	if (!s->n_mounted)
		printf("\n");
	printf("  %llu lock grants cached (limit %u, %llu given back for it)\n",
	       (unsigned long long)s->locks_cached, s->lock_cache_limit,
	       (unsigned long long)s->locks_given_back);
	printf("  %llu waits for lock grants, %.1f s in all\n", (unsigned long long)s->lock_waits,
	       (double)s->lock_wait_ms / 1000);
	if (s->kernel_names)
		printf("  the kernel keeps names of this mount until another node changes their "
		       "directory (namecache)\n");
	for (size_t i = 0; i < s->n_recovering; i++)
		printf("  node %u (slot %u) died: its journal is replayed after the fence interval "
		       "(%u ms)\n", s->recovering[i]->node_id, s->recovering[i]->slot,
		       s->fence_interval_ms);
	if (s->lease_ms)
		printf("  membership lease %u ms (its longest wait for a beat so far %u ms); a "
		       "member silent for %u ms is evicted\n", s->lease_ms, s->beat_gap_max_ms,
		       s->evict_ms);
	if (s->fenced)
		printf("  FENCED: %s; every call fails with EIO until the filesystem is "
		       "unmounted and mounted again\n",
		       s->evicted ? "the cluster evicted this node while it stalled"
				  : "this node lost quorum");
}

/* Show or change the lock protocol recorded in the superblock. */
static int do_lockproto(const char *volume, const char *proto, struct scan_paths *scan)
{
	if (proto && !cfs_lockproto_valid(proto)) {
		fprintf(stderr, "cfs: lock protocol '%s': give local, corosync or dlm\n", proto);
		return EXIT_USAGE;
	}
	struct cvm_volume *vol;
	if (open_volume("cfs", scan, volume, proto ? CVM_OPEN_RDWR : CVM_OPEN_RDONLY, &vol))
		return EXIT_FAILED;
	char now[16];
	int rc = proto ? cfs_set_lockproto(vol, proto) : cfs_get_lockproto(vol, now, sizeof now);
	if (rc)
		fprintf(stderr, "cfs: %s\n", cfs_last_error()[0] ? cfs_last_error() : strerror(-rc));
	else if (proto)
		printf("cfs: the filesystem on %s now uses lock protocol %s\n", volume, proto);
	else
		printf("%s\n", now);
	cvm_volume_close(vol);
	return rc ? EXIT_FAILED : EXIT_OK;
}

/* The superblock as this release reads it: what a mount would meet. */
static int do_show(const char *volume, bool json, struct scan_paths *scan)
{
	struct cvm_volume *vol;
	if (open_volume("cfs", scan, volume, CVM_OPEN_RDONLY, &vol))
		return EXIT_FAILED;
	struct cfs_info in;
	int rc = cfs_info(vol, &in);
	cvm_volume_close(vol);
	if (rc) {
		fprintf(stderr, "cfs: %s\n", cfs_last_error()[0] ? cfs_last_error() : strerror(-rc));
		return EXIT_FAILED;
	}
	if (json) {
		printf("{\"volume\": ");
		json_string(stdout, volume);
		printf(", \"label\": ");
		json_string(stdout, in.label);
		printf(", \"uuid\": \"%s\", \"lockproto\": \"%s\", \"format\": %u, "
		       "\"compat\": %u, \"ro_compat\": %u, \"incompat\": %u, \"features\": ",
		       in.fs_uuid, in.lockproto, in.format, in.features[0], in.features[1],
		       in.features[2]);
		json_string(stdout, in.feature_list);
		printf(", \"block_size\": %u, \"total_blocks\": %llu, \"groups\": %u, "
		       "\"slots\": %u, \"journal_blocks\": %u, \"generation\": %llu, "
		       "\"ctime\": %llu, \"mtime\": %llu, \"usable\": ", in.block_size,
		       (unsigned long long)in.total_blocks, in.nags, in.nslots, in.journal_blocks,
		       (unsigned long long)in.generation, (unsigned long long)in.ctime,
		       (unsigned long long)in.mtime);
		json_string(stdout, in.usable);
		printf(", \"release\": \"%s\"}\n", CFS_RELEASE);
		return EXIT_OK;
	}
	char size[32], made[32];
	cvm_format_size(in.total_blocks * in.block_size, size, sizeof size);
	time_t t = (time_t)in.ctime;
	strftime(made, sizeof made, "%F %T", localtime(&t));
	printf("%s: CFS filesystem, label '%s', uuid %s, made %s\n", volume, in.label, in.fs_uuid,
	       made);
	printf("  format %u, features: %s\n", in.format, in.feature_list[0] ? in.feature_list : "none");
	printf("  %s in %llu blocks of %u bytes (%u groups), %u node slots with %u-block "
	       "journals, lock protocol %s\n", size, (unsigned long long)in.total_blocks,
	       in.block_size, in.nags, in.nslots, in.journal_blocks, in.lockproto);
	printf("  this release (%s) can use it %s\n", CFS_RELEASE, in.usable);
	return EXIT_OK;
}

static int do_tune(const char *volume, const char *features, struct scan_paths *scan)
{
	if (!features) {
		fprintf(stderr, "cfs: tune: give the features to change with -O (see cfs(5))\n");
		return EXIT_USAGE;
	}
	struct cvm_volume *vol;
	if (open_volume("cfs", scan, volume, CVM_OPEN_RDWR, &vol))
		return EXIT_FAILED;
	int rc = cfs_tune(vol, features, print_progress, "cfs tune");
	struct cfs_info in;
	if (!rc)
		rc = cfs_info(vol, &in);
	cvm_volume_close(vol);
	if (rc) {
		fprintf(stderr, "cfs: %s\n", cfs_last_error()[0] ? cfs_last_error() : strerror(-rc));
		return rc == -EINVAL ? EXIT_USAGE : EXIT_FAILED;
	}
	printf("cfs: the filesystem on %s now has features: %s\n", volume,
	       in.feature_list[0] ? in.feature_list : "none");
	return EXIT_OK;
}

struct status_of {
	const char *dir;
	const ControlStatus *s;
};

/* A label's value in Prometheus's text format: backslash, quote and newline escaped. */
static void label(FILE *f, const char *name, const char *v, const char *after)
{
	fprintf(f, "%s=\"", name);
	prom_label_value(f, v, strlen(v));
	fprintf(f, "\"%s", after);
}

/* Prometheus's text format: what monitoring alerts on. */
static void fill_prometheus(FILE *f, void *arg)
{
	const struct status_of *st = arg;
	const ControlStatus *s = st->s;
	fprintf(f, "# HELP cfs_lun_io_errors_total Failed reads, writes and flushes of a LUN since "
		   "the mount (the daemon's log names each).\n# TYPE cfs_lun_io_errors_total counter\n");
	for (size_t i = 0; i < s->n_luns; i++) {
		fprintf(f, "cfs_lun_io_errors_total{");
		label(f, "fs", st->dir, ",");
		label(f, "volume", s->volume, ",");
		fprintf(f, "lun=\"%zu\",", i);
		label(f, "path", s->luns[i]->path, "} ");
		fprintf(f, "%llu\n", (unsigned long long)s->luns[i]->io_errors);
	}
	fprintf(f, "# HELP cfs_fenced 1 if this node fenced itself (every call fails with EIO).\n"
		   "# TYPE cfs_fenced gauge\ncfs_fenced{");
	label(f, "fs", st->dir, "} ");
	fprintf(f, "%d\n# HELP cfs_free_bytes Free space of the filesystem.\n"
		   "# TYPE cfs_free_bytes gauge\ncfs_free_bytes{", s->fenced);
	label(f, "fs", st->dir, "} ");
	fprintf(f, "%llu\n", (unsigned long long)s->free_blocks * s->block_size);
}

/* to: NULL (text or json), or where --prometheus goes ("-": standard output). */
static int do_query(const char *dir, ControlRequest__Op op, bool json, const char *to)
{
	ControlReply *r;
	if (ask(dir, op, &r))
		return EXIT_FAILED;
	int rc = EXIT_OK;
	if (to && r->status) {
		struct status_of st = {dir, r->status};
		rc = write_whole("cfs: status", to, fill_prometheus, &st);
	} else {
		print_status(dir, r, json);
	}
	control_reply__free_unpacked(r, NULL);
	return rc;
}

static int do_add_slots(const char *dir, const char *count, bool json)
{
	char *end;
	unsigned long n = strtoul(count, &end, 10);
	if (!*count || *end || n == 0 || n >= 64) { /* the most a filesystem has */
		fprintf(stderr, "cfs: addslots %s: give how many node slots to add, from 1 to 63\n",
			count);
		return EXIT_USAGE;
	}
	ControlRequest req = CONTROL_REQUEST__INIT;
	req.op = CONTROL_REQUEST__OP__ADD_SLOTS;
	req.has_size = true;
	req.size = n;
	ControlReply *r;
	if (tool_ask("cfs", dir, &req, &r))
		return EXIT_FAILED;
	print_status(dir, r, json);
	control_reply__free_unpacked(r, NULL);
	return EXIT_OK;
}

/* The lock table: a line per lock (holders and waiters of one resource together), or JSON. */
static void print_locks(const ControlReply *r, bool json)
{
	if (json) {
		printf("{\"locks\": [");
		for (size_t i = 0; i < r->n_locks; i++) {
			const LockInfo *l = r->locks[i];
			printf("%s{\"resource\": ", i ? ", " : "");
			json_string(stdout, l->resource);
			printf(", \"object\": ");
			json_string(stdout, l->object);
			if (l->has_ino)
				printf(", \"ino\": %llu", (unsigned long long)l->ino);
			if (l->path) {
				printf(", \"path\": ");
				json_string(stdout, l->path);
			}
			printf(", \"node_id\": %u, \"owner\": \"%016llx\", \"granted\": \"%s\", "
			       "\"requested\": \"%s\", \"state\": \"%s\", \"recovering\": %s}",
			       l->node_id, (unsigned long long)l->owner, l->granted, l->requested,
			       l->state, l->has_recovering && l->recovering ? "true" : "false");
		}
		printf("]");
		if (r->message) {
			printf(", \"note\": ");
			json_string(stdout, r->message);
		}
		printf("}\n");
		return;
	}
	printf("%-22s %5s %-10s %-8s %s\n", "RESOURCE", "NODE", "STATE", "MODE", "WHAT");
	for (size_t i = 0; i < r->n_locks; i++) {
		const LockInfo *l = r->locks[i];
		char mode[16];
		if (strcmp(l->state, "granted"))
			snprintf(mode, sizeof mode, "%s->%s", l->granted, l->requested);
		else
			snprintf(mode, sizeof mode, "%s", l->granted);
		printf("%-22s %5u %-10s %-8s %s%s%s%s\n", l->resource, l->node_id, l->state, mode,
		       l->object, l->path ? ": " : "", l->path ? l->path : "",
		       l->has_recovering && l->recovering ? " (node failed, recovering)" : "");
	}
	if (r->message)
		printf("(%s)\n", r->message);
}

static int do_locks(const char *dir, bool json)
{
	ControlReply *r;
	if (ask(dir, CONTROL_REQUEST__OP__LOCKS, &r))
		return EXIT_FAILED;
	print_locks(r, json);
	control_reply__free_unpacked(r, NULL);
	return EXIT_OK;
}

/* Whether pid still runs.  kill(pid, 0) is not enough: cfsd is detached, and a daemon that
 * has exited stays a zombie until init gets round to reaping it, which can take a while. */
static bool still_running(int pid)
{
	char path[64], buf[512];
	snprintf(path, sizeof path, "/proc/%d/stat", pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return kill(pid, 0) == 0;
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = 0;
	const char *p = strrchr(buf, ')'); /* the state follows the command name */
	if (!p || !p[1] || !p[2])
		return true;
	return p[2] != 'Z' && p[2] != 'X';
}

/* The bytes pid has read and written to storage, from /proc/PID/io; 0 if unknown. */
static unsigned long long storage_bytes(int pid)
{
	char path[64], line[128];
	snprintf(path, sizeof path, "/proc/%d/io", pid);
	FILE *f = fopen(path, "r");
	unsigned long long total = 0, v;
	while (f && fgets(line, sizeof line, f))
		if (sscanf(line, "read_bytes: %llu", &v) == 1 || sscanf(line, "write_bytes: %llu", &v) == 1)
			total += v;
	if (f)
		fclose(f);
	return total;
}

/* Wait for an unmounted daemon to exit: as long as it still reads or writes the LUNs (its
 * last commit and checkpoint take as long as the LUNs are slow: no fixed limit would fit every
 * SAN), and DAEMON_IDLE_LIMIT_S more after it stopped doing so.  False if it is still there. */
#define DAEMON_IDLE_LIMIT_S 30
static bool wait_for_daemon(const char *dir, int pid)
{
	const int tick_ms = 50, idle_limit = DAEMON_IDLE_LIMIT_S * 1000 / tick_ms;
	unsigned long long moved = storage_bytes(pid);
	for (int idle = 0, waited = 0; still_running(pid); waited++) {
		if (idle >= idle_limit) {
			fprintf(stderr, "cfs: %s is unmounted but its daemon (pid %d) is still there, and has "
				"read or written nothing for %d s: see its log\n", dir, pid, DAEMON_IDLE_LIMIT_S);
			return false;
		}
		if (waited == 10000 / tick_ms)
			fprintf(stderr, "cfs: %s: waiting for its daemon (pid %d) to finish writing\n", dir, pid);
		nanosleep(&(struct timespec){0, tick_ms * 1000000L}, NULL);
		unsigned long long now = storage_bytes(pid);
		idle = now != moved ? 0 : idle + 1;
		moved = now;
	}
	return true;
}

/* Write back (reporting what fails), unmount, then wait for the daemon to finish writing,
 * so that fsck or cvm can run right after.  A lazy unmount (umount -l) only detaches the
 * mount: the daemon serves what is still open there and ends after the last close. */
static int do_umount(const char *dir, int flags)
{
	ControlReply *r;
	int pid = 0;
	bool fenced = false, written_back = true;
	if (ask(dir, CONTROL_REQUEST__OP__STATUS, &r) == 0) {
		pid = r->status ? r->status->pid : 0;
		fenced = r->status && r->status->has_fenced && r->status->fenced;
		control_reply__free_unpacked(r, NULL);
	}
	/* A fenced node may write nothing: the survivors have replayed its journal.  A failed
	 * write-back was reported: unmount anyway, and say so in the exit status. */
	if (pid && !fenced && (written_back = ask(dir, CONTROL_REQUEST__OP__SYNC, &r) == 0))
		control_reply__free_unpacked(r, NULL);
	utab_forget(dir, 0);
	if (umount2(dir, flags)) {
		int e = errno;
		fprintf(stderr, "cfs: umount %s: %s%s\n", dir, strerror(e),
			e == EBUSY ? " (files are open there: close them first)" : "");
		if (e == EBUSY)
			utab_record_helper(dir);
		return EXIT_FAILED;
	}
	if (flags & MNT_DETACH)
		return written_back || !pid ? EXIT_OK : EXIT_FAILED;
	if (pid > 0 && !wait_for_daemon(dir, pid))
		return EXIT_FAILED;
	return written_back || !pid ? EXIT_OK : EXIT_FAILED;
}

/* mount.cfs VOLUME DIR [-sfnv] [-o OPTIONS], as mount(8) calls it; also cfs cfs:VOLUME DIR
 * -o OPTIONS, as FUSE's mount.fuse calls the program a fuse.cfs mount's type names (mount(8)
 * does so for mount -o remount: the source is then the mount's fsname). */
static int mount_helper(int argc, char **argv)
{
	const char *opts = NULL;
	int c;
	while ((c = getopt(argc, argv, "sfnvo:t:h")) != -1) {
		switch (c) {
		case 'o': opts = optarg; break;
		case 's': case 'f': case 'n': case 'v': case 't': break;
		case 'h': usage(stdout); return EXIT_OK;
		default: usage(stderr); return EXIT_USAGE;
		}
	}
	if (argc - optind != 2) {
		usage(stderr);
		return EXIT_USAGE;
	}
	struct scan_paths none = {0};
	const char *volume = argv[optind];
	if (!strncmp(volume, "cfs:", 4))
		volume += 4;
	return do_mount(volume, argv[optind + 1], opts, &none);
}

/* umount.cfs DIR [-nlfvr] [-t TYPE], as umount(8) calls it for a mount whose userspace
 * table entry says helper=cfs (utab.c). */
static int umount_helper(int argc, char **argv)
{
	int flags = 0, c;
	while ((c = getopt(argc, argv, "nlfvrt:N:h")) != -1) {
		switch (c) {
		case 'l': flags |= MNT_DETACH; break;
		case 'f': flags |= MNT_FORCE; break;
		case 'n': case 'v': case 'r': case 't': case 'N': break;
		case 'h': usage(stdout); return EXIT_OK;
		default: usage(stderr); return EXIT_USAGE;
		}
	}
	if (argc - optind != 1) {
		usage(stderr);
		return EXIT_USAGE;
	}
	return do_umount(argv[optind], flags);
}

int main(int argc, char **argv)
{
	char *base = basename(argv[0]);
	if (!strcmp(base, "mount.cfs") || (argc > 1 && !strncmp(argv[1], "cfs:", 4)))
		return mount_helper(argc, argv);
	if (!strcmp(base, "umount.cfs"))
		return umount_helper(argc, argv);
	if (argc > 1 && !strcmp(argv[1], "quota"))
		return cfs_quota_main(argc - 1, argv + 1);
	static const struct option longs[] = {{"json", no_argument, NULL, 'j'},
					      {"prometheus", optional_argument, NULL, 'P'},
					      {"scan", required_argument, NULL, 's'},
					      {"version", no_argument, NULL, 'V'}, {"help", no_argument, NULL, 'h'}, {0}};
	struct scan_paths scan = {0};
	const char *opts = NULL, *features = NULL, *prometheus = NULL;
	bool json = false;
	int c;
	while ((c = getopt_long(argc, argv, "+o:O:s:jhV", longs, NULL)) != -1) {
		switch (c) {
		case 'o': opts = optarg; break;
		case 'O': features = optarg; break;
		case 's': scan_paths_add(&scan, optarg); break;
		case 'j': json = true; break;
		case 'P': prometheus = optarg && *optarg ? optarg : "-"; break;
		case 'V': print_version("cfs"); exit(0);
		case 'h': usage(stdout); return EXIT_OK;
		default: usage(stderr); return EXIT_USAGE;
		}
	}
	if (optind >= argc) {
		usage(stderr);
		return EXIT_USAGE;
	}
	const char *cmd = argv[optind++];
	/* Options may also follow the command's arguments. */
	int nargs = 0;
	char *args[2];
	while (optind < argc) {
		if ((c = getopt_long(argc, argv, "+o:O:s:jhV", longs, NULL)) != -1) {
			switch (c) {
			case 'o': opts = optarg; break;
			case 'O': features = optarg; break;
			case 's': scan_paths_add(&scan, optarg); break;
			case 'j': json = true; break;
			case 'P': prometheus = optarg && *optarg ? optarg : "-"; break;
			default: usage(stderr); return EXIT_USAGE;
			}
			continue;
		}
		if (nargs == 2) {
			fprintf(stderr, "cfs: too many arguments for %s\n", cmd);
			return EXIT_USAGE;
		}
		args[nargs++] = argv[optind++];
	}
	if (!strcmp(cmd, "mount") && nargs == 2) {
		int rc = do_mount(args[0], args[1], opts, &scan);
		scan_paths_free(&scan);
		return rc;
	}
	if (!strcmp(cmd, "umount") && nargs == 1)
		return do_umount(args[0], 0);
	if (prometheus && (strcmp(cmd, "status") || json)) {
		fprintf(stderr, "cfs: --prometheus goes with status alone (not --json)\n");
		return EXIT_USAGE;
	}
	if (!strcmp(cmd, "status") && nargs == 1)
		return do_query(args[0], CONTROL_REQUEST__OP__STATUS, json, prometheus);
	if (!strcmp(cmd, "lockproto") && (nargs == 1 || nargs == 2)) {
		int rc = do_lockproto(args[0], nargs == 2 ? args[1] : NULL, &scan);
		scan_paths_free(&scan);
		return rc;
	}
	if ((!strcmp(cmd, "show") || !strcmp(cmd, "tune")) && nargs == 1) {
		int rc = cmd[0] == 's' ? do_show(args[0], json, &scan)
				       : do_tune(args[0], features, &scan);
		scan_paths_free(&scan);
		return rc;
	}
	if (!strcmp(cmd, "grow") && nargs == 1)
		return do_query(args[0], CONTROL_REQUEST__OP__GROW, json, NULL);
	if (!strcmp(cmd, "addslots") && nargs == 2)
		return do_add_slots(args[0], args[1], json);
	if (!strcmp(cmd, "locks") && nargs == 1)
		return do_locks(args[0], json);
	fprintf(stderr, "cfs: '%s' with %d argument%s: not a command I know\n", cmd, nargs,
		nargs == 1 ? "" : "s");
	usage(stderr);
	return EXIT_USAGE;
}
