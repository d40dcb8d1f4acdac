/* SPDX-License-Identifier: MIT */
/*
 * pipeline: three processes over one shared pool, each stage a process
 * that may die and be restarted, the bytes never copied between them.
 *
 *   pipeline [-p PORT] [-n CONNECTIONS] [-q QUARANTINE_MS] [-d USEC] [-z y|n|a] [-u]
 *
 * listens on 127.0.0.1:PORT (0, the default, picks a free port), prints
 * "listening on 127.0.0.1:PORT", and sends back every byte it receives
 * with a-z turned into A-Z.  With -n it exits after that many
 * connections ended (at most 64).  -q: the quarantine after which a
 * dead worker's items come back (200 ms); -d: the worker holds each item
 * USEC microseconds (a slow stage, to see kills land on held items);
 * -z: SEND_ZC always (y), never (n), or (a, the default) only to a peer
 * on another host: to this host the kernel copies a SEND_ZC's bytes
 * anyway, and a plain send is cheaper (same_host()).
 * Try it with
 *
 *   ./pipeline -p 7777 &
 *   echo hello | socat - TCP:127.0.0.1:7777
 *
 * The stages:
 *
 *   ingest   accepts the connections and receives from them with
 *            multishot recvs on its io_uring, into the shared pool's
 *            buffers (asyncpool_recv_ring_create(3)); each completion is
 *            a pool lease, sent as it is on channel 0 with the span the
 *            bytes received and a tag (connection, sequence number): the
 *            completions the ring has at once go as one batch
 *            (asyncpool_channel_send_entries(3));
 *   worker   receives from channel 0 what it has (up to 32 items a
 *            wake-up), turns a-z into A-Z in place, and sends the same
 *            leases on channel 1 in one call;
 *   egress   receives from channel 1 (an io_uring wait on the channel,
 *            asyncpool_channel_prep_wait(3)) and sends the bytes back
 *            with IORING_OP_SEND_ZC, the items a connection has ready in
 *            order as one linked chain (IOSQE_IO_LINK, MSG_WAITALL: Linux
 *            5.19 sends all of each); a buffer goes back to the pool when
 *            its notification arrives (an item under 2 KiB, or any item
 *            to a client on this host, goes with a plain IORING_OP_SEND:
 *            copying costs less than pinning the page and waiting for the
 *            notification, and over loopback the kernel copies anyway).
 *
 * and the parent, which creates the pool, starts them, and starts a new
 * worker whenever the worker dies.  Kill the worker at any moment (its
 * pid is printed): what was queued for it stays in channel 0, and what it
 * held comes back into channel 0 after the quarantine, flagged
 * ASYNCPOOL_CHANNEL_REDELIVERED (asyncpool_channel_open(3)); the new
 * worker transforms it again (the transform is idempotent), and egress
 * puts the connection's items back in order by their tags, so that the
 * client sees every byte once, in order.  Full channels are waited for
 * (asyncpool_channel_send_wait(3)), never spun on.
 *
 * -u runs the same three processes connected by Unix stream sockets
 * instead (a copy into and out of the kernel at each hop): the
 * comparison of bench/pipeline/.  No restart there: a dead worker takes
 * its bytes with it.
 *
 * Build:  cc -O2 -o pipeline pipeline.c \
 *             $(pkg-config --cflags --libs libasyncpool liburing)
 *
 * Latency: a message wakes each stage once; where waking a process on
 * another CPU is slow (a VM: 20-45 us a wake-up on the one measured,
 * about 1 us on the same CPU), `taskset -c N pipeline` keeps the stages'
 * hand-offs on one CPU: paced p50 100-153 against 135-231 us there,
 * over channels and over sockets alike (bench/pipeline/README.md).
 *
 * Exit status: 0 when every connection was served and every buffer came
 * back to the pool, 1 on an error, 77 when io_uring is not available.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <liburing.h>
#include <asyncpool.h>

#ifndef BUFFER_SIZE
#define BUFFER_SIZE   16384u
#endif
#define BUFFER_COUNT  256u
#ifndef RING_ENTRIES
#define RING_ENTRIES  64u
#endif
#define MAX_CONNS     64u       /* connections per run, numbered from 0 */
#ifndef ZC_MIN
#define ZC_MIN        2048u     /* smaller items: IORING_OP_SEND (a copy) */
#endif
#define BATCH         32u       /* items a stage takes or sends in one call */
#define CH_IN         0u        /* ingest -> worker */
#define CH_OUT        1u        /* worker -> egress */

/* The tag: kind (8 bits), connection (16), sequence number (40). */
#define KIND_DATA     0u
#define KIND_EOF      1u        /* the connection's last item: no bytes */
#define KIND_STOP     2u        /* every connection served: stages exit */
#define TAG(kind, c, seq) (((uint64_t)(kind) << 56) | ((uint64_t)(c) << 40) | \
			   ((seq) & ((1ull << 40) - 1)))
#define TAG_KIND(t)   ((unsigned)((t) >> 56))
#define TAG_CONN(t)   ((unsigned)(((t) >> 40) & 0xffff))
#define TAG_SEQ(t)    ((t) & ((1ull << 40) - 1))

static int pool_fd = -1;        /* the shared pool, inherited by the stages */
static unsigned limit;          /* -n */
static unsigned quarantine_ms = 200;
static unsigned worker_delay_us;        /* -d: the worker holds each item this long */
static char zc_mode = 'a';              /* -z y|n|a: SEND_ZC always, never, to other hosts */

static void die(const char *what, int err)
{
	fprintf(stderr, "pipeline: %s: %s\n", what, strerror(err < 0 ? -err : err));
	exit(1);
}

/* ---- the connection fds, ingest to egress (SCM_RIGHTS) ---- */

