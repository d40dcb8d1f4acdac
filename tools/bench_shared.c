/* SPDX-License-Identifier: MIT */
/*
 * asyncpool bench: the shared-2proc cases.  One shared pool, its layout
 * and its buffers in a MAP_SHARED mapping; the parent creates it, forks,
 * the child opens it with its own handle, and both acquire and release
 * at once.  With cache != 0 each process gives its handle per-thread
 * caches (asyncpool_set_cache()).
 *
 * Built only once shared pools are in the library (it calls
 * asyncpool_create_shared() and asyncpool_open_shared()); bench.c calls
 * it through a weak reference.
 */
#include "config.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <asyncpool.h>
#include "tool.h"

struct shared_ctl {
	atomic_int ready;       /* processes ready for this repetition */
	atomic_int go;          /* repetition number that may start */
	atomic_int done;        /* processes done with it */
	atomic_int failed;
};

static void no_destroy(void *ctx)
{
	(void)ctx;
}

static void loop(struct asyncpool *pool, unsigned long ops)
{
	for (unsigned long i = 0; i < ops; i++) {
		struct asyncpool_lease l;

		if (asyncpool_acquire(pool, &l) == 0)
			asyncpool_lease_release(&l);
	}
	asyncpool_cache_flush(pool);
}

/* The child: reps + 1 rounds (the first warms up), each on the parent's go. */
static void child_side(struct asyncpool *pool, struct shared_ctl *ctl, unsigned long ops,
		       unsigned reps)
{
	for (int round = 1; round <= (int)reps + 1; round++) {
		atomic_fetch_add(&ctl->ready, 1);
		while (atomic_load_explicit(&ctl->go, memory_order_acquire) != round)
			if (atomic_load(&ctl->failed))
				return;
		loop(pool, ops);
		atomic_fetch_add(&ctl->done, 1);
	}
}

/* Spin until *v == want; false if the child died or failed first. */
static bool wait_for(atomic_int *v, int want, struct shared_ctl *ctl, pid_t pid)
{
	for (unsigned long spins = 0; atomic_load(v) != want; spins++) {
		if (atomic_load(&ctl->failed))
			return false;
		if (spins % (1u << 20) == 0 && waitpid(pid, NULL, WNOHANG) != 0)
			return false;
	}
	return true;
}

int bench_shared(uint32_t buffers, uint32_t cache, unsigned long ops, unsigned reps,
		 struct bench_result *out)
{
	struct asyncpool_proactor *p = NULL;
	struct asyncpool_slab *slab = NULL;
	struct asyncpool_region *r = NULL;
	struct asyncpool *pool = NULL;
	struct shared_ctl *ctl;
	size_t layout, bufs = (size_t)buffers * 64, total;
	uint64_t el[64];
	char *mem;
	pid_t pid;
	int rc, status = 0;
	bool ok = false;

	rc = asyncpool_shared_storage_size(buffers, &layout);
	if (rc)
		return rc;
	layout = (layout + 4095) & ~(size_t)4095;
	total = 4096 + layout + bufs;
	mem = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED)
		return -ENOMEM;
	memset(mem, 0, total);
	ctl = (struct shared_ctl *)mem;
	rc = asyncpool_proactor_create_memory(&p);
	if (!rc)
		rc = asyncpool_slab_wrap(mem + 4096 + layout, 64, buffers, no_destroy, NULL, &slab);
	if (!rc)
		rc = asyncpool_proactor_register_slab(p, slab, ASYNCPOOL_ACCESS_READ, &r);
	if (!rc)
		rc = asyncpool_create_shared(mem + 4096, layout, r, &pool);
	if (!rc && cache)
		rc = asyncpool_set_cache(pool, cache);
	if (rc)
		goto out;

	pid = fork();
	if (pid < 0) {
		rc = -errno;
		goto out;
	}
	if (pid == 0) {
		struct asyncpool *mine;

		if (asyncpool_open_shared(mem + 4096, layout, r, &mine) ||
		    (cache && asyncpool_set_cache(mine, cache))) {
			atomic_store(&ctl->failed, 1);
			_exit(1);
		}
		child_side(mine, ctl, ops, reps);
		asyncpool_destroy(mine);
		_exit(0);
	}
	for (int round = 1; round <= (int)reps + 1; round++) {
		uint64_t t0;

		if (!wait_for(&ctl->ready, round, ctl, pid))
			break;
		t0 = tool_now_ns();
		atomic_store_explicit(&ctl->go, round, memory_order_release);
		loop(pool, ops);
		if (!wait_for(&ctl->done, round, ctl, pid))
			break;
		if (round > 1)
			el[round - 2] = tool_now_ns() - t0;
		if (round == (int)reps + 1)
			ok = true;
	}
	if (!ok)
		atomic_store(&ctl->failed, 1);
	waitpid(pid, &status, 0);
	if (!ok || !WIFEXITED(status) || WEXITSTATUS(status)) {
		rc = -EPROTO;
		goto out;
	}
	bench_summarize(out, el, reps, ops, 2, 2 * ops);
out:
	if (pool)
		asyncpool_destroy(pool);
	if (r)
		asyncpool_region_unref(r);
	if (slab)
		asyncpool_slab_unref(slab);
	if (p)
		asyncpool_proactor_destroy(p);
	munmap(mem, total);
	return rc;
}
