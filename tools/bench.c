/* SPDX-License-Identifier: MIT */
/*
 * asyncpool bench: acquire+release pairs per second, over repetitions,
 * with and without per-thread caches, beside a pthread-mutex freelist
 * (mutex-baseline) and two uncontended CAS on a private word
 * (cas2-baseline), all in the same run; handoff-queue-baseline is the
 * hand-off queue alone, passing lease-sized values without a pool.
 *
 * ns_per_op is the wall time of one acquire+release pair as one thread
 * sees it (for bulk32: per buffer; for handoff: per lease handed over);
 * mops_per_s is the total pairs per second of all threads, in millions.
 * Medians over the repetitions, with min and max.
 *
 * --sweep measures the cost per pair from 64 to 16M buffers after the
 * freelist has been put in a random order.
 */
#include "config.h"

#include <errno.h>
#include <fnmatch.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <asyncpool.h>
#include "tool.h"

#define BENCH_CACHE 256u        /* per-thread cache of the -cached cases */
#define BULK 32u
#define BENCH_RECLAIM_ROUNDS 20u /* kills of the reclaim-latency case */

/* ---- the mutex baseline: an index stack under one pthread mutex ---- */
struct mutex_pool {
	pthread_mutex_t lock;
	uint32_t *stack;
	uint32_t top;
};

static struct mutex_pool *mutex_pool_new(uint32_t n)
{
	struct mutex_pool *m = calloc(1, sizeof(*m));

	if (!m)
		return NULL;
	m->stack = malloc(sizeof(uint32_t) * n);
	if (!m->stack) {
		free(m);
		return NULL;
	}
	for (uint32_t i = 0; i < n; i++)
		m->stack[i] = i;
	m->top = n;
	pthread_mutex_init(&m->lock, NULL);
	return m;
}

static int mutex_pool_get(struct mutex_pool *m, uint32_t *idx)
{
	int rc = -ENOBUFS;

	pthread_mutex_lock(&m->lock);
	if (m->top) {
		*idx = m->stack[--m->top];
		rc = 0;
	}
	pthread_mutex_unlock(&m->lock);
	return rc;
}

static void mutex_pool_put(struct mutex_pool *m, uint32_t idx)
{
	pthread_mutex_lock(&m->lock);
	m->stack[m->top++] = idx;
	pthread_mutex_unlock(&m->lock);
}

static void mutex_pool_free(struct mutex_pool *m)
{
	pthread_mutex_destroy(&m->lock);
	free(m->stack);
	free(m);
}

/*
 * ---- a single-producer single-consumer ring of leases, or of tokens ----
 * Each side keeps its position private and publishes it every
 * RING_BATCH entries, or before it waits, so that the two index lines
 * cross between the cores once per batch rather than once per lease.
 * A ring carries either leases (slot) or tokens (token, 8 bytes each,
 * packed as the peers harness packs DPDK's pointers), never both.
 */
#define RING_SIZE 256u          /* a power of two */
#define RING_BATCH 16u

struct spsc {
	_Alignas(64) _Atomic uint32_t head;     /* published by the producer */
	uint32_t head_local, tail_cache;        /* the producer's */
	_Alignas(64) _Atomic uint32_t tail;     /* published by the consumer */
	uint32_t tail_local, head_cache;        /* the consumer's */
	_Alignas(64) union {
		struct asyncpool_lease slot[RING_SIZE];
		uint64_t token[RING_SIZE];
	};
};

static void spsc_publish_head(struct spsc *q)
{
	atomic_store_explicit(&q->head, q->head_local, memory_order_release);
}

/* The producer's next slot, or -1 if the ring is full; spsc_pushed() after filling it. */
static int spsc_slot_free(struct spsc *q)
{
	uint32_t h = q->head_local;

	if (h - q->tail_cache == RING_SIZE) {
		spsc_publish_head(q);
		q->tail_cache = atomic_load_explicit(&q->tail, memory_order_acquire);
		if (h - q->tail_cache == RING_SIZE)
			return -1;
	}
	return (int)(h & (RING_SIZE - 1));
}

static void spsc_pushed(struct spsc *q)
{
	if (++q->head_local % RING_BATCH == 0)
		spsc_publish_head(q);
}

/* The consumer's next slot, or -1 if the ring is empty; spsc_popped() after reading it. */
static int spsc_slot_full(struct spsc *q)
{
	uint32_t t = q->tail_local;

	if (t == q->head_cache) {
		atomic_store_explicit(&q->tail, t, memory_order_release);
		q->head_cache = atomic_load_explicit(&q->head, memory_order_acquire);
		if (t == q->head_cache)
			return -1;
	}
	return (int)(t & (RING_SIZE - 1));
}

static void spsc_popped(struct spsc *q)
{
	if (++q->tail_local % RING_BATCH == 0)
		atomic_store_explicit(&q->tail, q->tail_local, memory_order_release);
}

static bool spsc_push(struct spsc *q, const struct asyncpool_lease *l)
{
	int i = spsc_slot_free(q);

	if (i < 0)
		return false;
	q->slot[i] = *l;
	spsc_pushed(q);
	return true;
}

static bool spsc_pop(struct spsc *q, struct asyncpool_lease *l)
{
	int i = spsc_slot_full(q);

	if (i < 0)
		return false;
	*l = q->slot[i];
	spsc_popped(q);
	return true;
}

/* ---- cases ---- */
struct bench_case;

struct run {
	const struct bench_case *c;
	struct asyncpool *pool;         /* NULL for the baselines */
	struct mutex_pool *mutex;
	struct spsc *ring;
	unsigned long ops;
	atomic_uint ready;
	atomic_uint next_id;
	atomic_int go;
	unsigned threads;
};

/*
 * One case of `asyncpool bench`, one line of the table.  A new case is
 * one more line in cases[] below (and its name in asyncpool(1)); a line
 * that names a cached variant is two cases.
 */
struct bench_case {
	const char *name;
	const char *description;
	/* The loop of thread number id (0 to threads - 1) for r->ops pairs;
	 * NULL for BENCH_PROCESSES. */
	void (*body)(struct run *r, unsigned id);
	unsigned threads;               /* 0: the --threads option */
	unsigned flags;
	const char *cached;             /* the name of the same with BENCH_CACHED, or NULL */
};
#define BENCH_CACHED 1u         /* the pool with per-thread caches */
#define BENCH_NO_POOL 2u        /* a baseline: no pool at all */
#define BENCH_PER_LEASE 4u      /* one op per lease handed over, not per thread */
#define BENCH_PROCESSES 8u      /* a shared pool in two processes (bench_shared.c) */
#define BENCH_WAKE 16u          /* wake-up latency of a waiter (bench_wait.c) */
#define BENCH_RECLAIM 32u       /* asyncpool_reclaim() after a SIGKILL (bench_reclaim.c) */
#define BENCH_CONTEND 64u       /* a pool too small, retries counted (bench_contend.c) */
#define BENCH_SPINS 128u        /* BENCH_CONTEND: retry -ENOBUFS with sched_yield() */
#define BENCH_WAITS 256u        /* BENCH_CONTEND: sleep in asyncpool_acquire_wait() */
#define BENCH_SHUFFLED 512u     /* the freelist in a random order first (shuffle_freelist) */
#define BENCH_WRAP 1024u        /* one buffer cycled: its generation's wrap period */
#define BENCH_WRAP_SHARED 2048u /* BENCH_WRAP on a shared pool of this process */
/*
 * The case makes its own pool of at least 2 x 256 buffers per thread:
 * asyncpool_create() as users get it (BENCH_CACHED: asyncpool_create_opts()
 * with caches of 256), or with BENCH_SHARED_FD one of asyncpool_shared_create()
 * (with BENCH_PROCESSES: two processes, bench_shared_fd()).  --ops pairs in
 * all per repetition, split among the threads (or processes).
 */