static void send_fd(int sock, uint32_t c, int fd)
{
	char cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { &c, sizeof(c) };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1,
			    .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
	struct cmsghdr *cm = CMSG_FIRSTHDR(&m);

	memset(cbuf, 0, sizeof(cbuf));
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &fd, sizeof(int));
	if (sendmsg(sock, &m, 0) != sizeof(c))
		die("sendmsg(SCM_RIGHTS)", errno);
}

/* One fd and its connection number, waiting for it: 0, or -1 at the end. */
static int recv_fd(int sock, uint32_t *c, int *fd)
{
	char cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { c, sizeof(*c) };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1,
			    .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
	struct cmsghdr *cm;

	if (recvmsg(sock, &m, MSG_CMSG_CLOEXEC) != sizeof(*c))
		return -1;
	cm = CMSG_FIRSTHDR(&m);
	if (!cm || cm->cmsg_type != SCM_RIGHTS || *c >= MAX_CONNS)
		return -1;
	memcpy(fd, CMSG_DATA(cm), sizeof(int));
	return 0;
}

/* One byte, and eight at a time: per byte, 0x80 where it is a-z. */
static void upper_byte(unsigned char *p)
{
	if (*p >= 'a' && *p <= 'z')
		*p = (unsigned char)(*p - 'a' + 'A');
}

static uint64_t lower_mask(uint64_t x)
{
	const uint64_t ones = 0x0101010101010101ull, high = 0x8080808080808080ull;
	uint64_t h = x & ~high;                 /* each byte's low 7 bits */
	uint64_t ge_a = h + ones * (0x80 - 'a'); /* high bit: >= 'a' (no carry out) */
	uint64_t gt_z = h + ones * (0x7f - 'z'); /* high bit: > 'z' */

	return ge_a & ~gt_z & ~x & high;        /* and the byte below 0x80 */
}

/* a-z to A-Z, eight bytes a step (the byte loop ran at 2.2 GB/s). */
static void to_upper(unsigned char *p, size_t n)
{
	size_t i = 0;

	for (; i < n && ((uintptr_t)(p + i) & 7); i++)
		upper_byte(p + i);
	for (; i + 8 <= n; i += 8) {
		uint64_t x;

		memcpy(&x, p + i, 8);
		x ^= lower_mask(x) >> 2;        /* 0x80 >> 2: the case bit 0x20 */
		memcpy(p + i, &x, 8);
	}
	for (; i < n; i++)
		upper_byte(p + i);
}

static struct asyncpool_shared *open_pool(void)
{
	struct asyncpool_shared *sp;
	int rc = asyncpool_shared_open_fd(pool_fd, &sp);

	if (rc)
		die("asyncpool_shared_open_fd", rc);
	return sp;
}

/* An end of a channel; a dead holder's end is free once reclaimed. */
static struct asyncpool_channel *open_end(struct asyncpool *pool, uint32_t c, uint32_t end)
{
	struct asyncpool_channel *ch;
	int rc;

	for (int i = 0; i < 500; i++) {
		rc = asyncpool_channel_open(pool, c, end, &ch);
		if (rc != -EBUSY)
			break;
		usleep(10000);
	}
	if (rc)
		die("asyncpool_channel_open", rc);
	return ch;
}

/* Send an item, waiting for room; a dead receiver (-EPIPE) is restarted
 * by the parent: wait for the next one. */
static void send_on(struct asyncpool_channel *ch, struct asyncpool_lease *l, uint64_t tag)
{
	for (;;) {
		int rc = asyncpool_channel_send_wait(ch, l, tag, 1000000000);

		if (rc == 0)
			return;
		if (rc != -EPIPE && rc != -ETIMEDOUT && rc != -EINTR)
			die("asyncpool_channel_send_wait", rc);
		if (rc == -EPIPE)
			usleep(1000);
	}
}

/*
 * Send n items in one call (one look at the receiver's wake word for all
 * of them, so the receiver wakes once for the batch), waiting for room
 * only for what did not fit.
 */
static void send_batch(struct asyncpool_channel *ch, struct asyncpool_lease *l,
		       const uint64_t *tag, unsigned n)
{
	struct asyncpool_channel_entry en[BATCH];
	unsigned done = 0;
	int rc;

	for (unsigned i = 0; i < n; i++)
		en[i] = (struct asyncpool_channel_entry){
			.token = asyncpool_lease_token(&l[i]),
			.tag = tag[i],
			.offset = (uint32_t)(l[i].span.offset - (size_t)l[i].buffer_index *
					     asyncpool_region_buffer_size(l[i].span.region)),
			.length = (uint32_t)l[i].span.length,
		};
	if (n) {
		rc = asyncpool_channel_send_entries(ch, en, n);
		if (rc > 0)
			done = (unsigned)rc;
		else if (rc != -EAGAIN && rc != -EPIPE)
			die("asyncpool_channel_send_entries", rc);
	}
	/* The channel has the first done: those leases are spent. */
	for (unsigned i = 0; i < done; i++)
		memset(&l[i], 0, sizeof(l[i]));
	for (unsigned i = done; i < n; i++)
		send_on(ch, &l[i], tag[i]);
}

/* ---- ingest ---- */

enum { OP_ACCEPT = 1, OP_RECV, OP_POOL, OP_WAIT, OP_SEND };
#define UD(op, c) (((uint64_t)(op) << 32) | (c))

static struct io_uring_sqe *get_sqe(struct io_uring *ring)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(ring);

	if (!sqe) {
		io_uring_submit(ring);
		sqe = io_uring_get_sqe(ring);
	}
	return sqe;
}

struct in_conn {
	int fd;
	uint64_t seq;
	bool open, starved;
};

