/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The moves of a restripe: which chunk goes from which cell to which, in an order that never
 * writes a cell whose chunk has not left yet.  See docs/restripe.md.
 *
 * A chunk is chunk_bytes of the volume (the smallest stripe width of both layouts, so one
 * contiguous piece of one LUN in each); a cell is a chunk-sized piece of a LUN, named by its
 * device offset.  Each cell has at most one chunk leaving it and one arriving, so the moves
 * form chains, which end at a cell the old layout leaves empty and are done from that end
 * backwards, and cycles, whose first chunk is parked in a scratch cell first. */
#include "restripe.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t set_bytes(const struct cvm_stripe_set *s)
{
	return s->lun_bytes * s->nluns;
}

struct cvm_cell cvm_restripe_cell_of(const struct cvm_config *cfg, uint64_t chunk_bytes, uint64_t c)
{
	struct cvm_map_iter it;
	struct cvm_piece piece = {0};
	if (cvm_map_begin(&it, cfg, c * chunk_bytes, chunk_bytes) == 0)
		cvm_map_next(&it, &piece); /* one piece: the chunk divides every stripe width */
	return (struct cvm_cell){piece.lun, piece.dev_offset};
}

/* The chunk layout cfg keeps in cell, or CVM_NO_CHUNK if it keeps none there. */
static uint64_t chunk_at(const struct cvm_config *cfg, uint64_t chunk_bytes, struct cvm_cell cell)
{
	if (cell.off < CVM_META_BYTES)
		return CVM_NO_CHUNK;
	uint64_t off = cell.off - CVM_META_BYTES, set_start = 0;
	for (uint32_t i = 0; i < cfg->nsets; set_start += set_bytes(&cfg->sets[i]), i++) {
		const struct cvm_stripe_set *s = &cfg->sets[i];
		if (cell.lun < s->first_lun || cell.lun >= s->first_lun + s->nluns)
			continue;
		if (off >= s->lun_bytes)
			return CVM_NO_CHUNK;
		uint64_t row = off / s->stripe_width, within = off % s->stripe_width;
		uint64_t stripe = row * s->nluns + (cell.lun - s->first_lun);
		return (set_start + stripe * s->stripe_width + within) / chunk_bytes;
	}
	return CVM_NO_CHUNK;
}

static bool cells_equal(struct cvm_cell a, struct cvm_cell b)
{
	return a.lun == b.lun && a.off == b.off;
}

static uint64_t smallest_width(const struct cvm_config *cfg, uint64_t w)
{
	for (uint32_t i = 0; i < cfg->nsets; i++)
		if (cfg->sets[i].stripe_width < w)
			w = cfg->sets[i].stripe_width;
	return w;
}

uint64_t cvm_restripe_chunk_bytes(const struct cvm_config *from, const struct cvm_config *to)
{
	return smallest_width(to, smallest_width(from, CVM_RESTRIPE_MAX_CHUNK));
}

void cvm_restripe_name_sets(uint32_t first, uint32_t count, char *buf, size_t len)
{
	if (count == 1)
		snprintf(buf, len, "stripe set %u", first);
	else
		snprintf(buf, len, "stripe sets %u-%u", first, first + count - 1);
}

