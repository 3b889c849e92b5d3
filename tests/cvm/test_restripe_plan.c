/* The restripe planner against a model of the LUNs' cells: every move reads the chunk it
 * moves and writes a cell whose chunk has already left, and after the last move every chunk is
 * where the target layout wants it; also when the moves are done in staged batches, as the
 * executor does them. */
#include "cvm/restripe.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#define EMPTY UINT64_MAX
#define STALE (UINT64_MAX - 1)

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* Stripe sets as cvm grow makes them: each LUN of a set as large as the set uses, plus some
 * LUNs larger than their set needs (the target may use that space). */
static void random_volume(struct cvm_config *c, uint64_t *seed)
{
	memset(c, 0, sizeof *c);
	snprintf(c->name, sizeof c->name, "v");
	c->nsets = 1 + (uint32_t)(rnd(seed) % 4);
	uint64_t rows = 2 + rnd(seed) % 6;
	for (uint32_t s = 0; s < c->nsets; s++) {
		struct cvm_stripe_set *set = &c->sets[s];
		set->stripe_width = 4096ull << (rnd(seed) % 6); /* 4k .. 128k */
		set->nluns = 1 + (uint32_t)(rnd(seed) % 4);
		set->lun_bytes = (128u << 10) * rows; /* same per LUN, a multiple of every width */
		set->first_lun = c->nluns;
		for (uint32_t i = 0; i < set->nluns; i++, c->nluns++) {
			cvm_uuid_generate(&c->luns[c->nluns].uuid);
			c->luns[c->nluns].size_bytes = CVM_META_BYTES + set->lun_bytes +
						       (rnd(seed) % 3 == 0 ? (64u << 10) * (rnd(seed) % 4) : 0);
		}
	}
}

struct model {
	uint64_t per_lun, chunk;
	uint64_t *cell; /* chunk held, EMPTY or STALE, by lun * per_lun + data offset / chunk */
	uint64_t park;
};

static uint64_t *slot(struct model *m, struct cvm_cell c, struct cvm_cell park)
{
	if (c.lun == park.lun && c.off == park.off)
		return &m->park;
	cr_assert_geq(c.off, CVM_META_BYTES, "a data cell below the data area");
	uint64_t i = (c.off - CVM_META_BYTES) / m->chunk;
	cr_assert_lt(i, m->per_lun, "a cell past the LUN's end");
	cr_assert_eq((c.off - CVM_META_BYTES) % m->chunk, 0);
	return &m->cell[c.lun * m->per_lun + i];
}

static struct cvm_cell cell_of(const struct cvm_config *cfg, uint64_t chunk, uint64_t c)
{
	struct cvm_map_iter it;
	struct cvm_piece p;
	cr_assert_eq(cvm_map_begin(&it, cfg, c * chunk, chunk), 0);
	cr_assert(cvm_map_next(&it, &p));
	cr_assert_eq(p.len, chunk, "a chunk is one piece");
	return (struct cvm_cell){p.lun, p.dev_offset};
}

static void model_init(struct model *m, const struct cvm_config *from, uint64_t chunk)
{
	m->chunk = chunk;
	m->per_lun = 0;
	for (uint32_t i = 0; i < from->nluns; i++)
		if ((from->luns[i].size_bytes - CVM_META_BYTES) / chunk > m->per_lun)
			m->per_lun = (from->luns[i].size_bytes - CVM_META_BYTES) / chunk;
	m->cell = malloc(from->nluns * m->per_lun * sizeof *m->cell);
	for (uint64_t i = 0; i < from->nluns * m->per_lun; i++)
		m->cell[i] = EMPTY;
	m->park = EMPTY;
	for (uint64_t c = 0; c < cvm_config_size(from) / chunk; c++)
		m->cell[cell_of(from, chunk, c).lun * m->per_lun +
			(cell_of(from, chunk, c).off - CVM_META_BYTES) / chunk] = c;
}

static void check_final(struct model *m, const struct cvm_config *from, const struct cvm_config *to,
			const char *what)
{
	for (uint64_t c = 0; c < cvm_config_size(from) / m->chunk; c++) {
		struct cvm_cell want = cell_of(to, m->chunk, c);
		cr_assert_eq(m->cell[want.lun * m->per_lun + (want.off - CVM_META_BYTES) / m->chunk], c,
			     "%s: chunk %llu is not where the target puts it", what,
			     (unsigned long long)c);
	}
}

static const struct cvm_cell PARK = CVM_PARK_CELL;

/* Moves one at a time: each reads its chunk and writes a cell nobody needs any more. */
static uint64_t run_sequential(const struct cvm_config *from, const struct cvm_config *to)
{
	struct cvm_restripe_plan p;
	cr_assert_eq(cvm_restripe_plan_init(&p, from, to), 0);
	struct model m;
	model_init(&m, from, p.chunk_bytes);
	struct cvm_move mv;
	uint64_t moves = 0;
	while (cvm_restripe_plan_next(&p, &mv)) {
		uint64_t *src = slot(&m, mv.src, PARK), *dst = slot(&m, mv.dst, PARK);
		cr_assert_eq(*src, mv.chunk, "move %llu reads chunk %llu where it is not",
			     (unsigned long long)moves, (unsigned long long)mv.chunk);
		cr_assert(*dst == EMPTY || *dst == STALE, "move %llu overwrites chunk %llu",
			  (unsigned long long)moves, (unsigned long long)*dst);
		*dst = mv.chunk;
		*src = STALE;
		moves++;
	}
	check_final(&m, from, to, "one at a time");
	cvm_restripe_plan_free(&p);
	free(m.cell);
	return moves;
}

/* Batches as the executor stages them: every source read, then every destination written; a
 * batch ends after a park, and the result is the same as one move at a time. */
