/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The write-ahead metadata journal of a node slot: a log of transactions behind an anchor
 * block (format.h).
 *
 * A commit writes the transaction (descriptor, block images, commit block) at the log's head
 * and flushes once: the commit block's checksum of the images, not a flush between them and
 * it, tells a whole transaction from a torn one.  The committed blocks are not written in
 * place then: they stay in the block cache (out of reach of eviction) until a checkpoint
 * writes them all, each once however many transactions changed it, then flushes and writes a
 * new anchor.  So the log is only ever written forward from the anchor and never over a
 * transaction of its own, and replay applies every whole transaction since the anchor, up to
 * the newest: writing a block that is already home again changes nothing, so replay is
 * idempotent.  A torn newest transaction was never acknowledged (its flush had not returned).
 * A checkpoint comes only between transactions (no block changed and not committed), so the
 * cache holds the committed image of every block it writes.
 *
 * One thing replay must never do is write an old image over a block that was freed and has
 * been handed out again since (a file's data written there and fsync'd, say).  So the commit
 * that frees a block the log holds an image of revokes that image, or if there are too many,
 * a checkpoint follows the commit at once: the new anchor (with a new log_id) makes every
 * transaction before it void.  A checkpoint also comes when the log has no room for another
 * transaction of the largest size, at a let-go of a glock and at unmount (another node may
 * change the blocks next), and when the log has named many blocks (their set is kept to
 * tell frees of them). */
#include "cfs/internal.h"
#include "release.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#define HOME_DEPTH 64u /* checkpoint writes in flight at once */

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
	uint16_t unknown_format; /* a whole-looking block of this log in a format we do not know */
};

/* Does the commit c prove the descriptor d and its n images, by c's journal format? */
static bool commit_proves(const struct cfs_djcommit *c, const uint8_t *d, uint32_t n,
			  uint32_t bs)
{
	if (c->h.version == CFS_JOURNAL_V3)
		return c->images_crc == cvm_crc32c(0, d, (size_t)(n + 1) * bs);
	return c->images_crc == cvm_crc32c(0, d + bs, (size_t)n * bs);
}

/* The blocks of the whole transaction of the log whose descriptor is at `pos`, or 0 (not a
 * descriptor, of another log, or torn). */
