/* The write-ahead metadata journal of a node slot.
 *
 * A slot's journal holds one transaction at a time: descriptor, block images, commit.  A
 * commit writes all three, flushes, then writes the blocks in place and flushes again, so by
 * the time the next transaction overwrites the journal the previous one is home.  Replay
 * writes the images of a complete transaction in place; doing that twice changes nothing, so
 * replay is idempotent and a crash during replay is harmless.  A torn transaction (no valid
 * commit block with its sequence number and the images' checksum) is ignored whole. */
#include "cfs/internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static uint64_t journal_first(const struct cfs_dsuper *sb, uint32_t slot)
{
	return sb->slot_journal[slot] ? sb->slot_journal[slot]
				       : sb->journal_start + (uint64_t)slot * sb->journal_blocks;
}

uint32_t cfs_journal_limit(const struct cfs_dsuper *sb)
{
	uint32_t max = CFS_JDESC_MAX(sb->block_size);
	return sb->journal_blocks - 2 < max ? sb->journal_blocks - 2 : max;
}

int cfs_journal_clear(struct cvm_volume *vol, const struct cfs_dsuper *sb, uint32_t slot,
		      uint64_t seq)
{
	uint32_t bs = sb->block_size;
	uint8_t *b;
	if (posix_memalign((void **)&b, 4096, bs))
		return -ENOMEM;
	uint64_t at = journal_first(sb, slot);
	cfs_block_init(b, bs, at, CFS_B_JDESC, slot);
	((struct cfs_djdesc *)b)->seq = seq;
	cfs_block_seal(b, bs);
	int rc = cvm_volume_write(vol, b, bs, at * bs);
	free(b);
	return rc;
}

int cfs_journal_read(struct cvm_volume *vol, const struct cfs_dsuper *sb, uint32_t slot,
		     uint64_t *seq, uint32_t *count, uint64_t **targets, uint8_t **images)
{
	uint32_t bs = sb->block_size;
	uint64_t at = journal_first(sb, slot);
	const char *why;
	uint8_t *d;
	*count = 0;
	*seq = 0;
	*targets = NULL;
	*images = NULL;
	if (posix_memalign((void **)&d, 4096, bs))
		return -ENOMEM;
	int rc = cvm_volume_read(vol, d, bs, at * bs);
	const struct cfs_djdesc *desc = (const void *)d;
	if (rc || cfs_block_verify(d, bs, at, CFS_B_JDESC, slot, &why) || desc->count == 0 ||
	    desc->count > cfs_journal_limit(sb)) {
		if (!rc && !cfs_block_verify(d, bs, at, CFS_B_JDESC, slot, &why))
			*seq = desc->seq;
		free(d);
		return rc;
	}
	uint32_t n = desc->count;
	*seq = desc->seq;
	uint8_t *img;
	if (posix_memalign((void **)&img, 4096, (size_t)(n + 1) * bs)) {
		free(d);
		return -ENOMEM;
	}
	rc = cvm_volume_read(vol, img, (uint64_t)(n + 1) * bs, (at + 1) * bs);
	const struct cfs_djcommit *c = (const void *)(img + (size_t)n * bs);
	uint64_t *t = malloc(n * sizeof *t);
	bool whole = !rc && t && !cfs_block_verify(c, bs, at + 1 + n, CFS_B_JCOMMIT, slot, &why) &&
		     c->seq == desc->seq && c->count == n &&
		     c->images_crc == cvm_crc32c(0, img, (size_t)n * bs);
	for (uint32_t i = 0; whole && i < n; i++) {
		t[i] = ((const uint64_t *)(d + CFS_JDESC_OFF))[i];
		const struct cfs_bhdr *h = (const void *)(img + (size_t)i * bs);
		whole = h->blkno == t[i] && t[i] < sb->total_blocks + 2;
	}
	free(d);
	if (!whole) { /* torn: the transaction never happened */
		free(t);
		free(img);
		return rc;
	}
	*count = n;
	*targets = t;
	*images = img;
	return 0;
}

