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

int tool_shared_pool(struct tool_shared_pool *t, size_t head, uint32_t count)
{
	size_t bufs = ((size_t)count * 64 + 4095) & ~(size_t)4095;
	int rc;

	memset(t, 0, sizeof(*t));
	t->mem = MAP_FAILED;
	rc = asyncpool_shared_storage_size(count, &t->layout);
	if (rc)
		return rc;
	t->layout = (t->layout + 4095) & ~(size_t)4095;
	t->total = head + t->layout + bufs;
	t->mem = mmap(NULL, t->total, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (t->mem == MAP_FAILED)
		return -ENOMEM;
	t->layout_mem = t->mem + head;
	if ((rc = asyncpool_proactor_create_memory(&t->p)) ||
	    (rc = asyncpool_slab_wrap(t->mem + head + t->layout, 64, count, no_destroy, NULL,
				      &t->slab)) ||
	    (rc = asyncpool_proactor_register_slab(t->p, t->slab, ASYNCPOOL_ACCESS_READ, &t->r)) ||
	    (rc = asyncpool_create_shared(t->layout_mem, t->layout, t->r, &t->pool)))
		return rc;
	return 0;
}

void tool_shared_pool_free(struct tool_shared_pool *t)
{
	if (t->pool)
		asyncpool_destroy(t->pool);
	if (t->r)
		asyncpool_region_unref(t->r);
	if (t->slab)
		asyncpool_slab_unref(t->slab);
	if (t->p)
		asyncpool_proactor_destroy(t->p);
	if (t->mem != MAP_FAILED)
		munmap(t->mem, t->total);
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
	struct tool_shared_pool t;
	struct asyncpool *pool;
	struct shared_ctl *ctl;
	uint64_t el[64];
	pid_t pid;
	int rc, status = 0;
	bool ok = false;

	rc = tool_shared_pool(&t, 4096, buffers);
	if (!rc && cache)
		rc = asyncpool_set_cache(t.pool, cache);
	if (rc)
		goto out;
	ctl = (struct shared_ctl *)t.mem;
	pool = t.pool;

	pid = fork();
	if (pid < 0) {
		rc = -errno;
		goto out;
	}
	if (pid == 0) {
		struct asyncpool *mine;

		if (asyncpool_open_shared(t.layout_mem, t.layout, t.r, &mine) ||
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
	tool_shared_pool_free(&t);
	return rc;
}
