/* SPDX-License-Identifier: MIT */
/*
 * peers: libasyncpool beside its peers, in one process, in one run
 * (bench/peers/README.md).  Built by `make peers` against this tree's
 * headers and library, only where DPDK and Concurrency Kit are installed.
 *
 * Pools and freelists (one "op" = one acquire + one release of a buffer):
 *   st    : single thread, acquire then release the same buffer, ns/op
 *   mt    : 2 threads (CPU0, CPU1), each does acquire+release pairs on the
 *           shared pool, total Mops/s (conservative: total / (max end - min start))
 *   xfer  : 2 threads, thread A acquires and hands the pointer through an SPSC
 *           queue to thread B which releases (submit-thread / completion-thread
 *           pattern), Mops/s.  SPSC handoff cost is common to all variants.
 * Bulk variants (.../b32) count one op per object (32 objects per call).
 *
 * Channels (the table chan_rows[] in main()): one side hands 8-byte
 * objects to the other, Mops/s of objects one and 32 per call, and the
 * one-way latency of a token in ping-pong (median and 99.9th percentile).
 *
 * Run: ./bench [reps] [st_iters_millions]
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <linux/futex.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <ck_ring.h>
#include <ck_stack.h>

#ifdef HAVE_DPDK
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_lcore.h>
#include <rte_mempool.h>
#include <rte_ring.h>
#include <rte_version.h>
#endif

#ifdef HAVE_URING
#include <liburing.h>
#endif
#ifdef HAVE_ASYNCPOOL
#include <asyncpool.h>
/* tokens since 1.1 */
#if ASYNCPOOL_VERSION_MAJOR > 1 || (ASYNCPOOL_VERSION_MAJOR == 1 && ASYNCPOOL_VERSION_MINOR >= 1)
#define ASYNCPOOL_HAVE_TOKENS 1
#endif
#endif

#define NBUF 8192u
#define BUFSZ 2048u
#define BUFSHIFT 11
#define NIL 0xffffffffu
#define BULK 32
#define CL 64
#define ALIGNED __attribute__((aligned(CL)))
#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)
#if defined(__x86_64__) || defined(__i386__)
#define cpu_relax() __builtin_ia32_pause()
#elif defined(__aarch64__)
#define cpu_relax() __asm__ volatile("yield")
#else
#define cpu_relax() __asm__ volatile("" ::: "memory")
#endif

/*
 * What this binary was built with, printed beside every ratio (issue 53):
 * the flags that came last (make peers passes PEERS_LAST), the -march and
 * -mtune that the compiler's predefined macros say won, the compiler, and
 * (at run time) the CPU.  DPDK's inline rte_mempool code and this
 * library's inline code are compiled in this one file with these flags.
 */
#ifndef PEERS_LAST
#define PEERS_LAST "unknown (not built by make peers)"
#endif
#if defined(__clang__)
#define PEERS_CC "clang " __clang_version__
#elif defined(__GNUC__)
#define PEERS_CC "gcc " __VERSION__
#else
#define PEERS_CC "cc"
#endif
#if defined(__corei7__)
#define PEERS_MARCH "corei7"
#elif defined(__sapphirerapids__)
#define PEERS_MARCH "sapphirerapids"
#elif defined(__rocketlake__)
#define PEERS_MARCH "rocketlake"
#elif defined(__icelake_server__)
#define PEERS_MARCH "icelake-server"
#elif defined(__cascadelake__)
#define PEERS_MARCH "cascadelake"
#elif defined(__skylake_avx512__)
#define PEERS_MARCH "skylake-avx512"
#elif defined(__skylake__)
#define PEERS_MARCH "skylake"
#elif defined(__haswell__)
#define PEERS_MARCH "haswell"
#elif defined(__znver4__)
#define PEERS_MARCH "znver4"
#elif defined(__znver3__)
#define PEERS_MARCH "znver3"
#elif defined(__znver2__)
#define PEERS_MARCH "znver2"
#elif defined(__znver1__)
#define PEERS_MARCH "znver1"
#elif defined(__x86_64__)
#define PEERS_MARCH "another x86-64"
#else
#define PEERS_MARCH "not x86-64"
#endif
#if defined(__tune_corei7__)
#define PEERS_MTUNE "corei7"
#elif defined(__tune_generic__)
#define PEERS_MTUNE "generic"
#else
#define PEERS_MTUNE PEERS_MARCH
#endif
static char peers_cpu[128] = "unknown CPU";
static char peers_tag[384];     /* beside every ratio */
static void peers_build_tag(void)
{
	char line[256];
	FILE *f = fopen("/proc/cpuinfo", "r");

	while (f && fgets(line, sizeof(line), f)) {
		char *c = strchr(line, ':');
		if (strncmp(line, "model name", 10) || !c) continue;
		c += 1 + (c[1] == ' ');
		c[strcspn(c, "\n")] = 0;
		snprintf(peers_cpu, sizeof(peers_cpu), "%s", c);
		break;
	}
	if (f) fclose(f);
	snprintf(peers_tag, sizeof(peers_tag), "[-march=%s -mtune=%s; %s; %s]", PEERS_MARCH, PEERS_MTUNE, PEERS_CC,
		 peers_cpu);
}

static char *region; /* the "registered memory region" (never touched here) */
static inline void *idx2ptr(uint32_t i) { return region + ((size_t)i << BUFSHIFT); }
static inline uint32_t ptr2idx(void *p) { return (uint32_t)(((char *)p - region) >> BUFSHIFT); }

static inline double now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static void pin(int cpu)
{
	cpu_set_t s;
	CPU_ZERO(&s);
	CPU_SET(cpu, &s);
	pthread_setaffinity_np(pthread_self(), sizeof(s), &s);
}

static void die(const char *m) { fprintf(stderr, "FATAL: %s\n", m); exit(1); }

/* ------------------------------------------------------------------ */
/* (a) pthread mutex freelist (next-index array, LIFO)                 */
static struct { pthread_mutex_t m; uint32_t head; } ALIGNED mx;
static uint32_t mx_next[NBUF] ALIGNED;
static void mx_init(void)
{
	pthread_mutex_init(&mx.m, NULL);
	for (uint32_t i = 0; i < NBUF; i++) mx_next[i] = i + 1 < NBUF ? i + 1 : NIL;
	mx.head = 0;
}
static inline void *mx_get(int tid)
{
	(void)tid;
	pthread_mutex_lock(&mx.m);
	uint32_t i = mx.head;
	if (unlikely(i == NIL)) { pthread_mutex_unlock(&mx.m); return NULL; }
	mx.head = mx_next[i];
	pthread_mutex_unlock(&mx.m);
	return idx2ptr(i);
}
static inline void mx_put(void *p, int tid)
{
	(void)tid;
	uint32_t i = ptr2idx(p);
	pthread_mutex_lock(&mx.m);
	mx_next[i] = mx.head;
	mx.head = i;
	pthread_mutex_unlock(&mx.m);
}
/* mutex bulk: one lock per 32 objects */
static inline int mx_get_bulk(void **v, int n, int tid)
{
	(void)tid;
	pthread_mutex_lock(&mx.m);
	for (int k = 0; k < n; k++) {
		uint32_t i = mx.head;
		if (unlikely(i == NIL)) { /* roll back */
			for (int j = 0; j < k; j++) { uint32_t x = ptr2idx(v[j]); mx_next[x] = mx.head; mx.head = x; }
			pthread_mutex_unlock(&mx.m);
			return -1;
		}
		mx.head = mx_next[i];
		v[k] = idx2ptr(i);
	}
	pthread_mutex_unlock(&mx.m);
	return 0;
}
static inline void mx_put_bulk(void **v, int n, int tid)
{
	(void)tid;
	pthread_mutex_lock(&mx.m);
	for (int k = n - 1; k >= 0; k--) { uint32_t i = ptr2idx(v[k]); mx_next[i] = mx.head; mx.head = i; }
	pthread_mutex_unlock(&mx.m);
}

/* pthread spinlock freelist (extra reference point) */
static struct { pthread_spinlock_t s; uint32_t head; } ALIGNED sp;
static uint32_t sp_next[NBUF] ALIGNED;
static void sp_init(void)
{
	pthread_spin_init(&sp.s, PTHREAD_PROCESS_PRIVATE);
	for (uint32_t i = 0; i < NBUF; i++) sp_next[i] = i + 1 < NBUF ? i + 1 : NIL;
	sp.head = 0;
}
static inline void *sp_get(int tid)
{
	(void)tid;
	pthread_spin_lock(&sp.s);
	uint32_t i = sp.head;
	if (unlikely(i == NIL)) { pthread_spin_unlock(&sp.s); return NULL; }
	sp.head = sp_next[i];
	pthread_spin_unlock(&sp.s);
	return idx2ptr(i);
}
static inline void sp_put(void *p, int tid)
{
	(void)tid;
	uint32_t i = ptr2idx(p);
	pthread_spin_lock(&sp.s);
	sp_next[i] = sp.head;
	sp.head = i;
	pthread_spin_unlock(&sp.s);
}

/* ------------------------------------------------------------------ */
/* (b) tagged-index Treiber freelist: 64-bit CAS on {tag:32 | index:32} */
static _Atomic uint64_t tf_head ALIGNED;
static _Atomic uint32_t tf_next[NBUF] ALIGNED;
static void tf_init(void)
{
	for (uint32_t i = 0; i < NBUF; i++)
		atomic_store_explicit(&tf_next[i], i + 1 < NBUF ? i + 1 : NIL, memory_order_relaxed);
	atomic_store(&tf_head, 0);
}
/* Pop and push by index: the checked variant below shares them. */
static inline uint32_t tf_pop(void)
{
	uint64_t h = atomic_load_explicit(&tf_head, memory_order_acquire);
	for (;;) {
		uint32_t i = (uint32_t)h;
		if (unlikely(i == NIL)) return NIL;
		uint32_t n = atomic_load_explicit(&tf_next[i], memory_order_relaxed);
		uint64_t nh = (((h >> 32) + 1) << 32) | n;
		if (likely(atomic_compare_exchange_weak_explicit(&tf_head, &h, nh, memory_order_acquire,
								 memory_order_acquire)))
			return i;
	}
}
static inline void tf_push(uint32_t i)
{
	uint64_t h = atomic_load_explicit(&tf_head, memory_order_relaxed);
	uint64_t nh;
	do {
		atomic_store_explicit(&tf_next[i], (uint32_t)h, memory_order_relaxed);
		nh = (((h >> 32) + 1) << 32) | i;
	} while (unlikely(!atomic_compare_exchange_weak_explicit(&tf_head, &h, nh, memory_order_release,
								  memory_order_relaxed)));
}
static inline void *tf_get(int tid)
{
	(void)tid;
	uint32_t i = tf_pop();
	return likely(i != NIL) ? idx2ptr(i) : NULL;
}
static inline void tf_put(void *p, int tid) { (void)tid; tf_push(ptr2idx(p)); }

/* ------------------------------------------------------------------ */
/* Treiber stack with 128-bit {ptr, tag} CAS (cmpxchg16b)             */
struct tnode { struct tnode *next; };
static struct tnode t2_nodes[NBUF] ALIGNED;
typedef union { unsigned __int128 v; struct { struct tnode *ptr; uint64_t tag; }; } t2_head_t;
static t2_head_t t2_head __attribute__((aligned(CL)));
static void t2_init(void)
{
	for (uint32_t i = 0; i < NBUF; i++) t2_nodes[i].next = i + 1 < NBUF ? &t2_nodes[i + 1] : NULL;
	t2_head.ptr = &t2_nodes[0];
	t2_head.tag = 0;
}
static inline void *t2_get(int tid)
{
	(void)tid;
	t2_head_t o, n;
	o.tag = __atomic_load_n(&t2_head.tag, __ATOMIC_ACQUIRE);
	o.ptr = __atomic_load_n(&t2_head.ptr, __ATOMIC_ACQUIRE);
	for (;;) {
		if (unlikely(!o.ptr)) return NULL;
		n.ptr = __atomic_load_n(&o.ptr->next, __ATOMIC_RELAXED);
		n.tag = o.tag + 1;
		unsigned __int128 cur = __sync_val_compare_and_swap(&t2_head.v, o.v, n.v);
		if (likely(cur == o.v)) return idx2ptr((uint32_t)(o.ptr - t2_nodes));
		o.v = cur;
	}
}
static inline void t2_put(void *p, int tid)
{
	(void)tid;
	struct tnode *e = &t2_nodes[ptr2idx(p)];
	t2_head_t o, n;
	o.tag = __atomic_load_n(&t2_head.tag, __ATOMIC_RELAXED);
	o.ptr = __atomic_load_n(&t2_head.ptr, __ATOMIC_RELAXED);
	for (;;) {
		e->next = o.ptr;
		n.ptr = e;
		n.tag = o.tag + 1;
		unsigned __int128 cur = __sync_val_compare_and_swap(&t2_head.v, o.v, n.v);
		if (likely(cur == o.v)) return;
		o.v = cur;
	}
}

