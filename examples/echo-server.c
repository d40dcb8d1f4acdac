/* SPDX-License-Identifier: MIT */
/*
 * echo-server: a thread-per-core TCP echo server on io_uring and
 * libasyncpool.
 *
 *   echo-server [-p PORT] [-t THREADS] [-n CONNECTIONS]
 *
 * listens on 127.0.0.1:PORT (0, the default, picks a free port), prints
 * "listening on 127.0.0.1:PORT", and echoes every byte it receives.  With
 * -n it exits after serving that many connections; SIGINT and SIGTERM
 * stop it too.  Try it with
 *
 *   ./echo-server -p 7777 &
 *   socat - TCP:127.0.0.1:7777
 *
 * What it shows:
 *
 *   - one pool of send buffers for every thread: one slab, registered as
 *     fixed buffers on each thread's ring in one call, the pool holding
 *     every ring's region (asyncpool_proactor_register_slab_many(3),
 *     asyncpool_create_opts(3) with siblings);
 *   - receives: a multishot recv per connection that picks buffers from
 *     the thread's own provided-buffer ring (a WRITE region), turned
 *     into leases by asyncpool_region_recv_lease(3);
 *   - sends: IORING_OP_SEND_ZC from the pool's fixed buffers; a send
 *     buffer goes back to the pool when its notification arrives, not
 *     when the send completes;
 *   - asyncpool_prep_wait(3) when the pool runs dry: the ring wakes the
 *     thread when a buffer comes back;
 *   - the teardown order: pool, slabs and regions, proactors, rings.
 *
 * The reply is the request here; a real server would build its reply in
 * the send buffer instead of copying the request into it.
 *
 * Build:  cc -O2 -o echo-server echo-server.c \
 *             $(pkg-config --cflags --libs libasyncpool liburing) -lpthread
 * (a program that calls liburing itself names liburing to pkg-config:
 * libasyncpool's own use of it is private).
 *
 * Exit status: 0 when every buffer came back and everything was torn
 * down, 1 on an error, 77 when io_uring is not available here: in a
 * container whose seccomp profile refuses it (Docker's default since 25,
 * containerd 2.0), under kernel.io_uring_disabled.  There, serve with
 * echo-server-epoll.c instead: the same server on epoll and the socket
 * backend (MSG_ZEROCOPY), which asyncpool_backend_probe(3) chooses.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <liburing.h>
#include <asyncpool.h>

/* Debian 12's liburing 2.3 predates these (Linux 6.2): the kernel's values. */
#ifndef IORING_SEND_ZC_REPORT_USAGE
#define IORING_SEND_ZC_REPORT_USAGE (1U << 3)
#endif
#ifndef IORING_NOTIF_USAGE_ZC_COPIED
#define IORING_NOTIF_USAGE_ZC_COPIED (1U << 31)
#endif

#define MAX_THREADS 16
#define MAX_CONNS   64          /* per thread */
#define RECV_SIZE   16384       /* bytes per recv buffer */
#define RECV_BUFS   64          /* recv buffers per thread (a power of 2) */
#define SEND_SIZE   32768       /* bytes per send buffer: up to 2 recvs */
#define SEND_BUFS   64          /* send buffers, for all threads: 2 MiB pinned
				   per ring (once for all where Linux 6.13
				   clones them), within the 8 MiB memlock limit
				   of a user (ulimit -l) up to 4 threads */
#define CACHE       8           /* per-thread cache of the send pool */

/* What a completion is for: the top byte of its user_data. */
enum { OP_ACCEPT = 1, OP_RECV, OP_SEND, OP_WAIT, OP_TIMEOUT };
#define UD(op, conn, buf) ((uint64_t)(op) << 56 | (uint64_t)(conn) << 32 | (buf))

struct conn {
	int fd;                         /* -1: slot free */
	bool recv_armed;                /* a multishot recv is in flight */
	bool peer_done;                 /* the peer sent its last byte */
	bool sending;                   /* one send in flight: keeps the order */
	bool stalled;                   /* waiting for a send buffer */
	unsigned head, count;           /* received, not yet sent */
	struct asyncpool_lease in[RECV_BUFS];
};

