/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Internals of libcvm shared between its source files; not installed. */
#ifndef CVM_INTERNAL_H
#define CVM_INTERNAL_H

#include "cvm.h"

#include <sys/types.h>

#define CVM_LABEL_OFFSET 0u
#define CVM_LABEL_BYTES 4096u
#define CVM_SLOT_OFFSET(i) ((256u << 10) * (1u + (unsigned)(i))) /* 256 KiB and 512 KiB */
#define CVM_SLOT_BYTES (256u << 10)
/* The rest of the metadata area, unused but by a restripe under way: its scratch cells. */
#define CVM_SCRATCH_OFFSET CVM_SLOT_OFFSET(2)
#define CVM_SCRATCH_BYTES (CVM_META_BYTES - CVM_SCRATCH_OFFSET)

/* The restripe gate's sequence (0 without one), and a wait of at most ms for it to change. */
uint32_t cvm_volume_gate_seq(const struct cvm_volume *v);
void cvm_volume_gate_wait(struct cvm_volume *v, uint32_t seen, unsigned ms);

/* An asynchronous write to the LUN open as fd completed: the next flush must cover it. */
void cvm_volume_written_fd(struct cvm_volume *v, int fd);

/* cvm_crc32c without the CPU's instruction, as on CPUs that lack it (for the tests). */
uint32_t cvm_crc32c_table(uint32_t crc, const void *data, size_t len);

/* Printf-like: set this thread's cvm_last_error() message. */
void cvm_set_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- layout.c ---- */
/* The bytes stripe sets [first, first + count) hold, their LUNs, and the smallest data area
 * of those LUNs. */
uint64_t cvm_sets_held(const struct cvm_config *cfg, uint32_t first, uint32_t count,
		       uint32_t *nluns, uint64_t *smallest);

/* ---- on-disk label and config (label.c) ---- */
struct cvm_label {
	cvm_uuid lun_uuid, vol_uuid;
	char vol_name[CVM_NAME_MAX + 1];
	uint64_t lun_bytes;
	uint64_t data_offset;
	uint64_t generation; /* the config generation that added this LUN */
	uint64_t ctime;
};

enum cvm_decode { CVM_DECODE_OK, CVM_DECODE_ABSENT, CVM_DECODE_DAMAGED };

void cvm_label_encode(const struct cvm_label *l, uint8_t buf[CVM_LABEL_BYTES]);
enum cvm_decode cvm_label_decode(const uint8_t buf[CVM_LABEL_BYTES], struct cvm_label *l);
/* Returns the encoded length (a multiple of 4 KiB, at most CVM_SLOT_BYTES). copy_on says which
 * LUN this copy is written to, so a damaged label can be rebuilt from the config. */
size_t cvm_config_encode(const struct cvm_config *c, const cvm_uuid *copy_on,
			 uint8_t buf[CVM_SLOT_BYTES]);
enum cvm_decode cvm_config_decode(const uint8_t buf[CVM_SLOT_BYTES], struct cvm_config *c,
				  cvm_uuid *copy_on);

/* ---- LUN devices (lun.c) ---- */
struct cvm_lun_id {
	dev_t dev;  /* for regular files: the filesystem and inode */
	ino_t ino;
	dev_t rdev; /* for block devices */
	bool is_block;
};

/* Open a LUN path O_DIRECT after checking that it exists, is a block device or a regular file,
 * and report its size and identity.  Messages name the path. */
int cvm_lun_open(const char *path, int oflags, uint64_t *size, struct cvm_lun_id *id);
bool cvm_lun_id_equal(const struct cvm_lun_id *a, const struct cvm_lun_id *b);
struct stat;
struct cvm_lun_id cvm_lun_id_of(const struct stat *st);
enum cvm_lun_lock { CVM_LOCK_USE, CVM_LOCK_CHANGE, CVM_LOCK_ALONE, CVM_UNLOCK_CHANGE };
/* Take a lock without waiting; -EBUSY with a message naming the LUN if someone holds it. */
int cvm_lun_lock(int fd, const char *path, enum cvm_lun_lock kind);
/* Read the whole metadata area (CVM_META_BYTES) into an aligned buffer. */
int cvm_lun_read_meta(int fd, uint8_t *meta);
/* Every metadata write goes through here: pwrite + fdatasync, with fault injection for the
 * crash tests (see cvm_fault_crash_after). */
int cvm_lun_write_meta(int fd, const void *buf, size_t len, uint64_t offset);
int cvm_lun_write_label(int fd, const struct cvm_label *l);
/* Unsynced, for a caller that flushes every LUN written at once after the last copy. */
int cvm_lun_write_config(int fd, const struct cvm_config *c, const cvm_uuid *copy_on, int slot,
			 bool sync);
/* Removal wipes every LUN's config copies before any label, so that a crash in between leaves
 * labelled LUNs without config (PREPARED), never a config naming an unlabelled LUN. */
int cvm_lun_wipe_configs(int fd);
int cvm_lun_wipe_label(int fd);
void *cvm_alloc_aligned(size_t len);

/* Test hook: after n more metadata writes, the process exits with status CVM_FAULT_EXIT as if
 * the machine lost power (n < 0 disables).  Also set by the environment variable
 * CVM_FAULT_CRASH_AFTER for tests of the cvm command. */
#define CVM_FAULT_EXIT 86
void cvm_fault_crash_after(long n);
/* Counts one write against that budget (metadata writes count themselves): the restripe's
 * data writes, so that its crash tests stop it between any two writes. */
void cvm_fault_point(void);

/* ---- volume.c, for change.c ---- */
/* Assemble the volume cfg describes, taking `lock` on every LUN. */
int cvm_volume_open_config(const struct cvm_scan *scan, const struct cvm_config *cfg, int flags,
			   enum cvm_lun_lock lock, struct cvm_volume **out);

/* ---- change.c, for restripe.c ---- */
/* Write cfg (its generation already the next) to every LUN, given as descriptors in config
 * order: the second phase of every config change. */
int cvm_config_commit(const struct cvm_config *cfg, const int *fds);
/* The same on the LUNs of vol, whose flushes of them go in parallel: one flush's time, not
 * one per LUN (a restripe commits twice a batch). */
int cvm_config_commit_on(const struct cvm_config *cfg, struct cvm_volume *vol);

#endif
