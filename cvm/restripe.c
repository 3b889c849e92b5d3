/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* cvm restripe: the planner's moves done in batches staged in scratch, each batch recorded in
 * the config before its destinations are written (docs/restripe.md):
 *
 *   1. the batch's sources are read and written to a scratch half, which is flushed;
 *   2. the config records "moves_done, then `staged` moves staged in half H";
 *   3. the destinations are written from that copy, flushed and read back.
 *
 * A crash before 2 leaves the previous record, whose batch (in the other half) is written
 * again; a crash after it writes this batch again from its half.  Halves alternate, so
 * staging a batch never overwrites the copy the newest record points at. */
#include "restripe.h"

#include <errno.h>
#include <inttypes.h>
#include <libaio.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct run {
	struct cvm_volume *v;
	struct cvm_config cfg, to; /* as last committed; the target */
	struct cvm_restripe_plan plan;
	const struct cvm_restripe_opts *opts;
	uint64_t h, total;       /* chunk bytes; moves in all */
	uint32_t half_cells;     /* scratch cells in each half */
	struct cvm_move *moves;  /* the batch in hand */
	struct cvm_cell *cells;  /* the cells it reads or writes next */
	uint8_t *buf, *check;    /* its chunks; the same read back */
	io_context_t ctx;        /* a batch's cells at once (NULL: one by one) */
	struct iocb *cbs;
	struct io_event *events;
	double start;
	uint64_t moved;          /* bytes moved by this run */
	struct cvm_gate *gate;   /* online: keeps this node's users out of the batch */
	uint32_t closed;         /* moves of the staged batch the gate was made closed for */
};

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Scratch cell i: cell 0 is CVM_PARK_CELL, half k holds cells 1 + k * half_cells onwards. */
static struct cvm_cell scratch_cell(uint64_t h, uint32_t i)
{
	uint32_t per_lun = (uint32_t)(CVM_SCRATCH_BYTES / h);
	return (struct cvm_cell){i / per_lun, CVM_SCRATCH_OFFSET + (i % per_lun) * h};
}

static struct cvm_cell staging_cell(const struct run *r, uint32_t half, uint32_t i)
{
	return scratch_cell(r->h, 1 + half * r->half_cells + i);
}

static int cell_io(struct run *r, bool write, struct cvm_cell c, void *buf)
{
	int fd = cvm_volume_lun_fd(r->v, c.lun);
	if (write)
		cvm_fault_point();
	ssize_t n = write ? pwrite(fd, buf, r->h, (off_t)c.off) : pread(fd, buf, r->h, (off_t)c.off);
	if (n == (ssize_t)r->h) {
		if (write)
			cvm_volume_written(r->v, c.lun);
		return 0;
	}
	int rc = n < 0 ? -errno : -EIO;
	cvm_set_error("volume %s: LUN %s: cannot %s %" PRIu64 " bytes at %" PRIu64 ": %s",
		      r->cfg.name, cvm_volume_lun_path(r->v, c.lun), write ? "write" : "read", r->h,
		      c.off, strerror(-rc));
	return rc;
}

/* Wait for the first `submitted` of n cells' I/O; the first failure is returned. */
static int cells_wait(struct run *r, bool write, uint32_t submitted, int rc)
{
	for (uint32_t got = 0; got < submitted;) {
		int k = io_getevents(r->ctx, 1, (long)(submitted - got), r->events, NULL);
		if (k == -EINTR)
			continue;
		if (k < 0)
			return k;
		for (int i = 0; i < k; i++) {
			uint32_t at = (uint32_t)(uintptr_t)r->events[i].data;
			long res = (long)r->events[i].res;
			if (res == (long)r->h && write)
				cvm_volume_written(r->v, r->cells[at].lun);
			if (res != (long)r->h && !rc) {
				rc = res < 0 ? (int)res : -EIO;
				cvm_set_error("volume %s: LUN %s: cannot %s %" PRIu64 " bytes at %" PRIu64
					      ": %s", r->cfg.name, cvm_volume_lun_path(r->v, r->cells[at].lun),
					      write ? "write" : "read", r->h, r->cells[at].off, strerror(-rc));
			}
		}
		got += (uint32_t)k;
	}
	return rc;
}

