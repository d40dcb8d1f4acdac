/* SPDX-License-Identifier: MIT */
/*
 * asyncpool bench: the wake-up latency cases (issue 12).  A pool of one
 * buffer, shared (in a MAP_SHARED mapping) so that the same code serves
 * threads and processes.  Each round the waiter says it is about to wait
 * and calls asyncpool_acquire_wait(); the holder sees that, lets it fall
 * asleep (sleeps 50 us), notes the time and releases; the waiter notes the time
 * it returned.  The difference is one wake-up: release, futex wake,
 * scheduling, acquire.  The waiter then gives the buffer back for the
 * next round.  CLOCK_MONOTONIC is one clock for every process.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <asyncpool.h>
#include "tool.h"

struct wake_ctl {
	atomic_int round;       /* the waiter is about to wait in this round */
	atomic_int back;        /* the waiter gave the buffer back after this round */
	atomic_int go;          /* the holder has the buffer: this round may start */
	_Atomic uint64_t t0;    /* when the holder released */
	atomic_int failed;
	uint64_t lat[];         /* ns, one per round */
};

struct wake_side {
	struct wake_ctl *ctl;
	void *mem;
	size_t layout;
	struct asyncpool_region *r;
	struct asyncpool *pool;
	unsigned rounds;
	pid_t child;            /* the waiting process, or 0 */
};

/* false when the other side failed or its process died. */
static bool other_ok(struct wake_side *s, unsigned long *spins)
{
	if (atomic_load(&s->ctl->failed))
		return false;
	sched_yield();          /* two cores: leave one to the waiter */
	if (s->child && ++*spins % (1u << 20) == 0 && waitpid(s->child, NULL, WNOHANG) != 0)
		return false;
	return true;
}

static void no_destroy(void *ctx)
{
	(void)ctx;
}

static void sleep_ns(long ns)
{
	struct timespec t = { 0, ns };

	nanosleep(&t, NULL);
}

static void waiter_side(struct wake_side *s, struct asyncpool *pool)
{
	struct wake_ctl *c = s->ctl;

	for (int i = 1; i <= (int)s->rounds; i++) {
		struct asyncpool_lease l;

		/* Until the holder has the buffer again. */
		while (atomic_load(&c->go) != i)
			if (atomic_load(&c->failed))
				return;
		atomic_store(&c->round, i);
		if (asyncpool_acquire_wait(pool, &l, -1)) {
			atomic_store(&c->failed, 1);
			return;
		}
		c->lat[i - 1] = tool_now_ns() - atomic_load(&c->t0);
		asyncpool_lease_release(&l);
		atomic_store(&c->back, i);
	}
}

static void *waiter_thread(void *arg)
{
	struct wake_side *s = arg;

	waiter_side(s, s->pool);
	return NULL;
}

/* Holds the only buffer (l, taken before the waiter started). */
static bool holder_side(struct wake_side *s, struct asyncpool_lease l)
{
	struct wake_ctl *c = s->ctl;
	unsigned long spins = 0;

	atomic_store(&c->go, 1);
	for (int i = 1; i <= (int)s->rounds; i++) {
		while (atomic_load(&c->round) != i)
			if (!other_ok(s, &spins))
				return false;
		sleep_ns(50000);                /* let it fall asleep */
		atomic_store(&c->t0, tool_now_ns());
		asyncpool_lease_release(&l);
		while (atomic_load(&c->back) != i)
			if (!other_ok(s, &spins))
				return false;
		if (asyncpool_acquire(s->pool, &l))
			return false;
		atomic_store(&c->go, i + 1);
	}
	asyncpool_lease_release(&l);
	return true;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

/*
 * rounds wake-ups of a waiting thread (processes false) or process:
 * out->ns[0] the median, ns[1] the minimum, ns[2] the 99th percentile;
 * extra "p99_ns" says so in JSON.
 */
int bench_wake(bool processes, unsigned rounds, struct bench_result *out)
{
	struct asyncpool_proactor *p = NULL;
	struct asyncpool_slab *slab = NULL;
	struct wake_side s;
	struct asyncpool_lease held;
	size_t ctl_size, total;
	char *mem;
	int rc;

	memset(&s, 0, sizeof(s));
	s.rounds = rounds;
	rc = asyncpool_shared_storage_size(1, &s.layout);
	if (rc)
		return rc;
	s.layout = (s.layout + 4095) & ~(size_t)4095;
	ctl_size = (sizeof(struct wake_ctl) + rounds * sizeof(uint64_t) + 4095) & ~(size_t)4095;
	total = ctl_size + s.layout + 4096;
	mem = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED)
		return -ENOMEM;
	s.ctl = (struct wake_ctl *)mem;
	s.mem = mem + ctl_size;
	if ((rc = asyncpool_proactor_create_memory(&p)) ||
	    (rc = asyncpool_slab_wrap(mem + ctl_size + s.layout, 64, 1, no_destroy, NULL, &slab)) ||
	    (rc = asyncpool_proactor_register_slab(p, slab, ASYNCPOOL_ACCESS_READ, &s.r)) ||
	    (rc = asyncpool_create_shared(s.mem, s.layout, s.r, &s.pool)) ||
	    (rc = asyncpool_acquire(s.pool, &held)))
		goto out;
	if (processes) {
		pid_t pid = fork();
		int st = -1;

		if (pid < 0) {
			rc = -errno;
			goto out;
		}
		if (pid == 0) {
			struct asyncpool *mine;

			if (asyncpool_open_shared(s.mem, s.layout, s.r, &mine))
				_exit(2);
			waiter_side(&s, mine);
			_exit(asyncpool_destroy(mine) ? 3 : 0);
		}
		s.child = pid;
		if (!holder_side(&s, held))
			atomic_store(&s.ctl->failed, 1);
		waitpid(pid, &st, 0);
		if (!WIFEXITED(st) || WEXITSTATUS(st))
			atomic_store(&s.ctl->failed, 1);
	} else {
		pthread_t th;

		if (pthread_create(&th, NULL, waiter_thread, &s)) {
			rc = -EAGAIN;
			goto out;
		}
		if (!holder_side(&s, held))
			atomic_store(&s.ctl->failed, 1);
		pthread_join(th, NULL);
	}
	if (atomic_load(&s.ctl->failed)) {
		rc = -EPROTO;
		goto out;
	}
	qsort(s.ctl->lat, rounds, sizeof(uint64_t), cmp_u64);
	out->threads = 2;
	out->ns[0] = (double)s.ctl->lat[rounds / 2];
	out->ns[1] = (double)s.ctl->lat[0];
	out->ns[2] = (double)s.ctl->lat[rounds * 99 / 100];
	out->mops[0] = out->mops[1] = out->mops[2] = 0;
	out->extra_name = "p99_ns";
	out->extra = out->ns[2];
out:
	if (s.pool)
		asyncpool_destroy(s.pool);
	if (s.r)
		asyncpool_region_unref(s.r);
	if (slab)
		asyncpool_slab_unref(slab);
	if (p)
		asyncpool_proactor_destroy(p);
	munmap(mem, total);
	return rc;
}
