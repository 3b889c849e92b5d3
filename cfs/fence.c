/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Self-fencing, and how long the survivors wait before they replay a node's journal.
 *
 * A node that loses quorum may be the one the others think is dead: they will replay its
 * journal and hand its locks to others, so from that moment nothing of it may reach the LUNs.
 * It fences itself: the volume refuses every read, write, flush and submission (EIO, see
 * cvm_volume_fence), and every call of the filesystem fails with EIO.  The mount stays so,
 * with its cached grants worthless, until it is unmounted and mounted again: rejoining with
 * caches and a journal from before the partition is not worth the risk.
 *
 * The fence interval.  Membership declares a silent node gone after corosync's token timeout
 * on each side of a partition; the two sides' timers start from the last token each saw, at
 * most one token timeout apart.  The cut-off node hears of its lost quorum when its side forms
 * a membership, and the lock library tells cfsd at once; the dispatcher also looks at quorum
 * every FENCE_CHECK_MS in case it missed it.  I/O already in the kernel at the fence finishes
 * within IO_GRACE_MS on a working LUN.  So a survivor that saw the node leave waits
 *     token timeout + 2 x FENCE_CHECK_MS + IO_GRACE_MS
 * before it replays.  A node that stops without losing quorum (a process frozen in the
 * kernel) is not covered by the interval: sites with SCSI-3 persistent reservations or power
 * fencing give a fence program (fence=PROGRAM), and then the survivor that recovers a node
 * runs it instead of waiting, and replays only once it succeeded.  Calling convention (cfs(8)):
 *     PROGRAM NODE       environment CFS_FENCE_NODE, CFS_FENCE_SLOT, CFS_FS_UUID, CFS_FS_LABEL
 * exit 0: the node can no longer reach the LUNs; anything else (or no answer within
 * FENCE_PROGRAM_TIMEOUT_S): the node is not fenced, its journal waits, the program is run
 * again at the next try. */
#include "cfs/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define FENCE_PROGRAM_TIMEOUT_S 60

extern char **environ;

#define UNKNOWN_DETECTION_MS 10000u /* the lock manager does not say: assume a slow cluster */

void cfs_fence(struct cfs_fs *fs, const char *why)
{
	if (fs->lease_page) /* libodm's processes first: they write on their own */
		__atomic_store_n(&fs->lease_page->fenced, 1u, __ATOMIC_RELEASE);
	if (cvm_volume_fenced(fs->vol))
		return;
	cvm_volume_fence(fs->vol);
	cfs_log(fs, "FENCED: %s; no I/O of this node reaches the volume any more, every call "
		"fails with EIO: unmount the filesystem and mount it again", why);
}

void cfs_withdraw(struct cfs_fs *fs, const char *why)
{
	if (!fs->cluster || !fs->locks || cfs_fenced(fs))
		return;
	char line[256];
	snprintf(line, sizeof line, "withdrawn from the cluster (%s): the other nodes evict this "
		 "node and recover its journal", why);
	cfs_fence(fs, line);
	int rc = cfslock_withdraw(fs->locks);
	if (rc)
		cfs_log(fs, "withdraw: the lock manager cannot (%s): the other nodes wait for this "
			"node's locks until it is unmounted", strerror(-rc));
}

bool cfs_fenced(const struct cfs_fs *fs)
{
	return cvm_volume_fenced(fs->vol);
}

void cfs_fence_evicted(struct cfs_fs *fs, const char *why)
{
	char line[256];
	snprintf(line, sizeof line, "the cluster evicted this node (%s)", why);
	cfs_fence(fs, line);
}

bool cfs_lease_fresh(const struct cfs_fs *fs)
{
	return !fs->cluster || !fs->locks || cfslock_lease_fresh(fs->locks);
}

/* Before every write: a fresh lease, else wait for its renewal.  It runs out on every node
 * while corosync re-forms the membership after a node went (no message is delivered then),
 * and on a node whose corosync stands still; what follows decides: renewed (the write goes),
 * evicted or quorum lost (fenced, the write fails). */
static int lease_gate(void *arg)
{
	struct cfs_fs *fs = arg;
	uint64_t t0 = cfs_now_ns();
	bool told = false;
	while (!cfs_lease_fresh(fs) && !cfs_fenced(fs)) {
		int rc = cfslock_lease_wait(fs->locks, cfs_fence_interval_ms(fs));
		if (rc == -ESTALE)
			cfs_fence_evicted(fs, "its membership lease ran out while it was stalled");
		else if (rc && !cfslock_quorate(fs->locks))
			cfs_fence(fs, "this node lost quorum");
		else if (rc && !told) {
			cfs_log(fs, "writes wait: the membership lease has not been renewed for %" PRIu64
				" ms (is corosync running?)", (cfs_now_ns() - t0) / 1000000);
			told = true;
		}
	}
	return cfs_fenced(fs) ? -EIO : 0;
}

