/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Volumes: assemble a volume from scanned LUNs, and its synchronous I/O.  Config changes
 * (create, grow, remove) live in change.c. */
#include "restripe.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libaio.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct cvm_volume {
	struct cvm_config cfg;
	uint64_t size;
	int fd[CVM_MAX_LUNS];
	char *path[CVM_MAX_LUNS];
	/* Written since the last flush: only those LUNs are flushed (a small synchronous write
	 * touches one or two LUNs of a wide volume). */
	bool written[CVM_MAX_LUNS];
	/* One flush at a time, shared by its callers: one arriving while a flush is under way
	 * waits for it (that flush may have cleared the caller's marks before its writes
	 * completed, and its fdatasync carries them anyway) and for the next, which one of the
	 * callers waiting then does for all of them.  With each caller flushing in turn, eight
	 * processes appending O_DSYNC flushed up to eight times where once was enough. */
	pthread_mutex_t flush_lock;
	pthread_cond_t flush_ended;
	uint64_t flushes_started, flushes_ended; /* one is under way while they differ */
	uint64_t failed_flush; /* the newest flush that failed, and how */
	int failed_rc;
	/* Several LUNs flushed at once (IOCB_CMD_FDSYNC): a commit spread over independent LUNs
	 * costs one flush's time, not their sum.  The context is made at the first such flush;
	 * flush_serial if the kernel cannot (then one LUN after another). */
	io_context_t flush_ctx;
	struct iocb flush_cbs[CVM_MAX_LUNS];
	bool flush_serial;
	bool fenced; /* atomic: no I/O reaches the LUNs any more */
	cvm_write_gate_fn gate;
	void *gate_arg;
	struct cvm_restripe_view *view; /* a paused restripe: where each chunk is */
	/* Failed I/O per LUN (cvm_volume_io_failed), and the lines that say so: at most
	 * LOG_LINES per LOG_WINDOW seconds, the rest counted in the next line. */
	uint64_t io_errors[CVM_MAX_LUNS]; /* atomic */
	pthread_mutex_t log_lock;
	cvm_log_fn log;
	void *log_arg;
	time_t log_window;
	unsigned log_lines;
	uint64_t log_skipped;
};
#define LOG_LINES 10
#define LOG_WINDOW 10

static const struct cvm_stripe_set *set_of_lun(const struct cvm_config *cfg, uint32_t lun)
{
	for (uint32_t i = 0; i < cfg->nsets; i++)
		if (lun < cfg->sets[i].first_lun + cfg->sets[i].nluns)
			return &cfg->sets[i];
	return NULL;
}

static void vol_free(struct cvm_volume *v)
{
	cvm_restripe_view_free(v->view);
	pthread_mutex_destroy(&v->flush_lock);
	pthread_cond_destroy(&v->flush_ended);
	pthread_mutex_destroy(&v->log_lock);
	if (v->flush_ctx)
		io_destroy(v->flush_ctx);
	for (uint32_t i = 0; i < v->cfg.nluns; i++) {
		if (v->fd[i] >= 0)
			close(v->fd[i]);
		free(v->path[i]);
	}
	free(v);
}

/* Check that every LUN of the config is present, labelled, and big enough. */
static int check_members(const struct cvm_scan *scan, const struct cvm_config *cfg)
{
	for (uint32_t i = 0; i < cfg->nluns; i++) {
		char u[CVM_UUID_STR];
		cvm_uuid_format(&cfg->luns[i].uuid, u);
		const struct cvm_found_lun *f = cvm_scan_lun(scan, &cfg->luns[i].uuid);
		if (!f) {
			cvm_set_error("volume %s: LUN %s (last seen at %s) is missing; present it "
				      "and include its path in the scan (--scan)",
				      cfg->name, u, cfg->luns[i].path);
			return -ENODEV;
		}
		if (f->state == CVM_LUN_LABEL_DAMAGED) {
			cvm_set_error("volume %s: LUN %s (%s) has a damaged label; run 'cvm check %s'",
				      cfg->name, f->path, u, cfg->name);
			return -EBADMSG;
		}
		if (!cvm_uuid_equal(&f->vol_uuid, &cfg->vol_uuid)) {
			cvm_set_error("volume %s: LUN %s (%s) is labelled for volume %s",
				      cfg->name, f->path, u, f->vol_name);
			return -EBADMSG;
		}
		if (f->size_bytes < CVM_META_BYTES + set_of_lun(cfg, i)->lun_bytes) {
			cvm_set_error("volume %s: LUN %s (%s) is smaller than the volume needs",
				      cfg->name, f->path, u);
			return -ENOSPC;
		}
	}
	return 0;
}

