/* SPDX-License-Identifier: MIT */
/*
 * A holder that dies while others wait or find the pool empty: a child
 * process attaches to a shared pool, leases every buffer, and is
 * SIGKILLed.  A dead process releases nothing, so no release wakes a
 * waiter: the waits must reclaim by themselves.
 *
 * - asyncpool_acquire_wait without a timeout (no cache, and with caches
 *   on both sides, where the waiter's own retries go to the freelist
 *   past its cache): returns 0 with a lease once the child is killed,
 *   within the failure bound (else the test reclaims to free it, and
 *   fails);
 * - asyncpool_wait_fd under epoll (the bound): readable once it is killed;
 * - asyncpool_prep_wait with a linked timeout, as its man page says:
 *   the acquire after a completion gets a buffer;
 * - a cached asyncpool_acquire_bulk and asyncpool_acquire_tokens after
 *   the death: the pop that refills the cache reclaims;
 * - asyncpool_reclaim right after an automatic reclaim (which is rate
 *   limited) still reclaims: the explicit call has no limit.
 * After each: asyncpool_check() 0, every buffer back and FREE.
 *
 * Links the internal build to see the wait word: the child is killed
 * only once the waiter sleeps on it (until_asleep), so that the death
 * comes after its last look.  No assertion depends on timing: the
 * bound, LONG_S (30 s) scaled with the stress size as the watchdog is
 * (tap_watchdog_bound(), tests/tap.h), is a generous failure bound for a
 * wait that never ends, not a measure: a wait ends within one 50 ms
 * slice of the death.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <stdio.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#ifdef HAVE_LIBURING
#include <liburing.h>
#endif

#include "hooks.h"
#include "tap.h"
#include "testutil.h"
#include "layout-util.h"

#define N     8
#define BS    64
#define CACHE 4
#define LONG_S 30
#define LONG_NS ((int64_t)tap_watchdog_bound(LONG_S) * 1000000000ll)

struct victim {
	struct asyncpool_shared *sp;
	struct asyncpool *pool;
	pid_t pid;
};

/* A child that attaches, leases all N buffers, says so, and sleeps. */
static void victim_start(struct victim *v, bool cached)
{
	struct asyncpool_shared_options o;
	int pfd[2];
	char b;

	shared_options(&o, BS, N);
	if (asyncpool_shared_create(&o, &v->sp))
		bail_out("shared_create");
	v->pool = asyncpool_shared_pool(v->sp);
	if (cached && asyncpool_set_cache(v->pool, CACHE))
		bail_out("set_cache");
	if (asyncpool_set_quarantine(v->pool, 0))
		bail_out("set_quarantine");
	if (pipe(pfd))
		bail_out("pipe");
	v->pid = fork_or_bail();
	if (v->pid == 0) {
		struct asyncpool_shared *c;
		struct asyncpool_lease l[N];

		if (asyncpool_shared_open_fd(asyncpool_shared_fd(v->sp), &c))
			_exit(2);
		if (cached && asyncpool_set_cache(asyncpool_shared_pool(c), CACHE))
			_exit(3);
		for (int i = 0; i < N; i++)
			if (asyncpool_acquire(asyncpool_shared_pool(c), &l[i]))
				_exit(4);
		b = 1;
		if (write(pfd[1], &b, 1) != 1)
			_exit(5);
		for (;;)
			pause();
	}
	close(pfd[1]);
	if (read(pfd[0], &b, 1) != 1)
		bail_out("the child did not lease the pool");
	close(pfd[0]);
}

static void victim_kill(struct victim *v)
{
	int st;

	kill(v->pid, SIGKILL);
	if (waitpid(v->pid, &st, 0) != v->pid || !WIFSIGNALED(st))
		bail_out("waitpid");
}

/* Every buffer back, FREE on the list, the pool consistent; then close. */
static void victim_end(struct victim *v, const char *what)
{
	is_int(asyncpool_check(v->pool), 0, "%s: asyncpool_check: consistent", what);
	is_int(asyncpool_available(v->pool), N, "%s: all %d buffers back", what, N);
	(void)asyncpool_cache_flush(v->pool);
	is_int(layout_not_free(v->sp, N), 0, "%s: every buffer FREE", what);
	asyncpool_shared_close(v->sp);
}

