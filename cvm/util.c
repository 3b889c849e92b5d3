/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Small shared pieces of libcvm: per-thread error text, uuids, sizes. */
#include "internal.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

static _Thread_local char last_error[1024];

const char *cvm_last_error(void)
{
	return last_error;
}

void cvm_set_error(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(last_error, sizeof last_error, fmt, ap);
	va_end(ap);
}

void cvm_uuid_generate(cvm_uuid *u)
{
	size_t got = 0;
	while (got < sizeof u->b) {
		ssize_t n = getrandom(u->b + got, sizeof u->b - got, 0);
		if (n > 0)
			got += (size_t)n;
	}
	u->b[6] = (uint8_t)((u->b[6] & 0x0f) | 0x40); /* RFC 4122 version 4 */
	u->b[8] = (uint8_t)((u->b[8] & 0x3f) | 0x80);
}

void cvm_uuid_format(const cvm_uuid *u, char out[CVM_UUID_STR])
{
	static const char hex[] = "0123456789abcdef";
	char *p = out;
	for (int i = 0; i < CVM_UUID_BYTES; i++) {
		if (i == 4 || i == 6 || i == 8 || i == 10)
			*p++ = '-';
		*p++ = hex[u->b[i] >> 4];
		*p++ = hex[u->b[i] & 15];
	}
	*p = '\0';
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c = (char)tolower((unsigned char)c);
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

int cvm_uuid_parse(const char *s, cvm_uuid *u)
{
	if (strlen(s) != CVM_UUID_STR - 1)
		return -EINVAL;
	int byte = 0;
	for (int i = 0; i < CVM_UUID_STR - 1;) {
		if (i == 8 || i == 13 || i == 18 || i == 23) {
			if (s[i++] != '-')
				return -EINVAL;
			continue;
		}
		int hi = hexval(s[i]), lo = hexval(s[i + 1]);
		if (hi < 0 || lo < 0)
			return -EINVAL;
		u->b[byte++] = (uint8_t)(hi << 4 | lo);
		i += 2;
	}
	return 0;
}

bool cvm_uuid_equal(const cvm_uuid *a, const cvm_uuid *b)
{
	return memcmp(a->b, b->b, CVM_UUID_BYTES) == 0;
}

bool cvm_uuid_is_zero(const cvm_uuid *u)
{
	static const cvm_uuid zero;
	return cvm_uuid_equal(u, &zero);
}

int cvm_parse_size(const char *s, uint64_t *out)
{
	if (!s || !isdigit((unsigned char)*s))
		return -EINVAL;
	errno = 0;
	char *end;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno)
		return -EINVAL;
	unsigned shift = 0;
	switch (tolower((unsigned char)*end)) {
	case '\0': break;
	case 'k': shift = 10; break;
	case 'm': shift = 20; break;
	case 'g': shift = 30; break;
	case 't': shift = 40; break;
	default: return -EINVAL;
	}
	if (*end) {
		end++;
		/* accept "k", "kb", "kib" */
		if (tolower((unsigned char)*end) == 'i')
			end++;
		if (tolower((unsigned char)*end) == 'b')
			end++;
		if (*end)
			return -EINVAL;
	}
	if (shift && v > (UINT64_MAX >> shift))
		return -EINVAL;
	*out = (uint64_t)v << shift;
	return 0;
}

void cvm_format_size(uint64_t bytes, char *out, size_t outlen)
{
	static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
	double v = (double)bytes;
	unsigned u = 0;
	while (v >= 1024 && u + 1 < sizeof units / sizeof units[0]) {
		v /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(out, outlen, "%" PRIu64 " B", bytes);
	else
		snprintf(out, outlen, "%.1f %s", v, units[u]);
}