/* Bring config copies older than the winning generation up to date (finishes a change a crash
 * interrupted). */
static bool has_stale_copies(const struct cvm_volume *v, const struct cvm_scan *scan)
{
	int slot = (int)(v->cfg.generation % 2);
	for (uint32_t i = 0; i < v->cfg.nluns; i++)
		if (cvm_scan_lun(scan, &v->cfg.luns[i].uuid)->slot_generation[slot] !=
		    v->cfg.generation)
			return true;
	return false;
}

/* Under the change lock (taken here unless the caller holds it); skipped when another change
 * holds it, since that change writes every copy anyway. */
static int repair_stale_copies(struct cvm_volume *v, const struct cvm_scan *scan,
			       enum cvm_lun_lock held)
{
	if (!has_stale_copies(v, scan))
		return 0;
	bool take = held == CVM_LOCK_USE;
	for (uint32_t i = 0; take && i < v->cfg.nluns; i++)
		if (cvm_lun_lock(v->fd[i], v->path[i], CVM_LOCK_CHANGE)) {
			for (uint32_t j = 0; j < i; j++)
				cvm_lun_lock(v->fd[j], v->path[j], CVM_UNLOCK_CHANGE);
			return 0;
		}
	int rc = 0;
	for (uint32_t i = 0; i < v->cfg.nluns && rc == 0; i++) {
		const struct cvm_found_lun *f = cvm_scan_lun(scan, &v->cfg.luns[i].uuid);
		int slot = (int)(v->cfg.generation % 2);
		if (f->slot_generation[slot] == v->cfg.generation)
			continue;
		rc = cvm_lun_write_config(v->fd[i], &v->cfg, &v->cfg.luns[i].uuid, slot, true);
		if (rc)
			cvm_set_error("volume %s: LUN %s: cannot write config: %s", v->cfg.name,
				      v->path[i], strerror(-rc));
	}
	for (uint32_t i = 0; take && i < v->cfg.nluns; i++)
		cvm_lun_lock(v->fd[i], v->path[i], CVM_UNLOCK_CHANGE);
	return rc;
}

int cvm_volume_open_config(const struct cvm_scan *scan, const struct cvm_config *cfg, int flags,
			   enum cvm_lun_lock lock, struct cvm_volume **out)
{
	int rc = check_members(scan, cfg);
	if (rc)
		return rc;
	struct cvm_volume *v = calloc(1, sizeof *v);
	if (!v)
		return -ENOMEM;
	v->cfg = *cfg;
	v->size = cvm_config_size(cfg);
	pthread_mutex_init(&v->flush_lock, NULL);
	pthread_cond_init(&v->flush_ended, NULL);
	pthread_mutex_init(&v->log_lock, NULL);
	for (uint32_t i = 0; i < cfg->nluns; i++)
		v->fd[i] = -1;
	bool rw = (flags & ~CVM_OPEN_JOIN) != CVM_OPEN_RDONLY;
	for (uint32_t i = 0; i < cfg->nluns; i++) {
		const struct cvm_found_lun *f = cvm_scan_lun(scan, &cfg->luns[i].uuid);
		uint64_t size;
		struct cvm_lun_id id;
		if (!(v->path[i] = strdup(f->path))) {
			rc = -ENOMEM;
			break;
		}
		v->fd[i] = cvm_lun_open(f->path, rw ? O_RDWR : O_RDONLY, &size, &id);
		if (v->fd[i] < 0) {
			rc = v->fd[i];
			break;
		}
		if ((rc = cvm_lun_lock(v->fd[i], f->path, lock)))
			break;
	}
	/* Not while a restripe may be committing elsewhere (JOIN): its copies are not stale. */
	if (rc == 0 && flags == CVM_OPEN_RDWR)
		rc = repair_stale_copies(v, scan, lock);
	if (rc) {
		vol_free(v);
		return rc;
	}
	*out = v;
	return 0;
}