/* r->cells[0..n) from or into buf (cell i at buf + i * h), all in flight together. */
static int cells_io(struct run *r, bool write, uint32_t n, uint8_t *buf)
{
	int rc = 0;
	if (!r->ctx) {
		for (uint32_t i = 0; i < n && !rc; i++)
			rc = cell_io(r, write, r->cells[i], buf + i * r->h);
		return rc;
	}
	uint32_t submitted = 0;
	for (; submitted < n; submitted++) {
		struct iocb *cb = &r->cbs[submitted];
		int fd = cvm_volume_lun_fd(r->v, r->cells[submitted].lun);
		uint8_t *b = buf + submitted * r->h;
		if (write) {
			cvm_fault_point(); /* the writes submitted before it still land */
			io_prep_pwrite(cb, fd, b, r->h, (long long)r->cells[submitted].off);
		} else {
			io_prep_pread(cb, fd, b, r->h, (long long)r->cells[submitted].off);
		}
		cb->data = (void *)(uintptr_t)submitted;
		if ((rc = io_submit(r->ctx, 1, &cb)) != 1) {
			rc = rc < 0 ? rc : -EIO;
			cvm_set_error("volume %s: cannot submit I/O: %s", r->cfg.name, strerror(-rc));
			break;
		}
		rc = 0;
	}
	return cells_wait(r, write, submitted, rc);
}

static int flush(struct run *r)
{
	int rc = cvm_volume_flush(r->v);
	if (rc)
		cvm_set_error("volume %s: cannot flush the LUNs: %s", r->cfg.name, strerror(-rc));
	return rc;
}

static int commit(struct run *r)
{
	r->cfg.generation++;
	r->cfg.mtime = (uint64_t)time(NULL);
	return cvm_config_commit_on(&r->cfg, r->v);
}

/* The next moves, at most a half's worth; a batch ends after a park (its unpark reads the
 * park cell, which must be written first). */
static uint32_t next_batch(struct run *r)
{
	uint32_t n = 0;
	while (n < r->half_cells && n < CVM_GATE_BATCH_MAX &&
	       cvm_restripe_plan_next(&r->plan, &r->moves[n]))
		if (r->moves[n++].kind == CVM_MOVE_PARK)
			break;
	return n;
}

static int stage(struct run *r, uint32_t n, uint32_t half)
{
	if (r->gate)
		cvm_gate_batch_begin(r->gate, r->moves, n);
	for (uint32_t i = 0; i < n; i++)
		r->cells[i] = r->moves[i].src;
	int rc = cells_io(r, false, n, r->buf);
	for (uint32_t i = 0; i < n; i++)
		r->cells[i] = staging_cell(r, half, i);
	if (!rc)
		rc = cells_io(r, true, n, r->buf);
	return rc ? rc : flush(r);
}

/* Write the batch's destinations from buf, make them durable, and read each back. */
static int place(struct run *r, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		r->cells[i] = r->moves[i].dst;
	int rc = cells_io(r, true, n, r->buf);
	if (rc || (rc = flush(r)) || (rc = cells_io(r, false, n, r->check)))
		return rc;
	for (uint32_t i = 0; i < n && !rc; i++) {
		if (memcmp(r->check + i * r->h, r->buf + i * r->h, r->h)) {
			cvm_set_error("volume %s: LUN %s: what was written at %" PRIu64 " reads back "
				      "different; check the LUN, then run the restripe again",
				      r->cfg.name, cvm_volume_lun_path(r->v, r->moves[i].dst.lun),
				      r->moves[i].dst.off);
			rc = -EIO;
		}
	}
	return rc;
}

