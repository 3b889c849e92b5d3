/* The write-ahead metadata journal of a node slot: a circular log of transactions behind an
 * anchor block (format.h).
 *
 * A commit writes the transaction (descriptor, block images, commit block) at the log's head
 * and flushes once: the commit block's checksum of the images, not a flush between them and
 * it, tells a whole transaction from a torn one.  That flush also carries the previous
 * transaction's in-place writes, so a commit writes its own blocks in place after it without
 * a flush of their own.  At any time, then, only the newest transaction may have blocks not
 * yet home, and a new one may overwrite any older one but that.  Replay applies the run of
 * consecutive transactions that ends at the newest whole one of the anchor's log: older ones
 * are home, so writing them again changes nothing, and replay is idempotent.  A torn newest
 * transaction was never acknowledged (its flush had not returned).
 *
 * One thing replay must never do is write an old image over a block that was freed and has
 * been handed out again since (a file's data written there and fsync'd, say).  So the anchor
 * is written again, with a new log_id that makes every transaction before it void, before a
 * block that is in the log can be handed out again: right after the commit that frees it.  It
 * is also written at a let-go of a glock and at unmount (another node may change the blocks
 * next), when a transaction is too big to go beside the newest one, and when the log has
 * named many blocks since (their set is kept to tell frees of them). */
#include "cfs/internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

static uint64_t journal_first(const struct cfs_dsuper *sb, uint32_t slot)
{
	return sb->slot_journal[slot] ? sb->slot_journal[slot]
				       : sb->journal_start + (uint64_t)slot * sb->journal_blocks;
}

uint32_t cfs_journal_limit(const struct cfs_dsuper *sb)
{
	/* One transaction must fit in the log behind the anchor: count + 2 <= blocks - 1. */
	uint32_t max = CFS_JDESC_MAX(sb->block_size);
	return sb->journal_blocks - 3 < max ? sb->journal_blocks - 3 : max;
}

/* Each anchor starts a log of its own: nothing written before it can pass for its own. */
static uint32_t new_log_id(void)
{
	uint32_t id;
	if (getrandom(&id, sizeof id, GRND_NONBLOCK) != (ssize_t)sizeof id) {
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		id = (uint32_t)ts.tv_nsec ^ (uint32_t)ts.tv_sec * 2654435761u;
	}
	return id ? id : 1; /* 0 is format 1's */
}

static int write_anchor(struct cvm_volume *vol, const struct cfs_dsuper *sb, uint32_t slot,
			uint64_t seq, uint32_t log_id)
{
	uint32_t bs = sb->block_size;
	uint8_t *b;
	if (posix_memalign((void **)&b, 4096, bs))
		return -ENOMEM;
	uint64_t at = journal_first(sb, slot);
	cfs_block_init(b, bs, at, CFS_B_JDESC, slot);
	cfs_journal_anchor_init(b, seq, log_id);
	cfs_block_seal(b, bs);
	int rc = cvm_volume_write(vol, b, bs, at * bs);
	free(b);
	return rc;
}

int cfs_journal_clear(struct cvm_volume *vol, const struct cfs_dsuper *sb, uint32_t slot,
		      uint64_t seq)
{
	return write_anchor(vol, sb, slot, seq, new_log_id());
}

void cfs_journal_anchor_init(void *block, uint64_t seq, uint32_t log_id)
{
	struct cfs_djdesc *a = block;
	a->seq = seq;
	a->log_id = log_id ? log_id : new_log_id();
}

/* ---- reading a slot's log ---- */
struct log_reader {
	const struct cfs_dsuper *sb;
	uint32_t slot, blocks; /* the journal's length in blocks */
	uint64_t at;           /* its first block on the volume */
	const uint8_t *jr;     /* the whole journal, as read */
	uint32_t log_id;
};

/* The blocks of the whole transaction of the log whose descriptor is at `pos`, or 0 (not a
 * descriptor, of another log, or torn). */