int cvm_config_staged_check(const struct cvm_config *cfg)
{
	if (!cfg->restripe.staged)
		return 0;
	cvm_set_error("volume %s: a restripe was interrupted in the middle of a batch; run "
		      "'cvm restripe %s' (Ctrl-C pauses it again) before using the volume",
		      cfg->name, cfg->name);
	return -EBUSY;
}

int cvm_volume_open(const struct cvm_scan *scan, const char *name_or_uuid, int flags,
		    struct cvm_volume **out)
{
	struct cvm_config *cfg = malloc(sizeof *cfg);
	if (!cfg)
		return -ENOMEM;
	int rc = cvm_scan_find_volume(scan, name_or_uuid, cfg);
	struct cvm_gate *gate = NULL;
	bool join = flags & CVM_OPEN_JOIN;
	if (rc == 0 && cfg->restripe.target_width && cvm_gate_attach(cfg, &gate) == -ENOSPC)
		rc = -ENOSPC;
	if (rc == 0 && !gate && !join) /* chunks only in scratch */
		rc = cvm_config_staged_check(cfg);
	if (rc == 0)
		rc = cvm_volume_open_config(scan, cfg, flags, CVM_LOCK_USE, out);
	/* A restripe running on this node: where chunks are is the gate's (restripe_gate.c). */
	if (rc == 0 && cfg->restripe.target_width &&
	    (rc = cvm_restripe_view_new(cfg, !gate, &(*out)->view))) {
		vol_free(*out);
		*out = NULL;
	}
	if (rc == 0 && gate)
		(*out)->view->gate = gate;
	else
		cvm_gate_detach(gate);
	free(cfg);
	return rc;
}

void cvm_volume_set_view(struct cvm_volume *v, const struct cvm_config *cfg,
			 struct cvm_restripe_view *view)
{
	v->cfg = *cfg;
	cvm_restripe_view_free(v->view);
	v->view = view;
}

struct cvm_gate *cvm_volume_gate(const struct cvm_volume *v)
{
	return v->view ? v->view->gate : NULL;
}

uint32_t cvm_volume_gate_seq(const struct cvm_volume *v)
{
	struct cvm_gate *g = cvm_volume_gate(v);
	return g ? cvm_gate_seq(g) : 0;
}

void cvm_volume_gate_wait(struct cvm_volume *v, uint32_t seen, unsigned ms)
{
	struct cvm_gate *g = cvm_volume_gate(v);
	if (g)
		cvm_gate_wait_change(g, seen, (int)ms);
}

int cvm_volume_enter(struct cvm_volume *vol, uint64_t offset, uint64_t len, bool wait)
{
	struct cvm_gate *g = cvm_volume_gate(vol);
	return g ? cvm_gate_enter(g, offset, len, wait) : 0;
}

void cvm_volume_leave(struct cvm_volume *vol, uint64_t offset, uint64_t len)
{
	struct cvm_gate *g = cvm_volume_gate(vol);
	if (g)
		cvm_gate_leave(g, offset, len);
}

void cvm_volume_close(struct cvm_volume *vol)
{
	if (vol)
		vol_free(vol);
}