struct ingest {
	struct io_uring ring;
	struct asyncpool *pool;
	struct asyncpool_recv_ring *rr;
	struct asyncpool_channel *ch;
	struct in_conn conns[MAX_CONNS];
	bool pool_wait;
	/* Received, not yet sent on: sent as one batch when the ring has
	 * no more completions (or BATCH are waiting). */
	struct asyncpool_lease pending[BATCH];
	uint64_t pending_tag[BATCH];
	unsigned npending;
};

static void flush_pending(struct ingest *in)
{
	send_batch(in->ch, in->pending, in->pending_tag, in->npending);
	in->npending = 0;
}

static void arm_recv(struct ingest *in, unsigned c)
{
	struct io_uring_sqe *sqe = get_sqe(&in->ring);

	io_uring_prep_recv_multishot(sqe, in->conns[c].fd, NULL, 0, 0);
	sqe->flags |= IOSQE_BUFFER_SELECT;
	sqe->buf_group = (uint16_t)asyncpool_recv_ring_group(in->rr);
	sqe->user_data = UD(OP_RECV, c);
	in->conns[c].starved = false;
}

/* The ring is out of buffers: wait for the pool (an io_uring futex wait). */
static void arm_pool_wait(struct ingest *in)
{
	struct io_uring_sqe *sqe;
	int rc;

	if (in->pool_wait)
		return;
	sqe = get_sqe(&in->ring);
	if ((rc = asyncpool_prep_wait(in->pool, sqe)))
		die("asyncpool_prep_wait", rc);
	sqe->user_data = UD(OP_POOL, 0);
	in->pool_wait = true;
}

/* Re-arm the receives that stopped for want of buffers, if the ring has some. */
static void rearm_starved(struct ingest *in, unsigned accepted)
{
	if (asyncpool_recv_ring_refill(in->rr) <= 0) {
		arm_pool_wait(in);
		return;
	}
	for (unsigned c = 0; c < accepted; c++)
		if (in->conns[c].open && in->conns[c].starved)
			arm_recv(in, c);
}

/* An item without bytes: the end of a connection, or of everything. */
static void send_mark(struct ingest *in, uint64_t tag)
{
	struct asyncpool_lease l;
	int rc = asyncpool_acquire_wait(in->pool, &l, -1);

	if (rc)
		die("asyncpool_acquire_wait", rc);
	l.span.length = 0;
	send_on(in->ch, &l, tag);
}

static int ingest(int listen_fd, int ctl)
{
	struct asyncpool_shared *sp = open_pool();
	struct asyncpool_proactor *p;
	struct ingest *in = calloc(1, sizeof(*in));
	unsigned accepted = 0, ended = 0;
	struct io_uring_sqe *sqe;
	int rc;

	if (!in)
		die("calloc", ENOMEM);
	in->pool = asyncpool_shared_pool(sp);
	rc = io_uring_queue_init(64, &in->ring, 0);
	if (rc)
		return rc == -EPERM || rc == -ENOSYS ? 77 : 1;
	if ((rc = asyncpool_proactor_create_uring(&in->ring, 0, &p)))
		die("asyncpool_proactor_create_uring", rc);
	if ((rc = asyncpool_recv_ring_create(in->pool, p, RING_ENTRIES, &in->rr)))
		die("asyncpool_recv_ring_create", rc);
	in->ch = open_end(in->pool, CH_IN, ASYNCPOOL_CHANNEL_SEND);
	sqe = get_sqe(&in->ring);
	io_uring_prep_accept(sqe, listen_fd, NULL, NULL, 0);
	sqe->user_data = UD(OP_ACCEPT, 0);
	while (ended < limit) {
		struct io_uring_cqe *cqe;
		struct asyncpool_lease l;
		unsigned op, c;
		bool more;
		int res;

		/* Enter the kernel only when the ring has no completion left,
		 * after sending on what the completions brought. */
		if (io_uring_peek_cqe(&in->ring, &cqe)) {
			flush_pending(in);
			io_uring_submit_and_wait(&in->ring, 1);
			if (io_uring_peek_cqe(&in->ring, &cqe))
				continue;
		} else if (io_uring_sq_ready(&in->ring)) {
			io_uring_submit(&in->ring);
		}
		op = (unsigned)(cqe->user_data >> 32);
		c = (unsigned)cqe->user_data;
		res = cqe->res;
		more = cqe->flags & IORING_CQE_F_MORE;
		switch (op) {
		case OP_ACCEPT:
			io_uring_cqe_seen(&in->ring, cqe);
			if (res < 0)
				die("accept", res);
			c = accepted++;
			in->conns[c] = (struct in_conn){ .fd = res, .open = true };
			send_fd(ctl, c, res);   /* egress sends on its copy */
			arm_recv(in, c);
			if (accepted < limit) {
				sqe = get_sqe(&in->ring);
				io_uring_prep_accept(sqe, listen_fd, NULL, NULL, 0);
				sqe->user_data = UD(OP_ACCEPT, 0);
			}
			break;
		case OP_POOL:
			io_uring_cqe_seen(&in->ring, cqe);
			in->pool_wait = false;
			rearm_starved(in, accepted);
			break;
		case OP_RECV:
			if (c >= accepted || !in->conns[c].open) {
				io_uring_cqe_seen(&in->ring, cqe);
				break;
			}
			rc = asyncpool_recv_ring_lease(in->rr, cqe, &l);
			io_uring_cqe_seen(&in->ring, cqe);
			if (rc == 0) {
				/* The bytes are in the pool's buffer: on they go. */
				in->pending[in->npending] = l;
				in->pending_tag[in->npending] = TAG(KIND_DATA, c, in->conns[c].seq++);
				if (++in->npending == BATCH)
					flush_pending(in);
			} else if (rc == -ENOBUFS) {
				in->conns[c].starved = true;
			} else if (res == 0 || res == -ECONNRESET) {
				flush_pending(in);
				send_mark(in, TAG(KIND_EOF, c, in->conns[c].seq++));
				in->conns[c].open = false;
				close(in->conns[c].fd);
				ended++;
				break;
			} else {
				die("recv", res < 0 ? res : rc);
			}
			if (!more) {
				in->conns[c].starved = true;
				rearm_starved(in, accepted);
			}
			break;
		default:
			io_uring_cqe_seen(&in->ring, cqe);
		}
	}
	/* Every connection ended: the last item says how many there were. */
	flush_pending(in);
	send_mark(in, TAG(KIND_STOP, 0, accepted));
	if (in->pool_wait) {
		struct io_uring_cqe *cqe;

		io_uring_prep_cancel64(get_sqe(&in->ring), UD(OP_POOL, 0), 0);
		io_uring_submit(&in->ring);
		while (in->pool_wait && io_uring_wait_cqe(&in->ring, &cqe) == 0) {
			if (cqe->user_data == UD(OP_POOL, 0))
				in->pool_wait = false;
			io_uring_cqe_seen(&in->ring, cqe);
		}
	}
	/* Every recv ended (each connection's last completion came). */
	if ((rc = asyncpool_recv_ring_destroy(in->rr)))
		die("asyncpool_recv_ring_destroy", rc);
	asyncpool_channel_close(in->ch);
	asyncpool_shared_close(sp);
	asyncpool_proactor_destroy(p);
	io_uring_queue_exit(&in->ring);
	free(in);
	return 0;
}

