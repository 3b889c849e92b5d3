/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Online growth: after `cvm grow`, take in the new space.  The new groups' headers are
 * written first (nothing points at them yet), then one transaction extends the last group and
 * rewrites both superblocks; a crash before its commit leaves the old size, after it the new.
 *
 * On a cluster the grower does this under the metadata glock EX.  Every other node gave the
 * glock up meanwhile, so it reads the superblock again when it next gets it, before the
 * group summaries: a larger filesystem makes it open the volume again (cfsd's reopen
 * function: the config now names the new space) and switch to that handle.  Until then it
 * uses nothing of the new space, since it reads no group header without the glock. */
#include "cfs/internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MIN_NEW_AG 64u

static int write_new_groups(struct cfs_fs *fs, struct cvm_volume *vol,
			    const struct cfs_dsuper *sb, uint32_t from)
{
	uint8_t *b;
	if (posix_memalign((void **)&b, 4096, fs->bs))
		return -ENOMEM;
	int rc = 0;
	for (uint32_t g = from; g < sb->nags && !rc; g++) {
		cfs_agh_format(b, fs->bs, g, cfs_ag_first(sb, g), cfs_ag_size(sb, g), 1);
		cfs_block_seal(b, fs->bs);
		rc = cvm_volume_write(vol, b, fs->bs, cfs_ag_first(sb, g) * fs->bs);
	}
	free(b);
	return rc ? rc : cvm_volume_flush(vol);
}

/* The last group takes the blocks it can hold: their bits are clear, so they are free. */
static int extend_last_group(struct cfs_fs *fs, const struct cfs_dsuper *sb)
{
	uint32_t last = fs->sb.nags - 1;
	uint32_t old = cfs_ag_size(&fs->sb, last), now = cfs_ag_size(sb, last);
	if (now == old)
		return 0;
	struct cfs_buf *b;
	int rc = cfs_bread(fs, cfs_ag_first(&fs->sb, last), CFS_B_AGH, last, &b);
	if (rc)
		return rc;
	struct cfs_dagh *g = (void *)b->data;
	g->nblocks = now;
	g->nfree += now - old;
	cfs_bdirty(fs, b);
	return 0;
}

int cfs_grow(struct cfs_fs *fs, struct cvm_volume *grown, uint64_t *added_blocks)
{
	const struct cvm_config *cfg = cvm_volume_config(grown);
	if (memcmp(cfg->vol_uuid.b, fs->sb.vol_uuid, 16)) {
		cfs_set_error("volume %s is not the one this filesystem lives on", cfg->name);
		return -EINVAL;
	}
	int rc = cfs_op_begin(fs, true);
	if (rc)
		return rc;
	struct cfs_dsuper sb = fs->sb;
	uint64_t total = cvm_volume_size(grown) / fs->bs;
	/* Blocks past a full last group form new groups; a sliver too small stays unused. */
	uint64_t last_end = cfs_ag_first(&sb, sb.nags - 1) + sb.ag_blocks;
	uint64_t nags = sb.nags;
	if (total > last_end)
		nags += (total - last_end) / sb.ag_blocks + ((total - last_end) % sb.ag_blocks >= MIN_NEW_AG);
	uint64_t new_total = total < last_end ? total : cfs_ag_first(&sb, (uint32_t)nags - 1) +
		(total - cfs_ag_first(&sb, (uint32_t)nags - 1) < sb.ag_blocks
			 ? total - cfs_ag_first(&sb, (uint32_t)nags - 1) : sb.ag_blocks);
	if (new_total <= sb.total_blocks || nags > UINT32_MAX) {
		cfs_set_error("volume %s has no room the filesystem does not use already: run "
			      "cvm grow first", cfg->name);
		cfs_op_end(fs);
		return -ENOSPC;
	}
	sb.total_blocks = new_total;
	sb.nags = (uint32_t)nags;
	sb.mtime = (uint64_t)time(NULL);
	sb.generation++;
	/* The last group's header is its glock's: another node holding that glock may have a
	 * newer header in its log, not yet home, which a copy read without it would undo. */
	if ((rc = cfs_group_ensure(fs, fs->sb.nags - 1))) {
		cfs_op_end(fs);
		return rc;
	}
	cfs_volume_adopt(fs, grown);
	/* Data I/O is stopped while the volume handle changes: what is in flight ends first
	 * (direct I/O's ends do not wait for fs->lock, see cfs_direct_io_end). */
	if (pthread_rwlock_trywrlock(&fs->vol_lock)) {
		cfs_log(fs, "grow: waiting for the data I/O in flight to end");
		pthread_rwlock_wrlock(&fs->vol_lock);
	}
	rc = cfs_journal_commit(fs);
	if (!rc)
		rc = write_new_groups(fs, grown, &sb, fs->sb.nags);
	if (!rc) {
		fs->vol = grown;
		rc = extend_last_group(fs, &sb);
	}
	if (!rc)
		rc = cfs_super_journal(fs, &sb);
	if (!rc)
		rc = cfs_journal_commit(fs);
	if (!rc) /* a node that mounts next reads the superblock before it takes any lock */
		rc = cfs_journal_empty(fs);
	if (!rc) {
		*added_blocks = sb.total_blocks - fs->sb.total_blocks;
		fs->sb = sb;
		rc = cfs_alloc_load(fs);
		cfs_log(fs, "grown to %llu blocks in %u groups", (unsigned long long)sb.total_blocks,
			sb.nags);
	} else {
		cfs_set_error("grow failed: %s", strerror(-rc));
	}
	pthread_rwlock_unlock(&fs->vol_lock);
	cfs_op_end(fs);
	return rc;
}

