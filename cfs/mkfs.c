/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* mkfs: lay out the superblocks, the slot journals, the allocation groups, the root directory
 * and one orphan directory per slot.  Everything is validated before the first write; the old
 * superblocks are wiped first and the new ones written last, so an interrupted mkfs leaves a
 * volume that mounts as "no filesystem", never a half-made one. */
#include "cfs/internal.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_BLOCK 4096u
#define DEFAULT_SLOTS 4u
#define DEFAULT_JOURNAL_BYTES (4u << 20)
#define MIN_JOURNAL_BLOCKS 64u
#define MIN_LAST_AG 64u

/* On a cluster each slot's orphan directory (an inode and its bucket) starts a span of inode
 * glocks of its own, past the root's: every unlink there changes the unlinker's orphan
 * directory, and must not take the root's glock from every node that looks up a name in it.
 * With one node they follow the root (no gaps for the first files to be cut into). */
static uint64_t orphan_dir_block(const struct cfs_dsuper *sb, uint32_t slot)
{
	if (strcmp(sb->lockproto, "local") == 0)
		return sb->ag_start + 3 + 2 * (uint64_t)slot;
	uint64_t past_root = ((sb->ag_start + 2) | (CFS_IGLOCK_SPAN - 1)) + 1;
	return past_root + (uint64_t)slot * CFS_IGLOCK_SPAN;
}

static int geometry(struct cvm_volume *vol, const struct cfs_mkfs_opts *o, struct cfs_dsuper *sb)
{
	const char *vname = cvm_volume_config(vol)->name;
	uint32_t bs = o->block_size ? o->block_size : DEFAULT_BLOCK;
	if (bs < CFS_MIN_BLOCK || bs > CFS_MAX_BLOCK || (bs & (bs - 1))) {
		cfs_set_error("block size %u: give a power of two from 4096 to 65536", bs);
		return -EINVAL;
	}
	uint32_t slots = o->slots ? o->slots : DEFAULT_SLOTS;
	if (slots > CFS_MAX_SLOTS) {
		cfs_set_error("%u node slots: at most %u", slots, CFS_MAX_SLOTS);
		return -EINVAL;
	}
	if (o->label && strlen(o->label) > CFS_LABEL_MAX) {
		cfs_set_error("label '%s' is longer than %u characters", o->label, CFS_LABEL_MAX);
		return -EINVAL;
	}
	if (o->lockproto && cfs_lockproto_check(o->lockproto))
		return -EINVAL;
	uint32_t jb = o->journal_blocks ? o->journal_blocks : DEFAULT_JOURNAL_BYTES / bs;
	if (jb < MIN_JOURNAL_BLOCKS)
		jb = MIN_JOURNAL_BLOCKS;
	memset(sb, 0, sizeof *sb);
	sb->format = CFS_FORMAT;
	if (cfs_features_choose(sb, o->feature_level, o->features))
		return -EINVAL;
	sb->block_size = bs;
	sb->nslots = slots;
	sb->journal_start = 2;
	sb->journal_blocks = jb;
	sb->ag_start = 2 + (uint64_t)slots * jb;
	sb->ag_blocks = CFS_AG_MAX_BLOCKS(bs);
	snprintf(sb->lockproto, sizeof sb->lockproto, "%s", o->lockproto ? o->lockproto : "local");
	uint64_t total = cvm_volume_size(vol) / bs;
	uint64_t data = total > sb->ag_start ? total - sb->ag_start : 0;
	uint64_t nags = data / sb->ag_blocks;
	if (data % sb->ag_blocks >= MIN_LAST_AG)
		nags++;
	else
		total -= data % sb->ag_blocks; /* a sliver too small for a group stays unused */
	/* group 0: header, root and orphan dirs */
	uint64_t group0_used = orphan_dir_block(sb, slots - 1) + 2 - sb->ag_start;
	if (nags == 0 || cfs_ag_size(&(struct cfs_dsuper){.ag_start = sb->ag_start,
							.ag_blocks = sb->ag_blocks,
							.total_blocks = total}, 0) < group0_used + 16) {
		cfs_set_error("volume %s is too small for %u slots of %u-block journals: "
			      "use fewer slots (-J) or a bigger volume", vname, slots, jb);
		return -ENOSPC;
	}
	if (nags > UINT32_MAX) {
		cfs_set_error("volume %s is too big for block size %u: use a bigger -b", vname, bs);
		return -EFBIG;
	}
	sb->total_blocks = total;
	sb->nags = (uint32_t)nags;
	memcpy(sb->vol_uuid, cvm_volume_config(vol)->vol_uuid.b, 16);
	cvm_uuid u;
	cvm_uuid_generate(&u);
	memcpy(sb->fs_uuid, u.b, 16);
	if (o->label)
		snprintf(sb->label, sizeof sb->label, "%s", o->label);
	if (getrandom(&sb->hash_seed, sizeof sb->hash_seed, 0) != sizeof sb->hash_seed)
		sb->hash_seed = (uint32_t)time(NULL);
	sb->ctime = sb->mtime = (uint64_t)time(NULL);
	sb->generation = 1;
	sb->root_ino = sb->ag_start + 1;
	for (uint32_t s = 0; s < slots; s++)
		sb->orphan_dir[s] = orphan_dir_block(sb, s);
	return 0;
}

