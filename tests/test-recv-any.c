/* SPDX-License-Identifier: MIT */
/*
 * asyncpool_channel_recv_any() (issue 52 item 5): bad input with exact
 * errors; three sender processes, one channel each, 2000 items each with
 * a tag (sender, sequence): every item arrives once, each sender's in
 * order, from the end the call names; a receiver asleep on three empty
 * channels is woken by a send on the last; a timeout; -EPIPE once every
 * sender is gone; every buffer back.
 */
#include "config.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <asyncpool.h>
#include "tap.h"
#include "testutil.h"

#define NCH   3
#define ITEMS 2000u
#define N     64

static struct asyncpool_shared *sp;

/* A sender: waits for a byte on go, sends ITEMS items on channel c (or
 * after a delay one item), then waits for a byte on stop before closing. */
static int sender(uint32_t c, unsigned items, unsigned delay_ms, int go, int stop)
{
	struct asyncpool_shared *mine;
	struct asyncpool_channel *ch;
	char b;

	if (asyncpool_shared_open_fd(asyncpool_shared_fd(sp), &mine) ||
	    asyncpool_channel_open(asyncpool_shared_pool(mine), c, ASYNCPOOL_CHANNEL_SEND, &ch))
		return 2;
	if (read(go, &b, 1) != 1)
		return 3;
	if (delay_ms)
		usleep(delay_ms * 1000);
	for (unsigned k = 0; k < items; k++) {
		struct asyncpool_lease l;

		if (asyncpool_acquire_wait(asyncpool_shared_pool(mine), &l, 10LL * 1000000000))
			return 4;
		if (asyncpool_channel_send_wait(ch, &l, ((uint64_t)c << 32) | k,
						10LL * 1000000000))
			return 5;
	}
	if (stop >= 0 && read(stop, &b, 1) != 1)
		return 6;
	if (stop >= 0)
		usleep(100000);         /* the receiver is asleep by then */
	asyncpool_channel_close(ch);
	asyncpool_shared_close(mine);
	return 0;
}

static pid_t spawn(uint32_t c, unsigned items, unsigned delay_ms, int go, int stop)
{
	pid_t pid = fork();

	if (pid < 0)
		bail_out("fork");
	if (pid == 0)
		_exit(sender(c, items, delay_ms, go, stop));
	return pid;
}

static void bad_input(struct asyncpool_channel **rx, struct asyncpool_channel *tx)
{
	struct asyncpool_channel *mixed[2] = { rx[0], tx };
	struct asyncpool_channel *with_null[2] = { rx[0], NULL };
	struct asyncpool_channel_item it;

	is_int(asyncpool_channel_recv_any(rx, NCH, NULL, 0), -EINVAL, "item NULL");
	memset(&it, 0xa5, sizeof(it));
	is_int(asyncpool_channel_recv_any(NULL, NCH, &it, 0), -EINVAL, "ends NULL");
	ok(!asyncpool_lease_held(&it.lease) && it.tag == 0 && it.flags == 0,
	   "*item zeroed on failure");
	is_int(asyncpool_channel_recv_any(rx, 0, &it, 0), -EINVAL, "n 0");
	{
		struct asyncpool_channel *many[65];

		for (int i = 0; i < 65; i++)
			many[i] = rx[0];
		is_int(asyncpool_channel_recv_any(many, 65, &it, 0), -EINVAL,
		       "n 65 (more than 64)");
	}
	is_int(asyncpool_channel_recv_any(with_null, 2, &it, 0), -EINVAL, "an end NULL");
	is_int(asyncpool_channel_recv_any(mixed, 2, &it, 0), -EINVAL, "a sending end");
	is_int(asyncpool_channel_recv_any(rx, NCH, &it, 0), -ETIMEDOUT,
	       "nothing queued, timeout 0: -ETIMEDOUT");
	is_int(asyncpool_channel_recv_any(rx, NCH, &it, 20000000), -ETIMEDOUT,
	       "nothing queued, timeout 20 ms: -ETIMEDOUT");
}

