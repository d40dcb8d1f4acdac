/* SPDX-License-Identifier: MIT */
/*
 * Waiting for a buffer: the protocol on the wait word of the head line
 * (pool_layout.h), proved in tests/model/wait.pml.  Below every file
 * that releases (freelist.c, pool_owner.c) or waits (pool_wait.c, and
 * uring_recv.c for its provided-buffer ring).
 *
 * The word is bit 0 "someone waits" and a sequence in bits 1-31.
 *
 *   waiter                          releaser (ap_fl_push_chain)
 *   v = fetch_or(wait, 1) | 1       CAS head: the buffers are linked in
 *   look at the list: a buffer? --  w = load(wait)         <- the one extra load
 *     take it, done                 if (w & 1)
 *   futex_wait(wait, v)                 CAS(wait, w, w + 1)   clear bit 0, bump
 *                                       futex_wake(wait, all)
 *
 * Both sides' first two steps are sequentially consistent (on x86 the
 * fetch_or and the CAS are locked instructions and the loads plain), so
 * either the releaser sees bit 0 or the waiter sees the buffer.  A
 * releaser that sees bit 0 changes the word before it wakes, so a waiter
 * that has not reached futex_wait yet finds a value other than v there
 * and does not sleep.  Wake-all: every waiter looks again, so a waiter
 * that times out or is interrupted as it is woken takes nothing from the
 * others; the ones that find nothing set bit 0 again and sleep.  A
 * waiter that dies leaves bit 0 set: the next release clears it, at the
 * price of one futex wake system call.
 *
 * The futex is private (FUTEX_PRIVATE_FLAG) for a local pool, whose
 * layout no other process maps, and shared for a shared pool.
 */
#ifndef ASYNCPOOL_WAIT_WORD_H
#define ASYNCPOOL_WAIT_WORD_H

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "pool_layout.h"

static inline void ap_futex_wake_all(_Atomic uint32_t *word, bool shared)
{
	(void)syscall(SYS_futex, (uint32_t *)word,
		      shared ? FUTEX_WAKE : FUTEX_WAKE | FUTEX_PRIVATE_FLAG, INT_MAX, NULL, NULL, 0);
}

/*
 * Sleep while *word is val, until the CLOCK_MONOTONIC deadline (NULL: no
 * limit; FUTEX_WAIT_BITSET takes an absolute time, so that a spurious
 * wake-up does not extend the wait).  0 (woken, or the value changed),
 * -ETIMEDOUT or -EINTR.
 */
static inline int ap_futex_wait(_Atomic uint32_t *word, uint32_t val,
				const struct timespec *deadline, bool shared)
{
	int op = FUTEX_WAIT_BITSET | (shared ? 0 : FUTEX_PRIVATE_FLAG);

	if (syscall(SYS_futex, (uint32_t *)word, op, val, deadline, NULL,
		    FUTEX_BITSET_MATCH_ANY) == 0)
		return 0;
	if (errno == ETIMEDOUT || errno == EINTR)
		return -errno;
	return 0;       /* EAGAIN: the word changed; look again */
}

/* Announce a waiter on a wait word: the value to sleep on, bit 0 set. */
static inline uint32_t ap_word_announce(_Atomic uint32_t *word)
{
	return atomic_fetch_or_explicit(word, AP_WAIT_WAITERS, memory_order_seq_cst) |
	       AP_WAIT_WAITERS;
}

static inline uint32_t ap_wait_announce(struct ap_pool_head *line)
{
	return ap_word_announce(&line->wait);
}

/* The wake itself, out of line: a release that finds no waiter (the
 * common case) then needs no stack frame for the system call. */
static __attribute__((noinline, cold, unused)) void ap_word_wake_waiters(_Atomic uint32_t *word,
									uint32_t w, bool shared)
{
	(void)atomic_compare_exchange_strong_explicit(word, &w, w + 1, memory_order_seq_cst,
						      memory_order_relaxed);
	ap_futex_wake_all(word, shared);
}

/* After publishing what waiters wait for: wake them if there are any. */
static inline void ap_word_wake(_Atomic uint32_t *word, bool shared)
{
	uint32_t w = atomic_load_explicit(word, memory_order_seq_cst);

	if (__builtin_expect(w & AP_WAIT_WAITERS, 0))
		ap_word_wake_waiters(word, w, shared);
}

/* now + ns on CLOCK_MONOTONIC. */
static inline void ap_deadline_after(int64_t ns, struct timespec *d)
{
	clock_gettime(CLOCK_MONOTONIC, d);
	d->tv_sec += ns / 1000000000;
	d->tv_nsec += ns % 1000000000;
	if (d->tv_nsec >= 1000000000) {
		d->tv_sec++;
		d->tv_nsec -= 1000000000;
	}
}

static inline bool ap_deadline_passed(const struct timespec *d)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return now.tv_sec > d->tv_sec || (now.tv_sec == d->tv_sec && now.tv_nsec >= d->tv_nsec);
}

/* CLOCK_MONOTONIC_COARSE in ns, for rate limits: a vDSO read of a few
 * ns, up to a jiffy (1 to 10 ms) old. */
static inline uint64_t ap_coarse_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/*
 * After a CAS of the head that linked buffers in: wake the waiters if
 * there are any.  One load when there are none.
 */
static inline void ap_wait_wake(struct ap_pool_head *line, bool shared)
{
	ap_word_wake(&line->wait, shared);
}

#endif /* ASYNCPOOL_WAIT_WORD_H */
