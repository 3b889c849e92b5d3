/* SPDX-License-Identifier: GPL-2.0-or-later */
/* cfsd: the CFS daemon.  Opens the volume, mounts the filesystem (journal replay, orphans),
 * mounts it with FUSE and serves it with a pool of threads until it is unmounted.
 *
 *   cfsd [-f] [-o OPTIONS] VOLUME MOUNTPOINT
 *
 * Without -f it reports the outcome of the mount, then goes on in the background: the parent
 * waits for the child to say "mounted" or why not, so `mount` and `cfs mount` get a real exit
 * status and message. */
#define FUSE_USE_VERSION 312
#include "cfsd/dev_direct.h"
#include "tools/version.h"
#include "cfsd/fuse_ops.h"
#include "cfsd/check_server.h"
#include "cfsd/restripe.h"
#include "cfsd/restripe_cluster.h"
#include "cfsd/stop_signal.h"
#include "cfsd/fuse_uring.h"
#include "cfsd/syslog_pipe.h"
#include "cfs/control.h"
#include "tools/common.h"

#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <getopt.h>
#include <grp.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/resource.h>
#include <unistd.h>

struct opts {
	const char *volume, *mountpoint, *log;
	char mount_abs[PATH_MAX]; /* the mount point as mountinfo will show it */
	gid_t odm_gid; /* (gid_t)-1: ODM clients must be root */
	struct cfs_mount_opts m;
	bool foreground;
	bool nowriteback; /* writes through to the daemon at once (no write-back page cache) */
	bool namecache;   /* cluster: the kernel keeps names (kernel_inval.c) */
	bool nouring;     /* requests through /dev/fuse even where io_uring is offered */
	struct scan_paths scan;
	char fuse_opts[1024];
};

static void usage(FILE *out)
{
	fprintf(out,
		"usage: cfsd [-f] [-o OPTIONS] VOLUME MOUNTPOINT\n"
		"Serve the CFS filesystem on CVM volume VOLUME at MOUNTPOINT.\n"
		"  -f               stay in the foreground, log to stderr\n"
		"  -o OPTIONS       comma-separated:\n"
		"     dboptimized   every open is direct I/O (no page cache)\n"
		"     cluster=P     lock protocol: local, corosync or dlm (default: the one\n"
		"                   recorded by mkfs.cfs -p; another one is refused)\n"
		"     node=SLOT     journal slot of this node (default: 0 with local locks, the\n"
		"                   first free one on a cluster)\n"
		"     fence=PROGRAM cluster: run PROGRAM NODE to fence a dead node before its\n"
		"                   journal is replayed (default: wait the fence interval)\n"
		"     lock_cache=N  cluster: keep at most N unused lock grants cached (default\n"
		"                   50000); past it the oldest are given back\n"
		"     quota_fold=S  cluster with quotas: what this node charged reaches every\n"
		"                   node's figures within S seconds (default 10; 0: only when\n"
		"                   an exact figure or a refusal needs it)\n"
		"     ro, rw        read-only or read-write (default rw)\n"
		"     nowriteback   one-node normal mount: each write reaches the daemon before\n"
		"                   it returns (default: the kernel caches writes, write-back)\n"
		"     writebehind[=MiB]  not dboptimized: a buffered write (one node: the pages\n"
		"                   the kernel sends at a close) returns once the daemon keeps it\n"
		"                   under the file's lock, written to the LUNs within a second, at\n"
		"                   fsync, or when another node wants the file; at most MiB kept\n"
		"                   (default: writebehind=64;\n"
		"                   nowritebehind: each write reaches the LUNs before it returns)\n"
		"     namecache     cluster: the kernel keeps names until another node changes a\n"
		"                   directory (Linux 6.16+; default: every name is looked up here)\n"
		"     nouring       requests through /dev/fuse even where the kernel offers FUSE\n"
		"                   over io_uring (default: through io_uring when offered: Linux\n"
		"                   6.14+, fuse module's enable_uring set; never on a dboptimized\n"
		"                   mount of a cluster)\n"
		"     scan=PATHS    where to look for the LUNs, colon-separated (default $CVM_SCAN)\n"
		"     log=FILE      where the daemon logs once in the background (default: syslog)\n"
		"     odm_group=G   members of group G (name or number) may use libodm here,\n"
		"                   within their file permissions (default: root only)\n"
		"     other options go to FUSE (allow_other, fsname=..., ...)\n"
		"See cfs(8).\n");
}

