/* SPDX-License-Identifier: GPL-2.0-or-later */
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
		int rc = cvm_restripe_target(from, width, 0, from->nsets, to);
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
	cr_assert_eq(cvm_restripe_target(&from, 256 << 10, 0, from.nsets, &to), 0, "%s", cvm_last_error());
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
	} while (cvm_restripe_target(&from, 64 << 10, 0, from.nsets, &to));
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
	cr_assert_eq(cvm_restripe_target(&from, 256 << 10, 0, from.nsets, &to), -ENOSPC);
	cr_assert(strstr(cvm_last_error(), "volume oradata: one stripe set over its 3 LUNs holds "
					   "48.0 MiB"), "%s", cvm_last_error());
	cr_assert_eq(cvm_restripe_target(&from, 3000, 0, from.nsets, &to), -EINVAL);
}

/* A run of the sets becomes one, the others stay: from random layouts and random runs, the
 * moves end in the target and the sets outside the run keep every chunk where it was. */
Test(restripe_plan, random_runs_of_sets_end_in_the_target, .timeout = 120)
{
	uint64_t seed = 0x5e75;
	struct cvm_config *from = malloc(sizeof *from), *to = malloc(sizeof *to);
	int planned = 0;
	for (int round = 0; round < 400; round++) {
		random_volume(from, &seed);
		uint32_t first = (uint32_t)(rnd(&seed) % from->nsets);
		uint32_t count = 1 + (uint32_t)(rnd(&seed) % (from->nsets - first));
		uint64_t width = 4096ull << (rnd(&seed) % 7);
		int rc = cvm_restripe_target(from, width, first, count, to);
		if (rc == -ENOSPC || rc == -EINVAL)
			continue; /* unequal LUNs, or a run that cannot keep the next set in place */
		cr_assert_eq(rc, 0, "%s", cvm_last_error());
		cr_assert_eq(cvm_config_validate(to), 0, "%s", cvm_last_error());
		cr_assert_eq(to->nsets, from->nsets - count + 1);
		for (uint32_t s = first + count; s < from->nsets; s++)
			cr_assert(!memcmp(&to->sets[s - count + 1], &from->sets[s], sizeof from->sets[s]),
				  "set %u after the run changed", s);
		if (first + count < from->nsets)
			cr_assert_eq(cvm_config_size(to), cvm_config_size(from));
		run_sequential(from, to);
		run_batched(from, to, 1 + (unsigned)(rnd(&seed) % 9));
		planned++;
	}
	cr_assert_gt(planned, 100, "only %d rounds made a target", planned);
	free(from);
	free(to);
}

/* Sets of 2, 2 and 2 LUNs of one size. */
static void three_sets(struct cvm_config *from)
{
	memset(from, 0, sizeof *from);
	snprintf(from->name, sizeof from->name, "oradata");
	from->nsets = 3;
	from->nluns = 6;
	for (uint32_t s = 0; s < 3; s++)
		from->sets[s] = (struct cvm_stripe_set){.stripe_width = 256 << 10,
							.lun_bytes = 32 << 20, .first_lun = 2 * s,
							.nluns = 2};
	for (int i = 0; i < 6; i++) {
		cvm_uuid_generate(&from->luns[i].uuid);
		from->luns[i].size_bytes = CVM_META_BYTES + (32 << 20);
	}
}

Test(restripe_plan, luns_name_whole_adjacent_sets)
{
	struct cvm_config from, to;
	three_sets(&from);
	uint32_t first = 99, count = 99;
	cvm_uuid luns[4] = {from.luns[3].uuid, from.luns[2].uuid, from.luns[4].uuid,
			    from.luns[5].uuid};
	cr_assert_eq(cvm_restripe_sets_of(&from, luns, 4, &first, &count), 0, "%s",
		     cvm_last_error());
	cr_assert(first == 1 && count == 2, "sets %u+%u", first, count);
	cr_assert_eq(cvm_restripe_sets_of(&from, luns, 3, &first, &count), -EINVAL);
	cr_assert(strstr(cvm_last_error(), "part of stripe set 2 (1 of its 2 LUNs)"), "%s",
		  cvm_last_error());
	cvm_uuid apart[4] = {from.luns[0].uuid, from.luns[1].uuid, from.luns[4].uuid,
			     from.luns[5].uuid};
	cr_assert_eq(cvm_restripe_sets_of(&from, apart, 4, &first, &count), -EINVAL);
	cr_assert(strstr(cvm_last_error(), "stripe sets 0 and 2 but not stripe set 1"), "%s",
		  cvm_last_error());
	cvm_uuid twice[2] = {from.luns[0].uuid, from.luns[0].uuid};
	cr_assert_eq(cvm_restripe_sets_of(&from, twice, 2, &first, &count), -EINVAL);
	cr_assert(strstr(cvm_last_error(), "is given twice"), "%s", cvm_last_error());
	cvm_uuid stranger;
	cvm_uuid_generate(&stranger);
	cr_assert_eq(cvm_restripe_sets_of(&from, &stranger, 1, &first, &count), -EINVAL);
	cr_assert(strstr(cvm_last_error(), "is not one of volume oradata's"), "%s",
		  cvm_last_error());
	/* Sets 0-1 before set 2: exactly their 128 MiB, so set 2 stays where it is. */
	cr_assert_eq(cvm_restripe_target(&from, 256 << 10, 0, 2, &to), 0, "%s", cvm_last_error());
	cr_assert(to.nsets == 2 && to.sets[0].nluns == 4 && to.sets[0].lun_bytes == 32 << 20 &&
		  to.sets[1].first_lun == 4);
	cr_assert_gt(run_sequential(&from, &to), 0);
}

Test(restripe_plan, a_run_of_sets_that_cannot_keep_the_next_in_place_is_refused)
{
	struct cvm_config from, to;
	three_sets(&from);
	/* Set 0 in stripes of 1 MiB: 31.75 MiB a LUN is not a number of stripes. */
	from.sets[0].lun_bytes = (32 << 20) - (256 << 10);
	cr_assert_eq(cvm_config_validate(&from), 0, "%s", cvm_last_error());
	cr_assert_eq(cvm_restripe_target(&from, 1 << 20, 0, 1, &to), -EINVAL);
	cr_assert(strstr(cvm_last_error(), "the 63.5 MiB of stripe set 0 cannot be spread evenly "
					   "over their 2 LUNs in stripes of 1.0 MiB, and stripe set 1 "
					   "after them must keep its place"), "%s", cvm_last_error());
	cr_assert_eq(cvm_restripe_target(&from, 128 << 10, 0, 1, &to), 0, "%s", cvm_last_error());
	/* Sets 0-1 of a volume whose set 1 has smaller LUNs than set 0 uses. */
	three_sets(&from);
	from.sets[1].lun_bytes = 16 << 20;
	from.luns[2].size_bytes = from.luns[3].size_bytes = CVM_META_BYTES + (16 << 20);
	cr_assert_eq(cvm_restripe_target(&from, 256 << 10, 0, 2, &to), -ENOSPC);
	cr_assert(strstr(cvm_last_error(), "one stripe set over the 4 LUNs of stripe sets 0-1 holds "
					   "64.0 MiB"), "%s", cvm_last_error());
}
