/* SPDX-License-Identifier: MIT */
/*
 * Waiting for a buffer (issue 12): asyncpool_acquire_wait across threads
 * and processes, timeouts, signals with and without SA_RESTART, buffers
 * in other threads' caches, asyncpool_cache_flush_all, the eventfd under
 * epoll (a release in another process), asyncpool_prep_wait on a real
 * ring, and destroy with nobody waiting.
 *
 * Links the internal build to see the wait word: a test releases only
 * once its waiter has announced itself (bit 0 of the word), so that the
 * release really has someone to wake; no assertion depends on timing.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#ifdef HAVE_LIBURING
#include <liburing.h>
#endif

#include "hooks.h"
#include "tap.h"
#include "testutil.h"

static struct asyncpool_proactor *proactor;

static void no_destroy(void *ctx)
{
	(void)ctx;
}

/* A region of n buffers of 64 bytes over mem (or fresh memory). */
static struct asyncpool_region *region_over(void *mem, uint32_t n)
{
	struct asyncpool_slab_options o = { .size = sizeof(o), .buffer_size = 64,
					    .buffer_count = n, .numa_node = -1 };
	struct asyncpool_slab *slab;
	struct asyncpool_region *r;
	int rc = mem ? asyncpool_slab_wrap(mem, 64, n, no_destroy, NULL, &slab)
		     : asyncpool_slab_create(&o, &slab);

	if (rc || asyncpool_proactor_register_slab(proactor, slab, ASYNCPOOL_ACCESS_READ, &r))
		bail_out("region");
	asyncpool_slab_unref(slab);
	return r;
}

static struct asyncpool *local_pool(uint32_t n, uint32_t cache)
{
	struct asyncpool_region *r = region_over(NULL, n);
	struct asyncpool *pool;

	if (asyncpool_create(r, &pool) || (cache && asyncpool_set_cache(pool, cache)))
		bail_out("pool");
	asyncpool_region_unref(r);
	return pool;
}

/* Until a waiter has announced itself on the pool's wait word. */
static void until_waiting(struct asyncpool *pool)
{
	while (!(atomic_load(&pool->fl.line->wait) & AP_WAIT_WAITERS))
		sched_yield();
}

/* ---- threads ---- */

struct waiter {
	struct asyncpool *pool;
	int64_t timeout;
	struct asyncpool_lease lease;
	atomic_int rc;
	atomic_bool done;
	atomic_int tid;
	pthread_t th;
};

static void *waiter_main(void *arg)
{
	struct waiter *w = arg;
	int rc;

	atomic_store(&w->tid, (int)syscall(SYS_gettid));
	rc = asyncpool_acquire_wait(w->pool, &w->lease, w->timeout);

	atomic_store(&w->rc, rc);
	atomic_store(&w->done, true);
	return NULL;
}

static void start_waiter(struct waiter *w, struct asyncpool *pool, int64_t timeout)
{
	memset(w, 0, sizeof(*w));
	w->pool = pool;
	w->timeout = timeout;
	atomic_store(&w->rc, 1);
	if (pthread_create(&w->th, NULL, waiter_main, w))
		bail_out("pthread_create");
}

static void test_arguments(void)
{
	struct asyncpool *pool = local_pool(2, 0);
	struct asyncpool_lease l, m, x;

	is_int(asyncpool_acquire_wait(NULL, &l, 0), -EINVAL, "acquire_wait: NULL pool");
	is_int(asyncpool_acquire_wait(pool, NULL, 0), -EINVAL, "acquire_wait: NULL lease");
	is_int(asyncpool_cache_flush_all(NULL), -EINVAL, "cache_flush_all: NULL pool");
	is_int(asyncpool_wait_fd(NULL), -EINVAL, "wait_fd: NULL pool");
	is_int(asyncpool_prep_wait(pool, NULL), -EINVAL, "prep_wait: NULL sqe");
	is_int(asyncpool_cache_flush_all(pool), 0, "cache_flush_all: no caches is nothing to do");
	is_int(asyncpool_acquire_wait(pool, &l, 0), 0, "timeout 0 with a buffer free: acquired");
	is_int(asyncpool_acquire_wait(pool, &m, -1), 0, "no limit with a buffer free: acquired");
	is_int(asyncpool_acquire_wait(pool, &x, 0), -ETIMEDOUT, "timeout 0, empty: -ETIMEDOUT");
	ok(!asyncpool_lease_held(&x), "the lease is zeroed on failure");
	is_int(asyncpool_acquire_wait(pool, &x, 20 * 1000 * 1000), -ETIMEDOUT,
	       "20 ms, empty: -ETIMEDOUT");
	asyncpool_lease_release(&m);
	asyncpool_lease_release(&l);
	is_int(asyncpool_destroy(pool), 0, "destroy after waits that ended");
}

