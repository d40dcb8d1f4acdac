/* SPDX-License-Identifier: MIT */
/*
 * Helpers of the test programs, compiled once into tests/libtestutil.la
 * (every test program links it): the slab, region and pool setup, the
 * environment knobs, descriptor counting, time, shared-memory names.
 * The helpers that say "or bail out" end the TAP run on failure: they are
 * for setup, never for what a test asserts.
 */
#ifndef ASYNCPOOL_TESTUTIL_H
#define ASYNCPOOL_TESTUTIL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <asyncpool.h>

/* Slab options for count buffers of buffer_size bytes on any NUMA node. */
void slab_options(struct asyncpool_slab_options *o, size_t buffer_size, uint32_t count);

/* Options of a shared pool of count buffers of buffer_size bytes. */
void shared_options(struct asyncpool_shared_options *o, size_t buffer_size, uint32_t count);

/* A region of count x buffer_size on a new slab, registered with p for
 * access (the region holds the slab); 0 or -errno with *out NULL. */
int new_region(struct asyncpool_proactor *p, size_t buffer_size, uint32_t count,
	       uint32_t access, struct asyncpool_region **out);

/* new_region(), or bail out. */
struct asyncpool_region *make_region(struct asyncpool_proactor *p, size_t buffer_size,
				     uint32_t count, uint32_t access);

/* A pool over a READ region of count x buffer_size registered with p, with
 * per-thread caches of cache buffers (0: asyncpool_create), or bail out. */
struct asyncpool *make_pool(struct asyncpool_proactor *p, size_t buffer_size, uint32_t count,
			    uint32_t cache);

/* A FIFO of buffer indices under a mutex, for hand-offs between threads,
 * or between processes when it lives in shared memory (pshared). */
#define INDEX_QUEUE_MAX 512
struct index_queue {
	pthread_mutex_t lock;
	uint32_t head, tail;
	uint32_t v[INDEX_QUEUE_MAX];
};

void index_queue_init(struct index_queue *q, bool pshared);
/* Bail out if the queue is full. */
void index_queue_push(struct index_queue *q, uint32_t idx);
bool index_queue_pop(struct index_queue *q, uint32_t *idx);

/*
 * Hand-offs: threads (of one process or of several) acquire leases of one
 * pool, mark each buffer as theirs and hand its index to a random thread,
 * which checks the mark and releases the lease.  A lease travels as its
 * index: send() puts the lease where take() finds it again (NULL: the
 * lease is dropped and take() adopts the index).  struct handoff may live
 * in shared memory (pshared).
 */
#define HANDOFF_MAX_THREADS 8
struct handoff {
	struct index_queue q[HANDOFF_MAX_THREADS];
	_Atomic unsigned char inuse[INDEX_QUEUE_MAX];
	atomic_int producing;
	atomic_long violations, errors, released, enobufs;
	unsigned threads;       /* of all processes */
	uint32_t buffers;
	long rounds;            /* leases each thread hands on */
};

struct handoff_ops {
	void (*send)(const struct asyncpool_lease *l);
	int  (*take)(struct asyncpool *pool, uint32_t idx, struct asyncpool_lease *l);
};

void handoff_init(struct handoff *h, unsigned threads, uint32_t buffers, long rounds,
		  bool pshared);
/* Thread id's part: its rounds, then releasing what the others send until
 * they all stopped, then a flush of its cache.  The counts are in *h. */
void handoff_thread(struct handoff *h, unsigned id, struct asyncpool *pool,
		    const struct handoff_ops *ops);

/* The releases of pool refused as stale or foreign (its stats). */
uint64_t bad_releases(struct asyncpool *pool);
/* The releases of pool refused because an adoption fenced them (its stats). */
uint64_t fenced_releases(struct asyncpool *pool);

/* A positive decimal number from the environment variable name, def if it
 * is unset or empty; bail out if it is anything else. */
unsigned long env_number(const char *name, unsigned long def);

/* The operations per thread of a stress test: ASYNCPOOL_STRESS_ITERATIONS
 * (the sanitizer builds and `make check-long` set it), or def. */
long stress_iterations(long def);
/*
 * The seed of a test's random choices: $ASYNCPOOL_TEST_SEED (decimal or
 * 0x hex), else def, a fixed value, so that a run repeats (a mutant's
 * catch must: tests/mutants/run.sh).  The first call says it (a TAP
 * comment) and exports it, so that a peer process started later draws
 * from the same seed; a test derives its processes' streams from it by
 * their number, never by their pid.
 */
uint64_t test_seed(uint64_t def);

/* fork() after flushing stdout (so the child repeats no TAP line), or
 * bail out: 0 in the child, the child's pid in the parent. */
pid_t fork_or_bail(void);

/* The number of descriptors this process has open now. */
int count_fds(void);

/* CLOCK_MONOTONIC in nanoseconds (for diag lines, never for assertions). */
uint64_t now_ns(void);

/* "/PREFIX PID-TAG": a shared-memory name unique to this run.  PREFIX is
 * this build's $ASYNCPOOL_TEST_SHM_PREFIX, so that test-shm-leftovers.sh
 * finds what a test leaves behind. */
void test_shm_name(char *buf, size_t len, const char *tag);

#endif /* ASYNCPOOL_TESTUTIL_H */