static void add_fuse_opt(struct opts *o, const char *opt)
{
	size_t len = strlen(o->fuse_opts);
	snprintf(o->fuse_opts + len, sizeof o->fuse_opts - len, "%s%s", len ? "," : "", opt);
}

/* The words mount(8) and fstab use for access times.  CFS never updates an access time on a
 * read (only utimensat(2) sets it), as noatime: each of them means that here. */
static bool atime_word(const char *opt)
{
	static const char *const words[] = {"atime",      "noatime",       "relatime",
					    "norelatime", "strictatime",   "nostrictatime",
					    "lazytime",   "nolazytime",    "diratime",
					    "nodiratime"};
	for (size_t i = 0; i < sizeof words / sizeof *words; i++)
		if (!strcmp(opt, words[i]))
			return true;
	return false;
}

/* A group by name or number. */
static int group_id(const char *name, gid_t *out)
{
	char *end;
	unsigned long n = strtoul(name, &end, 10);
	if (*name && !*end && n < (gid_t)-1) {
		*out = (gid_t)n;
		return 0;
	}
	struct group g, *found = NULL;
	char buf[4096];
	if (getgrnam_r(name, &g, buf, sizeof buf, &found) || !found)
		return -ENOENT;
	*out = found->gr_gid;
	return 0;
}