/* A waiter in another thread is woken by a release (with and without caches). */
static void test_thread_wake(uint32_t cache)
{
	struct asyncpool *pool = local_pool(1, cache);
	struct asyncpool_lease held;
	struct waiter w;

	is_int(asyncpool_acquire(pool, &held), 0, "cache %u: take the only buffer", cache);
	start_waiter(&w, pool, -1);
	until_waiting(pool);
	asyncpool_lease_release(&held);
	pthread_join(w.th, NULL);
	is_int(atomic_load(&w.rc), 0, "cache %u: the waiting thread got the released buffer",
	       cache);
	asyncpool_lease_release(&w.lease);
	is_int(asyncpool_destroy(pool), 0, "cache %u: destroy", cache);
}

/*
 * Whether thread tid of this process is inside futex(2): the first field
 * of /proc/self/task/TID/syscall.  1 yes, 0 not (yet), -1 unreadable.
 */
static int in_futex(int tid)
{
	char path[64], buf[64];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/self/task/%d/syscall", tid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	return strtol(buf, NULL, 10) == SYS_futex;
}

/*
 * While a thread waits, every cache of the process is bypassed, so a
 * release goes to the freelist and wakes it (pool_bypass.c, ap_bypass_all;
 * tests/model/wait.pml).  The release comes only once the waiter sleeps
 * in futex(2), so that nothing but the release can give it the buffer:
 * one kept in this thread's cache would leave it asleep (the cache is
 * flushed after the check, so that such a failure ends).
 */
static void test_bypass_asleep(void)
{
	struct asyncpool *pool = local_pool(1, 1);
	struct asyncpool_lease held;
	struct waiter w;
	uint32_t slept;
	int seen = 0;

	is_int(asyncpool_acquire(pool, &held), 0, "bypass: this thread's cache lends the only buffer");
	start_waiter(&w, pool, -1);
	until_waiting(pool);
	while (atomic_load(&w.tid) == 0)
		sched_yield();
	/* bounded: 10 s of 1 ms looks */
	for (int i = 0; i < 10000 && (seen = in_futex(atomic_load(&w.tid))) == 0; i++)
		usleep(1000);
	/*
	 * The waiter took this thread's cache before it announced itself
	 * (ap_cache_wait_begin): closed for the inline code of the header
	 * (its gate NULL) and the library's (bypass), whatever the release
	 * below does (a lent lease's goes to the library either way).
	 * Certain, no timing (tests/mutants/bypass-gate-left-open).
	 */
	{
		const struct asyncpool_inline_cache *c = asyncpool_inline_cache();

		ok(c->pool == pool && c->gate == NULL && c->bypass == 1,
		   "bypass: while a thread waits, this thread's cache is closed (gate NULL, bypass 1)");
	}
	slept = atomic_load(&pool->fl.line->wait);
	asyncpool_lease_release(&held);
	if (seen == 1) {
		is_int(ap_cache_n(ap_cache_of(pool)), 0,
		       "bypass: released while the waiter sleeps, it went to the freelist, not this thread's cache");
		ok(woke_waiters(pool, slept), "bypass: the release woke the waiter (the wait word moved)");
	} else {
		skip(2, "the waiter's system call is not readable in /proc, or it never slept");
	}
	(void)asyncpool_cache_flush_all(pool);
	pthread_join(w.th, NULL);
	is_int(atomic_load(&w.rc), 0, "bypass: the waiter got the buffer");
	asyncpool_lease_release(&w.lease);
	is_int(asyncpool_destroy(pool), 0, "bypass: destroy");
}