/* ---- worker ---- */

/*
 * Sleep until channel in may have items, at most a second, on an
 * io_uring FUTEX_WAIT (asyncpool_channel_prep_wait(3)): one system call.
 * asyncpool_channel_recv_item_wait(3) costs more here: before it sleeps
 * it looks at every signal handler for its SA_RESTART rule (57
 * sigaction(2) calls, about 7 us); measured with the whole pipeline on
 * one CPU, 61-68 us paced p50 against 58-60 on this wait.
 */
static void worker_sleep(struct io_uring *ring, struct asyncpool_channel *in, bool *armed)
{
	struct __kernel_timespec second = { .tv_sec = 1 };
	struct io_uring_cqe *cqe;
	unsigned head, seen = 0;
	int rc;

	if (!*armed) {
		struct io_uring_sqe *sqe = get_sqe(ring);

		if ((rc = asyncpool_channel_prep_wait(in, sqe)))
			die("asyncpool_channel_prep_wait", rc);
		sqe->user_data = UD(OP_WAIT, 0);
		*armed = true;
	}
	rc = io_uring_submit_and_wait_timeout(ring, &cqe, 1, &second, NULL);
	if (rc < 0 && rc != -ETIME && rc != -EINTR)
		die("io_uring_submit_and_wait_timeout", rc);
	io_uring_for_each_cqe(ring, head, cqe) {
		if (cqe->user_data == UD(OP_WAIT, 0))
			*armed = false;
		seen++;
	}
	io_uring_cq_advance(ring, seen);
}

static int worker(void)
{
	struct asyncpool_shared *sp = open_pool();
	struct asyncpool *pool = asyncpool_shared_pool(sp);
	struct asyncpool_channel *in = open_end(pool, CH_IN, ASYNCPOOL_CHANNEL_RECV);
	struct asyncpool_channel *out = open_end(pool, CH_OUT, ASYNCPOOL_CHANNEL_SEND);
	struct io_uring ring;
	bool uring = io_uring_queue_init(4, &ring, 0) == 0, armed = false;

	/* It runs until the parent ends it: an item redelivered after the
	 * last one (its worker died holding it) must still go through.
	 * It takes what channel 0 has, up to BATCH items, when it wakes, and
	 * sends them on in one call: one wake-up of the worker and of egress
	 * for a batch, not for each item. */
	for (;;) {
		struct asyncpool_channel_item it[BATCH];
		struct asyncpool_lease l[BATCH];
		uint64_t tag[BATCH];
		int rc = asyncpool_channel_recv_items(in, it, BATCH), n;

		if (rc == -EAGAIN && uring) {
			worker_sleep(&ring, in, &armed);
			continue;
		}
		if (rc == -EAGAIN) {
			/* No io_uring: sleep for one, then take what came with it. */
			rc = asyncpool_channel_recv_item_wait(in, &it[0], 1000000000);
			if (rc == 0) {
				int more = asyncpool_channel_recv_items(in, &it[1], BATCH - 1);

				rc = 1 + (more > 0 ? more : 0);
			}
		}
		if (rc == -ETIMEDOUT || rc == -EINTR || rc == -EPIPE)
			continue;       /* -EPIPE: ingest is gone; the parent ends us */
		if (rc < 0)
			die("asyncpool_channel_recv_items", rc);
		n = rc;
		for (int i = 0; i < n; i++) {
			if (TAG_KIND(it[i].tag) == KIND_DATA)
				to_upper(asyncpool_span_ptr(it[i].lease.span),
					 it[i].lease.span.length);
			if (worker_delay_us)
				usleep(worker_delay_us);
			l[i] = it[i].lease;
			tag[i] = it[i].tag;
		}
		send_batch(out, l, tag, (unsigned)n);
	}
	return 0;
}

/* ---- egress ---- */

struct out_conn {
	int fd;                         /* -1: not received from ingest yet */
	uint64_t next;                  /* the sequence number to send next */
	unsigned sending;               /* sends of the chain in flight */
	bool eof, closed, broken;
	bool zc;                        /* a peer on another host: SEND_ZC */
	/* Items that arrived ahead of their turn, by seq % BUFFER_COUNT. */
	struct asyncpool_lease ahead[BUFFER_COUNT];
	uint64_t ahead_tag[BUFFER_COUNT];
};

