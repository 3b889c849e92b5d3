/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The note in util-linux's userspace mount table (/run/mount/utab) that has umount(8) run
 * umount.cfs for a CFS mount.
 *
 * The kernel ends a FUSE mount without waiting for its daemon, so a plain umount(8) returns
 * while cfsd still commits and lets go of its locks.  umount(8) runs a helper only if it
 * knows the mount's type: it looks the mount up by statfs, which says only "fuse" (so it
 * would look for umount.fuse), unless utab has an entry for the mount point; then it reads
 * the type from mountinfo (fuse.cfs) and, for the option helper=cfs of that entry, runs
 * umount.cfs.  mount(8) and umount(8) themselves write and remove such entries (--fake, and
 * -i so that they run no helper of ours again), under libmount's own lock. */
#include "tools/utab.h"

#include "cfs/control.h"
#include "tools/common.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Run argv quietly; its exit status, or -1 (also if it ran past seconds, when not 0: then it
 * is killed). */
static int run_quiet(char *const argv[], unsigned seconds)
{
	pid_t pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		int null = open("/dev/null", O_RDWR | O_CLOEXEC);
		if (null >= 0) {
			dup2(null, STDIN_FILENO);
			dup2(null, STDOUT_FILENO);
			dup2(null, STDERR_FILENO);
		}
		execvp(argv[0], argv);
		_exit(127);
	}
	for (unsigned waited_ms = 0; seconds && waited_ms < seconds * 1000u; waited_ms += 20) {
		int st;
		pid_t done = waitpid(pid, &st, WNOHANG);
		if (done == pid)
			return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
		if (done < 0 && errno != EINTR)
			return -1;
		nanosleep(&(struct timespec){0, 20000000}, NULL);
	}
	if (seconds)
		kill(pid, SIGKILL);
	int rc = wait_child(pid);
	return seconds ? -1 : rc;
}

struct mount_lookup {
	const char *dir;
	char source[PATH_MAX];
};

static void note_source(const struct cfs_mount_entry *m, void *arg)
{
	struct mount_lookup *l = arg;
	if (!strcmp(m->dir, l->dir) && !strcmp(m->fstype, "fuse.cfs"))
		snprintf(l->source, sizeof l->source, "%s", m->source); /* the newest wins */
}

void utab_record_helper(const char *dir)
{
	char real[PATH_MAX];
	if (!realpath(dir, real))
		return;
	struct mount_lookup l = {.dir = real};
	if (cfs_mountinfo_each(note_source, &l) || !l.source[0])
		return;
	char *argv[] = {"mount", "--fake", "--internal-only", "-t", "fuse.cfs",
			"-o", "helper=cfs", l.source, real, NULL};
	if (run_quiet(argv, 0))
		fprintf(stderr, "cfs: note: a plain umount(8) of %s will not wait for the daemon "
				"(mount --fake could not record it); unmount it with cfs umount\n",
			real);
}

void utab_forget(const char *dir, unsigned seconds)
{
	char *argv[] = {"umount", "--fake", "--internal-only", (char *)dir, NULL};
	run_quiet(argv, seconds);
}