/*
 * asyncpool_destroy() stops the wait fd's thread before it frees what
 * that thread reads (the depot, the caches): the thread is held at its
 * look at the pool (a stall point of the test-hook build), and the
 * destroy must reach the stop of the thread before the free.  Freed
 * first, the held thread would go on to read a freed depot (a race
 * ThreadSanitizer found in test-shared-scribble).
 */
static atomic_int wl_looking, wl_released, wl_freed_early;

static void wl_stall(enum ap_test_stall p)
{
	if (p == AP_TS_WAKER_LOOK && !atomic_exchange(&wl_looking, 1)) {
		/* the first look only; bounded, 10 s */
		for (int i = 0; i < 10000 && !atomic_load(&wl_released); i++)
			usleep(1000);
	} else if (p == AP_TS_WAIT_FD_STOP) {
		atomic_store(&wl_released, 1);
	} else if (p == AP_TS_CACHES_FREE) {
		if (!atomic_load(&wl_released))
			atomic_store(&wl_freed_early, 1);
		atomic_store(&wl_released, 1);
	}
}

static void test_destroy_stops_waker(void)
{
	struct asyncpool *pool = local_pool(64, 16);
	struct asyncpool_lease l;
	int fd;

	is_int(asyncpool_acquire(pool, &l), 0, "destroy with a wait fd: a depot and a cache in use");
	asyncpool_lease_release(&l);
	ap_test_hook_stall = wl_stall;
	fd = asyncpool_wait_fd(pool);
	ok(fd >= 0, "destroy with a wait fd: the fd (%d)", fd);
	for (int i = 0; i < 10000 && !atomic_load(&wl_looking); i++)
		usleep(1000);
	ok(atomic_load(&wl_looking), "destroy with a wait fd: its thread is held at its look at the pool");
	is_int(asyncpool_destroy(pool), 0, "destroy with a wait fd: destroyed");
	ap_test_hook_stall = NULL;
	ok(!atomic_load(&wl_freed_early),
	   "destroy with a wait fd: the thread was stopped before the caches and the depot were freed");

	/* Nor may caches change under that thread: asyncpool_set_cache() says -EBUSY. */
	pool = local_pool(64, 0);
	{
		uint32_t size = pool->cache_size;
		bool dflt = pool->cache_default;

		ok(asyncpool_wait_fd(pool) >= 0, "set_cache with a wait fd: the fd");
		is_int(asyncpool_set_cache(pool, 8), -EBUSY, "set_cache with a wait fd: -EBUSY");
		ok(pool->cache_size == size && pool->cache_default == dflt && pool->depot,
		   "set_cache with a wait fd: the default caches (%u) and the depot kept", size);
		is_int(asyncpool_destroy(pool), 0, "set_cache with a wait fd: destroy");
	}
}

/*
 * A waiter between its look at the list and its sleep misses no wake-up
 * (wait_word.h): the release that finds bit 0 set changes the word (its
 * CAS clears the bit and bumps the sequence) before it wakes, so the
 * waiter's futex wait on the value it announced returns at once.  The
 * waiter is held at that place (a stall point), the release runs, and
 * the word must differ from the value the waiter will sleep on; without
 * the bump the waiter sleeps through the only wake-up
 * (tests/mutants/wake-no-bump).
 */
static atomic_int lw_held, lw_go;

static void lw_stall(enum ap_test_stall p)
{
	if (p == AP_TS_WAITER_LOOKED && !atomic_exchange(&lw_held, 1))
		for (int i = 0; i < 10000 && !atomic_load(&lw_go); i++)   /* bounded, 10 s */
			usleep(1000);
}

