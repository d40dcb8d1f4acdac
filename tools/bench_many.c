/* SPDX-License-Identifier: MIT */
/*
 * asyncpool bench: many senders to one receiver (issue 52 item 5).
 *
 *   many-senders-1, -2, -4  1, 2 or 4 sender processes, a channel each, to
 *                         one receiver asleep in
 *                         asyncpool_channel_recv_any() on all of them;
 *                         each sender acquires a lease (its cache),
 *                         sends it with asyncpool_channel_send_wait()
 *                         and a tag, the receiver releases it into its
 *                         cache.  ns per item received, all senders
 *                         together; nobody spins (the machine may have
 *                         fewer CPUs than processes).
 *
 * The other design, several sending ends on one channel, is not built
 * (asyncpool_channel_recv_any(3), NOTES).
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

#define MANY_BUFFERS 4096u
#define MANY_CAP     256u
#define MANY_CACHE   64u
#define MANY_MAX     8u

struct many_ctl {
	atomic_int ready;
	atomic_int go;
	atomic_int failed;
};

static int sender_main(struct many_ctl *ctl, int fd, uint32_t c, unsigned long n)
{
	struct asyncpool_shared *sp;
	struct asyncpool_channel *ch;
	struct asyncpool *pool;

	if (asyncpool_shared_open_fd(fd, &sp))
		return 2;
	pool = asyncpool_shared_pool(sp);
	if (asyncpool_set_cache(pool, MANY_CACHE) ||
	    asyncpool_channel_open(pool, c, ASYNCPOOL_CHANNEL_SEND, &ch))
		return 3;
	atomic_fetch_add(&ctl->ready, 1);
	while (!atomic_load(&ctl->go))
		if (atomic_load(&ctl->failed))
			return 4;
		else
			usleep(100);
	for (unsigned long k = 0; k < n; k++) {
		struct asyncpool_lease l;

		if (asyncpool_acquire_wait(pool, &l, 10LL * 1000000000) ||
		    asyncpool_channel_send_wait(ch, &l, k, 10LL * 1000000000))
			return 5;
	}
	asyncpool_channel_close(ch);
	asyncpool_shared_close(sp);
	return 0;
}

/* One repetition: ns for n items from each of senders processes. */
static int many_round(unsigned senders, unsigned long n, uint64_t *elapsed)
{
	struct asyncpool_shared_options o;
	struct asyncpool_channel *rx[MANY_MAX];
	struct asyncpool_shared *sp;
	struct asyncpool *pool;
	struct many_ctl *ctl;
	pid_t pids[MANY_MAX];
	unsigned started = 0;
	uint64_t t0;
	int rc = 0;

	ctl = mmap(NULL, sizeof(*ctl), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (ctl == MAP_FAILED)
		return -ENOMEM;
	memset(ctl, 0, sizeof(*ctl));
	memset(&o, 0, sizeof(o));
	o.size = sizeof(o);
	o.buffer_size = 64;
	o.buffer_count = MANY_BUFFERS;
	o.channels = senders;
	o.channel_capacity = MANY_CAP;
	if ((rc = asyncpool_shared_create(&o, &sp)))
		goto unmap;
	pool = asyncpool_shared_pool(sp);
	if ((rc = asyncpool_set_cache(pool, MANY_CACHE)))
		goto close;
	for (uint32_t c = 0; c < senders; c++)
		if ((rc = asyncpool_channel_open(pool, c, ASYNCPOOL_CHANNEL_RECV, &rx[c])))
			goto close;
	for (; started < senders; started++) {
		pids[started] = fork();
		if (pids[started] < 0) {
			rc = -errno;
			break;
		}
		if (pids[started] == 0)
			_exit(sender_main(ctl, asyncpool_shared_fd(sp), started, n));
	}
	while (!rc && atomic_load(&ctl->ready) < (int)senders) {
		for (unsigned i = 0; i < started; i++)
			if (waitpid(pids[i], NULL, WNOHANG) != 0)
				rc = -EPROTO;
		usleep(1000);
	}
	if (rc) {
		atomic_store(&ctl->failed, 1);
	} else {
		t0 = tool_now_ns();
		atomic_store(&ctl->go, 1);
		for (unsigned long got = 0; got < n * senders; got++) {
			struct asyncpool_channel_item it;
			int r = asyncpool_channel_recv_any(rx, senders, &it, 10LL * 1000000000);

			if (r < 0) {
				rc = r == -ETIMEDOUT ? -EPROTO : r;
				atomic_store(&ctl->failed, 1);
				break;
			}
			asyncpool_lease_release(&it.lease);
		}
		*elapsed = tool_now_ns() - t0;
	}
	for (unsigned i = 0; i < started; i++) {
		int st;

		waitpid(pids[i], &st, 0);
		if (!rc && (!WIFEXITED(st) || WEXITSTATUS(st)))
			rc = -EPROTO;
	}
	for (uint32_t c = 0; c < senders; c++)
		asyncpool_channel_close(rx[c]);
	asyncpool_cache_flush(pool);
	/* Every sender gave back what it took: a buffer missing is a bug. */
	if (!rc && asyncpool_available(pool) != MANY_BUFFERS)
		rc = -EUCLEAN;
close:
	asyncpool_shared_close(sp);
unmap:
	munmap(ctl, sizeof(*ctl));
	return rc;
}

int bench_many(unsigned senders, unsigned long ops, unsigned reps, struct bench_result *out)
{
	uint64_t elapsed[64];
	unsigned long n;

	if (!senders || senders > MANY_MAX || !reps)
		return -EINVAL;
	if (reps > 64)
		reps = 64;
	/* The items in all, split among the senders; a wake-up per item at
	 * worst: a tenth of --ops. */
	n = ops / 10 / senders;
	if (!n)
		n = 1;
	for (unsigned r = 0; r < reps; r++) {
		int rc = many_round(senders, n, &elapsed[r]);

		if (rc)
			return rc;
	}
	bench_summarize(out, elapsed, reps, n * senders, senders, n * senders);
	return 0;
}
