/* SPDX-License-Identifier: MIT */
/*
 * Wake-ups on time (issue 54, kind 1).  Every wait of a shared pool or a
 * channel looks again every slice (AP_WAIT_SLICE_MS, 50 ms) on its own,
 * so a release or a send that forgets its wake, or wakes the wrong futex
 * (a private wake of a shared word), still "works", up to 50 ms late.
 * Here the test-hook build's slice is 10 s (ap_test_hook_slice_ms), and
 * each wait (asyncpool_acquire_wait, asyncpool_channel_recv_wait, both
 * wait fds, both prep_wait SQEs) is woken once it sleeps in futex(2) on
 * a word of the pool's memory (read in /proc, no sleep) or, for an SQE,
 * once it is submitted: it must come back
 *   - in every round within LOST_MS (1 s): a lost wake takes the slice
 *     (10 s), and each wait's own 1 s timeout ends it then;
 *   - in the median round within $ASYNCPOOL_WAKE_BOUND_MS (default 5 ms)
 *     of the wake: generous beside a futex wake-up on an idle pair
 *     (tens of us), far under the 50 ms that a slice would give; the
 *     median, so that a loaded machine's odd late round does not fail it.
 * The latencies are printed (median and max per wait).
 * tests/mutants/chan-send-no-wake, chan-wake-private, pool-wake-private.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#ifdef HAVE_LIBURING
#include <liburing.h>
#endif

#include "hooks.h"
#include "../lib/pool_wait.h"
#include "tap.h"
#include "testutil.h"

#define N        4
#define BS       64
#define ROUNDS   15
#define LOST_MS  1000
#define SLICE_MS 10000u

static unsigned long bound_ms;

/*
 * Whether a thread of this process other than the caller sleeps in
 * futex(2) on a word in [base, base + size): /proc/self/task/T/syscall
 * says the call and its first argument.  1 yes, 0 not within 10 s,
 * -1 unreadable.
 */
static int asleep_in(const void *base, size_t size)
{
	uintptr_t lo = (uintptr_t)base, hi = lo + size;
	long me = syscall(SYS_gettid);

	for (int i = 0; i < 10000; i++) {
		DIR *d = opendir("/proc/self/task");
		struct dirent *e;
		int readable = 0;

		if (!d)
			return -1;
		while ((e = readdir(d))) {
			char path[300], buf[256];
			unsigned long addr;
			long nr;
			FILE *f;

			if (e->d_name[0] == '.' || atol(e->d_name) == me)
				continue;
			snprintf(path, sizeof(path), "/proc/self/task/%s/syscall", e->d_name);
			f = fopen(path, "re");
			if (!f)
				continue;
			if (fgets(buf, sizeof(buf), f)) {
				readable = 1;
				/* futex_waitv(2)'s first argument is its array,
				 * on the sleeper's stack: the call says enough. */
				if (sscanf(buf, "%ld %lx", &nr, &addr) == 2 &&
				    ((nr == SYS_futex && addr >= lo && addr < hi) || nr == 449)) {
					fclose(f);
					closedir(d);
					return 1;
				}
			}
			fclose(f);
		}
		closedir(d);
		if (!readable && i > 100)
			return -1;
		usleep(1000);
	}
	return 0;
}

struct setup {
	struct asyncpool_shared *sp;
	struct asyncpool *pool;
	const struct asyncpool_shm *shm;
	struct asyncpool_channel *tx, *rx;
	struct asyncpool_lease held[N];
};

static void setup(struct setup *s)
{
	struct asyncpool_shared_options o;

	memset(s, 0, sizeof(*s));
	shared_options(&o, BS, N);
	o.channels = 1;
	o.channel_capacity = N;
	if (asyncpool_shared_create(&o, &s->sp))
		bail_out("shared_create");
	s->pool = asyncpool_shared_pool(s->sp);
	s->shm = asyncpool_shared_shm(s->sp);
	if (asyncpool_channel_open(s->pool, 0, ASYNCPOOL_CHANNEL_SEND, &s->tx) ||
	    asyncpool_channel_open(s->pool, 0, ASYNCPOOL_CHANNEL_RECV, &s->rx))
		bail_out("channel_open");
	for (int i = 0; i < N; i++)
		if (asyncpool_acquire(s->pool, &s->held[i]))
			bail_out("acquire %d", i);
}

static void teardown(struct setup *s)
{
	struct asyncpool_lease l;

	for (int i = 0; i < N; i++)
		asyncpool_lease_release(&s->held[i]);
	while (asyncpool_channel_recv(s->rx, &l) == 0)
		asyncpool_lease_release(&l);
	asyncpool_channel_close(s->tx);
	asyncpool_channel_close(s->rx);
	asyncpool_shared_close(s->sp);
}

/* ---- the waits ---- */

enum kind { ACQUIRE_WAIT, RECV_WAIT, POOL_FD, CHAN_FD, POOL_SQE, CHAN_SQE, RECV_ANY, KINDS };
static const char *const kind_name[KINDS] = {
	"asyncpool_acquire_wait", "asyncpool_channel_recv_wait", "asyncpool_wait_fd",
	"asyncpool_channel_wait_fd", "asyncpool_prep_wait", "asyncpool_channel_prep_wait",
	"asyncpool_channel_recv_any",
};