struct worker {
	struct io_uring ring;
	struct asyncpool_proactor *proactor;
	struct asyncpool_region *recv;  /* this ring's provided buffers */
	pthread_t thread;
	int group;                      /* buffer group of recv */
	unsigned zc_flags;              /* IORING_SEND_ZC_REPORT_USAGE if the kernel takes it */
	bool waiting;                   /* a pool wait is armed */
	unsigned conns, in_flight;      /* open connections, send buffers out */
	uint64_t bytes, sends, copied, dry;
	struct conn conn[MAX_CONNS];
	/* The lease of each send buffer in flight, by buffer index. */
	struct asyncpool_lease out[SEND_BUFS];
};

static struct asyncpool *pool;         /* the send buffers, every thread's */
static int listen_fd;
static atomic_uint served, limit;
static atomic_bool stop;

static void on_signal(int sig)
{
	(void)sig;
	atomic_store(&stop, true);
}

static struct io_uring_sqe *sqe_of(struct worker *w)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&w->ring);

	if (!sqe) {                     /* the queue is full: make room */
		io_uring_submit(&w->ring);
		sqe = io_uring_get_sqe(&w->ring);
	}
	return sqe;
}

static void arm_recv(struct worker *w, unsigned c)
{
	struct io_uring_sqe *sqe = sqe_of(w);

	io_uring_prep_recv_multishot(sqe, w->conn[c].fd, NULL, 0, 0);
	sqe->flags |= IOSQE_BUFFER_SELECT;
	sqe->buf_group = (uint16_t)w->group;
	sqe->user_data = UD(OP_RECV, c, 0);
	w->conn[c].recv_armed = true;
}

/* Copy what c received into one send buffer and send it, if c has
 * something to send, no send in flight, and the pool a buffer. */
static void pump(struct worker *w, unsigned c)
{
	struct conn *k = &w->conn[c];
	struct asyncpool_lease l;
	struct io_uring_sqe *sqe;
	size_t len = 0;
	bool released = false;

	if (k->sending || k->count == 0)
		return;
	if (asyncpool_acquire(pool, &l) != 0) {
		/* -ENOBUFS: every send buffer is out, most of them waiting for
		 * the notifications of sends the peer has not read yet. */
		k->stalled = true;
		w->dry++;
		return;
	}
	k->stalled = false;
	while (k->count) {
		struct asyncpool_lease *r = &k->in[k->head];

		if (len + r->span.length > SEND_SIZE)
			break;
		memcpy((char *)asyncpool_span_ptr(l.span) + len, asyncpool_span_ptr(r->span),
		       r->span.length);
		len += r->span.length;
		asyncpool_lease_release(r);     /* back in the recv ring */
		released = true;
		k->head = (k->head + 1) % RECV_BUFS;
		k->count--;
	}
	/* MSG_WAITALL: the kernel sends all of it, or fails. */
	sqe = sqe_of(w);
	io_uring_prep_send_zc_fixed(sqe, k->fd, asyncpool_span_ptr(l.span), len, MSG_WAITALL,
				    w->zc_flags,
				    (unsigned)asyncpool_region_fixed_index(l.span.region, l.buffer_index));
	sqe->user_data = UD(OP_SEND, c, l.buffer_index);
	w->out[l.buffer_index] = l;
	w->in_flight++;
	w->sends++;
	k->sending = true;
	w->bytes += len;
	/* A multishot recv that ended because the recv ring ran dry is armed
	 * again now that a buffer is back in it. */
	for (unsigned i = 0; released && i < MAX_CONNS; i++)
		if (w->conn[i].fd >= 0 && !w->conn[i].recv_armed && !w->conn[i].peer_done)
			arm_recv(w, i);
}

/* Close c once the peer is done, all it sent was echoed, and no
 * request of c is in flight (its notifications may still come). */
static void maybe_close(struct worker *w, unsigned c)
{
	struct conn *k = &w->conn[c];

	if (!k->peer_done || k->count || k->sending || k->recv_armed)
		return;
	shutdown(k->fd, SHUT_WR);
	close(k->fd);
	k->fd = -1;
	w->conns--;
	if (atomic_fetch_add(&served, 1) + 1 == atomic_load(&limit))
		atomic_store(&stop, true);
}