int cvm_restripe_sets_of(const struct cvm_config *cfg, const cvm_uuid *luns, uint32_t n,
			 uint32_t *first, uint32_t *count)
{
	bool chosen[CVM_MAX_LUNS] = {false};
	for (uint32_t k = 0; k < n; k++) {
		uint32_t i = 0;
		while (i < cfg->nluns && !cvm_uuid_equal(&cfg->luns[i].uuid, &luns[k]))
			i++;
		char u[CVM_UUID_STR];
		cvm_uuid_format(&luns[k], u);
		if (i == cfg->nluns) {
			cvm_set_error("LUN %s is not one of volume %s's; 'cvm show %s' lists them", u,
				      cfg->name, cfg->name);
			return -EINVAL;
		}
		if (chosen[i]) {
			cvm_set_error("LUN %s is given twice", u);
			return -EINVAL;
		}
		chosen[i] = true;
	}
	*count = 0;
	for (uint32_t s = 0; s < cfg->nsets; s++) {
		const struct cvm_stripe_set *set = &cfg->sets[s];
		uint32_t in = 0;
		for (uint32_t i = set->first_lun; i < set->first_lun + set->nluns; i++)
			in += chosen[i];
		if (in && in < set->nluns) {
			cvm_set_error("volume %s: --luns takes part of stripe set %u (%u of its %u LUNs); "
				      "a restripe makes whole stripe sets one: give all the set's LUNs "
				      "or none ('cvm show %s' lists them)", cfg->name, s, in, set->nluns,
				      cfg->name);
			return -EINVAL;
		}
		if (in && *count && *first + *count != s) {
			cvm_set_error("volume %s: --luns takes stripe sets %u and %u but not stripe set "
				      "%u between them; a restripe makes adjacent stripe sets one",
				      cfg->name, *first + *count - 1, s, *first + *count);
			return -EINVAL;
		}
		if (in && !(*count)++)
			*first = s;
	}
	if (!*count) {
		cvm_set_error("volume %s: --luns names no LUN", cfg->name);
		return -EINVAL;
	}
	return 0;
}

/* from with sets [first, first + count) replaced by one set of width over their LUNs. */
static void merge_sets(const struct cvm_config *from, uint32_t first, uint32_t count,
		       uint64_t width, uint64_t lun_bytes, struct cvm_config *to)
{
	*to = *from;
	to->restripe = (struct cvm_restripe){0};
	uint32_t nluns = 0;
	for (uint32_t s = first; s < first + count; s++)
		nluns += from->sets[s].nluns;
	to->sets[first] = (struct cvm_stripe_set){.stripe_width = width, .lun_bytes = lun_bytes,
						  .first_lun = from->sets[first].first_lun,
						  .nluns = nluns};
	for (uint32_t s = first + count; s < from->nsets; s++)
		to->sets[s - count + 1] = from->sets[s];
	to->nsets = from->nsets - count + 1;
}

void cvm_restripe_target_of(const struct cvm_config *cfg, struct cvm_config *to)
{
	const struct cvm_restripe *r = &cfg->restripe;
	merge_sets(cfg, r->first_set, r->set_count, r->target_width, r->target_lun_bytes, to);
}

/* The sets after [first, first + count) keep their volume offsets, so the new set must hold
 * exactly what the sets it replaces held; the last may hold more (the volume grows). */
int cvm_restripe_target(const struct cvm_config *from, uint64_t width, uint32_t first,
			uint32_t count, struct cvm_config *to)
{
	if (cvm_check_stripe_width(width))
		return -EINVAL;
	uint32_t nluns = 0;
	uint64_t smallest = 0, held = 0;
	if (count && first < from->nsets && count <= from->nsets - first)
		held = cvm_sets_held(from, first, count, &nluns, &smallest);
	if (!nluns) {
		cvm_set_error("volume %s has no stripe sets %u-%u", from->name, first,
			      first + count - 1);
		return -EINVAL;
	}
	uint64_t per_lun = smallest - smallest % width;
	char sets[48], over[80], w[32], h[32], n[32];
	cvm_restripe_name_sets(first, count, sets, sizeof sets);
	cvm_format_size(width, w, sizeof w);
	cvm_format_size(held, n, sizeof n);
	if (first + count < from->nsets) {
		if (held % nluns || held / nluns % width) {
			cvm_set_error("volume %s: the %s of %s cannot be spread evenly over their %u "
				      "LUNs in stripes of %s, and stripe set %u after them must keep "
				      "its place; include its LUNs too, or give a smaller "
				      "--stripe-width", from->name, n, sets, nluns, w, first + count);
			return -EINVAL;
		}
		if (held / nluns <= per_lun)
			per_lun = held / nluns;
	}
	if (per_lun == 0 || per_lun * nluns < held) {
		bool all = count == from->nsets;
		if (all)
			snprintf(over, sizeof over, "its %u LUNs", nluns);
		else
			snprintf(over, sizeof over, "the %u LUNs of %s", nluns, sets);
		cvm_format_size(per_lun * nluns, h, sizeof h);
		cvm_set_error("volume %s: one stripe set over %s holds %s (each LUN giving as much "
			      "as the smallest), less than the %s %s now; add LUNs as large as the "
			      "others first", from->name, over, h, n, all ? "it holds" : "they hold");
		return -ENOSPC;
	}
	merge_sets(from, first, count, width, per_lun, to);
	return 0;
}

