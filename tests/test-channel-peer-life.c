/* SPDX-License-Identifier: MIT */
/*
 * A channel wait asks whether its peer lives (an fcntl(2) on the peer's
 * lock) when it begins and after each look that finds nothing: in a
 * pipeline, once a message.  It keeps a live answer for a period
 * (AP_PEER_LIVE_MS, channel.c), and asks again whatever the period
 * before it returns anything but an item (issue 52):
 *   - 20 receive waits, each woken by an item sent by a thread 1 ms
 *     after it begins: the peer asked at most once, the period made a
 *     minute (the test-hook build's ap_test_hook_peer_live_ms);
 *   - the period a minute, a live answer just kept: the sending process
 *     is killed, then a 1 ms receive wait, an asyncpool_channel_recv_any()
 *     (each after a wait found it alive) and a send wait for room whose
 *     receiver was killed each return -EPIPE, not -ETIMEDOUT;
 *   - with the period the library's (10 ms): the same.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hooks.h"
#include "../lib/pool_wait.h"

#define N   16
#define BS  64
#define CAP 8
#define WAITS 20

static struct asyncpool_shared *make(void)
{
	struct asyncpool_shared_options o;
	struct asyncpool_shared *sp;

	shared_options(&o, BS, N);
	o.channels = 3;
	o.channel_capacity = CAP;
	if (asyncpool_shared_create(&o, &sp))
		bail_out("shared_create");
	return sp;
}

static struct asyncpool_channel *open_end(struct asyncpool *pool, uint32_t c, uint32_t end)
{
	struct asyncpool_channel *ch;

	if (asyncpool_channel_open(pool, c, end, &ch))
		bail_out("channel_open %u %u", c, end);
	return ch;
}

struct feeder {
	struct asyncpool *pool;
	struct asyncpool_channel *s;
	sem_t go;
	int n;
};

/* One item 1 ms after each go, so that the receiver's wait has begun. */
static void *feed(void *arg)
{
	struct feeder *f = arg;

	for (int i = 0; i < f->n; i++) {
		struct asyncpool_lease l;

		while (sem_wait(&f->go) && errno == EINTR)
			;
		usleep(1000);
		if (asyncpool_acquire(f->pool, &l) || asyncpool_channel_send(f->s, &l))
			bail_out("feed");
	}
	return NULL;
}

static void test_rate(void)
{
	struct asyncpool_shared *sp = make();
	struct asyncpool *pool = asyncpool_shared_pool(sp);
	struct feeder f = { .pool = pool, .n = WAITS };
	struct asyncpool_channel *r;
	uint32_t before;
	pthread_t t;
	int got = 0;

	f.s = open_end(pool, 0, ASYNCPOOL_CHANNEL_SEND);
	r = open_end(pool, 0, ASYNCPOOL_CHANNEL_RECV);
	sem_init(&f.go, 0, 0);
	if (pthread_create(&t, NULL, feed, &f))
		bail_out("pthread_create");
	atomic_store(&ap_test_hook_peer_live_ms, 60000);
	before = atomic_load(&ap_test_hook_peer_checks);
	for (int i = 0; i < WAITS; i++) {
		struct asyncpool_lease l;

		sem_post(&f.go);
		if (asyncpool_channel_recv_wait(r, &l, INT64_C(10) * 1000000000) == 0) {
			got++;
			asyncpool_lease_release(&l);
		}
	}
	pthread_join(t, NULL);
	is_int(got, WAITS, "%d receive waits, each woken by an item", WAITS);
	ok(atomic_load(&ap_test_hook_peer_checks) - before <= 1,
	   "the live peer asked %u time(s) in %d waits (at most once a period)",
	   atomic_load(&ap_test_hook_peer_checks) - before, WAITS);
	atomic_store(&ap_test_hook_peer_live_ms, 0);
	asyncpool_channel_close(r);
	asyncpool_channel_close(f.s);
	sem_destroy(&f.go);
	is_int(asyncpool_available(pool), N, "every buffer back");
	asyncpool_shared_close(sp);
}