/* ------------------------------------------------------------------ */
/* (c) Concurrency Kit ck_stack (mpmc pop = cmpxchg16b w/ generation) */
static ck_stack_t cks __attribute__((aligned(CL)));
static ck_stack_entry_t cks_ent[NBUF] ALIGNED;
static void cks_init(void)
{
	ck_stack_init(&cks);
	for (int i = NBUF - 1; i >= 0; i--) ck_stack_push_mpmc(&cks, &cks_ent[i]);
}
static inline void *cks_get(int tid)
{
	(void)tid;
	ck_stack_entry_t *e = ck_stack_pop_mpmc(&cks);
	return likely(e != NULL) ? idx2ptr((uint32_t)(e - cks_ent)) : NULL;
}
static inline void cks_put(void *p, int tid)
{
	(void)tid;
	ck_stack_push_mpmc(&cks, &cks_ent[ptr2idx(p)]);
}

/* ck_ring MPMC used as a (FIFO) freelist of pointers */
#define CKR_SIZE (2 * NBUF)
static ck_ring_t ckr ALIGNED;
static ck_ring_buffer_t ckr_buf[CKR_SIZE] ALIGNED;
static void ckr_init(void)
{
	ck_ring_init(&ckr, CKR_SIZE);
	for (uint32_t i = 0; i < NBUF; i++)
		if (!ck_ring_enqueue_mpmc(&ckr, ckr_buf, idx2ptr(i))) die("ckr fill");
}
static inline void *ckr_get(int tid)
{
	(void)tid;
	void *p;
	return likely(ck_ring_dequeue_mpmc(&ckr, ckr_buf, &p)) ? p : NULL;
}
static inline void ckr_put(void *p, int tid)
{
	(void)tid;
	while (unlikely(!ck_ring_enqueue_mpmc(&ckr, ckr_buf, p))) cpu_relax();
}

/* ------------------------------------------------------------------ */
/* Variants, not peers: what libasyncpool's uncached pair checks, on   */
/* the two freelists above.  A word per buffer, generation << 1 |      */
/* leased, as the library's buffer word: the acquire owns the buffer   */
/* it took and stores its word; a release claims it by CAS from the    */
/* token's generation, so that a stale or a double release is refused, */
/* then gives the buffer back.  Tokens (generation << 32 | index) move */
/* as the pointer.  No cache, no lent count, no hints: the floor of    */
/* the checks on a stack and on a ring.                                */
static _Atomic uint64_t chk_word[NBUF] ALIGNED;
static void chk_init(void)
{
	for (uint32_t i = 0; i < NBUF; i++)
		atomic_store_explicit(&chk_word[i], 1u << 1, memory_order_relaxed); /* free, generation 1 */
}
static inline void *chk_lease(uint32_t i)
{
	uint64_t w = atomic_load_explicit(&chk_word[i], memory_order_relaxed);

	if (unlikely(w & 1)) die("checked: a free buffer's word says leased");
	atomic_store_explicit(&chk_word[i], w | 1, memory_order_relaxed);
	return (void *)(uintptr_t)((w >> 1) << 32 | i);
}
static inline uint32_t chk_back(void *p)
{
	uint64_t t = (uintptr_t)p, want = (t >> 32) << 1 | 1;
	uint32_t i = (uint32_t)t;

	if (unlikely(i >= NBUF)) die("checked: an index out of range");
	if (unlikely(!atomic_compare_exchange_strong_explicit(&chk_word[i], &want, ((t >> 32) + 1) << 1,
							       memory_order_relaxed, memory_order_relaxed)))
		die("checked: a release refused");
	return i;
}

/* The tagged-index Treiber stack and the ck_ring freelist above, checked. */
static void ctf_init(void) { chk_init(); tf_init(); }
static inline void *ctf_get(int tid)
{
	(void)tid;
	uint32_t i = tf_pop();
	return likely(i != NIL) ? chk_lease(i) : NULL;
}
static inline void ctf_put(void *p, int tid) { (void)tid; tf_push(chk_back(p)); }

static void ckc_init(void) { chk_init(); ckr_init(); }
static inline void *ckc_get(int tid)
{
	void *p = ckr_get(tid);
	return likely(p != NULL) ? chk_lease(ptr2idx(p)) : NULL;
}
static inline void ckc_put(void *p, int tid) { ckr_put(idx2ptr(chk_back(p)), tid); }

/* ------------------------------------------------------------------ */
/* sbitmap-style allocator (Linux lib/sbitmap.c idea): one 64-bit word */
/* per cache line, per-thread allocation hint, fetch_or/fetch_and.     */
#define SB_WORDS (NBUF / 64)
static struct { _Atomic uint64_t w; char pad[CL - 8]; } sb[SB_WORDS] ALIGNED;
static __thread uint32_t sb_hint;
static void sb_init(void) { for (int i = 0; i < (int)SB_WORDS; i++) atomic_store(&sb[i].w, 0); }
static inline void *sb_get(int tid)
{
	(void)tid;
	uint32_t w = sb_hint;
	for (uint32_t scanned = 0; scanned <= SB_WORDS;) {
		uint64_t bits = atomic_load_explicit(&sb[w].w, memory_order_relaxed);
		if (likely(~bits)) {
			int b = __builtin_ctzll(~bits);
			uint64_t m = 1ull << b;
			uint64_t old = atomic_fetch_or_explicit(&sb[w].w, m, memory_order_acquire);
			if (likely(!(old & m))) { sb_hint = w; return idx2ptr(w * 64 + b); }
			continue; /* lost race on this bit, retry word */
		}
		w = (w + 1) % SB_WORDS;
		scanned++;
	}
	return NULL;
}
static inline void sb_put(void *p, int tid)
{
	(void)tid;
	uint32_t i = ptr2idx(p);
	atomic_fetch_and_explicit(&sb[i / 64].w, ~(1ull << (i % 64)), memory_order_release);
}

/* ------------------------------------------------------------------ */
/* (d) DPDK rte_mempool                                               */
#ifdef HAVE_DPDK
static int dpdk_ok;
static struct rte_mempool *mp_ring0, *mp_ring256, *mp_lfs0, *mp_stk0, *mp_lfs256;
static struct rte_mempool *mp_chan;      /* the channel rows' peer: get, ring, put */
static struct rte_mempool *mk_pool(const char *name, const char *ops, unsigned cache)
{
	struct rte_mempool *mp = rte_mempool_create_empty(name, NBUF - 1, BUFSZ, cache, 0, SOCKET_ID_ANY, 0);
	if (!mp) { fprintf(stderr, "mempool %s create_empty failed: %s\n", name, rte_strerror(rte_errno)); return NULL; }
	if (rte_mempool_set_ops_byname(mp, ops, NULL) != 0) {
		fprintf(stderr, "mempool %s: ops %s not available\n", name, ops);
		rte_mempool_free(mp);
		return NULL;
	}
	if (rte_mempool_populate_default(mp) < 0) {
		fprintf(stderr, "mempool %s populate failed: %s\n", name, rte_strerror(rte_errno));
		rte_mempool_free(mp);
		return NULL;
	}
	return mp;
}
#define DPDK_VARIANT(tag, MP)                                                                   \
	static inline void *tag##_get(int tid) { (void)tid; void *p; return likely(rte_mempool_get(MP, &p) == 0) ? p : NULL; } \
	static inline void tag##_put(void *p, int tid) { (void)tid; rte_mempool_put(MP, p); }         \
	static inline int tag##_get_bulk(void **v, int n, int tid) { (void)tid; return rte_mempool_get_bulk(MP, v, n); } \
	static inline void tag##_put_bulk(void **v, int n, int tid) { (void)tid; rte_mempool_put_bulk(MP, v, n); }
DPDK_VARIANT(dr0, mp_ring0)
DPDK_VARIANT(dr256, mp_ring256)
DPDK_VARIANT(dlf0, mp_lfs0)
DPDK_VARIANT(dst0, mp_stk0)
DPDK_VARIANT(dlf256, mp_lfs256)
static void nop_init(void) {}
#endif

/* ------------------------------------------------------------------ */
/* SPSC handoff queue for xfer mode                                    */
#define Q_SIZE 1024u
static struct {
	_Atomic uint32_t head ALIGNED; /* written by consumer */
	_Atomic uint32_t tail ALIGNED; /* written by producer */
	void *slot[Q_SIZE] ALIGNED;
} q;
static void q_reset(void) { atomic_store(&q.head, 0); atomic_store(&q.tail, 0); }

/* ------------------------------------------------------------------ */
/* Loop generators                                                     */
typedef void (*loop_fn)(uint64_t iters, int tid);
static volatile uintptr_t sink;