/*
 * Whether the peer of a TCP connection is this host (its address is
 * ours, or a loopback one): the bytes then go through the loopback
 * device, and the kernel copies a SEND_ZC's pages when it delivers them
 * to the local socket (Documentation/networking/msg_zerocopy.rst,
 * "Loopback"), so that SEND_ZC costs the copy and the pinning and the
 * notification.  A plain send, one copy, is cheaper there.
 */
static bool same_host(int fd)
{
	struct sockaddr_storage me, peer;
	socklen_t ml = sizeof(me), pl = sizeof(peer);

	if (getsockname(fd, (struct sockaddr *)&me, &ml) ||
	    getpeername(fd, (struct sockaddr *)&peer, &pl) || me.ss_family != peer.ss_family)
		return false;
	if (peer.ss_family == AF_INET) {
		uint32_t a = ntohl(((struct sockaddr_in *)&peer)->sin_addr.s_addr);

		return a >> 24 == 127 || ((struct sockaddr_in *)&me)->sin_addr.s_addr ==
					((struct sockaddr_in *)&peer)->sin_addr.s_addr;
	}
	if (peer.ss_family == AF_INET6) {
		const struct in6_addr *a = &((struct sockaddr_in6 *)&peer)->sin6_addr;

		return IN6_IS_ADDR_LOOPBACK(a) ||
		       !memcmp(a, &((struct sockaddr_in6 *)&me)->sin6_addr, sizeof(*a));
	}
	return false;
}

struct egress {
	struct io_uring ring;
	struct asyncpool_channel *ch;
	struct out_conn conns[MAX_CONNS];
	/* By buffer index: the lease the kernel sends from, its connection,
	 * what is sent, and the references (sends, notifications) on it. */
	struct asyncpool_lease zc[BUFFER_COUNT];
	uint32_t zc_conn[BUFFER_COUNT];
	unsigned zc_refs[BUFFER_COUNT];
	unsigned in_flight;
	int ctl;
	uint64_t items, bytes, duplicates;
};

static void egress_fd(struct egress *e, unsigned c)
{
	while (e->conns[c].fd < 0) {
		uint32_t k;
		int fd;

		if (recv_fd(e->ctl, &k, &fd))
			die("a connection from ingest", EPROTO);
		e->conns[k].fd = fd;
		e->conns[k].zc = zc_mode == 'y' || (zc_mode != 'n' && !same_host(fd));
	}
}

static void zc_put(struct egress *e, uint32_t b)
{
	if (--e->zc_refs[b] == 0) {
		asyncpool_lease_release(&e->zc[b]);
		e->in_flight--;
	}
}

/*
 * Send buffer b's item whole (MSG_WAITALL), linked to the next send of
 * the chain if link: the chain keeps the connection's order.
 */
static void zc_submit(struct egress *e, uint32_t b, bool link)
{
	struct io_uring_sqe *sqe = get_sqe(&e->ring);
	struct asyncpool_lease *l = &e->zc[b];
	const struct out_conn *k = &e->conns[e->zc_conn[b]];
	int fd = k->fd;

	/* A few bytes are cheaper copied than pinned and notified, and so
	 * is everything to a peer on this host (same_host()). */
	if (l->span.length < ZC_MIN || !k->zc)
		io_uring_prep_send(sqe, fd, asyncpool_span_ptr(l->span), l->span.length,
				   MSG_NOSIGNAL | MSG_WAITALL);
	else
		io_uring_prep_send_zc(sqe, fd, asyncpool_span_ptr(l->span), l->span.length,
				      MSG_NOSIGNAL | MSG_WAITALL, 0);
	if (link)
		sqe->flags |= IOSQE_IO_LINK;
	sqe->user_data = UD(OP_SEND, b);
	e->zc_refs[b]++;
}

#define CHAIN_MAX 16u

/*
 * Send connection c's next items in order, as one linked chain of up to
 * CHAIN_MAX sends, unless a chain is in flight.
 */
static void egress_pump(struct egress *e, unsigned c)
{
	struct out_conn *k = &e->conns[c];
	uint32_t chain[CHAIN_MAX];
	unsigned n = 0;

	if (k->sending || k->closed)
		return;
	while (n < CHAIN_MAX && !k->eof) {
		uint32_t slot = (uint32_t)(k->next % BUFFER_COUNT), b;
		struct asyncpool_lease *l = &k->ahead[slot];

		if (!asyncpool_lease_held(l))
			break;
		k->next++;
		if (TAG_KIND(k->ahead_tag[slot]) == KIND_EOF || l->span.length == 0) {
			k->eof = TAG_KIND(k->ahead_tag[slot]) == KIND_EOF;
			asyncpool_lease_release(l);
			continue;
		}
		b = l->buffer_index;
		if (b >= BUFFER_COUNT || e->zc_refs[b])
			die("a lease of a buffer in flight", EPROTO);
		e->zc[b] = *l;
		memset(l, 0, sizeof(*l));
		e->zc_conn[b] = c;
		e->in_flight++;
		chain[n++] = b;
	}
	for (unsigned i = 0; i < n; i++)
		zc_submit(e, chain[i], i + 1 < n);
	k->sending = n;
	if (!n && k->eof) {
		/* Everything before the end is sent (the kernel may still
		 * hold buffers: it has its own references). */
		shutdown(k->fd, SHUT_WR);
		close(k->fd);
		k->closed = true;
	}
}

