/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* On-disk encoding of the LUN label and of the volume config copies.  Little-endian, fixed
 * offsets, a crc32c at the end of each; see man/cvm.8, "ON-DISK FORMAT".
 *
 * Label (4 KiB at offset 0):
 *   0 magic "CVMLABEL"  8 u32 version  12 u32 bytes  16 lun uuid  32 volume uuid
 *  48 name[64]  112 u64 LUN bytes  120 u64 data offset  128 u64 generation  136 u64 ctime
 *  4092 u32 crc32c of bytes 0..4091
 *
 * Config copy (slot A at 256 KiB, slot B at 512 KiB; generation g lives in slot g % 2):
 *   0 magic "CVMCONF1"  8 u32 version  12 u32 encoded bytes  16 u64 generation
 *  24 volume uuid  40 name[64]  104 u64 ctime  112 u64 mtime  120 uuid of the LUN holding
 *  this copy  136 u32 nsets  140 u32 nluns  144 sets (32 bytes each: width, lun bytes,
 *  first lun, nluns, 8 reserved) then LUNs (288 bytes each: uuid, size, 8 reserved,
 *  path[256]); while a restripe is under way, its record (40 bytes: target width, target
 *  LUN bytes, moves done, u32 staged, u32 half, u32 first set, u32 set count); then u32
 *  crc32c of everything before it, padded to 4 KiB with zeros.
 */
#include "internal.h"

#include <endian.h>
#include <string.h>

#define LABEL_MAGIC "CVMLABEL"
#define CONFIG_MAGIC "CVMCONF1"
#define FORMAT_VERSION 1u
#define SET_BYTES 32u
#define LUN_BYTES 288u
#define CONFIG_HEADER 144u
#define RESTRIPE_BYTES 40u /* after the LUNs, only while a restripe is under way */

static void put32(uint8_t *p, uint32_t v) { v = htole32(v); memcpy(p, &v, 4); }
static void put64(uint8_t *p, uint64_t v) { v = htole64(v); memcpy(p, &v, 8); }
static uint32_t get32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return le32toh(v); }
static uint64_t get64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return le64toh(v); }

/* Copy a NUL-terminated field, always terminating the result. */
static void get_string(char *dst, const uint8_t *src, size_t field)
{
	memcpy(dst, src, field);
	dst[field - 1] = '\0';
}

/* Copy a string into a zero-filled field of `field` bytes, leaving at least one NUL. */
static void put_string(uint8_t *dst, const char *src, size_t field)
{
	size_t len = strnlen(src, field - 1);
	memcpy(dst, src, len); /* NOLINT(bugprone-not-null-terminated-result): dst is zero-filled */
}

void cvm_label_encode(const struct cvm_label *l, uint8_t buf[CVM_LABEL_BYTES])
{
	memset(buf, 0, CVM_LABEL_BYTES);
	memcpy(buf, LABEL_MAGIC, 8); /* NOLINT(bugprone-not-null-terminated-result): a magic */
	put32(buf + 8, FORMAT_VERSION);
	put32(buf + 12, CVM_LABEL_BYTES);
	memcpy(buf + 16, l->lun_uuid.b, 16);
	memcpy(buf + 32, l->vol_uuid.b, 16);
	put_string(buf + 48, l->vol_name, 64);
	put64(buf + 112, l->lun_bytes);
	put64(buf + 120, l->data_offset);
	put64(buf + 128, l->generation);
	put64(buf + 136, l->ctime);
	put32(buf + CVM_LABEL_BYTES - 4, cvm_crc32c(0, buf, CVM_LABEL_BYTES - 4));
}

enum cvm_decode cvm_label_decode(const uint8_t buf[CVM_LABEL_BYTES], struct cvm_label *l)
{
	/* Without our magic this is someone else's data (or nothing), not a damaged label; a
	 * member whose magic was hit is still recognised by the config copies beside it. */
	if (memcmp(buf, LABEL_MAGIC, 8) != 0)
		return CVM_DECODE_ABSENT;
	if (get32(buf + CVM_LABEL_BYTES - 4) != cvm_crc32c(0, buf, CVM_LABEL_BYTES - 4) ||
	    get32(buf + 8) != FORMAT_VERSION || get32(buf + 12) != CVM_LABEL_BYTES)
		return CVM_DECODE_DAMAGED;
	memcpy(l->lun_uuid.b, buf + 16, 16);
	memcpy(l->vol_uuid.b, buf + 32, 16);
	get_string(l->vol_name, buf + 48, 64);
	l->lun_bytes = get64(buf + 112);
	l->data_offset = get64(buf + 120);
	l->generation = get64(buf + 128);
	l->ctime = get64(buf + 136);
	if (l->data_offset != CVM_META_BYTES)
		return CVM_DECODE_DAMAGED;
	return CVM_DECODE_OK;
}

