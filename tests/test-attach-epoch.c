/* SPDX-License-Identifier: MIT */
/*
 * Ends of a gone attachment (issue 54, kind 3).  A channel's end word
 * names an attachment by its slot and its epoch (channel_ring.h); an
 * attach bumps the slot's epoch, so that a slot reused by a later
 * process is never taken for the one that held the end.  Here a child
 * opens the receiving end of channel 0, on which two buffers are
 * queued, and closes the pool without closing the end (its attachment
 * slot is freed, the end word still names it); a second child then
 * attaches, takes the same slot at the next epoch, and stays alive.
 * The old end is dead:
 *   - asyncpool_reclaim() frees the end; the two queued stay for the
 *     next receiver (1.10's rule), or, in a pool created with
 *     ASYNCPOOL_SHARED_CHANNEL_DROP, go back to the pool (the channel's
 *     reclaimed counter says 2);
 *   - asyncpool_channel_open() of that end takes it (not -EBUSY), and
 *     the new receiver gets the two (or, dropped, finds it empty).
 * tests/mutants/chan-end-alive-epoch-ignored, reclaim-end-epoch-ignored.
 */
#include "config.h"

#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hooks.h"
#include "tap.h"
#include "testutil.h"

#define N  8
#define BS 64

/* A child's exit status, or 100 + its signal. */
static int child_status(pid_t pid)
{
	int st = -1;

	waitpid(pid, &st, 0);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 100 + WTERMSIG(st);
}

/* What a child says of its attachment. */
struct att {
	uint32_t slot;
	uint64_t epoch;
};

static struct att attached(struct asyncpool *pool)
{
	struct att a = { pool->slot, AP_ATT_EPOCH(atomic_load(&pool->fl.att->life)) };

	return a;
}

/* Child 1: open the receiving end, then close the pool and not the end. */
static void leaver(int fd, int out)
{
	struct asyncpool_shared *sp;
	struct asyncpool_channel *rx;
	struct att a;

	if (asyncpool_shared_open_fd_flags(fd, ASYNCPOOL_SHARED_OPEN_NO_RECLAIM, &sp) ||
	    asyncpool_channel_open(asyncpool_shared_pool(sp), 0, ASYNCPOOL_CHANNEL_RECV, &rx))
		_exit(2);
	a = attached(asyncpool_shared_pool(sp));
	if (write(out, &a, sizeof(a)) != sizeof(a))
		_exit(3);
	asyncpool_shared_close(sp);     /* the end left open: its word stays */
	_exit(0);
}

/* Child 2: attach (the freed slot, a later epoch) and stay until told. */
static void stayer(int fd, int out, int in)
{
	struct asyncpool_shared *sp;
	struct att a;
	char c;

	if (asyncpool_shared_open_fd_flags(fd, ASYNCPOOL_SHARED_OPEN_NO_RECLAIM, &sp))
		_exit(2);
	a = attached(asyncpool_shared_pool(sp));
	if (write(out, &a, sizeof(a)) != sizeof(a))
		_exit(3);
	(void)read(in, &c, 1);
	asyncpool_shared_close(sp);
	_exit(0);
}

struct scene {
	struct asyncpool_shared *sp;
	struct asyncpool *pool;
	struct asyncpool_channel *tx;
	pid_t stayer;
	int go;                 /* the stayer's pipe: closed, it leaves */
};

static struct asyncpool_channel_stats chan_stats(struct asyncpool *pool)
{
	struct asyncpool_channel_stats s;

	memset(&s, 0, sizeof(s));
	s.size = sizeof(s);
	if (asyncpool_channel_stats(pool, 0, &s))
		bail_out("channel_stats");
	return s;
}