static void test_wake_between(void)
{
	struct asyncpool *pool = local_pool(1, 0);
	struct asyncpool_lease held;
	struct waiter w;
	uint32_t v;

	is_int(asyncpool_acquire(pool, &held), 0, "wake between look and sleep: the only buffer");
	atomic_store(&lw_held, 0);
	atomic_store(&lw_go, 0);
	ap_test_hook_stall = lw_stall;
	/* A bound, so that the lost wake-up of the mutant ends (in a
	 * failure above), not in the watchdog. */
	start_waiter(&w, pool, (int64_t)tap_watchdog_bound(10) * 1000000000);
	for (int i = 0; i < 10000 && !atomic_load(&lw_held); i++)
		usleep(1000);
	ok(atomic_load(&lw_held), "wake between look and sleep: the waiter is held after its look");
	v = atomic_load(&pool->fl.line->wait);
	ok(v & AP_WAIT_WAITERS, "wake between look and sleep: it announced itself");
	asyncpool_lease_release(&held);
	ok(atomic_load(&pool->fl.line->wait) != v,
	   "wake between look and sleep: the release changed the word it will sleep on");
	atomic_store(&lw_go, 1);
	pthread_join(w.th, NULL);
	ap_test_hook_stall = NULL;
	is_int(atomic_load(&w.rc), 0, "wake between look and sleep: the waiter got the buffer");
	asyncpool_lease_release(&w.lease);
	is_int(asyncpool_destroy(pool), 0, "wake between look and sleep: destroy");
}

/* Several waiting threads, fewer buffers: every one of them gets through. */
#define WTHREADS 6
static atomic_long wt_errors, wt_twice, wt_done;
static _Atomic unsigned char wt_inuse[4];

struct wt_arg {
	struct asyncpool *pool;
	long rounds;
};

static void *wt_main(void *arg)
{
	struct wt_arg *a = arg;

	for (long i = 0; i < a->rounds; i++) {
		struct asyncpool_lease l;
		int rc = asyncpool_acquire_wait(a->pool, &l, -1);

		if (rc) {
			atomic_fetch_add(&wt_errors, 1);
			continue;
		}
		if (atomic_exchange(&wt_inuse[l.buffer_index], 1))
			atomic_fetch_add(&wt_twice, 1);
		if (i % 7 == 0)
			sched_yield();
		atomic_store(&wt_inuse[l.buffer_index], 0);
		asyncpool_lease_release(&l);
		atomic_fetch_add(&wt_done, 1);
	}
	return NULL;
}

static void test_many_waiters(uint32_t cache, long rounds)
{
	struct asyncpool *pool = local_pool(4, cache);
	struct wt_arg a = { pool, rounds };
	pthread_t th[WTHREADS];

	atomic_store(&wt_errors, 0);
	atomic_store(&wt_twice, 0);
	atomic_store(&wt_done, 0);
	for (int i = 0; i < WTHREADS; i++)
		if (pthread_create(&th[i], NULL, wt_main, &a))
			bail_out("pthread_create");
	for (int i = 0; i < WTHREADS; i++)
		pthread_join(th[i], NULL);
	is_int(atomic_load(&wt_errors), 0, "cache %u: %d threads on 4 buffers: no error", cache,
	       WTHREADS);
	is_int(atomic_load(&wt_twice), 0, "cache %u: no buffer held twice", cache);
	is_int(atomic_load(&wt_done), WTHREADS * rounds, "cache %u: every round done", cache);
	is_int(asyncpool_available(pool), 4, "cache %u: all buffers back", cache);
	is_int(asyncpool_destroy(pool), 0, "cache %u: destroy", cache);
}

/* ---- signals ---- */

static atomic_int handled;

static void on_usr1(int sig)
{
	(void)sig;
	atomic_fetch_add(&handled, 1);
}

static void test_signals(void)
{
	struct asyncpool *pool = local_pool(1, 0);
	struct asyncpool_lease held;
	struct sigaction sa;
	struct waiter w;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_usr1;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = 0;                        /* no SA_RESTART */
	sigaction(SIGUSR1, &sa, NULL);
	is_int(asyncpool_acquire(pool, &held), 0, "signals: take the only buffer");
	start_waiter(&w, pool, -1);
	until_waiting(pool);
	/* A signal that lands before the waiter sleeps is handled and the
	 * wait goes on: repeat until one interrupts the sleep. */
	while (!atomic_load(&w.done)) {
		pthread_kill(w.th, SIGUSR1);
		usleep(1000);
	}
	pthread_join(w.th, NULL);
	is_int(atomic_load(&w.rc), -EINTR, "a signal without SA_RESTART: -EINTR");
	ok(!asyncpool_lease_held(&w.lease), "no lease on -EINTR");

	if (tap_sanitizer() && !strcmp(tap_sanitizer(), "ThreadSanitizer")) {
		/* TSan runs a handler only when its thread next enters an
		 * intercepted call, never while it sleeps in futex(2). */
		skip(2, "ThreadSanitizer defers signal handlers past a futex sleep");
		asyncpool_lease_release(&held);
		signal(SIGUSR1, SIG_DFL);
		is_int(asyncpool_destroy(pool), 0, "signals: destroy");
		return;
	}
	sa.sa_flags = SA_RESTART;
	sigaction(SIGUSR1, &sa, NULL);
	atomic_store(&handled, 0);
	start_waiter(&w, pool, -1);
	until_waiting(pool);
	while (atomic_load(&handled) < 3) {
		pthread_kill(w.th, SIGUSR1);
		usleep(1000);
	}
	ok(!atomic_load(&w.done), "with SA_RESTART the wait goes on after signals");
	asyncpool_lease_release(&held);
	pthread_join(w.th, NULL);
	is_int(atomic_load(&w.rc), 0, "with SA_RESTART: the release wakes it");
	asyncpool_lease_release(&w.lease);
	signal(SIGUSR1, SIG_DFL);
	is_int(asyncpool_destroy(pool), 0, "signals: destroy");
}

