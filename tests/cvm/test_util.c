/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "cvm/cvm.h"
#include "cvm/internal.h"

#include <criterion/criterion.h>
#include <errno.h>

Test(util, parse_size_accepts_suffixes)
{
	uint64_t v;
	cr_assert_eq(cvm_parse_size("4096", &v), 0);
	cr_assert_eq(v, 4096);
	cr_assert_eq(cvm_parse_size("256k", &v), 0);
	cr_assert_eq(v, 256 << 10);
	cr_assert_eq(cvm_parse_size("1M", &v), 0);
	cr_assert_eq(v, 1 << 20);
	cr_assert_eq(cvm_parse_size("2GiB", &v), 0);
	cr_assert_eq(v, 2ull << 30);
	cr_assert_eq(cvm_parse_size("3t", &v), 0);
	cr_assert_eq(v, 3ull << 40);
}

Test(util, parse_size_refuses_junk)
{
	uint64_t v;
	const char *bad[] = {"", "k", "-1", "1x", "1kk", "1.5M", "99999999999999999999", "20000000T"};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
		cr_assert_eq(cvm_parse_size(bad[i], &v), -EINVAL, "'%s' was accepted", bad[i]);
}

Test(util, uuid_round_trip)
{
	cvm_uuid a, b;
	char s[CVM_UUID_STR];
	cvm_uuid_generate(&a);
	cvm_uuid_format(&a, s);
	cr_assert_eq(strlen(s), 36);
	cr_assert_eq(cvm_uuid_parse(s, &b), 0);
	cr_assert(cvm_uuid_equal(&a, &b));
	cr_assert_eq(cvm_uuid_parse("not-a-uuid", &b), -EINVAL);
	cr_assert_eq(cvm_uuid_parse("0123456789abcdef0123456789abcdef0123", &b), -EINVAL);
}

Test(util, crc32c_known_vector)
{
	/* The standard check value of CRC-32C. */
	cr_assert_eq(cvm_crc32c(0, "123456789", 9), 0xe3069283u);
	/* Incremental and one-shot agree. */
	uint32_t part = cvm_crc32c(0, "1234", 4);
	cr_assert_eq(cvm_crc32c(part, "56789", 5), 0xe3069283u);
	cr_assert_eq(cvm_crc32c_table(0, "123456789", 9), 0xe3069283u);
}

/* Bit by bit, from the definition: the reference both fast paths are held to. */
static uint32_t crc32c_bitwise(uint32_t crc, const uint8_t *p, size_t len)
{
	crc = ~crc;
	while (len--) {
		crc ^= *p++;
		for (int k = 0; k < 8; k++)
			crc = (crc & 1) ? (crc >> 1) ^ 0x82f63b78u : crc >> 1;
	}
	return ~crc;
}

Test(util, crc32c_paths_agree_at_every_length_and_alignment)
{
	static uint8_t buf[4096 + 64];
	uint64_t x = 0x9e3779b97f4a7c15ull;
	for (size_t i = 0; i < sizeof buf; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		buf[i] = (uint8_t)x;
	}
	for (size_t off = 0; off < 8; off++)
		for (size_t len = 0; len <= 4096 + 17; len += len < 64 ? 1 : 61) {
			uint32_t want = crc32c_bitwise(0x1234u, buf + off, len);
			cr_assert_eq(cvm_crc32c(0x1234u, buf + off, len), want, "off %zu len %zu", off,
				     len);
			cr_assert_eq(cvm_crc32c_table(0x1234u, buf + off, len), want,
				     "off %zu len %zu", off, len);
		}
}