const struct cvm_config *cvm_volume_config(const struct cvm_volume *vol) { return &vol->cfg; }
uint64_t cvm_volume_size(const struct cvm_volume *vol) { return vol->size; }
const char *cvm_volume_lun_path(const struct cvm_volume *vol, uint32_t lun)
{
	return lun < vol->cfg.nluns ? vol->path[lun] : NULL;
}
int cvm_volume_lun_fd(const struct cvm_volume *vol, uint32_t lun)
{
	return lun < vol->cfg.nluns ? vol->fd[lun] : -EINVAL;
}

void cvm_volume_fence(struct cvm_volume *vol)
{
	__atomic_store_n(&vol->fenced, true, __ATOMIC_RELEASE);
}

bool cvm_volume_fenced(const struct cvm_volume *vol)
{
	return __atomic_load_n(&vol->fenced, __ATOMIC_ACQUIRE);
}

void cvm_volume_set_write_gate(struct cvm_volume *vol, cvm_write_gate_fn gate, void *arg)
{
	vol->gate_arg = arg;
	__atomic_store_n(&vol->gate, gate, __ATOMIC_RELEASE);
}

int cvm_volume_may_write(struct cvm_volume *vol)
{
	if (cvm_volume_fenced(vol))
		return -EIO;
	cvm_write_gate_fn gate = __atomic_load_n(&vol->gate, __ATOMIC_ACQUIRE);
	return gate ? gate(vol->gate_arg) : 0;
}

int cvm_volume_map_begin(struct cvm_volume_map_iter *it, const struct cvm_volume *vol,
			 uint64_t offset, uint64_t len)
{
	*it = (struct cvm_volume_map_iter){.vol = vol, .pos = offset, .end = offset + len,
					   .start = offset};
	if (!vol->view)
		return cvm_map_begin(&it->layout, &vol->cfg, offset, len);
	return offset > vol->size || len > vol->size - offset ? -ERANGE : 0;
}

/* With a paused restripe: chunk by chunk, runs contiguous on one LUN joined into a piece. */
bool cvm_volume_map_next(struct cvm_volume_map_iter *it, struct cvm_piece *p)
{
	const struct cvm_restripe_view *rv = it->vol->view;
	if (!rv)
		return cvm_map_next(&it->layout, p);
	if (it->pos >= it->end)
		return false;
	*p = (struct cvm_piece){.buf_offset = it->pos - it->start};
	while (it->pos < it->end) {
		uint64_t c = it->pos / rv->chunk_bytes, within = it->pos % rv->chunk_bytes;
		uint64_t len = rv->chunk_bytes - within;
		if (len > it->end - it->pos)
			len = it->end - it->pos;
		struct cvm_cell cell = cvm_restripe_view_cell(&it->vol->cfg, rv, c);
		if (p->len && (cell.lun != p->lun || cell.off + within != p->dev_offset + p->len))
			break;
		if (!p->len) {
			p->lun = cell.lun;
			p->dev_offset = cell.off + within;
			p->lun_offset = p->dev_offset - CVM_META_BYTES; /* the park cell: below 0 */
		}
		p->len += len;
		it->pos += len;
	}
	return true;
}

static int check_io(const struct cvm_volume *v, const void *buf, uint64_t len, uint64_t off)
{
	if (cvm_volume_fenced(v))
		return -EIO;
	if ((off | len | (uintptr_t)buf) % CVM_IO_ALIGN)
		return -EINVAL;
	if (off > v->size || len > v->size - off)
		return -ERANGE;
	return 0;
}