static void egress_send_done(struct egress *e, uint32_t b, const struct io_uring_cqe *cqe)
{
	struct out_conn *k;

	if (b >= BUFFER_COUNT || !e->zc_refs[b])
		die("a completion of no send", EPROTO);
	k = &e->conns[e->zc_conn[b]];
	if (cqe->flags & IORING_CQE_F_NOTIF) {
		zc_put(e, b);           /* the kernel is done with the buffer */
		return;
	}
	if (cqe->flags & IORING_CQE_F_MORE)
		e->zc_refs[b]++;        /* a notification follows */
	if (cqe->res < 0 || (size_t)cqe->res < e->zc[b].span.length) {
		/* The client went away (the rest of the chain is cancelled):
		 * drop the rest of its bytes. */
		if (!k->broken)
			fprintf(stderr, "pipeline: send: %s\n",
				strerror(cqe->res < 0 ? -cqe->res : EPIPE));
		k->broken = true;
	} else {
		e->bytes += (size_t)cqe->res;
	}
	if (k->sending && --k->sending == 0)
		egress_pump(e, e->zc_conn[b]);
	zc_put(e, b);
}

/* An item from the worker: in its connection's order. */
static void egress_item(struct egress *e, struct asyncpool_channel_item *it, bool *stop,
			unsigned *conns)
{
	unsigned c = TAG_CONN(it->tag), slot;
	uint64_t seq = TAG_SEQ(it->tag);
	struct out_conn *k;

	e->items++;
	if (TAG_KIND(it->tag) == KIND_STOP) {
		*stop = true;
		*conns = (unsigned)seq;
		asyncpool_lease_release(&it->lease);
		return;
	}
	if (c >= MAX_CONNS)
		die("an item of no connection", EPROTO);
	egress_fd(e, c);
	k = &e->conns[c];
	slot = (unsigned)(seq % BUFFER_COUNT);
	if (seq < k->next || (asyncpool_lease_held(&k->ahead[slot]) &&
			      k->ahead_tag[slot] == it->tag)) {
		e->duplicates++;        /* never, with channels: counted to show it */
		asyncpool_lease_release(&it->lease);
		return;
	}
	if (seq - k->next >= BUFFER_COUNT || asyncpool_lease_held(&k->ahead[slot]))
		die("an item too far ahead", EPROTO);
	k->ahead[slot] = it->lease;
	k->ahead_tag[slot] = it->tag;
	egress_pump(e, c);
}

static bool egress_done(struct egress *e, bool stop, unsigned conns)
{
	if (!stop || e->in_flight)
		return false;
	for (unsigned c = 0; c < conns && c < MAX_CONNS; c++)
		if (!e->conns[c].closed)
			return false;
	return true;
}

static int egress(int ctl)
{
	struct asyncpool_shared *sp = open_pool();
	struct asyncpool *pool = asyncpool_shared_pool(sp);
	struct egress *e = calloc(1, sizeof(*e));
	unsigned conns = 0;
	bool stop = false, waiting = false;
	int rc;

	if (!e)
		die("calloc", ENOMEM);
	e->ctl = ctl;
	for (unsigned c = 0; c < MAX_CONNS; c++)
		e->conns[c].fd = -1;
	rc = io_uring_queue_init(256, &e->ring, 0);
	if (rc)
		return rc == -EPERM || rc == -ENOSYS ? 77 : 1;
	e->ch = open_end(pool, CH_OUT, ASYNCPOOL_CHANNEL_RECV);
	while (!egress_done(e, stop, conns)) {
		struct asyncpool_channel_item items[32];
		struct io_uring_cqe *cqe;
		unsigned head, seen = 0;
		int n;

		/* Take what the channel has; when it has nothing, wait for it
		 * on the ring, beside the sends' completions. */
		while ((n = asyncpool_channel_recv_items(e->ch, items, 32)) > 0)
			for (int i = 0; i < n; i++)
				egress_item(e, &items[i], &stop, &conns);
		if (n != -EAGAIN)
			die("asyncpool_channel_recv_items", n);
		if (egress_done(e, stop, conns))
			break;
		if (!waiting) {
			struct io_uring_sqe *sqe = get_sqe(&e->ring);

			if ((rc = asyncpool_channel_prep_wait(e->ch, sqe)))
				die("asyncpool_channel_prep_wait", rc);
			sqe->user_data = UD(OP_WAIT, 0);
			waiting = true;
		}
		io_uring_submit_and_wait(&e->ring, 1);
		io_uring_for_each_cqe(&e->ring, head, cqe) {
			unsigned op = (unsigned)(cqe->user_data >> 32);

			if (op == OP_WAIT)
				waiting = false;
			else if (op == OP_SEND)
				egress_send_done(e, (uint32_t)cqe->user_data, cqe);
			seen++;
		}
		io_uring_cq_advance(&e->ring, seen);
	}
	if (waiting) {
		struct io_uring_cqe *cqe;

		io_uring_prep_cancel64(get_sqe(&e->ring), UD(OP_WAIT, 0), 0);
		io_uring_submit(&e->ring);
		while (waiting && io_uring_wait_cqe(&e->ring, &cqe) == 0) {
			if (cqe->user_data == UD(OP_WAIT, 0))
				waiting = false;
			io_uring_cqe_seen(&e->ring, cqe);
		}
	}
	printf("egress: %llu items, %llu bytes sent, %llu duplicates\n",
	       (unsigned long long)e->items, (unsigned long long)e->bytes,
	       (unsigned long long)e->duplicates);
	fflush(stdout);
	asyncpool_channel_close(e->ch);
	asyncpool_shared_close(sp);
	io_uring_queue_exit(&e->ring);
	free(e);
	return 0;
}

/* ---- the same over Unix sockets (-u): a copy in and out at each hop ---- */

struct frame {
	uint64_t tag;
	uint32_t len;
	uint32_t pad;
};