static uint32_t txn_at(const struct log_reader *r, uint32_t pos)
{
	uint32_t bs = r->sb->block_size;
	const char *why;
	const uint8_t *d = r->jr + (size_t)pos * bs;
	const struct cfs_djdesc *desc = (const void *)d;
	if (cfs_block_verify(d, bs, r->at + pos, CFS_B_JDESC, r->slot, &why) ||
	    desc->log_id != r->log_id || desc->count == 0 ||
	    desc->count > cfs_journal_limit(r->sb) || pos + desc->count + 2 > r->blocks ||
	    desc->revokes > CFS_JDESC_MAX(bs) - desc->count)
		return 0;
	uint32_t n = desc->count;
	const uint8_t *img = d + bs;
	const struct cfs_djcommit *c = (const void *)(img + (size_t)n * bs);
	if (cfs_block_verify(c, bs, r->at + pos + 1 + n, CFS_B_JCOMMIT, r->slot, &why) ||
	    c->seq != desc->seq || c->count != n || c->log_id != r->log_id ||
	    c->images_crc != cvm_crc32c(0, img, (size_t)n * bs))
		return 0;
	const uint64_t *t = (const uint64_t *)(d + CFS_JDESC_OFF);
	for (uint32_t i = 0; i < n; i++) {
		const struct cfs_bhdr *h = (const void *)(img + (size_t)i * bs);
		if (h->blkno != t[i] || t[i] >= r->sb->total_blocks + 2)
			return 0;
	}
	return n;
}

static uint64_t txn_seq(const struct log_reader *r, uint32_t pos)
{
	return ((const struct cfs_djdesc *)(r->jr + (size_t)pos * r->sb->block_size))->seq;
}

/* Add a transaction's images to the log's, each block once, with its latest image. */
static int collect_txn(const struct log_reader *r, uint32_t pos, struct cfs_jlog *log,
		       uint32_t *cap)
{
	uint32_t bs = r->sb->block_size;
	const uint8_t *d = r->jr + (size_t)pos * bs;
	uint32_t n = ((const struct cfs_djdesc *)d)->count;
	const uint64_t *t = (const uint64_t *)(d + CFS_JDESC_OFF);
	for (uint32_t i = 0; i < n; i++) {
		uint32_t k = 0;
		while (k < log->count && log->targets[k] != t[i])
			k++;
		if (k == log->count) {
			if (log->count == *cap) {
				uint32_t ncap = *cap ? *cap * 2 : 64;
				uint64_t *nt = realloc(log->targets, ncap * sizeof *nt);
				if (!nt)
					return -ENOMEM;
				log->targets = nt;
				uint8_t *ni;
				if (posix_memalign((void **)&ni, 4096, (size_t)ncap * bs))
					return -ENOMEM;
				if (log->count)
					memcpy(ni, log->images, (size_t)log->count * bs);
				free(log->images);
				log->images = ni;
				*cap = ncap;
			}
			log->targets[log->count++] = t[i];
		}
		memcpy(log->images + (size_t)k * bs, d + (size_t)(1 + i) * bs, bs);
	}
	/* Freed by this transaction: no image of it so far goes home (later ones may). */
	const uint64_t *revoked = t + n;
	for (uint32_t i = 0; i < ((const struct cfs_djdesc *)d)->revokes; i++)
		for (uint32_t k = 0; k < log->count; k++)
			if (log->targets[k] == revoked[i]) {
				log->count--;
				log->targets[k] = log->targets[log->count];
				memcpy(log->images + (size_t)k * bs,
				       log->images + (size_t)log->count * bs, bs);
				break;
			}
	return 0;
}

/* Where the whole transaction `seq` is among the `n` found, or -1. */
static int find_seq(const struct log_reader *r, const uint32_t *found, uint32_t n, uint64_t seq)
{
	for (uint32_t i = 0; i < n; i++)
		if (txn_seq(r, found[i]) == seq)
			return (int)i;
	return -1;
}

