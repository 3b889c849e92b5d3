/* cfsd's side of the control socket: status and grow. */
#include "cfs/control.h"
#include "cfs/fuse_ops.h"
#include "proto/control.pb-c.h"
#include "tools/common.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

struct cfs_control {
	struct cfsd *d;
	int fd, wake[2];
	char path[108];
	pthread_t thread;
};

static int grow(struct cfsd *d, uint64_t *added, char *msg, size_t msglen)
{
	struct cvm_scan scan;
	struct cvm_volume *vol = NULL;
	int rc = cvm_scan_paths(d->scan->paths, d->scan->n, &scan);
	if (!rc) {
		rc = cvm_volume_open(&scan, d->volume, CVM_OPEN_RDWR, &vol);
		cvm_scan_free(&scan);
	}
	if (rc) {
		snprintf(msg, msglen, "volume %s: %s", d->volume, cvm_last_error());
		return rc;
	}
	rc = cfs_grow(d->fs, vol, added);
	if (rc) {
		snprintf(msg, msglen, "%s", cfs_last_error());
		cvm_volume_close(vol);
		return rc;
	}
	/* The filesystem now uses the new handle; the old one is ours to close. */
	struct cvm_volume *old = d->vol;
	d->vol = vol;
	cvm_volume_close(old);
	return 0;
}

static void fill_status(struct cfsd *d, ControlStatus *s, struct cfs_status *st)
{
	cfs_status(d->fs, st);
	s->volume = (char *)d->volume;
	s->label = st->label;
	s->fs_uuid = st->fs_uuid;
	s->block_size = (uint32_t)st->block_size;
	s->total_blocks = st->total_blocks;
	s->free_blocks = st->free_blocks;
	s->groups = st->nags;
	s->slot = st->slot;
	s->slots = st->nslots;
	s->dboptimized = d->fs_dboptimized;
	s->commits = st->stats.commits;
	s->commit_blocks = st->stats.commit_blocks;
	s->reads = st->stats.reads;
	s->writes = st->stats.writes;
	s->read_bytes = st->stats.read_bytes;
	s->write_bytes = st->stats.write_bytes;
	s->pid = getpid();
}

static void serve_one(struct cfsd *d, int fd)
{
	uint8_t *msg;
	uint32_t len;
	if (cfs_control_recv(fd, &msg, &len))
		return;
	ControlRequest *req = control_request__unpack(NULL, len, msg);
	free(msg);
	ControlReply reply = CONTROL_REPLY__INIT;
	ControlStatus status = CONTROL_STATUS__INIT;
	struct cfs_status st;
	char text[512] = "";
	if (!req) {
		reply.error = EBADMSG;
		reply.message = "not a control request";
	} else if (req->op == CONTROL_REQUEST__OP__GROW) {
		uint64_t added = 0;
		int rc = grow(d, &added, text, sizeof text);
		reply.error = -rc;
		reply.has_added_blocks = !rc;
		reply.added_blocks = added;
		if (rc)
			reply.message = text;
	}
	if (req && !reply.error) {
		fill_status(d, &status, &st);
		reply.status = &status;
	}
	size_t n = control_reply__get_packed_size(&reply);
	uint8_t *out = malloc(n ? n : 1);
	if (out) {
		control_reply__pack(&reply, out);
		cfs_control_send(fd, out, (uint32_t)n);
		free(out);
	}
	if (req)
		control_request__free_unpacked(req, NULL);
}

static void *control_thread(void *arg)
{
	struct cfs_control *c = arg;
	for (;;) {
		struct pollfd p[2] = {{.fd = c->fd, .events = POLLIN}, {.fd = c->wake[0], .events = POLLIN}};
		if (poll(p, 2, -1) < 0)
			continue;
		if (p[1].revents)
			return NULL;
		int fd = accept4(c->fd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			continue;
		serve_one(c->d, fd);
		close(fd);
	}
}

int cfs_control_start(struct cfsd *d, const char *mountpoint, struct cfs_control **out)
{
	struct cfs_control *c = calloc(1, sizeof *c);
	if (!c)
		return -ENOMEM;
	c->d = d;
	c->fd = -1;
	int rc = cfs_control_path(mountpoint, c->path, sizeof c->path);
	if (!rc && mkdir(CFS_CONTROL_DIR, 0755) && errno != EEXIST)
		rc = -errno;
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	if (!rc) {
		snprintf(a.sun_path, sizeof a.sun_path, "%s", c->path);
		unlink(c->path); /* a daemon that died left it */
		c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (c->fd < 0 || bind(c->fd, (struct sockaddr *)&a, sizeof a) || listen(c->fd, 8) ||
		    chmod(c->path, 0600) || pipe(c->wake))
			rc = -errno;
	}
	if (!rc && (rc = -pthread_create(&c->thread, NULL, control_thread, c)) == 0) {
		*out = c;
		return 0;
	}
	cfs_set_error("%s: %s", c->path, strerror(-rc));
	if (c->fd >= 0)
		close(c->fd);
	free(c);
	return rc;
}

void cfs_control_stop(struct cfs_control *c)
{
	if (!c)
		return;
	if (write(c->wake[1], "x", 1) < 0) {
		/* the thread is gone already */
	}
	pthread_join(c->thread, NULL);
	close(c->fd);
	close(c->wake[0]);
	close(c->wake[1]);
	unlink(c->path);
	free(c);
}
