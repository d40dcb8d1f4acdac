/* SPDX-License-Identifier: MIT */
/*
 * A recv ring over a shared pool's buffers (issue 52 item 6): bad input
 * with exact errors; a multishot recv on a real io_uring over TCP
 * loopback lands in the shared pool's buffers, each completion's lease
 * is sent on a channel to another process (which opened the pool by its
 * fd) that checks every byte in order; an empty pool leaves a slot
 * empty (a replayed completion: -EALREADY) until a refill; a process
 * killed with buffers lent to its ring gives them back after the
 * quarantine; a child made by fork(2), or by clone(2) without the C
 * library's fork handlers, gets -EPERM from its copy of its parent's
 * ring (the pid each call checks is cached: self_pid.c) and the parent's
 * ring works on; at the end every buffer is back.
 */
#include "config.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <asyncpool.h>
#include "uring-util.h"

#define N     16
#define ENT   8
#define BS    4096
#define TOTAL (512u << 10)

static struct asyncpool_shared *chan_pool(void)
{
	struct asyncpool_shared_options o;
	struct asyncpool_shared *sp;

	shared_options(&o, BS, N);
	o.channels = 1;
	o.channel_capacity = N;
	if (asyncpool_shared_create(&o, &sp))
		bail_out("shared_create");
	return sp;
}

static void test_bad_input(struct asyncpool *pool, struct asyncpool_proactor *up)
{
	struct asyncpool_proactor *mp;
	struct asyncpool_recv_ring *rr = (void *)1;
	struct asyncpool_lease l;
	struct io_uring_cqe cqe;

	is_int(asyncpool_recv_ring_create(pool, up, ENT, NULL), -EINVAL, "create: out NULL");
	is_int(asyncpool_recv_ring_create(NULL, up, ENT, &rr), -EINVAL, "create: pool NULL");
	ok(rr == NULL, "create: *out NULL on failure");
	is_int(asyncpool_recv_ring_create(pool, NULL, ENT, &rr), -EINVAL, "create: proactor NULL");
	is_int(asyncpool_recv_ring_create(pool, up, 0, &rr), -EINVAL, "create: 0 entries");
	is_int(asyncpool_recv_ring_create(pool, up, 3, &rr), -EINVAL, "create: 3 entries");
	is_int(asyncpool_recv_ring_create(pool, up, 65536, &rr), -EINVAL, "create: 65536 entries");
	if (asyncpool_proactor_create_memory(&mp))
		bail_out("memory proactor");
	is_int(asyncpool_recv_ring_create(pool, mp, ENT, &rr), -EOPNOTSUPP,
	       "create: a memory proactor has no ring");
	asyncpool_proactor_destroy(mp);
	is_int((int)asyncpool_available(pool), N, "bad creates took no buffer");

	is_int(asyncpool_recv_ring_group(NULL), -EINVAL, "group: NULL");
	is_int(asyncpool_recv_ring_refill(NULL), -EINVAL, "refill: NULL");
	is_int(asyncpool_recv_ring_destroy(NULL), -EINVAL, "destroy: NULL");
	memset(&cqe, 0, sizeof(cqe));
	is_int(asyncpool_recv_ring_lease(NULL, &cqe, &l), -EINVAL, "lease: ring NULL");
	is_int(asyncpool_recv_ring_lease((void *)1, &cqe, NULL), -EINVAL, "lease: out NULL");
}

