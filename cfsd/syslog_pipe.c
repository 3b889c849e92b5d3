/* SPDX-License-Identifier: GPL-2.0-or-later */
/* syslog for a daemon that must never wait for it.
 *
 * cfsd logs with plain writes to stderr (and so do the sanitizers and libfuse).  Without
 * log=FILE, stderr becomes the write end of a pipe that a thread of its own empties into the
 * syslog socket, one datagram per line.  The write end is non-blocking: when syslog stalls
 * (journald restarting, a full socket queue), the pipe fills and further lines are dropped,
 * rather than a thread holding a lock or a lease while it waits for a logger.  The socket is
 * /dev/log, or $CFS_SYSLOG_SOCKET where syslog listens elsewhere (a container, a test). */
#include "cfsd/syslog_pipe.h"

#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#define LINE_MAX_BYTES 2048
#define PIPE_BYTES (1 << 20) /* some seconds of a busy recovery's lines */

static struct {
	int read_fd, sock;
	pthread_t thread;
	bool running;
} sp = {.read_fd = -1, .sock = -1};

static int connect_syslog(void)
{
	const char *path = getenv("CFS_SYSLOG_SOCKET");
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	snprintf(a.sun_path, sizeof a.sun_path, "%s", path && *path ? path : "/dev/log");
	int s = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s >= 0 && connect(s, (struct sockaddr *)&a, sizeof a) < 0) {
		close(s);
		s = -1;
	}
	return s;
}

/* What an operator should not miss goes out as an error, the rest as notices. */
static int severity_of(const char *line)
{
	static const char *const alarming[] = {"FENCED", "evicted", "damage", "EIO", "error",
					       "failed", "AddressSanitizer", "runtime error"};
	for (size_t i = 0; i < sizeof alarming / sizeof *alarming; i++)
		if (strstr(line, alarming[i]))
			return LOG_ERR;
	return LOG_NOTICE;
}

static void send_line(const char *line, size_t len)
{
	if (len > 6 && !memcmp(line, "cfsd: ", 6)) { /* the tag says it already */
		line += 6;
		len -= 6;
	}
	char msg[LINE_MAX_BYTES + 64];
	int n = snprintf(msg, sizeof msg, "<%d>cfsd[%d]: %.*s", LOG_DAEMON | severity_of(line),
			 (int)getpid(), (int)len, line);
	if (n < 0)
		return;
	if (sp.sock < 0)
		sp.sock = connect_syslog();
	if (sp.sock >= 0 && send(sp.sock, msg, (size_t)n < sizeof msg ? (size_t)n : sizeof msg - 1,
				 MSG_NOSIGNAL) < 0) {
		close(sp.sock); /* syslog restarted: the next line connects again */
		sp.sock = -1;
	}
}

static void *pump(void *arg)
{
	(void)arg;
	char buf[LINE_MAX_BYTES];
	size_t have = 0;
	for (;;) {
		ssize_t got = read(sp.read_fd, buf + have, sizeof buf - have);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			break; /* every writer has gone */
		have += (size_t)got;
		size_t start = 0;
		for (size_t i = 0; i < have; i++)
			if (buf[i] == '\n') {
				send_line(buf + start, i - start);
				start = i + 1;
			}
		if (start == 0 && have == sizeof buf) { /* a line longer than a datagram: cut */
			send_line(buf, have);
			start = have;
		}
		memmove(buf, buf + start, have - start);
		have -= start;
	}
	if (have)
		send_line(buf, have);
	return NULL;
}

int syslog_pipe_open(void)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		return -errno;
	(void)fcntl(p[1], F_SETPIPE_SZ, PIPE_BYTES); /* the default 64 KiB will do if refused */
	sp.read_fd = p[0];
	int rc = fcntl(p[1], F_SETFL, O_NONBLOCK) < 0 ? -errno
						       : -pthread_create(&sp.thread, NULL, pump, NULL);
	if (rc) {
		close(p[0]);
		close(p[1]);
		sp.read_fd = -1;
		return rc;
	}
	sp.running = true;
	return p[1];
}

void syslog_pipe_close(void)
{
	if (!sp.running)
		return;
	int devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
	if (devnull >= 0) { /* the pipe's last writer goes: the thread reads to the end */
		dup2(devnull, STDERR_FILENO);
		close(devnull);
	}
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 2;
	if (pthread_timedjoin_np(sp.thread, NULL, &until) == 0) {
		close(sp.read_fd);
		if (sp.sock >= 0)
			close(sp.sock);
	}
	sp.running = false;
}
