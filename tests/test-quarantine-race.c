/* SPDX-License-Identifier: MIT */
/*
 * asyncpool_set_quarantine() while a reclaim runs in another thread: the
 * library's own (the thread of asyncpool_wait_fd(3) reclaims while the
 * pool is empty, every 50 ms slice) or the caller's.  The quarantine was
 * a plain field that a reclaim read: a data race, which the thread
 * sanitizer build (--enable-sanitizers=thread, TSAN_OPTIONS
 * halt_on_error=1) reports, even in a program with one thread of its
 * own.  In other builds the test checks the results.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include <asyncpool.h>
#include "tap.h"
#include "testutil.h"

#define N  4
#define BS 64

static struct asyncpool *pool;
static atomic_bool stop;

static void *reclaimer(void *arg)
{
	long bad = 0;

	(void)arg;
	while (!atomic_load(&stop))
		bad += asyncpool_reclaim(pool) != 0;        /* nobody died: 0 */
	return (void *)bad;
}

int main(void)
{
	struct asyncpool_shared_options o;
	struct asyncpool_shared *sp;
	struct asyncpool_lease l[N];
	pthread_t t;
	void *bad;
	int fd, rc = 0;

	plan(3);
	alarm(60);
	shared_options(&o, BS, N);
	if (asyncpool_shared_create(&o, &sp))
		bail_out("shared_create");
	pool = asyncpool_shared_pool(sp);

	/* The library's thread: an empty pool, a wait fd. */
	for (int i = 0; i < N; i++)
		if (asyncpool_acquire(pool, &l[i]))
			bail_out("acquire");
	fd = asyncpool_wait_fd(pool);
	if (fd < 0)
		bail_out("wait_fd");
	for (int i = 0; i < 8 && !rc; i++) {
		rc = asyncpool_set_quarantine(pool, (uint32_t)(1000 + i));
		usleep(60 * 1000);      /* more than a slice: the thread reclaims */
	}
	is_int(rc, 0, "set_quarantine while the wait fd's thread reclaims: 0");
	for (int i = 0; i < N; i++)
		asyncpool_lease_release(&l[i]);

	/* A thread of the caller's. */
	if (pthread_create(&t, NULL, reclaimer, NULL))
		bail_out("pthread_create");
	for (uint32_t i = 0; i < 20000 && !rc; i++)
		rc = asyncpool_set_quarantine(pool, i % 7000);
	atomic_store(&stop, true);
	pthread_join(t, &bad);
	is_int(rc, 0, "set_quarantine while another thread reclaims: 0");
	is_int((int)(long)bad, 0, "every reclaim returned 0 (nobody died)");
	asyncpool_shared_close(sp);
	return done_testing();
}