static void test_bad_cqes(struct asyncpool *pool, struct asyncpool_proactor *up)
{
	struct asyncpool_recv_ring *rr;
	struct asyncpool_lease l;
	struct io_uring_cqe cqe;

	is_int(asyncpool_recv_ring_create(pool, up, ENT, &rr), 0, "create: %u entries", ENT);
	is_int((int)asyncpool_available(pool), N - ENT, "%u buffers lent to the ring", ENT);
	ok(asyncpool_recv_ring_group(rr) >= 0, "group %d", asyncpool_recv_ring_group(rr));
	is_int(asyncpool_recv_ring_lease(rr, NULL, &l), -EINVAL, "lease: cqe NULL");
	memset(&cqe, 0, sizeof(cqe));
	cqe.res = 10;
	is_int(asyncpool_recv_ring_lease(rr, &cqe, &l), -EINVAL, "lease: no IORING_CQE_F_BUFFER");
	cqe.flags = IORING_CQE_F_BUFFER | ((uint32_t)ENT << IORING_CQE_BUFFER_SHIFT);
	is_int(asyncpool_recv_ring_lease(rr, &cqe, &l), -EINVAL, "lease: buffer id %u out of range",
	       ENT);
	cqe.flags = IORING_CQE_F_BUFFER | (1u << IORING_CQE_BUFFER_SHIFT);
	cqe.res = BS + 1;
	is_int(asyncpool_recv_ring_lease(rr, &cqe, &l), -EINVAL, "lease: res beyond a buffer");
	cqe.res = -ECONNRESET;
	is_int(asyncpool_recv_ring_lease(rr, &cqe, &l), -EINVAL, "lease: a failed recv");
	cqe.res = -ENOBUFS;
	cqe.flags = 0;
	is_int(asyncpool_recv_ring_lease(rr, &cqe, &l), -ENOBUFS, "lease: -ENOBUFS passed on");
	ok(!asyncpool_lease_held(&l), "lease: *out zeroed on failure");
	is_int(asyncpool_recv_ring_refill(rr), ENT, "refill: the ring is full (%u)", ENT);
	is_int((int)asyncpool_available(pool), N - ENT, "bad completions moved no buffer");
	is_int(asyncpool_recv_ring_destroy(rr), 0, "destroy");
	is_int((int)asyncpool_available(pool), N, "destroy gave the %u buffers back", ENT);
}

/* A child's calls on its copy of the parent's ring: 0 if each said -EPERM. */
static int fork_child(struct asyncpool_recv_ring *rr)
{
	struct asyncpool_lease l;
	struct io_uring_cqe cqe;

	memset(&cqe, 0, sizeof(cqe));
	cqe.res = 10;
	cqe.flags = IORING_CQE_F_BUFFER | (1u << IORING_CQE_BUFFER_SHIFT);
	if (asyncpool_recv_ring_refill(rr) != -EPERM)
		return 10;
	if (asyncpool_recv_ring_lease(rr, &cqe, &l) != -EPERM)
		return 11;
	if (asyncpool_lease_held(&l))
		return 12;
	if (asyncpool_recv_ring_destroy(rr) != 0)     /* the copy only */
		return 13;
	return 0;
}

static void test_fork(struct asyncpool *pool, struct asyncpool_proactor *up)
{
	struct asyncpool_recv_ring *rr;
	int st;

	if (asyncpool_recv_ring_create(pool, up, ENT, &rr))
		bail_out("recv_ring_create");
	/* The pid is known (the create asked it) before either child. */
	for (int how = 0; how < 2; how++) {
		pid_t pid;

		fflush(stdout);
		/* clone(2) without CLONE_VM: a fork the C library's handlers
		 * do not hear of (as _Fork). */
		pid = how ? (pid_t)syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0) : fork();
		if (pid < 0)
			bail_out("fork");
		if (pid == 0)
			_exit(fork_child(rr));
		if (waitpid(pid, &st, 0) != pid)
			bail_out("waitpid");
		is_int(WIFEXITED(st) ? WEXITSTATUS(st) : 100 + WTERMSIG(st), 0,
		       "a child of %s: -EPERM from refill and lease, its copy destroyed",
		       how ? "clone(2) without the fork handlers" : "fork(2)");
	}
	is_int(asyncpool_recv_ring_refill(rr), ENT, "the parent's ring: still full (%u)", ENT);
	is_int(asyncpool_recv_ring_destroy(rr), 0, "the parent destroys it");
	is_int((int)asyncpool_available(pool), N, "every buffer back");
}