/* Two queued for a receiver gone with its slot, which a live one reuses. */
static void scene_make(struct scene *sc, const char *what, bool drop)
{
	struct asyncpool_shared_options o;
	struct att a1, a2;
	int p1[2], p2[2], p3[2];
	pid_t pid;

	shared_options(&o, BS, N);
	o.channels = 1;
	o.channel_capacity = 4;
	if (drop)
		o.flags |= ASYNCPOOL_SHARED_CHANNEL_DROP;
	if (asyncpool_shared_create(&o, &sc->sp))
		bail_out("shared_create");
	sc->pool = asyncpool_shared_pool(sc->sp);
	if (asyncpool_channel_open(sc->pool, 0, ASYNCPOOL_CHANNEL_SEND, &sc->tx))
		bail_out("channel_open send");
	for (int i = 0; i < 2; i++) {
		struct asyncpool_lease l;

		if (asyncpool_acquire(sc->pool, &l) || asyncpool_channel_send(sc->tx, &l))
			bail_out("send");
	}
	if (pipe(p1) || pipe(p2) || pipe(p3))
		bail_out("pipe");
	pid = fork_or_bail();
	if (pid == 0)
		leaver(asyncpool_shared_fd(sc->sp), p1[1]);
	if (read(p1[0], &a1, sizeof(a1)) != sizeof(a1) || child_status(pid) != 0)
		bail_out("%s: the first child", what);
	sc->stayer = fork_or_bail();
	if (sc->stayer == 0) {
		close(p3[1]);
		stayer(asyncpool_shared_fd(sc->sp), p2[1], p3[0]);
	}
	close(p3[0]);
	sc->go = p3[1];
	if (read(p2[0], &a2, sizeof(a2)) != sizeof(a2))
		bail_out("%s: the second child", what);
	close(p1[0]);
	close(p1[1]);
	close(p2[0]);
	close(p2[1]);
	ok(a1.slot == a2.slot && a2.epoch > a1.epoch,
	   "%s: the second child took the first one's slot (%u, %u) at a later epoch (%llu, %llu)",
	   what, a1.slot, a2.slot, (unsigned long long)a1.epoch, (unsigned long long)a2.epoch);
	is_int(chan_stats(sc->pool).ends, ASYNCPOOL_CHANNEL_SEND | ASYNCPOOL_CHANNEL_RECV,
	       "%s: the gone receiver's end is still taken, two queued", what);
}

static void scene_end(struct scene *sc, const char *what)
{
	close(sc->go);
	is_int(child_status(sc->stayer), 0, "%s: the second child closed and exited 0", what);
	asyncpool_channel_close(sc->tx);
	is_int(asyncpool_available(sc->pool), N, "%s: every buffer back", what);
	asyncpool_shared_close(sc->sp);
}

static void test_reclaim(bool drop)
{
	const char *what = drop ? "reclaim, drop" : "reclaim";
	struct asyncpool_channel_stats s;
	struct scene sc;
	int rc;

	scene_make(&sc, what, drop);
	rc = asyncpool_reclaim(sc.pool);
	ok(rc >= 0, "%s: asyncpool_reclaim (%d)", what, rc);
	s = chan_stats(sc.pool);
	ok(s.channels == 1 && s.capacity == 4, "%s: the stats say 1 channel of 4 (%u, %u)",
	   what, s.channels, s.capacity);
	is_int(s.ends, ASYNCPOOL_CHANNEL_SEND, "%s: the end of the gone attachment is freed", what);
	is_int(s.reclaimed, drop ? 2 : 0, "%s: the reclaimed counter says %d", what, drop ? 2 : 0);
	is_int(s.depth, drop ? 0 : 2, "%s: %s queued", what, drop ? "nothing left" : "the two stay");
	is_int(asyncpool_available(sc.pool), drop ? N : N - 2, "%s: %s", what,
	       drop ? "the two are back in the pool" : "the two are not in the pool");
	if (!drop) {
		struct asyncpool_channel *rx = NULL;
		struct asyncpool_lease l[2];

		is_int(asyncpool_channel_open(sc.pool, 0, ASYNCPOOL_CHANNEL_RECV, &rx), 0,
		       "%s: the freed end is taken", what);
		is_int(rx ? asyncpool_channel_recv_leases(rx, l, 2) : 0, 2,
		       "%s: and the new receiver gets the two", what);
		if (rx) {
			asyncpool_lease_release(&l[0]);
			asyncpool_lease_release(&l[1]);
			asyncpool_channel_close(rx);
		}
	}
	scene_end(&sc, what);
}

static void test_open(bool drop)
{
	const char *what = drop ? "open, drop" : "open";
	struct asyncpool_channel *rx = NULL;
	struct asyncpool_lease l[3];
	struct scene sc;

	scene_make(&sc, what, drop);
	is_int(asyncpool_channel_open(sc.pool, 0, ASYNCPOOL_CHANNEL_RECV, &rx), 0,
	       "%s: the end a gone attachment held is taken, not -EBUSY", what);
	is_int(chan_stats(sc.pool).reclaimed, drop ? 2 : 0, "%s: the reclaimed counter says %d",
	       what, drop ? 2 : 0);
	is_int(rx ? asyncpool_channel_recv_leases(rx, l, 3) : 0, drop ? -EAGAIN : 2,
	       "%s: and the new receiver %s", what, drop ? "finds it empty" : "gets the two queued");
	if (!drop) {
		asyncpool_lease_release(&l[0]);
		asyncpool_lease_release(&l[1]);
	}
	if (rx)
		asyncpool_channel_close(rx);
	scene_end(&sc, what);
}

int main(void)
{
	plan(36);
	tap_watchdog(60);
	test_reclaim(false);
	test_reclaim(true);
	test_open(false);
	test_open(true);
	return done_testing();
}
