/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Volume layout: a concatenation of stripe sets, and the one function that maps a volume range
 * onto LUN pieces.  Both cfsd and libodm submit the pieces this produces. */
#include "internal.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static uint64_t set_bytes(const struct cvm_stripe_set *s)
{
	return s->lun_bytes * s->nluns;
}

uint64_t cvm_config_size(const struct cvm_config *cfg)
{
	uint64_t total = 0;
	for (uint32_t i = 0; i < cfg->nsets; i++)
		total += set_bytes(&cfg->sets[i]);
	return total;
}

const char *cvm_describe_sets(const struct cvm_config *cfg, char *buf, size_t len)
{
	char w[32];
	if (cfg->nsets == 1) {
		cvm_format_size(cfg->sets[0].stripe_width, w, sizeof w);
		snprintf(buf, len, "one stripe set of width %s over %u LUNs", w, cfg->nluns);
		return buf;
	}
	size_t at = (size_t)snprintf(buf, len, "%u stripe sets:", cfg->nsets);
	for (uint32_t i = 0; i < cfg->nsets && at < len; i++) {
		cvm_format_size(cfg->sets[i].stripe_width, w, sizeof w);
		at += (size_t)snprintf(buf + at, len - at, "%s width %s over %u LUNs", i ? "," : "",
				       w, cfg->sets[i].nluns);
	}
	return buf;
}

int cvm_check_stripe_width(uint64_t width)
{
	if (width < CVM_MIN_STRIPE_WIDTH || width > CVM_MAX_STRIPE_WIDTH ||
	    (width & (width - 1)) != 0) {
		cvm_set_error("stripe width %" PRIu64 " is not a power of two multiple of 4 KiB "
			      "between 4k and 64M; use e.g. --stripe-width 256k", width);
		return -EINVAL;
	}
	return 0;
}

int cvm_check_name(const char *name)
{
	size_t len = strlen(name);
	if (len == 0 || len > CVM_NAME_MAX) {
		cvm_set_error("volume name '%s' must have 1 to %d characters", name, CVM_NAME_MAX);
		return -EINVAL;
	}
	if (name[0] == '-' || name[0] == '.') {
		cvm_set_error("volume name '%s' must not start with '-' or '.'", name);
		return -EINVAL;
	}
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)name[i];
		if (!isalnum(c) && c != '_' && c != '-' && c != '.') {
			cvm_set_error("volume name '%s' may hold only letters, digits, '_', '-' and '.'",
				      name);
			return -EINVAL;
		}
	}
	return 0;
}

uint64_t cvm_sets_held(const struct cvm_config *cfg, uint32_t first, uint32_t count,
		       uint32_t *nluns, uint64_t *smallest)
{
	uint64_t held = 0;
	*nluns = 0;
	*smallest = UINT64_MAX;
	for (uint32_t s = first; s < first + count; s++) {
		const struct cvm_stripe_set *set = &cfg->sets[s];
		held += set_bytes(set);
		*nluns += set->nluns;
		for (uint32_t i = set->first_lun; i < set->first_lun + set->nluns; i++) {
			uint64_t size = cfg->luns[i].size_bytes;
			uint64_t data = size > CVM_META_BYTES ? size - CVM_META_BYTES : 0;
			if (data < *smallest)
				*smallest = data;
		}
	}
	return held;
}

/* The target of a restripe under way holds its stripe sets on their LUNs, and the sets
 * after them keep their places. */
static int validate_restripe(const struct cvm_config *cfg)
{
	const struct cvm_restripe *r = &cfg->restripe;
	bool fits = r->target_lun_bytes && r->target_lun_bytes % r->target_width == 0 &&
		    r->half <= 1 && r->set_count && r->first_set < cfg->nsets &&
		    r->set_count <= cfg->nsets - r->first_set;
	if (fits) {
		uint32_t nluns;
		uint64_t smallest, held = cvm_sets_held(cfg, r->first_set, r->set_count, &nluns,
							&smallest);
		uint64_t target = r->target_lun_bytes * nluns;
		fits = smallest >= r->target_lun_bytes &&
		       (r->first_set + r->set_count == cfg->nsets ? target >= held : target == held);
	}
	if (cvm_check_stripe_width(r->target_width) || !fits) {
		cvm_set_error("the restripe record of the config is inconsistent");
		return -EINVAL;
	}
	return 0;
}

