/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The mapping function against a reference model built the other way round: the model lays
 * the volume out by enumerating stripe chunks in order, the mapper computes by division. */
#include "cvm/cvm.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#define UNIT 512u

struct where {
	uint32_t lun;
	uint64_t unit; /* LUN data offset / UNIT */
};

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static void random_config(struct cvm_config *c, uint64_t *seed)
{
	memset(c, 0, sizeof *c);
	snprintf(c->name, sizeof c->name, "model");
	c->nsets = 1 + (uint32_t)(rnd(seed) % 4);
	for (uint32_t s = 0; s < c->nsets; s++) {
		struct cvm_stripe_set *set = &c->sets[s];
		set->stripe_width = 4096ull << (rnd(seed) % 5);  /* 4k .. 64k */
		set->nluns = 1 + (uint32_t)(rnd(seed) % 5);
		set->lun_bytes = set->stripe_width * (1 + rnd(seed) % 6);
		set->first_lun = c->nluns;
		for (uint32_t i = 0; i < set->nluns; i++)
			cvm_uuid_generate(&c->luns[c->nluns++].uuid);
	}
}

/* Reference: walk chunk by chunk, row by row, LUN by LUN. */
static struct where *model(const struct cvm_config *c, uint64_t *units)
{
	uint64_t size = cvm_config_size(c);
	struct where *m = calloc(size / UNIT, sizeof *m), *p = m;
	for (uint32_t s = 0; s < c->nsets; s++) {
		const struct cvm_stripe_set *set = &c->sets[s];
		for (uint64_t row = 0; row < set->lun_bytes / set->stripe_width; row++)
			for (uint32_t l = 0; l < set->nluns; l++)
				for (uint64_t u = 0; u < set->stripe_width / UNIT; u++)
					*p++ = (struct where){set->first_lun + l,
							      (row * set->stripe_width) / UNIT + u};
	}
	*units = size / UNIT;
	return m;
}

Test(layout, mapping_matches_reference_model)
{
	uint64_t seed = 0x1234567;
	struct cvm_config *c = malloc(sizeof *c);
	for (int layout = 0; layout < 200; layout++) {
		random_config(c, &seed);
		cr_assert_eq(cvm_config_validate(c), 0, "%s", cvm_last_error());
		uint64_t units;
		struct where *m = model(c, &units);
		for (int q = 0; q < 200; q++) {
			uint64_t a = rnd(&seed) % units, b = rnd(&seed) % units;
			uint64_t first = a < b ? a : b, count = (a < b ? b - a : a - b) + 1;
			struct cvm_map_iter it;
			struct cvm_piece p;
			cr_assert_eq(cvm_map_begin(&it, c, first * UNIT, count * UNIT), 0);
			uint64_t covered = 0;
			while (cvm_map_next(&it, &p)) {
				cr_assert_eq(p.buf_offset, covered * UNIT, "pieces out of order");
				cr_assert_gt(p.len, 0);
				for (uint64_t u = 0; u < p.len / UNIT; u++) {
					struct where w = m[first + covered + u];
					cr_assert_eq(p.lun, w.lun, "layout %d unit %llu: lun %u, model %u",
						     layout, (unsigned long long)(first + covered + u),
						     p.lun, w.lun);
					cr_assert_eq(p.lun_offset / UNIT + u, w.unit);
				}
				/* A piece never crosses a stripe boundary of a striped set. */
				covered += p.len / UNIT;
			}
			cr_assert_eq(covered, count);
		}
		free(m);
	}
	free(c);
}

