/* SPDX-License-Identifier: MIT */
/*
 * asyncpool_prep_wait(3) on a pool with caches (issue 21, item 9): a
 * buffer released into another thread's cache wakes no futex, so the
 * wait is armed as its page says, with a linked timeout; the acquire
 * after the completion takes the other threads' caches back (as does
 * the next asyncpool_prep_wait), so the ring gets the buffer at most
 * one timeout after its release.  A local pool of 4 buffers with caches
 * of 4: thread B holds all 4, releases one into its cache once the
 * ring's wait is armed.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include <liburing.h>

#include <asyncpool.h>
#include "tap.h"
#include "testutil.h"

#define N  4
#define BS 64

static struct asyncpool *pool;
static struct asyncpool_lease held[N];
static atomic_int phase;
static uint32_t released;

static void *holder(void *arg)
{
	(void)arg;
	for (int i = 0; i < N; i++)
		if (asyncpool_acquire(pool, &held[i]))
			bail_out("acquire %d", i);
	atomic_store(&phase, 1);
	while (atomic_load(&phase) != 2)
		usleep(1000);
	released = held[0].buffer_index;
	asyncpool_lease_release(&held[0]);      /* into this thread's cache */
	atomic_store(&phase, 3);
	while (atomic_load(&phase) != 4)
		usleep(1000);
	for (int i = 1; i < N; i++)
		asyncpool_lease_release(&held[i]);
	return NULL;
}

int main(void)
{
	struct __kernel_timespec slice = { .tv_sec = 0, .tv_nsec = 50 * 1000000 };
	struct asyncpool_proactor *p;
	struct asyncpool_lease l;
	struct io_uring_sqe probe;
	struct io_uring ring;
	pthread_t t;
	int rc = -ENOBUFS, rounds;

	alarm(60);
	if (io_uring_queue_init(4, &ring, 0))
		skip_all("no io_uring here");
	if (asyncpool_proactor_create_memory(&p))
		bail_out("proactor");
	pool = make_pool(p, BS, N, N);
	if (asyncpool_prep_wait(pool, &probe) == -EOPNOTSUPP)
		skip_all("the kernel has no IORING_OP_FUTEX_WAIT (Linux 6.7)");
	plan(4);
	if (pthread_create(&t, NULL, holder, NULL))
		bail_out("pthread_create");
	while (atomic_load(&phase) != 1)
		usleep(1000);
	is_int(asyncpool_acquire(pool, &l), -ENOBUFS, "the other thread holds all %d", N);
	for (rounds = 0; rounds < 20 && rc == -ENOBUFS; rounds++) {
		struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
		struct io_uring_cqe *cqe;

		if (asyncpool_prep_wait(pool, sqe))
			bail_out("prep_wait");
		sqe->flags |= IOSQE_IO_LINK;
		io_uring_prep_link_timeout(io_uring_get_sqe(&ring), &slice, 0);
		if (io_uring_submit(&ring) != 2)
			bail_out("submit");
		if (!rounds) {
			/* Armed: now the release goes into the holder's cache. */
			atomic_store(&phase, 2);
			while (atomic_load(&phase) != 3)
				usleep(1000);
		}
		for (int k = 0; k < 2; k++) {
			if (io_uring_wait_cqe(&ring, &cqe))
				bail_out("wait_cqe");
			io_uring_cqe_seen(&ring, cqe);
		}
		rc = asyncpool_acquire(pool, &l);
	}
	is_int(rc, 0, "a buffer released into another thread's cache reaches the ring");
	is_int(rounds, 1, "with the acquire after the first completion (the linked timeout)");
	is_int(l.buffer_index, released, "the buffer released");
	asyncpool_lease_release(&l);
	atomic_store(&phase, 4);
	pthread_join(t, NULL);
	asyncpool_destroy(pool);
	asyncpool_proactor_destroy(p);
	io_uring_queue_exit(&ring);
	return done_testing();
}
