/* SPDX-License-Identifier: MIT */
/*
 * One shared pool, two backends: a process that sends its leases with
 * io_uring SEND_ZC and another that sends them with MSG_ZEROCOPY, both
 * at once over TCP loopback; every byte right, every buffer back.
 *
 * And a process that dies (SIGKILL) with MSG_ZEROCOPY sends in flight:
 * its socket is orphaned, the kernel still holds the pages and still
 * sends them (the reader gets every byte right after the death); the
 * buffers come back through asyncpool_reclaim() after the quarantine,
 * not before.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#ifdef HAVE_LIBURING
#include <liburing.h>
#endif

#include <asyncpool.h>
#include "tap.h"
#include "testutil.h"
#include "../tools/net.h"
#include "../tools/pattern.h"

#define BUF (64u * 1024)
#define NBUF 16u
#define BYTES (16u << 20)
#define SKIPPED 77

struct reader {
	int fd;
	size_t got, bad;
};

static void *reader_run(void *arg)
{
	struct reader *r = arg;
	unsigned char *buf = malloc(BUF);

	for (ssize_t n; buf && (n = read(r->fd, buf, BUF)) > 0;) {
		r->bad += pattern_check(buf, r->got, (size_t)n);
		r->got += (size_t)n;
	}
	free(buf);
	return NULL;
}

#ifdef HAVE_LIBURING
/* The io_uring sender: SEND_ZC from the shared slab's fixed buffers. */
static int uring_child(int shfd)
{
	struct asyncpool_lease lease_of[NBUF];
	struct asyncpool_proactor *p;
	struct asyncpool_shared *sp;
	struct asyncpool *pool;
	struct asyncpool_region *r;
	struct io_uring ring;
	struct reader rd = { 0 };
	pthread_t t;
	size_t pos = 0;
	unsigned out = 0;
	int a, b;

	if (io_uring_queue_init(64, &ring, 0))
		return SKIPPED;
	if (asyncpool_proactor_create_uring(&ring, 0, &p))
		return SKIPPED;
	if (asyncpool_shared_open_fd_proactor(shfd, p, &sp))
		return 2;
	pool = asyncpool_shared_pool(sp);
	r = asyncpool_shared_region(sp);
	if (asyncpool_region_fixed_index(r, 0) < 0)
		return 3;
	if (tcp_loopback_pair(&a, &b))
		return 4;
	rd.fd = b;
	pthread_create(&t, NULL, reader_run, &rd);
	/* One send at a time keeps the stream in order; the notifications
	 * (the leases) come back when they come. */
	while (pos < BYTES || out) {
		struct io_uring_cqe *cqe;
		struct asyncpool_lease l;
		bool wait_result = false;

		if (pos < BYTES && asyncpool_acquire(pool, &l) == 0) {
			struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);

			pattern_fill(asyncpool_span_ptr(l.span), pos, BUF);
			lease_of[l.buffer_index] = l;
			io_uring_prep_send_zc_fixed(sqe, a, asyncpool_span_ptr(l.span), BUF,
						    MSG_WAITALL, 0,
						    (unsigned)asyncpool_region_fixed_index(r, l.buffer_index));
			sqe->user_data = l.buffer_index;
			if (io_uring_submit(&ring) != 1)
				return 5;
			out++;
			pos += BUF;
			wait_result = true;
		} else if (!out) {
			sched_yield();  /* the other process holds every buffer */
			continue;
		}
		/* Until this send's result (or one completion when none was sent). */
		do {
			if (io_uring_wait_cqe(&ring, &cqe))
				return 6;
			if (cqe->flags & IORING_CQE_F_NOTIF) {
				asyncpool_lease_release(&lease_of[cqe->user_data]);
				out--;
			} else {
				if (cqe->res != (int)BUF)
					return 7;
				wait_result = false;
				if (!(cqe->flags & IORING_CQE_F_MORE)) {
					asyncpool_lease_release(&lease_of[cqe->user_data]);
					out--;
				}
			}
			io_uring_cqe_seen(&ring, cqe);
		} while (wait_result);
	}
	shutdown(a, SHUT_WR);
	pthread_join(t, NULL);
	close(a);
	close(b);
	asyncpool_shared_close(sp);
	asyncpool_proactor_destroy(p);
	io_uring_queue_exit(&ring);
	return rd.got == BYTES && rd.bad == 0 ? 0 : 8;
}
#endif