static int read_full(int fd, void *p, size_t n)
{
	for (size_t got = 0; got < n;) {
		ssize_t r = read(fd, (char *)p + got, n - got);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		got += (size_t)r;
	}
	return 0;
}

static void write_full(int fd, const void *p, size_t n)
{
	for (size_t done = 0; done < n;) {
		ssize_t r = send(fd, (const char *)p + done, n - done, MSG_NOSIGNAL);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			if (errno == EPIPE || errno == ECONNRESET)
				return;         /* the client went away */
			die("send", errno);
		}
		done += (size_t)r;
	}
}

static void put_frame(int fd, uint64_t tag, const void *data, uint32_t len)
{
	struct frame f = { tag, len, 0 };

	write_full(fd, &f, sizeof(f));
	if (len)
		write_full(fd, data, len);
}

static int u_ingest(int listen_fd, int ctl, int out)
{
	static unsigned char buf[BUFFER_SIZE];
	struct pollfd pfd[MAX_CONNS + 1];
	int fds[MAX_CONNS];
	uint64_t seq[MAX_CONNS] = { 0 };
	unsigned accepted = 0, ended = 0;

	while (ended < limit) {
		unsigned n = 0;

		pfd[n++] = (struct pollfd){ accepted < limit ? listen_fd : -1, POLLIN, 0 };
		for (unsigned c = 0; c < accepted; c++)
			pfd[n++] = (struct pollfd){ fds[c], POLLIN, 0 };
		if (poll(pfd, n, -1) < 0) {
			if (errno == EINTR)
				continue;
			die("poll", errno);
		}
		if (pfd[0].revents & POLLIN) {
			int fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC);

			if (fd < 0)
				die("accept", errno);
			send_fd(ctl, accepted, fd);
			fds[accepted++] = fd;
		}
		for (unsigned c = 0; c + 1 < n; c++) {
			ssize_t r;

			if (!(pfd[c + 1].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			r = recv(fds[c], buf, sizeof(buf), 0);
			if (r > 0) {
				put_frame(out, TAG(KIND_DATA, c, seq[c]++), buf, (uint32_t)r);
			} else if (r == 0 || errno == ECONNRESET) {
				put_frame(out, TAG(KIND_EOF, c, seq[c]++), NULL, 0);
				close(fds[c]);
				fds[c] = -1;
				ended++;
			} else if (errno != EINTR && errno != EAGAIN) {
				die("recv", errno);
			}
		}
	}
	put_frame(out, TAG(KIND_STOP, 0, accepted), NULL, 0);
	return 0;
}

static int u_worker(int in, int out)
{
	static unsigned char buf[BUFFER_SIZE];
	struct frame f;

	while (read_full(in, &f, sizeof(f)) == 0) {
		if (f.len > sizeof(buf) || read_full(in, buf, f.len))
			die("a frame from ingest", EPROTO);
		to_upper(buf, f.len);
		put_frame(out, f.tag, buf, f.len);
		if (TAG_KIND(f.tag) == KIND_STOP)
			break;
	}
	return 0;
}

static int u_egress(int ctl, int in)
{
	static unsigned char buf[BUFFER_SIZE];
	int fds[MAX_CONNS];
	uint64_t items = 0, bytes = 0;
	struct frame f;

	for (unsigned c = 0; c < MAX_CONNS; c++)
		fds[c] = -1;
	while (read_full(in, &f, sizeof(f)) == 0) {
		unsigned c = TAG_CONN(f.tag);

		if (f.len > sizeof(buf) || read_full(in, buf, f.len))
			die("a frame from the worker", EPROTO);
		items++;
		if (TAG_KIND(f.tag) == KIND_STOP)
			break;
		if (c >= MAX_CONNS)
			die("a frame of no connection", EPROTO);
		while (fds[c] < 0) {
			uint32_t k;
			int fd;

			if (recv_fd(ctl, &k, &fd))
				die("a connection from ingest", EPROTO);
			fds[k] = fd;
		}
		if (TAG_KIND(f.tag) == KIND_EOF) {
			shutdown(fds[c], SHUT_WR);
			close(fds[c]);
			continue;
		}
		write_full(fds[c], buf, f.len);
		bytes += f.len;
	}
	printf("egress: %llu items, %llu bytes sent, 0 duplicates\n",
	       (unsigned long long)items, (unsigned long long)bytes);
	fflush(stdout);
	return 0;
}

/* ---- the parent ---- */

static int fds_[7];             /* listen, ctl[2], a[2], b[2] */
static bool unix_mode;

/* Fork a stage: it keeps the fds_ of mask (bit i: fds_[i]), closes the rest. */
static pid_t start(int (*fn)(void), unsigned mask)
{
	pid_t pid = fork();

	if (pid < 0)
		die("fork", errno);
	if (pid == 0) {
		sigset_t none;

		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		for (unsigned i = 0; i < 7; i++)
			if (!(mask & (1u << i)) && fds_[i] >= 0)
				close(fds_[i]);
		_exit(fn());
	}
	return pid;
}

static int run_ingest(void)
{
	return unix_mode ? u_ingest(fds_[0], fds_[1], fds_[3]) : ingest(fds_[0], fds_[1]);
}

static int run_worker(void)
{
	return unix_mode ? u_worker(fds_[4], fds_[5]) : worker();
}

static int run_egress(void)
{
	return unix_mode ? u_egress(fds_[2], fds_[6]) : egress(fds_[2]);
}

static int listen_on(unsigned short port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(fd, (struct sockaddr *)&a, sizeof(a)) || listen(fd, 64) ||
	    getsockname(fd, (struct sockaddr *)&a, &len))
		die("listen", errno);
	printf("listening on 127.0.0.1:%u\n", ntohs(a.sin_port));
	fflush(stdout);
	return fd;
}

