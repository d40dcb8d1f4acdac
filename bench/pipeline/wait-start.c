/* SPDX-License-Identifier: MIT */
/*
 * bench/pipeline/wait-start [N [HANDLERS]]: what a blocking wait costs
 * before it sleeps (issue 52): N times (default 100000) each of
 *   acquire    asyncpool_acquire_wait() with a 1 ns timeout on a shared
 *              pool with no buffer free,
 *   recv       asyncpool_channel_recv_wait() with a 1 ns timeout on an
 *              empty channel whose sending end is held (by us),
 * each of which begins a wait (the SA_RESTART rule's look at the
 * handlers, the peer's liveness) and returns -ETIMEDOUT without
 * sleeping.  HANDLERS (default 2): signals given a handler with
 * SA_RESTART first (SIGUSR1, SIGUSR2, SIGRTMIN...), as a program has a
 * few.  Prints ns per call, the median of 7 rounds.  Count the system
 * calls with strace -c -f.  COLD=1: each call timed alone after a pipe
 * round trip to another process and 2 MiB of memory touched (caches
 * cold, as in a pipeline stage).
 *
 *   cc -O2 -Iinclude -o /tmp/wait-start bench/pipeline/wait-start.c \
 *      -Llib/.libs -lasyncpool && LD_LIBRARY_PATH=lib/.libs /tmp/wait-start
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <asyncpool.h>

static void on_sig(int sig)
{
	(void)sig;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

#define ROUNDS 7

/* COLD=1: before each call, a pipe round trip to a child and 2 MiB
 * touched, as a stage's wait begins after other work: the kernel's code
 * and data for the wait start are no longer in the caches. */
static int cold, ping[2], pong[2];
static char *junk;
#define JUNK (2u << 20)

static void cool(void)
{
	char c = 0;

	if (!cold)
		return;
	for (size_t i = 0; i < JUNK; i += 64)
		junk[i]++;
	if (write(ping[1], &c, 1) != 1 || read(pong[0], &c, 1) != 1)
		exit(1);
}

static void cold_setup(void)
{
	cold = getenv("COLD") && atoi(getenv("COLD"));
	if (!cold)
		return;
	junk = calloc(1, JUNK);
	if (!junk || pipe(ping) || pipe(pong))
		exit(1);
	if (fork() == 0) {
		char c;

		/* Ends at the parent's exit: no write end of ping left. */
		close(ping[1]);
		close(pong[0]);
		close(1);
		while (read(ping[0], &c, 1) == 1)
			if (write(pong[1], &c, 1) != 1)
				break;
		_exit(0);
	}
	close(ping[0]);
	close(pong[1]);
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 100000;
	int handlers = argc > 2 ? atoi(argv[2]) : 2;
	struct asyncpool_shared_options o;
	struct asyncpool_shared *sp;
	struct asyncpool *pool;
	struct asyncpool_channel *tx, *rx;
	struct asyncpool_lease held[4], l;
	double acq[ROUNDS], rcv[ROUNDS];
	int rc;

	cold_setup();
	for (int i = 0; i < handlers; i++) {
		struct sigaction sa;
		int sig = i == 0 ? SIGUSR1 : i == 1 ? SIGUSR2 : SIGRTMIN + i - 2;

		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = on_sig;
		sa.sa_flags = SA_RESTART;
		sigemptyset(&sa.sa_mask);
		if (sigaction(sig, &sa, NULL))
			return perror("sigaction"), 1;
	}
	memset(&o, 0, sizeof(o));
	o.size = sizeof(o);
	o.buffer_size = 64;
	o.buffer_count = 4;
	o.channels = 1;
	o.channel_capacity = 4;
	rc = asyncpool_shared_create(&o, &sp);
	if (rc)
		return fprintf(stderr, "shared_create: %s\n", strerror(-rc)), 1;
	pool = asyncpool_shared_pool(sp);
	for (int i = 0; i < 4; i++)
		if (asyncpool_acquire(pool, &held[i]))
			return fprintf(stderr, "acquire\n"), 1;
	if (asyncpool_channel_open(pool, 0, ASYNCPOOL_CHANNEL_SEND, &tx) ||
	    asyncpool_channel_open(pool, 0, ASYNCPOOL_CHANNEL_RECV, &rx))
		return fprintf(stderr, "channel_open\n"), 1;
	for (int r = 0; r < ROUNDS; r++) {
		uint64_t t0, sum = 0;

		for (long i = 0; i < n; i++) {
			cool();
			t0 = now_ns();
			if (asyncpool_acquire_wait(pool, &l, 1) != -ETIMEDOUT)
				return fprintf(stderr, "acquire_wait\n"), 1;
			sum += now_ns() - t0;
		}
		acq[r] = (double)sum / (double)n;
		sum = 0;
		for (long i = 0; i < n; i++) {
			cool();
			t0 = now_ns();
			if (asyncpool_channel_recv_wait(rx, &l, 1) != -ETIMEDOUT)
				return fprintf(stderr, "recv_wait\n"), 1;
			sum += now_ns() - t0;
		}
		rcv[r] = (double)sum / (double)n;
	}
	qsort(acq, ROUNDS, sizeof(acq[0]), cmp);
	qsort(rcv, ROUNDS, sizeof(rcv[0]), cmp);
	printf("wait start%s, %d handler(s), %ld calls x %d rounds, median (min-max) ns a call:\n",
	       cold ? " (cold)" : "", handlers, n, ROUNDS);
	printf("  acquire_wait       %8.0f (%.0f-%.0f)\n", acq[ROUNDS / 2], acq[0], acq[ROUNDS - 1]);
	printf("  channel_recv_wait  %8.0f (%.0f-%.0f)\n", rcv[ROUNDS / 2], rcv[0], rcv[ROUNDS - 1]);
	asyncpool_channel_close(rx);
	asyncpool_channel_close(tx);
	for (int i = 0; i < 4; i++)
		asyncpool_lease_release(&held[i]);
	asyncpool_shared_close(sp);
	return 0;
}