/* Every whole transaction of the anchor's log, then the run that ends at the newest. */
static int read_log(const struct log_reader *r, uint64_t from_seq, struct cfs_jlog *log)
{
	uint32_t *found = malloc(r->blocks * sizeof *found), n = 0, cap = 0;
	if (!found)
		return -ENOMEM;
	uint64_t newest = 0;
	for (uint32_t pos = 1; pos < r->blocks;) {
		uint32_t count = txn_at(r, pos);
		if (count && txn_seq(r, pos) >= from_seq) {
			found[n++] = pos;
			newest = txn_seq(r, pos) > newest ? txn_seq(r, pos) : newest;
		}
		pos += count ? count + 2 : 1;
	}
	log->next_seq = n ? newest + 1 : from_seq;
	uint64_t first = newest;
	while (n && first > from_seq && find_seq(r, found, n, first - 1) >= 0)
		first--;
	int rc = 0;
	for (uint64_t seq = first; n && seq <= newest && !rc; seq++) {
		int k = find_seq(r, found, n, seq); /* found above, as the run was measured */
		rc = k < 0 ? -EUCLEAN : collect_txn(r, found[k], log, &cap);
	}
	if (n && !rc) {
		log->ntxn = (uint32_t)(newest - first + 1);
		log->first_seq = first;
		log->last_seq = newest;
	}
	free(found);
	return rc;
}

int cfs_journal_read(struct cvm_volume *vol, const struct cfs_dsuper *sb, uint32_t slot,
		     struct cfs_jlog *log)
{
	memset(log, 0, sizeof *log);
	struct log_reader r = {.sb = sb, .slot = slot, .blocks = sb->journal_blocks,
			       .at = journal_first(sb, slot)};
	uint32_t bs = sb->block_size;
	uint8_t *jr;
	if (posix_memalign((void **)&jr, 4096, (size_t)r.blocks * bs))
		return -ENOMEM;
	r.jr = jr;
	int rc = cvm_volume_read(vol, jr, (uint64_t)r.blocks * bs, r.at * bs);
	const struct cfs_djdesc *anchor = (const void *)jr;
	const char *why;
	if (!rc && !cfs_block_verify(jr, bs, r.at, CFS_B_JDESC, slot, &why)) {
		r.log_id = anchor->log_id;
		if (anchor->count == 0) {
			rc = read_log(&r, anchor->seq, log);
		} else { /* format 1: its one transaction at block 0 */
			uint32_t cap = 0;
			log->next_seq = anchor->seq;
			if (txn_at(&r, 0) && !(rc = collect_txn(&r, 0, log, &cap))) {
				log->ntxn = 1;
				log->first_seq = log->last_seq = anchor->seq;
				log->next_seq = anchor->seq + 1;
			}
		}
	}
	free(jr);
	if (rc)
		cfs_jlog_free(log);
	return rc;
}

void cfs_jlog_free(struct cfs_jlog *log)
{
	free(log->targets);
	free(log->images);
	log->targets = NULL;
	log->images = NULL;
}

int cfs_journal_apply(struct cvm_volume *vol, const struct cfs_dsuper *sb, uint32_t slot,
		      struct cfs_jlog *log)
{
	uint32_t bs = sb->block_size;
	int rc = cfs_journal_read(vol, sb, slot, log);
	for (uint32_t i = 0; i < log->count && !rc; i++)
		rc = cvm_volume_write(vol, log->images + (size_t)i * bs, bs, log->targets[i] * bs);
	if (!rc && log->count)
		rc = cvm_volume_flush(vol);
	cfs_jlog_free(log);
	return rc;
}

/* ---- the blocks the log holds images of (an open-addressed set, emptied at an anchor) ---- */
static size_t logged_slot(const struct cfs_fs *fs, uint64_t blk)
{
	size_t mask = fs->jlogged_cap - 1, i = (size_t)(blk * 0x9e3779b97f4a7c15ull) & mask;
	while (fs->jlogged[i] && fs->jlogged[i] != blk + 1)
		i = (i + 1) & mask;
	return i;
}