static const char *usage =
	"usage: pipeline [-p PORT] [-n CONNECTIONS] [-q QUARANTINE_MS] [-d USEC] [-z y|n|a] [-u]\n";

int main(int argc, char **argv)
{
	struct asyncpool_shared *sp = NULL;
	struct asyncpool *pool = NULL;
	unsigned short port = 0;
	pid_t in_pid, out_pid, w_pid;
	int in_rc = -1, out_rc = -1, opt, rc, restarts = 0;
	unsigned reclaim_rounds = 0;
	sigset_t chld;

	limit = MAX_CONNS;
	while ((opt = getopt(argc, argv, "p:n:q:d:z:uh")) != -1) {
		switch (opt) {
		case 'p': port = (unsigned short)strtoul(optarg, NULL, 10); break;
		case 'n': limit = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'q': quarantine_ms = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'd': worker_delay_us = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'z':
			zc_mode = optarg[0];
			if ((zc_mode != 'y' && zc_mode != 'n' && zc_mode != 'a') || optarg[1]) {
				fputs(usage, stderr);
				return 1;
			}
			break;
		case 'u': unix_mode = true; break;
		default: fputs(usage, opt == 'h' ? stdout : stderr); return opt == 'h' ? 0 : 1;
		}
	}
	if (limit == 0 || limit > MAX_CONNS) {
		fprintf(stderr, "pipeline: -n takes 1 to %u\n", MAX_CONNS);
		return 1;
	}
	signal(SIGPIPE, SIG_IGN);
	if (!unix_mode) {
		struct asyncpool_shared_options o;

		memset(&o, 0, sizeof(o));
		o.size = sizeof(o);
		o.buffer_size = BUFFER_SIZE;
		o.buffer_count = BUFFER_COUNT;
		o.channels = 2;
		o.channel_capacity = BUFFER_COUNT;
		if ((rc = asyncpool_shared_create(&o, &sp)))
			die("asyncpool_shared_create", rc);
		pool = asyncpool_shared_pool(sp);
		pool_fd = asyncpool_shared_fd(sp);
		/* The parent reclaims what a dead worker held, after this. */
		asyncpool_set_quarantine(pool, quarantine_ms);
	}
	fds_[0] = listen_on(port);
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, &fds_[1]) ||
	    socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, &fds_[3]) ||
	    socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, &fds_[5]))
		die("socketpair", errno);
	/* ctl: ingest 1 -> egress 2; a: ingest 3 -> worker 4; b: worker 5 -> egress 6 */
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	sigprocmask(SIG_BLOCK, &chld, NULL);
	out_pid = start(run_egress, 1u << 2 | 1u << 6);
	in_pid = start(run_ingest, 1u << 0 | 1u << 1 | 1u << 3);
	w_pid = start(run_worker, 1u << 4 | 1u << 5);
	printf("worker pid %d\n", (int)w_pid);
	fflush(stdout);
	for (int i = 0; i < 7; i++) {
		close(fds_[i]);
		fds_[i] = -1;
	}
	while (in_rc < 0 || out_rc < 0) {
		struct timespec slice = { 0, 20 * 1000 * 1000 };
		pid_t pid;
		int st;

		sigtimedwait(&chld, NULL, &slice);
		/* Reclaim only while a dead worker's items may be waiting out
		 * their quarantine: a reclaim looks at every attachment. */
		if (pool && reclaim_rounds) {
			asyncpool_reclaim(pool);
			reclaim_rounds--;
		}
		while ((pid = waitpid(-1, &st, WNOHANG)) > 0) {
			int code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);

			if (pid == in_pid) {
				in_rc = code;
			} else if (pid == out_pid) {
				out_rc = code;
			} else if (pid == w_pid) {
				if (unix_mode || (in_rc >= 0 && out_rc >= 0)) {
					fprintf(stderr, "pipeline: worker exited (%d)\n", code);
					w_pid = -1;
					continue;
				}
				w_pid = start(run_worker, 0);
				restarts++;
				/* The quarantine and a second more, in 20 ms slices. */
				reclaim_rounds = (quarantine_ms + 1000) / 20;
				printf("worker died (status %d), restarted: worker pid %d\n", code,
				       (int)w_pid);
				fflush(stdout);
			}
		}
		if ((in_rc > 0 || out_rc > 0) && (in_rc < 0 || out_rc < 0)) {
			/* A stage failed: end the others. */
			if (in_rc < 0)
				kill(in_pid, SIGTERM);
			if (out_rc < 0)
				kill(out_pid, SIGTERM);
		}
	}
	if (w_pid > 0) {
		kill(w_pid, SIGTERM);
		waitpid(w_pid, NULL, 0);
	}
	if (in_rc == 77 || out_rc == 77) {
		fprintf(stderr, "pipeline: io_uring is not available here\n");
		return 77;
	}
	printf("served %u connections, %d worker restarts\n", limit, restarts);
	rc = in_rc || out_rc;
	if (pool) {
		size_t back = 0;

		/* What the ended worker held (nothing) and its ends: reclaimed. */
		for (int i = 0; i < 500 && (back = asyncpool_available(pool)) < BUFFER_COUNT; i++) {
			asyncpool_reclaim(pool);
			usleep(10000);
		}
		{
			struct asyncpool_channel_stats cs;

			memset(&cs, 0, sizeof(cs));
			cs.size = sizeof(cs);
			if (asyncpool_channel_stats(pool, CH_IN, &cs) == 0)
				printf("channel 0: %llu items redelivered after a worker died\n",
				       (unsigned long long)cs.redelivered);
		}
		printf("every buffer back: %zu of %u free\n", back, BUFFER_COUNT);
		if (back != BUFFER_COUNT)
			rc = 1;
		asyncpool_shared_close(sp);
	}
	fflush(stdout);
	return rc;
}