/* Ours are taken out; the rest is for FUSE.  -EINVAL with a message for bad values. */
static int parse_opts(struct opts *o, char *list)
{
	for (char *save, *opt = strtok_r(list, ",", &save); opt; opt = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(opt, '=');
		const char *val = eq ? eq + 1 : NULL;
		size_t klen = eq ? (size_t)(eq - opt) : strlen(opt);
		if (!strncmp(opt, "dboptimized", klen) && klen == 11 && !val) {
			o->m.dboptimized = true;
		} else if (!strcmp(opt, "ro")) {
			o->m.ro = true;
		} else if (!strcmp(opt, "rw")) {
			o->m.ro = false;
		} else if (!strcmp(opt, "nowriteback") || !strcmp(opt, "writeback")) {
			o->nowriteback = opt[0] == 'n';
		} else if (!strcmp(opt, "namecache") || !strcmp(opt, "nonamecache")) {
			o->namecache = !strcmp(opt, "namecache");
		} else if (!strcmp(opt, "writebehind") || !strcmp(opt, "nowritebehind")) {
			o->m.writebehind_mib = opt[0] == 'n' ? 0 : CFS_WRITEBEHIND_DEFAULT_MIB;
		} else if (klen == 11 && !strncmp(opt, "writebehind", 11) && val) {
			char *end;
			unsigned long n = strtoul(val, &end, 10);
			if (!*val || *end || n < 1 || n > CFS_WRITEBEHIND_MAX_MIB) {
				fprintf(stderr, "cfsd: writebehind=%s: give the MiB of written data a "
						"cluster mount may keep, from 1 to %d (default %d), or "
						"nowritebehind\n", val, CFS_WRITEBEHIND_MAX_MIB,
					CFS_WRITEBEHIND_DEFAULT_MIB);
				return -EINVAL;
			}
			o->m.writebehind_mib = (uint32_t)n;
		} else if (!strcmp(opt, "uring") || !strcmp(opt, "nouring")) {
			o->nouring = opt[0] == 'n';
		} else if (klen == 7 && !strncmp(opt, "cluster", 7) && val) {
			if (!cfs_lockproto_valid(val)) {
				fprintf(stderr, "cfsd: cluster=%s: give local, corosync or dlm\n", val);
				return -EINVAL;
			}
			o->m.cluster = val;
		} else if (klen == 4 && !strncmp(opt, "node", 4) && val) {
			char *end;
			unsigned long slot = strtoul(val, &end, 10);
			if (!*val || *end || slot >= 64) {
				fprintf(stderr, "cfsd: node=%s: give a slot number from 0 to 63\n", val);
				return -EINVAL;
			}
			o->m.slot = (uint32_t)slot;
		} else if (klen == 4 && !strncmp(opt, "scan", 4) && val) {
			for (char *s2, *p = strtok_r((char *)val, ":", &s2); p; p = strtok_r(NULL, ":", &s2))
				scan_paths_add(&o->scan, p);
		} else if (klen == 10 && !strncmp(opt, "lock_cache", 10) && val) {
			char *end;
			unsigned long n = strtoul(val, &end, 10);
			if (!*val || *end || n < CFS_LOCK_CACHE_MIN || n > UINT32_MAX) {
				fprintf(stderr, "cfsd: lock_cache=%s: give a number of locks from %d "
						"up (default %d)\n", val, CFS_LOCK_CACHE_MIN,
					CFS_LOCK_CACHE_DEFAULT);
				return -EINVAL;
			}
			o->m.lock_cache = (uint32_t)n;
		} else if (klen == 10 && !strncmp(opt, "quota_fold", 10) && val) {
			char *end;
			unsigned long n = strtoul(val, &end, 10);
			if (!*val || *end || n > CFS_QUOTA_FOLD_MAX) {
				fprintf(stderr, "cfsd: quota_fold=%s: give a number of seconds from 0 "
						"(only when needed) to %d (default %d)\n", val,
					CFS_QUOTA_FOLD_MAX, CFS_QUOTA_FOLD_DEFAULT);
				return -EINVAL;
			}
			o->m.quota_fold = n ? (uint32_t)n : CFS_QUOTA_FOLD_NEVER;
		} else if (klen == 5 && !strncmp(opt, "fence", 5) && val) {
			o->m.fence_program = val;
		} else if (klen == 3 && !strncmp(opt, "log", 3) && val) {
			o->log = val;
		} else if (klen == 9 && !strncmp(opt, "odm_group", 9) && val) {
			if (group_id(val, &o->odm_gid)) {
				fprintf(stderr, "cfsd: odm_group=%s: no such group (give a group name or "
						"number from /etc/group)\n", val);
				return -EINVAL;
			}
		} else if (!strcmp(opt, "defaults") || !strcmp(opt, "auto") || !strcmp(opt, "noauto") ||
			   !strcmp(opt, "_netdev") || !strcmp(opt, "nofail") || !strcmp(opt, "user") ||
			   !strcmp(opt, "async") || !strcmp(opt, "silent") || !strcmp(opt, "loud") ||
			   !strncmp(opt, "x-", 2) || (klen == 7 && !strncmp(opt, "comment", 7))) {
			/* fstab words that mean nothing to the daemon (x-systemd.requires=... and
			 * the like are for systemd; async is what it does anyway) */
		} else if (atime_word(opt)) {
			if (!strcmp(opt, "noatime"))
				add_fuse_opt(o, opt); /* shown in /proc/mounts */
		} else if (!strcmp(opt, "sync") || !strcmp(opt, "dirsync")) {
			fprintf(stderr, "cfsd: mount option '%s' is not supported: open files with "
					"O_SYNC or O_DSYNC, or call fsync(2), where writes must be "
					"durable at once (see cfs(8))\n", opt);
			return -EINVAL;
		} else if (!strcmp(opt, "allow_other") || !strcmp(opt, "default_permissions") ||
			   !strcmp(opt, "nosuid") || !strcmp(opt, "nodev") || !strcmp(opt, "noexec") ||
			   !strcmp(opt, "suid") || !strcmp(opt, "dev") || !strcmp(opt, "exec") ||
			   (val && (klen == 6 && !strncmp(opt, "fsname", 6))) ||
			   (val && klen == 8 && !strncmp(opt, "max_read", 8))) {
			add_fuse_opt(o, opt);
		} else {
			fprintf(stderr, "cfsd: unknown mount option '%s': see cfs(8)\n", opt);
			return -EINVAL;
		}
	}
	return 0;
}

