/* One request to the daemon of a CFS mount (see ask.h). */
#include "tools/ask.h"
#include "cfs/control.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

/* A connected socket to the daemon of dir, or -errno; its control socket's path in path. */
static int connect_daemon(const char *dir, char *path, size_t pathlen)
{
	int rc = cfs_control_path(dir, path, pathlen);
	if (rc)
		return rc;
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
	if (connect(fd, (struct sockaddr *)&a, sizeof a)) {
		rc = -errno;
		close(fd);
		return rc;
	}
	return fd;
}

bool tool_daemon_answers(const char *dir)
{
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	int fd = connect_daemon(dir, path, sizeof path);
	if (fd < 0)
		return false;
	close(fd);
	return true;
}

int tool_ask(const char *prog, const char *dir, const ControlRequest *req, ControlReply **out)
{
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)] = "";
	int fd = connect_daemon(dir, path, sizeof path);
	if (fd < 0 && !path[0]) {
		fprintf(stderr, "%s: %s: %s\n", prog, dir, strerror(-fd));
		return fd;
	}
	if (fd < 0) {
		fprintf(stderr, "%s: %s is not a mounted CFS filesystem (no daemon answers at %s)\n",
			prog, dir, path);
		return -ENOENT;
	}
	uint8_t *msg;
	uint32_t len;
	int rc = cfs_control_send_message(fd, NULL, &req->base);
	if (!rc)
		rc = cfs_control_recv(fd, &msg, &len);
	close(fd);
	if (rc) {
		fprintf(stderr, "%s: the daemon of %s did not answer: %s\n", prog, dir, strerror(-rc));
		return rc;
	}
	*out = control_reply__unpack(NULL, len, msg);
	free(msg);
	if (!*out) {
		fprintf(stderr, "%s: the daemon of %s sent a reply I cannot read\n", prog, dir);
		return -EBADMSG;
	}
	if ((*out)->error) {
		fprintf(stderr, "%s: %s: %s\n", prog, dir,
			(*out)->message ? (*out)->message : strerror((*out)->error));
		control_reply__free_unpacked(*out, NULL);
		return -EIO;
	}
	return 0;
}
