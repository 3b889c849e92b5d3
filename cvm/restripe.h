/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Restripe internals of libcvm (docs/restripe.md); not installed. */
#ifndef CVM_RESTRIPE_H
#define CVM_RESTRIPE_H

#include "internal.h"

#define CVM_RESTRIPE_MAX_CHUNK (64u << 10)
#define CVM_NO_CHUNK UINT64_MAX

/* A chunk-sized piece of a LUN: its index in the config and its device offset (data cells
 * start at CVM_META_BYTES; scratch cells lie in the metadata area). */
struct cvm_cell {
	uint32_t lun;
	uint64_t off;
};

enum cvm_move_kind {
	CVM_MOVE,        /* src -> dst, its final place */
	CVM_MOVE_PARK,   /* the first chunk of a cycle, to the park cell */
	CVM_MOVE_UNPARK, /* that chunk from the park cell to its final place, closing the cycle */
};

struct cvm_move {
	uint64_t chunk;
	struct cvm_cell src, dst;
	enum cvm_move_kind kind;
};

struct cvm_restripe_plan {
	const struct cvm_config *from, *to;
	struct cvm_cell park; /* CVM_PARK_CELL */
	uint64_t chunk_bytes, nchunks;
	uint64_t *visited; /* a bit per chunk: its move is planned, or it stays */
	uint64_t done;     /* moves generated */
	int phase;         /* 0 chains, 1 cycles, 2 no more */
	uint64_t scan;     /* next chunk the phase looks at */
	bool walking, parked;
	struct cvm_cell free_cell; /* the cell the walk fills next */
	uint64_t parked_chunk;
};

/* The cell holding chunk c in layout cfg (c inside the layout). */
struct cvm_cell cvm_restripe_cell_of(const struct cvm_config *cfg, uint64_t chunk_bytes, uint64_t c);

/* Where a restripe has left each chunk, for the volume's users (volume.c): from the config
 * of a paused one, from the gate of one running on this node. */
struct cvm_restripe_view {
	struct cvm_config to;
	uint64_t chunk_bytes, nchunks;
	uint64_t *moved;       /* a bit per chunk: in its place in `to` */
	uint64_t parked;       /* the chunk in the park cell, or CVM_NO_CHUNK */
	struct cvm_gate *gate; /* running: moved and parked are the gate's */
};
/* The view of cfg's restripe, the moves recorded done replayed unless a gate will say where
 * things are.  NULL and -errno on failure. */
int cvm_restripe_view_new(const struct cvm_config *cfg, bool replay,
			  struct cvm_restripe_view **out);
void cvm_restripe_view_free(struct cvm_restripe_view *v);

/* ---- the gate of a restripe running on this node (restripe_gate.c) ---- */
#define CVM_GATE_BATCH_MAX 64u /* moves in a batch, whoever runs it */
struct cvm_gate;
/* The owner (the process running the restripe) makes it from the view as the config says,
 * with the batch of moves closed[0..nclosed) (a staged one) kept closed from the start. */
int cvm_gate_create(const struct cvm_config *cfg, const struct cvm_restripe_view *view,
		    const struct cvm_move *closed, uint32_t nclosed, struct cvm_gate **out);
/* The run (or follow) ends: the gate stays, idle, while its owner has the volume open, so
 * that this node's next run keeps every process that attached to it (a batch cut short
 * closes it instead).  Detaching the owner's handle closes it. */
void cvm_gate_idle(struct cvm_gate *g);
/* A new run here takes the owner's gate over: where chunks are is view's (cfg's progress);
 * false if the gate is of another restripe. */
bool cvm_gate_resume(struct cvm_gate *g, const struct cvm_config *cfg,
		     const struct cvm_restripe_view *view);