static int io_pieces(struct cvm_volume *v, enum cvm_op op, void *buf, uint64_t len, uint64_t off)
{
	struct cvm_volume_map_iter it;
	struct cvm_piece p;
	cvm_volume_map_begin(&it, v, off, len);
	while (cvm_volume_map_next(&it, &p)) {
		uint8_t *b = (uint8_t *)buf + p.buf_offset;
		off_t at = (off_t)p.dev_offset;
		for (uint64_t done = 0; done < p.len;) {
			ssize_t n = op == CVM_READ
					    ? pread(v->fd[p.lun], b + done, p.len - done, at + (off_t)done)
					    : pwrite(v->fd[p.lun], b + done, p.len - done, at + (off_t)done);
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0) {
				int rc = n < 0 ? -errno : -EIO;
				cvm_volume_io_failed(v, p.lun, op == CVM_READ ? "read" : "write",
						     (uint64_t)at + done, p.len - done, rc);
				return rc;
			}
			done += (uint64_t)n;
		}
		if (op == CVM_WRITE) /* after the write: a flush that clears it covers the write */
			cvm_volume_written(v, p.lun);
	}
	return 0;
}

/* Test hook: CVM_FAULT_EIO_AFTER=N makes every synchronous write after the first N of this
 * process fail with EIO, as a lost path to the LUNs would (the journal's and metadata's
 * writes; tests/cluster/test_cfs_withdraw.sh). */
static long fault_writes_left;
static bool fault_writes_on;

static void fault_writes_read(void)
{
	const char *env = getenv("CVM_FAULT_EIO_AFTER");
	fault_writes_on = env != NULL;
	fault_writes_left = env ? strtol(env, NULL, 10) : 0;
}

static int write_fault(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	pthread_once(&once, fault_writes_read);
	if (!fault_writes_on)
		return 0;
	return __atomic_fetch_sub(&fault_writes_left, 1, __ATOMIC_RELAXED) > 0 ? 0 : -EIO;
}

static int io_sync(struct cvm_volume *v, enum cvm_op op, void *buf, uint64_t len, uint64_t off)
{
	int rc = check_io(v, buf, len, off);
	if (!rc && op == CVM_WRITE)
		rc = cvm_volume_may_write(v);
	if (!rc && op == CVM_WRITE)
		rc = write_fault();
	if (!rc)
		rc = cvm_volume_enter(v, off, len, true);
	if (rc)
		return rc;
	rc = io_pieces(v, op, buf, len, off);
	cvm_volume_leave(v, off, len);
	return rc;
}

void cvm_volume_written(struct cvm_volume *vol, uint32_t lun)
{
	if (lun < vol->cfg.nluns)
		__atomic_store_n(&vol->written[lun], true, __ATOMIC_RELEASE);
}

static void log_default(void *arg, const char *line)
{
	(void)arg;
	fprintf(stderr, "cvm: %s\n", line);
}

void cvm_volume_set_log(struct cvm_volume *vol, cvm_log_fn fn, void *arg)
{
	pthread_mutex_lock(&vol->log_lock); /* after a line being said, whose arg may go now */
	vol->log = fn;
	vol->log_arg = arg;
	pthread_mutex_unlock(&vol->log_lock);
}

uint64_t cvm_volume_lun_errors(const struct cvm_volume *vol, uint32_t lun)
{
	return lun < vol->cfg.nluns ? __atomic_load_n(&vol->io_errors[lun], __ATOMIC_RELAXED) : 0;
}

int cvm_volume_count_errors(struct cvm_volume *vol, const cvm_uuid *lun, uint64_t n,
			    uint32_t *index)
{
	for (uint32_t i = 0; i < vol->cfg.nluns; i++)
		if (cvm_uuid_equal(&vol->cfg.luns[i].uuid, lun)) {
			__atomic_add_fetch(&vol->io_errors[i], n, __ATOMIC_RELAXED);
			*index = i;
			return 0;
		}
	return -ENOENT;
}

void cvm_volume_inherit_errors(struct cvm_volume *to, const struct cvm_volume *from)
{
	for (uint32_t i = 0; i < to->cfg.nluns; i++)
		for (uint32_t j = 0; j < from->cfg.nluns; j++)
			if (cvm_uuid_equal(&to->cfg.luns[i].uuid, &from->cfg.luns[j].uuid))
				__atomic_add_fetch(&to->io_errors[i], cvm_volume_lun_errors(from, j),
						   __ATOMIC_RELAXED);
}