/* The batch is in place.  Online, users write its chunks in their new places as soon as the
 * gate opens, so a redo from the staged copy must not be possible by then: the record says
 * the batch is done first. */
static int batch_done(struct run *r, uint32_t n)
{
	r->cfg.restripe.moves_done += n;
	r->cfg.restripe.staged = 0;
	r->moved += n * r->h;
	if (!r->gate)
		return 0;
	int rc = commit(r);
	if (!rc)
		cvm_gate_batch_end(r->gate, r->moves, n);
	return rc;
}

/* The batch a crash left staged, in r->moves: the record says how many moves it has. */
static int staged_batch(struct run *r, uint32_t *n)
{
	uint32_t want = r->cfg.restripe.staged;
	*n = next_batch(r);
	if (*n == want)
		return 0;
	cvm_set_error("volume %s: the restripe record says %u moves are staged where the plan "
		      "has %u; the config is damaged", r->cfg.name, want, *n);
	return -EBADMSG;
}

/* A crash left a batch staged: write it again from its scratch half.  Online the gate keeps
 * it closed since it was made (open_gate). */
static int finish_staged(struct run *r)
{
	uint32_t n = r->closed;
	int rc = n ? 0 : staged_batch(r, &n);
	r->closed = 0;
	if (rc)
		return rc;
	for (uint32_t i = 0; i < n; i++)
		r->cells[i] = staging_cell(r, r->cfg.restripe.half, i);
	rc = cells_io(r, false, n, r->buf);
	if (!rc)
		rc = place(r, n);
	return rc ? rc : batch_done(r, n);
}

static void report(struct run *r)
{
	if (!r->opts->progress)
		return;
	struct cvm_restripe_progress p = {.moves_done = r->cfg.restripe.moves_done,
					  .moves_total = r->total, .chunk_bytes = r->h,
					  .moved_bytes = r->moved, .seconds = now() - r->start};
	if (r->gate)
		cvm_gate_waits(r->gate, &p.io_waits, &p.io_wait_max_ns, &p.io_held);
	r->opts->progress(r->opts->arg, &p);
}

static void throttle(struct run *r)
{
	if (!r->opts->rate_bytes)
		return;
	double due = (double)r->moved / (double)r->opts->rate_bytes - (now() - r->start);
	if (due > 0)
		nanosleep(&(struct timespec){(time_t)due, (long)((due - (double)(time_t)due) * 1e9)},
			  NULL);
}

/* A batch of n moves from the progress on, the other nodes kept out of it meanwhile. */
static int batch(struct run *r, uint32_t n, int (*moves)(struct run *r, uint32_t n, uint32_t half),
		 uint32_t half)
{
	uint64_t first = r->cfg.restripe.moves_done;
	int rc = r->opts->batch_begin ? r->opts->batch_begin(r->opts->arg, first, n) : 0;
	if (rc)
		return rc;
	rc = moves(r, n, half);
	if (r->opts->batch_end)
		r->opts->batch_end(r->opts->arg, first, n, rc);
	if (!rc)
		report(r);
	return rc;
}

static int staged_moves(struct run *r, uint32_t n, uint32_t half)
{
	(void)n, (void)half;
	return finish_staged(r);
}

static int new_moves(struct run *r, uint32_t n, uint32_t half)
{
	int rc = stage(r, n, half);
	if (rc)
		return rc;
	r->cfg.restripe.staged = n;
	r->cfg.restripe.half = half;
	if (!(rc = commit(r)) && !(rc = place(r, n)))
		rc = batch_done(r, n);
	return rc;
}

static bool paused(const struct run *r)
{
	return r->opts->stop && *r->opts->stop;
}

/* A test's gate (CVM_RESTRIPE_HOLD names a file holding a count of moves): the run waits
 * before its next batch while the file exists and that many moves are done (an empty file:
 * at once), so that a check that a run is still under way does not race the run on a fast
 * machine, nor the check's own steps on a slow one.  Ctrl-C still pauses it.  Then: is the
 * run paused? */