static int parse_args(int argc, char **argv, struct opts *o)
{
	static const struct option longs[] = {{"version", no_argument, NULL, 'V'}, {"help", no_argument, NULL, 'h'}, {0}};
	int c;
	while ((c = getopt_long(argc, argv, "+fho:V", longs, NULL)) != -1) {
		switch (c) {
		case 'f': o->foreground = true; break;
		case 'o': {
			/* Kept for the life of the daemon: scan paths point into it. */
			static char *copies[16];
			static unsigned ncopies;
			char *copy = ncopies < 16 ? strdup(optarg) : NULL;
			if (!copy || parse_opts(o, (copies[ncopies++] = copy)))
				return EXIT_USAGE;
			break;
		}
		case 'V': print_version("cfsd"); exit(0);
		case 'h': usage(stdout); exit(EXIT_OK);
		default: usage(stderr); return EXIT_USAGE;
		}
	}
	if (argc - optind != 2) {
		fprintf(stderr, "cfsd: give a volume and a mount point\n");
		usage(stderr);
		return EXIT_USAGE;
	}
	o->volume = argv[optind];
	o->mountpoint = argv[optind + 1];
	return 0;
}

/* The mount point must be a directory nobody has mounted on, or where this volume is mounted
 * still (as the volume was named then): an unmount finishing, which cfs_mount waits for. */
static int check_mountpoint(const char *mp, const char *volume)
{
	struct stat st, up;
	char parent[4096];
	if (stat(mp, &st)) {
		fprintf(stderr, "cfsd: mount point %s: %s\n", mp, strerror(errno));
		return -errno;
	}
	if (!S_ISDIR(st.st_mode)) {
		fprintf(stderr, "cfsd: mount point %s is not a directory\n", mp);
		return -ENOTDIR;
	}
	snprintf(parent, sizeof parent, "%s/..", mp);
	char abs[PATH_MAX];
	struct cfs_volume_mounts m;
	if (!stat(parent, &up) && up.st_dev != st.st_dev &&
	    !(realpath(mp, abs) && !cfs_volume_mounts(volume, NULL, abs, &m) && m.at_dir)) {
		fprintf(stderr, "cfsd: %s is a mount point already: unmount it first\n", mp);
		return -EBUSY;
	}
	return 0;
}

/* Tell the waiting parent how it went (the child printed why on the shared stderr). */
static void report(int fd, int status)
{
	if (fd < 0)
		return;
	char c = (char)status;
	if (write(fd, &c, 1) < 0) {
		/* the parent died: nobody to tell */
	}
	close(fd);
}

static int wait_for_child(int fd)
{
	char c;
	if (read(fd, &c, 1) != 1) {
		fprintf(stderr, "cfsd: the daemon died before it was mounted\n");
		return EXIT_FAILED;
	}
	return c;
}

/* A dboptimized mount's direct reads and writes from /dev/fuse's workers go to the LUNs
 * without holding them (dev_direct.c); without it (no memory, no aio context left) the
 * workers do them one each. */
static struct dev_direct *start_dev_direct(struct cfsd *d, struct fuse_session *se)
{
	if (!d->fs_dboptimized)
		return NULL;
	struct fuse_uring_data_path data = {cfsd_direct_begin, d};
	struct dev_direct *direct;
	int rc = dev_direct_start(se, &data, &direct);
	if (rc)
		fprintf(stderr, "cfsd: direct I/O cannot leave the workers (%s): each does one "
				"at a time\n", strerror(-rc));
	__atomic_store_n(&d->dev_direct, direct, __ATOMIC_RELEASE);
	return direct;
}

