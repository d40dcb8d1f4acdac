/* SPDX-License-Identifier: MIT */
/*
 * Stall points of the test-hook build (tests/libasyncpool-testhooks.la):
 * a test sets ap_test_hook_stall and holds a thread at a named place, so
 * that a race whose window is a few instructions wide happens on every
 * run (tests/test-cache-double-release, tests/test-pool-cache).  Unlike
 * the kill points of freelist.h (AP_TEST_AT), nobody dies here.  In the
 * library itself they compile to nothing.
 */
#ifndef ASYNCPOOL_TEST_STALL_H
#define ASYNCPOOL_TEST_STALL_H

#include <stdatomic.h>
#include <stdint.h>

enum ap_test_stall {
	AP_TS_CACHE_CLAIM,      /* a release into a cache checked the word, before its CAS */
	AP_TS_RELEASE_CLAIM,    /* a release to the freelist checked the word, before its CAS */
	AP_TS_FLUSH_WAITS,      /* a flusher waits for an owner inside its cache */
	AP_TS_OWNER_INSIDE,     /* an owner entered its cache (a slow release) */
	AP_TS_INBOX_SEND,       /* a sender reserved inbox slots, before it writes them */
	AP_TS_ORPHAN_SEEN,      /* a sender saw its owner orphaned, before it locks */
	AP_TS_WAKER_LOOK,       /* the wait fd's thread is about to look at the pool */
	AP_TS_WAITER_LOOKED,    /* a waiter found the pool empty, before its futex wait */
	AP_TS_WAIT_FD_STOP,     /* a destroy is about to stop the wait fd's thread */
	AP_TS_CACHES_FREE,      /* a destroy is about to free the caches and the depot */
	AP_TS_SEND_LOOKED,      /* an owner's send looked at orphan, before its store buffer drains */
	AP_TS_LEAVE_DRAINED,    /* a leaving owner drained its inbox, before its store buffer drains */
	AP_TS_CHAN_WAKE_LOOKED, /* a channel send looked at the wake word, before its store buffer drains */
	AP_TS_RECV_WAKE_LOOKED, /* a recv ring's drainer looked at the refill word, before it lets go */
	AP_TS_RECV_DRAINED,     /* a recv ring's drainer let go and looked at pending, before its
				 * store buffer drains */
	AP_TS_RECV_WAITER_LOOKED, /* a refill waiter (or prep_wait) looked at the ring, before
				   * its futex wait (its SQE) */
	AP_TS_CHAN_WAITER_LOOKED, /* a channel's wait (or prep_wait) announced and looked,
				   * before its store buffer drains */
	AP_TS_CHAN_WAKER_START, /* a channel's wait fd thread starts (a test may arm it) */
};

#ifdef ASYNCPOOL_TEST_HOOKS
extern void (*ap_test_hook_stall)(enum ap_test_stall);
#define AP_TEST_STALL(p) do { if (ap_test_hook_stall) ap_test_hook_stall(p); } while (0)
/*
 * The exported functions that the inline paths of the public header
 * fall back to count their calls here (tests/test-inline-abi).
 */
extern _Atomic uint64_t ap_test_exported_calls;
#define AP_TEST_EXPORTED_CALL() \
	__atomic_fetch_add(&ap_test_exported_calls, 1, __ATOMIC_RELAXED)
#else
#define AP_TEST_STALL(p) do { } while (0)
#define AP_TEST_EXPORTED_CALL() do { } while (0)
#endif

/*
 * x86-TSO's store buffer, emulated for the Dekker pairs of the owner's
 * send and the owner's leave (pool_owner.c, tests/test-owner-tso), of a
 * channel's send and its waiting receiver (channel.c,
 * tests/test-channel-tso) and of a recv ring's drainer and its releasers
 * and refill waiters (uring_recv.c, tests/test-uring-recv-tso): in
 * the test-hook build, a thread that set ap_test_tso_armed holds its
 * AP_TSO_STORE()s (address and value, not written) until its next
 * AP_TSO_FENCE() or AP_TSO_FLUSH(), so that its later loads go ahead of
 * them, as TSO lets them; a stall point between the load and the flush
 * makes the reordering last as long as the test wants.  A held store is
 * not forwarded to its own thread's loads: every flush comes before the
 * thread reads what it holds or takes a lock (whose atomic RMW drains
 * x86's buffer).  Elsewhere they are the atomic store and the seq_cst
 * fence, nothing else.
 */
#ifdef ASYNCPOOL_TEST_HOOKS
extern _Thread_local int ap_test_tso_armed;
void ap_test_tso_hold(void *p, uint64_t v, unsigned size);
void ap_test_tso_flush(void);
#define AP_TSO_STORE(p, v, order) do { \
		if (ap_test_tso_armed) \
			ap_test_tso_hold((void *)(p), (v), sizeof(*(p))); \
		else \
			atomic_store_explicit((p), (v), (order)); \
	} while (0)
#define AP_TSO_FLUSH() do { if (ap_test_tso_armed) ap_test_tso_flush(); } while (0)
/*
 * A waiter's announcement on a wait word (wait_word.h's ap_word_announce,
 * a seq_cst fetch_or), held as a store is: the armed thread gets the
 * value it would sleep on, and the fetch_or is done at its next fence
 * or flush.  Not x86, whose fetch_or is a locked instruction that drains
 * the buffer: C11's model, where the look that follows (no seq_cst
 * access) may miss a store that the other side ordered before its own
 * look at the word unless the fence between them (AP_TSO_FENCE) is there.
 */
uint32_t ap_test_tso_announce(_Atomic uint32_t *word);
#define AP_TSO_ANNOUNCE(word) \
	(ap_test_tso_armed ? ap_test_tso_announce(word) : ap_word_announce(word))
/*
 * A store that is its own barrier when it is seq_cst (x86's xchg, or
 * mov + mfence): held, then the buffer drained with it; of any weaker
 * order (a mutant's release), held as AP_TSO_STORE's, until the next
 * fence or flush.
 */
#define AP_TSO_STORE_SC(p, v, order) do { \
		if (ap_test_tso_armed) { \
			ap_test_tso_hold((void *)(p), (v), sizeof(*(p))); \
			if ((order) == memory_order_seq_cst) \
				ap_test_tso_flush(); \
		} else { \
			atomic_store_explicit((p), (v), (order)); \
		} \
	} while (0)
#else
#define AP_TSO_STORE(p, v, order) atomic_store_explicit((p), (v), (order))
#define AP_TSO_STORE_SC(p, v, order) atomic_store_explicit((p), (v), (order))
#define AP_TSO_ANNOUNCE(word) ap_word_announce(word)
#define AP_TSO_FLUSH() do { } while (0)
#endif
#define AP_TSO_FENCE() do { AP_TSO_FLUSH(); atomic_thread_fence(memory_order_seq_cst); } while (0)

#endif /* ASYNCPOOL_TEST_STALL_H */