/* The MSG_ZEROCOPY sender on the same pool. */
static int zc_child(int shfd)
{
	struct asyncpool_zc_options o = { .size = sizeof(o), .flags = ASYNCPOOL_ZC_NO_FALLBACK };
	struct asyncpool_zc_stats st = { .size = sizeof(st) };
	struct asyncpool_shared *sp;
	struct asyncpool *pool;
	struct asyncpool_zc *zs;
	struct reader rd = { 0 };
	pthread_t t;
	size_t pos = 0;
	int a, b;

	if (asyncpool_shared_open_fd(shfd, &sp))
		return 2;
	pool = asyncpool_shared_pool(sp);
	if (tcp_loopback_pair(&a, &b) || asyncpool_zc_open(a, &o, &zs))
		return 3;
	rd.fd = b;
	pthread_create(&t, NULL, reader_run, &rd);
	while (pos < BYTES) {
		struct asyncpool_lease l;
		size_t off = 0;

		if (asyncpool_acquire(pool, &l)) {
			/* Ours come back on POLLERR; the other's, whenever. */
			if (asyncpool_zc_wait(zs, 1000000) == 0)
				sched_yield();
			continue;
		}
		pattern_fill(asyncpool_span_ptr(l.span), pos, BUF);
		while (off < BUF) {
			int n = asyncpool_zc_send(zs, &l, off, BUF - off, 0, 0);

			if (n < 0)
				return 4;
			off += (size_t)n;
		}
		pos += BUF;
	}
	shutdown(a, SHUT_WR);
	pthread_join(t, NULL);
	while (!asyncpool_zc_stats(zs, &st) && st.pending)
		if (asyncpool_zc_wait(zs, -1) < 0)
			return 5;
	if (asyncpool_zc_close(zs, -1))
		return 5;
	close(a);
	close(b);
	asyncpool_shared_close(sp);
	if (st.sends < BYTES / BUF || st.completions != st.sends)
		return 6;
	return rd.got == BYTES && rd.bad == 0 ? 0 : 7;
}

static int child_status(pid_t pid)
{
	int st;

	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
		return -1;
	return WEXITSTATUS(st);
}

static void test_two_backends(struct asyncpool_shared *sp)
{
	struct asyncpool *pool = asyncpool_shared_pool(sp);
	int fd = asyncpool_shared_fd(sp), rc;
	pid_t u, z;

	fflush(stdout);
	u = fork_or_bail();
	if (u == 0) {
#ifdef HAVE_LIBURING
		_exit(uring_child(fd));
#else
		_exit(SKIPPED);
#endif
	}
	z = fork_or_bail();
	if (z == 0)
		_exit(zc_child(fd));
	rc = child_status(u);
	if (rc == SKIPPED)
		skip(1, "io_uring is not usable here: the MSG_ZEROCOPY process ran alone");
	else
		is_int(rc, 0, "io_uring SEND_ZC process: 16 MiB from the shared pool, every byte right");
	is_int(child_status(z), 0,
	       "MSG_ZEROCOPY process, at the same time: 16 MiB, every byte right, every completion");
	is_int(asyncpool_available(pool), NBUF, "every buffer back in the shared pool");
	is_int(asyncpool_check(pool), 0, "and the pool is consistent");
}