int main(void)
{
	struct asyncpool_shared_options o;
	struct asyncpool_channel *rx[NCH], *tx;
	struct asyncpool *pool;
	struct asyncpool_channel_item it;
	unsigned next[NCH] = { 0 }, wrong_end = 0, out_of_order = 0, got = 0;
	int go[2], stop[2], st, rc;
	pid_t pids[NCH];

	tap_watchdog(120);
	plan(23);
	shared_options(&o, 64, N);
	o.channels = NCH + 1;
	o.channel_capacity = 16;
	if (asyncpool_shared_create(&o, &sp))
		bail_out("shared_create");
	pool = asyncpool_shared_pool(sp);
	for (uint32_t c = 0; c < NCH; c++)
		if (asyncpool_channel_open(pool, c, ASYNCPOOL_CHANNEL_RECV, &rx[c]))
			bail_out("open recv end %u", c);
	if (asyncpool_channel_open(pool, NCH, ASYNCPOOL_CHANNEL_SEND, &tx))
		bail_out("open a send end");
	bad_input(rx, tx);

	/* Three senders at once, through channels of 16 for a pool of 64. */
	if (pipe(go) || pipe(stop))
		bail_out("pipe");
	for (uint32_t c = 0; c < NCH; c++)
		pids[c] = spawn(c, ITEMS, 0, go[0], stop[0]);
	ok(write(go[1], "ggg", NCH) == NCH, "three senders started");
	while (got < NCH * ITEMS) {
		uint32_t c, k;

		rc = asyncpool_channel_recv_any(rx, NCH, &it, 10LL * 1000000000);
		if (rc < 0)
			break;
		c = (uint32_t)(it.tag >> 32);
		k = (uint32_t)it.tag;
		if ((uint32_t)rc != c)
			wrong_end++;
		if (c >= NCH || k != next[c])
			out_of_order++;
		else
			next[c]++;
		asyncpool_lease_release(&it.lease);
		got++;
	}
	is_int((int)got, NCH * ITEMS, "every item received (%u)", NCH * ITEMS);
	is_int((int)wrong_end, 0, "each from the end the call names");
	is_int((int)out_of_order, 0, "each sender's items once and in order");
	ok(next[0] == ITEMS && next[1] == ITEMS && next[2] == ITEMS, "%u of each sender", ITEMS);

	/* Asleep on four empty channels: the last one's send wakes it. */
	asyncpool_channel_close(tx);    /* channel NCH's send end: for the late sender */
	{
		struct asyncpool_channel *four[NCH + 1];
		int g3[2];
		pid_t late;
		uint64_t ms;
		struct timespec t0, t1;

		if (pipe(g3))
			bail_out("pipe");
		memcpy(four, rx, sizeof(rx));
		if (asyncpool_channel_open(pool, NCH, ASYNCPOOL_CHANNEL_RECV, &four[NCH]))
			bail_out("open recv end %u", NCH);
		late = spawn(NCH, 1, 100, g3[0], -1);
		ok(write(g3[1], "g", 1) == 1, "a sender on channel %u sends in 100 ms", NCH);
		clock_gettime(CLOCK_MONOTONIC, &t0);
		rc = asyncpool_channel_recv_any(four, NCH + 1, &it, 10LL * 1000000000);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		ms = (uint64_t)((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000);
		is_int(rc, NCH, "woken with its item, index %d", NCH);
		ok(it.tag == ((uint64_t)NCH << 32), "the item's tag");
		/* Not a timed assertion of speed: only that it did not sleep
		 * out its 10 s timeout. */
		ok(ms < 9000, "woken, not timed out (%llu ms)", (unsigned long long)ms);
		asyncpool_lease_release(&it.lease);
		waitpid(late, &st, 0);
		is_int(WIFEXITED(st) ? WEXITSTATUS(st) : -1, 0, "the late sender exited 0");
		asyncpool_channel_close(four[NCH]);
		close(g3[0]);
		close(g3[1]);
	}

	/* Every sender gone while the receiver waits: -EPIPE. */
	ok(write(stop[1], "sss", NCH) == NCH, "the three senders told to close");
	rc = asyncpool_channel_recv_any(rx, NCH, &it, 10LL * 1000000000);
	is_int(rc, -EPIPE, "every sender gone: -EPIPE");
	for (uint32_t c = 0; c < NCH; c++) {
		waitpid(pids[c], &st, 0);
		if (!WIFEXITED(st) || WEXITSTATUS(st))
			diag("sender %u: status %d", c, st);
	}
	for (uint32_t c = 0; c < NCH; c++)
		asyncpool_channel_close(rx[c]);
	is_int((int)asyncpool_available(pool), N, "every buffer back (%u)", N);
	is_int(asyncpool_check(pool), 0, "the pool checks clean");
	close(go[0]);
	close(go[1]);
	close(stop[0]);
	close(stop[1]);
	asyncpool_shared_close(sp);
	return done_testing();
}