/* ---- caches ---- */

struct cacher {
	struct asyncpool *pool;
	pthread_mutex_t m;
	pthread_cond_t cv;
	int step;
};

static void step_to(struct cacher *c, int s)
{
	pthread_mutex_lock(&c->m);
	c->step = s;
	pthread_cond_broadcast(&c->cv);
	pthread_mutex_unlock(&c->m);
}

static void step_wait(struct cacher *c, int s)
{
	pthread_mutex_lock(&c->m);
	while (c->step < s)
		pthread_cond_wait(&c->cv, &c->m);
	pthread_mutex_unlock(&c->m);
}

/* Takes all 16 buffers, releases them into its cache, and stays alive. */
static void *cacher_main(void *arg)
{
	struct cacher *c = arg;
	struct asyncpool_lease l[16];

	for (int i = 0; i < 16; i++)
		if (asyncpool_acquire(c->pool, &l[i]))
			bail_out("cacher acquire");
	for (int i = 0; i < 16; i++)
		asyncpool_lease_release(&l[i]);
	step_to(c, 1);
	step_wait(c, 2);
	return NULL;
}

static void test_stranded(bool flush_all)
{
	struct cacher c = { .pool = local_pool(16, 16), .m = PTHREAD_MUTEX_INITIALIZER,
			    .cv = PTHREAD_COND_INITIALIZER };
	struct asyncpool_lease l[16];
	pthread_t th;
	int got = 0;

	pthread_create(&th, NULL, cacher_main, &c);
	step_wait(&c, 1);
	is_int(asyncpool_available(c.pool), 16, "16 cached in another thread count as available");
	if (flush_all) {
		is_int(asyncpool_cache_flush_all(c.pool), 0, "cache_flush_all");
		is_int(ap_fl_count(&c.pool->fl), 16, "all 16 are on the freelist after it");
		is_int(asyncpool_available(c.pool), 16, "available says the same");
	}
	for (int i = 0; i < 16; i++)
		got += asyncpool_acquire(c.pool, &l[got]) == 0;
	is_int(got, 16, "this thread acquires all 16 while the other thread lives");
	for (int i = 0; i < got; i++)
		asyncpool_lease_release(&l[i]);
	step_to(&c, 2);
	pthread_join(th, NULL);
	is_int(asyncpool_destroy(c.pool), 0, "destroy");
}

/* ---- processes ---- */

struct shared_area {
	char *mem;
	size_t total, layout;
	struct asyncpool_region *r;
	struct asyncpool *pool;
};