static bool held_or_paused(const struct run *r)
{
	const char *path = getenv("CVM_RESTRIPE_HOLD");
	for (FILE *f; path && !paused(r) && r->cfg.restripe.moves_done < r->total &&
		      (f = fopen(path, "r"));) {
		unsigned long long at = 0;
		bool hold = fscanf(f, "%llu", &at) != 1 || r->cfg.restripe.moves_done >= at;
		fclose(f);
		if (!hold)
			break;
		nanosleep(&(struct timespec){0, 50000000}, NULL);
	}
	return paused(r);
}

static int move_all(struct run *r)
{
	uint32_t half = r->cfg.restripe.staged ? 1 - r->cfg.restripe.half : 0;
	int rc = r->cfg.restripe.staged ? batch(r, r->cfg.restripe.staged, staged_moves, 0) : 0;
	if (!rc && !r->cfg.restripe.staged)
		report(r);
	for (uint32_t n; !rc && !held_or_paused(r) && (n = next_batch(r)) > 0; half ^= 1) {
		if (!(rc = batch(r, n, new_moves, half)))
			throttle(r);
	}
	if (!rc && paused(r) && r->cfg.restripe.moves_done < r->total) /* nothing staged */
		return !r->gate && commit(r) ? -EIO : -EINTR;
	return rc;
}

/* The stripe sets opts->luns make up, or every set. */
static int asked_sets(const struct cvm_config *cfg, const struct cvm_restripe_opts *opts,
		      uint32_t *first, uint32_t *count)
{
	*first = 0;
	*count = cfg->nsets;
	return opts->nluns ? cvm_restripe_sets_of(cfg, opts->luns, opts->nluns, first, count) : 0;
}

/* A new restripe of cfg as opts asks: its record in cfg->restripe, its target in *to. */
static int new_record(struct cvm_config *cfg, const struct cvm_restripe_opts *opts,
		      struct cvm_config *to)
{
	uint32_t first, count;
	int rc = asked_sets(cfg, opts, &first, &count);
	if (rc)
		return rc;
	const struct cvm_stripe_set *set = &cfg->sets[first];
	uint64_t width = opts->stripe_width ? opts->stripe_width : set->stripe_width;
	if ((rc = cvm_restripe_target(cfg, width, first, count, to)))
		return rc;
	if (count == 1 && set->stripe_width == width) {
		if (cfg->nsets == 1)
			cvm_set_error("volume %s is one stripe set of width %" PRIu64 " over all its "
				      "LUNs already", cfg->name, width);
		else
			cvm_set_error("stripe set %u of volume %s is one stripe set of width %" PRIu64
				      " already", first, cfg->name, width);
		return -EALREADY;
	}
	cfg->restripe = (struct cvm_restripe){.target_width = width,
					      .target_lun_bytes = to->sets[first].lun_bytes,
					      .first_set = first, .set_count = count};
	return 0;
}

/* opts asks for nothing the restripe under way in cfg does not do. */
static int same_restripe(const struct cvm_config *cfg, const struct cvm_restripe_opts *opts)
{
	const struct cvm_restripe *r = &cfg->restripe;
	uint32_t first, count;
	int rc;
	if (opts->stripe_width && opts->stripe_width != r->target_width) {
		cvm_set_error("volume %s is being restriped to stripe width %" PRIu64 "; run the "
			      "restripe again without --stripe-width to finish that first",
			      cfg->name, r->target_width);
		return -EBUSY;
	}
	if (opts->nluns && (rc = asked_sets(cfg, opts, &first, &count)))
		return rc;
	if (opts->nluns && (first != r->first_set || count != r->set_count)) {
		char sets[48];
		cvm_restripe_name_sets(r->first_set, r->set_count, sets, sizeof sets);
		cvm_set_error("volume %s is being restriped (%s); run the restripe again without "
			      "--luns to finish that first", cfg->name, sets);
		return -EBUSY;
	}
	return 0;
}

