/* SPDX-License-Identifier: MIT */
/*
 * asyncpool bench: the reclaim-latency case (issue 11).  The parent
 * creates a shared pool (a memfd) and sets its quarantine to 0; each
 * round a child process opens the pool itself (its own attachment),
 * leases a quarter of the buffers, puts up to a cache's worth more in
 * its per-thread cache, says so over a pipe and is SIGKILLed.  The
 * parent reaps it and times one asyncpool_reclaim(), which must bring
 * back every one of them: anything else is a failure, not a number.
 */
#include "config.h"

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <asyncpool.h>
#include "tool.h"

/* The child: hold leased + cached buffers, report, wait for the kill. */
static void child(int fd, int report, uint32_t leased, uint32_t cached, uint32_t cache)
{
	struct asyncpool_lease *l = calloc((size_t)leased + cached, sizeof(*l));
	struct asyncpool_shared *sp;
	struct asyncpool *pool;
	int32_t rc = l ? asyncpool_shared_open_fd(fd, &sp) : -ENOMEM;

	if (!rc) {
		pool = asyncpool_shared_pool(sp);
		rc = asyncpool_set_cache(pool, cache);
		for (uint32_t k = 0; !rc && k < leased + cached; k++)
			rc = asyncpool_acquire(pool, &l[k]);
		/* exactly `cached` in the cache: what a refill left there goes back first */
		if (!rc && (rc = asyncpool_cache_flush(pool)) > 0)
			rc = 0;
		for (uint32_t k = leased; !rc && k < leased + cached; k++)
			asyncpool_lease_release(&l[k]);
	}
	if (write(report, &rc, sizeof(rc)) != sizeof(rc) || rc)
		_exit(1);
	for (;;)
		pause();
}

/* One round: the ns of the reclaim, or -errno (-EUCLEAN: a buffer lost). */
static int64_t one_round(struct asyncpool_shared *sp, uint32_t buffers, uint32_t leased,
			 uint32_t cached, uint32_t cache)
{
	struct asyncpool *pool = asyncpool_shared_pool(sp);
	int p[2], st;
	int32_t crc = -EPIPE;
	uint64_t t0, t1;
	pid_t pid;
	int rc;

	if (pipe(p) < 0)
		return -errno;
	pid = fork();
	if (pid < 0) {
		rc = -errno;
		close(p[0]);
		close(p[1]);
		return rc;
	}
	if (pid == 0) {
		close(p[0]);
		child(asyncpool_shared_fd(sp), p[1], leased, cached, cache);
	}
	close(p[1]);
	if (read(p[0], &crc, sizeof(crc)) != sizeof(crc))
		crc = -EPIPE;
	close(p[0]);
	kill(pid, SIGKILL);
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (crc)
		return crc;
	t0 = tool_now_ns();
	rc = asyncpool_reclaim(pool);
	t1 = tool_now_ns();
	if (rc < 0)
		return rc;
	if ((uint32_t)rc != leased + cached || asyncpool_available(pool) != buffers ||
	    asyncpool_check(pool))
		return -EUCLEAN;
	return (int64_t)(t1 - t0);
}

int bench_reclaim(uint32_t buffers, uint32_t cache, unsigned rounds, struct bench_result *out)
{
	struct asyncpool_shared_options o;
	struct asyncpool_shared *sp;
	uint32_t leased = buffers / 4, cached = cache < buffers / 4 ? cache : buffers / 4;
	double ns[64];
	int rc;

	if (rounds > 64)
		rounds = 64;
	memset(&o, 0, sizeof(o));
	o.size = sizeof(o);
	o.buffer_size = 64;
	o.buffer_count = buffers;
	rc = asyncpool_shared_create(&o, &sp);
	if (rc)
		return rc;
	rc = asyncpool_set_quarantine(asyncpool_shared_pool(sp), 0);
	for (unsigned i = 0; !rc && i < rounds; i++) {
		int64_t t = one_round(sp, buffers, leased, cached, cache);

		if (t < 0)
			rc = (int)t;
		else
			ns[i] = (double)t;
	}
	asyncpool_shared_close(sp);
	if (rc)
		return rc;
	out->threads = 1;
	bench_spread(out->ns, ns, rounds);
	/* millions of buffers back per second: the best from the fastest */
	for (int k = 0; k < 3; k++)
		out->mops[k] = (leased + cached) * 1000.0 / out->ns[k == 0 ? 0 : 3 - k];
	out->extra_name = "buffers_reclaimed";
	out->extra = leased + cached;
	return 0;
}