static void on_recv(struct worker *w, unsigned c, struct io_uring_cqe *cqe)
{
	struct conn *k = &w->conn[c];
	struct asyncpool_lease l;
	int rc;

	if (!(cqe->flags & IORING_CQE_F_MORE))
		k->recv_armed = false;
	rc = asyncpool_region_recv_lease(w->recv, cqe, &l);
	if (rc == 0 && l.span.length > 0) {
		k->in[(k->head + k->count++) % RECV_BUFS] = l;
		pump(w, c);
		return;
	}
	if (rc == 0)
		asyncpool_lease_release(&l);    /* a buffer with 0 bytes */
	/* -ENOBUFS (passed to the region above, which counts it as dry): the
	 * recv ring is empty; pump() arms the recv again when a buffer is
	 * back.  0 bytes or an error: the peer is done. */
	if (cqe->res != -ENOBUFS && !(cqe->flags & IORING_CQE_F_MORE))
		k->peer_done = true;
	maybe_close(w, c);
}

static void on_send(struct worker *w, unsigned c, uint32_t bi, struct io_uring_cqe *cqe)
{
	struct conn *k = &w->conn[c];

	if (cqe->flags & IORING_CQE_F_NOTIF) {
		/* The kernel is done with the buffer: back to the pool. */
		if (cqe->res & IORING_NOTIF_USAGE_ZC_COPIED)
			w->copied++;
		asyncpool_lease_release(&w->out[bi]);
		w->in_flight--;
		for (unsigned i = 0; i < MAX_CONNS; i++)
			if (w->conn[i].fd >= 0 && w->conn[i].stalled)
				pump(w, i);
		return;
	}
	k->sending = false;
	if (cqe->res == -EINVAL && w->zc_flags) {
		/* A kernel before 6.2: no usage report.  Send it again. */
		struct io_uring_sqe *sqe = sqe_of(w);
		struct asyncpool_lease *l = &w->out[bi];

		w->zc_flags = 0;
		io_uring_prep_send_zc_fixed(sqe, k->fd, asyncpool_span_ptr(l->span),
					    l->span.length, MSG_WAITALL, 0,
					    (unsigned)asyncpool_region_fixed_index(l->span.region, bi));
		sqe->user_data = cqe->user_data;
		k->sending = true;
		/* The sent length is in the lease: pump() filled l->span. */
		return;
	}
	if (!(cqe->flags & IORING_CQE_F_MORE)) {        /* no notification will come */
		asyncpool_lease_release(&w->out[bi]);
		w->in_flight--;
	}
	if (cqe->res < 0) {
		fprintf(stderr, "echo-server: send: %s\n", strerror(-cqe->res));
		k->peer_done = true;
		for (; k->count; k->count--, k->head = (k->head + 1) % RECV_BUFS)
			asyncpool_lease_release(&k->in[k->head]);
		shutdown(k->fd, SHUT_RDWR);     /* ends the recv too */
	}
	pump(w, c);
	maybe_close(w, c);
}

static void on_accept(struct worker *w, struct io_uring_cqe *cqe)
{
	unsigned c;

	if (!(cqe->flags & IORING_CQE_F_MORE) && !atomic_load(&stop)) {
		struct io_uring_sqe *sqe = sqe_of(w);   /* accept again */

		io_uring_prep_multishot_accept(sqe, listen_fd, NULL, NULL, 0);
		sqe->user_data = UD(OP_ACCEPT, 0, 0);
	}
	if (cqe->res < 0)
		return;
	for (c = 0; c < MAX_CONNS && w->conn[c].fd >= 0; c++)
		;
	if (c == MAX_CONNS || atomic_load(&stop)) {
		close(cqe->res);
		return;
	}
	memset(&w->conn[c], 0, sizeof(w->conn[c]));
	w->conn[c].fd = cqe->res;
	w->conns++;
	arm_recv(w, c);
}

/* Arm a wait for a send buffer: a futex wait on the pool, on the ring. */
static void arm_wait(struct worker *w)
{
	static struct __kernel_timespec slice = { .tv_nsec = 10 * 1000 * 1000 };
	struct io_uring_sqe *sqe = sqe_of(w);

	if (asyncpool_prep_wait(pool, sqe) == 0) {
		/* A release into another thread's cache wakes us only when
		 * that cache flushes: the timeout bounds the wait. */
		sqe->flags |= IOSQE_IO_LINK;
		sqe->user_data = UD(OP_WAIT, 0, 0);
		sqe = sqe_of(w);
		io_uring_prep_link_timeout(sqe, &slice, 0);
		sqe->user_data = UD(OP_TIMEOUT, 0, 0);
	} else {
		/* -EOPNOTSUPP: no IORING_OP_FUTEX_WAIT before Linux 6.7; a
		 * plain timeout instead. */
		io_uring_prep_timeout(sqe, &slice, 0, 0);
		sqe->user_data = UD(OP_WAIT, 0, 0);
	}
	w->waiting = true;
}