int cvm_restripe_check(const struct cvm_config *cfg, const struct cvm_restripe_opts *opts)
{
	if (cfg->restripe.target_width)
		return same_restripe(cfg, opts);
	struct cvm_config *c = malloc(sizeof *c), *to = malloc(sizeof *to);
	int rc = c && to ? 0 : -ENOMEM;
	if (!rc) {
		*c = *cfg;
		rc = new_record(c, opts, to);
	}
	free(c);
	free(to);
	return rc;
}

static int plan_start(struct run *r)
{
	int rc = cvm_restripe_plan_init(&r->plan, &r->cfg, &r->to);
	struct cvm_move m;
	while (!rc && r->plan.done < r->cfg.restripe.moves_done)
		if (!cvm_restripe_plan_next(&r->plan, &m)) {
			cvm_set_error("volume %s: the restripe record says %" PRIu64 " moves are "
				      "done, more than the plan has; the config is damaged",
				      r->cfg.name, r->cfg.restripe.moves_done);
			rc = -EBADMSG;
		}
	return rc;
}

int cvm_restripe_count(const struct cvm_config *cfg, uint64_t *moves, uint64_t *chunk_bytes)
{
	struct cvm_config *to = malloc(sizeof *to);
	if (!to)
		return -ENOMEM;
	cvm_restripe_target_of(cfg, to);
	struct cvm_restripe_plan p;
	struct cvm_move m;
	int rc = cvm_restripe_plan_init(&p, cfg, to);
	while (!rc && cvm_restripe_plan_next(&p, &m))
		;
	*moves = p.done;
	*chunk_bytes = p.chunk_bytes;
	cvm_restripe_plan_free(&p);
	free(to);
	return rc;
}

/* The plan from the record's progress on, and room for a batch's moves. */
static int plan_setup(struct run *r)
{
	cvm_restripe_target_of(&r->cfg, &r->to);
	int rc = cvm_restripe_count(&r->cfg, &r->total, &r->h);
	if (rc || (rc = plan_start(r)))
		return rc;
	r->half_cells = (uint32_t)((CVM_SCRATCH_BYTES / r->h * r->cfg.nluns - 1) / 2);
	r->moves = calloc(r->half_cells, sizeof *r->moves);
	r->cells = calloc(r->half_cells, sizeof *r->cells);
	return r->moves && r->cells ? 0 : -ENOMEM;
}

/* Room to copy a batch: its cells' buffers and an AIO context. */
static int buffers(struct run *r)
{
	r->cbs = calloc(r->half_cells, sizeof *r->cbs);
	r->events = calloc(r->half_cells, sizeof *r->events);
	r->buf = cvm_alloc_aligned(r->half_cells * r->h);
	r->check = cvm_alloc_aligned(r->half_cells * r->h);
	if (!r->cbs || !r->events || !r->buf || !r->check)
		return -ENOMEM;
	if (io_setup((int)r->half_cells, &r->ctx) < 0)
		r->ctx = NULL; /* no AIO context left on the machine: one cell at a time */
	return 0;
}

/* The record of the restripe to do (made now, or found), its plan and its buffers. */
static int prepare(struct run *r)
{
	int rc;
	if (r->cfg.restripe.target_width)
		rc = same_restripe(&r->cfg, r->opts);
	else if (!(rc = new_record(&r->cfg, r->opts, &r->to)))
		rc = commit(r);
	if (rc || (rc = plan_setup(r)))
		return rc;
	return buffers(r);
}

/* Every move done: the config becomes the target, with what it learnt meanwhile. */
static int finish(struct run *r)
{
	struct cvm_config done = r->to;
	done.generation = r->cfg.generation;
	r->cfg = done;
	return commit(r);
}

