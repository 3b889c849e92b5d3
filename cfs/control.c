/* The control socket's path and framing, shared by cfsd and the cfs command. */
#include "cfs/control.h"

#include <errno.h>
#include <stdbool.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

int cfs_control_send(int fd, const void *msg, uint32_t len)
{
	uint8_t hdr[4] = {(uint8_t)len, (uint8_t)(len >> 8), (uint8_t)(len >> 16), (uint8_t)(len >> 24)};
	int rc = full(fd, hdr, 4, true);
	return rc ? rc : full(fd, (void *)msg, len, true);
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

int cfs_control_send_message(int fd, pthread_mutex_t *lock, const ProtobufCMessage *msg)
{
	size_t n = protobuf_c_message_get_packed_size(msg);
	uint8_t *buf = malloc(n ? n : 1);
	if (!buf)
		return -ENOMEM;
	protobuf_c_message_pack(msg, buf);
	if (lock)
		pthread_mutex_lock(lock);
	int rc = cfs_control_send(fd, buf, (uint32_t)n);
	if (lock)
		pthread_mutex_unlock(lock);
	free(buf);
	return rc;
}