static bool logged(const struct cfs_fs *fs, uint64_t blk)
{
	return fs->jlogged_n && fs->jlogged[logged_slot(fs, blk)];
}

/* Past this many the log's anchor moves (which empties the set) rather than the set grow. */
static uint32_t logged_max(const struct cfs_fs *fs)
{
	return fs->sb.journal_blocks * 4;
}

static int remember_logged(struct cfs_fs *fs)
{
	if (!fs->jlogged) {
		size_t cap = 16;
		while (cap < 2 * (size_t)(logged_max(fs) + fs->txn.limit))
			cap *= 2;
		if (!(fs->jlogged = calloc(cap, sizeof *fs->jlogged)))
			return -ENOMEM;
		fs->jlogged_cap = cap;
	}
	for (uint32_t i = 0; i < fs->txn.n; i++) {
		size_t k = logged_slot(fs, fs->txn.bufs[i]->blkno);
		if (!fs->jlogged[k]) {
			fs->jlogged[k] = fs->txn.bufs[i]->blkno + 1;
			fs->jlogged_n++;
		}
	}
	return 0;
}

static void forget_logged(struct cfs_fs *fs)
{
	if (fs->jlogged_n)
		memset(fs->jlogged, 0, fs->jlogged_cap * sizeof *fs->jlogged);
	fs->jlogged_n = 0;
}

/* The blocks the running transaction frees that the log holds images of (its own too, once
 * remember_logged ran), into rv, at most max of them; how many there are. */
static uint32_t frees_logged(const struct cfs_fs *fs, uint64_t *rv, uint32_t max)
{
	uint32_t n = 0;
	for (size_t i = 0; i < fs->npending; i += 2) {
		uint64_t start = fs->pending_free[i], len = fs->pending_free[i + 1];
		if (len <= 64) {
			for (uint64_t b = start; b < start + len; b++)
				if (logged(fs, b) && n++ < max)
					rv[n - 1] = b;
			continue;
		}
		for (size_t k = 0; k < fs->jlogged_cap && fs->jlogged_n; k++)
			if (fs->jlogged[k] > start && fs->jlogged[k] <= start + len && n++ < max)
				rv[n - 1] = fs->jlogged[k] - 1;
	}
	return n;
}

/* ---- this node's own log ---- */

int cfs_journal_empty(struct cfs_fs *fs)
{
	uint32_t log_id = new_log_id();
	int rc = cvm_volume_flush(fs->vol);
	if (!rc)
		rc = write_anchor(fs->vol, &fs->sb, fs->slot, fs->jseq, log_id);
	if (!rc)
		rc = cvm_volume_flush(fs->vol);
	if (rc)
		return rc;
	fs->jlog_id = log_id;
	fs->jlast_pos = fs->jlast_len = 0;
	forget_logged(fs);
	fs->stats.anchors++;
	return 0;
}

int cfs_journal_replay(struct cfs_fs *fs)
{
	struct cfs_jlog log;
	int rc = cfs_journal_apply(fs->vol, &fs->sb, fs->slot, &log);
	if (rc)
		return rc;
	fs->jseq = log.next_seq;
	fs->txn.limit = cfs_journal_limit(&fs->sb);
	if (log.ntxn)
		cfs_log(fs, "journal: replayed transactions %llu to %llu (%u blocks)",
			(unsigned long long)log.first_seq, (unsigned long long)log.last_seq,
			log.count);
	/* A log of this mount's own: the old one stays replayable only until it begins. */
	return fs->ro ? 0 : cfs_journal_empty(fs);
}

static int write_in_place(struct cfs_fs *fs)
{
	for (uint32_t i = 0; i < fs->txn.n; i++) {
		struct cfs_buf *b = fs->txn.bufs[i];
		int rc = cvm_volume_write(fs->vol, b->data, fs->bs, b->blkno * fs->bs);
		if (rc)
			return rc;
	}
	return 0;
}