static struct run *run_new(const struct cvm_restripe_opts *opts)
{
	struct run *r = calloc(1, sizeof *r);
	if (r) {
		r->opts = opts;
		r->start = now();
	}
	return r;
}

static void run_free(struct run *r)
{
	cvm_restripe_plan_free(&r->plan);
	if (r->ctx)
		io_destroy(r->ctx);
	free(r->moves);
	free(r->cells);
	free(r->cbs);
	free(r->events);
	free(r->buf);
	free(r->check);
	free(r);
}

/* Online: vol's users map through the gate made from the config's progress from now on,
 * or taken over from a follower of this process (cvm_restripe_follow_hand_over).  A staged
 * batch stays closed until it is finished. */
static int open_gate(struct run *r)
{
	uint32_t n = 0;
	int rc = r->cfg.restripe.staged ? staged_batch(r, &n) : 0;
	struct cvm_gate *mine = cvm_volume_gate(r->v);
	if (rc)
		return rc;
	r->closed = n;
	struct cvm_restripe_view *view;
	if ((rc = cvm_restripe_view_new(&r->cfg, true, &view)))
		return rc;
	/* This daemon's gate from its last run or follow: every process here that attached to
	 * it keeps mapping through it.  A batch left staged is closed in it already if a
	 * follower of this process closed it. */
	if (cvm_gate_owned(mine) &&
	    ((n && cvm_gate_closed(mine)) || cvm_gate_resume(mine, &r->cfg, view))) {
		cvm_restripe_view_free(view);
		r->gate = mine;
		if (n && !cvm_gate_closed(mine))
			cvm_gate_batch_begin(mine, r->moves, n);
		return 0;
	}
	if (cvm_gate_owned(mine))
		cvm_gate_close(mine); /* another restripe's: its users open the volume again */
	if ((rc = cvm_gate_create(&r->cfg, view, r->moves, n, &view->gate))) {
		cvm_restripe_view_free(view);
		return rc;
	}
	r->gate = view->gate;
	if (r->opts->hold_io)
		r->opts->hold_io(r->opts->arg, true);
	cvm_volume_set_view(r->v, &r->cfg, view);
	if (r->opts->hold_io)
		r->opts->hold_io(r->opts->arg, false);
	return 0;
}

static bool sets_equal(const struct cvm_config *a, const struct cvm_config *b)
{
	bool same = a->nluns == b->nluns && a->nsets == b->nsets;
	for (uint32_t i = 0; same && i < a->nsets; i++)
		same = !memcmp(&a->sets[i], &b->sets[i], sizeof a->sets[i]);
	return same;
}

/* now must be vol's volume, laid out as vol maps it: as vol's config says, or, once the
 * restripe vol followed or ran is done, as that restripe's target (vol maps through its
 * gate then, and keeps its config from the run's start). */
static int same_layout(const struct cvm_config *vol_cfg, const struct cvm_config *now)
{
	bool same = !memcmp(&vol_cfg->vol_uuid, &now->vol_uuid, sizeof now->vol_uuid) &&
		    now->generation >= vol_cfg->generation;
	if (same && !sets_equal(vol_cfg, now)) {
		struct cvm_config *done = NULL;
		if (vol_cfg->restripe.target_width && !(done = malloc(sizeof *done)))
			return -ENOMEM;
		if (done)
			cvm_restripe_target_of(vol_cfg, done);
		same = done && sets_equal(done, now);
		free(done);
	}
	if (same)
		return 0;
	cvm_set_error("volume %s changed since it was opened here; open it again first",
		      now->name);
	return -ESTALE;
}

