/* SPDX-License-Identifier: MIT */
/*
 * Random SIGKILLs of either end of a channel (issue 33, item 4): a
 * sending process and a receiving process hand buffers over one channel
 * without end; the test kills one of them at a random moment and starts
 * a new one in its place (which takes the dead end through the reclaim),
 * and every KILLS_PER_CHECK kills kills both and checks that every
 * buffer came back:
 * - none lost: after both died, every buffer is back within one
 *   quarantine plus 1 s (a failure bound, hundreds of times what it
 *   takes), or queued in the channel (sent while no receiver had the
 *   end: deliverable, and the test then receives them); then
 *   asyncpool_check() is clean and every word is FREE;
 * - none handed out twice: every send carries a stamp that no other
 *   send has, and the receivers mark each stamp they get in a bitmap in
 *   memory shared by all of them; a stamp received twice fails the test,
 *   unless the second is flagged redelivered (since 1.10 a receiver's
 *   held items come back to the next one after its death);
 * - no item lost (issue 52): every stamp whose send returned success is
 *   received, by a receiver or by the test's own drain at the end.
 * make check: 100 kills (more with ASYNCPOOL_STRESS_ITERATIONS);
 * make check-long: 10,000.
 */
#include "config.h"

#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <asyncpool.h>
#include "tap.h"
#include "testutil.h"
#include "layout-util.h"

#define N               32
#define BS              64
#define CAP             16
#define QUARANTINE_MS   20
#define KILLS_PER_CHECK 10
#define STAMPS          (1u << 26)

struct shared_test {
	_Atomic uint64_t next_stamp;    /* the senders' */
	_Atomic uint64_t received;
	_Atomic uint32_t twice;         /* stamps received twice, not redelivered */
	_Atomic uint32_t again;         /* stamps received again, redelivered */
	_Atomic uint8_t  seen[STAMPS / 8];
	_Atomic uint8_t  sent[STAMPS / 8]; /* sends that returned success */
};


static struct shared_test *T;

static void mark_sent(uint64_t s)
{
	atomic_fetch_or(&T->sent[s / 8], (uint8_t)(1u << (s % 8)));
}

static void sender(int fd)
{
	struct asyncpool_shared *sp;
	struct asyncpool_channel *ch;
	struct asyncpool *pool;
	unsigned seed = (unsigned)getpid();

	if (asyncpool_shared_open_fd(fd, &sp))
		_exit(2);
	pool = asyncpool_shared_pool(sp);
	if (asyncpool_channel_open(pool, 0, ASYNCPOOL_CHANNEL_SEND, &ch))
		_exit(3);
	for (;;) {
		struct asyncpool_lease l[4];
		uint64_t t[4], st[4];
		int n = 1 + (int)(rand_r(&seed) % 4), got = 0, rc;

		while (got < n && asyncpool_acquire(pool, &l[got]) == 0)
			got++;
		if (!got) {
			sched_yield();
			continue;
		}
		for (int j = 0; j < got; j++) {
			uint64_t s = atomic_fetch_add(&T->next_stamp, 1) % STAMPS;

			memcpy(asyncpool_span_ptr(l[j].span), &s, sizeof(s));
			t[j] = asyncpool_lease_token(&l[j]);
			st[j] = s;
		}
		if (got == 1) {
			while ((rc = asyncpool_channel_send(ch, &l[0])) == -EAGAIN)
				sched_yield();
			if (rc)
				_exit(4);
			mark_sent(st[0]);
			continue;
		}
		for (int j = 0; j < got; j += rc) {
			rc = asyncpool_channel_send_tokens(ch, t + j, (uint32_t)(got - j));
			if (rc == -EAGAIN) {
				rc = 0;
				sched_yield();
			} else if (rc < 0) {
				_exit(4);
			}
			for (int k = 0; k < rc; k++)
				mark_sent(st[j + k]);
		}
	}
}

static void check_stamp(struct asyncpool_channel_item *it)
{
	uint64_t s;

	memcpy(&s, asyncpool_span_ptr(it->lease.span), sizeof(s));
	s %= STAMPS;
	if (atomic_fetch_or(&T->seen[s / 8], (uint8_t)(1u << (s % 8))) & (1u << (s % 8)))
		atomic_fetch_add(it->flags & ASYNCPOOL_CHANNEL_REDELIVERED ? &T->again : &T->twice,
				 1);
	atomic_fetch_add(&T->received, 1);
}