/*
 * 1 if a thread of this process sleeps in futex(2) on word (its
 * /proc/self/task/TID/syscall names the call and its first argument),
 * 0 if none does, -1 if that cannot be read here.
 */
static int asleep_on(const void *word)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	int found = -1;

	if (!d)
		return -1;
	while ((e = readdir(d))) {
		char path[300];
		long nr;
		unsigned long arg;
		FILE *f;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/syscall", e->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		if (found < 0)
			found = 0;
		if (fscanf(f, "%ld %lx", &nr, &arg) == 2 && nr == SYS_futex &&
		    arg == (unsigned long)(uintptr_t)word)
			found = 1;
		fclose(f);
	}
	closedir(d);
	return found;
}

/*
 * Until a waiter has announced itself on the pool's wait word and sleeps
 * on it: a death before its last look would be found by that look.
 */
static void until_asleep(struct asyncpool *pool)
{
	int r;

	while (!(atomic_load(&pool->fl.line->wait) & AP_WAIT_WAITERS))
		sched_yield();
	while ((r = asleep_on(&pool->fl.line->wait)) == 0)
		usleep(1000);
	if (r < 0)
		diag("/proc/self/task/*/syscall cannot be read: the waiter may not sleep yet");
}

struct waiter {
	struct asyncpool *pool;
	struct asyncpool_lease lease;
	int rc;
};

static void *waiter_main(void *arg)
{
	struct waiter *w = arg;

	w->rc = asyncpool_acquire_wait(w->pool, &w->lease, -1);
	return NULL;
}

/* Join th within LONG_NS (a deadline for a hang, not a measure). */
static bool join_within(pthread_t th)
{
	struct timespec d;

	clock_gettime(CLOCK_REALTIME, &d);
	d.tv_sec += LONG_NS / 1000000000;
	return pthread_timedjoin_np(th, NULL, &d) == 0;
}

static void test_wait(bool cached)
{
	const char *what = cached ? "acquire_wait, cached" : "acquire_wait";
	struct victim v;
	struct waiter w = { .rc = 1 };
	bool joined;
	pthread_t th;

	victim_start(&v, cached);
	w.pool = v.pool;
	if (pthread_create(&th, NULL, waiter_main, &w))
		bail_out("pthread_create");
	until_asleep(v.pool);
	victim_kill(&v);
	joined = join_within(th);
	ok(joined, "%s, no timeout: returns after the holder is killed (within the %u s bound)", what,
	   tap_watchdog_bound(LONG_S));
	if (!joined) {
		/* The explicit reclaim wakes it. */
		(void)asyncpool_reclaim(v.pool);
		pthread_join(th, NULL);
	}
	is_int(w.rc, 0, "%s: the waiter got a buffer", what);
	ok(asyncpool_lease_held(&w.lease) && w.lease.buffer_index < N, "%s: a valid lease", what);
	asyncpool_lease_release(&w.lease);
	victim_end(&v, what);
}

static void test_wait_fd(void)
{
	struct epoll_event ev = { .events = EPOLLIN }, out;
	struct asyncpool_lease l;
	struct victim v;
	int fd, ep;

	victim_start(&v, false);
	fd = asyncpool_wait_fd(v.pool);
	ok(fd >= 0, "wait_fd: an eventfd");
	ep = epoll_create1(EPOLL_CLOEXEC);
	if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev))
		bail_out("epoll");
	until_asleep(v.pool);
	victim_kill(&v);
	is_int(epoll_wait(ep, &out, 1, (int)(LONG_NS / 1000000)), 1,
	       "wait_fd: readable once the holder was killed");
	is_int(asyncpool_acquire(v.pool, &l), 0, "wait_fd: then a buffer is there");
	asyncpool_lease_release(&l);
	close(ep);
	victim_end(&v, "wait_fd");
}