/* A child holding end `end` of channel c until it is killed. */
static pid_t holder(struct asyncpool_shared *sp, uint32_t c, uint32_t end)
{
	int ready[2];
	char ch = 0;
	pid_t pid;

	if (pipe(ready))
		bail_out("pipe");
	pid = fork_or_bail();
	if (pid == 0) {
		struct asyncpool_shared *csp;
		struct asyncpool_channel *e;

		if (asyncpool_shared_open_fd(asyncpool_shared_fd(sp), &csp) ||
		    asyncpool_channel_open(asyncpool_shared_pool(csp), c, end, &e))
			_exit(2);
		if (write(ready[1], &ch, 1) != 1)
			_exit(3);
		for (;;)
			pause();
	}
	if (read(ready[0], &ch, 1) != 1)
		bail_out("the holder did not start");
	close(ready[0]);
	close(ready[1]);
	return pid;
}

static void kill_reap(pid_t pid)
{
	int st;

	kill(pid, SIGKILL);
	if (waitpid(pid, &st, 0) != pid || !WIFSIGNALED(st))
		bail_out("the holder did not die");
}

static void test_dead(uint32_t period_ms)
{
	struct asyncpool_shared *sp = make();
	struct asyncpool *pool = asyncpool_shared_pool(sp);
	struct asyncpool_channel_item it;
	struct asyncpool_channel *r, *s;
	struct asyncpool_lease l;
	const char *p = period_ms ? "period a minute" : "period 10 ms";
	pid_t pid;

	atomic_store(&ap_test_hook_peer_live_ms, period_ms);
	/* A receiver whose sender is killed after a wait found it alive. */
	r = open_end(pool, 1, ASYNCPOOL_CHANNEL_RECV);
	pid = holder(sp, 1, ASYNCPOOL_CHANNEL_SEND);
	is_int(asyncpool_channel_recv_wait(r, &l, 1000000), -ETIMEDOUT,
	       "%s: a wait with a live sender: -ETIMEDOUT", p);
	kill_reap(pid);
	is_int(asyncpool_channel_recv_wait(r, &l, 1000000), -EPIPE,
	       "%s: killed, then a 1 ms receive wait: -EPIPE", p);
	asyncpool_channel_close(r);
	/* The same through asyncpool_channel_recv_any(). */
	r = open_end(pool, 2, ASYNCPOOL_CHANNEL_RECV);
	pid = holder(sp, 2, ASYNCPOOL_CHANNEL_SEND);
	is_int(asyncpool_channel_recv_any(&r, 1, &it, 1000000), -ETIMEDOUT,
	       "%s: recv_any with a live sender: -ETIMEDOUT", p);
	kill_reap(pid);
	is_int(asyncpool_channel_recv_any(&r, 1, &it, 1000000), -EPIPE,
	       "%s: killed, then a 1 ms recv_any: -EPIPE", p);
	asyncpool_channel_close(r);
	/* A sender waiting for room whose receiver is killed. */
	s = open_end(pool, 0, ASYNCPOOL_CHANNEL_SEND);
	pid = holder(sp, 0, ASYNCPOOL_CHANNEL_RECV);
	for (int i = 0; i < CAP; i++)
		if (asyncpool_acquire(pool, &l) || asyncpool_channel_send(s, &l))
			bail_out("fill");
	if (asyncpool_acquire(pool, &l))
		bail_out("acquire");
	is_int(asyncpool_channel_send_wait(s, &l, 0, 1000000), -ETIMEDOUT,
	       "%s: full, a live receiver: -ETIMEDOUT", p);
	kill_reap(pid);
	is_int(asyncpool_channel_send_wait(s, &l, 0, 1000000), -EPIPE,
	       "%s: its receiver killed, then a 1 ms send wait: -EPIPE", p);
	asyncpool_lease_release(&l);
	asyncpool_channel_close(s);
	atomic_store(&ap_test_hook_peer_live_ms, 0);
	asyncpool_shared_close(sp);
}

int main(void)
{
	plan(3 + 2 * 6);
	tap_watchdog(60);
	test_rate();
	test_dead(60000);
	test_dead(0);
	return done_testing();
}