static void receiver(int fd)
{
	struct asyncpool_shared *sp;
	struct asyncpool_channel *ch;
	struct asyncpool *pool;
	unsigned seed = (unsigned)getpid();

	if (asyncpool_shared_open_fd(fd, &sp))
		_exit(2);
	pool = asyncpool_shared_pool(sp);
	if (asyncpool_channel_open(pool, 0, ASYNCPOOL_CHANNEL_RECV, &ch))
		_exit(3);
	for (;;) {
		struct asyncpool_channel_item it[8];
		int n;

		if (rand_r(&seed) % 2) {
			if (asyncpool_channel_recv_item_wait(ch, &it[0], 100000000) != 0)
				continue;
			n = 1;
		} else {
			n = asyncpool_channel_recv_items(ch, it, 8);
			if (n < 0) {
				sched_yield();
				continue;
			}
		}
		for (int j = 0; j < n; j++) {
			check_stamp(&it[j]);
			asyncpool_lease_release(&it[j].lease);
		}
	}
}

static pid_t spawn(int fd, void (*fn)(int))
{
	pid_t pid;

	fflush(stdout);
	pid = fork_or_bail();
	if (pid == 0)
		fn(fd);
	return pid;
}

/* Kill pid; true if it died by that SIGKILL (not before, of itself). */
static bool kill_it(pid_t pid)
{
	int status;

	kill(pid, SIGKILL);
	return waitpid(pid, &status, 0) == pid && WIFSIGNALED(status) &&
	       WTERMSIG(status) == SIGKILL;
}

/*
 * Receive what the channel holds with the test's own end: what was
 * queued while no receiver had it, what a dead receiver held (after
 * the quarantine), and past the entries a receiver took but died
 * before it moved head (stale: skipped, never counted in available).
 * -EBUSY while a dead receiver's end is not yet reclaimed.
 */
static int drain(struct asyncpool *pool)
{
	struct asyncpool_channel_item it[CAP];
	struct asyncpool_channel *ch;
	int n, rc;

	rc = asyncpool_channel_open(pool, 0, ASYNCPOOL_CHANNEL_RECV, &ch);
	if (rc == -EBUSY)
		return rc;
	if (rc)
		bail_out("the test's receive end: %d", rc);
	while ((n = asyncpool_channel_recv_items(ch, it, CAP)) > 0)
		for (int j = 0; j < n; j++) {
			check_stamp(&it[j]);
			asyncpool_lease_release(&it[j].lease);
		}
	asyncpool_channel_close(ch);
	return 0;
}

/*
 * Every buffer back within a quarantine + 1 s (a failure bound,
 * hundreds of times what it takes), receiving what is queued on the
 * way: the time it took, or UINT64_MAX past the bound.  Not the
 * channel's depth: it counts the stale entries a dead receiver left.
 */
static uint64_t recover(struct asyncpool *pool)
{
	const uint64_t bound = (QUARANTINE_MS + 1000) * 1000000ull;
	uint64_t t0 = now_ns();

	for (;;) {
		(void)asyncpool_reclaim(pool);
		(void)drain(pool);
		if (asyncpool_available(pool) == N)
			return now_ns() - t0;
		if (now_ns() - t0 >= bound)
			return UINT64_MAX;
		usleep(1000);
	}
}

static void random_pause(unsigned *seed)
{
	struct timespec ts = { 0, (long)(rand_r(seed) % 8000) * 1000 };

	nanosleep(&ts, NULL);
}

