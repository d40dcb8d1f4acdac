/* SPDX-License-Identifier: MIT */
/*
 * asyncpool bench: the shared-2proc cases.  One shared pool, its layout
 * and its buffers in a MAP_SHARED mapping; the parent creates it, forks,
 * the child opens it with its own handle, and both acquire and release
 * at once.  With cache != 0 each process gives its handle per-thread
 * caches (asyncpool_set_cache()).
 *
 * The shared-2p cases do the same on the pool as its users make it:
 * asyncpool_shared_create() (a sealed memfd) in the parent, and in the
 * child its own asyncpool_shared_open() through the fd (its own mapping
 * and attachment).
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

/*
 * How the child gets its own handle on the pool: open it (and give it
 * caches of cache buffers if cache != 0) into *mine, with what close
 * needs in *handle; 0 or -errno.
 */
struct child_pool {
	int (*open)(const void *arg, uint32_t cache, struct asyncpool **mine, void **handle);
	void (*close)(void *handle);
	const void *arg;
};

/*
 * Fork a child that opens the pool its own way (cp) and runs reps + 1
 * rounds of ops pairs beside the parent on pool; the rounds after the
 * first are timed into out.  0 or -errno (-EPROTO: the child failed).
 */
static int two_processes(struct asyncpool *pool, struct shared_ctl *ctl,
			 const struct child_pool *cp, uint32_t cache, unsigned long ops,
			 unsigned reps, struct bench_result *out)
{
	uint64_t el[64];
	pid_t pid;
	int status = 0;
	bool ok = false;

	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		struct asyncpool *mine;
		void *handle;

		if (cp->open(cp->arg, cache, &mine, &handle)) {
			atomic_store(&ctl->failed, 1);
			_exit(1);
		}
		child_side(mine, ctl, ops, reps);
		cp->close(handle);
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
	if (!ok || !WIFEXITED(status) || WEXITSTATUS(status))
		return -EPROTO;
	bench_summarize(out, el, reps, ops, 2, 2 * ops);
	return 0;
}

/* shared-2proc: the layout's own open, on the mapping the child inherited. */
static int open_layout(const void *arg, uint32_t cache, struct asyncpool **mine, void **handle)
{
	const struct tool_shared_pool *t = arg;
	int rc = asyncpool_open_shared(t->layout_mem, t->layout, t->r, mine);

	if (rc)
		return rc;
	*handle = *mine;
	return cache ? asyncpool_set_cache(*mine, cache) : 0;
}

static void close_layout(void *handle)
{
	asyncpool_destroy(handle);
}

int bench_shared(uint32_t buffers, uint32_t cache, unsigned long ops, unsigned reps,
		 struct bench_result *out)
{
	struct tool_shared_pool t;
	struct child_pool cp = { open_layout, close_layout, &t };
	int rc;

	rc = tool_shared_pool(&t, 4096, buffers);
	if (!rc && cache)
		rc = asyncpool_set_cache(t.pool, cache);
	if (!rc)
		rc = two_processes(t.pool, (struct shared_ctl *)t.mem, &cp, cache, ops, reps, out);
	tool_shared_pool_free(&t);
	return rc;
}

/* shared-2p: the child's own asyncpool_shared_open() through the fd. */
static int open_fd(const void *arg, uint32_t cache, struct asyncpool **mine, void **handle)
{
	struct asyncpool_shared_open_options o;
	struct asyncpool_shared *sp;
	int rc;

	memset(&o, 0, sizeof(o));
	o.size = sizeof(o);
	o.fd = asyncpool_shared_fd(arg);
	rc = asyncpool_shared_open(&o, &sp);
	if (rc)
		return rc;
	*handle = sp;
	*mine = asyncpool_shared_pool(sp);
	return cache ? asyncpool_set_cache(*mine, cache) : 0;
}

static void close_fd(void *handle)
{
	asyncpool_shared_close(handle);
}

int bench_shared_fd(uint32_t buffers, uint32_t cache, unsigned long ops, unsigned reps,
		    struct bench_result *out)
{
	struct asyncpool_shared_options o;
	struct asyncpool_shared *sp = NULL;
	struct shared_ctl *ctl;
	struct child_pool cp = { open_fd, close_fd, NULL };
	int rc;

	ctl = mmap(NULL, sizeof(*ctl), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (ctl == MAP_FAILED)
		return -ENOMEM;
	memset(&o, 0, sizeof(o));
	o.size = sizeof(o);
	o.buffer_size = 64;
	o.buffer_count = buffers;
	rc = asyncpool_shared_create(&o, &sp);
	if (!rc && cache)
		rc = asyncpool_set_cache(asyncpool_shared_pool(sp), cache);
	if (!rc) {
		cp.arg = sp;
		rc = two_processes(asyncpool_shared_pool(sp), ctl, &cp, cache, ops, reps, out);
	}
	/* Both gave back what they took: a buffer missing is a bug. */
	if (!rc && asyncpool_available(asyncpool_shared_pool(sp)) != buffers)
		rc = -EUCLEAN;
	if (sp)
		asyncpool_shared_close(sp);
	munmap(ctl, sizeof(*ctl));
	return rc;
}
