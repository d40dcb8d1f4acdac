/* SPDX-License-Identifier: MIT */
/*
 * A program built against the public headers of an earlier release
 * whose inline fast paths read the thread's cache (tests/compat/VERSION,
 * whose README says what that release's inline code reads and what a
 * library that broke it would do), and run against this tree's library
 * (libasyncpool(7), "The inline fast paths"): the round of
 * compat-cycle.h.  Built once per release, with its headers first on
 * the include path and, from Makefile.am:
 *
 *   COMPAT_MAJOR, COMPAT_MINOR, COMPAT_PATCH  the release's version
 *   COMPAT_LAYOUT  the inline layout version its headers read
 *   COMPAT_SAME    1 if this library still publishes that version (the
 *                  layout grew into what it reserved), 0 if a later one
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <asyncpool.h>
#include <asyncpool/version.h>
#include "tap.h"

#ifdef ASYNCPOOL_INLINE_PATHS
static const int inline_paths = 1;
#else
static const int inline_paths = 0;
#endif

#define N      64
#define BS     64
#define ROUNDS 400

#include "compat.h"
#include "compat-cycle.h"

#define COMPAT_STR_(x) #x
#define COMPAT_STR(x)  COMPAT_STR_(x)

int main(void)
{
	return compat_main(ASYNCPOOL_VERSION_MAJOR == COMPAT_MAJOR && ASYNCPOOL_VERSION_MINOR == COMPAT_MINOR &&
			   ASYNCPOOL_VERSION_PATCH == COMPAT_PATCH && ASYNCPOOL_INLINE_ABI == COMPAT_LAYOUT &&
			   inline_paths,
			   COMPAT_LAYOUT, COMPAT_SAME,
			   COMPAT_STR(COMPAT_MAJOR) "." COMPAT_STR(COMPAT_MINOR) "." COMPAT_STR(COMPAT_PATCH));
}