/* The receiving process: every byte in stream order, then how many. */
static int child_receive(int fd, int report)
{
	struct asyncpool_shared *sp;
	struct asyncpool_channel *ch;
	size_t got = 0, bad = 0;

	if (asyncpool_shared_open_fd(fd, &sp))
		return 2;
	if (asyncpool_channel_open(asyncpool_shared_pool(sp), 0, ASYNCPOOL_CHANNEL_RECV, &ch))
		return 3;
	while (got < TOTAL) {
		struct asyncpool_lease l;
		const unsigned char *b;

		if (asyncpool_channel_recv_wait(ch, &l, 30LL * 1000000000) != 0)
			return 4;
		b = asyncpool_span_ptr(l.span);
		/* A channel of 1.9 carries no length: the sender wrote the
		 * span's length in the buffer's last 4 bytes. */
		{
			uint32_t len;

			memcpy(&len, b + BS - 4, 4);
			if (len > BS - 4)
				return 5;
			for (uint32_t i = 0; i < len; i++)
				bad += b[i] != ut_pattern(got + i);
			got += len;
		}
		asyncpool_lease_release(&l);
	}
	asyncpool_channel_close(ch);
	asyncpool_shared_close(sp);
	if (write(report, &got, sizeof(got)) != sizeof(got) ||
	    write(report, &bad, sizeof(bad)) != sizeof(bad))
		return 6;
	return 0;
}

static void test_stream(struct asyncpool_shared *sp, struct io_uring *ring,
			struct asyncpool_proactor *up)
{
	struct asyncpool *pool = asyncpool_shared_pool(sp);
	struct asyncpool_recv_ring *rr;
	struct asyncpool_channel *ch;
	struct ut_sender snd;
	size_t got = 0, cgot = 0, cbad = 0;
	unsigned sends = 0, refused = 0, badlen = 0, dry = 0, completions = 0;
	int tx, rx, pfd[2], st;
	pid_t pid;