static uint32_t txn_at(struct log_reader *r, uint32_t pos)
{
	uint32_t bs = r->sb->block_size;
	const char *why;
	const uint8_t *d = r->jr + (size_t)pos * bs;
	const struct cfs_djdesc *desc = (const void *)d;
	if (cfs_block_verify(d, bs, r->at + pos, CFS_B_JDESC, r->slot, &why) ||
	    desc->log_id != r->log_id)
		return 0;
	if (desc->h.version != CFS_VERSION && desc->h.version != CFS_JOURNAL_V3) {
		r->unknown_format = desc->h.version;
		return 0;
	}
	if (desc->count == 0 ||
	    desc->count > cfs_journal_limit(r->sb) || pos + desc->count + 2 > r->blocks ||
	    desc->revokes > CFS_JDESC_MAX(bs) - desc->count)
		return 0;
	uint32_t n = desc->count;
	const uint8_t *img = d + bs;
	const struct cfs_djcommit *c = (const void *)(img + (size_t)n * bs);
	if (cfs_block_verify(c, bs, r->at + pos + 1 + n, CFS_B_JCOMMIT, r->slot, &why) ||
	    c->seq != desc->seq || c->count != n || c->log_id != r->log_id ||
	    c->h.version != desc->h.version || !commit_proves(c, d, n, bs))
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
	const struct cfs_djcommit *c = (const void *)(d + (size_t)(n + 1) * bs);
	if (c->h.version == CFS_JOURNAL_V3) {
		if (!log->first_ns)
			log->first_ns = c->time_ns;
		log->last_ns = c->time_ns;
		log->node = c->node;
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
static int read_log(struct log_reader *r, uint64_t from_seq, struct cfs_jlog *log)
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
	if (!rc && r.unknown_format) {
		cfs_set_error("the journal of slot %u holds transactions in journal format %u, "
			      "which this release (%s) cannot replay: replay it with the release "
			      "that wrote it (mount there, or its fsck.cfs)", slot, r.unknown_format,
			      CFS_RELEASE);
		rc = -EPROTONOSUPPORT;
	}
	if (rc)
		cfs_jlog_free(log);
	return rc;
}

const char *cfs_jlog_when(const struct cfs_jlog *log, char *buf, size_t len)
{
	buf[0] = 0;
	if (!log->first_ns)
		return buf;
	char from[32], to[32];
	struct tm tm;
	time_t t = (time_t)(log->first_ns / 1000000000u);
	strftime(from, sizeof from, "%F %T", localtime_r(&t, &tm));
	t = (time_t)(log->last_ns / 1000000000u);
	strftime(to, sizeof to, "%T", localtime_r(&t, &tm));
	snprintf(buf, len, ", committed by node %u from %s.%03u to %s.%03u", log->node, from,
		 (unsigned)(log->first_ns / 1000000u % 1000u), to,
		 (unsigned)(log->last_ns / 1000000u % 1000u));
	return buf;
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

struct freed_range {
	uint64_t start, len;
};

static int by_start(const void *a, const void *b)
{
	uint64_t x = ((const struct freed_range *)a)->start, y = ((const struct freed_range *)b)->start;
	return x < y ? -1 : x > y;
}

/* Is blk in one of the n ranges r, sorted and apart? */
static bool in_ranges(const struct freed_range *r, size_t n, uint64_t blk)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (r[mid].start + r[mid].len <= blk)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < n && r[lo].start <= blk;
}

/* The blocks the running transaction frees that the log holds images of (its own too, once
 * remember_logged ran), into rv, at most max of them; how many there are.  A short range's
 * blocks are looked up in the log's table, a long range is looked for by one walk of the
 * table for all of them (a big file freed: a range per group). */
static uint32_t frees_logged(const struct cfs_fs *fs, uint64_t *rv, uint32_t max)
{
	uint32_t n = 0;
	size_t nlong = 0;
	for (size_t i = 0; i < fs->npending; i += 2) {
		uint64_t start = fs->pending_free[i], len = fs->pending_free[i + 1];
		if (len > 64) {
			nlong++;
			continue;
		}
		for (uint64_t b = start; b < start + len; b++)
			if (logged(fs, b) && n++ < max)
				rv[n - 1] = b;
	}
	if (!nlong || !fs->jlogged_n)
		return n;
	struct freed_range *r = malloc(nlong * sizeof *r);
	if (!r)
		return max + 1; /* as if they did not fit: the log is voided */
	nlong = 0;
	for (size_t i = 0; i < fs->npending; i += 2)
		if (fs->pending_free[i + 1] > 64)
			r[nlong++] = (struct freed_range){fs->pending_free[i], fs->pending_free[i + 1]};
	qsort(r, nlong, sizeof *r, by_start);
	for (size_t k = 0; k < fs->jlogged_cap; k++)
		if (fs->jlogged[k] && in_ranges(r, nlong, fs->jlogged[k] - 1) && n++ < max)
			rv[n - 1] = fs->jlogged[k] - 1;
	free(r);
	return n;
}

/* ---- this node's own log ---- */

static void land_flight(struct cfs_fs *fs);

static void home_written(void *arg, int64_t result)
{
	int *err = arg;
	if (result < 0 && !*err)
		*err = (int)result;
}

/* The n block images in place (each header says where), all in flight at once, on vol. */
static int write_home(struct cfs_fs *fs, struct cvm_volume *vol, const uint8_t *const *image,
		      uint32_t n)
{
	if (fs->home_aio_vol != vol) { /* grown: the old context is of the old volume */
		cvm_aio_destroy(fs->home_aio);
		fs->home_aio = NULL;
		fs->home_aio_vol = vol;
	}
	int err = fs->home_aio ? 0 : cvm_aio_create(vol, HOME_DEPTH, &fs->home_aio);
	for (uint32_t i = 0; !err && (i < n || cvm_aio_inflight(fs->home_aio));) {
		while (!err && i < n) {
			uint64_t at = ((const struct cfs_bhdr *)image[i])->blkno * fs->bs;
			int rc = cvm_aio_submit(fs->home_aio, CVM_WRITE, (void *)image[i], fs->bs, at,
						home_written, &err);
			if (rc == -EAGAIN)
				break;
			if (rc)
				err = rc;
			i++;
		}
		int rc = cvm_aio_poll(fs->home_aio, 1, NULL);
		if (rc < 0 && !err)
			err = rc;
	}
	while (fs->home_aio && cvm_aio_inflight(fs->home_aio)) /* after an error: the buffers */
		if (cvm_aio_poll(fs->home_aio, 1, NULL) < 0)
			break;
	return err;
}

int cfs_journal_home(struct cfs_fs *fs)
{
	land_flight(fs);
	if (fs->txn.n) { /* its blocks' committed images may be gone from the cache */
		cfs_log(fs, "journal: emptied with a transaction running: refused");
		return -EINVAL;
	}
	uint32_t homed = fs->nunhome;
	const uint8_t **image = malloc((homed ? homed : 1) * sizeof *image);
	if (!image)
		return -ENOMEM;
	for (uint32_t i = 0; i < homed; i++)
		image[i] = fs->unhome[i]->data;
	int rc = write_home(fs, fs->vol, image, homed);
	free(image);
	if (!rc)
		rc = cvm_volume_flush(fs->vol);
	if (rc)
		return rc;
	cfs_bcache_homed(fs);
	fs->stats.home_blocks += homed;
	fs->janchor_owed = fs->jlast_len != 0;
	return 0;
}

/* A checkpoint that rides with a commit in flight (cfs_journal_sync): the committed images of
 * every block waiting to go in place, copied when the transaction closed, since the running
 * one may change the blocks meanwhile; then the anchor that empties the log.  No other
 * transaction closes before it is reaped. */
struct cfs_jhome {
	uint32_t n;
	const uint8_t **image; /* into copies */
	uint8_t *copies;
	struct cfs_dsuper sb; /* as it was: a grow may change fs->sb meanwhile */
	uint64_t anchor_seq;
	uint32_t log_id;
};

static void home_free(struct cfs_jhome *h)
{
	if (h) {
		free(h->image);
		free(h->copies);
		free(h);
	}
}

/* NULL if there is no memory for the copies: the caller checkpoints holding fs->lock. */
static struct cfs_jhome *home_copy(struct cfs_fs *fs)
{
	struct cfs_jhome *h = calloc(1, sizeof *h);
	uint32_t n = fs->nunhome, bs = fs->bs;
	if (!h || !(h->image = malloc((n ? n : 1) * sizeof *h->image)) ||
	    posix_memalign((void **)&h->copies, 4096, (size_t)(n ? n : 1) * bs)) {
		home_free(h);
		return NULL;
	}
	for (uint32_t i = 0; i < n; i++) {
		uint8_t *copy = h->copies + (size_t)i * bs;
		memcpy(copy, fs->unhome[i]->data, bs);
		h->image[i] = copy;
	}
	h->n = n;
	h->sb = fs->sb;
	h->anchor_seq = fs->jseq;
	h->log_id = new_log_id();
	return h;
}

/* In flight, after the commit's record: the copies in place, then the anchor. */
static int home_write(struct cfs_fs *fs, struct cvm_volume *vol, const struct cfs_jhome *h)
{
	int rc = write_home(fs, vol, h->image, h->n);
	if (!rc)
		rc = cvm_volume_flush(vol);
	if (!rc)
		rc = write_anchor(vol, &h->sb, fs->slot, h->anchor_seq, h->log_id);
	return rc ? rc : cvm_volume_flush(vol);
}

static void anchored(struct cfs_fs *fs, uint32_t log_id)
{
	fs->jlog_id = log_id;
	fs->jlast_pos = fs->jlast_len = 0;
	fs->janchor_owed = false;
	forget_logged(fs);
	fs->stats.anchors++;
}

/* Reaped, fs->lock held: the blocks written leave the checkpoint's list, the log is empty. */
static void home_reap(struct cfs_fs *fs, struct cfs_jhome *h)
{
	for (uint32_t i = 0; i < h->n; i++)
		cfs_bcache_homed_block(fs, ((const struct cfs_bhdr *)h->image[i])->blkno);
	fs->stats.home_blocks += h->n;
	anchored(fs, h->log_id);
}

/* A new anchor, with everything committed in place: the log begins anew. */
static int new_anchor(struct cfs_fs *fs)
{
	uint32_t log_id = new_log_id();
	int rc = write_anchor(fs->vol, &fs->sb, fs->slot, fs->jseq, log_id);
	if (!rc)
		rc = cvm_volume_flush(fs->vol);
	if (!rc)
		anchored(fs, log_id);
	return rc;
}

int cfs_journal_settle(struct cfs_fs *fs)
{
	if (!fs->janchor_owed || fs->ro)
		return 0;
	land_flight(fs); /* none: a commit since the home would have written the anchor */
	return new_anchor(fs);
}

int cfs_journal_empty(struct cfs_fs *fs)
{
	int rc = cfs_journal_home(fs);
	return rc ? rc : new_anchor(fs);
}

void cfs_journal_free(struct cfs_fs *fs)
{
	free(fs->jlogged);
	fs->jlogged = NULL;
	cvm_aio_destroy(fs->home_aio);
	fs->home_aio = NULL;
}

int cfs_journal_replay(struct cfs_fs *fs)
{
	struct cfs_jlog log;
	int rc = cfs_journal_apply(fs->vol, &fs->sb, fs->slot, &log);
	if (rc)
		return rc;
	fs->jseq = log.next_seq;
	fs->jdurable = fs->jseq - 1;
	fs->txn.limit = cfs_journal_limit(&fs->sb);
	char when[96];
	if (log.ntxn)
		cfs_log(fs, "journal: replayed transactions %llu to %llu (%u blocks%s)",
			(unsigned long long)log.first_seq, (unsigned long long)log.last_seq,
			log.count, cfs_jlog_when(&log, when, sizeof when));
	/* A log of this mount's own: the old one stays replayable only until it begins. */
	return fs->ro ? 0 : cfs_journal_empty(fs);
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
	bool v3 = cfs_journal_v3(&fs->sb);
	cfs_block_init(j, bs, at, CFS_B_JDESC, fs->slot);
	struct cfs_djdesc *desc = (void *)j;
	if (v3)
		desc->h.version = CFS_JOURNAL_V3;
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
	if (v3) {
		struct timespec now;
		clock_gettime(CLOCK_REALTIME, &now);
		c->h.version = CFS_JOURNAL_V3;
		c->node = fs->cluster ? cfslock_node_id(fs->locks) : 0;
		c->time_ns = (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
	}
	c->images_crc = v3 ? cvm_crc32c(0, j, (size_t)(n + 1) * bs)
			   : cvm_crc32c(0, j + bs, (size_t)n * bs);
	cfs_block_seal(cb, bs);
	return j;
}

/* Whether the log must be emptied before the next transaction: no room left for one of the
 * largest behind the newest, the revokes did not fit, or too many blocks to look up. */
static bool log_full(const struct cfs_fs *fs, bool void_log)
{
	return void_log || fs->jlogged_n > logged_max(fs) ||
	       fs->jlast_pos + fs->jlast_len + fs->txn.limit + 2 > fs->sb.journal_blocks;
}

/* A transaction closed for its commit: its record, to be written at `at` (bytes). */
struct closed_txn {
	uint8_t *record;
	uint64_t len, at, seq;
	bool void_log;
};

/* Close the running transaction: its record made and its place in the log taken behind the
 * newest, its blocks committed in the cache (they are not written before a checkpoint, and
 * a commit that fails makes the filesystem read-only). */
static int close_txn(struct cfs_fs *fs, struct closed_txn *c)
{
	int rc = fs->janchor_owed ? new_anchor(fs) : 0; /* the owed one first (cfs_journal_home) */
	if (rc)
		return rc;
	uint32_t need = fs->txn.n + 2;
	uint32_t pos = fs->jlast_len ? fs->jlast_pos + fs->jlast_len : 1;
	if (pos + need > fs->sb.journal_blocks) { /* log_full emptied it in time */
		cfs_log(fs, "journal: no room for %u blocks at %u of %u", need, pos,
			fs->sb.journal_blocks);
		return -EIO;
	}
	rc = remember_logged(fs); /* in the log from now on, also for the frees that follow */
	if (rc)
		return rc;
	if (!(c->record = log_record(fs, pos, &c->void_log)))
		return -ENOMEM;
	c->len = (uint64_t)need * fs->bs;
	c->at = (journal_first(&fs->sb, fs->slot) + pos) * fs->bs;
	c->seq = fs->jseq++;
	fs->jlast_pos = pos;
	fs->jlast_len = need;
	fs->stats.commits++;
	fs->stats.commit_blocks += fs->txn.n;
	cfs_bcache_committed(fs);
	return 0;
}

/* Other nodes read a group's header without its glock for its free count (df, where to
 * allocate): on a cluster it goes in place right after its commit, not at a checkpoint. */
static int groups_home(const struct cfs_fs *fs, struct cvm_volume *vol,
		       const struct closed_txn *c)
{
	int rc = 0;
	for (uint64_t at = fs->bs; at + fs->bs < c->len && !rc; at += fs->bs) {
		const struct cfs_bhdr *h = (const void *)(c->record + at);
		if (h->type == CFS_B_AGH)
			rc = cvm_volume_write(vol, h, fs->bs, h->blkno * fs->bs);
	}
	return rc;
}

/* The record on disk, and the data written before it. */
static int write_record(const struct cfs_fs *fs, struct cvm_volume *vol, struct closed_txn *c)
{
	int rc = cvm_volume_write(vol, c->record, c->len, c->at);
	if (!rc)
		rc = cvm_volume_flush(vol);
	if (!rc && fs->cluster)
		rc = groups_home(fs, vol, c);
	free(c->record);
	c->record = NULL;
	return rc;
}

static int commit_failed(struct cfs_fs *fs, const char *what, uint64_t seq, int rc)
{
	/* The journal or the volume failed under us: stop changing anything.  What is
	 * committed is replayed at the next mount. */
	cfs_log(fs, "journal: %s %llu failed (%s): the filesystem is now read-only", what,
		(unsigned long long)seq, strerror(-rc));
	fs->ro = true;
	cfs_withdraw(fs, "its journal failed");
	return -EIO;
}

/* ---- a commit in flight: its I/O outside fs->lock ----
 * Its owner closes the transaction and takes jio_lock before it lets fs->lock go, and sets
 * `done` before it lets jio_lock go, so a thread holding fs->lock waits for the I/O by taking
 * jio_lock, which the I/O never waits for fs->lock to finish.  Its frees stay pending until
 * then (first in pending_free: the transactions after it add theirs behind). */

static bool flight_done(const struct cfs_fs *fs)
{
	return __atomic_load_n(&fs->jflight.done, __ATOMIC_ACQUIRE);
}

/* The commit in flight is done, and the checkpoint after it if any: its frees may be handed
 * out. */
static void reap_flight(struct cfs_fs *fs)
{
	struct cfs_jflight *f = &fs->jflight;
	struct cfs_jhome *home = f->home;
	f->active = false;
	f->home = NULL;
	if (!f->rc && home)
		home_reap(fs, home);
	home_free(home);
	if (f->rc) {
		commit_failed(fs, home ? "commit and checkpoint" : "commit", f->seq, f->rc);
		return;
	}
	fs->jdurable = f->seq;
	if (!f->nfrees)
		return;
	fs->npending -= f->nfrees;
	memmove(fs->pending_free, fs->pending_free + f->nfrees,
		fs->npending * sizeof *fs->pending_free);
}

/* Until the I/O of the commit in flight is over (it never waits for fs->lock). */
static void wait_flight_io(struct cfs_fs *fs)
{
	pthread_mutex_lock(&fs->jio_lock);
	pthread_mutex_unlock(&fs->jio_lock);
}

/* Wait for the commit in flight, fs->lock held throughout. */
static void land_flight(struct cfs_fs *fs)
{
	if (!fs->jflight.active)
		return;
	wait_flight_io(fs);
	reap_flight(fs);
}

/* Commit the running transaction, and checkpoint after it if home, its I/O with fs->lock let
 * go; fs->lock held again when it returns. */
static int fly(struct cfs_fs *fs, struct closed_txn *c, struct cfs_jhome *home)
{
	struct cvm_volume *vol = fs->vol; /* a grow commits first: it waits for this one */
	fs->jflight = (struct cfs_jflight){.active = true, .seq = c->seq, .nfrees = fs->npending,
					   .home = home};
	pthread_mutex_lock(&fs->jio_lock);
	pthread_mutex_unlock(&fs->lock);
	int rc = write_record(fs, vol, c);
	if (!rc && home)
		rc = home_write(fs, vol, home);
	fs->jflight.rc = rc;
	__atomic_store_n(&fs->jflight.done, true, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&fs->jio_lock);
	pthread_mutex_lock(&fs->lock);
	if (fs->jflight.active && fs->jflight.seq == c->seq) /* else another thread reaped it */
		reap_flight(fs);
	return rc ? -EIO : 0;
}

static int commit_here(struct cfs_fs *fs, struct closed_txn *c);

/* The running transaction committed with fs->lock held throughout, the one in flight first. */
static int commit_running(struct cfs_fs *fs)
{
	struct closed_txn c;
	land_flight(fs);
	int rc = close_txn(fs, &c);
	return rc ? commit_failed(fs, "commit", fs->jseq, rc) : commit_here(fs, &c);
}

/* What times the inodes changed, into the running transaction.  Thousands of files written
 * between two commits are more inode blocks than one transaction may hold (a 4 MiB journal
 * after 4,700 creates and writes on a cluster mount: read-only), so they go in parts, each
 * part committed before the next, and the caller's commit takes the last. */
static int flush_times(struct cfs_fs *fs)
{
	int rc;
	while ((rc = cfs_iflush_times(fs, fs->txn.limit / 2)) == -EAGAIN)
		if ((rc = commit_running(fs)))
			return rc;
	return rc;
}

/* Whether the running transaction must be committed at all (fs->lock held).  What times the
 * inodes changed go in first. */
static int commit_needed(struct cfs_fs *fs)
{
	/* Data kept behind goes before the transaction that made it reachable (writebehind.c). */
	if (fs->wb_dirty && cfs_wb_flush(fs, NULL))
		return -EIO;
	if (!fs->ro && fs->ihash && flush_times(fs))
		return -EIO;
	struct cfs_txn *t = &fs->txn;
	if (t->n == 0) {
		fs->npending = fs->jflight.active ? fs->jflight.nfrees : 0;
		return 0;
	}
	if (fs->ro)
		return -EROFS;
	if (t->n > t->limit) {
		cfs_log(fs, "journal: transaction of %u blocks exceeds the journal (%u)", t->n,
			t->limit);
		fs->ro = true;
		cfs_withdraw(fs, "a transaction outgrew its journal");
		return -EIO;
	}
	return 1;
}

/* Commit with fs->lock held throughout: for callers in the middle of an operation, and for
 * a commit the log must be emptied after. */
static int commit_here(struct cfs_fs *fs, struct closed_txn *c)
{
	int rc = write_record(fs, fs->vol, c);
	if (rc)
		return commit_failed(fs, "commit", c->seq, rc);
	fs->jdurable = c->seq;
	fs->npending = 0;
	/* What this transaction frees is handed out again from now on: the log's images of it
	 * (this transaction's own too) are revoked in it, or if there are more than its
	 * descriptor holds, the log is voided now. */
	if (log_full(fs, c->void_log) && (rc = cfs_journal_empty(fs)))
		return commit_failed(fs, "checkpoint after commit", c->seq, rc);
	return 0;
}

int cfs_journal_commit(struct cfs_fs *fs)
{
	land_flight(fs);
	int rc = commit_needed(fs);
	return rc <= 0 ? rc : commit_running(fs);
}

int cfs_journal_sync(struct cfs_fs *fs)
{
	int rc = commit_needed(fs);
	if (rc < 0)
		return rc;
	uint64_t wanted = fs->txn.n ? fs->jseq : fs->jseq - 1;
	while (fs->jflight.active && !fs->ro) { /* ours may be in it; then another follows it */
		pthread_mutex_unlock(&fs->lock);
		wait_flight_io(fs);
		pthread_mutex_lock(&fs->lock);
		if (fs->jflight.active && flight_done(fs))
			reap_flight(fs);
		if (fs->jdurable >= wanted)
			return 0;
	}
	if (fs->jdurable >= wanted)
		return 0;
	if (fs->ro)
		return -EIO;
	if ((rc = commit_needed(fs)) <= 0)
		return rc;
	struct closed_txn c;
	if ((rc = close_txn(fs, &c)))
		return commit_failed(fs, "commit", fs->jseq, rc);
	if (!log_full(fs, c.void_log))
		return fly(fs, &c, NULL);
	/* The log must be emptied before the next transaction: in the same flight. */
	struct cfs_jhome *home = home_copy(fs);
	return home ? fly(fs, &c, home) : commit_here(fs, &c);
}