int cvm_restripe_plan_init(struct cvm_restripe_plan *p, const struct cvm_config *from,
			   const struct cvm_config *to)
{
	memset(p, 0, sizeof *p);
	if (from->nluns != to->nluns || cvm_config_size(to) < cvm_config_size(from))
		return -EINVAL;
	p->from = from;
	p->to = to;
	p->park = CVM_PARK_CELL;
	p->chunk_bytes = cvm_restripe_chunk_bytes(from, to);
	p->nchunks = cvm_config_size(from) / p->chunk_bytes;
	p->visited = calloc(p->nchunks / 64 + 1, sizeof *p->visited);
	return p->visited ? 0 : -ENOMEM;
}

void cvm_restripe_plan_free(struct cvm_restripe_plan *p)
{
	free(p->visited);
	p->visited = NULL;
}

static bool visited(const struct cvm_restripe_plan *p, uint64_t c)
{
	return p->visited[c / 64] >> (c % 64) & 1;
}

static void visit(struct cvm_restripe_plan *p, uint64_t c)
{
	p->visited[c / 64] |= 1ull << (c % 64);
}

/* The walk's next move: the chunk whose target is the free cell comes into it. */
static bool walk_step(struct cvm_restripe_plan *p, struct cvm_move *m)
{
	uint64_t c = chunk_at(p->to, p->chunk_bytes, p->free_cell);
	if (p->parked && c == p->parked_chunk) {
		*m = (struct cvm_move){.chunk = c, .src = p->park, .dst = p->free_cell,
				       .kind = CVM_MOVE_UNPARK};
		p->parked = false;
		p->walking = false;
		return true;
	}
	if (c == CVM_NO_CHUNK || c >= p->nchunks || visited(p, c)) {
		p->walking = false; /* the cell stays empty: the chain began here */
		return false;
	}
	visit(p, c);
	struct cvm_cell src = cvm_restripe_cell_of(p->from, p->chunk_bytes, c);
	*m = (struct cvm_move){.chunk = c, .src = src, .dst = p->free_cell, .kind = CVM_MOVE};
	p->free_cell = src;
	return true;
}

/* Chains: a chunk whose target cell the old layout leaves empty ends one. */
static bool next_chain(struct cvm_restripe_plan *p)
{
	while (p->scan < p->nchunks) {
		uint64_t c = p->scan++;
		if (visited(p, c))
			continue;
		struct cvm_cell dst = cvm_restripe_cell_of(p->to, p->chunk_bytes, c);
		if (chunk_at(p->from, p->chunk_bytes, dst) == CVM_NO_CHUNK) {
			p->free_cell = dst;
			p->walking = true;
			return true;
		}
	}
	return false;
}

/* Cycles: what is left unvisited either stays where it is or is on one. */
static bool next_cycle(struct cvm_restripe_plan *p, struct cvm_move *m)
{
	while (p->scan < p->nchunks) {
		uint64_t c = p->scan++;
		if (visited(p, c))
			continue;
		visit(p, c);
		struct cvm_cell src = cvm_restripe_cell_of(p->from, p->chunk_bytes, c);
		if (cells_equal(src, cvm_restripe_cell_of(p->to, p->chunk_bytes, c)))
			continue;
		*m = (struct cvm_move){.chunk = c, .src = src, .dst = p->park,
				       .kind = CVM_MOVE_PARK};
		p->parked = true;
		p->parked_chunk = c;
		p->free_cell = src;
		p->walking = true;
		return true;
	}
	return false;
}

bool cvm_restripe_plan_next(struct cvm_restripe_plan *p, struct cvm_move *m)
{
	for (;;) {
		if (p->walking) {
			if (walk_step(p, m))
				break;
			continue;
		}
		if (p->phase == 0) {
			if (next_chain(p))
				continue;
			p->phase = 1;
			p->scan = 0;
		}
		if (p->phase == 1 && next_cycle(p, m))
			break;
		p->phase = 2;
		return false;
	}
	p->done++;
	return true;
}
