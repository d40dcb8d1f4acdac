/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <string.h>

#include "pattern.h"

/* The 8-byte word at stream offset 8w. */
static inline uint64_t word_at(uint64_t w)
{
	return (w + 1) * 0x9e3779b97f4a7c15ull;
}

void pattern_fill(unsigned char *d, uint64_t pos, size_t len)
{
	for (size_t k = 0; k < len; k += 8) {
		uint64_t v = word_at((pos + k) / 8);

		memcpy(d + k, &v, 8);
	}
}

size_t pattern_check(const unsigned char *d, uint64_t pos, size_t len)
{
	size_t bad = 0, k = 0;

	for (; k < len && (pos + k) % 8; k++) {
		uint64_t v = word_at((pos + k) / 8);

		bad += d[k] != ((const unsigned char *)&v)[(pos + k) % 8];
	}
	for (; k + 8 <= len; k += 8) {
		uint64_t v;

		memcpy(&v, d + k, 8);
		if (v != word_at((pos + k) / 8))
			bad += 8;
	}
	for (; k < len; k++) {
		uint64_t v = word_at((pos + k) / 8);

		bad += d[k] != ((const unsigned char *)&v)[(pos + k) % 8];
	}
	return bad;
}