static void *run(void *arg)
{
	struct worker *w = arg;
	struct io_uring_sqe *sqe = sqe_of(w);

	io_uring_prep_multishot_accept(sqe, listen_fd, NULL, NULL, 0);
	sqe->user_data = UD(OP_ACCEPT, 0, 0);
	/* Until told to stop, then until every connection of this thread is
	 * closed and every send buffer is back. */
	while (!atomic_load(&stop) || w->conns || w->in_flight) {
		struct __kernel_timespec tick = { .tv_nsec = 100 * 1000 * 1000 };
		struct io_uring_cqe *cqe;
		unsigned head, seen = 0;
		bool stalled = false;

		io_uring_submit_and_wait_timeout(&w->ring, &cqe, 1, &tick, NULL);
		io_uring_for_each_cqe(&w->ring, head, cqe) {
			unsigned op = (unsigned)(cqe->user_data >> 56);
			unsigned c = (unsigned)(cqe->user_data >> 32) & 0xffffff;

			seen++;
			if (op == OP_ACCEPT)
				on_accept(w, cqe);
			else if (op == OP_RECV)
				on_recv(w, c, cqe);
			else if (op == OP_SEND)
				on_send(w, c, (uint32_t)cqe->user_data, cqe);
			else if (op == OP_WAIT)
				w->waiting = false;
		}
		io_uring_cq_advance(&w->ring, seen);
		for (unsigned c = 0; c < MAX_CONNS; c++)
			if (w->conn[c].fd >= 0 && w->conn[c].stalled) {
				pump(w, c);
				stalled |= w->conn[c].stalled;
			}
		if (stalled && !w->waiting)
			arm_wait(w);
		if (atomic_load(&stop))         /* ask the peers to finish */
			for (unsigned c = 0; c < MAX_CONNS; c++)
				if (w->conn[c].fd >= 0)
					shutdown(w->conn[c].fd, SHUT_RD);
	}
	return NULL;
}

/* The listening socket on 127.0.0.1:port; its port in *port. */
static int listen_on(int *port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)*port) };
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(fd, (struct sockaddr *)&a, sizeof(a)) || listen(fd, 128) ||
	    getsockname(fd, (struct sockaddr *)&a, &len))
		return -1;
	*port = ntohs(a.sin_port);
	return fd;
}