/* A directory inode and its one empty bucket. */
static int write_dir(struct cvm_volume *vol, const struct cfs_dsuper *sb, uint64_t ino,
		     uint64_t parent, uint32_t mode, uint8_t *b)
{
	uint32_t bs = sb->block_size;
	cfs_block_init(b, bs, ino, CFS_B_INODE, ino);
	struct cfs_dinode *d = (void *)b;
	d->mode = S_IFDIR | mode;
	d->nlink = 2;
	d->nblocks = 1;
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	d->atime = d->mtime = d->ctime = d->btime = now.tv_sec;
	d->generation = 1;
	d->parent = parent;
	d->nextents = 1;
	struct cfs_dextent e = {0, ino + 1, 1, 0};
	memcpy(b + CFS_INODE_EXT_OFF, &e, sizeof e);
	cfs_block_seal(b, bs);
	int rc = cvm_volume_write(vol, b, bs, ino * bs);
	if (rc)
		return rc;
	cfs_block_init(b, bs, ino + 1, CFS_B_BUCKET, ino);
	cfs_block_seal(b, bs);
	return cvm_volume_write(vol, b, bs, (ino + 1) * bs);
}

static int existing(struct cvm_volume *vol, bool force)
{
	struct cfs_dsuper old;
	int rc = cfs_super_read(vol, &old, NULL);
	if (rc == -ENODATA || force)
		return 0;
	if (rc == 0) {
		cvm_uuid u;
		char us[CVM_UUID_STR];
		memcpy(u.b, old.fs_uuid, 16);
		cvm_uuid_format(&u, us);
		cfs_set_error("volume %s already holds a CFS filesystem (label '%s', uuid %s): "
			      "give --force to overwrite it", cvm_volume_config(vol)->name,
			      old.label, us);
	} else {
		cfs_set_error("volume %s holds a damaged CFS superblock: run fsck.cfs, or give "
			      "--force to overwrite it", cvm_volume_config(vol)->name);
	}
	return -EEXIST;
}

int cfs_mkfs(struct cvm_volume *vol, const struct cfs_mkfs_opts *o, cfs_progress_fn progress,
	     void *arg)
{
	struct cfs_dsuper sb;
	int rc = geometry(vol, o, &sb);
	if (!rc)
		rc = existing(vol, o->force);
	int claim = -1;
	if (!rc)
		rc = cfs_volume_claim(vol, true, &claim);
	if (rc)
		return rc;
	uint32_t bs = sb.block_size;
	uint8_t *b;
	if (posix_memalign((void **)&b, 4096, bs)) {
		close(claim);
		return -ENOMEM;
	}
	memset(b, 0, bs);
	rc = cvm_volume_write(vol, b, bs, 0);
	if (!rc)
		rc = cvm_volume_write(vol, b, bs, bs);
	for (uint32_t s = 0; s < sb.nslots && !rc; s++)
		rc = cfs_journal_clear(vol, &sb, s, 1);
	for (uint32_t g = 0; g < sb.nags && !rc; g++) {
		/* group 0 also holds the root directory, then the orphan directories */
		cfs_agh_format(b, bs, g, cfs_ag_first(&sb, g), cfs_ag_size(&sb, g), g == 0 ? 3 : 1);
		for (uint32_t s = 0; g == 0 && s < sb.nslots; s++)
			cfs_agh_take(b, sb.orphan_dir[s], 2);
		cfs_block_seal(b, bs);
		rc = cvm_volume_write(vol, b, bs, cfs_ag_first(&sb, g) * bs);
		if (progress && (g % 64 == 0 || g + 1 == sb.nags))
			progress(arg, "allocation groups", g + 1, sb.nags);
	}
	if (!rc)
		rc = write_dir(vol, &sb, sb.root_ino, sb.root_ino, 0755, b);
	for (uint32_t s = 0; s < sb.nslots && !rc; s++)
		rc = write_dir(vol, &sb, sb.orphan_dir[s], sb.orphan_dir[s], 0700, b);
	if (!rc)
		rc = cvm_volume_flush(vol);
	if (!rc)
		rc = cfs_super_write(vol, &sb);
	free(b);
	close(claim);
	if (!rc && (sb.features[CFS_RO_COMPAT] & CFS_FEAT_QUOTA))
		rc = cfs_quota_build(vol, progress, arg);
	if (rc && !cfs_last_error()[0])
		cfs_set_error("volume %s: write failed: %s", cvm_volume_config(vol)->name,
			      strerror(-rc));
	return rc;
}