#define BENCH_OWN_POOL 4096u
#define BENCH_SHARED_FD 8192u
#define BENCH_TOKEN 16384u      /* the hand-off moves 8-byte tokens, not leases */
#define BENCH_CHANNEL 32768u    /* a channel, or a floor of one, in two processes */
#define BENCH_CHAN(kind) (BENCH_CHANNEL | (unsigned)(kind) << 16)  /* which (bench_channel.c) */
#define BENCH_CHAN_KIND(flags) ((enum bench_chan_kind)((flags) >> 16))
#define BENCH_MANY (1u << 24)   /* threads senders, a channel each, one receiver (bench_many.c) */
#define BENCH_MANY_FLOOR (1u << 25) /* BENCH_MANY: one bare MPSC ring for all, the design not built */
#define BENCH_XDP (1u << 26)    /* AF_XDP on a veth: the pool against a frame stack (bench_xdp.c) */
#define BENCH_XDP_FWD (1u << 27) /* BENCH_XDP: forward each frame back out, not drop it */
#define BENCH_XDP_2Q (1u << 28) /* BENCH_XDP: two queues, two threads against one */

/* Re-leases of one buffer before its generation comes back (pool_layout.h). */
#define BENCH_GEN_PERIOD 4294967295.0

static volatile uint64_t sink;

static void body_pool(struct run *r, unsigned id)
{
	(void)id;
	for (unsigned long i = 0; i < r->ops; i++) {
		struct asyncpool_lease l;

		if (asyncpool_acquire(r->pool, &l) == 0)
			asyncpool_lease_release(&l);
	}
}

static void body_bulk(struct run *r, unsigned id)
{
	struct asyncpool_lease l[BULK];

	(void)id;
	for (unsigned long i = 0; i < r->ops; i += BULK)
		if (asyncpool_acquire_bulk(r->pool, l, BULK) == 0)
			asyncpool_release_bulk(l, BULK);
}

static void body_tokens(struct run *r, unsigned id)
{
	uint64_t t[BULK];

	(void)id;
	for (unsigned long i = 0; i < r->ops; i += BULK)
		if (asyncpool_acquire_tokens(r->pool, t, BULK) == 0)
			(void)asyncpool_release_tokens(r->pool, t, BULK);
}

/* One token at a time: asyncpool_acquire_tokens() of one, asyncpool_release_token(). */
static void body_token(struct run *r, unsigned id)
{
	(void)id;
	for (unsigned long i = 0; i < r->ops; i++) {
		uint64_t t;

		if (asyncpool_acquire_tokens(r->pool, &t, 1) == 0)
			(void)asyncpool_release_token(r->pool, t);
	}
}

#ifdef ASYNCPOOL_INLINE_PATHS
/* The inline token pair with one part left out (bench_inline.c). */
#define BODY_INLINE(name, kind)                                          \
	static void name(struct run *r, unsigned id)                     \
	{                                                                \
		(void)id;                                                \
		sink = bench_inline(kind, r->pool, r->ops);              \
	}
BODY_INLINE(body_inline_pair, BENCH_INLINE_PAIR)
BODY_INLINE(body_inline_no_window, BENCH_INLINE_NO_WINDOW)
BODY_INLINE(body_inline_split_leave, BENCH_INLINE_SPLIT_LEAVE)
BODY_INLINE(body_inline_no_owner_hint, BENCH_INLINE_NO_OWNER_HINT)
BODY_INLINE(body_inline_no_released, BENCH_INLINE_NO_RELEASED)
BODY_INLINE(body_inline_no_recheck, BENCH_INLINE_NO_RECHECK)
BODY_INLINE(body_inline_two_arrays, BENCH_INLINE_TWO_ARRAYS)
BODY_INLINE(body_inline_bulk32, BENCH_INLINE_BULK32)
BODY_INLINE(body_inline_bulk32_two_arrays, BENCH_INLINE_BULK32_TWO_ARRAYS)
BODY_INLINE(body_inline_bare, BENCH_INLINE_BARE)
BODY_INLINE(body_inline_shared, BENCH_INLINE_SHARED)
BODY_INLINE(body_inline_lease_bulk32, BENCH_INLINE_LEASE_BULK32)
BODY_INLINE(body_inline_lease_bulk32_floor, BENCH_INLINE_LEASE_BULK32_FLOOR)
#endif

/* Thread 0 acquires tokens one at a time (asyncpool_acquire_tokens()) and
 * queues them; thread 1 takes them off the queue and gives each back with
 * asyncpool_release_token(), as the peers harness does. */
static void body_handoff_token(struct run *r, unsigned id)
{
	unsigned long done = 0;
	unsigned spins = 0;

	if (id == 0) {
		while (done < r->ops) {
			uint64_t t;
			int i;

			if (asyncpool_acquire_tokens(r->pool, &t, 1)) {
				spsc_publish_head(r->ring);
				sched_yield();  /* the other side holds them all */
				continue;
			}
			while ((i = spsc_slot_free(r->ring)) < 0)
				if (++spins % 256 == 0)
					sched_yield();
			r->ring->token[i] = t;
			spsc_pushed(r->ring);
			done++;
		}
		spsc_publish_head(r->ring);
	} else {
		while (done < r->ops) {
			int i = spsc_slot_full(r->ring);

			if (i < 0) {
				if (++spins % 256 == 0)
					sched_yield();
				continue;
			}
			(void)asyncpool_release_token(r->pool, r->ring->token[i]);
			spsc_popped(r->ring);
			done++;
		}
	}
}

/* Thread 0 acquires (or makes up) leases and queues them; thread 1 takes
 * them off the queue and releases them. */
static void body_handoff(struct run *r, unsigned id)
{
	struct asyncpool_lease l;
	unsigned long done = 0;

	/* Waits yield now and then: on a busy machine the other side may
	 * need this CPU to make progress. */
	memset(&l, 0, sizeof(l));
	if (id == 0) {
		while (done < r->ops) {
			unsigned spins = 0;

			if (r->pool && asyncpool_acquire(r->pool, &l)) {
				spsc_publish_head(r->ring);
				sched_yield();  /* the other side holds them all */
				continue;
			}
			while (!spsc_push(r->ring, &l))
				if (++spins % 256 == 0)
					sched_yield();
			done++;
		}
		spsc_publish_head(r->ring);
	} else {
		unsigned spins = 0;

		while (done < r->ops) {
			if (!spsc_pop(r->ring, &l)) {
				if (++spins % 256 == 0)
					sched_yield();
				continue;
			}
			if (r->pool)
				asyncpool_lease_release(&l);
			done++;
		}
	}
}

