/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* CRC-32C (Castagnoli), the checksum of every metadata block, sealed at each commit and
 * checked at each read.  With the SSE4.2 instruction where the CPU has it (every x86-64 since
 * 2008): a commit of a few 4 KiB blocks checksums each twice, and the table cost some 6% of
 * cfsd's CPU under eight O_DSYNC appenders; slicing by 8 elsewhere. */
#include "internal.h"

#include <pthread.h>
#include <stdbool.h>
#include <string.h>
#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

static uint32_t table[8][256];
static bool use_sse42;
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

static void build_table(void)
{
#if defined(__x86_64__)
	__builtin_cpu_init(); /* also when called from a constructor of a library */
	use_sse42 = __builtin_cpu_supports("sse4.2");
#endif
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;
		for (int k = 0; k < 8; k++)
			c = (c & 1) ? (c >> 1) ^ 0x82f63b78u : c >> 1;
		table[0][i] = c;
	}
	for (uint32_t i = 0; i < 256; i++)
		for (int t = 1; t < 8; t++)
			table[t][i] = (table[t - 1][i] >> 8) ^ table[0][table[t - 1][i] & 0xff];
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) static uint32_t crc32c_sse42(uint32_t crc, const uint8_t *p,
								size_t len)
{
	uint64_t c = ~crc;
	for (; len >= 8; p += 8, len -= 8) {
		uint64_t v;
		memcpy(&v, p, 8); /* any alignment */
		c = _mm_crc32_u64(c, v);
	}
	uint32_t c32 = (uint32_t)c;
	while (len--)
		c32 = _mm_crc32_u8(c32, *p++);
	return ~c32;
}
#endif

uint32_t cvm_crc32c(uint32_t crc, const void *data, size_t len)
{
	pthread_once(&table_once, build_table);
#if defined(__x86_64__)
	if (use_sse42)
		return crc32c_sse42(crc, data, len);
#endif
	return cvm_crc32c_table(crc, data, len);
}

uint32_t cvm_crc32c_table(uint32_t crc, const void *data, size_t len)
{
	pthread_once(&table_once, build_table);
	const uint8_t *p = data;
	crc = ~crc;
	while (len >= 8) {
		uint32_t lo = crc ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
				     (uint32_t)p[3] << 24);
		crc = table[7][lo & 0xff] ^ table[6][(lo >> 8) & 0xff] ^ table[5][(lo >> 16) & 0xff] ^
		      table[4][lo >> 24] ^ table[3][p[4]] ^ table[2][p[5]] ^ table[1][p[6]] ^
		      table[0][p[7]];
		p += 8;
		len -= 8;
	}
	while (len--)
		crc = (crc >> 8) ^ table[0][(crc ^ *p++) & 0xff];
	return ~crc;
}
