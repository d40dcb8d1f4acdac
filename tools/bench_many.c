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
 *   many-senders-floor-1, -2, -4  the other design's floor: several
 *                         sending ends on one ring, not built in the
 *                         library (asyncpool_channel_recv_any(3), NOTES).
 *                         A bare bounded MPSC ring in shared memory
 *                         (Vyukov's: every sender compare-and-swaps one
 *                         shared tail, a slot is published by its
 *                         sequence), the same futex waits (the receiver
 *                         for an item, a sender for room), the same
 *                         acquire and release; but no buffer word
 *                         changed, no checks, no step records, no
 *                         redelivery: what such a channel could at best
 *                         cost.
 */
#include "config.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <limits.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <asyncpool.h>
#include "tool.h"

#define MANY_BUFFERS 4096u
#define MANY_CAP     256u
#define MANY_CACHE   64u
#define MANY_MAX     8u

struct mpsc_slot {
	_Atomic uint64_t seq;
	uint64_t token;
};

struct many_ctl {
	atomic_int ready;
	atomic_int go;
	atomic_int failed;
	/* The floor's ring. */
	_Alignas(64) _Atomic uint64_t tail;     /* the senders' */
	_Alignas(64) uint64_t head;             /* the receiver's */
	_Alignas(64) _Atomic uint32_t wake;     /* the receiver sleeps here: bit 0 */
	_Alignas(64) _Atomic uint32_t room;     /* senders sleep here: bit 0 */
	_Alignas(64) struct mpsc_slot slot[MANY_CAP];
};

/* The wait word protocol of wait_word.h, bare. */
static void word_sleep(_Atomic uint32_t *w, uint32_t v)
{
	struct timespec slice = { 0, 50000000 };

	(void)syscall(SYS_futex, w, FUTEX_WAIT, v, &slice, NULL, 0);
}

static void word_wake(_Atomic uint32_t *w)
{
	uint32_t v = atomic_load(w);

	if ((v & 1) && atomic_compare_exchange_strong(w, &v, (v + 2) & ~1u))
		(void)syscall(SYS_futex, w, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

static bool mpsc_put(struct many_ctl *c, uint64_t token)
{
	uint64_t pos = atomic_load_explicit(&c->tail, memory_order_relaxed);

	for (;;) {
		struct mpsc_slot *s = &c->slot[pos & (MANY_CAP - 1)];
		uint64_t seq = atomic_load_explicit(&s->seq, memory_order_acquire);
		int64_t dif = (int64_t)(seq - pos);

		if (dif == 0) {
			if (atomic_compare_exchange_weak_explicit(&c->tail, &pos, pos + 1,
								  memory_order_relaxed,
								  memory_order_relaxed)) {
				s->token = token;
				atomic_store_explicit(&s->seq, pos + 1, memory_order_seq_cst);
				word_wake(&c->wake);
				return true;
			}
		} else if (dif < 0) {
			return false;   /* full */
		} else {
			pos = atomic_load_explicit(&c->tail, memory_order_relaxed);
		}
	}
}

static bool mpsc_get(struct many_ctl *c, uint64_t *token)
{
	struct mpsc_slot *s = &c->slot[c->head & (MANY_CAP - 1)];

	if (atomic_load_explicit(&s->seq, memory_order_acquire) != c->head + 1)
		return false;
	*token = s->token;
	atomic_store_explicit(&s->seq, c->head + MANY_CAP, memory_order_seq_cst);
	c->head++;
	word_wake(&c->room);
	return true;
}

static int floor_sender(struct asyncpool *pool, struct many_ctl *c, unsigned long n)
{
	for (unsigned long k = 0; k < n; k++) {
		struct asyncpool_lease l;
		uint64_t t;

		if (asyncpool_acquire_wait(pool, &l, 10LL * 1000000000))
			return 5;
		t = asyncpool_lease_token(&l);
		while (!mpsc_put(c, t)) {
			uint32_t v = atomic_fetch_or(&c->room, 1) | 1;

			if (mpsc_put(c, t))
				break;
			if (atomic_load(&c->failed))
				return 6;
			word_sleep(&c->room, v);
		}
	}
	return 0;
}

static int floor_receive(struct asyncpool *pool, struct many_ctl *c, unsigned long total)
{
	for (unsigned long got = 0; got < total; got++) {
		uint64_t t;
		unsigned spins = 0;

		while (!mpsc_get(c, &t)) {
			uint32_t v = atomic_fetch_or(&c->wake, 1) | 1;

			if (mpsc_get(c, &t))
				break;
			if (++spins > 400)      /* 20 s of slices: a sender is gone */
				return -EPROTO;
			word_sleep(&c->wake, v);
		}
		if (asyncpool_release_token(pool, t))
			return -EPROTO;
	}
	return 0;
}

static int sender_main(struct many_ctl *ctl, int fd, uint32_t c, unsigned long n, bool floor)
{
	struct asyncpool_shared *sp;
	struct asyncpool_channel *ch;
	struct asyncpool *pool;

	if (asyncpool_shared_open_fd(fd, &sp))
		return 2;
	pool = asyncpool_shared_pool(sp);
	if (asyncpool_set_cache(pool, MANY_CACHE) ||
	    (!floor && asyncpool_channel_open(pool, c, ASYNCPOOL_CHANNEL_SEND, &ch)))
		return 3;
	atomic_fetch_add(&ctl->ready, 1);
	while (!atomic_load(&ctl->go))
		if (atomic_load(&ctl->failed))
			return 4;
		else
			usleep(100);
	if (floor) {
		int rc = floor_sender(pool, ctl, n);

		asyncpool_shared_close(sp);
		return rc;
	}
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
static int many_round(unsigned senders, bool floor, unsigned long n, uint64_t *elapsed)
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
	for (uint64_t i = 0; i < MANY_CAP; i++)
		atomic_init(&ctl->slot[i].seq, i);
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
	for (uint32_t c = 0; c < senders && !floor; c++)
		if ((rc = asyncpool_channel_open(pool, c, ASYNCPOOL_CHANNEL_RECV, &rx[c])))
			goto close;
	for (; started < senders; started++) {
		pids[started] = fork();
		if (pids[started] < 0) {
			rc = -errno;
			break;
		}
		if (pids[started] == 0)
			_exit(sender_main(ctl, asyncpool_shared_fd(sp), started, n, floor));
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
		if (floor && (rc = floor_receive(pool, ctl, n * senders)))
			atomic_store(&ctl->failed, 1);
		for (unsigned long got = 0; !floor && got < n * senders; got++) {
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
	for (uint32_t c = 0; c < senders && !floor; c++)
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

int bench_many(unsigned senders, bool floor, unsigned long ops, unsigned reps,
	       struct bench_result *out)
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
		int rc = many_round(senders, floor, n, &elapsed[r]);

		if (rc)
			return rc;
	}
	bench_summarize(out, elapsed, reps, n * senders, senders, n * senders);
	return 0;
}