static int serve(struct opts *o, struct cfsd *d, int status_fd)
{
	char fsname[300];
	/* Root mounts as for a kernel filesystem: set-user-ID programs and devices work unless
	 * nosuid or nodev (the user's options come later and win) says otherwise; libfuse's own
	 * default is nosuid,nodev. */
	snprintf(fsname, sizeof fsname, "fsname=cfs:%s,subtype=cfs,default_permissions%s%s%s",
		 o->volume, getuid() == 0 ? ",allow_other,suid,dev" : "", o->m.ro ? ",ro" : "",
		 o->fuse_opts[0] ? "," : "");
	char all[1400];
	snprintf(all, sizeof all, "%s%s", fsname, o->fuse_opts);
	char *argv[] = {"cfsd", "-o", all, NULL};
	struct fuse_args args = FUSE_ARGS_INIT(3, argv);
	struct fuse_session *se = fuse_session_new(&args, &cfsd_ops, sizeof cfsd_ops, d);
	fuse_opt_free_args(&args); /* libfuse may have added to them; the session has parsed them */
	if (!se) {
		fprintf(stderr, "cfsd: FUSE session failed (a bad FUSE option?)\n");
		report(status_fd, EXIT_FAILED);
		return EXIT_FAILED;
	}
	int rc = EXIT_FAILED;
	d->se = se;
	if (kernel_inval_start(d)) {
		fprintf(stderr, "cfsd: cannot start the page invalidation thread\n");
		report(status_fd, EXIT_FAILED);
		fuse_session_destroy(se);
		return EXIT_FAILED;
	}
	if (fuse_set_signal_handlers(se) == 0 && fuse_session_mount(se, o->mountpoint) == 0) {
		if (!d->cluster && !d->fs_dboptimized && !d->nowriteback)
			dirty_limit_raise(o->mount_abs);
		if (dev_io_hook(d, se))
			fprintf(stderr, "cfsd: cannot hook the FUSE device's I/O: every cached write "
					"asks for security.capability, O_TMPFILE fails\n");
		struct cfs_control *ctl = NULL;
		if (cfs_control_start(d, o->mountpoint, &ctl))
			fprintf(stderr, "cfsd: control socket: %s (cfs grow and status will not work)\n",
				cfs_last_error());
		report(status_fd, EXIT_OK);
		if (!o->foreground) {
			int null = open("/dev/null", O_RDWR);
			dup2(null, STDIN_FILENO);
			dup2(null, STDOUT_FILENO);
			close(null);
		}
		struct stop_signal *stop = NULL;
		if (stop_signal_start(se, o->mount_abs, &stop))
			fprintf(stderr, "cfsd: cannot watch for SIGTERM: a daemon stopped by it leaves "
					"its mount's note in /run/mount/utab\n");
		struct dev_direct *direct = start_dev_direct(d, se);
		rc = cfsd_serve_requests(se, direct) ? EXIT_FAILED : EXIT_OK;
		stop_signal_end(stop);
		cfsd_restripe_end(d); /* paused after its batch: it goes on at the next run */
		check_server_end(d);
		dev_direct_stop(__atomic_exchange_n(&d->dev_direct, NULL, __ATOMIC_ACQ_REL));
		/* Before the unmount: the rings' commands hold the device open (fuse_uring.c). */
		fuse_uring_stop(__atomic_exchange_n(&d->uring, NULL, __ATOMIC_ACQ_REL));
		cfs_control_stop(ctl);
		fuse_session_unmount(se);
	} else {
		fprintf(stderr, "cfsd: FUSE mount on %s failed (is /dev/fuse there? are you root?)\n",
			o->mountpoint);
		report(status_fd, EXIT_FAILED);
	}
	kernel_inval_stop(d); /* before the session goes: the thread sends through it */
	fuse_remove_signal_handlers(se);
	fuse_session_destroy(se);
	return rc;
}

/* Where the daemon logs once in the background: log=FILE, else syslog. */
static int open_log(const char *log)
{
	if (!log)
		return syslog_pipe_open();
	int fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
	return fd >= 0 ? fd : -errno;
}

/* stderr (the parent's until the mount is made) becomes the log, or nowhere. */
static void redirect_log(int log_fd)
{
	int fd = log_fd >= 0 ? log_fd : open("/dev/null", O_WRONLY | O_CLOEXEC);
	if (fd >= 0) {
		dup2(fd, STDERR_FILENO);
		close(fd);
	}
}

/* Every process of every database instance on the node holds a connection to us: the soft
 * limit on descriptors (often 1,024) goes up to the hard one. */
static void raise_fd_limit(void)
{
	struct rlimit r;
	if (getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur < r.rlim_max) {
		r.rlim_cur = r.rlim_max;
		setrlimit(RLIMIT_NOFILE, &r);
	}
}

