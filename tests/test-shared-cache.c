/* SPDX-License-Identifier: MIT */
/*
 * Per-thread caches on a shared pool, across 2 processes x 4 threads:
 * each thread acquires, marks the buffer as its own, and hands its index
 * to a random thread of either process, which checks the mark, adopts
 * the lease and releases it (into its own cache).  After every thread
 * has flushed and exited, the whole pool is back on the freelist.
 *
 * Needs the shared pools (asyncpool_create_shared, asyncpool_open_shared,
 * asyncpool_lease_adopt, asyncpool_check).
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <asyncpool.h>
#include "tap.h"
#include "testutil.h"

#define PROCS   2
#define THREADS 4                       /* per process */
#define ALL     (PROCS * THREADS)
#define BUFFERS 256
#define CACHE   16

struct squeue {                         /* indices, under a shared mutex */
	pthread_mutex_t lock;
	uint32_t head, tail;
	uint32_t v[BUFFERS];
};

struct shared {
	struct squeue q[ALL];
	_Atomic unsigned char inuse[BUFFERS];
	atomic_int producing;
	atomic_long violations, errors, released, enobufs;
};

static struct shared *sh;
static struct asyncpool *pool;          /* this process's handle */
static long handoffs = 20000;
static int proc;

static void sq_push(struct squeue *q, uint32_t idx)
{
	pthread_mutex_lock(&q->lock);
	q->v[q->tail++ % BUFFERS] = idx;        /* never more than BUFFERS queued */
	pthread_mutex_unlock(&q->lock);
}

static int sq_pop(struct squeue *q, uint32_t *idx)
{
	int got = 0;

	pthread_mutex_lock(&q->lock);
	if (q->head != q->tail) {
		*idx = q->v[q->head++ % BUFFERS];
		got = 1;
	}
	pthread_mutex_unlock(&q->lock);
	return got;
}

static int drain(unsigned id)
{
	uint32_t idx;
	int n = 0;

	while (sq_pop(&sh->q[id], &idx)) {
		struct asyncpool_lease l;
		uint64_t *w;

		if (asyncpool_lease_adopt(pool, idx, &l)) {
			atomic_fetch_add(&sh->errors, 1);
			continue;
		}
		w = asyncpool_span_ptr(l.span);
		if (w[1] != (w[0] ^ 0xa5a5a5a5a5a5a5a5ull) || w[2] != idx)
			atomic_fetch_add(&sh->violations, 1);
		if (atomic_exchange(&sh->inuse[idx], 0) != 1)
			atomic_fetch_add(&sh->violations, 1);
		asyncpool_lease_release(&l);
		atomic_fetch_add(&sh->released, 1);
		n++;
	}
	return n;
}

static void *worker(void *arg)
{
	unsigned id = (unsigned)(uintptr_t)arg;        /* 0 .. ALL-1 */
	uint64_t seed = 0x2545f4914f6cdd1dull * (id + 1);

	for (long i = 0; i < handoffs; i++) {
		struct asyncpool_lease l;
		uint64_t *w;
		int rc;

		if (i % 16 == 0)
			drain(id);
		rc = asyncpool_acquire(pool, &l);
		if (rc == -ENOBUFS) {
			atomic_fetch_add(&sh->enobufs, 1);
			if (!drain(id))
				sched_yield();
			i--;
			continue;
		}
		if (rc) {
			atomic_fetch_add(&sh->errors, 1);
			break;
		}
		if (l.buffer_index >= BUFFERS || atomic_exchange(&sh->inuse[l.buffer_index], 1))
			atomic_fetch_add(&sh->violations, 1);
		w = asyncpool_span_ptr(l.span);
		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		w[0] = seed;
		w[1] = seed ^ 0xa5a5a5a5a5a5a5a5ull;
		w[2] = l.buffer_index;
		/* The lease object is dropped: the receiver adopts the index. */
		sq_push(&sh->q[(seed >> 33) % ALL], l.buffer_index);
	}
	atomic_fetch_sub(&sh->producing, 1);
	while (atomic_load(&sh->producing) > 0)
		if (!drain(id))
			sched_yield();
	drain(id);
	if (asyncpool_cache_flush(pool))
		atomic_fetch_add(&sh->errors, 1);
	return NULL;
}