/*
 * One buffer, acquired and released as fast as the library goes: the
 * pool is LIFO, so every acquire gets the buffer the last release gave
 * back, and each pair is one re-lease of it (a new generation).  A pair
 * that gets another buffer would measure something else: counted.
 */
static unsigned long wrap_other;

static void body_wrap(struct run *r, unsigned id)
{
	struct asyncpool_lease l;
	uint32_t first = UINT32_MAX;

	(void)id;
	for (unsigned long i = 0; i < r->ops; i++) {
		if (asyncpool_acquire(r->pool, &l))
			continue;
		if (first == UINT32_MAX)
			first = l.buffer_index;
		wrap_other += l.buffer_index != first;
		asyncpool_lease_release(&l);
	}
}

static void body_mutex(struct run *r, unsigned id)
{
	(void)id;
	for (unsigned long i = 0; i < r->ops; i++) {
		uint32_t idx;

		if (mutex_pool_get(r->mutex, &idx) == 0)
			mutex_pool_put(r->mutex, idx);
	}
}

static void body_cas2(struct run *r, unsigned id)
{
	_Atomic uint64_t word = 0;

	(void)id;
	for (unsigned long i = 0; i < r->ops; i++) {
		uint64_t v = atomic_load_explicit(&word, memory_order_relaxed);

		atomic_compare_exchange_strong(&word, &v, v + 1);
		v = atomic_load_explicit(&word, memory_order_relaxed);
		atomic_compare_exchange_strong(&word, &v, v + 1);
	}
	sink = atomic_load(&word);
}

/*
 * The floor of a shared pool's cached pair (issue 34, item 6): the local
 * cached lease pair and one uncontended compare-and-swap on a private
 * word, which a release into a shared cache must do (asyncpool-shared(7)).
 * The CAS adds the lease's generation, so that it waits for the lease as
 * the shared release's does.  Compare with default-cached-1t and
 * shared-cached-1t in the same run.
 */
static void body_pool_cas(struct run *r, unsigned id)
{
	_Atomic uint64_t word = 0;

	(void)id;
	for (unsigned long i = 0; i < r->ops; i++) {
		struct asyncpool_lease l;

		if (asyncpool_acquire(r->pool, &l) == 0) {
			uint64_t v = atomic_load_explicit(&word, memory_order_relaxed), t;

			/* The lease's token as one load (HACKING.md: a 4-byte
			 * load of the generation is not forwarded). */
			memcpy(&t, &l.buffer_index, sizeof(t));
			atomic_compare_exchange_strong(&word, &v, v + (t >> 32));
			asyncpool_lease_release(&l);
		}
	}
	sink = atomic_load(&word);
}

