/* SPDX-License-Identifier: MIT */
/*
 * A program built against the 1.5.0 public headers (tests/compat/1.5.0,
 * see its README) and run against this tree's library, whose caches have
 * a later inline layout (libasyncpool(7), "The inline fast paths"): the
 * 1.5.0 inline code compares the version a cache publishes with its own
 * (2), finds another, and calls the library instead of reading fields
 * that changed.  Leases and tokens, one and bulk, on local pools with and
 * without caches, from this thread and handed to another, and on a
 * shared pool over raw memory: every release accepted, a stale token and
 * a stale copy of a lease refused and counted exactly, the pool full
 * and sound at the end.  A library that changed the layout and kept
 * publishing version 2 fails here: the old inline code would read the
 * cache's tokens as an array of indices and the next word as another
 * of generations.
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

int main(void)
{
	return compat_main(ASYNCPOOL_VERSION_MAJOR == 1 && ASYNCPOOL_VERSION_MINOR == 5 &&
			   ASYNCPOOL_VERSION_PATCH == 0 && ASYNCPOOL_INLINE_ABI == 2 &&
			   inline_paths,
			   2, 0, "1.5.0");
}