struct sleeper {
	pthread_t th;
	struct setup *s;
	enum kind kind;
	int rc;
	struct asyncpool_lease got;
	_Atomic uint64_t back;  /* now_ns() when the wait returned */
};

static void *sleeper_main(void *arg)
{
	struct sleeper *w = arg;

	if (w->kind == ACQUIRE_WAIT)
		w->rc = asyncpool_acquire_wait(w->s->pool, &w->got, LOST_MS * 1000000ll);
	else if (w->kind == RECV_WAIT)
		w->rc = asyncpool_channel_recv_wait(w->s->rx, &w->got, LOST_MS * 1000000ll);
	else {
		struct asyncpool_channel_item it;
		int rc = asyncpool_channel_recv_any(&w->s->rx, 1, &it, LOST_MS * 1000000ll);

		/* the one end, index 0, or an error */
		w->rc = rc > 0 ? -EPROTO : rc;
		if (rc == 0)
			w->got = it.lease;
	}
	atomic_store(&w->back, now_ns());
	return NULL;
}

/* The wake: a release of a held buffer (the pool) or a send of it (a channel). */
static int wake(struct setup *s, enum kind k, int round)
{
	struct asyncpool_lease *l = &s->held[round % N];

	if (k == ACQUIRE_WAIT || k == POOL_FD || k == POOL_SQE) {
		asyncpool_lease_release(l);
		return 0;
	}
	return asyncpool_channel_send(s->tx, l);
}