/* Made by this process and not closed yet: a run here may take it over. */
bool cvm_gate_owned(const struct cvm_gate *g);
/* A batch is closed (draining or moving). */
bool cvm_gate_closed(const struct cvm_gate *g);
/* The gate vol maps through, or NULL. */
struct cvm_gate *cvm_volume_gate(const struct cvm_volume *v);
/* Another process using the volume: -ENOENT if no live owner runs cfg's restripe. */
int cvm_gate_attach(const struct cvm_config *cfg, struct cvm_gate **out);
/* The owner, when the run ends: the gate goes (its waiters are let go; those of a batch cut
 * short get -EIO), and the owner's mapping of it stays until it detaches. */
void cvm_gate_close(struct cvm_gate *g);
void cvm_gate_detach(struct cvm_gate *g);
/* The volume's users map by cfg (its layout unchanged) and this view from now on: no I/O of
 * theirs may be in flight (volume.c). */
void cvm_volume_set_view(struct cvm_volume *v, const struct cvm_config *cfg,
			 struct cvm_restripe_view *view);
/* Count an I/O of volume bytes [off, off+len) in, before it is mapped; waiting while the batch
 * in motion touches it, or -EBUSY then without wait.  -EIO if the owner died mid-batch. */
int cvm_gate_enter(struct cvm_gate *g, uint64_t off, uint64_t len, bool wait);
void cvm_gate_leave(struct cvm_gate *g, uint64_t off, uint64_t len);
/* Synchronous I/O that waited for a batch, the longest wait, and asynchronous submissions
 * held back, by every process so far. */
void cvm_gate_waits(const struct cvm_gate *g, uint64_t *waits, uint64_t *wait_max_ns,
		    uint64_t *held);
/* What -EBUSY's caller waits on: the gate's sequence changes with every phase. */
uint32_t cvm_gate_seq(const struct cvm_gate *g);
void cvm_gate_wait_change(struct cvm_gate *g, uint32_t seen, int ms);
bool cvm_gate_moved(const struct cvm_gate *g, uint64_t chunk);
uint64_t cvm_gate_parked(const struct cvm_gate *g);
/* The owner: keep everyone out of the batch's chunks (waits for their I/O there); then let
 * them in again, the chunks where the batch put them. */
void cvm_gate_batch_begin(struct cvm_gate *g, const struct cvm_move *moves, uint32_t n);
void cvm_gate_batch_end(struct cvm_gate *g, const struct cvm_move *moves, uint32_t n);
struct cvm_cell cvm_restripe_view_cell(const struct cvm_config *from,
				       const struct cvm_restripe_view *v, uint64_t c);

/* The chunk size of a restripe from one layout to the other. */
uint64_t cvm_restripe_chunk_bytes(const struct cvm_config *from, const struct cvm_config *to);
/* The stripe sets [*first, *first + *count) the LUNs luns[0..n) make up: whole, adjacent
 * sets.  -EINVAL with a message naming what is wrong. */
int cvm_restripe_sets_of(const struct cvm_config *cfg, const cvm_uuid *luns, uint32_t n,
			 uint32_t *first, uint32_t *count);
/* The target of a restripe of from: its sets [first, first + count) become one stripe set of
 * the given width over their LUNs, each giving what the smallest can, or exactly what those
 * sets held if sets follow them (their volume offsets stay).  -ENOSPC or -EINVAL (with a
 * message) if it cannot hold them. */
int cvm_restripe_target(const struct cvm_config *from, uint64_t width, uint32_t first,
			uint32_t count, struct cvm_config *to);
/* The target of the restripe cfg records. */
void cvm_restripe_target_of(const struct cvm_config *cfg, struct cvm_config *to);
/* Where a cycle's first chunk waits: the first scratch cell, whatever the chunk size. */
#define CVM_PARK_CELL ((struct cvm_cell){0, CVM_SCRATCH_OFFSET})

/* The moves from one layout to the other, one at a time, in their canonical order.  from and
 * to must outlive the plan. */
int cvm_restripe_plan_init(struct cvm_restripe_plan *p, const struct cvm_config *from,
			   const struct cvm_config *to);
bool cvm_restripe_plan_next(struct cvm_restripe_plan *p, struct cvm_move *m);
void cvm_restripe_plan_free(struct cvm_restripe_plan *p);

#endif