/* Each row, then its variant with caches where it names one (below). */
static const struct bench_case cases[] = {
	{ "pool", "one thread acquires and releases", body_pool, 1, 0, "pool-cached" },
	{ "token", "one thread acquires and releases one token at a time", body_token, 1, 0,
	  "token-cached" },
#ifdef ASYNCPOOL_INLINE_PATHS
	/* What each part of the inline token pair costs: compare with token-cached. */
	{ "inline-pair", "token-cached's inline pair rebuilt in the tool, every part kept",
	  body_inline_pair, 1, BENCH_CACHED, NULL },
	{ "inline-no-window", "the same without the window (busy, bypass)",
	  body_inline_no_window, 1, BENCH_CACHED, NULL },
	{ "inline-split-leave", "layout 1's leave: n, then busy = 0, one store more per op",
	  body_inline_split_leave, 1, BENCH_CACHED, NULL },
	{ "inline-no-owner-hint", "the pair without the owner_of[] read before the word",
	  body_inline_no_owner_hint, 1, BENCH_CACHED, NULL },
	{ "inline-no-released", "the pair without the released[] hint's store",
	  body_inline_no_released, 1, BENCH_CACHED, NULL },
	{ "inline-no-recheck", "the pair looking up the thread's cache once, not per call",
	  body_inline_no_recheck, 1, BENCH_CACHED, NULL },
	{ "inline-bare", "a stack of tokens in the cache: no window, word, hint or lookup",
	  body_inline_bare, 1, BENCH_CACHED, NULL },
	{ "inline-two-arrays", "inline-pair with layout 2's entries: idx[] and gen[]",
	  body_inline_two_arrays, 1, BENCH_CACHED, NULL },
	{ "inline-bulk32", "the inline bulk pair of 32 rebuilt (time per buffer)",
	  body_inline_bulk32, 1, BENCH_CACHED, NULL },
	{ "inline-bulk32-two-arrays", "inline-bulk32 with layout 2's entries: idx[] and gen[]",
	  body_inline_bulk32_two_arrays, 1, BENCH_CACHED, NULL },
	{ "inline-lease-bulk32", "bulk32-cached's pair rebuilt inline: inline-bulk32 and the leases built and read",
	  body_inline_lease_bulk32, 1, BENCH_CACHED, NULL },
	{ "inline-lease-bulk32-floor", "the same, the leases built from registers and read back unchecked: their least cost",
	  body_inline_lease_bulk32_floor, 1, BENCH_CACHED, NULL },
	{ "inline-shared-pair", "shared-token-cached-1t's pair rebuilt inline in the tool, every check and the CAS kept",
	  body_inline_shared, 1, BENCH_OWN_POOL | BENCH_SHARED_FD | BENCH_CACHED, NULL },
#endif
	{ "pool-threads", "every thread acquires and releases", body_pool, 0, 0,
	  "pool-cached-threads" },
	{ "default-1t", "asyncpool_create() as users get it, 1 thread", body_pool, 1,
	  BENCH_OWN_POOL, "default-cached-1t" },
	{ "default-2t", "asyncpool_create() as users get it, 2 threads", body_pool, 2,
	  BENCH_OWN_POOL, "default-cached-2t" },
	{ "default-8t", "asyncpool_create() as users get it, 8 threads", body_pool, 8,
	  BENCH_OWN_POOL, "default-cached-8t" },
	{ "handoff", "one thread acquires, another releases, through a queue",
	  body_handoff, 2, BENCH_PER_LEASE, "handoff-cached" },
	{ "handoff-shuffled", "the same, on a freelist put in a random order first",
	  body_handoff, 2, BENCH_PER_LEASE | BENCH_SHUFFLED, "handoff-shuffled-cached" },
	{ "handoff-token", "a hand-off by token (asyncpool_release_token() on the other thread)",
	  body_handoff_token, 2, BENCH_PER_LEASE | BENCH_TOKEN, "handoff-token-cached" },
	{ "handoff-token-shared", "a hand-off by token on a pool of asyncpool_shared_create()",
	  body_handoff_token, 2, BENCH_PER_LEASE | BENCH_TOKEN | BENCH_OWN_POOL | BENCH_SHARED_FD,
	  "handoff-token-shared-cached" },
	{ "bulk32", "32 leases per call (time per buffer)", body_bulk, 1, 0, "bulk32-cached" },
	{ "tokens32", "32 tokens per call, no leases (time per buffer)", body_tokens, 1, 0,
	  "tokens32-cached" },
	/* Two threads' buffers interleaved in the pool's words (after a
	 * hand-off, say): the releases' stores then share cache lines. */
	{ "tokens32-2t", "tokens32 on 2 threads", body_tokens, 2, 0, "tokens32-cached-2t" },
	{ "tokens32-2t-shuffled", "the same, on a freelist put in a random order first",
	  body_tokens, 2, BENCH_SHUFFLED, "tokens32-cached-2t-shuffled" },
	{ "shared-2proc", "a shared pool used by two processes at once",
	  NULL, 2, BENCH_PROCESSES, "shared-2proc-cached" },
	{ "shared-1t", "a pool of asyncpool_shared_create(), 1 thread", body_pool, 1,
	  BENCH_OWN_POOL | BENCH_SHARED_FD, "shared-cached-1t" },
	{ "shared-token-1t", "one token at a time on a pool of asyncpool_shared_create()",
	  body_token, 1, BENCH_OWN_POOL | BENCH_SHARED_FD, "shared-token-cached-1t" },
	{ "cas-floor-cached-1t", "default-cached-1t and a compare-and-swap on a private word: a shared cached pair's floor",
	  body_pool_cas, 1, BENCH_OWN_POOL | BENCH_CACHED, NULL },
	{ "shared-2t", "a pool of asyncpool_shared_create(), 2 threads", body_pool, 2,
	  BENCH_OWN_POOL | BENCH_SHARED_FD, "shared-cached-2t" },
	{ "shared-2p", "a pool of asyncpool_shared_create(), 2 processes", NULL, 2,
	  BENCH_OWN_POOL | BENCH_SHARED_FD | BENCH_PROCESSES, "shared-cached-2p" },
	{ "wake-threads", "a release wakes a thread in asyncpool_acquire_wait",
	  NULL, 2, BENCH_WAKE, NULL },
	{ "wake-2proc", "a release wakes a process in asyncpool_acquire_wait",
	  NULL, 2, BENCH_WAKE | BENCH_PROCESSES, NULL },
	{ "many-senders-1", "1 sender process to a receiver in asyncpool_channel_recv_any, waits (per item)",
	  NULL, 1, BENCH_MANY, NULL },
	{ "many-senders-2", "2 senders, a channel each, to one receiver in asyncpool_channel_recv_any",
	  NULL, 2, BENCH_MANY, NULL },
	{ "many-senders-4", "4 senders, a channel each, to one receiver in asyncpool_channel_recv_any",
	  NULL, 4, BENCH_MANY, NULL },
	{ "many-senders-floor-1", "floor of the design not built: 1 sender, a bare MPSC ring, futex waits",
	  NULL, 1, BENCH_MANY | BENCH_MANY_FLOOR, NULL },
	{ "many-senders-floor-2", "the same, 2 senders compare-and-swapping one tail",
	  NULL, 2, BENCH_MANY | BENCH_MANY_FLOOR, NULL },
	{ "many-senders-floor-4", "the same, 4 senders",
	  NULL, 4, BENCH_MANY | BENCH_MANY_FLOOR, NULL },
	{ "chan-latency", "a token back and forth over two channels, busy-polling (one way)",
	  NULL, 2, BENCH_CHAN(BENCH_CHAN_LATENCY), NULL },
	{ "chan-2proc-1", "a process sends tokens to another over a channel, 1 per call",
	  NULL, 2, BENCH_CHAN(BENCH_CHAN_1), NULL },
	{ "chan-2proc-32", "the same, 32 per call (time per token)",
	  NULL, 2, BENCH_CHAN(BENCH_CHAN_32), NULL },
	{ "chan-back-2proc-1", "chan-2proc-1, the buffers sent back over a second channel, not the pool",
	  NULL, 2, BENCH_CHAN(BENCH_CHAN_BACK_1), NULL },
	{ "chan-back-2proc-32", "the same, 32 per call (time per token sent one way)",
	  NULL, 2, BENCH_CHAN(BENCH_CHAN_BACK_32), NULL },
	{ "chan-wake-2proc", "chan-latency asleep in asyncpool_channel_recv_wait (one way)",
	  NULL, 2, BENCH_CHAN(BENCH_CHAN_WAKE), NULL },
	{ "chan-floor-line", "floor: one cache line in ping-pong between two processes (one way)",
	  NULL, 2, BENCH_CHAN(BENCH_FLOOR_LINE), NULL },
	{ "chan-floor-futex", "floor: a bare futex wake-up ping-pong between two processes",
	  NULL, 2, BENCH_CHAN(BENCH_FLOOR_FUTEX), NULL },
	{ "chan-floor-ring-1", "floor: a bare ring of tokens (rte_ring SP/SC), 1 per call",
	  NULL, 2, BENCH_CHAN(BENCH_FLOOR_RING_1), NULL },
	{ "chan-floor-ring-32", "the same, 32 per call",
	  NULL, 2, BENCH_CHAN(BENCH_FLOOR_RING_32), NULL },
	{ "chan-floor-slots-1", "floor: the channel's ring without the buffer's word, 1 per call",
	  NULL, 2, BENCH_CHAN(BENCH_FLOOR_SLOTS_1), NULL },
	{ "chan-floor-slots-32", "the same, 32 per call",
	  NULL, 2, BENCH_CHAN(BENCH_FLOOR_SLOTS_32), NULL },
	{ "chan-floor-words-1", "the same with a CAS on a word per token on each side, 1 per call",
	  NULL, 2, BENCH_CHAN(BENCH_FLOOR_WORDS_1), NULL },
	{ "chan-floor-words-32", "the same, 32 per call",
	  NULL, 2, BENCH_CHAN(BENCH_FLOOR_WORDS_32), NULL },
	{ "chan-floor-back-1", "floor: chan-floor-words-1, the tokens back on a bare ring (a return ring's floor)",
	  NULL, 2, BENCH_CHAN(BENCH_FLOOR_BACK_1), NULL },
	{ "chan-floor-back-32", "the same, 32 per call",
	  NULL, 2, BENCH_CHAN(BENCH_FLOOR_BACK_32), NULL },
	{ "reclaim-latency", "one reclaim of what a SIGKILLed process leased and cached",
	  NULL, 1, BENCH_RECLAIM, NULL },
	{ "contend-spin", "4 threads, 2 buffers of 4 KiB: retry -ENOBUFS with sched_yield",
	  NULL, 4, BENCH_CONTEND | BENCH_SPINS, NULL },
	{ "contend-wait", "4 threads, 2 buffers of 4 KiB: sleep in asyncpool_acquire_wait",
	  NULL, 4, BENCH_CONTEND | BENCH_WAITS, NULL },
	{ "contend-baseline", "4 threads, 4 buffers of 4 KiB: nobody waits",
	  NULL, 4, BENCH_CONTEND, NULL },
	{ "handoff-2proc-spin", "a process hands buffers to another by token, retrying on -ENOBUFS",
	  NULL, 2, BENCH_CONTEND | BENCH_PROCESSES | BENCH_SPINS, NULL },
	{ "handoff-2proc-wait", "the same, sleeping in asyncpool_acquire_wait",
	  NULL, 2, BENCH_CONTEND | BENCH_PROCESSES | BENCH_WAITS, NULL },
	{ "wrap", "one buffer re-leased: ns per generation, and the wrap of 2^32 - 1",
	  body_wrap, 1, BENCH_WRAP, "wrap-cached" },
	{ "wrap-shared", "the same on a shared pool (memfd, attached) of this process",
	  body_wrap, 1, BENCH_WRAP | BENCH_WRAP_SHARED, "wrap-shared-cached" },
	{ "xdp-rxdrop", "AF_XDP on a veth in a netns: frames/s received through the pool against a frame stack",
	  NULL, 1, BENCH_XDP, NULL },
	{ "xdp-fwd", "the same, each frame rewritten and sent back out (tx, completion)",
	  NULL, 1, BENCH_XDP | BENCH_XDP_FWD, NULL },
	{ "xdp-rxdrop-2q", "two sockets on two veth queues sharing the pool: two threads against one",
	  NULL, 2, BENCH_XDP | BENCH_XDP_2Q, NULL },
	{ "mutex-baseline", "a stack of indices under one pthread mutex",
	  body_mutex, 1, BENCH_NO_POOL, NULL },
	{ "mutex-baseline-threads", "the same, on every thread", body_mutex, 0, BENCH_NO_POOL,
	  NULL },
	{ "cas2-baseline", "two compare-and-swaps on a private word per pair",
	  body_cas2, 1, BENCH_NO_POOL, NULL },
	{ "handoff-queue-baseline", "the hand-off queue alone, without a pool",
	  body_handoff, 2, BENCH_NO_POOL | BENCH_PER_LEASE, NULL },
};
#define N_ROWS (sizeof(cases) / sizeof(cases[0]))
#define N_CASES (2 * N_ROWS)    /* at most */