size_t cvm_config_encode(const struct cvm_config *c, const cvm_uuid *copy_on,
			 uint8_t buf[CVM_SLOT_BYTES])
{
	size_t body = CONFIG_HEADER + c->nsets * SET_BYTES + c->nluns * LUN_BYTES +
		      (c->restripe.target_width ? RESTRIPE_BYTES : 0);
	size_t total = (body + 4 + 4095) & ~(size_t)4095;
	memset(buf, 0, total);
	memcpy(buf, CONFIG_MAGIC, 8); /* NOLINT(bugprone-not-null-terminated-result): a magic */
	put32(buf + 8, FORMAT_VERSION);
	put32(buf + 12, (uint32_t)(body + 4));
	put64(buf + 16, c->generation);
	memcpy(buf + 24, c->vol_uuid.b, 16);
	put_string(buf + 40, c->name, 64);
	put64(buf + 104, c->ctime);
	put64(buf + 112, c->mtime);
	memcpy(buf + 120, copy_on->b, 16);
	put32(buf + 136, c->nsets);
	put32(buf + 140, c->nluns);
	uint8_t *p = buf + CONFIG_HEADER;
	for (uint32_t i = 0; i < c->nsets; i++, p += SET_BYTES) {
		put64(p, c->sets[i].stripe_width);
		put64(p + 8, c->sets[i].lun_bytes);
		put32(p + 16, c->sets[i].first_lun);
		put32(p + 20, c->sets[i].nluns);
	}
	for (uint32_t i = 0; i < c->nluns; i++, p += LUN_BYTES) {
		memcpy(p, c->luns[i].uuid.b, 16);
		put64(p + 16, c->luns[i].size_bytes);
		put_string(p + 32, c->luns[i].path, CVM_PATH_KEEP);
	}
	if (c->restripe.target_width) {
		put64(p, c->restripe.target_width);
		put64(p + 8, c->restripe.target_lun_bytes);
		put64(p + 16, c->restripe.moves_done);
		put32(p + 24, c->restripe.staged);
		put32(p + 28, c->restripe.half);
		put32(p + 32, c->restripe.first_set);
		put32(p + 36, c->restripe.set_count);
		p += RESTRIPE_BYTES;
	}
	put32(p, cvm_crc32c(0, buf, body));
	return total;
}

enum cvm_decode cvm_config_decode(const uint8_t buf[CVM_SLOT_BYTES], struct cvm_config *c,
				  cvm_uuid *copy_on)
{
	if (memcmp(buf, CONFIG_MAGIC, 8) != 0)
		return CVM_DECODE_ABSENT;
	uint32_t bytes = get32(buf + 12);
	if (get32(buf + 8) != FORMAT_VERSION || bytes < CONFIG_HEADER + 4 || bytes > CVM_SLOT_BYTES)
		return CVM_DECODE_DAMAGED;
	if (get32(buf + bytes - 4) != cvm_crc32c(0, buf, bytes - 4))
		return CVM_DECODE_DAMAGED;
	memset(c, 0, sizeof *c);
	c->generation = get64(buf + 16);
	memcpy(c->vol_uuid.b, buf + 24, 16);
	get_string(c->name, buf + 40, 64);
	c->ctime = get64(buf + 104);
	c->mtime = get64(buf + 112);
	memcpy(copy_on->b, buf + 120, 16);
	c->nsets = get32(buf + 136);
	c->nluns = get32(buf + 140);
	if (c->nsets > CVM_MAX_SETS || c->nluns > CVM_MAX_LUNS)
		return CVM_DECODE_DAMAGED;
	/* Release 0.1 knows only the first length: it takes a config with a restripe section
	 * for damaged, and so never uses a volume in mid-restripe. */
	size_t fixed = CONFIG_HEADER + c->nsets * SET_BYTES + c->nluns * LUN_BYTES + 4;
	if (bytes != fixed && bytes != fixed + RESTRIPE_BYTES)
		return CVM_DECODE_DAMAGED;
	const uint8_t *p = buf + CONFIG_HEADER;
	for (uint32_t i = 0; i < c->nsets; i++, p += SET_BYTES) {
		c->sets[i].stripe_width = get64(p);
		c->sets[i].lun_bytes = get64(p + 8);
		c->sets[i].first_lun = get32(p + 16);
		c->sets[i].nluns = get32(p + 20);
	}
	for (uint32_t i = 0; i < c->nluns; i++, p += LUN_BYTES) {
		memcpy(c->luns[i].uuid.b, p, 16);
		c->luns[i].size_bytes = get64(p + 16);
		get_string(c->luns[i].path, p + 32, CVM_PATH_KEEP);
	}
	if (bytes == fixed + RESTRIPE_BYTES) {
		c->restripe.target_width = get64(p);
		c->restripe.target_lun_bytes = get64(p + 8);
		c->restripe.moves_done = get64(p + 16);
		c->restripe.staged = get32(p + 24);
		c->restripe.half = get32(p + 28);
		c->restripe.first_set = get32(p + 32);
		c->restripe.set_count = get32(p + 36);
		if (!c->restripe.target_width)
			return CVM_DECODE_DAMAGED;
	}
	/* A checksummed config that does not describe a sane layout is still damaged. */
	if (cvm_config_validate(c))
		return CVM_DECODE_DAMAGED;
	return CVM_DECODE_OK;
}
