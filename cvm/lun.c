/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* LUN devices: checks on a path, O_DIRECT open, size and identity, and the metadata writes
 * (the only place libcvm writes metadata, so the crash tests can stop it after any write). */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/fs.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

void *cvm_alloc_aligned(size_t len)
{
	void *p = NULL;
	if (posix_memalign(&p, 4096, len ? len : 4096))
		return NULL;
	return p;
}

int cvm_lun_open(const char *path, int oflags, uint64_t *size, struct cvm_lun_id *id)
{
	struct stat st;
	if (stat(path, &st) < 0) {
		int e = errno;
		cvm_set_error("LUN %s: %s", path,
			      e == ENOENT ? "no such file or device; check the path" : strerror(e));
		return -e;
	}
	if (!S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode)) {
		cvm_set_error("LUN %s: not a block device or regular file", path);
		return -EINVAL;
	}
	int fd = open(path, oflags | O_DIRECT | O_CLOEXEC);
	if (fd < 0) {
		int e = errno;
		cvm_set_error("LUN %s: cannot open with O_DIRECT: %s", path, strerror(e));
		return -e;
	}
	uint64_t bytes = (uint64_t)st.st_size;
	if (S_ISBLK(st.st_mode) && ioctl(fd, BLKGETSIZE64, &bytes) < 0) {
		int e = errno;
		cvm_set_error("LUN %s: cannot read the device size: %s", path, strerror(e));
		close(fd);
		return -e;
	}
	*size = bytes;
	*id = cvm_lun_id_of(&st);
	return fd;
}

struct cvm_lun_id cvm_lun_id_of(const struct stat *st)
{
	return (struct cvm_lun_id){.dev = st->st_dev, .ino = st->st_ino, .rdev = st->st_rdev,
				   .is_block = S_ISBLK(st->st_mode)};
}

bool cvm_lun_id_equal(const struct cvm_lun_id *a, const struct cvm_lun_id *b)
{
	if (a->is_block != b->is_block)
		return false;
	return a->is_block ? a->rdev == b->rdev : (a->dev == b->dev && a->ino == b->ino);
}

/* Byte-range OFD locks on the metadata area: byte 0 is shared by every user of the volume,
 * byte 1 is held by whoever changes the config.  A grow thus runs while the volume is in use
 * (growth only appends), but not beside another change; remove needs both bytes alone. */
int cvm_lun_lock(int fd, const char *path, enum cvm_lun_lock kind)
{
	struct flock fl = {.l_whence = SEEK_SET};
	switch (kind) {
	case CVM_LOCK_USE: fl.l_type = F_RDLCK; fl.l_start = 0; fl.l_len = 1; break;
	case CVM_LOCK_CHANGE: fl.l_type = F_WRLCK; fl.l_start = 1; fl.l_len = 1; break;
	case CVM_LOCK_ALONE: fl.l_type = F_WRLCK; fl.l_start = 0; fl.l_len = 2; break;
	case CVM_UNLOCK_CHANGE: fl.l_type = F_UNLCK; fl.l_start = 1; fl.l_len = 1; break;
	}
	if (fcntl(fd, F_OFD_SETLK, &fl) == 0)
		return 0;
	int e = errno;
	if (e == EAGAIN || e == EACCES) {
		cvm_set_error("LUN %s is busy: %s; retry when that is done", path,
			      kind == CVM_LOCK_USE      ? "its volume's config is being removed"
			      : kind == CVM_LOCK_ALONE ? "another process on this node uses it"
						       : "another config change is running");
		return -EBUSY;
	}
	cvm_set_error("LUN %s: lock: %s", path, strerror(e));
	return -e;
}

int cvm_lun_read_meta(int fd, uint8_t *meta)
{
	size_t done = 0;
	while (done < CVM_META_BYTES) {
		ssize_t n = pread(fd, meta + done, CVM_META_BYTES - done, (off_t)done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -ENOSPC; /* shorter than the metadata area */
		done += (size_t)n;
	}
	return 0;
}

static long fault_writes_left = -2; /* -2: not read from the environment yet */

void cvm_fault_crash_after(long n)
{
	fault_writes_left = n;
}

void cvm_fault_point(void)
{
	if (fault_writes_left == -2) {
		const char *env = getenv("CVM_FAULT_CRASH_AFTER");
		fault_writes_left = env ? strtol(env, NULL, 10) : -1;
	}
	if (fault_writes_left < 0)
		return;
	if (fault_writes_left == 0)
		_exit(CVM_FAULT_EXIT);
	fault_writes_left--;
}

static int write_meta(int fd, const void *buf, size_t len, uint64_t offset, bool sync)
{
	cvm_fault_point();
	size_t done = 0;
	while (done < len) {
		ssize_t n = pwrite(fd, (const uint8_t *)buf + done, len - done, (off_t)(offset + done));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		done += (size_t)n;
	}
	/* O_DIRECT skips the page cache but not a device's volatile cache, nor a sparse file's
	 * block allocation: without this a label could vanish with the power. */
	if (sync && fdatasync(fd) < 0)
		return -errno;
	return 0;
}

int cvm_lun_write_meta(int fd, const void *buf, size_t len, uint64_t offset)
{
	return write_meta(fd, buf, len, offset, true);
}

int cvm_lun_write_label(int fd, const struct cvm_label *l)
{
	uint8_t *buf = cvm_alloc_aligned(CVM_LABEL_BYTES);
	if (!buf)
		return -ENOMEM;
	cvm_label_encode(l, buf);
	int rc = cvm_lun_write_meta(fd, buf, CVM_LABEL_BYTES, CVM_LABEL_OFFSET);
	free(buf);
	return rc;
}

int cvm_lun_write_config(int fd, const struct cvm_config *c, const cvm_uuid *copy_on, int slot,
			 bool sync)
{
	uint8_t *buf = cvm_alloc_aligned(CVM_SLOT_BYTES);
	if (!buf)
		return -ENOMEM;
	size_t len = cvm_config_encode(c, copy_on, buf);
	int rc = write_meta(fd, buf, len, CVM_SLOT_OFFSET(slot), sync);
	free(buf);
	return rc;
}

static int write_zeros(int fd, size_t len, uint64_t offset)
{
	uint8_t *zero = cvm_alloc_aligned(len);
	if (!zero)
		return -ENOMEM;
	memset(zero, 0, len);
	int rc = cvm_lun_write_meta(fd, zero, len, offset);
	free(zero);
	return rc;
}

int cvm_lun_wipe_configs(int fd)
{
	return write_zeros(fd, 2 * CVM_SLOT_BYTES, CVM_SLOT_OFFSET(0));
}

int cvm_lun_wipe_label(int fd)
{
	return write_zeros(fd, CVM_LABEL_BYTES, CVM_LABEL_OFFSET);
}
