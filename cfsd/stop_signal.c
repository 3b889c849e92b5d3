/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The daemon stopped by a signal.
 *
 * `cfs mount` notes the mount in util-linux's /run/mount/utab (tools/utab.c) so that a plain
 * umount(8) runs umount.cfs; `cfs umount` drops the note before it unmounts.  A daemon ended
 * by a signal unmounts itself, and its note would stay: dropping it takes `umount --fake`,
 * which looks at the mount point, so it must run while the daemon still answers (after the
 * unmount it says "not mounted").  So the handler only wakes a thread of its own, which drops
 * the note, ends the session and wakes the thread waiting for the session's end
 * (cfsd_serve_requests' sem_wait, which a signal handler interrupts). */
#define FUSE_USE_VERSION 312
#include "cfsd/stop_signal.h"

#include "tools/utab.h"

#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const int stop_signals[] = {SIGTERM, SIGINT, SIGHUP};

/* How long umount --fake may wait for this daemon's answer (one that hangs on a cluster lock
 * another node keeps) before the daemon stops without it, leaving the note as before. */
#define FORGET_SECONDS 5u

static int wake_fd = -1; /* the write end of the thread's pipe, for the handler */

struct stop_signal {
	struct fuse_session *se;
	char *mount_abs;
	pthread_t server; /* waits for the session's end */
	pthread_t thread;
	int pipe[2];
};

static void on_signal(int sig)
{
	(void)sig;
	int saved = errno;
	const char stop = 1;
	if (write(wake_fd, &stop, 1) < 0) {
		/* full: a stop is on its way already */
	}
	errno = saved;
}

static void *stop_thread(void *arg)
{
	struct stop_signal *s = arg;
	char what = 0;
	while (read(s->pipe[0], &what, 1) < 0 && errno == EINTR)
		;
	if (what != 1)
		return NULL; /* the session ended otherwise */
	utab_forget(s->mount_abs, FORGET_SECONDS);
	fuse_session_exit(s->se);
	pthread_kill(s->server, SIGHUP); /* one of ours: the handler only writes to the pipe */
	return NULL;
}

static void set_handlers(void (*handler)(int))
{
	struct sigaction sa = {.sa_handler = handler};
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < sizeof stop_signals / sizeof stop_signals[0]; i++)
		sigaction(stop_signals[i], &sa, NULL);
}

int stop_signal_start(struct fuse_session *se, const char *mount_abs, struct stop_signal **out)
{
	struct stop_signal *s = calloc(1, sizeof *s);
	if (!s)
		return -ENOMEM;
	s->se = se;
	s->server = pthread_self();
	if (!(s->mount_abs = strdup(mount_abs)) || pipe2(s->pipe, O_CLOEXEC | O_NONBLOCK)) {
		free(s->mount_abs);
		free(s);
		return -ENOMEM;
	}
	/* The thread reads blocking; only the handler's writes must never block. */
	fcntl(s->pipe[0], F_SETFL, 0);
	int rc = -pthread_create(&s->thread, NULL, stop_thread, s);
	if (rc) {
		close(s->pipe[0]);
		close(s->pipe[1]);
		free(s->mount_abs);
		free(s);
		return rc;
	}
	wake_fd = s->pipe[1];
	set_handlers(on_signal);
	*out = s;
	return 0;
}

void stop_signal_end(struct stop_signal *s)
{
	if (!s)
		return;
	/* The daemon is stopping already: a signal now would only cut its last commit short. */
	set_handlers(SIG_IGN);
	wake_fd = -1;
	const char ended = 0;
	if (write(s->pipe[1], &ended, 1) < 0) {
		/* full of stops: the thread has woken already */
	}
	pthread_join(s->thread, NULL);
	close(s->pipe[0]);
	close(s->pipe[1]);
	free(s->mount_abs);
	free(s);
}