/* Sends until the socket is full, reports, and waits to be killed. */
static int doomed_child(int shfd, int sock, int report)
{
	struct asyncpool_zc_options o = { .size = sizeof(o), .flags = ASYNCPOOL_ZC_NO_FALLBACK };
	struct asyncpool_zc_stats st = { .size = sizeof(st) };
	struct asyncpool_shared *sp;
	struct asyncpool_zc *zs;
	uint64_t msg[3];
	size_t sent;

	if (asyncpool_shared_open_fd(shfd, &sp) || asyncpool_zc_open(sock, &o, &zs))
		return 2;
	sent = zc_fill_kept(zs, asyncpool_shared_pool(sp), BUF);
	asyncpool_zc_reap(zs);
	asyncpool_zc_stats(zs, &st);
	msg[0] = sent;
	msg[1] = st.leases_out;
	msg[2] = st.pending;
	if (write(report, msg, sizeof(msg)) != sizeof(msg))
		return 3;
	for (;;)
		pause();
}

static void test_death(struct asyncpool_shared *sp)
{
	struct asyncpool *pool = asyncpool_shared_pool(sp);
	unsigned char *buf = malloc(BUF);
	uint64_t msg[3] = { 0 };
	size_t got = 0, bad = 0, before;
	int a, b, pfd[2], small = 32 * 1024, rc, tries;
	pid_t pid;

	if (!buf || tcp_loopback_pair(&a, &b) || pipe(pfd))
		bail_out("setup");
	setsockopt(a, SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
	setsockopt(b, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
	asyncpool_set_quarantine(pool, 200);
	fflush(stdout);
	pid = fork_or_bail();
	if (pid == 0) {
		close(pfd[0]);
		close(b);
		_exit(doomed_child(asyncpool_shared_fd(sp), a, pfd[1]));
	}
	close(a);               /* the child's socket is the child's alone */
	close(pfd[1]);
	if (read(pfd[0], msg, sizeof(msg)) != sizeof(msg))
		bail_out("the child did not report");
	close(pfd[0]);
	ok(msg[0] > 0 && msg[1] > 0 && msg[2] > 0,
	   "death: the child sent %llu bytes; %llu leases and %llu sends still with the kernel",
	   (unsigned long long)msg[0], (unsigned long long)msg[1], (unsigned long long)msg[2]);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	before = asyncpool_available(pool);
	rc = asyncpool_reclaim(pool);
	ok(rc >= 0 && asyncpool_available(pool) <= NBUF - msg[1],
	   "death: reclaim before the quarantine leaves the leases in flight out (%zu free)",
	   asyncpool_available(pool));
	/* The orphaned socket still sends from the dead process's pages. */
	while (got < msg[0]) {
		ssize_t n = read(b, buf, BUF);

		if (n <= 0)
			break;
		bad += pattern_check(buf, got, (size_t)n);
		got += (size_t)n;
	}
	ok(got == msg[0] && bad == 0,
	   "death: the kernel sent every byte of the dead sender's pages, right (%zu of %llu)",
	   got, (unsigned long long)msg[0]);
	close(b);
	/* After the quarantine (200 ms), reclaim gives them back. */
	for (tries = 0; tries < 200 && asyncpool_available(pool) < NBUF; tries++) {
		usleep(50 * 1000);
		asyncpool_reclaim(pool);
	}
	is_int(asyncpool_available(pool), NBUF, "death: after the quarantine every buffer is back (%zu before)",
	       before);
	is_int(asyncpool_check(pool), 0, "death: the pool is consistent");
	free(buf);
}

int main(void)
{
	struct asyncpool_backend_info bi = { .size = sizeof(bi) };
	struct asyncpool_shared_options o;
	struct asyncpool_shared *sp;

	alarm(120);
	if (asyncpool_backend_probe(&bi) || !(bi.backends & ASYNCPOOL_BACKEND_ZEROCOPY_TCP))
		skip_all("no MSG_ZEROCOPY on TCP here");
	shared_options(&o, BUF, NBUF);
	if (asyncpool_shared_create(&o, &sp))
		bail_out("asyncpool_shared_create");
	test_two_backends(sp);
	test_death(sp);
	asyncpool_shared_close(sp);
	return done_testing();
}