/* Every case, in the order of the table and of the JSON results; how many. */
static size_t all_cases(struct bench_case *out)
{
	size_t n = 0;

	for (size_t i = 0; i < N_ROWS; i++) {
		out[n++] = cases[i];
		if (!cases[i].cached)
			continue;
		out[n] = cases[i];
		out[n].name = cases[i].cached;
		out[n].description = cases[i].threads == 1 ? "the same, with a per-thread cache" :
				     "the same, with per-thread caches";
		out[n].flags |= BENCH_CACHED;
		out[n++].cached = NULL;
	}
	return n;
}

static void *bench_thread(void *arg)
{
	struct run *r = arg;
	unsigned id = atomic_fetch_add(&r->next_id, 1);

	atomic_fetch_add(&r->ready, 1);
	while (!atomic_load_explicit(&r->go, memory_order_acquire))
		;
	r->c->body(r, id);
	/* Leave nothing in this thread's cache: it exits next anyway. */
	if (r->pool)
		asyncpool_cache_flush(r->pool);
	return NULL;
}

/* One repetition: elapsed wall nanoseconds for threads x ops pairs. */
static uint64_t run_once(struct run *r)
{
	pthread_t t[64];
	unsigned n = r->threads < 64 ? r->threads : 64;
	uint64_t start;

	atomic_store(&r->ready, 0);
	atomic_store(&r->next_id, 0);
	atomic_store(&r->go, 0);
	for (unsigned i = 0; i < n; i++)
		pthread_create(&t[i], NULL, bench_thread, r);
	while (atomic_load(&r->ready) != n)
		;
	start = tool_now_ns();
	atomic_store_explicit(&r->go, 1, memory_order_release);
	for (unsigned i = 0; i < n; i++)
		pthread_join(t[i], NULL);
	return tool_now_ns() - start;
}

static void measure(struct run *r, unsigned reps, struct bench_result *out)
{
	uint64_t el[64];
	unsigned long total = r->ops * r->threads;

	if (r->c->flags & BENCH_PER_LEASE)
		total = r->ops;         /* one pair per lease handed over */
	run_once(r);                    /* warm up: page faults, caches, frequency */
	for (unsigned i = 0; i < reps; i++)
		el[i] = run_once(r);
	bench_summarize(out, el, reps, r->ops, r->threads, total);
}

static void print_table(const struct bench_result *res, size_t n, unsigned reps)
{
	printf("%-27s %7s %10s %10s %10s %12s\n", "case", "threads", "ns/op", "min", "max", "Mops/s");
	for (size_t i = 0; i < n; i++) {
		printf("%-27s %7u %10.2f %10.2f %10.2f %12.2f", res[i].name, res[i].threads,
		       res[i].ns[0], res[i].ns[1], res[i].ns[2], res[i].mops[0]);
		if (res[i].extra2_name)
			printf("  %s %.0f %s %.1f", res[i].extra_name, res[i].extra,
			       res[i].extra2_name, res[i].extra2);
		printf("\n");
	}
	printf("(medians of %u repetitions; one op is an acquire+release pair;\n"
	       " bulk32, tokens32: per buffer; handoff*: per lease (or token), acquired by one thread,\n"
	       " released by the other; default-*, shared-1t to shared-cached-2p: ops pairs in all,\n"
	       " split among the threads or processes, each on a pool of its own;\n"
	       " wake-*: ns from a release to the return of the waiter's asyncpool_acquire_wait(),\n"
	       " 2000 wake-ups: ns/op the median, min the minimum, max the 99th percentile;\n"
	       " reclaim-latency: ns of one asyncpool_reclaim() that brings back what a\n"
	       " SIGKILLed process leased and cached, %u kills: the median, min and worst;\n"
	       " contend-*: ops/20 acquire+hold+release per thread, retries per repetition;\n"
	       " handoff-2proc-*: one run of ops/10 messages, ns/op per message;\n"
	       " chan-*: two processes; per token, or one way of a ping-pong of ops/10 round\n"
	       " trips (ops/200 for chan-wake-2proc, chan-floor-futex): ns/op the median of\n"
	       " the repetitions' medians, min and max theirs, p999_ns their 99.9th percentile;\n"
	       " wrap*: one buffer re-leased, wrap_s the seconds of 2^32 - 1 re-leases at that rate;\n"
	       " xdp-*: ns/op the pool's ns a frame, Mops/s its Mframes/s, pool_vs_plain_pct its\n"
	       " frames/s against a frame stack's in the same run, pool_cost_ns the difference;\n"
	       " xdp-rxdrop-2q: two threads, vs_1t_pct against one thread on both sockets,\n"
	       " queue1_pct the frames that came on queue 1)\n",
	       reps, BENCH_RECLAIM_ROUNDS);
}