int cvm_volume_restripe_online(struct cvm_volume *vol, const struct cvm_config *now,
			       const struct cvm_restripe_opts *opts, struct cvm_config *out)
{
	struct run *r = run_new(opts);
	if (!r)
		return -ENOMEM;
	r->v = vol;
	r->cfg = *now;
	int rc = same_layout(cvm_volume_config(vol), now);
	if (!rc)
		rc = prepare(r);
	if (!rc)
		rc = open_gate(r);
	if (!rc)
		rc = move_all(r);
	if (!rc)
		rc = finish(r);
	if (r->gate)
		cvm_gate_idle(r->gate); /* vol keeps mapping through it */
	if (out && (rc == 0 || rc == -EINTR))
		*out = r->cfg;
	run_free(r);
	return rc;
}

/* ---- a restripe another node runs (docs/restripe.md, "On a cluster") ---- */

struct cvm_restripe_follower {
	struct run *r;
	uint32_t closed; /* moves of the batch the gate keeps this node's users out of */
	bool paused;     /* that batch let through while nothing moves it (a recovery) */
};

int cvm_volume_restripe_follow(struct cvm_volume *vol, const struct cvm_config *now,
			       const struct cvm_restripe_opts *opts,
			       struct cvm_restripe_follower **out)
{
	struct cvm_restripe_follower *f = calloc(1, sizeof *f);
	struct run *r = f ? run_new(opts) : NULL;
	if (!r) {
		free(f);
		return -ENOMEM;
	}
	f->r = r;
	r->v = vol;
	r->cfg = *now;
	int rc = same_layout(cvm_volume_config(vol), now);
	if (!rc && !now->restripe.target_width) {
		cvm_set_error("volume %s: no restripe is under way", now->name);
		rc = -ENOENT;
	}
	if (!rc && !(rc = plan_setup(r)))
		rc = open_gate(r);
	f->closed = r->closed; /* a staged batch: closed until the restriper finishes it */
	if (rc) {
		cvm_restripe_follow_end(f);
		return rc;
	}
	*out = f;
	return 0;
}

uint64_t cvm_restripe_follow_position(const struct cvm_restripe_follower *f)
{
	return f->r->cfg.restripe.moves_done;
}

uint32_t cvm_restripe_follow_closed(const struct cvm_restripe_follower *f)
{
	return f->closed;
}

int cvm_restripe_follow_close(struct cvm_restripe_follower *f, uint64_t first, uint64_t *next)
{
	struct run *r = f->r;
	if (f->closed && first == r->cfg.restripe.moves_done) { /* staged: closed already */
		*next = first + f->closed;
		return 0;
	}
	if (f->closed || first != r->cfg.restripe.moves_done) {
		cvm_set_error("volume %s: the restripe's next batch starts at move %" PRIu64
			      ", this node is at move %" PRIu64 "%s", r->cfg.name, first,
			      r->cfg.restripe.moves_done, f->closed ? " with a batch closed" : "");
		return -ESTALE;
	}
	f->closed = next_batch(r);
	cvm_gate_batch_begin(r->gate, r->moves, f->closed);
	*next = first + f->closed;
	return 0;
}

int cvm_restripe_follow_open(struct cvm_restripe_follower *f, bool done)
{
	struct run *r = f->r;
	cvm_gate_batch_end(r->gate, r->moves, done ? f->closed : 0);
	if (done)
		r->cfg.restripe.moves_done += f->closed;
	f->closed = 0;
	if (done)
		return 0;
	/* The planner went past the batch: back to where the volume is. */
	cvm_restripe_plan_free(&r->plan);
	return plan_start(r);
}

void cvm_restripe_follow_pause(struct cvm_restripe_follower *f)
{
	if (f->closed && !f->paused) {
		cvm_gate_batch_end(f->r->gate, f->r->moves, 0);
		f->paused = true;
	}
}

void cvm_restripe_follow_unpause(struct cvm_restripe_follower *f)
{
	if (f->paused) {
		cvm_gate_batch_begin(f->r->gate, f->r->moves, f->closed);
		f->paused = false;
	}
}

