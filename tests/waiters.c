/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <errno.h>
#include <sched.h>
#include <string.h>

#include "tap.h"
#include "waiters.h"

/* One lease: a plain try first, so that a wait is seen and counted. */
static int take(struct waiter *w, struct asyncpool_lease *l)
{
	int rc = asyncpool_acquire(w->pool, l);

	if (rc != -ENOBUFS)
		return rc;
	if (w->waits++ == 0 && w->saw_empty)
		atomic_fetch_add(w->saw_empty, 1);
	for (;;) {
		rc = asyncpool_acquire_wait(w->pool, l, w->timeout_ns);
		if (rc != -ETIMEDOUT)
			return rc;
		w->timeouts++;  /* counted; the test says whether it may happen */
	}
}

static void *waiter_run(void *arg)
{
	struct waiter *w = arg;
	struct asyncpool_lease l[WAITER_MAX_HOLD];

	for (unsigned long r = 0; r < w->rounds; r++) {
		unsigned n = 0;

		for (; n < w->hold; n++) {
			uint64_t *p;
			int rc = take(w, &l[n]);

			if (rc) {
				if (!w->errors++)
					w->first_error = rc;
				break;
			}
			w->leases++;
			p = asyncpool_span_ptr(l[n].span);
			p[0] = w->tag;
			p[1] = r * w->hold + n;
		}
		sched_yield();          /* hold them across a reschedule */
		for (unsigned k = 0; k < n; k++) {
			const uint64_t *p = asyncpool_span_ptr(l[k].span);

			w->wrong += p[0] != w->tag || p[1] != r * w->hold + k;
			asyncpool_lease_release(&l[k]);
		}
	}
	return NULL;
}

void waiters_start(struct waiters *ws, struct asyncpool *pool, unsigned hold0, unsigned hold1,
		   unsigned long iterations)
{
	const unsigned hold[WAITERS] = { hold0, hold1, 1 };
	const int64_t timeout[WAITERS] = { -1, waiter_long_ns(), WAITER_SHORT_NS };

	memset(ws, 0, sizeof(*ws));
	for (int i = 0; i < WAITERS; i++) {
		struct waiter *w = &ws->w[i];

		if (hold[i] < 1 || hold[i] > WAITER_MAX_HOLD)
			bail_out("waiter: hold %u", hold[i]);
		w->pool = pool;
		w->rounds = iterations / 4096 / hold[i] + 8;
		w->hold = hold[i];
		w->timeout_ns = timeout[i];
		w->tag = 0x5700 + (uint64_t)i;
		w->saw_empty = &ws->saw_empty;
		ws->wants += w->rounds * hold[i];
		if (pthread_create(&w->thread, NULL, waiter_run, w))
			bail_out("waiter: pthread_create");
	}
	while (atomic_load(&ws->saw_empty) != WAITERS)
		sched_yield();
}

void waiters_finish(struct waiters *ws)
{
	for (int i = 0; i < WAITERS; i++) {
		struct waiter *w = &ws->w[i];

		pthread_join(w->thread, NULL);
		ws->leases += w->leases;
		ws->wrong += w->wrong;
		ws->errors += w->errors;
		if (!ws->first_error)
			ws->first_error = w->first_error;
		diag("waiter %d (%u at a time, timeout %lld ns): %lu leases, %lu waits, "
		     "%lu timeouts", i, w->hold, (long long)w->timeout_ns, w->leases, w->waits,
		     w->timeouts);
	}
}