static void print_json(const struct bench_result *res, size_t n, unsigned reps, unsigned long ops)
{
	printf("{\"library\":\"libasyncpool\",\"version\":\"%s\",\"repetitions\":%u,"
	       "\"ops_per_thread\":%lu,\"cpus\":%ld,\"results\":[",
	       asyncpool_version(), reps, ops, sysconf(_SC_NPROCESSORS_ONLN));
	for (size_t i = 0; i < n; i++) {
		printf("%s{\"name\":\"%s\",\"threads\":%u,\"ns_per_op\":%.3f,\"mops_per_s\":%.3f,"
		       "\"ns_per_op_min\":%.3f,\"ns_per_op_max\":%.3f,"
		       "\"mops_per_s_min\":%.3f,\"mops_per_s_max\":%.3f",
		       i ? "," : "", res[i].name, res[i].threads, res[i].ns[0], res[i].mops[0],
		       res[i].ns[1], res[i].ns[2], res[i].mops[1], res[i].mops[2]);
		if (res[i].buffers)
			printf(",\"buffers\":%lu", res[i].buffers);
		if (res[i].extra_name)
			printf(",\"%s\":%.3f", res[i].extra_name, res[i].extra);
		if (res[i].extra2_name)
			printf(",\"%s\":%.3f", res[i].extra2_name, res[i].extra2);
		printf("}");
	}
	printf("]}\n");
}

/* ---- the sweep: cost per pair from 64 to 16M buffers ---- */
static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint32_t rng_below(uint32_t n)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return (uint32_t)(((rng_state >> 32) * (uint64_t)n) >> 32);
}

static void shuffle(uint64_t *v, uint32_t n)
{
	for (uint32_t i = n; i > 1; i--) {
		uint32_t j = rng_below(i);
		uint64_t t = v[i - 1];

		v[i - 1] = v[j];
		v[j] = t;
	}
}

/*
 * Put the freelist of pool in a random order: acquire up to max buffers
 * (kept as tokens, which carry each lease's generation), release them
 * shuffled, and give the calling thread's cache back too.  How many it
 * moved.  Real pools end up in such an order after a while.
 */
static uint32_t shuffle_freelist(struct asyncpool *pool, uint64_t *tokens, uint32_t max)
{
	struct asyncpool_lease l;
	uint32_t n = 0;

	while (n < max && asyncpool_acquire(pool, &l) == 0)
		tokens[n++] = asyncpool_lease_token(&l);
	shuffle(tokens, n);
	for (uint32_t i = 0; i < n; i++)
		(void)asyncpool_release_token(pool, tokens[i]);
	(void)asyncpool_cache_flush(pool);
	return n;
}

#define SWEEP_WINDOW 256u

/* Rounds of SWEEP_WINDOW acquires, then their releases in a random order. */
static void sweep_steady(struct asyncpool *pool, uint32_t win, unsigned long ops,
			 unsigned reps, double *steady)
{
	struct asyncpool_lease w[SWEEP_WINDOW];
	uint64_t perm[8][SWEEP_WINDOW];
	unsigned long rounds = ops / win;

	for (unsigned k = 0; k < 8; k++) {
		for (uint32_t i = 0; i < win; i++)
			perm[k][i] = i;
		shuffle(perm[k], win);
	}
	for (unsigned k = 0; k < reps; k++) {
		uint64_t t0 = tool_now_ns();

		for (unsigned long r = 0; r < rounds; r++) {
			const uint64_t *pm = perm[r & 7];

			for (uint32_t i = 0; i < win; i++)
				asyncpool_acquire(pool, &w[i]);
			for (uint32_t i = 0; i < win; i++)
				asyncpool_lease_release(&w[pm[i]]);
		}
		steady[k] = (double)(tool_now_ns() - t0) / (double)(rounds * win);
	}
}

/*
 * One pool of count buffers: put its freelist in a random order (acquire
 * every buffer, release them shuffled), time one pass over it (cold: each
 * buffer once, in that order), then time steady rounds without caches,
 * turn caches on (asyncpool_set_cache()) and time them again.  ns per
 * acquire+release pair.
 */
static int sweep_one(uint32_t count, uint32_t cache, unsigned long ops, unsigned reps,
		     double *steady, double *steady_cached, double *cold)
{
	struct asyncpool_proactor *p;
	struct asyncpool *pool;
	struct asyncpool_lease l;
	uint32_t got = 0, win = count < SWEEP_WINDOW ? count : SWEEP_WINDOW;
	uint64_t t0, *tok;
	int rc = tool_memory_pool(&p, &pool, 64, count, 0, false);

	if (rc)
		return rc;
	tok = malloc(sizeof(uint64_t) * count);
	if (!tok) {
		tool_memory_pool_free(p, pool);
		return -ENOMEM;
	}
	if (shuffle_freelist(pool, tok, count) != count) {
		free(tok);
		tool_memory_pool_free(p, pool);
		return -ENOBUFS;        /* a fresh pool has every buffer free */
	}
	/* cold: one pass over the shuffled list; it stays in random order */
	t0 = tool_now_ns();
	while (got < count && (rc = asyncpool_acquire(pool, &l)) == 0)
		tok[got++] = asyncpool_lease_token(&l);
	for (uint32_t i = 0; i < got; i++)
		(void)asyncpool_release_token(pool, tok[i]);
	*cold = (double)(tool_now_ns() - t0) / count;
	free(tok);
	if (!rc) {
		sweep_steady(pool, win, ops, reps, steady);
		rc = asyncpool_set_cache(pool, cache);
	}
	if (!rc) {
		sweep_steady(pool, win, ops, reps, steady_cached);
		asyncpool_cache_flush(pool);
	}
	tool_memory_pool_free(p, pool);
	return rc;
}

static int cmd_sweep(int json, unsigned long ops, unsigned reps)
{
	static const uint32_t sizes[] = { 64, 1024, 16384, 262144, 1u << 20, 1u << 22, 1u << 24 };
	struct bench_result res[2 * sizeof(sizes) / sizeof(sizes[0])];
	size_t n = 0;

	memset(res, 0, sizeof(res));

	if (!json)
		printf("%10s %14s %14s %14s\n", "buffers", "pool ns/op", "cached ns/op", "cold ns/op");
	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		uint32_t cache = sizes[s] / 4 < BENCH_CACHE ? sizes[s] / 4 : BENCH_CACHE;
		double st[2][64], cold;
		int rc = sweep_one(sizes[s], cache, ops, reps, st[0], st[1], &cold);

		if (rc) {
			fprintf(stderr, "asyncpool bench: sweep of %u buffers: %s\n",
				sizes[s], strerror(-rc));
			return TOOL_EXIT_FAILURE;
		}
		for (unsigned c = 0; c < 2; c++) {
			res[n].name = c ? "pool-cached" : "pool";
			res[n].threads = 1;
			res[n].buffers = sizes[s];
			bench_spread(res[n].ns, st[c], reps);
			for (int k = 0; k < 3; k++)
				res[n].mops[k] = 1000.0 / res[n].ns[2 - k];
			res[n].extra_name = "cold_ns_per_op";
			res[n].extra = cold;
			n++;
		}
		if (!json) {
			printf("%10u %14.2f %14.2f %14.2f\n", sizes[s], res[n - 2].ns[0],
			       res[n - 1].ns[0], cold);
			fflush(stdout);
		}
	}
	if (json)
		print_json(res, n, reps, ops);
	else
		printf("(steady: medians of %u repetitions of rounds of %u acquires then their\n"
		       " releases in random order, on a freelist put in random order first;\n"
		       " cold: one pass over every buffer in that random order, no caches)\n",
		       reps, SWEEP_WINDOW);
	return TOOL_EXIT_OK;
}