	if (pipe(pfd))
		bail_out("pipe");
	pid = fork();
	if (pid < 0)
		bail_out("fork");
	if (pid == 0) {
		close(pfd[0]);
		_exit(child_receive(asyncpool_shared_fd(sp), pfd[1]));
	}
	close(pfd[1]);
	is_int(asyncpool_channel_open(pool, 0, ASYNCPOOL_CHANNEL_SEND, &ch), 0, "open the send end");
	is_int(asyncpool_recv_ring_create(pool, up, ENT, &rr), 0, "create a ring of %u", ENT);
	if (tcp_loopback_pair(&tx, &rx))
		bail_out("no TCP loopback connection");
	/* At most BS - 4 bytes per recv: the last 4 bytes carry the length
	 * (today's channel carries none). */
	ut_sender_start(&snd, tx, TOTAL);
	{
		struct io_uring_sqe *sqe = io_uring_get_sqe(ring);

		io_uring_prep_recv_multishot(sqe, rx, NULL, BS - 4, 0);
		sqe->flags |= IOSQE_BUFFER_SELECT;
		sqe->buf_group = (uint16_t)asyncpool_recv_ring_group(rr);
		io_uring_submit(ring);
	}
	while (got < TOTAL) {
		struct io_uring_cqe *cqe = ut_wait(ring);
		struct asyncpool_lease l;
		bool more = cqe->flags & IORING_CQE_F_MORE;
		int rc = asyncpool_recv_ring_lease(rr, cqe, &l);

		completions++;
		if (rc == 0) {
			unsigned char *b = asyncpool_span_ptr(l.span);
			uint32_t len = (uint32_t)l.span.length;

			if (len != (uint32_t)cqe->res || len > BS - 4)
				badlen++;
			memcpy(b + BS - 4, &len, 4);
			got += len;
			if (asyncpool_channel_send(ch, &l) == 0)
				sends++;
			else
				refused++;
		} else if (rc == -ENOBUFS) {
			dry++;
		} else {
			bail_out("recv_ring_lease: %d (res %d)", rc, cqe->res);
		}
		io_uring_cqe_seen(ring, cqe);
		if (!more && got < TOTAL) {
			/* Wait for the child to give buffers back, then re-arm. */
			struct io_uring_sqe *sqe;

			while (asyncpool_recv_ring_refill(rr) == 0)
				usleep(1000);
			sqe = io_uring_get_sqe(ring);
			io_uring_prep_recv_multishot(sqe, rx, NULL, BS - 4, 0);
			sqe->flags |= IOSQE_BUFFER_SELECT;
			sqe->buf_group = (uint16_t)asyncpool_recv_ring_group(rr);
			io_uring_submit(ring);
		}
	}
	ut_sender_join(&snd);
	is_int((int)got, (int)TOTAL, "received %u bytes into the shared pool's buffers", TOTAL);
	is_int((int)badlen, 0, "every lease's span is the completion's bytes");
	is_int((int)refused, 0, "channel_send took every recv lease (%u sends, %u completions, "
	       "%u dry)", sends, completions, dry);
	ok(read(pfd[0], &cgot, sizeof(cgot)) == sizeof(cgot) &&
	   read(pfd[0], &cbad, sizeof(cbad)) == sizeof(cbad), "the receiver reported");
	waitpid(pid, &st, 0);
	is_int(WIFEXITED(st) ? WEXITSTATUS(st) : -1, 0, "the receiver exited 0");
	is_int((int)cgot, (int)TOTAL, "the other process got %u bytes", TOTAL);
	is_int((int)cbad, 0, "every byte right, in order");
	close(pfd[0]);
	/* Cancel the multishot recv and reap it before the destroy. */
	shutdown(rx, SHUT_RDWR);
	for (;;) {
		struct io_uring_cqe *cqe = ut_wait(ring);
		bool more = cqe->flags & IORING_CQE_F_MORE;
		struct asyncpool_lease l;

		if (asyncpool_recv_ring_lease(rr, cqe, &l) == 0)
			asyncpool_lease_release(&l);
		io_uring_cqe_seen(ring, cqe);
		if (!more)
			break;
	}
	is_int(asyncpool_recv_ring_destroy(rr), 0, "destroy");
	is_int(asyncpool_channel_close(ch), 0, "close the send end");
	is_int((int)asyncpool_available(pool), N, "every buffer back in the pool");
	close(tx);
	close(rx);
}

/* Empty pool: the slot stays empty, a replayed completion is refused. */
static void test_empty_pool(struct asyncpool *pool, struct io_uring *ring,
			    struct asyncpool_proactor *up)
{
	struct asyncpool_lease hold[N], l, l2;
	struct asyncpool_recv_ring *rr;
	struct io_uring_cqe *cqe, copy;
	unsigned n = 0;
	int tx, rx;

	is_int(asyncpool_recv_ring_create(pool, up, ENT, &rr), 0, "create");
	while (n < N && asyncpool_acquire(pool, &hold[n]) == 0)
		n++;
	is_int((int)n, N - ENT, "the rest of the pool acquired");
	if (tcp_loopback_pair(&tx, &rx))
		bail_out("no TCP loopback connection");
	ok(write(tx, "hello", 5) == 5, "5 bytes sent");
	{
		struct io_uring_sqe *sqe = io_uring_get_sqe(ring);

		io_uring_prep_recv(sqe, rx, NULL, 0, 0);
		sqe->flags |= IOSQE_BUFFER_SELECT;
		sqe->buf_group = (uint16_t)asyncpool_recv_ring_group(rr);
	}
	cqe = ut_wait(ring);
	copy = *cqe;
	is_int(asyncpool_recv_ring_lease(rr, cqe, &l), 0, "a completion: its lease");
	io_uring_cqe_seen(ring, cqe);
	is_int((int)l.span.length, 5, "span of 5 bytes");
	ok(memcmp(asyncpool_span_ptr(l.span), "hello", 5) == 0, "the bytes are in the pool's buffer");
	ok(l.buffer_index < N && l.generation != 0, "a pool lease (buffer %u, generation %u)",
	   l.buffer_index, l.generation);
	is_int(asyncpool_recv_ring_lease(rr, &copy, &l2), -EALREADY,
	       "the same completion again: -EALREADY (the pool was empty: no refill)");
	is_int(asyncpool_recv_ring_refill(rr), ENT - 1, "refill with the pool empty: %u", ENT - 1);
	asyncpool_lease_release(&hold[0]);
	is_int(asyncpool_recv_ring_refill(rr), ENT, "refill after a release: %u", ENT);
	is_int((int)asyncpool_available(pool), 0, "the released buffer went to the ring");
	asyncpool_lease_release(&l);
	for (unsigned i = 1; i < n; i++)
		asyncpool_lease_release(&hold[i]);
	is_int(asyncpool_recv_ring_destroy(rr), 0, "destroy");
	is_int((int)asyncpool_available(pool), N, "every buffer back");
	close(tx);
	close(rx);
}

