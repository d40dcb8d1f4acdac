/* SPDX-License-Identifier: MIT */
/*
 * Waiters added to the stress tests (issue 12): three threads that take
 * their buffers with asyncpool_acquire_wait() while the test's other
 * workers run, holding several leases at once so that a small pool runs
 * out and they really sleep:
 *   0: hold0 at a time, no timeout;
 *   1: hold1 at a time, waiter_long_ns(): a failure bound, not a timed
 *      assertion: 60 s scaled with the stress size as the watchdog is
 *      (tests/tap.h), so long that one -ETIMEDOUT there is a lost
 *      wake-up, not a slow machine;
 *   2: one at a time, WAITER_SHORT_NS: times out often, and retries.
 * The caller holds the whole pool when it starts them; waiters_start()
 * returns once each has found it empty, so each waits at least once.
 * tests/waiters.c, in libtestutil.
 */
#ifndef ASYNCPOOL_TEST_WAITERS_H
#define ASYNCPOOL_TEST_WAITERS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <asyncpool.h>
#include "tap.h"

#define WAITERS 3
#define WAITER_MAX_HOLD 64
#define WAITER_LONG_S 60
#define WAITER_SHORT_NS 50000ll
#define WAITERS_TESTS 4         /* the TAP lines of waiters_assert() */

struct waiter {
	pthread_t thread;
	struct asyncpool *pool;
	unsigned long rounds;   /* rounds of: take hold leases, check, release */
	unsigned hold;          /* leases held at once */
	int64_t timeout_ns;     /* of each asyncpool_acquire_wait(); < 0: none */
	uint64_t tag;           /* written into each buffer held */
	atomic_int *saw_empty;  /* incremented the first time the pool is empty */
	/* results */
	unsigned long leases;   /* leases taken */
	unsigned long waits;    /* takes that found the pool empty and waited */
	unsigned long timeouts; /* -ETIMEDOUT (retried) */
	unsigned long wrong;    /* a buffer changed while this waiter held it */
	unsigned long errors;   /* any other result */
	int first_error;
};

struct waiters {
	struct waiter w[WAITERS];
	atomic_int saw_empty;
	unsigned long wants;    /* leases the waiters will take */
	/* summed by waiters_finish() */
	unsigned long leases, wrong, errors;
	int first_error;
};

/* The bound of waiter 1's waits (above), in ns. */
static inline int64_t waiter_long_ns(void)
{
	return (int64_t)tap_watchdog_bound(WAITER_LONG_S) * 1000000000ll;
}

/* Start them on pool (held whole by the caller); rounds scale with the
 * stress iterations.  Returns once each has found the pool empty. */
void waiters_start(struct waiters *ws, struct asyncpool *pool, unsigned hold0, unsigned hold1,
		   unsigned long iterations);

/* Join them, print their counts (diag) and sum them. */
void waiters_finish(struct waiters *ws);

/* What every stress test asserts about its waiters: WAITERS_TESTS lines. */
static inline void waiters_assert(const struct waiters *ws)
{
	is_int(ws->leases, ws->wants, "every waiter got every buffer it waited for (%lu)",
	       ws->wants);
	is_int(ws->w[0].timeouts + ws->w[1].timeouts, 0,
	       "no -ETIMEDOUT without a timeout or with the %u s bound: no lost wake-up",
	       tap_watchdog_bound(WAITER_LONG_S));
	is_int(ws->errors, 0, "no other waiter error (first: %d)", ws->first_error);
	is_int(ws->wrong, 0, "no buffer a waiter held changed under it");
}

#endif
