/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The control socket's path and framing, shared by cfsd and the cfs command. */
#include "cfs/control.h"

#include <errno.h>
#include <stdbool.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int cfs_control_path(const char *mountpoint, char *out, size_t outlen)
{
	char real[PATH_MAX];
	if (!realpath(mountpoint, real))
		return -errno;
	uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
	for (const char *p = real; *p; p++)
		h = (h ^ (uint8_t)*p) * 0x100000001b3ull;
	snprintf(out, outlen, "%s/%016llx.sock", CFS_CONTROL_DIR, (unsigned long long)h);
	return 0;
}

/* mountinfo escapes space, tab, newline and backslash as \ooo. */
static void unescape(char *s)
{
	char *w = s;
	for (char *r = s; *r; r++) {
		if (r[0] == '\\' && r[1] >= '0' && r[1] <= '7' && r[2] && r[3]) {
			*w++ = (char)((r[1] - '0') * 64 + (r[2] - '0') * 8 + (r[3] - '0'));
			r += 3;
		} else {
			*w++ = *r;
		}
	}
	*w = 0;
}

int cfs_mountinfo_each(void (*fn)(const struct cfs_mount_entry *m, void *arg), void *arg)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return -errno;
	char *line = NULL;
	size_t cap = 0;
	struct cfs_mount_entry *m = malloc(sizeof *m);
	while (m && getline(&line, &cap, f) > 0) {
		const char *dash = strstr(line, " - ");
		if (!dash || sscanf(line, "%*s %*s %31s %*s %4095s", m->dev, m->dir) != 2 ||
		    sscanf(dash + 3, "%63s %4095s", m->fstype, m->source) != 2)
			continue;
		unescape(m->dir);
		unescape(m->source);
		fn(m, arg);
	}
	int rc = m ? 0 : -ENOMEM;
	free(m);
	free(line);
	fclose(f);
	return rc;
}

struct volume_search {
	char name[PATH_MAX], uuid[64];
	const char *dir;
	struct cfs_volume_mounts *out;
};

static void match_volume(const struct cfs_mount_entry *m, void *arg)
{
	struct volume_search *s = arg;
	if (strcmp(m->fstype, "fuse.cfs") ||
	    (strcmp(m->source, s->name) && (!s->uuid[0] || strcmp(m->source, s->uuid))))
		return;
	if (s->dir && !strcmp(m->dir, s->dir)) {
		s->out->at_dir = true;
	} else if (!s->out->elsewhere) {
		s->out->elsewhere = true;
		snprintf(s->out->other, sizeof s->out->other, "%s", m->dir);
	}
}

int cfs_volume_mounts(const char *name, const char *uuid, const char *dir,
		      struct cfs_volume_mounts *out)
{
	struct volume_search s = {.dir = dir, .out = out};
	memset(out, 0, sizeof *out);
	snprintf(s.name, sizeof s.name, "cfs:%s", name);
	if (uuid)
		snprintf(s.uuid, sizeof s.uuid, "cfs:%s", uuid);
	return cfs_mountinfo_each(match_volume, &s);
}

static int full(int fd, void *buf, size_t len, bool writing)
{
	uint8_t *p = buf;
	while (len) {
		ssize_t n = writing ? write(fd, p, len) : read(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -ECONNRESET;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int cfs_control_recv(int fd, uint8_t **msg, uint32_t *len)
{
	uint8_t hdr[4];
	int rc = full(fd, hdr, 4, false);
	if (rc)
		return rc;
	*len = hdr[0] | (uint32_t)hdr[1] << 8 | (uint32_t)hdr[2] << 16 | (uint32_t)hdr[3] << 24;
	if (*len > CFS_CONTROL_MAX)
		return -EMSGSIZE;
	*msg = malloc(*len ? *len : 1);
	if (!*msg)
		return -ENOMEM;
	if ((rc = full(fd, *msg, *len, false)))
		free(*msg);
	return rc;
}

/* The header with a descriptor attached; the rest as usual. */
static int send_header_fd(int fd, const uint8_t hdr[4], int pass)
{
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} ctl = {0};
	struct iovec iov = {.iov_base = (void *)hdr, .iov_len = 4};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf,
			    .msg_controllen = sizeof ctl.buf};
	struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &pass, sizeof pass);
	ssize_t n;
	while ((n = sendmsg(fd, &mh, MSG_NOSIGNAL)) < 0 && errno == EINTR)
		;
	if (n < 0)
		return -errno;
	return n == 4 ? 0 : full(fd, (void *)(hdr + n), (size_t)(4 - n), true);
}

int cfs_control_send_message_fd(int fd, pthread_mutex_t *lock, const ProtobufCMessage *msg,
				int pass)
{
	uint32_t n = (uint32_t)protobuf_c_message_get_packed_size(msg);
	uint8_t *buf = malloc(n ? n : 1);
	if (!buf)
		return -ENOMEM;
	protobuf_c_message_pack(msg, buf);
	uint8_t hdr[4] = {(uint8_t)n, (uint8_t)(n >> 8), (uint8_t)(n >> 16), (uint8_t)(n >> 24)};
	if (lock)
		pthread_mutex_lock(lock);
	int rc = pass >= 0 ? send_header_fd(fd, hdr, pass) : full(fd, hdr, 4, true);
	if (!rc)
		rc = full(fd, buf, n, true);
	if (lock)
		pthread_mutex_unlock(lock);
	free(buf);
	return rc;
}

int cfs_control_recv_fd(int fd, uint8_t **msg, uint32_t *len, int *passed)
{
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} ctl;
	uint8_t hdr[4];
	struct iovec iov = {.iov_base = hdr, .iov_len = 4};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf,
			    .msg_controllen = sizeof ctl.buf};
	*passed = -1;
	ssize_t n;
	while ((n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR)
		;
	if (n <= 0)
		return n < 0 ? -errno : -ECONNRESET;
	for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm))
		if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS)
			memcpy(passed, CMSG_DATA(cm), sizeof *passed);
	int rc = n == 4 ? 0 : full(fd, hdr + n, (size_t)(4 - n), false);
	if (!rc) {
		*len = hdr[0] | (uint32_t)hdr[1] << 8 | (uint32_t)hdr[2] << 16 | (uint32_t)hdr[3] << 24;
		rc = *len > CFS_CONTROL_MAX ? -EMSGSIZE : 0;
	}
	if (!rc && !(*msg = malloc(*len ? *len : 1)))
		rc = -ENOMEM;
	if (!rc && (rc = full(fd, *msg, *len, false)))
		free(*msg);
	if (rc && *passed >= 0) {
		close(*passed);
		*passed = -1;
	}
	return rc;
}

int cfs_control_send_message(int fd, pthread_mutex_t *lock, const ProtobufCMessage *msg)
{
	return cfs_control_send_message_fd(fd, lock, msg, -1);
}
