/* SPDX-License-Identifier: MIT */
/*
 * 4 processes x 1M acquire/release on one shared pool of 64 buffers.
 * Each holder writes its pid and a sequence number into the buffer and
 * checks them before the release: a buffer handed to two processes at
 * once would show the other's pid.  At the end every buffer is back and
 * the freelist audit is clean.  ASYNCPOOL_STRESS_ITERATIONS sets the
 * iterations per process.  The rates printed by diag() set the
 * cross-process throughput beside the same loop in 4 threads of one
 * process; nothing is asserted about time.
 *
 * Waiters (tests/waiters.h) run in this process meanwhile, holding 32,
 * 31 and 1 buffers at a time with asyncpool_acquire_wait(): with the 4
 * processes that is more than the 64 buffers, so they wait, and the
 * releases that wake them come from the other processes.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <asyncpool.h>
#include "tap.h"
#include "shared-common.h"
#include "waiters.h"

#define PROCS 4
#define N 64
#define BS 64

struct worker {
	pthread_t thread;
	struct asyncpool *pool;
	unsigned long n;
	uint64_t id;
	uint64_t ops, wrong, errors;
};

/* The loop of tests/shared-peer stress, in a thread. */
static void *thread_loop(void *arg)
{
	struct worker *w = arg;

	for (unsigned long k = 0; k < w->n; k++) {
		struct asyncpool_lease l;
		uint64_t *p;
		int rc = asyncpool_acquire(w->pool, &l);

		if (rc == -ENOBUFS) {
			k--;
			sched_yield();
			continue;
		}
		if (rc) {
			w->errors++;
			continue;
		}
		p = asyncpool_span_ptr(l.span);
		p[0] = w->id;
		p[1] = k;
		if (k % 1024 == 0)
			sched_yield();
		if (p[0] != w->id || p[1] != k)
			w->wrong++;
		asyncpool_lease_release(&l);
		w->ops++;
	}
	return NULL;
}

static double in_threads(struct asyncpool *pool, int nthreads, unsigned long n)
{
	struct worker w[PROCS];
	uint64_t t0, t1, wrong = 0, errors = 0, ops = 0;

	memset(w, 0, sizeof(w));
	t0 = now_ns();
	for (int i = 0; i < nthreads; i++) {
		w[i].pool = pool;
		w[i].n = n;
		w[i].id = 0x7000 + (uint64_t)i;
		pthread_create(&w[i].thread, NULL, thread_loop, &w[i]);
	}
	for (int i = 0; i < nthreads; i++) {
		pthread_join(w[i].thread, NULL);
		ops += w[i].ops;
		wrong += w[i].wrong;
		errors += w[i].errors;
	}
	t1 = now_ns();
	ok(ops == (uint64_t)nthreads * n && !wrong && !errors,
	   "%d thread(s) of this process: %llu ops, %llu wrong, %llu errors", nthreads,
	   (unsigned long long)ops, (unsigned long long)wrong, (unsigned long long)errors);
	return (double)ops * 1e3 / (double)(t1 - t0);
}

int main(void)
{
	unsigned long n = (unsigned long)stress_iterations(1000000);
	struct asyncpool_shared_options o;
	struct asyncpool_shared *sp;
	struct asyncpool *pool;
	struct asyncpool_stats st;
	int sock[PROCS];
	pid_t pid[PROCS];
	uint64_t res[PROCS][5], t0, t1, total = 0;
	double one, threads;
	char arg[32];
	int opened = 0, reported = 0, exited = 0;
	uint64_t wrong = 0, errors = 0, empty = 0;
	struct asyncpool_lease all[N];
	struct waiters ws;

	tap_watchdog(300);     /* a lost wake-up hangs a waiter: fail, do not hang */
	plan(14 + WAITERS_TESTS);
	shared_options(&o, BS, N);
	is_int(asyncpool_shared_create(&o, &sp), 0, "a shared pool of 64 buffers");
	pool = asyncpool_shared_pool(sp);
	/* The waiters start on an empty pool. */
	for (int i = 0; i < N; i++)
		if (asyncpool_acquire(pool, &all[i]))
			bail_out("acquire %d", i);

	snprintf(arg, sizeof(arg), "%lu", n);
	for (int i = 0; i < PROCS; i++) {
		int32_t rc = -1;

		pid[i] = spawn_peer(&sock[i], "stress", arg);
		if (pid[i] < 0)
			bail_out("spawn");
		asyncpool_shm_send_fd(sock[i], asyncpool_shared_fd(sp));
		if (read_full(sock[i], &rc, sizeof(rc)) == 0 && rc == 0)
			opened++;
	}
	is_int(opened, PROCS, "%d processes opened it", PROCS);
	waiters_start(&ws, pool, 32, 31, n);
	t0 = now_ns();
	for (int i = 0; i < PROCS; i++)
		write_full(sock[i], "g", 1);
	for (int i = 0; i < N; i++)
		asyncpool_lease_release(&all[i]);
	for (int i = 0; i < PROCS; i++)
		if (read_full(sock[i], res[i], sizeof(res[i])) == 0)
			reported++;
	t1 = now_ns();
	waiters_finish(&ws);
	waiters_assert(&ws);
	for (int i = 0; i < PROCS; i++) {
		if (wait_peer(pid[i]) == 0)
			exited++;
		close(sock[i]);
	}
	is_int(reported, PROCS, "every process reported");
	is_int(exited, PROCS, "every process exited 0");
	for (int i = 0; i < reported; i++) {
		total += res[i][0];
		wrong += res[i][1];
		errors += res[i][2];
		empty += res[i][3];
	}
	is_int(total, (uint64_t)PROCS * n, "%d x %lu acquire/release cycles", PROCS, n);
	is_int(wrong, 0, "no buffer held by two processes at once (pid + sequence intact)");
	is_int(errors, 0, "no error but an empty pool");
	is_int(asyncpool_available(pool), N, "available == capacity at the end");
	is_int(asyncpool_check(pool), 0, "the freelist audit is clean");
	memset(&st, 0, sizeof(st));
	st.size = sizeof(st);
	asyncpool_stats(pool, &st);
	ok(st.bad_releases == 0 && st.corruptions == 0, "no bad release, no corruption counted");
	diag("cross-process: %d processes x %lu: %.2f M acquire+release/s (%.0f ns per pair per process), %llu empty",
	     PROCS, n, (double)total * 1e3 / (double)(t1 - t0),
	     (double)(t1 - t0) * PROCS / (double)(total ? total : 1), (unsigned long long)empty);

	/* The same loop in this process, for comparison. */
	one = in_threads(pool, 1, n);
	threads = in_threads(pool, PROCS, n);
	diag("in-process on the same shared pool: 1 thread %.2f M/s, %d threads %.2f M/s",
	     one, PROCS, threads);
	is_int(asyncpool_available(pool), N, "available == capacity after the threads");
	is_int(asyncpool_check(pool), 0, "the audit is still clean");
	asyncpool_shared_close(sp);
	return done_testing();
}
