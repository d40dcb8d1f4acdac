/* SPDX-License-Identifier: MIT */
/*
 * Shared by the files of the asyncpool tool.  They call one way
 * (tests/test-layers-tools.sh): asyncpool.c calls the subcommands
 * (demo.c, bench.c, inspect.c, reclaim.c), which call their parts
 * (demo_*.c, bench_*.c), and all of them the helpers (options.c,
 * pools.c, bench_stats.c, names.c, net.c, pattern.c, vm_pin.c), which
 * call no other file of tools/ but pattern.c.
 */
#ifndef ASYNCPOOL_TOOL_H
#define ASYNCPOOL_TOOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

struct asyncpool;
struct asyncpool_proactor;
struct asyncpool_region;
struct asyncpool_slab;

/*
 * The exit status of every subcommand (asyncpool(1), EXIT STATUS):
 * 0 it did what was asked (inspect: the pool is consistent; reclaim: the
 * reclaim ran, whatever it found); 1 it failed (the demo saw a wrong
 * byte, inspect could not open or read the object or found it invalid or
 * inconsistent, reclaim could not open the pool or reclaim, the bench's
 * reclaim-latency lost a buffer, out of memory); 2 the command line
 * was wrong (unknown command or option, a bad or missing argument).
 */
enum {
	TOOL_EXIT_OK = 0,
	TOOL_EXIT_FAILURE = 1,
	TOOL_EXIT_USAGE = 2,
};