int main(void)
{
	long kills = stress_iterations(200000) / 2000;
	struct asyncpool_shared_options o;
	struct asyncpool_shared *sp;
	struct asyncpool *pool;
	unsigned seed = (unsigned)time(NULL);
	uint64_t worst_ns = 0;
	long done = 0, checks = 0, bad_checks = 0, bad_exits = 0;
	pid_t s, r;
	int fd;

	if (kills < 20)
		kills = 20;
	plan(7);
	diag("seed %u, %ld kills", seed, kills);
	T = mmap(NULL, sizeof(*T), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (T == MAP_FAILED)
		bail_out("mmap");
	shared_options(&o, BS, N);
	o.channels = 1;
	o.channel_capacity = CAP;
	if (asyncpool_shared_create(&o, &sp))
		bail_out("shared_create");
	pool = asyncpool_shared_pool(sp);
	fd = asyncpool_shared_fd(sp);
	if (asyncpool_set_quarantine(pool, QUARANTINE_MS))
		bail_out("set_quarantine");
	tap_watchdog(tap_watchdog_bound(600) + (unsigned)(kills / 10));
	s = spawn(fd, sender);
	r = spawn(fd, receiver);
	while (done < kills) {
		random_pause(&seed);
		if ((done + 1) % KILLS_PER_CHECK) {
			/* One end dies; a new process takes its end. */
			if (rand_r(&seed) % 2) {
				bad_exits += !kill_it(s);
				s = spawn(fd, sender);
			} else {
				bad_exits += !kill_it(r);
				r = spawn(fd, receiver);
			}
			done++;
			continue;
		}
		/* Both die, one after the other: every buffer comes back. */
		if (rand_r(&seed) % 2) {
			bad_exits += !kill_it(s);
			random_pause(&seed);
			bad_exits += !kill_it(r);
		} else {
			bad_exits += !kill_it(r);
			random_pause(&seed);
			bad_exits += !kill_it(s);
		}
		done += 2;
		{
			uint64_t took = recover(pool);

			if (took > worst_ns && took != UINT64_MAX)
				worst_ns = took;
			checks++;
			if (took == UINT64_MAX || asyncpool_available(pool) != N || asyncpool_check(pool) != 0 ||
			    layout_not_free(sp, N) != 0) {
				bad_checks++;
				diag("check %ld: %s, available %zu, check %d, %d words not free", checks,
				     took == UINT64_MAX ? "past the bound" : "in time",
				     asyncpool_available(pool), asyncpool_check(pool),
				     layout_not_free(sp, N));
			}
		}
		s = spawn(fd, sender);
		r = spawn(fd, receiver);
	}
	/* The last pair runs until a buffer went through (at most 30 s): a
	 * process under a sanitizer on a loaded machine may not reach its
	 * first send within any of the pauses above. */
	for (uint64_t t0 = now_ns(); !atomic_load(&T->received) && now_ns() - t0 < 30000000000ull;)
		usleep(1000);
	bad_exits += !kill_it(s);
	bad_exits += !kill_it(r);
	(void)recover(pool);
	diag("%ld kills, %ld checks, %lu buffers received, the slowest return %.1f ms "
	     "(quarantine %u ms)", done, checks, (unsigned long)atomic_load(&T->received),
	     worst_ns / 1e6, QUARANTINE_MS);
	is_int(bad_exits, 0, "every process died by its SIGKILL (none exited of itself)");
	is_int(bad_checks, 0, "after each of the %ld double kills, every buffer back within "
	       "a quarantine + 1 s, check clean, every word FREE", checks);
	is_int((long)atomic_load(&T->twice), 0, "no stamp received twice (%u again, redelivered)",
	       (unsigned)atomic_load(&T->again));
	{
		uint64_t last = atomic_load(&T->next_stamp), lost = 0;

		for (uint64_t k = 0; k < last && k < STAMPS; k++)
			if ((atomic_load(&T->sent[k / 8]) & (1u << (k % 8))) &&
			    !(atomic_load(&T->seen[k / 8]) & (1u << (k % 8))))
				lost++;
		is_int((long)lost, 0, "no item whose send returned success lost (%lu stamps)",
		       (unsigned long)last);
	}
	ok(atomic_load(&T->received) > 0, "buffers went through (%lu)",
	   (unsigned long)atomic_load(&T->received));
	is_int(asyncpool_available(pool), N, "at the end, every buffer back");
	is_int(asyncpool_check(pool), 0, "at the end, check clean");
	asyncpool_shared_close(sp);
	munmap(T, sizeof(*T));
	return done_testing();
}