static void shared_make(struct shared_area *a, uint32_t n)
{
	if (asyncpool_shared_storage_size(n, &a->layout))
		bail_out("storage size");
	a->layout = (a->layout + 4095) & ~(size_t)4095;
	a->total = a->layout + (size_t)n * 64;
	a->mem = mmap(NULL, a->total, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (a->mem == MAP_FAILED)
		bail_out("mmap");
	a->r = region_over(a->mem + a->layout, n);
	if (asyncpool_create_shared(a->mem, a->layout, a->r, &a->pool))
		bail_out("create_shared");
}

static void shared_free(struct shared_area *a)
{
	is_int(asyncpool_destroy(a->pool), 0, "close the shared pool");
	asyncpool_region_unref(a->r);
	munmap(a->mem, a->total);
}

static int child_status(pid_t pid)
{
	int st = -1;

	waitpid(pid, &st, 0);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 100 + WTERMSIG(st);
}

/* A child process waits; the parent releases once it has announced itself. */
static void test_process_wake(void)
{
	struct shared_area a;
	struct asyncpool_lease held;
	pid_t pid;

	shared_make(&a, 1);
	is_int(asyncpool_acquire(a.pool, &held), 0, "process: take the only buffer");
	pid = fork();
	if (pid == 0) {
		struct asyncpool_lease l;
		struct asyncpool *p;

		if (asyncpool_open_shared(a.mem, a.layout, a.r, &p))
			_exit(2);
		if (asyncpool_acquire_wait(p, &l, -1))
			_exit(3);
		asyncpool_lease_release(&l);
		_exit(asyncpool_destroy(p) ? 4 : 0);
	}
	until_waiting(a.pool);
	asyncpool_lease_release(&held);
	is_int(child_status(pid), 0, "a waiter in another process is woken by the release");
	is_int(asyncpool_available(a.pool), 1, "process: the buffer is back");
	shared_free(&a);
}

/*
 * Producer/consumer across two processes, the case: the
 * producer waits for a buffer, writes a sequence number, hands the index
 * over a pipe; the consumer checks and releases by index.  Any result of
 * acquire_wait but 0 is counted: no retries, no spins.
 */
static void test_producer_consumer(long msgs)
{
	struct shared_area a;
	int pfd[2];
	pid_t pid;
	long retries = 0, bad = 0;

	shared_make(&a, 4);
	if (pipe(pfd))
		bail_out("pipe");
	pid = fork();
	if (pid == 0) {
		struct asyncpool *p;
		long n = 0, wrong = 0;
		uint32_t idx;

		close(pfd[1]);
		if (asyncpool_open_shared(a.mem, a.layout, a.r, &p))
			_exit(2);
		while (read(pfd[0], &idx, sizeof(idx)) == sizeof(idx)) {
			long v;

			memcpy(&v, a.mem + a.layout + (size_t)idx * 64, sizeof(v));
			wrong += v != n++;
			if (asyncpool_release_index(p, idx))
				wrong++;
		}
		close(pfd[0]);
		_exit(wrong || n != msgs || asyncpool_destroy(p) ? 3 : 0);
	}
	close(pfd[0]);
	for (long i = 0; i < msgs; i++) {
		struct asyncpool_lease l;
		int rc = asyncpool_acquire_wait(a.pool, &l, -1);

		if (rc) {
			retries++;
			i--;
			if (retries > 1000)
				break;
			continue;
		}
		memcpy(asyncpool_span_ptr(l.span), &i, sizeof(i));
		/* The consumer releases it by index: hand it over. */
		l.release.fn = NULL;
		if (write(pfd[1], &l.buffer_index, sizeof(l.buffer_index)) != sizeof(uint32_t))
			bad++;
	}
	close(pfd[1]);
	is_int(child_status(pid), 0, "consumer: %ld messages in order, released by index", msgs);
	is_int(retries, 0, "producer: 0 retries for %ld messages through 4 buffers", msgs);
	is_int(bad, 0, "every index handed over");
	is_int(asyncpool_available(a.pool), 4, "producer/consumer: all buffers back");
	shared_free(&a);
}

/* The eventfd under epoll: readable after a release in another process. */
static void test_wait_fd(void)
{
	struct shared_area a;
	struct asyncpool_lease held;
	struct epoll_event ev = { .events = EPOLLIN }, out;
	uint64_t cnt;
	int fd, ep, n;
	pid_t pid;

	shared_make(&a, 1);
	is_int(asyncpool_acquire(a.pool, &held), 0, "wait_fd: take the only buffer");
	fd = asyncpool_wait_fd(a.pool);
	ok(fd >= 0, "wait_fd gives an eventfd");
	is_int(asyncpool_wait_fd(a.pool), fd, "the same fd on a second call");
	ep = epoll_create1(EPOLL_CLOEXEC);
	epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
	until_waiting(a.pool);
	is_int(epoll_wait(ep, &out, 1, 0), 0, "not readable while the pool is empty");
	held.release.fn = NULL;         /* released by index in the child */
	pid = fork();
	if (pid == 0)
		_exit(asyncpool_release_index(a.pool, held.buffer_index) ? 2 : 0);
	is_int(child_status(pid), 0, "another process releases the buffer");
	n = epoll_wait(ep, &out, 1, -1);
	ok(n == 1 && (out.events & EPOLLIN), "epoll: the eventfd became readable");
	ok(read(fd, &cnt, sizeof(cnt)) == sizeof(cnt) && cnt >= 1, "read the eventfd");
	is_int(asyncpool_acquire(a.pool, &held), 0, "then the buffer is there");
	asyncpool_lease_release(&held);
	close(ep);
	shared_free(&a);        /* closes the eventfd: tap checks no fd is left */
}

#ifdef HAVE_LIBURING
/* asyncpool_prep_wait on a real ring: completes after a release in another process. */
static void test_prep_wait(void)
{
	struct shared_area a;
	struct asyncpool_lease held;
	struct io_uring ring;
	struct io_uring_cqe *cqe;
	struct io_uring_sqe sqe_copy;
	pid_t pid;
	int rc;

	if (io_uring_queue_init(8, &ring, 0)) {
		skip(7, "no io_uring here");
		return;
	}
	shared_make(&a, 1);
	rc = asyncpool_prep_wait(a.pool, &sqe_copy);
	if (rc == -EOPNOTSUPP) {
		skip(6, "the kernel has no IORING_OP_FUTEX_WAIT (Linux 6.7)");
		io_uring_queue_exit(&ring);
		shared_free(&a);
		return;
	}
	is_int(rc, 0, "prep_wait with a buffer free");
	*io_uring_get_sqe(&ring) = sqe_copy;
	io_uring_submit(&ring);
	rc = io_uring_wait_cqe(&ring, &cqe);
	is_int(rc == 0 ? cqe->res : rc, -EAGAIN, "a buffer is free: completes at once with -EAGAIN");
	io_uring_cqe_seen(&ring, cqe);

	is_int(asyncpool_acquire(a.pool, &held), 0, "take the only buffer");
	is_int(asyncpool_prep_wait(a.pool, io_uring_get_sqe(&ring)), 0, "prep_wait, empty pool");
	io_uring_submit(&ring);
	until_waiting(a.pool);
	held.release.fn = NULL;
	pid = fork();
	if (pid == 0)
		_exit(asyncpool_release_index(a.pool, held.buffer_index) ? 2 : 0);
	is_int(child_status(pid), 0, "another process releases the buffer");
	rc = io_uring_wait_cqe(&ring, &cqe);
	ok(rc == 0 && (cqe->res == 0 || cqe->res == -EAGAIN),
	   "the ring delivers the futex completion (res %d)", rc == 0 ? cqe->res : rc);
	io_uring_cqe_seen(&ring, cqe);
	is_int(asyncpool_acquire(a.pool, &held), 0, "then the buffer is there");
	asyncpool_lease_release(&held);
	io_uring_queue_exit(&ring);
	shared_free(&a);
}
#endif

int main(void)
{
	/* the stress size, as every test reads it: 2000 rounds by default */
	long rounds = stress_iterations(40000) / 20;

	/* A lost wake-up hangs a waiter: make it a failure, not a hang. */
	tap_watchdog(240);
	if (rounds < 50)
		rounds = 50;
	if (asyncpool_proactor_create_memory(&proactor))
		bail_out("proactor");
	test_arguments();
	test_bypass_asleep();
	test_destroy_stops_waker();
	test_thread_wake(0);
	test_thread_wake(1);
	test_wake_between();
	test_many_waiters(0, rounds);
	test_many_waiters(2, rounds);
	test_signals();
	test_stranded(false);
	test_stranded(true);
	test_process_wake();
	test_producer_consumer(rounds * 10);
	test_wait_fd();
#ifdef HAVE_LIBURING
	test_prep_wait();
#else
	skip(8, "built without liburing");
#endif
	is_int(asyncpool_proactor_destroy(proactor), 0, "proactor destroy");
	return done_testing();
}