int cfs_journal_apply(struct cvm_volume *vol, const struct cfs_dsuper *sb, uint32_t slot,
		      uint64_t *seq, uint32_t *count)
{
	uint64_t *targets;
	uint8_t *images;
	uint32_t bs = sb->block_size;
	int rc = cfs_journal_read(vol, sb, slot, seq, count, &targets, &images);
	for (uint32_t i = 0; i < *count && !rc; i++)
		rc = cvm_volume_write(vol, images + (size_t)i * bs, bs, targets[i] * bs);
	if (!rc && *count)
		rc = cvm_volume_flush(vol);
	free(targets);
	free(images);
	return rc;
}

int cfs_journal_replay(struct cfs_fs *fs)
{
	uint64_t seq;
	uint32_t n;
	int rc = cfs_journal_apply(fs->vol, &fs->sb, fs->slot, &seq, &n);
	if (rc)
		return rc;
	fs->jseq = seq + 1;
	fs->txn.limit = cfs_journal_limit(&fs->sb);
	if (n)
		cfs_log(fs, "journal: replayed transaction %llu (%u blocks)",
			(unsigned long long)seq, n);
	return 0;
}

static int write_in_place(struct cfs_fs *fs)
{
	for (uint32_t i = 0; i < fs->txn.n; i++) {
		struct cfs_buf *b = fs->txn.bufs[i];
		int rc = cvm_volume_write(fs->vol, b->data, fs->bs, b->blkno * fs->bs);
		if (rc)
			return rc;
	}
	return cvm_volume_flush(fs->vol);
}

int cfs_journal_commit(struct cfs_fs *fs)
{
	struct cfs_txn *t = &fs->txn;
	if (!fs->ro && fs->ihash && cfs_iflush_times(fs))
		return -EIO;
	if (t->n == 0) {
		fs->npending = 0;
		return 0;
	}
	if (fs->ro)
		return -EROFS;
	uint32_t bs = fs->bs, n = t->n;
	if (n > t->limit) {
		cfs_log(fs, "journal: transaction of %u blocks exceeds the journal (%u)", n, t->limit);
		fs->ro = true;
		return -EIO;
	}
	uint8_t *j;
	if (posix_memalign((void **)&j, 4096, (size_t)(n + 2) * bs))
		return -ENOMEM;
	uint64_t at = journal_first(&fs->sb, fs->slot);
	cfs_block_init(j, bs, at, CFS_B_JDESC, fs->slot);
	struct cfs_djdesc *desc = (void *)j;
	desc->seq = fs->jseq;
	desc->count = n;
	uint64_t *targets = (uint64_t *)(j + CFS_JDESC_OFF);
	for (uint32_t i = 0; i < n; i++) {
		struct cfs_buf *b = t->bufs[i];
		cfs_block_seal(b->data, bs);
		targets[i] = b->blkno;
		memcpy(j + (size_t)(i + 1) * bs, b->data, bs);
	}
	cfs_block_seal(j, bs);
	uint8_t *cb = j + (size_t)(n + 1) * bs;
	cfs_block_init(cb, bs, at + 1 + n, CFS_B_JCOMMIT, fs->slot);
	struct cfs_djcommit *c = (void *)cb;
	c->seq = fs->jseq;
	c->count = n;
	c->images_crc = cvm_crc32c(0, j + bs, (size_t)n * bs);
	cfs_block_seal(cb, bs);
	int rc = cvm_volume_write(fs->vol, j, (uint64_t)(n + 2) * bs, at * bs);
	free(j);
	if (!rc)
		rc = cvm_volume_flush(fs->vol);
	if (!rc)
		rc = write_in_place(fs);
	if (rc) {
		/* The journal or the volume failed under us: stop changing anything.  What is
		 * committed is replayed at the next mount. */
		cfs_log(fs, "journal: commit %llu failed (%s): the filesystem is now read-only",
			(unsigned long long)fs->jseq, strerror(-rc));
		fs->ro = true;
		return -EIO;
	}
	fs->stats.commits++;
	fs->stats.commit_blocks += n;
	fs->jseq++;
	fs->journal_full = true;
	cfs_bcache_committed(fs);
	fs->npending = 0;
	return 0;
}
