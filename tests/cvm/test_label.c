/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Label and config encodings: round trips, and every damaged byte is caught. */
#include "cvm/internal.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>

static struct cvm_config *sample_config(void)
{
	struct cvm_config *c = calloc(1, sizeof *c);
	c->generation = 7;
	cvm_uuid_generate(&c->vol_uuid);
	snprintf(c->name, sizeof c->name, "oradata");
	c->nsets = 2;
	c->nluns = 3;
	c->sets[0] = (struct cvm_stripe_set){256 << 10, 4 << 20, 0, 2};
	c->sets[1] = (struct cvm_stripe_set){64 << 10, 8 << 20, 2, 1};
	for (int i = 0; i < 3; i++) {
		cvm_uuid_generate(&c->luns[i].uuid);
		c->luns[i].size_bytes = (17ull + (unsigned)i) << 20;
		snprintf(c->luns[i].path, sizeof c->luns[i].path, "/dev/disk/by-id/lun%d", i);
	}
	return c;
}

Test(label, label_round_trip_and_damage)
{
	struct cvm_label l = {.lun_bytes = 1 << 30, .data_offset = CVM_META_BYTES,
			      .generation = 3, .ctime = 1700000000}, back;
	cvm_uuid_generate(&l.lun_uuid);
	cvm_uuid_generate(&l.vol_uuid);
	snprintf(l.vol_name, sizeof l.vol_name, "oradata");
	uint8_t buf[CVM_LABEL_BYTES];
	cvm_label_encode(&l, buf);
	cr_assert_eq(cvm_label_decode(buf, &back), CVM_DECODE_OK);
	cr_assert(cvm_uuid_equal(&back.lun_uuid, &l.lun_uuid));
	cr_assert_str_eq(back.vol_name, "oradata");
	cr_assert_eq(back.generation, 3);
	for (size_t i = 0; i < CVM_LABEL_BYTES; i += 97) {
		buf[i] ^= 0x10;
		/* A hit magic reads as foreign data; the config copies still identify the LUN. */
		cr_assert_eq(cvm_label_decode(buf, &back), i < 8 ? CVM_DECODE_ABSENT : CVM_DECODE_DAMAGED,
			     "byte %zu", i);
		buf[i] ^= 0x10;
	}
	memset(buf, 0, sizeof buf);
	cr_assert_eq(cvm_label_decode(buf, &back), CVM_DECODE_ABSENT);
	memset(buf, 0x5a, sizeof buf); /* someone else's data */
	cr_assert_eq(cvm_label_decode(buf, &back), CVM_DECODE_ABSENT);
}

Test(label, config_round_trip_and_damage)
{
	struct cvm_config *c = sample_config(), *back = malloc(sizeof *back);
	uint8_t *buf = calloc(1, CVM_SLOT_BYTES);
	cvm_uuid on;
	size_t len = cvm_config_encode(c, &c->luns[1].uuid, buf);
	cr_assert_eq(len % 4096, 0);
	cr_assert_eq(cvm_config_decode(buf, back, &on), CVM_DECODE_OK);
	cr_assert(cvm_uuid_equal(&on, &c->luns[1].uuid));
	cr_assert_eq(back->generation, 7);
	cr_assert_eq(back->nsets, 2);
	cr_assert_eq(back->sets[1].stripe_width, 64 << 10);
	cr_assert_str_eq(back->luns[2].path, "/dev/disk/by-id/lun2");
	cr_assert_eq(cvm_config_size(back), cvm_config_size(c));
	uint32_t body;
	memcpy(&body, buf + 12, 4);
	for (size_t i = 0; i < len; i += 13) {
		uint8_t keep = buf[i];
		buf[i] ^= 0x01;
		enum cvm_decode d = cvm_config_decode(buf, back, &on);
		/* Bytes past the checksummed body are padding and may change. */
		if (d == CVM_DECODE_OK) {
			cr_assert_geq(i, body, "byte %zu flipped but decoded", i);
			cr_assert_eq(back->generation, 7);
		}
		buf[i] = keep;
	}
	free(c);
	free(back);
	free(buf);
}

Test(label, config_with_sane_crc_but_bad_layout_is_damaged)
{
	struct cvm_config *c = sample_config(), *back = malloc(sizeof *back);
	uint8_t *buf = calloc(1, CVM_SLOT_BYTES);
	cvm_uuid on;
	c->sets[0].stripe_width = 12288; /* checksummed, but not a valid width */
	cvm_config_encode(c, &c->luns[0].uuid, buf);
	cr_assert_eq(cvm_config_decode(buf, back, &on), CVM_DECODE_DAMAGED);
	free(c);
	free(back);
	free(buf);
}

Test(label, restripe_record_round_trip_and_sanity)
{
	struct cvm_config *c = sample_config(), *back = malloc(sizeof *back);
	uint8_t *buf = calloc(1, CVM_SLOT_BYTES);
	cvm_uuid on;
	c->restripe = (struct cvm_restripe){.target_width = 64 << 10, .target_lun_bytes = 16 << 20,
					    .moves_done = 1234, .staged = 7, .half = 1,
					    .first_set = 0, .set_count = 2};
	cvm_config_encode(c, &c->luns[0].uuid, buf);
	cr_assert_eq(cvm_config_decode(buf, back, &on), CVM_DECODE_OK, "%s", cvm_last_error());
	cr_assert(!memcmp(&back->restripe, &c->restripe, sizeof c->restripe));
	c->restripe.target_lun_bytes = 18 << 20; /* more than the smallest LUN gives */
	cvm_config_encode(c, &c->luns[0].uuid, buf);
	cr_assert_eq(cvm_config_decode(buf, back, &on), CVM_DECODE_DAMAGED);
	/* Set 0 alone: set 1 keeps its place only if the target holds exactly set 0's 8 MiB. */
	c->restripe.set_count = 1;
	c->restripe.target_lun_bytes = 4 << 20;
	cvm_config_encode(c, &c->luns[0].uuid, buf);
	cr_assert_eq(cvm_config_decode(buf, back, &on), CVM_DECODE_OK, "%s", cvm_last_error());
	cr_assert_eq(back->restripe.set_count, 1);
	c->restripe.target_lun_bytes = 8 << 20;
	cvm_config_encode(c, &c->luns[0].uuid, buf);
	cr_assert_eq(cvm_config_decode(buf, back, &on), CVM_DECODE_DAMAGED, "set 1 would move");
	c->restripe = (struct cvm_restripe){.target_width = 64 << 10, .target_lun_bytes = 8 << 20,
					    .first_set = 1, .set_count = 2};
	cvm_config_encode(c, &c->luns[0].uuid, buf);
	cr_assert_eq(cvm_config_decode(buf, back, &on), CVM_DECODE_DAMAGED, "sets past the last");
	c->restripe = (struct cvm_restripe){0}; /* none: the length release 0.1 knows */
	cvm_config_encode(c, &c->luns[0].uuid, buf);
	cr_assert_eq(cvm_config_decode(buf, back, &on), CVM_DECODE_OK);
	cr_assert_eq(back->restripe.target_width, 0);
	free(c);
	free(back);
	free(buf);
}