int main(int argc, char **argv)
{
	static struct worker w[MAX_THREADS];
	struct asyncpool_proactor *proactor[MAX_THREADS];
	struct asyncpool_region *send[MAX_THREADS];
	struct asyncpool_slab_options so = { .size = sizeof(so), .numa_node = -1 };
	struct asyncpool_options po = { .size = sizeof(po), .cache_size = CACHE };
	struct asyncpool_slab *slab;
	int port = 0, threads = 2, opt, rc, err, bad = 0;
	uint64_t bytes = 0, sends = 0, copied = 0, dry = 0;

	while ((opt = getopt(argc, argv, "p:t:n:")) != -1) {
		if (opt == 'p')
			port = atoi(optarg);
		else if (opt == 't')
			threads = atoi(optarg);
		else if (opt == 'n')
			atomic_store(&limit, (unsigned)atoi(optarg));
		else
			return 2;
	}
	if (threads < 1 || threads > MAX_THREADS)
		return 2;
	signal(SIGPIPE, SIG_IGN);
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	listen_fd = listen_on(&port);
	if (listen_fd < 0) {
		perror("echo-server: listen");
		return 1;
	}

	/* A ring and a proactor per thread.  The proactor wraps the ring
	 * (the ring stays ours) and registers memory with it. */
	for (int i = 0; i < threads; i++) {
		rc = io_uring_queue_init(256, &w[i].ring, 0);
		if (rc == -EPERM || rc == -ENOSYS) {
			fprintf(stderr, "echo-server: io_uring is not available: %s; "
				"echo-server-epoll serves without it (MSG_ZEROCOPY)\n",
				strerror(-rc));
			return 77;
		}
		if (rc || (rc = asyncpool_proactor_create_uring(&w[i].ring, 0, &w[i].proactor)))
			goto fail;
		proactor[i] = w[i].proactor;
		w[i].zc_flags = IORING_SEND_ZC_REPORT_USAGE;
		for (int c = 0; c < MAX_CONNS; c++)
			w[i].conn[c].fd = -1;
	}

	/* The send buffers: one slab, the same fixed slots on every ring,
	 * one pool over the first region that holds the others (siblings),
	 * so that every region can be let go at once. */
	so.buffer_size = SEND_SIZE;
	so.buffer_count = SEND_BUFS;
	if ((rc = asyncpool_slab_create(&so, &slab)))
		goto fail;
	rc = asyncpool_proactor_register_slab_many(proactor, (uint32_t)threads, slab,
						   ASYNCPOOL_ACCESS_READ, send);
	asyncpool_slab_unref(slab);             /* the regions hold it */
	if (rc == -ENOMEM)
		fprintf(stderr, "echo-server: fixed buffers are pinned memory: "
			"is ulimit -l (RLIMIT_MEMLOCK) large enough?\n");
	if (rc)
		goto fail;
	po.siblings = send + 1;
	po.sibling_count = (uint32_t)threads - 1;
	rc = asyncpool_create_opts(send[0], &po, &pool);
	for (int i = 0; i < threads; i++)
		asyncpool_region_unref(send[i]);        /* the pool holds them */
	if (rc)
		goto fail;

	/* The recv buffers: a provided-buffer ring per thread, each on its
	 * own slab (the kernel of each ring writes into its own buffers). */
	so.buffer_size = RECV_SIZE;
	so.buffer_count = RECV_BUFS;
	for (int i = 0; i < threads; i++) {
		if ((rc = asyncpool_slab_create(&so, &slab)))
			goto fail;
		rc = asyncpool_proactor_register_slab(w[i].proactor, slab, ASYNCPOOL_ACCESS_WRITE,
						      &w[i].recv);
		asyncpool_slab_unref(slab);
		if (rc)
			goto fail;
		w[i].group = asyncpool_region_buffer_group(w[i].recv);
	}

	printf("listening on 127.0.0.1:%d\n", port);
	fflush(stdout);
	for (int i = 0; i < threads; i++)
		pthread_create(&w[i].thread, NULL, run, &w[i]);
	for (int i = 0; i < threads; i++) {
		pthread_join(w[i].thread, NULL);
		bytes += w[i].bytes;
		sends += w[i].sends;
		copied += w[i].copied;
		dry += w[i].dry;
	}
	printf("served %u connections: %llu bytes echoed in %llu zero-copy sends "
	       "(%llu copied by the kernel), the pool ran dry %llu times\n",
	       atomic_load(&served), (unsigned long long)bytes, (unsigned long long)sends,
	       (unsigned long long)copied, (unsigned long long)dry);
	rc = 0;

fail:
	if (rc)
		fprintf(stderr, "echo-server: setup: %s\n", strerror(-rc));
	/*
	 * Teardown, in this order: the pool (every send buffer must be back:
	 * it drops the send regions of every ring); each recv region (it
	 * leaves its ring); each proactor (-EBUSY while a region of it
	 * lives: asyncpool_proactor_stats(3) counts them); each ring last,
	 * which cancels the accepts still armed.
	 */
	if (pool && (err = asyncpool_destroy(pool))) {
		fprintf(stderr, "echo-server: asyncpool_destroy: %s\n", strerror(-err));
		bad = 1;
	}
	for (int i = 0; i < threads; i++) {
		asyncpool_region_unref(w[i].recv);
		if (w[i].proactor && (err = asyncpool_proactor_destroy(w[i].proactor))) {
			fprintf(stderr, "echo-server: asyncpool_proactor_destroy: %s\n", strerror(-err));
			bad = 1;
		}
		if (w[i].ring.ring_fd > 0)
			io_uring_queue_exit(&w[i].ring);
	}
	close(listen_fd);
	return rc || bad ? 1 : 0;
}