/* Take back what the wake gave, so that the next round waits again. */
static void take_back(struct setup *s, int round, struct asyncpool_lease *got)
{
	struct asyncpool_lease *l = &s->held[round % N];

	if (got && asyncpool_lease_held(got)) {
		*l = *got;
		memset(got, 0, sizeof(*got));
		return;
	}
	if (asyncpool_acquire(s->pool, l) && asyncpool_channel_recv(s->rx, l))
		bail_out("the woken buffer is not there");
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/*
 * One round: the wait asleep, then the wake at t0; the latency (ns)
 * until the wait returned, or UINT64_MAX if it was not back within
 * LOST_MS.  *skip set if the machine cannot tell that it sleeps.
 */
static uint64_t round_of(struct setup *s, enum kind k, int round, int *skip_why)
{
	uint64_t t0, back = UINT64_MAX;
	int rc;

	switch (k) {
	case ACQUIRE_WAIT:
	case RECV_WAIT:
	case RECV_ANY: {
		struct sleeper w = { .s = s, .kind = k };

		if (pthread_create(&w.th, NULL, sleeper_main, &w))
			bail_out("pthread_create");
		rc = asleep_in(s->shm->base, s->shm->size);
		if (rc != 1)
			*skip_why = rc;
		t0 = now_ns();
		if (wake(s, k, round))
			bail_out("wake");
		pthread_join(w.th, NULL);
		if (w.rc == 0 && atomic_load(&w.back) - t0 < LOST_MS * 1000000ull)
			back = atomic_load(&w.back) - t0;
		take_back(s, round, w.rc == 0 ? &w.got : NULL);
		break;
	}
	case POOL_FD:
	case CHAN_FD: {
		int fd = k == POOL_FD ? asyncpool_wait_fd(s->pool) : asyncpool_channel_wait_fd(s->rx);
		struct pollfd p = { .fd = fd, .events = POLLIN };
		uint64_t cnt;

		if (fd < 0)
			bail_out("wait fd: %d", fd);
		/* nothing to read before the wake: the last round's count read */
		(void)read(fd, &cnt, sizeof(cnt));
		rc = asleep_in(s->shm->base, s->shm->size);
		if (rc != 1)
			*skip_why = rc;
		t0 = now_ns();
		if (wake(s, k, round))
			bail_out("wake");
		if (poll(&p, 1, LOST_MS) == 1) {
			back = now_ns() - t0;
			(void)read(fd, &cnt, sizeof(cnt));
		}
		take_back(s, round, NULL);
		break;
	}
	default: {
#ifdef HAVE_LIBURING
		struct io_uring ring;
		struct io_uring_cqe *cqe;
		struct __kernel_timespec ts = { .tv_sec = LOST_MS / 1000 };
		struct io_uring_sqe *sqe;

		if (io_uring_queue_init(4, &ring, 0)) {
			*skip_why = -2;
			return 0;
		}
		sqe = io_uring_get_sqe(&ring);
		rc = k == POOL_SQE ? asyncpool_prep_wait(s->pool, sqe) :
				     asyncpool_channel_prep_wait(s->rx, sqe);
		if (rc) {
			*skip_why = -3;
			io_uring_queue_exit(&ring);
			return 0;
		}
		/* armed when submit returns: the futex is waited on in the submit */
		if (io_uring_submit(&ring) != 1)
			bail_out("submit");
		t0 = now_ns();
		if (wake(s, k, round))
			bail_out("wake");
		if (io_uring_wait_cqe_timeout(&ring, &cqe, &ts) == 0) {
			back = now_ns() - t0;
			if (cqe->res != 0)
				diag("%s: round %d completed with %d", kind_name[k], round, cqe->res);
			io_uring_cqe_seen(&ring, cqe);
		}
		io_uring_queue_exit(&ring);     /* cancels a wait not woken */
		take_back(s, round, NULL);
#else
		(void)round;
		*skip_why = -2;
		return 0;
#endif
		break;
	}
	}
	return back;
}

static void test_kind(enum kind k)
{
	struct setup s;
	uint64_t lat[ROUNDS], worst = 0;
	int lost = 0, n = 0, skip_why = 0;

	setup(&s);
	for (int r = 0; r < ROUNDS && !lost && !skip_why; r++) {
		lat[n] = round_of(&s, k, r, &skip_why);
		if (skip_why)
			break;
		if (lat[n] == UINT64_MAX)
			lost++;
		else if (lat[n] > worst)
			worst = lat[n];
		n++;
	}
	teardown(&s);
	if (skip_why) {
		skip(2, "%s: %s", kind_name[k],
		     skip_why == -1 ? "/proc/self/task/*/syscall is not readable" :
		     skip_why == 0 ? "the wait never slept in futex(2)" :
		     skip_why == -2 ? "no io_uring here" : "no IORING_OP_FUTEX_WAIT (Linux 6.7)");
		return;
	}
	ok(!lost, "%s: each of %d wakes ended its wait within %d ms (the slice is %u s)%s",
	   kind_name[k], n, LOST_MS, SLICE_MS / 1000, lost ? ": one was lost" : "");
	if (lost) {
		skip(1, "%s: a wake was lost", kind_name[k]);
		return;
	}
	qsort(lat, (size_t)n, sizeof(lat[0]), cmp_u64);
	diag("%s: woken in %.3f ms (median), %.3f ms (max) of %d", kind_name[k],
	     lat[n / 2] / 1e6, worst / 1e6, n);
	ok(lat[n / 2] <= bound_ms * 1000000ull, "%s: the median wake took %.3f ms, at most %lu ms",
	   kind_name[k], lat[n / 2] / 1e6, bound_ms);
}

/*
 * A stream: the receiver goes back into asyncpool_channel_recv_wait()
 * as soon as it has one, and the sender sends the next as soon as it
 * sees that: a send races the receiver's announcement, the window the
 * seq_cst of the send's last publish closes (the store before the look
 * at the wake word; held open on every run by tests/test-channel-tso,
 * which catches tests/mutants/chan-publish-release).  A wake lost
 * there costs the slice (10 s); the wait's 1 s timeout ends it.
 */
static struct {
	struct setup s;
	_Atomic unsigned long got;
	_Atomic uint64_t slowest;
	unsigned long want;
	int errors;
} st;

static void *stream_receiver(void *arg)
{
	(void)arg;
	while (atomic_load(&st.got) < st.want) {
		struct asyncpool_lease l;
		uint64_t t = now_ns(), d;
		int rc = asyncpool_channel_recv_wait(st.s.rx, &l, LOST_MS * 1000000ll);

		d = now_ns() - t;
		if (d > atomic_load(&st.slowest))
			atomic_store(&st.slowest, d);
		if (rc) {
			st.errors++;
			break;
		}
		asyncpool_lease_release(&l);
		atomic_fetch_add(&st.got, 1);
	}
	return NULL;
}

static void test_stream(void)
{
	pthread_t th;
	unsigned long sent = 0;

	setup(&st.s);
	for (int i = 0; i < N; i++)
		asyncpool_lease_release(&st.s.held[i]);
	st.want = (unsigned long)stress_iterations(20000);
	if (pthread_create(&th, NULL, stream_receiver, NULL))
		bail_out("pthread_create");
	while (sent < st.want && !st.errors) {
		struct asyncpool_lease l;

		while (atomic_load(&st.got) != sent && !st.errors)
			;
		/* a delay swept over the receiver's way back into its wait
		 * (its signal handlers' look is some 20 us) */
		for (uint64_t end = now_ns() + sent * 7919 % 40000; now_ns() < end;)
			;
		if (asyncpool_acquire(st.s.pool, &l) || asyncpool_channel_send(st.s.tx, &l))
			bail_out("stream: send %lu", sent);
		sent++;
	}
	pthread_join(th, NULL);
	ok(!st.errors && atomic_load(&st.slowest) < LOST_MS * 1000000ull / 2,
	   "a stream of %lu sends to a receiver entering its wait: the slowest wait %.3f ms, none lost",
	   st.want, atomic_load(&st.slowest) / 1e6);
	for (int i = 0; i < N; i++)
		memset(&st.s.held[i], 0, sizeof(st.s.held[i]));
	teardown(&st.s);
}

int main(void)
{
	plan(2 * KINDS + 1);
	tap_watchdog(120);
	bound_ms = env_number("ASYNCPOOL_WAKE_BOUND_MS", 5);
	atomic_store(&ap_test_hook_slice_ms, SLICE_MS);
	for (int k = 0; k < KINDS; k++)
		test_kind((enum kind)k);
	test_stream();
	return done_testing();
}