int cvm_restripe_follow_finish(struct cvm_restripe_follower *f, const struct cvm_config *now)
{
	struct run *r = f->r;
	if (!f->closed || now->restripe.moves_done != r->cfg.restripe.moves_done ||
	    now->restripe.staged != f->closed) {
		cvm_set_error("volume %s: the batch closed here is not the one staged", now->name);
		return -ESTALE;
	}
	int rc = r->buf ? 0 : buffers(r);
	if (rc)
		return rc;
	r->cfg = *now; /* its generation is the one to follow */
	r->closed = f->closed;
	cvm_restripe_follow_unpause(f);
	if (!(rc = finish_staged(r)))
		f->closed = 0;
	return rc;
}

void cvm_restripe_follow_hand_over(struct cvm_restripe_follower *f)
{
	run_free(f->r);
	free(f);
}

void cvm_restripe_follow_end(struct cvm_restripe_follower *f)
{
	if (!f)
		return;
	if (f->r->gate)
		cvm_gate_idle(f->r->gate); /* the volume keeps mapping through it */
	run_free(f->r);
	free(f);
}

int cvm_volume_restripe(const struct cvm_scan *scan, const char *name_or_uuid,
			const struct cvm_restripe_opts *opts, struct cvm_config *out)
{
	struct run *r = run_new(opts);
	if (!r)
		return -ENOMEM;
	int rc = cvm_scan_find_volume(scan, name_or_uuid, &r->cfg);
	if (rc == 0)
		rc = cvm_volume_open_config(scan, &r->cfg, CVM_OPEN_RDWR, CVM_LOCK_ALONE, &r->v);
	if (rc == 0)
		rc = prepare(r);
	if (rc == 0)
		rc = move_all(r);
	if (rc == 0)
		rc = finish(r);
	if (out && (rc == 0 || rc == -EINTR))
		*out = r->cfg;
	cvm_volume_close(r->v);
	run_free(r);
	return rc;
}

void cvm_restripe_view_free(struct cvm_restripe_view *v)
{
	if (v) {
		free(v->moved);
		cvm_gate_detach(v->gate);
	}
	free(v);
}

int cvm_restripe_view_new(const struct cvm_config *cfg, bool replay,
			  struct cvm_restripe_view **out)
{
	struct cvm_restripe_view *v = calloc(1, sizeof *v);
	if (!v)
		return -ENOMEM;
	cvm_restripe_target_of(cfg, &v->to);
	v->chunk_bytes = cvm_restripe_chunk_bytes(cfg, &v->to);
	v->parked = CVM_NO_CHUNK;
	struct cvm_restripe_plan p;
	struct cvm_move m;
	int rc = cvm_restripe_plan_init(&p, cfg, &v->to);
	v->nchunks = p.nchunks;
	if (!rc && !(v->moved = calloc(p.nchunks / 64 + 1, sizeof *v->moved)))
		rc = -ENOMEM;
	while (!rc && replay && p.done < cfg->restripe.moves_done &&
	       cvm_restripe_plan_next(&p, &m)) {
		if (m.kind == CVM_MOVE_PARK) {
			v->parked = m.chunk;
			continue;
		}
		v->moved[m.chunk / 64] |= 1ull << (m.chunk % 64);
		if (m.kind == CVM_MOVE_UNPARK)
			v->parked = CVM_NO_CHUNK;
	}
	cvm_restripe_plan_free(&p);
	if (rc) {
		cvm_restripe_view_free(v);
		return rc;
	}
	*out = v;
	return 0;
}

struct cvm_cell cvm_restripe_view_cell(const struct cvm_config *from,
				       const struct cvm_restripe_view *v, uint64_t c)
{
	bool moved = v->gate ? cvm_gate_moved(v->gate, c) : v->moved[c / 64] >> (c % 64) & 1;
	if (moved)
		return cvm_restripe_cell_of(&v->to, v->chunk_bytes, c);
	if (c == (v->gate ? cvm_gate_parked(v->gate) : v->parked))
		return CVM_PARK_CELL;
	return cvm_restripe_cell_of(from, v->chunk_bytes, c);
}