/* A process killed with buffers lent to its ring: back after the quarantine. */
static void test_crash(struct asyncpool_shared *sp)
{
	struct asyncpool *pool = asyncpool_shared_pool(sp);
	int ready[2], st, back = 0;
	pid_t pid;
	char c;

	if (pipe(ready))
		bail_out("pipe");
	pid = fork();
	if (pid < 0)
		bail_out("fork");
	if (pid == 0) {
		struct asyncpool_shared *csp;
		struct asyncpool_proactor *cp;
		struct asyncpool_recv_ring *rr;
		struct io_uring r;

		close(ready[0]);
		if (io_uring_queue_init(8, &r, 0) ||
		    asyncpool_shared_open_fd(asyncpool_shared_fd(sp), &csp) ||
		    asyncpool_proactor_create_uring(&r, 0, &cp) ||
		    asyncpool_recv_ring_create(asyncpool_shared_pool(csp), cp, ENT, &rr))
			_exit(1);
		if (write(ready[1], "r", 1) != 1)
			_exit(2);
		pause();
		_exit(0);
	}
	close(ready[1]);
	ok(read(ready[0], &c, 1) == 1, "a process lent %u buffers to its ring", ENT);
	close(ready[0]);
	is_int((int)asyncpool_available(pool), N - ENT, "%u buffers out", ENT);
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	is_int(asyncpool_set_quarantine(pool, 20), 0, "quarantine of 20 ms");
	is_int(asyncpool_reclaim(pool), 0, "reclaim at once: nothing (quarantine)");
	is_int((int)asyncpool_available(pool), N - ENT, "still out");
	for (int i = 0; i < 200 && asyncpool_available(pool) < N; i++) {
		int rc = asyncpool_reclaim(pool);

		if (rc > 0)
			back += rc;
		usleep(5000);
	}
	is_int(back, ENT, "reclaim after the quarantine: %u back", ENT);
	is_int((int)asyncpool_available(pool), N, "every buffer back");
}

int main(void)
{
	struct asyncpool_shared *sp;
	struct asyncpool_proactor *up;
	struct io_uring ring;

	tap_watchdog(120);
	ut_ring_init(&ring, 64);
	plan(67);
	sp = chan_pool();
	if (asyncpool_proactor_create_uring(&ring, 0, &up))
		bail_out("create_uring");
	test_bad_input(asyncpool_shared_pool(sp), up);
	test_bad_cqes(asyncpool_shared_pool(sp), up);
	test_stream(sp, &ring, up);
	test_empty_pool(asyncpool_shared_pool(sp), &ring, up);
	test_crash(sp);
	test_fork(asyncpool_shared_pool(sp), up);
	is_int(asyncpool_check(asyncpool_shared_pool(sp)), 0, "the pool checks clean");
	asyncpool_shared_close(sp);
	is_int(asyncpool_proactor_destroy(up), 0, "proactor destroyed");
	io_uring_queue_exit(&ring);
	return done_testing();
}
