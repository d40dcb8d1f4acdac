/* SPDX-License-Identifier: MIT */
/* The byte stream of the io_uring demos: cheap to make and to check. */
#ifndef ASYNCPOOL_TOOLS_PATTERN_H
#define ASYNCPOOL_TOOLS_PATTERN_H

#include <stddef.h>
#include <stdint.h>

/* Fill d[0..len) with the stream at pos (pos and len multiples of 8). */
void pattern_fill(unsigned char *d, uint64_t pos, size_t len);

/* The bytes of d[0..len) that differ from the stream at pos (any pos, len). */
size_t pattern_check(const unsigned char *d, uint64_t pos, size_t len);

#endif