/* Checks everything the mapping relies on, so a damaged-but-checksummed or hand-built config
 * can never make cvm_map_next divide by zero or index past the LUN table. */
int cvm_config_validate(const struct cvm_config *cfg)
{
	if (cfg->nsets == 0 || cfg->nsets > CVM_MAX_SETS || cfg->nluns == 0 ||
	    cfg->nluns > CVM_MAX_LUNS) {
		cvm_set_error("config has %u stripe sets and %u LUNs", cfg->nsets, cfg->nluns);
		return -EINVAL;
	}
	if (memchr(cfg->name, '\0', sizeof cfg->name) == NULL || cvm_check_name(cfg->name))
		return -EINVAL;
	uint32_t next_lun = 0;
	for (uint32_t i = 0; i < cfg->nsets; i++) {
		const struct cvm_stripe_set *s = &cfg->sets[i];
		if (cvm_check_stripe_width(s->stripe_width))
			return -EINVAL;
		if (s->first_lun != next_lun || s->nluns == 0 || s->nluns > cfg->nluns - next_lun ||
		    s->lun_bytes == 0 || s->lun_bytes % s->stripe_width) {
			cvm_set_error("stripe set %u of the config is inconsistent", i);
			return -EINVAL;
		}
		next_lun += s->nluns;
	}
	if (next_lun != cfg->nluns) {
		cvm_set_error("config lists %u LUNs but its stripe sets use %u", cfg->nluns,
			      next_lun);
		return -EINVAL;
	}
	if (cfg->restripe.target_width && validate_restripe(cfg))
		return -EINVAL;
	for (uint32_t i = 0; i < cfg->nluns; i++)
		for (uint32_t j = i + 1; j < cfg->nluns; j++)
			if (cvm_uuid_equal(&cfg->luns[i].uuid, &cfg->luns[j].uuid)) {
				cvm_set_error("config lists LUN %u twice", i);
				return -EINVAL;
			}
	return 0;
}

int cvm_map_begin(struct cvm_map_iter *it, const struct cvm_config *cfg, uint64_t offset,
		  uint64_t len)
{
	uint64_t size = cvm_config_size(cfg);
	if (offset > size || len > size - offset)
		return -ERANGE;
	*it = (struct cvm_map_iter){.cfg = cfg, .pos = offset, .end = offset + len,
				    .start = offset};
	while (it->set < cfg->nsets && it->pos >= it->set_start + set_bytes(&cfg->sets[it->set])) {
		it->set_start += set_bytes(&cfg->sets[it->set]);
		it->set++;
	}
	return 0;
}

bool cvm_map_next(struct cvm_map_iter *it, struct cvm_piece *piece)
{
	if (it->pos >= it->end)
		return false;
	const struct cvm_stripe_set *s = &it->cfg->sets[it->set];
	uint64_t set_end = it->set_start + set_bytes(s);
	uint64_t local = it->pos - it->set_start;
	uint64_t stripe = local / s->stripe_width;
	uint64_t within = local % s->stripe_width;
	uint64_t row = stripe / s->nluns;
	uint64_t limit = it->end < set_end ? it->end : set_end;
	/* A one-LUN set is contiguous on its LUN: no need to cut it at stripe boundaries. */
	uint64_t len = s->nluns == 1 ? limit - it->pos : s->stripe_width - within;
	if (len > limit - it->pos)
		len = limit - it->pos;

	piece->lun = s->first_lun + (uint32_t)(stripe % s->nluns);
	piece->lun_offset = row * s->stripe_width + within;
	piece->dev_offset = CVM_META_BYTES + piece->lun_offset;
	piece->len = len;
	piece->buf_offset = it->pos - it->start;

	it->pos += len;
	if (it->pos == set_end) {
		it->set_start = set_end;
		it->set++;
	}
	return true;
}