int cfs_lease_page_init(struct cfs_fs *fs)
{
	if (!fs->cluster)
		return 0;
	fs->lease_memfd = memfd_create("cfs-lease", MFD_CLOEXEC);
	if (fs->lease_memfd < 0 || ftruncate(fs->lease_memfd, (off_t)sizeof *fs->lease_page))
		return -errno;
	void *p = mmap(NULL, sizeof *fs->lease_page, PROT_READ | PROT_WRITE, MAP_SHARED,
		       fs->lease_memfd, 0);
	if (p == MAP_FAILED)
		return -errno;
	fs->lease_page = p;
	cfslock_lease_mirror(fs->locks, &fs->lease_page->until);
	return 0;
}

void cfs_lease_page_free(struct cfs_fs *fs)
{
	if (fs->lease_page)
		munmap(fs->lease_page, sizeof *fs->lease_page);
	if (fs->lease_memfd >= 0)
		close(fs->lease_memfd);
}

/* Opened again read-only through /proc: the client maps what it cannot change. */
int cfs_lease_fd(struct cfs_fs *fs)
{
	if (fs->lease_memfd < 0)
		return -ENOENT;
	char path[64];
	snprintf(path, sizeof path, "/proc/self/fd/%d", fs->lease_memfd);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

void cfs_fence_guard(struct cfs_fs *fs, struct cvm_volume *vol)
{
	if (fs->cluster && vol)
		cvm_volume_set_write_gate(vol, lease_gate, fs);
}

uint32_t cfs_fence_interval_ms(const struct cfs_fs *fs)
{
	uint32_t token = fs->failure_detection_ms;
	return (token ? token : UNKNOWN_DETECTION_MS) + 2 * FENCE_CHECK_MS + IO_GRACE_MS;
}

void cfs_fence_log_interval(const struct cfs_fs *fs)
{
	uint32_t token = fs->failure_detection_ms;
	if (token)
		cfs_log(fs, "fence interval %" PRIu32 " ms: corosync token timeout %" PRIu32
			" ms, quorum checked every %u ms, %u ms for I/O in flight",
			cfs_fence_interval_ms(fs), token, FENCE_CHECK_MS, IO_GRACE_MS);
	else
		cfs_log(fs, "fence interval %" PRIu32 " ms: the lock manager does not say its "
			"failure detection time (%u ms assumed)", cfs_fence_interval_ms(fs),
			UNKNOWN_DETECTION_MS);
}

/* The program's environment: ours, then what it needs to know about the node. */
static char **fence_env(struct cfs_fs *fs, uint32_t node, uint32_t slot, char vars[4][128])
{
	size_t n = 0;
	while (environ[n])
		n++;
	char **env = calloc(n + 5, sizeof *env);
	if (!env)
		return NULL;
	memcpy(env, environ, n * sizeof *env);
	cvm_uuid u;
	char us[CVM_UUID_STR];
	memcpy(u.b, fs->sb.fs_uuid, 16);
	cvm_uuid_format(&u, us);
	snprintf(vars[0], 128, "CFS_FENCE_NODE=%" PRIu32, node);
	snprintf(vars[1], 128, "CFS_FENCE_SLOT=%" PRIu32, slot);
	snprintf(vars[2], 128, "CFS_FS_UUID=%s", us);
	snprintf(vars[3], 128, "CFS_FS_LABEL=%.64s", fs->sb.label);
	for (int i = 0; i < 4; i++)
		env[n + (size_t)i] = vars[i];
	return env;
}

/* Wait for the child up to the timeout; its wait status, or -ETIMEDOUT (killed). */
static int wait_child(pid_t pid)
{
	const struct timespec tick = {.tv_nsec = 20000000};
	uint64_t until = cfs_now_ns() + FENCE_PROGRAM_TIMEOUT_S * 1000000000ull;
	int status;
	for (;;) {
		pid_t r = waitpid(pid, &status, WNOHANG);
		if (r == pid)
			return status;
		if (r < 0 && errno != EINTR)
			return -errno;
		if (cfs_now_ns() >= until) {
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			return -ETIMEDOUT;
		}
		nanosleep(&tick, NULL);
	}
}

int cfs_fence_node(struct cfs_fs *fs, uint32_t node, uint32_t slot)
{
	char arg[16], vars[4][128];
	snprintf(arg, sizeof arg, "%" PRIu32, node);
	char *argv[] = {(char *)fs->fence_program, arg, NULL};
	char **env = fence_env(fs, node, slot, vars);
	if (!env)
		return -ENOMEM;
	uint64_t t0 = cfs_now_ns();
	pid_t pid;
	int rc = -posix_spawn(&pid, fs->fence_program, NULL, NULL, argv, env);
	free(env);
	int status = rc ? rc : wait_child(pid);
	uint64_t ms = (cfs_now_ns() - t0) / 1000000;
	if (status == 0) {
		cfs_log(fs, "recovery: fence program %s fenced node %" PRIu32 " (slot %" PRIu32
			") in %" PRIu64 " ms", fs->fence_program, node, slot, ms);
		return 0;
	}
	if (status < 0)
		cfs_log(fs, "recovery: fence program %s for node %" PRIu32 ": %s; its journal "
			"waits, trying again", fs->fence_program, node, strerror(-status));
	else
		cfs_log(fs, "recovery: fence program %s for node %" PRIu32 " failed (%s %d); its "
			"journal waits, trying again", fs->fence_program, node,
			WIFEXITED(status) ? "exit status" : "signal",
			WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
	return -EAGAIN;
}