#define GEN_LOOPS(tag, GET, PUT)                                                      \
	static void tag##_st(uint64_t n, int tid)                                     \
	{                                                                             \
		uintptr_t acc = 0;                                                    \
		for (uint64_t k = 0; k < n; k++) {                                    \
			void *p = GET(tid);                                           \
			if (unlikely(!p)) die(#tag " empty");                         \
			acc += (uintptr_t)p;                                          \
			PUT(p, tid);                                                  \
		}                                                                     \
		sink = acc;                                                           \
	}                                                                             \
	static void tag##_prod(uint64_t n, int tid)                                   \
	{                                                                             \
		uint32_t t = 0, hc = 0;                                               \
		for (uint64_t k = 0; k < n; k++) {                                    \
			void *p;                                                      \
			while (unlikely(!(p = GET(tid)))) cpu_relax();                \
			if (unlikely(t - hc >= Q_SIZE)) {                             \
				/* full: wait until >= 1/4 free (hysteresis) */       \
				for (;;) {                                            \
					hc = atomic_load_explicit(&q.head, memory_order_acquire); \
					if (t - hc <= Q_SIZE - Q_SIZE / 4) break;     \
					cpu_relax();                                  \
				}                                                     \
			}                                                             \
			q.slot[t & (Q_SIZE - 1)] = p;                                 \
			if ((++t & 15) == 0)                                          \
				atomic_store_explicit(&q.tail, t, memory_order_release); \
		}                                                                     \
		atomic_store_explicit(&q.tail, t, memory_order_release);             \
	}                                                                             \
	static void tag##_cons(uint64_t n, int tid)                                   \
	{                                                                             \
		uint32_t h = 0, tc = 0;                                               \
		for (uint64_t k = 0; k < n; k++) {                                    \
			if (unlikely(h == tc)) {                                      \
				atomic_store_explicit(&q.head, h, memory_order_release); \
				while ((tc = atomic_load_explicit(&q.tail, memory_order_acquire)) == h) \
					cpu_relax();                                  \
			}                                                             \
			void *p = q.slot[h & (Q_SIZE - 1)];                           \
			if ((++h & 15) == 0)                                          \
				atomic_store_explicit(&q.head, h, memory_order_release); \
			PUT(p, tid);                                                  \
		}                                                                     \
	}

/* bulk: n counts objects; 32 objects per call */
#define GEN_BULK(tag, GETB, PUTB)                                                     \
	static void tag##_st(uint64_t n, int tid)                                     \
	{                                                                             \
		void *v[BULK];                                                        \
		uintptr_t acc = 0;                                                    \
		for (uint64_t k = 0; k < n; k += BULK) {                              \
			if (unlikely(GETB(v, BULK, tid) != 0)) die(#tag " empty");    \
			acc += (uintptr_t)v[0];                                       \
			PUTB(v, BULK, tid);                                           \
		}                                                                     \
		sink = acc;                                                           \
	}


#ifdef HAVE_ASYNCPOOL
/* libasyncpool through its public API.  The lease of buffer i is kept in
 * lap_lease[i] (as a request struct would keep it), the pointer travels. */
static struct asyncpool_proactor *lap_pr;
static struct asyncpool *lap0, *lap256;
static char *lap_base0, *lap_base256;
static int have_lap;
static _Atomic long lap_spurious; /* -ENOBUFS from acquire_bulk with most buffers free */
static struct asyncpool *lap_mk(uint32_t cache, char **base)
{
	struct asyncpool_slab_options o;
	memset(&o, 0, sizeof(o));
	o.size = sizeof(o); o.buffer_size = BUFSZ; o.buffer_count = NBUF - 1; o.numa_node = -1;
	struct asyncpool_slab *s; struct asyncpool_region *r; struct asyncpool *p;
	if (asyncpool_slab_create(&o, &s) || asyncpool_proactor_register_slab(lap_pr, s, ASYNCPOOL_ACCESS_READ, &r)) die("lap slab/region");
	asyncpool_slab_unref(s);
	struct asyncpool_options po; memset(&po, 0, sizeof(po)); po.size = sizeof(po); po.cache_size = cache;
	if (asyncpool_create_opts(r, &po, &p)) die("lap create");
	*base = asyncpool_region_base(r);
	asyncpool_region_unref(r);
	return p;
}
static void lap_setup(void)
{
	if (asyncpool_proactor_create_memory(&lap_pr)) return;
	lap0 = lap_mk(0, &lap_base0);
	lap256 = lap_mk(256, &lap_base256);
	have_lap = 1;
}

#endif

/* baseline: no pool at all (measures loop / handoff overhead) */
static inline void *nil_get(int tid) { (void)tid; return region + 64; }
static inline void nil_put(void *p, int tid) { (void)tid; __asm__ volatile("" ::"r"(p)); }
static void nil_init(void) {}
GEN_LOOPS(nil, nil_get, nil_put)
GEN_LOOPS(mx, mx_get, mx_put)
GEN_LOOPS(sp, sp_get, sp_put)
GEN_LOOPS(tf, tf_get, tf_put)
GEN_LOOPS(t2, t2_get, t2_put)
GEN_LOOPS(cks, cks_get, cks_put)
GEN_LOOPS(ckr, ckr_get, ckr_put)
GEN_LOOPS(ctf, ctf_get, ctf_put)
GEN_LOOPS(ckc, ckc_get, ckc_put)
GEN_LOOPS(sb, sb_get, sb_put)
GEN_BULK(mxb, mx_get_bulk, mx_put_bulk)
#ifdef HAVE_ASYNCPOOL
/* libasyncpool as its users write it: the lease is a value kept where the
 * request is (the stack here); a hand-off moves the lease itself through
 * the same batched SPSC queue (48 bytes instead of an 8-byte pointer). */
static struct asyncpool_lease lq[Q_SIZE];
#define GEN_LAP(tag, P)                                                               \
	static void tag##_st(uint64_t n, int tid)                                     \
	{                                                                             \
		uintptr_t acc = 0;                                                    \
		(void)tid;                                                            \
		for (uint64_t k = 0; k < n; k++) {                                    \
			struct asyncpool_lease l;                                     \
			if (unlikely(asyncpool_acquire(P, &l))) die(#tag " empty");   \
			acc += l.buffer_index;                                        \
			asyncpool_lease_release(&l);                                  \
		}                                                                     \
		sink = acc;                                                           \
	}                                                                             \
	static void tag##_prod(uint64_t n, int tid)                                   \
	{                                                                             \
		uint32_t t = 0, hc = 0;                                               \
		(void)tid;                                                            \
		for (uint64_t k = 0; k < n; k++) {                                    \
			struct asyncpool_lease *l = &lq[t & (Q_SIZE - 1)];            \
			if (unlikely(t - hc >= Q_SIZE)) {                             \
				for (;;) {                                            \
					hc = atomic_load_explicit(&q.head, memory_order_acquire); \
					if (t - hc <= Q_SIZE - Q_SIZE / 4) break;     \
					cpu_relax();                                  \
				}                                                     \
			}                                                             \
			while (unlikely(asyncpool_acquire(P, l))) cpu_relax();        \
			if ((++t & 15) == 0)                                          \
				atomic_store_explicit(&q.tail, t, memory_order_release); \
		}                                                                     \
		atomic_store_explicit(&q.tail, t, memory_order_release);             \
	}                                                                             \
	static void tag##_cons(uint64_t n, int tid)                                   \
	{                                                                             \
		uint32_t h = 0, tc = 0;                                               \
		(void)tid;                                                            \
		for (uint64_t k = 0; k < n; k++) {                                    \
			if (unlikely(h == tc)) {                                      \
				atomic_store_explicit(&q.head, h, memory_order_release); \
				while ((tc = atomic_load_explicit(&q.tail, memory_order_acquire)) == h) \
					cpu_relax();                                  \
			}                                                             \
			asyncpool_lease_release(&lq[h & (Q_SIZE - 1)]);               \
			if ((++h & 15) == 0)                                          \
				atomic_store_explicit(&q.head, h, memory_order_release); \
		}                                                                     \
	}                                                                             \
	static void tag##b_st(uint64_t n, int tid)                                    \
	{                                                                             \
		struct asyncpool_lease l[BULK];                                       \
		uintptr_t acc = 0;                                                    \
		(void)tid;                                                            \
		for (uint64_t k = 0; k < n; k += BULK) {                              \
			int tries = 0;                                                \
			while (unlikely(asyncpool_acquire_bulk(P, l, BULK))) {        \
				lap_spurious++;                                       \
				if (++tries > 1000) die(#tag " bulk empty");          \
			}                                                             \
			acc += l[0].buffer_index;                                     \
			asyncpool_release_bulk(l, BULK);                              \
		}                                                                     \
		sink = acc;                                                           \
	}
GEN_LAP(lp0, lap0)
GEN_LAP(lp256, lap256)
/* The same through 8-byte tokens (since 1.1): no lease is built, a
 * hand-off moves the token as DPDK moves a pointer. */
static uint64_t tq[Q_SIZE];
#define GEN_LAPT(tag, P)                                                              \
	static void tag##_st(uint64_t n, int tid)                                     \
	{                                                                             \
		uintptr_t acc = 0;                                                    \
		(void)tid;                                                            \
		for (uint64_t k = 0; k < n; k++) {                                    \
			uint64_t t;                                                   \
			if (unlikely(asyncpool_acquire_tokens(P, &t, 1))) die(#tag " empty"); \
			acc += (uint32_t)t;                                           \
			if (unlikely(asyncpool_release_token(P, t))) die(#tag " release"); \
		}                                                                     \
		sink = acc;                                                           \
	}                                                                             \
	static void tag##_prod(uint64_t n, int tid)                                   \
	{                                                                             \
		uint32_t t = 0, hc = 0;                                               \
		(void)tid;                                                            \
		for (uint64_t k = 0; k < n; k++) {                                    \
			uint64_t *slot = &tq[t & (Q_SIZE - 1)];                       \
			if (unlikely(t - hc >= Q_SIZE)) {                             \
				for (;;) {                                            \
					hc = atomic_load_explicit(&q.head, memory_order_acquire); \
					if (t - hc <= Q_SIZE - Q_SIZE / 4) break;     \
					cpu_relax();                                  \
				}                                                     \
			}                                                             \
			while (unlikely(asyncpool_acquire_tokens(P, slot, 1))) cpu_relax(); \
			if ((++t & 15) == 0)                                          \
				atomic_store_explicit(&q.tail, t, memory_order_release); \
		}                                                                     \
		atomic_store_explicit(&q.tail, t, memory_order_release);             \
	}                                                                             \
	static void tag##_cons(uint64_t n, int tid)                                   \
	{                                                                             \
		uint32_t h = 0, tc = 0;                                               \
		(void)tid;                                                            \
		for (uint64_t k = 0; k < n; k++) {                                    \
			if (unlikely(h == tc)) {                                      \
				atomic_store_explicit(&q.head, h, memory_order_release); \
				while ((tc = atomic_load_explicit(&q.tail, memory_order_acquire)) == h) \
					cpu_relax();                                  \
			}                                                             \
			if (unlikely(asyncpool_release_token(P, tq[h & (Q_SIZE - 1)]))) die(#tag " release"); \
			if ((++h & 15) == 0)                                          \
				atomic_store_explicit(&q.head, h, memory_order_release); \
		}                                                                     \
	}                                                                             \
	static void tag##b_st(uint64_t n, int tid)                                    \
	{                                                                             \
		uint64_t t[BULK];                                                     \
		uintptr_t acc = 0;                                                    \
		(void)tid;                                                            \
		for (uint64_t k = 0; k < n; k += BULK) {                              \
			int tries = 0;                                                \
			while (unlikely(asyncpool_acquire_tokens(P, t, BULK))) {      \
				lap_spurious++;                                       \
				if (++tries > 1000) die(#tag " bulk empty");          \
			}                                                             \
			acc += (uint32_t)t[0];                                        \
			if (unlikely(asyncpool_release_tokens(P, t, BULK))) die(#tag " bulk release"); \
		}                                                                     \
		sink = acc;                                                           \
	}
#ifdef ASYNCPOOL_HAVE_TOKENS
GEN_LAPT(lt0, lap0)
GEN_LAPT(lt256, lap256)
#endif

/*
 * Variants of the cached token pair (issue 53, item 5), not peers and
 * not shipped: include/asyncpool/inline.h's __asyncpool_take() and
 * __asyncpool_put() rebuilt here on the calling thread's cache of
 * lap256 (every check of the header kept: the thread variable and the
 * layout version, the window, the index and generation, the owner
 * hint, the word compared and stored with the next generation, the
 * released hint), beside the shipped pair (the "tokens cache256" row)
 * and DPDK's cache256 row, compiled with the same flags as both:
 *   rebuilt   the header's pair as it is: what the rebuild itself costs;
 *   record16  (a) one 16-byte record per buffer, the word and both hints
 *             behind one pointer (struct pv_rec), where the pool has three
 *             arrays: one base register and one line per buffer; the
 *             records are made from the pool's arrays before the loop and
 *             the words and hints written back after it;
 *   rseqwin   (b) a window that stores nothing per call: the cost of a
 *             restartable-sequence window's fast path, not a working one:
 *             the thread's rseq area's rseq_cs compared with this window's
 *             descriptor and stored only when the kernel has cleared it
 *             (a preemption outside it), the gate compared, and the
 *             leave the store of n alone (no busy).  A real one needs the
 *             take and the put written in assembly between the
 *             descriptor's bounds, with one commit store: the put stores
 *             the word, the hint and the entry, so it needs a redesign
 *             (and a model) before it can be restartable; the flusher
 *             then fences with membarrier(MEMBARRIER_CMD_PRIVATE_
 *             EXPEDITED_RSEQ) instead of waiting for busy;
 *   rec+rseq  both;
 *   bare      the floor: a stack of tokens, no window, no check.
 * One thread, nothing else touches the pool while a variant runs; any
 * refusal stops the run.
 */
#if defined(ASYNCPOOL_INLINE_PATHS) && defined(ASYNCPOOL_HAVE_TOKENS) && defined(__x86_64__) && \
	defined(__has_include)
#if __has_include(<sys/rseq.h>)
#include <sys/rseq.h>
#define PEERS_PAIR_VARIANTS 1
#endif
#endif
#ifdef PEERS_PAIR_VARIANTS
#define PV_CHECKS 1u    /* the header's checks and window */
#define PV_RECORD 2u    /* (a) one record per buffer */
#define PV_RSEQ   4u    /* (b) the window without a store */
struct pv_rec {
	uint64_t state;         /* the word, as state[idx] */
	uint32_t owner_of;      /* as owner_of[idx] */
	uint32_t released;      /* as released[idx] */
};
static struct pv_rec *pv_recs;
/* A descriptor the kernel accepts (abort_ip after the signature) whose range is empty. */
__asm__(".pushsection .text\n\t.p2align 4\npv_rseq_start:\n\t.long 0x53053053\npv_rseq_abort:\n\tud2\n\t.popsection");
extern const char pv_rseq_start[], pv_rseq_abort[];
static struct rseq_cs pv_cs __attribute__((aligned(32)));
static int have_pv;
static void pv_setup(void)
{
	uint64_t t;

	if (!have_lap) return;
	/* Under valgrind the kernel's rseq is not registered (size 0): the
	 * rseqwin rows then store into libc's unregistered area, the same
	 * instructions. */
	printf("# rseq: %s by the C library (__rseq_size %u, __rseq_offset %td)\n",
	       __rseq_size >= 20 ? "registered" : "NOT registered", __rseq_size, __rseq_offset);
	pv_cs.version = 0;
	pv_cs.flags = 0;
	pv_cs.start_ip = (uintptr_t)pv_rseq_start;
	pv_cs.post_commit_offset = 0;
	pv_cs.abort_ip = (uintptr_t)pv_rseq_abort;
	/* the calling thread's cache becomes lap256's */
	if (asyncpool_acquire_tokens(lap256, &t, 1) || asyncpool_release_token(lap256, t)) return;
	pv_recs = aligned_alloc(64, ((NBUF * sizeof(*pv_recs)) + 63) / 64 * 64);
	have_pv = pv_recs != NULL;
}
static inline __attribute__((always_inline)) struct asyncpool_inline_cache *pv_cache(void)
{
	struct asyncpool_inline_cache *c = asyncpool_inline_tc;

	if (unlikely(c->abi != ASYNCPOOL_INLINE_ABI_EXPECTED)) die("variant: the cache's layout");
	return c;
}
static inline __attribute__((always_inline)) uint32_t pv_enter(struct asyncpool_inline_cache *c, struct rseq *rs,
								 const unsigned parts)
{
	if (parts & PV_RSEQ) {
		if (unlikely(__atomic_load_n(&rs->rseq_cs, __ATOMIC_RELAXED) != (uintptr_t)&pv_cs))
			__atomic_store_n(&rs->rseq_cs, (uintptr_t)&pv_cs, __ATOMIC_RELAXED);
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
		if (unlikely(__atomic_load_n(&c->gate, __ATOMIC_ACQUIRE) != lap256)) die("variant: the gate");
	} else if (parts & PV_CHECKS) {
		if (unlikely(!__asyncpool_enter_pool(c, lap256))) die("variant: the gate");
	}
	return __atomic_load_n(&c->n, __ATOMIC_RELAXED);
}
static inline __attribute__((always_inline)) void pv_leave(struct asyncpool_inline_cache *c, uint32_t n,
							   const unsigned parts)
{
	if (parts & PV_RSEQ)
		__atomic_store_n(&c->n, n, __ATOMIC_RELAXED);   /* the commit */
	else if (parts & PV_CHECKS)
		__asyncpool_leave_n(c, n);
	else
		c->n = n;
}
static inline __attribute__((always_inline)) void pv_loop(uint64_t ops, const unsigned parts)
{
	struct asyncpool_inline_cache *c;
	uintptr_t acc = 0;
	uint64_t t0;
	/* The thread's rseq area: its address kept in a register, as a
	 * field of the thread's cache would keep it (the floor). */
	struct rseq *rs = (struct rseq *)((char *)__builtin_thread_pointer() + __rseq_offset);

	/* the calling thread's cache becomes lap256's (another row's pool may have had it) */
	if (asyncpool_acquire_tokens(lap256, &t0, 1) || asyncpool_release_token(lap256, t0)) die("variant: lap256");
	c = pv_cache();
	if (c->gate != lap256 || c->n == 0) die("variant: the thread's cache is not lap256's");
	if (parts & PV_RECORD)
		for (uint32_t i = 0; i < c->count; i++)
			pv_recs[i] = (struct pv_rec){ c->state[i], c->owner_of[i], c->released[i] };
	for (uint64_t k = 0; k < ops; k++) {
		uint32_t n, idx, gen;
		uint64_t t, w;

		/* take */
		c = pv_cache();
		n = pv_enter(c, rs, parts);
		if (unlikely(n == 0)) die("variant: empty");
		t = c->tok[n - 1];
		pv_leave(c, n - 1, parts);
		__asm__ volatile("" : "+r"(t));         /* the caller's use of the token */
		acc += (uint32_t)t;

		/* put */
		c = pv_cache();
		idx = (uint32_t)t;
		gen = (uint32_t)(t >> 32);
		if (parts & (PV_CHECKS | PV_RECORD | PV_RSEQ)) {
			if (unlikely(idx >= c->count || gen - 1u >= 0xfffffffeu)) die("variant: a token");
		}
		n = pv_enter(c, rs, parts);
		if (unlikely(n == c->size)) die("variant: full");
		if (parts & PV_RECORD) {
			struct pv_rec *r = &pv_recs[idx];

			w = c->owned | gen;
			if (unlikely(__atomic_load_n(&r->owner_of, __ATOMIC_RELAXED) != c->id ||
				     __atomic_load_n(&r->state, __ATOMIC_RELAXED) != w))
				die("variant: a release refused");
			__atomic_store_n(&r->state, w + 1, __ATOMIC_RELAXED);
			__atomic_store_n(&r->released, gen, __ATOMIC_RELAXED);
		} else if (parts & (PV_CHECKS | PV_RSEQ)) {
			w = c->owned | gen;
			if (unlikely(__atomic_load_n(&c->owner_of[idx], __ATOMIC_RELAXED) != c->id ||
				     __atomic_load_n(&c->state[idx], __ATOMIC_RELAXED) != w))
				die("variant: a release refused");
			__atomic_store_n(&c->state[idx], w + 1, __ATOMIC_RELAXED);
			__atomic_store_n(&c->released[idx], gen, __ATOMIC_RELAXED);
		}
		c->tok[n] = t + ((uint64_t)1 << 32);
		pv_leave(c, n + 1, parts);
	}
	if (parts & PV_RECORD) {
		for (uint32_t i = 0; i < c->count; i++) {
			c->state[i] = pv_recs[i].state;
			c->released[i] = pv_recs[i].released;
		}
	} else if (!(parts & (PV_CHECKS | PV_RSEQ)) && ops) {
		/* bare: the generation moved in the entries only; put each word where they say */
		for (uint32_t j = 0; j < c->n; j++)
			c->state[(uint32_t)c->tok[j]] = c->owned | (c->tok[j] >> 32);
	}
	sink = acc;
}
static void pvr_st(uint64_t n, int tid) { (void)tid; pv_loop(n, PV_CHECKS); }
static void pva_st(uint64_t n, int tid) { (void)tid; pv_loop(n, PV_CHECKS | PV_RECORD); }
static void pvb_st(uint64_t n, int tid) { (void)tid; pv_loop(n, PV_RSEQ); }
static void pvab_st(uint64_t n, int tid) { (void)tid; pv_loop(n, PV_RSEQ | PV_RECORD); }
static void pv0_st(uint64_t n, int tid) { (void)tid; pv_loop(n, 0); }
#endif
#endif
#ifdef HAVE_DPDK
GEN_LOOPS(dr0, dr0_get, dr0_put)
GEN_LOOPS(dr256, dr256_get, dr256_put)
GEN_LOOPS(dlf0, dlf0_get, dlf0_put)
GEN_LOOPS(dst0, dst0_get, dst0_put)
GEN_LOOPS(dlf256, dlf256_get, dlf256_put)
GEN_BULK(dr0b, dr0_get_bulk, dr0_put_bulk)
GEN_BULK(dr256b, dr256_get_bulk, dr256_put_bulk)
#endif

/* ------------------------------------------------------------------ */
/* io_uring provided buffer ring: userspace recycle cost (add+advance) */
#ifdef HAVE_URING
static struct io_uring uring;
static struct io_uring_buf_ring *ubr;
#define UBR_ENTRIES 4096
static int uring_ok;
static void uring_setup(void)
{
	if (io_uring_queue_init(8, &uring, 0) != 0) { fprintf(stderr, "io_uring_queue_init failed\n"); return; }
	size_t sz = UBR_ENTRIES * sizeof(struct io_uring_buf);
	ubr = mmap(NULL, sz, PROT_READ | PROT_WRITE, MAP_ANONYMOUS | MAP_PRIVATE, -1, 0);
	if (ubr == MAP_FAILED) return;
	io_uring_buf_ring_init(ubr);
	struct io_uring_buf_reg reg = { .ring_addr = (unsigned long)ubr, .ring_entries = UBR_ENTRIES, .bgid = 1 };
	int r = io_uring_register_buf_ring(&uring, &reg, 0);
	if (r != 0) { fprintf(stderr, "io_uring_register_buf_ring: %d\n", r); return; }
	uring_ok = 1;
}
static void ubr_st(uint64_t n, int tid)
{
	(void)tid;
	int mask = io_uring_buf_ring_mask(UBR_ENTRIES);
	for (uint64_t k = 0; k < n; k++) {
		unsigned short bid = (unsigned short)(k & (UBR_ENTRIES - 1));
		io_uring_buf_ring_add(ubr, idx2ptr(bid), BUFSZ, bid, mask, 0);
		io_uring_buf_ring_advance(ubr, 1);
	}
}
static void ubrb_st(uint64_t n, int tid)
{
	(void)tid;
	int mask = io_uring_buf_ring_mask(UBR_ENTRIES);
	for (uint64_t k = 0; k < n; k += BULK) {
		for (int j = 0; j < BULK; j++) {
			unsigned short bid = (unsigned short)((k + j) & (UBR_ENTRIES - 1));
			io_uring_buf_ring_add(ubr, idx2ptr(bid), BUFSZ, bid, mask, j);
		}
		io_uring_buf_ring_advance(ubr, BULK);
	}
}
#endif

/* ------------------------------------------------------------------ */
/* Physical floors                                                     */
static _Atomic uint64_t fl_a ALIGNED, fl_b ALIGNED;
static volatile uint64_t fl_v ALIGNED;
static void cas_st(uint64_t n, int tid)
{
	_Atomic uint64_t *x = tid ? &fl_b : &fl_a;
	uint64_t e = atomic_load(x);
	for (uint64_t k = 0; k < n; k++) {
		/* dependent chain: each CAS expects the value the previous one wrote */
		while (!atomic_compare_exchange_weak_explicit(x, &e, e + 1, memory_order_acq_rel, memory_order_relaxed)) {}
		e++;
	}
}
static void xadd_st(uint64_t n, int tid)
{
	_Atomic uint64_t *x = tid ? &fl_b : &fl_a;
	for (uint64_t k = 0; k < n; k++) atomic_fetch_add_explicit(x, 1, memory_order_acq_rel);
}
static void ldst_st(uint64_t n, int tid)
{
	(void)tid;
	for (uint64_t k = 0; k < n; k++) fl_v = fl_v + 1; /* one load + one store, dependent */
}
/* dependent add chain, 8 adds/iter -> ns per cycle estimate */
static void addchain_st(uint64_t n, int tid)
{
	uint64_t x = (uint64_t)tid;
	for (uint64_t k = 0; k < n; k++)
		__asm__ volatile("add $1,%0\n\tadd $1,%0\n\tadd $1,%0\n\tadd $1,%0\n\t"
				 "add $1,%0\n\tadd $1,%0\n\tadd $1,%0\n\tadd $1,%0" : "+r"(x));
	sink = x;
}
/* cache-line ping-pong between the two CPUs: n round trips */
static _Atomic uint64_t pp_line ALIGNED;
static void pingpong(uint64_t n, int tid)
{
	for (uint64_t k = 0; k < n; k++) {
		uint64_t want = 2 * k + (uint64_t)tid;
		while (atomic_load_explicit(&pp_line, memory_order_acquire) != want) cpu_relax();
		atomic_store_explicit(&pp_line, want + 1, memory_order_release);
	}
}
/* contended versions: both threads on the same line */
static void cas_shared(uint64_t n, int tid)
{
	(void)tid;
	uint64_t e = atomic_load_explicit(&fl_a, memory_order_relaxed);
	for (uint64_t k = 0; k < n; k++)
		while (!atomic_compare_exchange_weak_explicit(&fl_a, &e, e + 1, memory_order_acq_rel, memory_order_relaxed)) {}
}
static void xadd_shared(uint64_t n, int tid)
{
	(void)tid;
	for (uint64_t k = 0; k < n; k++) atomic_fetch_add_explicit(&fl_a, 1, memory_order_acq_rel);
}

/* ------------------------------------------------------------------ */
/* Harness                                                             */
struct targ { loop_fn fn; uint64_t n; int cpu, tid; double t0, t1, c0, c1; int reg, proc; };
static inline double thread_cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}
/* lowest on-CPU fraction (thread cpu time / wall) seen in 2-thread runs */
static double oncpu_min = 1.0, oncpu_sum; static int oncpu_n;
static double last_oncpu; /* min on-CPU fraction of the two threads in the last run2() */
#define CLEAN 0.97        /* a 2-thread sample is "clean" if both threads were >=97% on-CPU */
/* system-wide CPU accounting: returns busy jiffies, total jiffies */
static void proc_stat(unsigned long long *busy, unsigned long long *total)
{
	unsigned long long v[10] = { 0 };
	FILE *f = fopen("/proc/stat", "r");
	if (!f) { *busy = *total = 0; return; }
	if (fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]) != 8) {}
	fclose(f);
	*total = 0;
	for (int i = 0; i < 8; i++) *total += v[i];
	*busy = *total - v[3] - v[4];
}
/*
 * What the two sides of a run share, in one MAP_SHARED mapping so that
 * they may be two processes: the start line, their timings, the words of
 * the ping-pong rows, the receiving side's checksum, the latency samples.
 */
#define LAT_MAX (1u << 22)
struct sides {
	_Atomic int ready;
	struct targ a[2];
	_Atomic uint64_t line ALIGNED;          /* the cache line of the ping-pong rows */
	_Atomic uint32_t word ALIGNED;          /* the futex of the wake-up rows */
	uint64_t got ALIGNED;                   /* the sum of the objects side 1 received */
	uint32_t lat[LAT_MAX];                  /* ns of each round trip of a latency row */
};
static struct sides *sides;
static void *worker(void *a_)
{
	struct targ *a = a_;
	pin(a->cpu);
#ifdef HAVE_DPDK
	/*
	 * A side's per-lcore mempool caches: a thread registers as a
	 * non-EAL lcore; a forked process cannot (its copy of the EAL's
	 * lcore table would give both sides the same id, so the same
	 * cache), and takes EAL lcore 0 or 1 (-l 0-1), whose caches no
	 * other thread or process uses while it runs.
	 */
	if (a->reg && a->proc)
		RTE_PER_LCORE(_lcore_id) = (unsigned)a->tid;
	else if (a->reg && rte_thread_register() != 0)
		die("rte_thread_register");
#endif
	sb_hint = a->tid ? SB_WORDS / 2 : 0;
	atomic_fetch_add(&sides->ready, 1);
	while (atomic_load(&sides->ready) < 2) cpu_relax();
	a->t0 = now_ns();
	a->c0 = thread_cpu_ns();
	a->fn(a->n, a->tid);
	a->c1 = thread_cpu_ns();
	a->t1 = now_ns();
#ifdef HAVE_DPDK
	if (a->reg) {
		/* flush this lcore's mempool caches back so the next run starts clean */
		unsigned lc = rte_lcore_id();
		struct rte_mempool *mps[] = { mp_ring0, mp_ring256, mp_lfs0, mp_stk0, mp_lfs256, mp_chan };
		for (unsigned i = 0; i < 6; i++)
			if (mps[i] && mps[i]->cache_size) rte_mempool_cache_flush(rte_mempool_default_cache(mps[i], lc), mps[i]);
		if (!a->proc)
			rte_thread_unregister();
	}
#endif
	return NULL;
}
/*
 * fnA on CPU0, fnB on CPU1, two threads or (procs) two processes;
 * returns ops/ns*1e3 = Mops/s
 */
static double run_sides(loop_fn fa, loop_fn fb, uint64_t n_each, uint64_t total_ops, int reg, int procs)
{
	struct targ *a = sides->a;
	a[0] = (struct targ){ .fn = fa, .n = n_each, .cpu = 0, .tid = 0, .reg = reg, .proc = procs };
	a[1] = (struct targ){ .fn = fb, .n = n_each, .cpu = 1, .tid = 1, .reg = reg, .proc = procs };
	atomic_store(&sides->ready, 0);
	q_reset();
	if (procs) {
		pid_t pid[2];
		fflush(stdout);
		fflush(stderr);
		for (int i = 0; i < 2; i++) {
			pid[i] = fork();
			if (pid[i] < 0) die("fork");
			if (pid[i] == 0) { worker(&a[i]); _exit(0); }
		}
		for (int i = 0; i < 2; i++) {
			int st;
			if (waitpid(pid[i], &st, 0) != pid[i] || !WIFEXITED(st) || WEXITSTATUS(st)) die("a side's process failed");
		}
	} else {
		pthread_t th[2];
		for (int i = 0; i < 2; i++) pthread_create(&th[i], NULL, worker, &a[i]);
		for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
	}
	last_oncpu = 1.0;
	for (int i = 0; i < 2; i++) {
		double fr = (a[i].c1 - a[i].c0) / (a[i].t1 - a[i].t0);
		if (fr < last_oncpu) last_oncpu = fr;
		if (fr < oncpu_min) oncpu_min = fr;
		oncpu_sum += fr;
		oncpu_n++;
	}
	double t0 = a[0].t0 < a[1].t0 ? a[0].t0 : a[1].t0;
	double t1 = a[0].t1 > a[1].t1 ? a[0].t1 : a[1].t1;
	return total_ops / (t1 - t0) * 1e3;
}

static double run2(loop_fn fa, loop_fn fb, uint64_t n_each, uint64_t total_ops, int reg)
{
	return run_sides(fa, fb, n_each, total_ops, reg, 0);
}

/* ------------------------------------------------------------------ */
/* Channels: one side hands 8-byte objects to the other                */
/*
 * A row of chan_rows[] (in main()) moves objects from side 0 (CPU0) to
 * side 1 (CPU1), as two threads or, with procs, as two processes (fork
 * after setup: what the two share must be in MAP_SHARED memory, as
 * sides is).  Each pair of functions is a column, NULL to leave it out:
 *   send1/recv1    n objects, one per call: Mops/s of objects;
 *   send32/recv32  the same, BULK per call;
 *   ping/pong      one token back and forth n times, ping recording each
 *                  round trip in sides->lat[]: one way is half of it.
 * Objects are 1..n: the receiving side sums them into sides->got, and a
 * row that loses or repeats one stops the run.  div divides n (rows with
 * a system call per call).  vs_tput and vs_lat name the rows that the
 * ratios at the end divide by.
 */
struct chan_row {
	const char *name;
	int procs;
	int reg;                        /* each side a DPDK lcore, with its mempool caches */
	unsigned div;
	int (*setup)(void);             /* before each sample: 0, or the row is n/a */
	void (*teardown)(void);         /* after each sample; may be NULL */
	loop_fn send1, recv1, send32, recv32, ping, pong;
	const char *vs_tput, *vs_lat;
	const char *vs_tput2;           /* a second row to divide the throughput by */
};

static inline uint64_t lat_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}
#define LAT_RECORD(k, t0) (sides->lat[k] = (uint32_t)(lat_now() - (t0)))

/* The cache line alone, busy-polled: the floor of any busy-polled hand-off. */
static int line_setup(void) { atomic_store(&sides->line, 0); return 0; }
static void line_ping(uint64_t n, int tid)
{
	(void)tid;
	for (uint64_t k = 0; k < n; k++) {
		uint64_t t0 = lat_now();
		atomic_store_explicit(&sides->line, 2 * k + 1, memory_order_release);
		while (atomic_load_explicit(&sides->line, memory_order_acquire) != 2 * k + 2) cpu_relax();
		LAT_RECORD(k, t0);
	}
}
static void line_pong(uint64_t n, int tid)
{
	(void)tid;
	for (uint64_t k = 0; k < n; k++) {
		while (atomic_load_explicit(&sides->line, memory_order_acquire) != 2 * k + 1) cpu_relax();
		atomic_store_explicit(&sides->line, 2 * k + 2, memory_order_release);
	}
}

/*
 * A bare futex wake-up: the waiting side sleeps in FUTEX_WAIT until the
 * other changes the word and wakes it.  Shared (not private) futexes, as
 * between processes, for the threads too.
 */
static long futex(_Atomic uint32_t *w, int op, uint32_t v)
{
	return syscall(SYS_futex, w, op, v, NULL, NULL, 0);
}
static int futex_setup(void) { atomic_store(&sides->word, 0); return 0; }
static void futex_ping(uint64_t n, int tid)
{
	(void)tid;
	for (uint64_t k = 0; k < n; k++) {
		uint64_t t0 = lat_now();
		uint32_t v;
		atomic_store_explicit(&sides->word, (uint32_t)(2 * k + 1), memory_order_release);
		futex(&sides->word, FUTEX_WAKE, 1);
		while ((v = atomic_load_explicit(&sides->word, memory_order_acquire)) != (uint32_t)(2 * k + 2))
			futex(&sides->word, FUTEX_WAIT, v);
		LAT_RECORD(k, t0);
	}
}
static void futex_pong(uint64_t n, int tid)
{
	(void)tid;
	for (uint64_t k = 0; k < n; k++) {
		uint32_t v;
		while ((v = atomic_load_explicit(&sides->word, memory_order_acquire)) != (uint32_t)(2 * k + 1))
			futex(&sides->word, FUTEX_WAIT, v);
		atomic_store_explicit(&sides->word, (uint32_t)(2 * k + 2), memory_order_release);
		futex(&sides->word, FUTEX_WAKE, 1);
	}
}

#ifdef HAVE_DPDK
/* DPDK rte_ring, single producer and single consumer, between two threads. */
#define SPSC_RING_SIZE 1024
static struct rte_ring *ring_ab, *ring_ba;      /* side 0 -> 1, and back for the ping-pong */
static int ring_setup(void)
{
	if (!ring_ab || !ring_ba) return -1;
	rte_ring_reset(ring_ab);
	rte_ring_reset(ring_ba);
	return 0;
}
static void ring_send1(uint64_t n, int tid)
{
	(void)tid;
	for (uint64_t k = 0; k < n; k++)
		while (unlikely(rte_ring_sp_enqueue(ring_ab, (void *)(uintptr_t)(k + 1)))) cpu_relax();
}
static void ring_recv1(uint64_t n, int tid)
{
	uint64_t sum = 0;
	void *p;
	(void)tid;
	for (uint64_t k = 0; k < n; k++) {
		while (unlikely(rte_ring_sc_dequeue(ring_ab, &p))) cpu_relax();
		sum += (uintptr_t)p;
	}
	sides->got = sum;
}
static void ring_send32(uint64_t n, int tid)
{
	void *v[BULK];
	(void)tid;
	for (uint64_t k = 0; k < n; k += BULK) {
		for (int j = 0; j < BULK; j++) v[j] = (void *)(uintptr_t)(k + j + 1);
		while (unlikely(!rte_ring_sp_enqueue_bulk(ring_ab, v, BULK, NULL))) cpu_relax();
	}
}
static void ring_recv32(uint64_t n, int tid)
{
	uint64_t sum = 0;
	void *v[BULK];
	(void)tid;
	for (uint64_t k = 0; k < n; k += BULK) {
		while (unlikely(!rte_ring_sc_dequeue_bulk(ring_ab, v, BULK, NULL))) cpu_relax();
		for (int j = 0; j < BULK; j++) sum += (uintptr_t)v[j];
	}
	sides->got = sum;
}
static void ring_ping(uint64_t n, int tid)
{
	void *p;
	(void)tid;
	for (uint64_t k = 0; k < n; k++) {
		uint64_t t0 = lat_now();
		while (unlikely(rte_ring_sp_enqueue(ring_ab, (void *)(uintptr_t)(k + 1)))) cpu_relax();
		while (rte_ring_sc_dequeue(ring_ba, &p)) cpu_relax();
		LAT_RECORD(k, t0);
	}
}
static void ring_pong(uint64_t n, int tid)
{
	void *p;
	(void)tid;
	for (uint64_t k = 0; k < n; k++) {
		while (rte_ring_sc_dequeue(ring_ab, &p)) cpu_relax();
		while (unlikely(rte_ring_sp_enqueue(ring_ba, p))) cpu_relax();
	}
}
#endif

#ifdef HAVE_DPDK
/*
 * DPDK end to end, the peer a pipeline has (issue 53): side 0 takes a
 * buffer from rte_mempool (its per-lcore cache of 256), enqueues it on the
 * SP/SC rte_ring; side 1 dequeues it and puts it back into the mempool (its
 * own cache).  As the libasyncpool channel rows: 4,095 buffers of 64
 * bytes, cache 256, ring of 1,024; one per call, and 32 (get_bulk,
 * enqueue_bulk; dequeue_burst of up to 32, put_bulk of what came).  The
 * buffers are pointers, not values: the receiving side counts them, and
 * a count short of n stops the run.  Between processes: with --no-huge,
 * DPDK 22.11's memory is one MAP_SHARED memfd ("memfd:nohuge"), which a
 * forked side shares at the same addresses; a secondary process
 * (--proc-type=secondary) cannot attach without hugepages.
 */
#define CHAN_MP_N 4095u
static int mpr_setup(void)
{
	if (!mp_chan || !ring_ab) return -1;
	rte_ring_reset(ring_ab);
	if (rte_mempool_avail_count(mp_chan) != CHAN_MP_N) die("the DPDK mempool+ring rows lost a buffer");
	return 0;
}
static void mpr_send1(uint64_t n, int tid)
{
	void *p;
	(void)tid;
	for (uint64_t k = 0; k < n; k++) {
		while (unlikely(rte_mempool_get(mp_chan, &p))) cpu_relax();
		while (unlikely(rte_ring_sp_enqueue(ring_ab, p))) cpu_relax();
	}
}
static void mpr_recv1(uint64_t n, int tid)
{
	uint64_t k;
	void *p;
	(void)tid;
	for (k = 0; k < n; k++) {
		while (unlikely(rte_ring_sc_dequeue(ring_ab, &p))) cpu_relax();
		rte_mempool_put(mp_chan, p);
	}
	sides->got = k * (k + 1) / 2;
}
static void mpr_send32(uint64_t n, int tid)
{
	void *v[BULK];
	(void)tid;
	for (uint64_t k = 0; k < n; k += BULK) {
		while (unlikely(rte_mempool_get_bulk(mp_chan, v, BULK))) cpu_relax();
		while (unlikely(!rte_ring_sp_enqueue_bulk(ring_ab, v, BULK, NULL))) cpu_relax();
	}
}
static void mpr_recv32(uint64_t n, int tid)
{
	uint64_t got = 0;
	void *v[BULK];
	(void)tid;
	while (got < n) {
		unsigned r = rte_ring_sc_dequeue_burst(ring_ab, v, BULK, NULL);
		if (!r) { cpu_relax(); continue; }
		rte_mempool_put_bulk(mp_chan, v, r);
		got += r;
	}
	sides->got = got * (got + 1) / 2;
}
/* One token's trip on one thread (PEERS_ONLY only), as chst_run() above. */
static void mprst_init(void) { if (mpr_setup()) die("mpr_setup"); }
static inline void mprst_run(uint64_t n, uint32_t per)
{
	void *v[BULK];

	for (uint64_t k = 0; k < n; k += BULK) {
		for (uint32_t j = 0; j < BULK; j += per)
			if (per == 1 ? rte_mempool_get(mp_chan, &v[j]) != 0 ||
					       rte_ring_sp_enqueue(ring_ab, v[j]) != 0
				     : rte_mempool_get_bulk(mp_chan, v + j, per) != 0 ||
					       rte_ring_sp_enqueue_bulk(ring_ab, v + j, per, NULL) != per)
				die("mempool+ring-st: get or enqueue");
		for (uint32_t j = 0; j < BULK; j += per) {
			if (per == 1 ? rte_ring_sc_dequeue(ring_ab, &v[j]) != 0
				     : rte_ring_sc_dequeue_burst(ring_ab, v + j, per, NULL) != per)
				die("mempool+ring-st: dequeue");
			if (per == 1)
				rte_mempool_put(mp_chan, v[j]);
			else
				rte_mempool_put_bulk(mp_chan, v + j, per);
		}
	}
}
static void mprst1_st(uint64_t n, int tid) { (void)tid; mprst_run(n, 1); }
static void mprst32_st(uint64_t n, int tid) { (void)tid; mprst_run(n, BULK); }
#endif

/* A pipe between two processes, tokens of 8 bytes: what examples/shared-producer-consumer.c does. */
static int pipe_ab[2] = { -1, -1 }, pipe_ba[2] = { -1, -1 };
static int pipe_setup(void) { return pipe(pipe_ab) || pipe(pipe_ba) ? -1 : 0; }
static void pipe_teardown(void)
{
	for (int i = 0; i < 2; i++) {
		close(pipe_ab[i]);
		close(pipe_ba[i]);
		pipe_ab[i] = pipe_ba[i] = -1;
	}
}
static void pipe_io(int fd, void *buf, size_t len, int write_it)
{
	for (size_t done = 0; done < len;) {
		ssize_t r = write_it ? write(fd, (char *)buf + done, len - done) : read(fd, (char *)buf + done, len - done);
		if (r <= 0) die("pipe");
		done += (size_t)r;
	}
}
static void pipe_send1(uint64_t n, int tid)
{
	(void)tid;
	for (uint64_t k = 0; k < n; k++) {
		uint64_t t = k + 1;
		pipe_io(pipe_ab[1], &t, sizeof(t), 1);
	}
}
static void pipe_recv1(uint64_t n, int tid)
{
	uint64_t sum = 0, t;
	(void)tid;
	for (uint64_t k = 0; k < n; k++) {
		pipe_io(pipe_ab[0], &t, sizeof(t), 0);
		sum += t;
	}
	sides->got = sum;
}
static void pipe_send32(uint64_t n, int tid)
{
	uint64_t t[BULK];
	(void)tid;
	for (uint64_t k = 0; k < n; k += BULK) {
		for (int j = 0; j < BULK; j++) t[j] = k + j + 1;
		pipe_io(pipe_ab[1], t, sizeof(t), 1);
	}
}
static void pipe_recv32(uint64_t n, int tid)
{
	uint64_t sum = 0, t[BULK];
	(void)tid;
	for (uint64_t k = 0; k < n; k += BULK) {
		pipe_io(pipe_ab[0], t, sizeof(t), 0);
		for (int j = 0; j < BULK; j++) sum += t[j];
	}
	sides->got = sum;
}
static void pipe_ping(uint64_t n, int tid)
{
	(void)tid;
	for (uint64_t k = 0; k < n; k++) {
		uint64_t t0 = lat_now(), t = k + 1;
		pipe_io(pipe_ab[1], &t, sizeof(t), 1);
		pipe_io(pipe_ba[0], &t, sizeof(t), 0);
		LAT_RECORD(k, t0);
	}
}
static void pipe_pong(uint64_t n, int tid)
{
	uint64_t t;
	(void)tid;
	for (uint64_t k = 0; k < n; k++) {
		pipe_io(pipe_ab[0], &t, sizeof(t), 0);
		pipe_io(pipe_ba[1], &t, sizeof(t), 1);
	}
}

/*
 * The libasyncpool channel (issue 33): a shared pool with two channels,
 * side 0 holding the sending end of channel 0 and the receiving end of
 * channel 1, side 1 the others.  Throughput: side 0 acquires tokens from
 * its thread cache (32 at a time) and sends them, side 1 receives and
 * releases them into its cache, as a program does; the receiving side
 * counts what it got (the object is the buffer, not a value: its sum of
 * 1..count checks that none was lost or repeated).  Latency: one buffer's
 * token goes back and forth over the two channels, busy-polling; and the
 * same with both sides blocked in asyncpool_channel_recv_wait().  In the
 * processes rows the sides are forked children using the parent's handle
 * (as a benchmark may: it never dies); each side opens its own ends (below)
 * and closes them when its loop ends, and each flushes its
 * thread cache when its loop ends, so that no buffer stays in a cache of
 * a process that exits.
 */
#define CH_BUFFERS 4096
#define CH_CAP     1024
static struct asyncpool_shared *ch_sp;
static struct asyncpool *ch_pool;
/*
 * Each side opens the ends it uses when it starts and closes them when it
 * ends: a handle keeps its end's position in the memory of the process
 * that uses it, so a forked side must not use a copy that its parent, or
 * an earlier side, left behind (asyncpool_channel_open(3)).
 */
static pid_t ch_pid;             /* the process that created ch_sp */
static struct asyncpool_channel *ch_end(uint32_t c, uint32_t end)
{
	struct asyncpool_channel *e;
	/* A forked side opens the pool itself (since 1.10 an end opened
	 * with an inherited handle is -ECHILD: asyncpool_channel_open(3)). */
	if (getpid() != ch_pid) {
		struct asyncpool_shared_open_options o;
		struct asyncpool_shared *sp;
		memset(&o, 0, sizeof(o));
		o.size = sizeof(o);
		o.fd = asyncpool_shared_fd(ch_sp);
		if (asyncpool_shared_open(&o, &sp)) die("asyncpool_shared_open");
		ch_sp = sp;
		ch_pool = asyncpool_shared_pool(sp);
		if (asyncpool_set_cache(ch_pool, 256)) die("asyncpool_set_cache");
		ch_pid = getpid();
	}
	if (asyncpool_channel_open(ch_pool, c, end, &e)) die("asyncpool_channel_open");
	return e;
}
#define CH_TX(c) ch_end(c, ASYNCPOOL_CHANNEL_SEND)
#define CH_RX(c) ch_end(c, ASYNCPOOL_CHANNEL_RECV)
static int ch_setup(void)
{
	if (!ch_sp) {
		struct asyncpool_shared_options o;
		memset(&o, 0, sizeof(o));
		o.size = sizeof(o);
		o.buffer_size = 64;
		o.buffer_count = CH_BUFFERS;
		o.channels = 2;
		o.channel_capacity = CH_CAP;
		if (asyncpool_shared_create(&o, &ch_sp)) return -1;
		ch_pid = getpid();
		ch_pool = asyncpool_shared_pool(ch_sp);
		if (asyncpool_set_cache(ch_pool, 256)) return -1;
	}
	if (asyncpool_available(ch_pool) != CH_BUFFERS) die("the channel rows lost a buffer");
	return 0;
}
static void ch_send_n(uint64_t n, uint32_t per)
{
	struct asyncpool_channel *tx = CH_TX(0);
	uint64_t t[BULK];
	uint32_t have = 0, at = 0;
	for (uint64_t k = 0; k < n;) {
		int r;
		if (at == have) {
			while (asyncpool_acquire_tokens(ch_pool, t, BULK)) cpu_relax();
			have = BULK;
			at = 0;
		}
		uint32_t want = per < have - at ? per : have - at;
		if (want > n - k) want = (uint32_t)(n - k);
		while ((r = want == 1 ? (asyncpool_channel_send_token(tx, t[at]) ? -1 : 1)
				      : asyncpool_channel_send_tokens(tx, t + at, want)) <= 0) cpu_relax();
		at += (uint32_t)r;
		k += (uint64_t)r;
	}
	if (at < have) asyncpool_release_tokens(ch_pool, t + at, have - at);
	asyncpool_channel_close(tx);
	asyncpool_cache_flush(ch_pool);
}
static void ch_recv_n(uint64_t n, uint32_t per)
{
	struct asyncpool_channel *rx = CH_RX(0);
	uint64_t t[BULK], got = 0;
	while (got < n) {
		uint32_t want = per < n - got ? per : (uint32_t)(n - got);
		int r = asyncpool_channel_recv_tokens(rx, t, want);
		if (r <= 0) { cpu_relax(); continue; }
		asyncpool_release_tokens(ch_pool, t, (uint32_t)r);
		got += (uint64_t)r;
	}
	sides->got = n * (n + 1) / 2;
	asyncpool_channel_close(rx);
	asyncpool_cache_flush(ch_pool);
}
/*
 * One token's trip through a channel on one thread, for counting its
 * instructions (PEERS_ONLY only: cachegrind runs threads one at a time,
 * and two busy-polling sides would count their polls): blocks of 32
 * taken from the thread's cache, sent per at a time, received per at a
 * time and released, as ch_send_n() and ch_recv_n() do; and the same
 * through DPDK's mempool and SP/SC ring.  One op: one token.
 */
static int have_chst;
static void chst_init(void) { if (ch_setup()) die("ch_setup"); }
static inline void chst_run(uint64_t n, uint32_t per)
{
	struct asyncpool_channel *tx = CH_TX(0), *rx = CH_RX(0);
	uint64_t t[BULK];

	for (uint64_t k = 0; k < n; k += BULK) {
		if (asyncpool_acquire_tokens(ch_pool, t, BULK)) die("chan-st: acquire");
		for (uint32_t j = 0; j < BULK; j += per)
			if (per == 1 ? asyncpool_channel_send_token(tx, t[j]) != 0
				     : asyncpool_channel_send_tokens(tx, t + j, per) != (int)per)
				die("chan-st: send");
		for (uint32_t j = 0; j < BULK; j += per) {
			if (asyncpool_channel_recv_tokens(rx, t + j, per) != (int)per) die("chan-st: recv");
			if (asyncpool_release_tokens(ch_pool, t + j, per)) die("chan-st: release");
		}
	}
	asyncpool_channel_close(tx);
	asyncpool_channel_close(rx);
	asyncpool_cache_flush(ch_pool);
}
static void chst1_st(uint64_t n, int tid) { (void)tid; chst_run(n, 1); }
static void chst32_st(uint64_t n, int tid) { (void)tid; chst_run(n, BULK); }
static void ch_send1(uint64_t n, int tid) { (void)tid; ch_send_n(n, 1); }
static void ch_recv1(uint64_t n, int tid) { (void)tid; ch_recv_n(n, 1); }
static void ch_send32(uint64_t n, int tid) { (void)tid; ch_send_n(n, BULK); }
static void ch_recv32(uint64_t n, int tid) { (void)tid; ch_recv_n(n, BULK); }
static void ch_ping(uint64_t n, int tid)
{
	struct asyncpool_channel *tx = CH_TX(0), *rx = CH_RX(1);
	uint64_t t;
	(void)tid;
	while (asyncpool_acquire_tokens(ch_pool, &t, 1)) cpu_relax();
	for (uint64_t k = 0; k < n; k++) {
		uint64_t t0 = lat_now();
		while (asyncpool_channel_send_token(tx, t)) cpu_relax();
		while (asyncpool_channel_recv_tokens(rx, &t, 1) != 1) cpu_relax();
		LAT_RECORD(k, t0);
	}
	asyncpool_channel_close(tx);
	asyncpool_channel_close(rx);
	asyncpool_release_token(ch_pool, t);
	asyncpool_cache_flush(ch_pool);
}
static void ch_pong(uint64_t n, int tid)
{
	struct asyncpool_channel *rx = CH_RX(0), *tx = CH_TX(1);
	uint64_t t;
	(void)tid;
	for (uint64_t k = 0; k < n; k++) {
		while (asyncpool_channel_recv_tokens(rx, &t, 1) != 1) cpu_relax();
		while (asyncpool_channel_send_token(tx, t)) cpu_relax();
	}
	asyncpool_channel_close(rx);
	asyncpool_channel_close(tx);
}
/* The same, each side asleep in asyncpool_channel_recv_wait() until the other sends. */
static void chw_ping(uint64_t n, int tid)
{
	struct asyncpool_channel *tx = CH_TX(0), *rx = CH_RX(1);
	struct asyncpool_lease l;
	(void)tid;
	if (asyncpool_acquire(ch_pool, &l)) die("acquire");
	for (uint64_t k = 0; k < n; k++) {
		uint64_t t0 = lat_now();
		while (asyncpool_channel_send(tx, &l)) cpu_relax();
		if (asyncpool_channel_recv_wait(rx, &l, -1)) die("recv_wait");
		LAT_RECORD(k, t0);
	}
	asyncpool_channel_close(tx);
	asyncpool_channel_close(rx);
	asyncpool_lease_release(&l);
	asyncpool_cache_flush(ch_pool);
}
static void chw_pong(uint64_t n, int tid)
{
	struct asyncpool_channel *rx = CH_RX(0), *tx = CH_TX(1);
	struct asyncpool_lease l;
	(void)tid;
	for (uint64_t k = 0; k < n; k++) {
		if (asyncpool_channel_recv_wait(rx, &l, -1)) die("recv_wait");
		while (asyncpool_channel_send(tx, &l)) cpu_relax();
	}
	asyncpool_channel_close(rx);
	asyncpool_channel_close(tx);
}

static int cmpu32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return (x > y) - (x < y);
}

/* One sample of each column of row c: Mops/s one and 32 per call; one-way ns median and p99.9. */
static int chan_sample(const struct chan_row *c, uint64_t n, uint64_t rounds, double out[4])
{
	unsigned div = c->div ? c->div : 1;
	uint64_t nb = n / div / BULK * BULK, nl = rounds / div;
	loop_fn send[2] = { c->send1, c->send32 }, recv[2] = { c->recv1, c->recv32 };

	for (int b = 0; b < 2; b++) {
		if (!send[b]) continue;
		if (c->setup && c->setup()) return -1;
		sides->got = 0;
		out[b] = run_sides(send[b], recv[b], nb, nb, c->reg, c->procs);
		if (sides->got != nb * (nb + 1) / 2) die("a channel row lost or repeated an object");
		if (c->teardown) c->teardown();
	}
	if (c->ping) {
		if (nl > LAT_MAX) nl = LAT_MAX;
		if (nl < 1) nl = 1;
		if (c->setup && c->setup()) return -1;
		run_sides(c->ping, c->pong, nl, nl, 0, c->procs);
		if (c->teardown) c->teardown();
		qsort(sides->lat, nl, sizeof(sides->lat[0]), cmpu32);
		out[2] = sides->lat[nl / 2] / 2.0;
		out[3] = sides->lat[nl - 1 - nl / 1000] / 2.0;
	}
	return 0;
}

struct variant {
	const char *name;
	void (*init)(void);
	loop_fn st, prod, cons;
	int dpdk, *avail, mt_ok;
};
static int one = 1, zero_avail = 0;
#define V(name, tag, init) { name, init, tag##_st, tag##_prod, tag##_cons, 0, &one, 1 }
#define VB(name, tag, init) { name, init, tag##_st, NULL, NULL, 0, &one, 1 }

static int cmpd(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}
static void stats(double *v, int n, double *med, double *mn, double *mxv)
{
	double t[64];
	memcpy(t, v, n * sizeof(double));
	qsort(t, n, sizeof(double), cmpd);
	*med = n % 2 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2;
	*mn = t[0];
	*mxv = t[n - 1];
}

/* median of the samples whose on-CPU fraction >= CLEAN; writes "med(n)" or "-(0)" */
static void clean_med(char *out, size_t sz, const double *v, const double *c, int n)
{
	double t[64];
	int k = 0;
	for (int i = 0; i < n; i++)
		if (c[i] >= CLEAN) t[k++] = v[i];
	if (!k) { snprintf(out, sz, "-(0)"); return; }
	double a, b, d;
	stats(t, k, &a, &b, &d);
	snprintf(out, sz, "%.1f(%d)", a, k);
}

/* The median of v[0..n). */
static double median(const double *v, int n)
{
	double a, b, c;
	stats((double *)v, n, &a, &b, &c);
	return a;
}

/* The median of the clean samples (on-CPU fraction c[i] >= CLEAN), or of all if none is. */
static double clean_median(const double *v, const double *c, int n)
{
	double t[64];
	int k = 0;
	for (int i = 0; i < n; i++)
		if (c[i] >= CLEAN) t[k++] = v[i];
	return k ? median(t, k) : median(v, n);
}

int main(int argc, char **argv)
{
	int reps = argc > 1 ? atoi(argv[1]) : 5;
	/* ONLY_CHANNELS=1: the floors and the channel rows, not the pools. */
	int only_channels = getenv("ONLY_CHANNELS") != NULL;
	uint64_t st_n = (argc > 2 ? strtoull(argv[2], 0, 10) : 10) * 1000000ull;
	uint64_t mt_n = st_n / 2;     /* per thread for "mt" */
	uint64_t xf_n = st_n / 2;     /* transfers for "xfer" */
	uint64_t lat_n = st_n / 100;  /* ping-pong rounds of the channel rows */
	if (reps > 64) reps = 64;
	if (reps < 1) reps = 1;
	if (lat_n > LAT_MAX) lat_n = LAT_MAX;

	peers_build_tag();
	printf("# build: %s\n", PEERS_LAST);
	printf("# compiled for -march=%s -mtune=%s (the compiler's predefined macros); %s; CPU %s\n",
	       PEERS_MARCH, PEERS_MTUNE, PEERS_CC, peers_cpu);
	region = mmap(NULL, (size_t)NBUF * BUFSZ, PROT_READ | PROT_WRITE, MAP_ANONYMOUS | MAP_PRIVATE, -1, 0);
	if (region == MAP_FAILED) die("mmap");
	sides = mmap(NULL, sizeof(*sides), PROT_READ | PROT_WRITE, MAP_ANONYMOUS | MAP_SHARED, -1, 0);
	if (sides == MAP_FAILED) die("mmap");

#ifdef HAVE_DPDK
	{
		char *eal[] = { "bench", "-l", "0-1", "--no-huge", "--no-pci", "--no-shconf", "-m", "256",
				"--no-telemetry", "--log-level=lib.eal:error", NULL };
		int ec = (int)(sizeof(eal) / sizeof(eal[0])) - 1;
		if (getenv("NO_DPDK") == NULL && rte_eal_init(ec, eal) >= 0) {
			mp_ring0 = mk_pool("ring0", "ring_mp_mc", 0);
			mp_ring256 = mk_pool("ring256", "ring_mp_mc", 256);
			mp_lfs0 = mk_pool("lfs0", "lf_stack", 0);
			mp_stk0 = mk_pool("stk0", "stack", 0);
			mp_lfs256 = mk_pool("lfs256", "lf_stack", 256);
			mp_chan = rte_mempool_create("chan", CHAN_MP_N, 64, 256, 0, NULL, NULL, NULL, NULL,
						     SOCKET_ID_ANY, 0);
			ring_ab = rte_ring_create("spsc_ab", SPSC_RING_SIZE, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
			ring_ba = rte_ring_create("spsc_ba", SPSC_RING_SIZE, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
			dpdk_ok = mp_ring0 && mp_ring256;
			printf("# DPDK EAL init OK (rte_version %s), main lcore %u on cpu0\n", rte_version(), rte_lcore_id());
		} else
			printf("# DPDK EAL init FAILED: %s\n", rte_strerror(rte_errno));
	}
	static int have_r0, have_r256, have_lf0, have_st0, have_lf256;
	have_r0 = mp_ring0 != NULL; have_r256 = mp_ring256 != NULL; have_lf0 = mp_lfs0 != NULL;
	have_st0 = mp_stk0 != NULL; have_lf256 = mp_lfs256 != NULL;
#endif
#ifdef HAVE_URING
	uring_setup();
#endif
#ifdef HAVE_ASYNCPOOL
	lap_setup();
#ifdef PEERS_PAIR_VARIANTS
	pv_setup();
#endif
#endif
	pin(0);

	struct variant vs[] = {
		V("baseline: no pool (loop/handoff only)", nil, nil_init),
		V("mutex freelist", mx, mx_init),
		VB("mutex freelist bulk32", mxb, mx_init),
		V("spinlock freelist", sp, sp_init),
		V("tagged-idx 64b CAS Treiber", tf, tf_init),
		V("tagged-ptr 128b CAS Treiber", t2, t2_init),
		V("ck_stack mpmc (ck 0.7.1)", cks, cks_init),
		V("ck_ring mpmc (FIFO)", ckr, ckr_init),
		V("variant: tagged-idx Treiber, checked", ctf, ctf_init),
		V("variant: ck_ring mpmc, checked", ckc, ckc_init),
		V("sbitmap-style bitmap", sb, sb_init),
#ifdef HAVE_DPDK
		{ "DPDK ring_mp_mc cache0", nop_init, dr0_st, dr0_prod, dr0_cons, 1, &have_r0, 1 },
		{ "DPDK ring_mp_mc cache256", nop_init, dr256_st, dr256_prod, dr256_cons, 1, &have_r256, 1 },
		{ "DPDK ring_mp_mc cache0 bulk32", nop_init, dr0b_st, NULL, NULL, 1, &have_r0, 1 },
		{ "DPDK ring_mp_mc cache256 bulk32", nop_init, dr256b_st, NULL, NULL, 1, &have_r256, 1 },
		{ "DPDK lf_stack cache0", nop_init, dlf0_st, dlf0_prod, dlf0_cons, 1, &have_lf0, 1 },
		{ "DPDK lf_stack cache256", nop_init, dlf256_st, dlf256_prod, dlf256_cons, 1, &have_lf256, 1 },
		{ "DPDK stack(spinlock) cache0", nop_init, dst0_st, dst0_prod, dst0_cons, 1, &have_st0, 1 },
#endif
#ifdef HAVE_ASYNCPOOL
		{ "libasyncpool cache0", NULL, lp0_st, lp0_prod, lp0_cons, 0, &have_lap, 1 },
		{ "libasyncpool cache256", NULL, lp256_st, lp256_prod, lp256_cons, 0, &have_lap, 1 },
		{ "libasyncpool cache0 bulk32", NULL, lp0b_st, NULL, NULL, 0, &have_lap, 1 },
		{ "libasyncpool cache256 bulk32", NULL, lp256b_st, NULL, NULL, 0, &have_lap, 1 },
#ifdef ASYNCPOOL_HAVE_TOKENS
		{ "libasyncpool tokens cache0", NULL, lt0_st, lt0_prod, lt0_cons, 0, &have_lap, 1 },
		{ "libasyncpool tokens cache256", NULL, lt256_st, lt256_prod, lt256_cons, 0, &have_lap, 1 },
		{ "libasyncpool tokens cache0 bulk32", NULL, lt0b_st, NULL, NULL, 0, &have_lap, 1 },
		{ "libasyncpool tokens cache256 bulk32", NULL, lt256b_st, NULL, NULL, 0, &have_lap, 1 },
#endif
#ifdef HAVE_DPDK
		{ "chan-st: DPDK mempool+ring 1/call", mprst_init, mprst1_st, NULL, NULL, 0, &have_chst, 0 },
		{ "chan-st: DPDK mempool+ring 32/call", mprst_init, mprst32_st, NULL, NULL, 0, &have_chst, 0 },
#endif
		{ "chan-st: libasyncpool channel 1/call", chst_init, chst1_st, NULL, NULL, 0, &have_chst, 0 },
		{ "chan-st: libasyncpool channel 32/call", chst_init, chst32_st, NULL, NULL, 0, &have_chst, 0 },
#ifdef PEERS_PAIR_VARIANTS
		{ "variant: cache256 pair rebuilt", NULL, pvr_st, NULL, NULL, 0, &have_pv, 0 },
		{ "variant: cache256 pair record16", NULL, pva_st, NULL, NULL, 0, &have_pv, 0 },
		{ "variant: cache256 pair rseqwin", NULL, pvb_st, NULL, NULL, 0, &have_pv, 0 },
		{ "variant: cache256 pair rec+rseq", NULL, pvab_st, NULL, NULL, 0, &have_pv, 0 },
		{ "variant: cache256 pair bare", NULL, pv0_st, NULL, NULL, 0, &have_pv, 0 },
#endif
#endif
#ifdef HAVE_URING
		{ "io_uring buf_ring add+advance(1)", NULL, ubr_st, NULL, NULL, 0, &uring_ok, 0 },
		{ "io_uring buf_ring add x32+advance", NULL, ubrb_st, NULL, NULL, 0, &uring_ok, 0 },
#endif
	};
	int nv = sizeof(vs) / sizeof(vs[0]);
	/*
	 * PEERS_ONLY=NAME: only the row of that exact name, one
	 * thread only, no floors, no channels: for counting a row's
	 * instructions under valgrind --tool=cachegrind (the difference of
	 * two runs of different lengths; doc/performance.md, 2026-12-07).
	 */
	const char *only = getenv("PEERS_ONLY");
	if (nv > 48) die("more than 48 rows");
	if (only) {
		have_chst = 1;
		for (int i = 0; i < nv; i++)
			if (strcmp(vs[i].name, only)) vs[i].avail = &zero_avail;
			else { vs[i].mt_ok = 0; vs[i].prod = NULL; }
		only_channels = 0;
	}
	struct { const char *name; loop_fn st; loop_fn mt; } fl[] = {
		{ "floor: CAS (lock cmpxchg) uncontended", cas_st, cas_st },
		{ "floor: lock xadd uncontended", xadd_st, xadd_st },
		{ "floor: plain load+store (volatile)", ldst_st, NULL },
		{ "floor: 8 dependent adds (=8 cycles)", addchain_st, NULL },
		{ "floor: CAS same line, 2 threads", NULL, cas_shared },
		{ "floor: lock xadd same line, 2 threads", NULL, xadd_shared },
	};
	int nf = sizeof(fl) / sizeof(fl[0]);
	/*
	 * The channel rows (struct chan_row, above).  The libasyncpool
	 * channel (issue 33) adds its rows here, between two threads and
	 * between two processes, e.g.
	 *   { .name = "libasyncpool channel, processes", .procs = 1,
	 *     .setup = ch_setup, .teardown = ch_teardown,
	 *     .send1 = ch_send1, .recv1 = ch_recv1, .send32 = ch_send32, .recv32 = ch_recv32,
	 *     .ping = ch_ping, .pong = ch_pong,
	 *     .vs_tput = "DPDK rte_ring SP/SC, threads",
	 *     .vs_lat = "floor: cache-line ping-pong, processes" },
	 * and its waiting receiver with .vs_lat = "floor: futex wake-up, processes".
	 */
	struct chan_row cr[] = {
		{ .name = "floor: cache-line ping-pong, threads", .setup = line_setup,
		  .ping = line_ping, .pong = line_pong },
		{ .name = "floor: cache-line ping-pong, processes", .procs = 1, .setup = line_setup,
		  .ping = line_ping, .pong = line_pong },
		{ .name = "floor: futex wake-up, threads", .div = 2, .setup = futex_setup,
		  .ping = futex_ping, .pong = futex_pong },
		{ .name = "floor: futex wake-up, processes", .procs = 1, .div = 2, .setup = futex_setup,
		  .ping = futex_ping, .pong = futex_pong },
#ifdef HAVE_DPDK
		{ .name = "DPDK rte_ring SP/SC, threads", .setup = ring_setup,
		  .send1 = ring_send1, .recv1 = ring_recv1, .send32 = ring_send32, .recv32 = ring_recv32,
		  .ping = ring_ping, .pong = ring_pong,
		  .vs_lat = "floor: cache-line ping-pong, threads" },
		{ .name = "DPDK mempool+ring SP/SC, threads", .reg = 1, .setup = mpr_setup,
		  .send1 = mpr_send1, .recv1 = mpr_recv1, .send32 = mpr_send32, .recv32 = mpr_recv32,
		  .vs_tput = "DPDK rte_ring SP/SC, threads" },
		{ .name = "DPDK mempool+ring SP/SC, processes", .procs = 1, .reg = 1, .setup = mpr_setup,
		  .send1 = mpr_send1, .recv1 = mpr_recv1, .send32 = mpr_send32, .recv32 = mpr_recv32,
		  .vs_tput = "DPDK mempool+ring SP/SC, threads" },
#endif
		{ .name = "libasyncpool channel, threads", .setup = ch_setup,
		  .send1 = ch_send1, .recv1 = ch_recv1, .send32 = ch_send32, .recv32 = ch_recv32,
		  .ping = ch_ping, .pong = ch_pong,
		  .vs_tput = "DPDK rte_ring SP/SC, threads",
		  .vs_tput2 = "DPDK mempool+ring SP/SC, threads",
		  .vs_lat = "floor: cache-line ping-pong, threads" },
		{ .name = "libasyncpool channel, processes", .procs = 1, .setup = ch_setup,
		  .send1 = ch_send1, .recv1 = ch_recv1, .send32 = ch_send32, .recv32 = ch_recv32,
		  .ping = ch_ping, .pong = ch_pong,
		  .vs_tput = "DPDK rte_ring SP/SC, threads",
		  .vs_tput2 = "DPDK mempool+ring SP/SC, processes",
		  .vs_lat = "floor: cache-line ping-pong, processes" },
		{ .name = "libasyncpool channel recv_wait, procs", .procs = 1, .div = 2,
		  .setup = ch_setup, .ping = chw_ping, .pong = chw_pong,
		  .vs_lat = "floor: futex wake-up, processes" },
		{ .name = "pipe, 8-byte tokens, processes", .procs = 1, .div = 20,
		  .setup = pipe_setup, .teardown = pipe_teardown,
		  .send1 = pipe_send1, .recv1 = pipe_recv1, .send32 = pipe_send32, .recv32 = pipe_recv32,
		  .ping = pipe_ping, .pong = pipe_pong,
		  .vs_tput = "DPDK rte_ring SP/SC, threads", .vs_lat = "floor: futex wake-up, processes" },
	};
	int nc = sizeof(cr) / sizeof(cr[0]);
	static double cv[24][4][64];    /* row, column (1/call, 32/call, median, p99.9), rep */
	static int c_na[24];

	unsigned long long b0, tt0, b1, tt1;
	struct timespec w0, w1;
	proc_stat(&b0, &tt0);
	clock_gettime(CLOCK_MONOTONIC, &w0);
	static double st[48][64], mt[48][64], xf[48][64], fst[8][64], fmt[8][64], ppv[64];
	static double mtc[48][64], xfc[48][64], fmtc[8][64], ppc[64];
	for (int r = 0; r < reps; r++) {
		fprintf(stderr, "rep %d/%d\n", r + 1, reps);
		/* floors */
		for (int f = 0; f < nf && !only; f++) {
			if (fl[f].st) {
				double t0 = now_ns();
				fl[f].st(st_n, 0);
				fst[f][r] = (now_ns() - t0) / st_n;
			}
			if (fl[f].mt) { fmt[f][r] = run2(fl[f].mt, fl[f].mt, mt_n, 2 * mt_n, 0); fmtc[f][r] = last_oncpu; }
		}
		if (!only) {
			atomic_store(&pp_line, 0);
			ppv[r] = 1e3 / run2(pingpong, pingpong, 1000000, 1000000, 0); /* ns per round trip */
			ppc[r] = last_oncpu;
		}
		for (int i = 0; i < nv; i++) {
			if (!*vs[i].avail || only_channels) continue;
			/* st */
			if (vs[i].init) vs[i].init();
			vs[i].st(st_n / 10, 0); /* warmup */
			double t0 = now_ns();
			vs[i].st(st_n, 0);
			st[i][r] = (now_ns() - t0) / st_n;
			if (!vs[i].mt_ok) continue;
			/* mt: both threads run the st loop concurrently */
			if (vs[i].init) vs[i].init();
			mt[i][r] = run2(vs[i].st, vs[i].st, mt_n, 2 * mt_n, vs[i].dpdk);
			mtc[i][r] = last_oncpu;
			/* xfer */
			if (vs[i].prod) {
				if (vs[i].init) vs[i].init();
				xf[i][r] = run2(vs[i].prod, vs[i].cons, xf_n, xf_n, vs[i].dpdk);
				xfc[i][r] = last_oncpu;
			}
		}
		for (int c = 0; c < nc; c++) {
			double o[4] = { 0 };
			if (only || c_na[c] || chan_sample(&cr[c], xf_n, lat_n, o)) { c_na[c] = 1; continue; }
			for (int k = 0; k < 4; k++) cv[c][k][r] = o[k];
		}
	}

	proc_stat(&b1, &tt1);
	clock_gettime(CLOCK_MONOTONIC, &w1);
	{
		struct rusage ru;
		getrusage(RUSAGE_SELF, &ru);
		double self_s = ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
		getrusage(RUSAGE_CHILDREN, &ru);        /* the sides of the channel rows in processes */
		self_s += ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
		double hz = (double)sysconf(_SC_CLK_TCK);
		double busy_s = (b1 - b0) / hz, tot_s = (tt1 - tt0) / hz;
		printf("# wall %.1fs; system busy %.1f of %.1f cpu-s; this process %.1f cpu-s => foreign load ~%.0f%% of machine\n",
		       (w1.tv_sec - w0.tv_sec) + (w1.tv_nsec - w0.tv_nsec) / 1e9, busy_s, tot_s, self_s,
		       tot_s > 0 && busy_s > self_s ? 100.0 * (busy_s - self_s) / tot_s : 0.0);
		printf("# 2-thread runs: on-CPU fraction (thread cputime/wall) mean %.3f, min %.3f (1.0 = never descheduled in guest)\n",
		       oncpu_n ? oncpu_sum / oncpu_n : 0.0, oncpu_min);
	}
	printf("# reps=%d st_iters=%llu mt_iters/thread=%llu xfer_iters=%llu NBUF=%u BUFSZ=%u\n", reps,
	       (unsigned long long)st_n, (unsigned long long)mt_n, (unsigned long long)xf_n, NBUF, BUFSZ);
	printf("%-38s | %-26s | %-26s | %-11s | %-26s | %-11s\n", "variant", "1-thr ns/op med [min-max]",
	       "2-thr Mops/s med [min-max]", "clean med(n)", "xfer Mops/s med [min-max]", "clean med(n)");
	double a, b, c, c2v;
	for (int f = 0; f < nf; f++) {
		char s1[64] = "-", s2[64] = "-", c2[32] = "-";
		if (fl[f].st) { stats(fst[f], reps, &a, &b, &c); snprintf(s1, 64, "%6.2f [%6.2f-%6.2f]", a, b, c); }
		if (fl[f].mt) { stats(fmt[f], reps, &a, &b, &c); snprintf(s2, 64, "%7.1f [%7.1f-%7.1f]", a, b, c); clean_med(c2, 32, fmt[f], fmtc[f], reps); }
		printf("%-38s | %-26s | %-26s | %-11s | %-26s | %-11s\n", fl[f].name, s1, s2, c2, "-", "-");
	}
	{
		char c2[32];
		stats(ppv, reps, &a, &b, &c);
		/* clean median of the ns values */
		clean_med(c2, 32, ppv, ppc, reps);
		printf("%-38s | %6.1f [%6.1f-%6.1f] ns per round trip (CPU0<->CPU1); clean med(n) %s ns\n",
		       "floor: cache-line ping-pong", a, b, c, c2);
	}
	for (int i = 0; i < nv; i++) {
		char s1[64] = "n/a", s2[64] = "-", s3[64] = "-", c2[32] = "-", c3[32] = "-";
		if (*vs[i].avail && !only_channels) {
			stats(st[i], reps, &a, &b, &c);
			snprintf(s1, 64, "%6.2f [%6.2f-%6.2f]", a, b, c);
			if (vs[i].mt_ok) { stats(mt[i], reps, &a, &b, &c); snprintf(s2, 64, "%7.1f [%7.1f-%7.1f]", a, b, c); clean_med(c2, 32, mt[i], mtc[i], reps); }
			if (vs[i].prod) { stats(xf[i], reps, &a, &b, &c); snprintf(s3, 64, "%7.1f [%7.1f-%7.1f]", a, b, c); clean_med(c3, 32, xf[i], xfc[i], reps); }
		}
		printf("%-38s | %-26s | %-26s | %-11s | %-26s | %-11s\n", vs[i].name, s1, s2, c2, s3, c3);
	}
	/*
	 * Each libasyncpool row beside the DPDK ring_mp_mc row of the same
	 * cache and bulk, each variant beside cache0: >1 is ours faster.
	 * 1-thr: DPDK's ns over ours; 2-thr and xfer: our Mops/s over
	 * DPDK's (clean medians where there are clean samples).
	 */
	printf("\n%-38s | ratio to the DPDK ring_mp_mc row of the same cache and bulk (>1: faster)\n",
	       "row");
	for (int i = 0; i < nv; i++) {
		const char *suffix = vs[i].name + strlen("libasyncpool ");
		char dn[64];
		int d = -1;
		if (!*vs[i].avail || only_channels) continue;
		if (!strncmp(vs[i].name, "variant: cache256", strlen("variant: cache256")))
			suffix = "cache256";    /* the pair's variants, on lap256's cache */
		else if (!strncmp(vs[i].name, "variant: ", strlen("variant: ")))
			suffix = "cache0";      /* the checked freelists have no cache */
		else if (strncmp(vs[i].name, "libasyncpool ", strlen("libasyncpool ")))
			continue;
		else if (!strncmp(suffix, "tokens ", strlen("tokens ")))
			suffix += strlen("tokens ");
		snprintf(dn, sizeof(dn), "DPDK ring_mp_mc %s", suffix);
		for (int k = 0; k < nv; k++)
			if (!strcmp(vs[k].name, dn) && *vs[k].avail) d = k;
		if (d < 0) continue;
		printf("%-38s | 1-thr %.2fx", vs[i].name, median(st[d], reps) / median(st[i], reps));
		if (vs[i].mt_ok && vs[d].mt_ok)
			printf(" | 2-thr %.2fx", clean_median(mt[i], mtc[i], reps) / clean_median(mt[d], mtc[d], reps));
		if (vs[i].prod && vs[d].prod)
			printf(" | xfer %.2fx", clean_median(xf[i], xfc[i], reps) / clean_median(xf[d], xfc[d], reps));
		printf("   (vs %s) %s\n", dn, peers_tag);
	}

	/* The channel rows, then each beside the rows it names. */
	printf("\n# channels: side 0 on CPU0 hands 8-byte objects to side 1 on CPU1; "
	       "ping-pong rounds %llu (divided by the row's div)\n", (unsigned long long)lat_n);
	printf("%-38s | %-28s | %-28s | %-28s | %s\n", "channel", "1/call Mops/s med [min-max]",
	       "32/call Mops/s med [min-max]", "one-way ns med [min-max]", "one-way p99.9 ns med");
	for (int c = 0; c < nc; c++) {
		char col[4][64] = { "-", "-", "-", "-" };
		loop_fn has[3] = { cr[c].send1, cr[c].send32, cr[c].ping };
		for (int k = 0; k < 3; k++) {
			if (c_na[c]) { snprintf(col[k], 64, "n/a"); continue; }
			if (!has[k]) continue;
			stats(cv[c][k], reps, &a, &b, &c2v);
			snprintf(col[k], 64, k < 2 ? "%7.2f [%7.2f-%7.2f]" : "%7.1f [%7.1f-%7.1f]", a, b, c2v);
		}
		if (!c_na[c] && cr[c].ping) snprintf(col[3], 64, "%.1f", median(cv[c][3], reps));
		printf("%-38s | %-28s | %-28s | %-28s | %s\n", cr[c].name, col[0], col[1], col[2], col[3]);
	}
	for (int c = 0; c < nc; c++) {
		for (int k = 0; k < nc; k++) {
			if (c_na[c] || c_na[k]) continue;
			if ((cr[c].vs_tput && !strcmp(cr[c].vs_tput, cr[k].name)) ||
			    (cr[c].vs_tput2 && !strcmp(cr[c].vs_tput2, cr[k].name))) {
				printf("%-38s | throughput / %s:", cr[c].name, cr[k].name);
				if (cr[c].send1 && cr[k].send1)
					printf(" 1/call %.3fx", median(cv[c][0], reps) / median(cv[k][0], reps));
				if (cr[c].send32 && cr[k].send32)
					printf(" 32/call %.3fx", median(cv[c][1], reps) / median(cv[k][1], reps));
				printf(" %s\n", peers_tag);
			}
			if (cr[c].vs_lat && !strcmp(cr[c].vs_lat, cr[k].name) && cr[c].ping && cr[k].ping)
				printf("%-38s | one-way median / %s: %.2fx (lower: faster) %s\n", cr[c].name,
				       cr[k].name, median(cv[c][2], reps) / median(cv[k][2], reps), peers_tag);
		}
	}
#ifdef HAVE_ASYNCPOOL
	printf("# libasyncpool acquire_bulk spurious -ENOBUFS (retried): %ld\n", (long)lap_spurious);
#endif
	fflush(stdout);
#ifdef HAVE_DPDK
	if (dpdk_ok) rte_eal_cleanup();
#endif
	return 0;
}