/* The running transaction as it goes into the log at `pos`, with the blocks it frees that
 * the log holds images of, if they fit in its descriptor; *void_log if they do not (a new
 * anchor must then kill the log once it is committed). */
static uint8_t *log_record(struct cfs_fs *fs, uint32_t pos, bool *void_log)
{
	struct cfs_txn *t = &fs->txn;
	uint32_t bs = fs->bs, n = t->n;
	uint8_t *j;
	if (posix_memalign((void **)&j, 4096, (size_t)(n + 2) * bs))
		return NULL;
	uint64_t at = journal_first(&fs->sb, fs->slot) + pos;
	cfs_block_init(j, bs, at, CFS_B_JDESC, fs->slot);
	struct cfs_djdesc *desc = (void *)j;
	desc->seq = fs->jseq;
	desc->count = n;
	desc->log_id = fs->jlog_id;
	uint64_t *targets = (uint64_t *)(j + CFS_JDESC_OFF);
	uint32_t room = CFS_JDESC_MAX(bs) - n, revokes = frees_logged(fs, targets + n, room);
	*void_log = revokes > room;
	desc->revokes = *void_log ? 0 : revokes;
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
	c->log_id = fs->jlog_id;
	c->images_crc = cvm_crc32c(0, j + bs, (size_t)n * bs);
	cfs_block_seal(cb, bs);
	return j;
}

static int commit_running(struct cfs_fs *fs, bool *void_log)
{
	uint32_t n = fs->txn.n, need = n + 2;
	uint32_t head = fs->jlast_len ? fs->jlast_pos + fs->jlast_len : 1;
	uint32_t pos = head + need <= fs->sb.journal_blocks ? head : 1;
	/* The newest transaction's blocks may not be home before this commit's flush: to go
	 * over it, put it home and start a new log, and on disk before the first write to it
	 * (replay of the old log without its newest would put older images back). */
	bool over_newest = fs->jlast_len && pos < fs->jlast_pos + fs->jlast_len &&
			   pos + need > fs->jlast_pos;
	int rc = over_newest ? cfs_journal_empty(fs) : 0;
	if (over_newest)
		pos = 1;
	if (!rc) /* in the log from now on, also for the frees that follow it */
		rc = remember_logged(fs);
	uint8_t *j = rc ? NULL : log_record(fs, pos, void_log);
	if (!rc && !j)
		return -ENOMEM;
	uint64_t at = journal_first(&fs->sb, fs->slot) + pos;
	if (!rc)
		rc = cvm_volume_write(fs->vol, j, (uint64_t)need * fs->bs, at * fs->bs);
	free(j);
	if (!rc) /* committed, and the data and in-place writes before it on disk */
		rc = cvm_volume_flush(fs->vol);
	if (!rc)
		rc = write_in_place(fs);
	if (!rc) {
		fs->jlast_pos = pos;
		fs->jlast_len = need;
	}
	return rc;
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
	if (t->n > t->limit) {
		cfs_log(fs, "journal: transaction of %u blocks exceeds the journal (%u)", t->n,
			t->limit);
		fs->ro = true;
		return -EIO;
	}
	/* What this transaction frees is handed out again once it is committed: the log's
	 * images of it (this transaction's own too) are revoked in it, or if there are more
	 * than its descriptor holds, the log is voided now. */
	bool void_log = false;
	int rc = commit_running(fs, &void_log);
	if (!rc && (void_log || fs->jlogged_n > logged_max(fs)))
		rc = cfs_journal_empty(fs);
	if (rc) {
		/* The journal or the volume failed under us: stop changing anything.  What is
		 * committed is replayed at the next mount. */
		cfs_log(fs, "journal: commit %llu failed (%s): the filesystem is now read-only",
			(unsigned long long)fs->jseq, strerror(-rc));
		fs->ro = true;
		return -EIO;
	}
	fs->stats.commits++;
	fs->stats.commit_blocks += t->n;
	fs->jseq++;
	cfs_bcache_committed(fs);
	fs->npending = 0;
	return 0;
}