static void run_threads(void)
{
	pthread_t t[THREADS];

	for (uintptr_t i = 0; i < THREADS; i++)
		pthread_create(&t[i], NULL, worker, (void *)(proc * THREADS + i));
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
}

static void no_destroy(void *ctx)
{
	(void)ctx;
}

int main(void)
{
	struct asyncpool_proactor *p;
	struct asyncpool_slab *slab;
	struct asyncpool_region *r;
	struct asyncpool_stats st;
	pthread_mutexattr_t ma;
	size_t layout, total;
	char *mem;
	pid_t pid;
	int status = -1;

#ifdef __SANITIZE_THREAD__
	/* Leases travel through mailboxes that a thread of the other process
	 * hands on: ThreadSanitizer sees only this process's half of that
	 * synchronisation and reports the mailboxes as races. */
	skip_all("ThreadSanitizer cannot see synchronisation through another process");
#endif
	handoffs = stress_iterations(handoffs);
	if (asyncpool_shared_storage_size(BUFFERS, &layout))
		bail_out("storage size");
	layout = (layout + 4095) & ~(size_t)4095;
	total = ((sizeof(struct shared) + 4095) & ~(size_t)4095) + layout + BUFFERS * 64;
	mem = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED)
		bail_out("mmap");
	sh = (struct shared *)mem;
	pthread_mutexattr_init(&ma);
	pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED);
	for (int i = 0; i < ALL; i++)
		pthread_mutex_init(&sh->q[i].lock, &ma);
	atomic_store(&sh->producing, ALL);
	{
		char *lay = mem + ((sizeof(struct shared) + 4095) & ~(size_t)4095);

		if (asyncpool_proactor_create_memory(&p) ||
		    asyncpool_slab_wrap(lay + layout, 64, BUFFERS, no_destroy, NULL, &slab) ||
		    asyncpool_proactor_register_slab(p, slab, ASYNCPOOL_ACCESS_READ, &r))
			bail_out("region");
		asyncpool_slab_unref(slab);
		is_int(asyncpool_create_shared(lay, layout, r, &pool), 0, "create shared pool");
		is_int(asyncpool_set_cache(pool, CACHE), 0, "caches on the creator's handle");
		pid = fork();
		if (pid < 0)
			bail_out("fork");
		if (pid == 0) {
			proc = 1;
			if (asyncpool_open_shared(lay, layout, r, &pool) ||
			    asyncpool_set_cache(pool, CACHE))
				_exit(2);
			run_threads();
			_exit(asyncpool_destroy(pool) ? 3 : 0);
		}
	}
	run_threads();
	waitpid(pid, &status, 0);
	ok(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child process: open, caches, threads");
	diag("%d processes x %d threads x %ld leases handed to random threads; %ld empty retries",
	     PROCS, THREADS, handoffs, atomic_load(&sh->enobufs));
	is_int(atomic_load(&sh->violations), 0, "no buffer held twice, contents intact");
	is_int(atomic_load(&sh->errors), 0, "no error but -ENOBUFS");
	is_int(atomic_load(&sh->released), (long)ALL * handoffs, "every lease released");
	memset(&st, 0, sizeof(st));
	st.size = sizeof(st);
	asyncpool_stats(pool, &st);
	is_int(st.bad_releases, 0, "no bad release");
	is_int(st.corruptions, 0, "no corruption");
	is_int(asyncpool_available(pool), BUFFERS, "available == capacity after both processes");
	is_int(asyncpool_check(pool), 0, "the freelist audit is clean");
	is_int(asyncpool_destroy(pool), 0, "close the handle");
	asyncpool_region_unref(r);
	is_int(asyncpool_proactor_destroy(p), 0, "proactor destroy");
	munmap(mem, total);
	return done_testing();
}