int cfs_growth_take_in(struct cfs_fs *fs)
{
	struct cfs_dsuper sb;
	if (!fs->cluster)
		return 0;
	int rc = cfs_super_read_primary(fs->vol, &sb);
	if (rc) {
		cfs_log(fs, "superblock: %s", rc == -EUCLEAN ? "bad checksum" : strerror(-rc));
		return -EIO;
	}
	if (sb.generation == fs->sb.generation)
		return 0;
	bool read_only;
	if (cfs_features_check(&sb, cvm_volume_config(fs->vol)->name, !fs->ro, &read_only)) {
		cfs_log(fs, "the superblock another node wrote: %s", cfs_last_error());
		return -EIO;
	}
	if (sb.total_blocks == fs->sb.total_blocks) { /* node slots added (slots.c) */
		const char *why;
		if (cfs_super_check(&sb, cvm_volume_size(fs->vol), &why)) {
			cfs_log(fs, "the superblock another node wrote is not valid: %s", why);
			return -EIO;
		}
		if (sb.nslots != fs->sb.nslots)
			cfs_log(fs, "another node added node slots: now %u", sb.nslots);
		fs->sb = sb;
		return 0;
	}
	const char *why = NULL;
	struct cvm_volume *vol = NULL;
	if (!fs->reopen)
		why = "nobody here can open the volume again";
	else if ((rc = fs->reopen(fs->reopen_arg, &vol)))
		why = strerror(-rc);
	else if (cfs_super_check(&sb, cvm_volume_size(vol), &why))
		vol = NULL; /* the caller closes it; why says what is wrong */
	if (why) {
		cfs_log(fs, "another node grew the filesystem to %llu blocks, but this node cannot "
			"take it in: %s", (unsigned long long)sb.total_blocks, why);
		return -EIO;
	}
	cfs_volume_adopt(fs, vol);
	pthread_rwlock_wrlock(&fs->vol_lock);
	fs->vol = vol;
	fs->sb = sb;
	pthread_rwlock_unlock(&fs->vol_lock);
	cfs_log(fs, "another node grew the filesystem: now %llu blocks in %u groups",
		(unsigned long long)sb.total_blocks, sb.nags);
	return 0;
}

int cfs_growth_catch_up(struct cfs_fs *fs)
{
	int rc = cfs_op_begin(fs, false); /* the glock's grant takes the growth in */
	if (!rc)
		cfs_op_end(fs);
	return rc;
}

void cfs_volume_hold(struct cfs_fs *fs, bool hold)
{
	if (!hold) {
		pthread_mutex_unlock(&fs->lock);
		pthread_rwlock_unlock(&fs->vol_lock);
		return;
	}
	/* Operations hold fs->lock, direct I/O vol_lock; the commit lands the log's write.  No
	 * data I/O is in flight once vol_lock is held (their ends let it go before they wait
	 * for fs->lock, and wait only if they hold no other up: cfs_direct_io_end). */
	pthread_rwlock_wrlock(&fs->vol_lock);
	pthread_mutex_lock(&fs->lock);
	if (!fs->ro)
		cfs_journal_commit(fs);
}
