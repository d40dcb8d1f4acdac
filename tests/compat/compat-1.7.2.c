/* SPDX-License-Identifier: MIT */
/*
 * A program built against the 1.7.2 public headers (tests/compat/1.7.2,
 * see its README) and run against this tree's library, which publishes
 * the same inline layout, version 3, grown into what 1.7.2 had reserved
 * (libasyncpool(7), "The inline fast paths"): the 1.7.2 inline code
 * reads the fields it knows, ignores the outboxes, and leaves the release
 * of another thread's buffer to the library, which gathers it into the
 * same outboxes that this tree's inline code does.  Leases and tokens,
 * one and bulk, on local pools with and without caches, from this thread
 * and handed to another, and on a shared pool over raw memory: every
 * release accepted, a stale token and a stale copy of a lease refused
 * and counted exactly, the pool full and sound at the end.  A library
 * that changed a field 1.7.2 reads and kept publishing version 3 fails
 * here.
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
	return compat_main(ASYNCPOOL_VERSION_MAJOR == 1 && ASYNCPOOL_VERSION_MINOR == 7 &&
			   ASYNCPOOL_VERSION_PATCH == 2 && ASYNCPOOL_INLINE_ABI == 3 &&
			   inline_paths,
			   3, 1, "1.7.2");
}