Test(layout, pieces_split_at_stripe_boundaries)
{
	struct cvm_config c = {.nsets = 1, .nluns = 4};
	snprintf(c.name, sizeof c.name, "v");
	c.sets[0] = (struct cvm_stripe_set){.stripe_width = 256 << 10, .lun_bytes = 4 << 20,
					    .first_lun = 0, .nluns = 4};
	for (int i = 0; i < 4; i++)
		cvm_uuid_generate(&c.luns[i].uuid);
	struct cvm_map_iter it;
	struct cvm_piece p;
	/* 1 MiB starting 4 KiB before a stripe boundary: 4k, 256k, 256k, 256k, 252k. */
	cr_assert_eq(cvm_map_begin(&it, &c, (256 << 10) - 4096, 1 << 20), 0);
	uint64_t want[] = {4096, 256 << 10, 256 << 10, 256 << 10, (256 << 10) - 4096};
	uint32_t luns[] = {0, 1, 2, 3, 0};
	for (int i = 0; i < 5; i++) {
		cr_assert(cvm_map_next(&it, &p));
		cr_assert_eq(p.len, want[i], "piece %d", i);
		cr_assert_eq(p.lun, luns[i], "piece %d", i);
	}
	cr_assert_eq(p.lun_offset, 256 << 10, "the second row starts one width into LUN 0");
	cr_assert_not(cvm_map_next(&it, &p));
}

Test(layout, one_lun_set_is_one_piece)
{
	struct cvm_config c = {.nsets = 1, .nluns = 1};
	snprintf(c.name, sizeof c.name, "v");
	c.sets[0] = (struct cvm_stripe_set){.stripe_width = 4096, .lun_bytes = 1 << 20, .nluns = 1};
	struct cvm_map_iter it;
	struct cvm_piece p;
	cr_assert_eq(cvm_map_begin(&it, &c, 512, 100 * 4096), 0);
	cr_assert(cvm_map_next(&it, &p));
	cr_assert_eq(p.len, 100 * 4096);
	cr_assert_not(cvm_map_next(&it, &p));
}

Test(layout, out_of_range_is_refused)
{
	struct cvm_config c = {.nsets = 1, .nluns = 1};
	snprintf(c.name, sizeof c.name, "v");
	c.sets[0] = (struct cvm_stripe_set){.stripe_width = 4096, .lun_bytes = 1 << 20, .nluns = 1};
	struct cvm_map_iter it;
	cr_assert_eq(cvm_map_begin(&it, &c, 1 << 20, 512), -ERANGE);
	cr_assert_eq(cvm_map_begin(&it, &c, 512, 1 << 20), -ERANGE);
	cr_assert_eq(cvm_map_begin(&it, &c, UINT64_MAX - 10, 512), -ERANGE);
	cr_assert_eq(cvm_map_begin(&it, &c, 0, 1 << 20), 0);
}

Test(layout, stripe_width_rules)
{
	cr_assert_eq(cvm_check_stripe_width(4096), 0);
	cr_assert_eq(cvm_check_stripe_width(256 << 10), 0);
	cr_assert_eq(cvm_check_stripe_width(64 << 20), 0);
	uint64_t bad[] = {0, 512, 2048, 12288, 3 << 20, 128 << 20, 4097};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		cr_assert_eq(cvm_check_stripe_width(bad[i]), -EINVAL, "%llu accepted",
			     (unsigned long long)bad[i]);
		cr_assert(strstr(cvm_last_error(), "power of two"));
	}
}

Test(layout, validate_refuses_inconsistent_sets)
{
	struct cvm_config c = {.nsets = 1, .nluns = 2};
	snprintf(c.name, sizeof c.name, "v");
	c.sets[0] = (struct cvm_stripe_set){.stripe_width = 4096, .lun_bytes = 8192, .nluns = 2};
	cvm_uuid_generate(&c.luns[0].uuid);
	cvm_uuid_generate(&c.luns[1].uuid);
	cr_assert_eq(cvm_config_validate(&c), 0);
	c.sets[0].lun_bytes = 6000; /* not a multiple of the width */
	cr_assert_eq(cvm_config_validate(&c), -EINVAL);
	c.sets[0].lun_bytes = 8192;
	c.sets[0].nluns = 3; /* more LUNs than listed */
	cr_assert_eq(cvm_config_validate(&c), -EINVAL);
	c.sets[0].nluns = 2;
	c.luns[1].uuid = c.luns[0].uuid; /* one LUN twice */
	cr_assert_eq(cvm_config_validate(&c), -EINVAL);
}