static void bench_usage(FILE *f)
{
	fputs("Usage: asyncpool bench [--json] [--threads N] [--ops N] [--reps N] [--buffers N]\n"
	      "                       [CASE...]\n"
	      "       asyncpool bench --sweep [--json] [--ops N] [--reps N]\n"
	      "\nCases (CASE: a name or a shell pattern; none: every case):\n", f);
	struct bench_case all[N_CASES];
	size_t n = all_cases(all);

	for (size_t i = 0; i < n; i++)
		fprintf(f, "  %-27s %s\n", all[i].name, all[i].description);
}

static void measure(struct run *r, unsigned reps, struct bench_result *out);

/* The wrap period of one buffer cycled at the measured rate. */
static void wrap_result(struct bench_result *res)
{
	res->extra_name = "wrap_s";
	res->extra = res->ns[0] * BENCH_GEN_PERIOD / 1e9;
	res->extra2_name = "other_buffers";
	res->extra2 = (double)wrap_other;
	wrap_other = 0;
}

/* A wrap case on a shared pool of buffers buffers, made for it: true if measured. */
static bool bench_wrap_shared(struct run *r, const struct bench_case *c, uint32_t buffers,
			      bool cached, unsigned reps, struct bench_result *res)
{
	struct asyncpool_shared_options o;
	struct asyncpool_shared *sp = NULL;
	int rc;

	memset(&o, 0, sizeof(o));
	o.size = sizeof(o);
	o.buffer_size = 64;
	o.buffer_count = buffers;
	rc = asyncpool_shared_create(&o, &sp);
	if (!rc && cached)
		rc = asyncpool_set_cache(asyncpool_shared_pool(sp), BENCH_CACHE);
	if (rc) {
		fprintf(stderr, "asyncpool bench: %s: %s\n", c->name, strerror(-rc));
		if (sp)
			asyncpool_shared_close(sp);
		return false;
	}
	r->c = c;
	r->pool = asyncpool_shared_pool(sp);
	r->threads = 1;
	measure(r, reps, res);
	wrap_result(res);
	asyncpool_shared_close(sp);
	return true;
}

/*
 * A BENCH_OWN_POOL case on a pool made for it, of at least buffers
 * buffers: true if measured.  *failed: a buffer did not come back.
 */
static bool bench_own_pool(struct run *r, const struct bench_case *c, uint32_t buffers,
			   bool cached, unsigned reps, struct bench_result *res, bool *failed)
{
	struct asyncpool_proactor *p = NULL;
	struct asyncpool_shared *sp = NULL;
	struct asyncpool *pool = NULL;
	unsigned long all_ops = r->ops, ops = r->ops;
	uint32_t count = 2 * BENCH_CACHE * c->threads;
	int rc;

	if (count < buffers)
		count = buffers;
	if (!(c->flags & BENCH_PER_LEASE) && (ops /= c->threads) == 0)
		ops = 1;                /* --ops in all, split among the threads */
	if (c->flags & BENCH_PROCESSES) {
		rc = bench_shared_fd(count, cached ? BENCH_CACHE : 0, ops, reps, res);
		if (rc == -EUCLEAN) {
			fprintf(stderr, "asyncpool bench: %s: FAILED: a buffer did not come back\n",
				c->name);
			*failed = true;
		} else if (rc) {
			fprintf(stderr, "asyncpool bench: %s: %s\n", c->name, strerror(-rc));
		}
		return rc == 0;
	}
	if (c->flags & BENCH_SHARED_FD) {
		struct asyncpool_shared_options o;

		memset(&o, 0, sizeof(o));
		o.size = sizeof(o);
		o.buffer_size = 64;
		o.buffer_count = count;
		rc = asyncpool_shared_create(&o, &sp);
		if (!rc) {
			pool = asyncpool_shared_pool(sp);
			if (cached)
				rc = asyncpool_set_cache(pool, BENCH_CACHE);
		}
	} else {
		rc = tool_memory_pool(&p, &pool, 64, count, cached ? BENCH_CACHE : TOOL_POOL_DEFAULT,
				      true);
	}
	if (!rc) {
		r->c = c;
		r->pool = pool;
		r->threads = c->threads;
		r->ops = ops;
		measure(r, reps, res);
		r->ops = all_ops;
		/* Every thread flushed its cache as it ended: all are back. */
		if (asyncpool_available(pool) != count) {
			fprintf(stderr, "asyncpool bench: %s: FAILED: %zu of %u buffers came back\n",
				c->name, (size_t)asyncpool_available(pool), count);
			*failed = true;
		}
	} else {
		fprintf(stderr, "asyncpool bench: %s: %s\n", c->name, strerror(-rc));
	}
	if (sp)
		asyncpool_shared_close(sp);
	else if (pool)
		tool_memory_pool_free(p, pool);
	return rc == 0;
}

/* Whether case name is one that the patterns (none: every case) select. */
static bool selected(const char *name, char *const *pattern, int npattern)
{
	for (int i = 0; i < npattern; i++)
		if (!fnmatch(pattern[i], name, 0))
			return true;
	return npattern == 0;
}

/* Runs every case of cases[] that the patterns select into res; the number
 * of results.  *failed: a case found the library wrong (not a case the
 * machine cannot run). */
static size_t run_cases(struct run *r, struct asyncpool *const pools[2], uint32_t buffers,
			unsigned threads, unsigned reps, char *const *pattern, int npattern,
			struct bench_result *res, bool *failed)
{
	static struct bench_case all[N_CASES];
	size_t n = 0, n_all = all_cases(all);

