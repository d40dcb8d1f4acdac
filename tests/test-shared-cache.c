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

static struct handoff *sh;              /* in shared memory */
static struct asyncpool *pool;          /* this process's handle */
static int proc;

/* The lease object was dropped: the receiver adopts the index. */
static const struct handoff_ops adopt = { .take = asyncpool_lease_adopt };

static void *worker(void *arg)
{
	handoff_thread(sh, (unsigned)(uintptr_t)arg, pool, &adopt);   /* 0 .. ALL-1 */
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
	if (asyncpool_shared_storage_size(BUFFERS, &layout))
		bail_out("storage size");
	layout = (layout + 4095) & ~(size_t)4095;
	total = ((sizeof(struct handoff) + 4095) & ~(size_t)4095) + layout + BUFFERS * 64;
	mem = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED)
		bail_out("mmap");
	sh = (struct handoff *)mem;
	handoff_init(sh, ALL, BUFFERS, stress_iterations(20000), true);
	{
		char *lay = mem + ((sizeof(struct handoff) + 4095) & ~(size_t)4095);

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
	     PROCS, THREADS, sh->rounds, atomic_load(&sh->enobufs));
	is_int(atomic_load(&sh->violations), 0, "no buffer held twice, contents intact");
	is_int(atomic_load(&sh->errors), 0, "no error but -ENOBUFS");
	is_int(atomic_load(&sh->released), (long)ALL * sh->rounds, "every lease released");
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