/* A window's first LOG_LINES failures are said; of the rest, how many there were is said at
 * the next line. */
static bool log_allowed(struct cvm_volume *v, uint64_t *skipped)
{
	time_t now = time(NULL);
	if (now - v->log_window >= LOG_WINDOW) {
		v->log_window = now;
		v->log_lines = 0;
	}
	if (v->log_lines >= LOG_LINES) {
		v->log_skipped++;
		return false;
	}
	v->log_lines++;
	*skipped = v->log_skipped;
	v->log_skipped = 0;
	return true;
}

void cvm_volume_io_failed(struct cvm_volume *vol, uint32_t lun, const char *what,
			  uint64_t dev_offset, uint64_t len, int err)
{
	if (lun >= vol->cfg.nluns || cvm_volume_fenced(vol))
		return; /* a fenced volume fails I/O by design, its LUNs are fine */
	uint64_t n = __atomic_add_fetch(&vol->io_errors[lun], 1, __ATOMIC_RELAXED), skipped = 0;
	char more[80] = "", line[PATH_MAX + 256];
	pthread_mutex_lock(&vol->log_lock);
	if (!log_allowed(vol, &skipped)) {
		pthread_mutex_unlock(&vol->log_lock);
		return;
	}
	if (skipped)
		snprintf(more, sizeof more, "; %" PRIu64 " more on this volume not logged before this",
			 skipped);
	snprintf(line, sizeof line, "volume %s: LUN %u (%s): %s of %" PRIu64 " bytes at byte %" PRIu64
		 " failed: %s (%" PRIu64 " failed I/O on this LUN so far%s)", vol->cfg.name, lun,
		 vol->path[lun], what, len, dev_offset, strerror(-err), n, more);
	(vol->log ? vol->log : log_default)(vol->log_arg, line);
	pthread_mutex_unlock(&vol->log_lock);
}

/* The LUN whose descriptor fd is (cfg.nluns if none). */
static uint32_t lun_of_fd(const struct cvm_volume *v, int fd)
{
	uint32_t i = 0;
	while (i < v->cfg.nluns && v->fd[i] != fd)
		i++;
	return i;
}

void cvm_volume_io_failed_fd(struct cvm_volume *vol, int fd, const char *what,
			     uint64_t dev_offset, uint64_t len, int err)
{
	cvm_volume_io_failed(vol, lun_of_fd(vol, fd), what, dev_offset, len, err);
}

void cvm_volume_written_fd(struct cvm_volume *v, int fd)
{
	uint32_t lun = lun_of_fd(v, fd);
	if (lun < v->cfg.nluns)
		cvm_volume_written(v, lun);
}

int cvm_volume_read(struct cvm_volume *vol, void *buf, uint64_t len, uint64_t offset)
{
	return io_sync(vol, CVM_READ, buf, len, offset);
}

int cvm_volume_write(struct cvm_volume *vol, const void *buf, uint64_t len, uint64_t offset)
{
	return io_sync(vol, CVM_WRITE, (void *)buf, len, offset);
}

static int flush_lun(struct cvm_volume *vol, uint32_t lun)
{
	if (fdatasync(vol->fd[lun]) == 0)
		return 0;
	int rc = -errno;
	__atomic_store_n(&vol->written[lun], true, __ATOMIC_RELEASE); /* still to flush */
	cvm_volume_io_failed(vol, lun, "flush", 0, 0, rc);
	return rc;
}

/* The LUNs' fdatasyncs in flight together; 1 if none could be submitted (the caller does
 * them one by one), else 0 or the first error.  Only the flushing caller is here. */
