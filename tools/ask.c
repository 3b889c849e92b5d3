/* SPDX-License-Identifier: GPL-2.0-or-later */
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

struct mount_search {
	char name[CVM_NAME_MAX + 6], uuid[CVM_UUID_STR + 5];
	const char *want_uuid; /* names need not be unique: the daemon says which volume */
	const char *prog;
	char *dir;
	size_t len;
	bool found;
};

static bool serves_volume(const char *prog, const char *dir, const char *uuid)
{
	if (!tool_daemon_answers(dir))
		return false;
	ControlRequest req = CONTROL_REQUEST__INIT;
	req.op = CONTROL_REQUEST__OP__STATUS;
	ControlReply *r;
	if (tool_ask(prog, dir, &req, &r))
		return false;
	bool same = r->status && r->status->volume_uuid && !strcmp(r->status->volume_uuid, uuid);
	control_reply__free_unpacked(r, NULL);
	return same;
}

static void match_mount(const struct cfs_mount_entry *m, void *arg)
{
	struct mount_search *s = arg;
	if (!s->found && !strcmp(m->fstype, "fuse.cfs") &&
	    (!strcmp(m->source, s->name) || !strcmp(m->source, s->uuid)) &&
	    serves_volume(s->prog, m->dir, s->want_uuid)) {
		snprintf(s->dir, s->len, "%s", m->dir);
		s->found = true;
	}
}

bool tool_mount_of(const char *prog, const struct cvm_config *cfg, char *dir, size_t len)
{
	struct mount_search s = {.dir = dir, .len = len, .prog = prog};
	char us[CVM_UUID_STR];
	cvm_uuid_format(&cfg->vol_uuid, us);
	s.want_uuid = us;
	snprintf(s.name, sizeof s.name, "cfs:%s", cfg->name);
	snprintf(s.uuid, sizeof s.uuid, "cfs:%s", us);
	return cfs_mountinfo_each(match_mount, &s) == 0 && s.found;
}