/* Each returns one of the TOOL_EXIT_* values. */
int cmd_demo(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_inspect(int argc, char **argv);
int cmd_reclaim(int argc, char **argv);

/* names.c: a POSIX shm name ("/name"), not a path; a pool error's name. */
bool tool_is_shm_name(const char *s);
const char *tool_pool_error(int rc);

/* demo_uring.c: zero-copy TCP loopback on io_uring. */
enum { DEMO_URING_OK, DEMO_URING_FAILED, DEMO_URING_REFUSED };
int demo_uring(size_t bytes, char *why, size_t whylen);
/* A ring per thread (SINGLE_ISSUER), SEND_ZC from one shared pool. */
int demo_rings(unsigned nrings, size_t bytes, char *why, size_t whylen);
/* demo_dry.c: multishot receives that outlive a recv ring running dry. */
int demo_dry(size_t bytes, char *why, size_t whylen);
/*
 * demo_zc.c: the same transfer on the MSG_ZEROCOPY socket backend, for
 * where io_uring is refused (why_not_uring: what the io_uring demo said).
 */
int demo_zc(size_t bytes, const char *why_not_uring, char *why, size_t whylen);

/*
 * demo_xdp.c: AF_XDP on a veth pair in a network namespace of a child's
 * own: frames received as leases of a shared pool's UMEM, checked, some
 * sent back out, the frames' places printed at each step.
 */
int demo_xdp(unsigned frames, char *why, size_t whylen);

/* Monotonic time in nanoseconds. */
static inline uint64_t tool_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* pools.c: the pools and regions the subcommands make. */
/*
 * A memory-proactor pool of count x size buffers, with per-thread caches
 * of cache buffers (0: none; TOOL_POOL_DEFAULT: made by asyncpool_create(),
 * whatever the library's default is), prefaulted or not; 0 or -errno.
 */
#define TOOL_POOL_DEFAULT UINT32_MAX
int tool_memory_pool(struct asyncpool_proactor **p, struct asyncpool **pool,
		     size_t size, uint32_t count, uint32_t cache, bool populate);
void tool_memory_pool_free(struct asyncpool_proactor *p, struct asyncpool *pool);

/*
 * A shared pool of count 64-byte buffers, all in one anonymous MAP_SHARED
 * mapping (so a forked child sees it): head bytes (a page multiple) for
 * the caller at mem, then the pool's layout at layout_mem, then the
 * buffers; with a memory proactor.  0 or -errno; tool_shared_pool_free()
 * undoes what was done either way.
 */
struct tool_shared_pool {
	char *mem;
	size_t total;
	void *layout_mem;
	size_t layout;
	struct asyncpool_proactor *p;
	struct asyncpool_slab *slab;
	struct asyncpool_region *r;
	struct asyncpool *pool;
};
int tool_shared_pool(struct tool_shared_pool *t, size_t head, uint32_t count);
void tool_shared_pool_free(struct tool_shared_pool *t);
/* A prefaulted slab of count x size bytes registered on p for access. */
struct asyncpool_region *tool_region(struct asyncpool_proactor *p, size_t size, uint32_t count,
				     uint32_t access, int *rc);

/* One line of `asyncpool bench`. */
struct bench_result {
	const char *name;
	unsigned threads;
	double ns[3];           /* median, min, max per pair per thread */
	double mops[3];         /* median, min, max, all threads */
	unsigned long buffers;  /* --sweep: pool size, else 0 */
	const char *extra_name; /* one more JSON field, or NULL */
	double extra;
	const char *extra2_name; /* and another, or NULL */
	double extra2;
};

/* bench_stats.c: sort the n values of v; out[] = their median, min and max. */
void bench_spread(double out[3], double *v, unsigned n);
void bench_summarize(struct bench_result *out, const uint64_t *elapsed, unsigned reps,
		     unsigned long ops, unsigned threads, unsigned long ops_total);
/* tools/bench_shared.c: a shared pool used by two processes at once. */
int bench_shared(uint32_t buffers, uint32_t cache, unsigned long ops, unsigned reps,
		 struct bench_result *out);
/*
 * The same on a pool of asyncpool_shared_create() (a memfd) that the
 * child opens itself with asyncpool_shared_open() through the fd: ops
 * pairs per process and repetition.
 */
int bench_shared_fd(uint32_t buffers, uint32_t cache, unsigned long ops, unsigned reps,
		    struct bench_result *out);

/*
 * tools/bench_reclaim.c: rounds times, a child process attaches to a
 * shared pool of buffers buffers, leases a quarter and caches up to
 * cache more, and is SIGKILLed; one asyncpool_reclaim() (quarantine 0)
 * is timed.  0, -EUCLEAN if a buffer did not come back, or -errno.
 */
int bench_reclaim(uint32_t buffers, uint32_t cache, unsigned rounds, struct bench_result *out);

/* tools/bench_wait.c: wake-up latency of asyncpool_acquire_wait(). */
int bench_wake(bool processes, unsigned rounds, struct bench_result *out);

/*
 * tools/bench_channel.c: channels (issue 33) between two processes, and
 * their floors measured the same way; ops tokens per repetition (the
 * latency cases ops / 10 round trips, the waking ones ops / 200).  0,
 * -EUCLEAN if a buffer did not come back, -EPROTO if a side failed, or
 * -errno.
 */
enum bench_chan_kind {
	BENCH_CHAN_LATENCY, BENCH_CHAN_1, BENCH_CHAN_32, BENCH_CHAN_WAKE,
	BENCH_FLOOR_LINE, BENCH_FLOOR_FUTEX, BENCH_FLOOR_RING_1, BENCH_FLOOR_RING_32,
	BENCH_FLOOR_SLOTS_1, BENCH_FLOOR_SLOTS_32, BENCH_FLOOR_WORDS_1, BENCH_FLOOR_WORDS_32,
	BENCH_CHAN_BACK_1, BENCH_CHAN_BACK_32, BENCH_FLOOR_BACK_1, BENCH_FLOOR_BACK_32,
};
int bench_channel(enum bench_chan_kind kind, unsigned long ops, unsigned reps,
		  struct bench_result *out);
/*
 * tools/bench_inline.c: the inline token pair rebuilt with one part left
 * out (issue 34), ops pairs on the calling thread's cache of pool.
 */
enum bench_inline_kind {
	BENCH_INLINE_PAIR, BENCH_INLINE_NO_WINDOW, BENCH_INLINE_SPLIT_LEAVE,
	BENCH_INLINE_NO_OWNER_HINT, BENCH_INLINE_NO_RELEASED, BENCH_INLINE_NO_RECHECK,
	BENCH_INLINE_BARE, BENCH_INLINE_TWO_ARRAYS, BENCH_INLINE_BULK32, BENCH_INLINE_BULK32_TWO_ARRAYS,
	BENCH_INLINE_SHARED, BENCH_INLINE_LEASE_BULK32,
	BENCH_INLINE_LEASE_BULK32_FLOOR,
};
uint64_t bench_inline(enum bench_inline_kind kind, struct asyncpool *pool, unsigned long ops);
/* tools/bench_contend.c: a pool too small for its users, with retries counted. */
enum bench_contend_kind { CONTEND_BASELINE, CONTEND_SPIN, CONTEND_WAIT };
int bench_contend(enum bench_contend_kind kind, unsigned long ops, unsigned reps,
		  struct bench_result *out);
int bench_handoff_2proc(bool wait, unsigned long msgs, struct bench_result *out);
/*
 * tools/bench_many.c: senders processes, a channel each, to one receiver
 * in asyncpool_channel_recv_any() (issue 52 item 5), or (floor) one bare
 * MPSC ring for all, the design not built; ops / 10 items per
 * repetition in all.  0, -EUCLEAN if a buffer did not come back, -EPROTO
 * if a side failed, or -errno.
 */
int bench_many(unsigned senders, bool floor, unsigned long ops, unsigned reps,
	       struct bench_result *out);

/*
 * tools/bench_xdp.c: AF_XDP on a veth pair in a network namespace of a
 * child's own: frames/s and ns a frame through the pool (fwd: each
 * frame sent back out) against a frame stack driving the same rings,
 * interleaved, reps times ops / 2e6 s each side; or (2Q) two sockets on
 * two queues sharing the pool, two threads against one.  0; -EUCLEAN if a
 * frame did not come back; or -errno with why set (not root, no XDP).
 */
enum bench_xdp_kind {
	BENCH_XDP_RXDROP_1Q,    /* receive and drop, one queue, one thread */
	BENCH_XDP_FWD_1Q,       /* receive, rewrite, send back out */
	BENCH_XDP_RXDROP_2Q,    /* two queues, one pool: two threads against one */
};
int bench_xdp(enum bench_xdp_kind kind, unsigned long ops, unsigned reps,
	      struct bench_result *out, char *why, size_t whylen);

/*
 * options.c: the options of command argv[0] (the table there), parsed
 * into *a: value[key] and given[key] by short option letter, first the
 * index of the first operand; operands: how many non-empty ones the
 * command takes (-1: the caller checks).  TOOL_GO to go on, or the exit
 * status to return (--help printed by help, or a usage error reported:
 * then help goes to stderr); a number out of its range exits
 * TOOL_EXIT_USAGE with a message.
 */
#define TOOL_GO (-1)
struct tool_args {
	unsigned long value[128];
	bool given[128];
	int first;
};
int tool_options(int argc, char **argv, int operands, void (*help)(FILE *),
		 struct tool_args *a);

#endif