static void run_batched(const struct cvm_config *from, const struct cvm_config *to, unsigned most)
{
	struct cvm_restripe_plan p;
	cr_assert_eq(cvm_restripe_plan_init(&p, from, to), 0);
	struct model m;
	model_init(&m, from, p.chunk_bytes);
	struct cvm_move *batch = malloc(most * sizeof *batch);
	uint64_t *staged = malloc(most * sizeof *staged);
	unsigned n;
	do {
		n = 0;
		while (n < most && cvm_restripe_plan_next(&p, &batch[n]))
			if (batch[n++].kind == CVM_MOVE_PARK)
				break;
		for (unsigned i = 0; i < n; i++)
			staged[i] = *slot(&m, batch[i].src, PARK);
		for (unsigned i = 0; i < n; i++) {
			cr_assert_eq(staged[i], batch[i].chunk, "a staged source is not its chunk");
			*slot(&m, batch[i].dst, PARK) = staged[i];
		}
	} while (n);
	check_final(&m, from, to, "in batches");
	free(batch);
	free(staged);
	cvm_restripe_plan_free(&p);
	free(m.cell);
}

Test(restripe_plan, random_layouts_end_in_the_target, .timeout = 120)
{
	uint64_t seed = 0xfeed5;
	struct cvm_config *from = malloc(sizeof *from), *to = malloc(sizeof *to);
	for (int round = 0; round < 300; round++) {
		random_volume(from, &seed);
		cr_assert_eq(cvm_config_validate(from), 0, "%s", cvm_last_error());
		uint64_t width = 4096ull << (rnd(&seed) % 7);
		int rc = cvm_restripe_target(from, width, to);
		if (rc == -ENOSPC)
			continue; /* LUNs of unequal sizes: the target may not hold it */
		cr_assert_eq(rc, 0, "%s", cvm_last_error());
		cr_assert_eq(cvm_config_validate(to), 0, "%s", cvm_last_error());
		run_sequential(from, to);
		run_batched(from, to, 1 + (unsigned)(rnd(&seed) % 9));
	}
	free(from);
	free(to);
}

/* The case restripe is for: 2 LUNs grown to 4 of the same size; nothing is free. */
Test(restripe_plan, two_luns_grown_to_four)
{
	struct cvm_config from = {.nsets = 2, .nluns = 4}, to;
	snprintf(from.name, sizeof from.name, "oradata");
	for (uint32_t s = 0; s < 2; s++)
		from.sets[s] = (struct cvm_stripe_set){.stripe_width = 256 << 10,
						       .lun_bytes = 32 << 20, .first_lun = 2 * s,
						       .nluns = 2};
	for (int i = 0; i < 4; i++) {
		cvm_uuid_generate(&from.luns[i].uuid);
		from.luns[i].size_bytes = CVM_META_BYTES + (32 << 20);
	}
	cr_assert_eq(cvm_restripe_target(&from, 256 << 10, &to), 0, "%s", cvm_last_error());
	cr_assert_eq(cvm_config_size(&to), cvm_config_size(&from));
	cr_assert_eq(cvm_restripe_chunk_bytes(&from, &to), 64 << 10);
	uint64_t moves = run_sequential(&from, &to);
	cr_assert_gt(moves, 0);
	run_batched(&from, &to, 7);
	/* Restriping the result again to the same layout moves nothing. */
	cr_assert_eq(run_sequential(&to, &to), 0);
}

Test(restripe_plan, same_input_same_moves)
{
	uint64_t seed = 77;
	struct cvm_config from, to;
	do {
		random_volume(&from, &seed);
	} while (cvm_restripe_target(&from, 64 << 10, &to));
	struct cvm_restripe_plan a, b;
	cr_assert_eq(cvm_restripe_plan_init(&a, &from, &to), 0);
	cr_assert_eq(cvm_restripe_plan_init(&b, &from, &to), 0);
	struct cvm_move x, y;
	bool more;
	do {
		more = cvm_restripe_plan_next(&a, &x);
		cr_assert_eq(cvm_restripe_plan_next(&b, &y), more);
		if (more)
			cr_assert(x.chunk == y.chunk && x.src.off == y.src.off && x.dst.off == y.dst.off &&
				  x.src.lun == y.src.lun && x.dst.lun == y.dst.lun && x.kind == y.kind);
	} while (more);
	cvm_restripe_plan_free(&a);
	cvm_restripe_plan_free(&b);
}

Test(restripe_plan, a_target_that_does_not_hold_the_volume_is_refused)
{
	struct cvm_config from = {.nsets = 2, .nluns = 3}, to;
	snprintf(from.name, sizeof from.name, "oradata");
	from.sets[0] = (struct cvm_stripe_set){.stripe_width = 256 << 10, .lun_bytes = 64 << 20,
					       .first_lun = 0, .nluns = 2};
	from.sets[1] = (struct cvm_stripe_set){.stripe_width = 256 << 10, .lun_bytes = 16 << 20,
					       .first_lun = 2, .nluns = 1};
	uint64_t sizes[] = {64 << 20, 64 << 20, 16 << 20};
	for (int i = 0; i < 3; i++) {
		cvm_uuid_generate(&from.luns[i].uuid);
		from.luns[i].size_bytes = CVM_META_BYTES + sizes[i];
	}
	cr_assert_eq(cvm_restripe_target(&from, 256 << 10, &to), -ENOSPC);
	cr_assert(strstr(cvm_last_error(), "volume oradata: one stripe set over its 3 LUNs holds "
					   "48.0 MiB"), "%s", cvm_last_error());
	cr_assert_eq(cvm_restripe_target(&from, 3000, &to), -EINVAL);
}