int main(int argc, char **argv)
{
	struct opts o = {.m.slot = CFS_SLOT_ANY, .m.writebehind_mib = CFS_WRITEBEHIND_DEFAULT_MIB,
			 .odm_gid = (gid_t)-1};
	int rc = parse_args(argc, argv, &o);
	if (rc)
		return rc;
	if (check_mountpoint(o.mountpoint, o.volume) || !realpath(o.mountpoint, o.mount_abs)) {
		scan_paths_free(&o.scan);
		return EXIT_FAILED;
	}
	raise_fd_limit();
	int status_fd = -1;
	if (!o.foreground) {
		int p[2];
		if (pipe(p))
			return EXIT_FAILED;
		pid_t pid = fork();
		if (pid < 0)
			return EXIT_FAILED;
		if (pid > 0) {
			close(p[1]);
			scan_paths_free(&o.scan);
			return wait_for_child(p[0]);
		}
		close(p[0]);
		status_fd = p[1];
		setsid();
		/* Errors before the mount go to the parent; the log gets the rest. */
		int devnull = open("/dev/null", O_RDONLY);
		dup2(devnull, STDIN_FILENO);
		close(devnull);
	}
	int log_fd = o.foreground ? -1 : open_log(o.log);
	if (log_fd < 0 && !o.foreground) {
		fprintf(stderr, "cfsd: log=%s: %s: give a file that can be written (its directory "
				"must exist), or leave log= out to log to syslog\n",
			o.log ? o.log : "(syslog)", strerror(-log_fd));
		report(status_fd, EXIT_FAILED);
		scan_paths_free(&o.scan);
		return EXIT_FAILED;
	}
	struct cfsd d = {.fs_dboptimized = o.m.dboptimized, .scan = &o.scan, .volume = o.volume,
			 .odm_gid = o.odm_gid, .nowriteback = o.nowriteback, .mount_abs = o.mount_abs,
			 .namecache = o.namecache, .nouring = o.nouring};
	/* A batch of a restripe running elsewhere may be staged: the mount joins it first. */
	if (open_volume("cfsd", &o.scan, o.volume,
			(o.m.ro ? CVM_OPEN_RDONLY : CVM_OPEN_RDWR) | CVM_OPEN_JOIN,
			&d.vol)) {
		report(status_fd, EXIT_FAILED);
		scan_paths_free(&o.scan);
		if (log_fd >= 0)
			close(log_fd);
		syslog_pipe_close();
		return EXIT_FAILED;
	}
	cfs_log_copy(log_fd); /* the mount's own lines go to the parent's stderr and the log */
	o.m.locks_ready = restripe_cluster_mount;
	o.m.locks_closing = restripe_cluster_unmount;
	o.m.recovering = restripe_cluster_recovering;
	o.m.locks_arg = &d;
	o.m.mountpoint = o.mount_abs;
	rc = cfs_mount(d.vol, &o.m, &d.fs);
	cfs_log_copy(-1);
	if (rc) {
		fprintf(stderr, "cfsd: %s\n", cfs_last_error()[0] ? cfs_last_error() : strerror(-rc));
		report(status_fd, EXIT_FAILED);
		cvm_volume_close(d.vol);
		scan_paths_free(&o.scan);
		if (log_fd >= 0)
			close(log_fd);
		syslog_pipe_close();
		return EXIT_FAILED;
	}
	if (!o.foreground)
		redirect_log(log_fd);
	cfs_set_reopen(d.fs, cfsd_reopen_volume, &d);
	struct cfs_status st;
	cfs_status(d.fs, &st);
	d.cluster = strcmp(st.lockproto, "local") != 0;
	if (d.cluster)
		fprintf(stderr, "cfsd: node %u: mounted volume %s slot %u at %s%s (cluster=%s)\n",
			st.node_id, o.volume, st.slot, o.mountpoint,
			o.m.dboptimized ? " (dboptimized)" : "", st.lockproto);
	else
		fprintf(stderr, "cfsd: mounted volume %s slot %u at %s%s\n", o.volume, st.slot,
			o.mountpoint, o.m.dboptimized ? " (dboptimized)" : "");
	if (dir_listings_new(&d.listings)) {
		fprintf(stderr, "cfsd: out of memory\n");
		report(status_fd, EXIT_FAILED);
		rc = EXIT_FAILED;
	} else {
		rc = serve(&o, &d, status_fd);
	}
	dir_listings_free(d.listings);
	int urc = cfs_unmount(d.fs);
	if (urc)
		fprintf(stderr, "cfsd: unmount of volume %s: %s\n", o.volume, strerror(-urc));
	else
		fprintf(stderr, "cfsd: unmounted volume %s\n", o.volume);
	cvm_volume_close(d.vol);
	for (unsigned i = 0; i < d.nreopened; i++)
		cvm_volume_close(d.reopened[i]);
	free(d.reopened);
	scan_paths_free(&o.scan);
	syslog_pipe_close();
	return rc ? rc : urc ? EXIT_FAILED : EXIT_OK;
}