static int flush_luns_at_once(struct cvm_volume *vol, const uint32_t *luns, uint32_t n)
{
	/* Sized to the volume (aio slots are a system-wide limit); a grown one submits what fits. */
	if (vol->flush_serial ||
	    (!vol->flush_ctx && io_setup((int)vol->cfg.nluns, &vol->flush_ctx) < 0)) {
		vol->flush_serial = true;
		return 1;
	}
	struct iocb *cbs[CVM_MAX_LUNS];
	for (uint32_t i = 0; i < n; i++) {
		io_prep_fdsync(&vol->flush_cbs[i], vol->fd[luns[i]]);
		vol->flush_cbs[i].data = (void *)(uintptr_t)luns[i];
		cbs[i] = &vol->flush_cbs[i];
	}
	int sent = io_submit(vol->flush_ctx, (long)n, cbs);
	if (sent <= 0) {
		vol->flush_serial = sent == -EINVAL; /* a kernel without asynchronous fsync */
		return 1;
	}
	int rc = 0;
	for (uint32_t i = (uint32_t)sent; i < n; i++) { /* the context was full: the rest here */
		int r = flush_lun(vol, luns[i]);
		rc = rc ? rc : r;
	}
	struct io_event ev[CVM_MAX_LUNS];
	for (int done = 0; done < sent;) {
		int got = io_getevents(vol->flush_ctx, 1, sent - done, ev, NULL);
		if (got == -EINTR)
			continue;
		if (got < 0) { /* cannot happen with a valid context */
			rc = rc ? rc : got;
			break;
		}
		for (int k = 0; k < got; k++) {
			if ((long)ev[k].res >= 0)
				continue;
			uint32_t lun = (uint32_t)(uintptr_t)ev[k].data;
			__atomic_store_n(&vol->written[lun], true, __ATOMIC_RELEASE);
			rc = rc ? rc : (int)(long)ev[k].res;
			cvm_volume_io_failed(vol, lun, "flush", 0, 0, (int)(long)ev[k].res);
		}
		done += got;
	}
	return rc;
}

/* The LUNs marked written, flushed (by one caller at a time). */
static int flush_marked(struct cvm_volume *vol)
{
	uint32_t luns[CVM_MAX_LUNS], n = 0;
	/* A mark is cleared before its LUN's flush: a write completed meanwhile marks it again. */
	for (uint32_t i = 0; i < vol->cfg.nluns; i++)
		if (__atomic_exchange_n(&vol->written[i], false, __ATOMIC_ACQ_REL))
			luns[n++] = i;
	int rc = n > 1 ? flush_luns_at_once(vol, luns, n) : 1;
	if (rc == 1) { /* one after another */
		rc = 0;
		for (uint32_t i = 0; i < n; i++) {
			int r = flush_lun(vol, luns[i]);
			rc = rc ? rc : r;
		}
	}
	return rc;
}

int cvm_volume_flush(struct cvm_volume *vol)
{
	if (cvm_volume_fenced(vol))
		return -EIO;
	pthread_mutex_lock(&vol->flush_lock);
	uint64_t mine = vol->flushes_started + 1; /* the first to start from now on */
	while (vol->flushes_ended < mine) {
		if (vol->flushes_started != vol->flushes_ended) {
			pthread_cond_wait(&vol->flush_ended, &vol->flush_lock);
			continue;
		}
		uint64_t flush = ++vol->flushes_started;
		pthread_mutex_unlock(&vol->flush_lock);
		int rc = flush_marked(vol);
		pthread_mutex_lock(&vol->flush_lock);
		vol->flushes_ended = flush;
		if (rc)
			vol->failed_flush = flush, vol->failed_rc = rc;
		pthread_cond_broadcast(&vol->flush_ended);
	}
	/* A later flush's failure is reported too: the caller cannot tell it is not its own. */
	int rc = vol->failed_flush >= mine ? vol->failed_rc : 0;
	pthread_mutex_unlock(&vol->flush_lock);
	return rc;
}

uint64_t cvm_volume_flushes(struct cvm_volume *vol)
{
	pthread_mutex_lock(&vol->flush_lock);
	uint64_t n = vol->flushes_ended;
	pthread_mutex_unlock(&vol->flush_lock);
	return n;
}