#ifdef HAVE_LIBURING
/*
 * asyncpool_prep_wait armed as its man page says for a pool with
 * attachments, with a linked timeout: after each completion (a wake, or
 * -ECANCELED when the timeout fires) an acquire, which reclaims.  The
 * holder dies once the first wait is armed; LONG_NS / 50 ms rounds are
 * the failure bound.
 */
static void test_prep_wait(void)
{
	struct __kernel_timespec slice = { .tv_sec = 0, .tv_nsec = 50 * 1000000 };
	struct io_uring_sqe probe;
	struct asyncpool_lease l;
	struct io_uring ring;
	struct victim v;
	int rc = -ENOBUFS, rounds;

	if (io_uring_queue_init(4, &ring, 0)) {
		skip(4, "no io_uring here");
		return;
	}
	victim_start(&v, false);
	if (asyncpool_prep_wait(v.pool, &probe) == -EOPNOTSUPP) {
		skip(4, "the kernel has no IORING_OP_FUTEX_WAIT (Linux 6.7)");
		victim_kill(&v);
		(void)asyncpool_reclaim(v.pool);
		asyncpool_shared_close(v.sp);
		io_uring_queue_exit(&ring);
		return;
	}
	for (rounds = 0; rounds < LONG_NS / 50000000 && rc == -ENOBUFS; rounds++) {
		struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
		struct io_uring_cqe *cqe;

		if (asyncpool_prep_wait(v.pool, sqe))
			bail_out("prep_wait");
		sqe->flags |= IOSQE_IO_LINK;
		io_uring_prep_link_timeout(io_uring_get_sqe(&ring), &slice, 0);
		if (io_uring_submit(&ring) != 2)
			bail_out("submit");
		if (!rounds)
			victim_kill(&v);
		for (int k = 0; k < 2; k++) {
			if (io_uring_wait_cqe(&ring, &cqe))
				bail_out("wait_cqe");
			io_uring_cqe_seen(&ring, cqe);
		}
		rc = asyncpool_acquire(v.pool, &l);
	}
	is_int(rc, 0, "prep_wait with a linked 50 ms timeout: a buffer once the holder is killed "
	       "(%d rounds)", rounds);
	asyncpool_lease_release(&l);
	io_uring_queue_exit(&ring);
	victim_end(&v, "prep_wait");
}
#endif

/* The pop that refills a cache for a bulk acquire reclaims too. */
static void test_bulk(bool tokens)
{
	const char *what = tokens ? "cached acquire_tokens" : "cached acquire_bulk";
	struct asyncpool_lease l[2];
	uint64_t t[2];
	struct victim v;

	victim_start(&v, true);
	victim_kill(&v);
	if (tokens) {
		is_int(asyncpool_acquire_tokens(v.pool, t, 2), 0, "%s: 2 after the death", what);
		is_int(asyncpool_release_tokens(v.pool, t, 2), 0, "%s: released", what);
	} else {
		is_int(asyncpool_acquire_bulk(v.pool, l, 2), 0, "%s: 2 after the death", what);
		asyncpool_release_bulk(l, 2);
	}
	victim_end(&v, what);
}

/* An automatic reclaim just ran (nothing dead): the explicit one is not held back. */
static void test_explicit(void)
{
	struct asyncpool_lease l;
	struct victim v;

	victim_start(&v, false);
	is_int(asyncpool_acquire(v.pool, &l), -ENOBUFS, "explicit: empty while the holder lives");
	victim_kill(&v);
	is_int(asyncpool_reclaim(v.pool), N, "explicit: asyncpool_reclaim brings all %d back", N);
	victim_end(&v, "explicit");
}

int main(void)
{
	/* A wait that never ends is a failure, not a hang. */
	tap_watchdog(120);
	plan(36);
	test_wait(false);
	test_wait(true);
	test_wait_fd();
#ifdef HAVE_LIBURING
	test_prep_wait();
#else
	skip(4, "built without liburing");
#endif
	test_bulk(false);
	test_bulk(true);
	test_explicit();
	return done_testing();
}