	for (size_t i = 0; i < n_all; i++) {
		const struct bench_case *c = &all[i];
		bool cached = c->flags & BENCH_CACHED;

		if (!selected(c->name, pattern, npattern))
			continue;
		memset(&res[n], 0, sizeof(res[n]));
		res[n].name = c->name;
		if (c->flags & BENCH_OWN_POOL) {
			if (bench_own_pool(r, c, buffers, cached, reps, &res[n], failed))
				n++;
			continue;
		}
		if (c->flags & BENCH_CONTEND) {
			unsigned long k = r->ops / 20 ? r->ops / 20 : 1;
			int rc = c->flags & BENCH_PROCESSES ?
				 bench_handoff_2proc(c->flags & BENCH_WAITS, 2 * k, &res[n]) :
				 bench_contend(c->flags & BENCH_WAITS ? CONTEND_WAIT :
					       c->flags & BENCH_SPINS ? CONTEND_SPIN : CONTEND_BASELINE,
					       k, reps, &res[n]);

			if (rc)
				fprintf(stderr, "asyncpool bench: %s: %s\n", c->name, strerror(-rc));
			else
				n++;
			continue;
		}
		if (c->flags & BENCH_RECLAIM) {
			int rc = bench_reclaim(buffers, BENCH_CACHE, BENCH_RECLAIM_ROUNDS, &res[n]);

			if (rc == -EUCLEAN)
				*failed = true;
			if (rc)
				fprintf(stderr, "asyncpool bench: %s: %s\n", c->name,
					rc == -EUCLEAN ? "FAILED: a buffer did not come back" :
					strerror(-rc));
			else
				n++;
			continue;
		}
		if (c->flags & BENCH_MANY) {
			int rc = bench_many(c->threads, c->flags & BENCH_MANY_FLOOR, r->ops, reps, &res[n]);

			if (rc == -EUCLEAN)
				*failed = true;
			if (rc)
				fprintf(stderr, "asyncpool bench: %s: %s\n", c->name,
					rc == -EUCLEAN ? "FAILED: a buffer did not come back" :
					strerror(-rc));
			else
				n++;
			continue;
		}
		if (c->flags & BENCH_CHANNEL) {
			int rc = bench_channel(BENCH_CHAN_KIND(c->flags), r->ops, reps, &res[n]);

			if (rc == -EUCLEAN)
				*failed = true;
			if (rc)
				fprintf(stderr, "asyncpool bench: %s: %s\n", c->name,
					rc == -EUCLEAN ? "FAILED: a buffer did not come back" :
					strerror(-rc));
			else
				n++;
			continue;
		}
		if (c->flags & BENCH_XDP) {
			char why[256] = "";
			int rc = bench_xdp(c->flags & BENCH_XDP_2Q ? BENCH_XDP_RXDROP_2Q :
					   c->flags & BENCH_XDP_FWD ? BENCH_XDP_FWD_1Q :
					   BENCH_XDP_RXDROP_1Q, r->ops, reps, &res[n], why,
					   sizeof(why));

			/* Not root, no netns, no XDP: say so, go on; a frame lost: a bug. */
			if (rc == -EUCLEAN)
				*failed = true;
			if (rc)
				fprintf(stderr, "asyncpool bench: %s: %s%s%s\n", c->name,
					rc == -EUCLEAN ? "FAILED: " : "skipped: ", why,
					why[0] ? "" : strerror(-rc));
			else
				n++;
			continue;
		}
		if (c->flags & BENCH_WAKE) {
			int rc = bench_wake(c->flags & BENCH_PROCESSES, 2000, &res[n]);

			if (rc)
				fprintf(stderr, "asyncpool bench: %s: %s\n", c->name, strerror(-rc));
			else
				n++;
			continue;
		}
		if (c->flags & BENCH_PROCESSES) {
			int rc = bench_shared(buffers, cached ? BENCH_CACHE : 0, r->ops, reps, &res[n]);

			/* Not every machine can share memory this way: say so, go on. */
			if (rc)
				fprintf(stderr, "asyncpool bench: %s: %s\n", c->name, strerror(-rc));
			else
				n++;
			continue;
		}
		if (c->flags & BENCH_WRAP_SHARED) {
			if (bench_wrap_shared(r, c, buffers, cached, reps, &res[n]))
				n++;
			continue;
		}
		r->c = c;
		r->pool = (c->flags & BENCH_NO_POOL) ? NULL : pools[cached];
		r->threads = c->threads ? c->threads : threads;
		if (c->flags & BENCH_SHUFFLED) {
			uint64_t *tok = malloc(sizeof(uint64_t) * buffers);

			if (!tok) {
				fprintf(stderr, "asyncpool bench: %s: %s\n", c->name, strerror(ENOMEM));
				continue;
			}
			(void)shuffle_freelist(r->pool, tok, buffers);
			free(tok);
		}
		measure(r, reps, &res[n]);
		if (c->flags & BENCH_WRAP)
			wrap_result(&res[n]);
		n++;
	}
	return n;
}

int cmd_bench(int argc, char **argv)
{
	struct tool_args a;
	unsigned threads, reps;
	unsigned long ops;
	uint32_t buffers;
	struct bench_result res[N_CASES];
	struct asyncpool_proactor *p[2] = { NULL, NULL };
	struct asyncpool *pools[2] = { NULL, NULL };
	struct run r;
	int json, rc;
	bool failed = false;
	size_t n;

	if ((rc = tool_options(argc, argv, -1, bench_usage, &a)) != TOOL_GO)
		return rc;
	/* The operands pick cases by name or shell pattern; each must pick one. */
	for (int i = a.first; i < argc; i++) {
		struct bench_case all[N_CASES];
		size_t k, n_all = all_cases(all);

		for (k = 0; k < n_all && fnmatch(argv[i], all[k].name, 0); k++)
			;
		if (a.given['s'] || k == n_all) {
			fprintf(stderr, "asyncpool bench: %s '%s' (see --help)\n",
				a.given['s'] ? "--sweep runs no case: unexpected" : "no case matches",
				argv[i]);
			return TOOL_EXIT_USAGE;
		}
	}
	json = a.given['j'];
	threads = a.given['t'] ? (unsigned)a.value['t'] : (unsigned)sysconf(_SC_NPROCESSORS_ONLN);
	ops = a.given['n'] ? a.value['n'] : 2000000;
	reps = a.given['r'] ? (unsigned)a.value['r'] : 5;
	buffers = a.given['b'] ? (uint32_t)a.value['b'] : 1024;
	rc = TOOL_EXIT_OK;
	if (threads < 2)
		threads = 2;
	if (a.given['s'])
		return cmd_sweep(json, ops, reps);
	if (buffers < 4 * BENCH_CACHE)
		buffers = 4 * BENCH_CACHE;      /* room for two caches and the ring */

	memset(&r, 0, sizeof(r));
	r.ops = ops;
	r.mutex = mutex_pool_new(buffers);
	r.ring = aligned_alloc(64, sizeof(*r.ring));
	if (!r.mutex || !r.ring) {
		fprintf(stderr, "asyncpool bench: out of memory\n");
		rc = TOOL_EXIT_FAILURE;
		goto out;
	}
	memset(r.ring, 0, sizeof(*r.ring));
	/* pools[0] without caches, pools[1] with (BENCH_CACHED) */
	for (int i = 0; i < 2; i++) {
		int err = tool_memory_pool(&p[i], &pools[i], 64, buffers, i ? BENCH_CACHE : 0, true);

		if (err) {
			fprintf(stderr, "asyncpool bench: cannot create a pool: %s\n", strerror(-err));
			rc = TOOL_EXIT_FAILURE;
			goto out;
		}
	}

	n = run_cases(&r, pools, buffers, threads, reps, argv + a.first, argc - a.first, res,
		      &failed);
	/* Every case gives back all it took: a buffer missing is a bug. */
	for (int i = 0; i < 2; i++) {
		uint32_t back;

		(void)asyncpool_cache_flush(pools[i]);
		back = asyncpool_available(pools[i]);
		if (back != buffers) {
			fprintf(stderr, "asyncpool bench: FAILED: %u of %u buffers of the %s pool came back\n",
				back, buffers, i ? "cached" : "uncached");
			failed = true;
		}
	}
	if (json)
		print_json(res, n, reps, ops);
	else
		print_table(res, n, reps);
	if (failed)
		rc = TOOL_EXIT_FAILURE;
out:
	if (r.mutex)
		mutex_pool_free(r.mutex);
	free(r.ring);
	for (int i = 0; i < 2; i++)
		if (pools[i])
			tool_memory_pool_free(p[i], pools[i]);
	return rc;
}
