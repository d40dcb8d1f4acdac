/* SPDX-License-Identifier: MIT */
/*
 * echo-server-epoll: a TCP echo server without io_uring, on epoll and the
 * socket backend of libasyncpool (MSG_ZEROCOPY), for where io_uring is
 * refused: the seccomp profile of a container runtime (Docker's default
 * since 25, containerd 2.0), kernel.io_uring_disabled.
 *
 *   echo-server-epoll [-p PORT] [-n CONNECTIONS] [-b BUFFERS] [-z]
 *
 * listens on 127.0.0.1:PORT (0, the default, picks a free port), prints
 * the backend it found and "listening on 127.0.0.1:PORT", and echoes
 * every byte it receives.  With -n it exits after serving that many
 * connections; SIGINT and SIGTERM stop it too.  -b sets the buffers of
 * the pool (64 by default), -z keeps MSG_ZEROCOPY however often the
 * kernel copies (ASYNCPOOL_ZC_NO_FALLBACK: over loopback it always
 * does, and by default the backend then sends by copying).  Try it with
 *
 *   ./echo-server-epoll -p 7777 &
 *   socat - TCP:127.0.0.1:7777
 *
 * examples/echo-server.c is the same server on io_uring; it exits 77
 * where io_uring is refused, and this one serves there.  What it shows:
 *
 *   - asyncpool_backend_probe(3): MSG_ZEROCOPY where the kernel has it,
 *     copying sends of the same backend where it does not;
 *   - one pool of plain memory (a memory proactor: nothing to register);
 *     a connection receives into a lease (asyncpool_zc_recv(3)) and
 *     sends that same lease back (asyncpool_zc_send(3)): no copy in
 *     user space;
 *   - non-blocking sends: a short send keeps the lease (send the rest
 *     on EPOLLOUT), -EAGAIN waits for EPOLLOUT, -ENOBUFS (the kernel's
 *     notifications are full) waits for EPOLLERR; a lease sent whole is
 *     the backend's until the kernel is done with its pages;
 *   - asyncpool_zc_reap(3) on EPOLLERR: the leases the kernel is done
 *     with go back to the pool;
 *   - asyncpool_wait_fd(3) in the epoll set while the pool is dry;
 *   - the close sequence: EPOLL_CTL_DEL, shutdown(SHUT_WR), close(2),
 *     then asyncpool_zc_close(3), and a list of the sockets whose sends
 *     are still in flight (-EBUSY), closed again on each turn of the loop
 *     and reset if their peer never acknowledges.
 *
 * Build:  cc -O2 -o echo-server-epoll echo-server-epoll.c \
 *             $(pkg-config --cflags --libs libasyncpool)
 *
 * Exit status: 0 when every buffer came back and everything was torn
 * down, 1 on an error, 2 on a bad option.
 */
#define _GNU_SOURCE             /* accept4(2) */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <asyncpool.h>

#define BUF_SIZE  65536         /* bytes per buffer: MSG_ZEROCOPY pays above about 10 KB */
#define BUFS      64            /* buffers in the pool by default: 4 MiB */
#define MAX_CONNS 64
#define QUEUE     8             /* leases a connection holds: received, not yet sent whole */
#define GRACE_NS  (10ll * 1000000000) /* then a peer that does not acknowledge is reset */
#define MAX_CLOSING 256

/*
 * The epoll tags: a connection's is its slot and, above, the slot's
 * generation, so that an event of a socket closed earlier in the same
 * batch does not reach the next connection of its slot.
 */
#define TAG_LISTEN  UINT64_MAX
#define TAG_WAIT_FD (UINT64_MAX - 1)

struct conn {
	int fd;                         /* -1: slot free */
	uint32_t gen;                   /* connections the slot has had */
	struct asyncpool_zc *zs;        /* the backend on fd */
	uint32_t events;                /* what epoll watches for it now */
	bool peer_done;                 /* the peer sent its last byte */
	bool blocked;                   /* a send said -EAGAIN: wait for EPOLLOUT */
	bool nobufs;                    /* a send said -ENOBUFS: wait for EPOLLERR */
	bool dry;                       /* the pool was empty: wait for the wait fd */
	unsigned head, count;           /* the queue of leases to send back */
	size_t sent;                    /* bytes of the head lease already sent */
	struct asyncpool_lease q[QUEUE];
};

/* A socket closed by us whose sends the kernel still holds. */
struct closing {
	struct asyncpool_zc *zs;
	int64_t since;
};

static struct conn conn[MAX_CONNS];
static struct closing closing[MAX_CLOSING];
static unsigned nclosing, nconns, accepted, limit, ndry;
static struct asyncpool *pool;
static int ep, listen_fd, wait_fd;
static uint32_t zc_flags;               /* of asyncpool_zc_open() */
static volatile sig_atomic_t stop;

static struct {
	unsigned long long bytes, shorts, eagain, enobufs, dry, busy, resets;
	unsigned long long sends, copy_sends, copied, fell_back;
} total;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Watch fd for events (0: only EPOLLERR and EPOLLHUP, which epoll always reports). */
static void watch(int op, int fd, uint64_t tag, uint32_t events)
{
	struct epoll_event e = { .events = events, .data.u64 = tag };

	if (epoll_ctl(ep, op, fd, &e))
		perror("echo-server-epoll: epoll_ctl");
}

/* A connection's epoll tag: its slot, and the slot's generation above. */
static uint64_t tag_of(unsigned c)
{
	return (uint64_t)conn[c].gen << 32 | c;
}

/*
 * asyncpool_zc_close(zs, 0): 0 when it freed zs (every send of it was
 * complete; its counters go to the totals), -EBUSY while sends are in
 * flight (zs is still valid: try again later).
 */
static int zc_finish(struct asyncpool_zc *zs)
{
	struct asyncpool_zc_stats st = { .size = sizeof(st) };
	int rc;

	asyncpool_zc_reap(zs);                  /* the counters of what is reported now */
	asyncpool_zc_stats(zs, &st);
	rc = asyncpool_zc_close(zs, 0);
	if (rc == 0) {
		total.sends += st.sends;
		total.copy_sends += st.copy_sends;
		total.copied += st.copied;
		total.fell_back += !!(st.flags & ASYNCPOOL_ZC_FELL_BACK);
	}
	return rc;
}

/*
 * The close sequence of a socket with the backend, which holds a
 * duplicate of its descriptor:
 *   1. EPOLL_CTL_DEL first: epoll watches the socket, not the number, so
 *      after close(2) it would go on reporting a descriptor we no longer
 *      own (the duplicate keeps the socket open);
 *   2. shutdown(SHUT_WR) sends the end of the stream: close(2) does not,
 *      while the duplicate is open;
 *   3. close(2) our descriptor;
 *   4. asyncpool_zc_close() frees the backend once the kernel reported
 *      every send complete; -EBUSY while the peer has not acknowledged
 *      them: keep it in the closing list and try again later.
 */
static void close_conn(unsigned c)
{
	struct conn *k = &conn[c];

	/* Leases we still hold (an error cut the echo short): a lease that
	 * went into a send is the backend's to give back. */
	for (; k->count; k->count--, k->head = (k->head + 1) % QUEUE)
		asyncpool_zc_release(k->zs, &k->q[k->head]);
	if (k->dry)
		ndry--;
	watch(EPOLL_CTL_DEL, k->fd, tag_of(c), 0);
	shutdown(k->fd, SHUT_WR);
	close(k->fd);
	k->fd = -1;
	nconns--;
	if (zc_finish(k->zs) != 0) {
		total.busy++;
		if (nclosing == MAX_CLOSING) {  /* no room to wait: wait here */
			if (asyncpool_zc_close(k->zs, GRACE_NS))
				fprintf(stderr, "echo-server-epoll: a socket's sends never completed\n");
		} else {
			closing[nclosing++] = (struct closing){ k->zs, now_ns() };
		}
	}
	k->zs = NULL;
}

/* Try the closing list again; reset a peer that kept us waiting too long. */
static void reap_closing(void)
{
	for (unsigned i = 0; i < nclosing;) {
		struct closing *z = &closing[i];

		if (zc_finish(z->zs) == 0) {
			*z = closing[--nclosing];
			continue;
		}
		if (now_ns() - z->since > GRACE_NS) {
			/* A reset frees the socket's queue and completes its
			 * sends: connect(2) to AF_UNSPEC on the backend's
			 * descriptor (ours is closed) disconnects with one. */
			struct sockaddr sa = { .sa_family = AF_UNSPEC };

			connect(asyncpool_zc_fd(z->zs), &sa, sizeof(sa));
			z->since = now_ns();
			total.resets++;
		}
		i++;
	}
}

/* Send what c holds, each lease whole or as far as the socket takes. */
static int flush(struct conn *k)
{
	k->blocked = false;
	while (k->count && !k->nobufs) {
		struct asyncpool_lease *l = &k->q[k->head];
		size_t len = l->span.length - k->sent;
		int n = asyncpool_zc_send(k->zs, l, k->sent, len, MSG_DONTWAIT, 0);

		if (n > 0)
			total.bytes += (unsigned)n;
		if (n == (int)len) {            /* sent whole: handed over, *l cleared */
			k->head = (k->head + 1) % QUEUE;
			k->count--;
			k->sent = 0;
		} else if (n > 0) {             /* short: the lease is still ours */
			k->sent += (size_t)n;
			total.shorts++;
		} else if (n == -EAGAIN) {      /* the socket buffer is full */
			k->blocked = true;
			total.eagain++;
			break;
		} else if (n == -ENOBUFS) {     /* notifications full: reap first */
			k->nobufs = true;
			total.enobufs++;
			break;
		} else {
			return n;               /* the peer is gone */
		}
	}
	return 0;
}

/* Receive into leases while c has room and the pool has buffers. */
static int fill(struct conn *k)
{
	while (!k->peer_done && k->count < QUEUE) {
		int n = asyncpool_zc_recv(pool, k->fd, MSG_DONTWAIT,
					  &k->q[(k->head + k->count) % QUEUE]);

		if (n > 0) {
			k->count++;
		} else if (n == 0) {
			k->peer_done = true;
		} else if (n == -EAGAIN) {
			break;
		} else if (n == -ENOBUFS) {     /* the pool is dry: the wait fd wakes us */
			if (!k->dry)
				ndry++;
			k->dry = true;
			total.dry++;
			break;
		} else {
			return n;
		}
	}
	return 0;
}

/* EPOLLERR: completions to reap, or an error of the connection. */
static int on_error(struct conn *k)
{
	int err = 0, rc = asyncpool_zc_reap(k->zs);
	socklen_t len = sizeof(err);

	if (rc < 0)
		return rc;
	k->nobufs = false;
	/* A reset raises EPOLLERR with nothing to reap: SO_ERROR says so. */
	getsockopt(k->fd, SOL_SOCKET, SO_ERROR, &err, &len);
	return -err;
}

/* After each event of c: close it when it is done, else watch what it waits for. */
static void update(unsigned c)
{
	struct conn *k = &conn[c];
	uint32_t want = 0;

	if (k->peer_done && k->count == 0) {
		close_conn(c);
		return;
	}
	if (!k->peer_done && k->count < QUEUE && !k->dry)
		want |= EPOLLIN;
	if (k->blocked)
		want |= EPOLLOUT;
	if (want != k->events) {
		watch(EPOLL_CTL_MOD, k->fd, tag_of(c), want);
		k->events = want;
	}
}

static void on_conn(unsigned c, uint32_t ev)
{
	struct conn *k = &conn[c];
	int rc = 0;

	if (ev & EPOLLERR)
		rc = on_error(k);
	if (!rc && (ev & EPOLLHUP))
		rc = -EPIPE;                    /* shut both ways: nothing more to send */
	if (!rc && (ev & EPOLLIN))
		rc = fill(k);
	if (!rc)
		rc = flush(k);
	if (rc) {
		if (rc != -ECONNRESET && rc != -EPIPE)
			fprintf(stderr, "echo-server-epoll: connection: %s\n", strerror(-rc));
		close_conn(c);
		return;
	}
	update(c);
}

static void on_accept(void)
{
	struct asyncpool_zc_options o = { .size = sizeof(o), .flags = zc_flags };
	int fd;

	while ((fd = accept4(listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
		unsigned c;
		int rc;

		for (c = 0; c < MAX_CONNS && conn[c].fd >= 0; c++)
			;
		if (c == MAX_CONNS || stop || (limit && accepted == limit)) {
			close(fd);
			continue;
		}
		rc = asyncpool_zc_open(fd, &o, &conn[c].zs);
		if (rc == -EOPNOTSUPP || rc == -EBUSY) {
			/* No SO_ZEROCOPY on this socket (Linux 4.14 takes it
			 * only before connect): copying sends, same calls. */
			struct asyncpool_zc_options copy = { .size = sizeof(copy),
							     .flags = ASYNCPOOL_ZC_COPY };

			rc = asyncpool_zc_open(fd, &copy, &conn[c].zs);
		}
		if (rc) {
			fprintf(stderr, "echo-server-epoll: asyncpool_zc_open: %s\n", strerror(-rc));
			close(fd);
			continue;
		}
		conn[c].fd = fd;
		conn[c].gen++;
		conn[c].events = EPOLLIN;
		conn[c].head = conn[c].count = 0;
		conn[c].sent = 0;
		conn[c].peer_done = conn[c].blocked = conn[c].nobufs = conn[c].dry = false;
		watch(EPOLL_CTL_ADD, fd, tag_of(c), EPOLLIN);
		nconns++;
		accepted++;
	}
}

/* The wait fd is readable: a buffer may be back.  Read it, let the dry connections read. */
static void on_wait_fd(void)
{
	uint64_t v;

	if (read(wait_fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		perror("echo-server-epoll: read wait fd");
	for (unsigned c = 0; c < MAX_CONNS; c++)
		if (conn[c].fd >= 0 && conn[c].dry) {
			conn[c].dry = false;
			ndry--;
			on_conn(c, EPOLLIN);
		}
}

static int listen_on(int *port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)*port) };
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), one = 1;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(fd, (struct sockaddr *)&a, sizeof(a)) || listen(fd, 128) ||
	    getsockname(fd, (struct sockaddr *)&a, &len))
		return -1;
	*port = ntohs(a.sin_port);
	return fd;
}

/* The backend this process can use, said on stdout; the flags of asyncpool_zc_open(). */
static uint32_t choose_backend(bool keep_zerocopy)
{
	struct asyncpool_backend_info bi = { .size = sizeof(bi) };
	char uring[96];

	if (asyncpool_backend_probe(&bi) != 0)
		bi.backends = ASYNCPOOL_BACKEND_MEMORY;
	if (bi.backends & ASYNCPOOL_BACKEND_URING)
		snprintf(uring, sizeof(uring), "works here: examples/echo-server is the io_uring server");
	else if (bi.uring_error == 0)
		snprintf(uring, sizeof(uring), "is not in this build of libasyncpool");
	else
		snprintf(uring, sizeof(uring), "refused (%s)", strerror(-bi.uring_error));
	if (!(bi.backends & ASYNCPOOL_BACKEND_ZEROCOPY_TCP)) {
		printf("backend: copying sends, no MSG_ZEROCOPY on TCP (%s); io_uring %s\n",
		       strerror(-bi.zerocopy_error), uring);
		return ASYNCPOOL_ZC_COPY;
	}
	printf("backend: MSG_ZEROCOPY sockets%s; io_uring %s\n",
	       keep_zerocopy ? ", never falling back to copying" : "", uring);
	return keep_zerocopy ? ASYNCPOOL_ZC_NO_FALLBACK : 0;
}

static int setup(uint32_t bufs, struct asyncpool_proactor **p)
{
	struct asyncpool_slab_options so = { .size = sizeof(so), .buffer_size = BUF_SIZE,
					     .buffer_count = bufs, .numa_node = -1,
					     .flags = ASYNCPOOL_SLAB_POPULATE };
	struct asyncpool_slab *slab;
	struct asyncpool_region *r;
	int rc;

	/* Plain memory: a socket backend has nothing to register. */
	if ((rc = asyncpool_proactor_create_memory(p)) || (rc = asyncpool_slab_create(&so, &slab)))
		return rc;
	rc = asyncpool_proactor_register_slab(*p, slab, ASYNCPOOL_ACCESS_READ, &r);
	asyncpool_slab_unref(slab);             /* the region holds it */
	if (rc)
		return rc;
	rc = asyncpool_create(r, &pool);
	asyncpool_region_unref(r);              /* the pool holds it */
	if (rc)
		return rc;
	/* Created now (it starts a thread), watched only while a connection is dry. */
	wait_fd = asyncpool_wait_fd(pool);
	return wait_fd < 0 ? wait_fd : 0;
}

int main(int argc, char **argv)
{
	struct asyncpool_proactor *p = NULL;
	struct epoll_event ev[64];
	uint32_t bufs = BUFS;
	bool keep_zerocopy = false, wait_watched = false, listening = true;
	int port = 0, opt, rc, bad = 0;
	int64_t stopped = 0;

	while ((opt = getopt(argc, argv, "p:n:b:z")) != -1) {
		if (opt == 'p')
			port = atoi(optarg);
		else if (opt == 'n')
			limit = (unsigned)atoi(optarg);
		else if (opt == 'b')
			bufs = (uint32_t)atoi(optarg);
		else if (opt == 'z')
			keep_zerocopy = true;
		else
			return 2;
	}
	if (bufs < 1 || bufs > 65536)
		return 2;
	signal(SIGPIPE, SIG_IGN);
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	for (unsigned c = 0; c < MAX_CONNS; c++)
		conn[c].fd = -1;
	zc_flags = choose_backend(keep_zerocopy);
	listen_fd = listen_on(&port);
	ep = epoll_create1(EPOLL_CLOEXEC);
	if (listen_fd < 0 || ep < 0) {
		perror("echo-server-epoll: listen");
		return 1;
	}
	if ((rc = setup(bufs, &p))) {
		fprintf(stderr, "echo-server-epoll: setup: %s\n", strerror(-rc));
		bad = 1;
		goto out;
	}
	watch(EPOLL_CTL_ADD, listen_fd, TAG_LISTEN, EPOLLIN);
	watch(EPOLL_CTL_ADD, wait_fd, TAG_WAIT_FD, 0);
	printf("listening on 127.0.0.1:%d\n", port);
	fflush(stdout);

	/* Until told to stop or every connection asked for is served, then
	 * until every socket is closed and every lease is back. */
	while (listening || nconns || nclosing) {
		/* Closing sockets are tried again every 10 ms; otherwise the
		 * loop sleeps until an event (a second at most: SIGINT). */
		int n = epoll_wait(ep, ev, 64, nclosing ? 10 : 1000);

		for (int i = 0; i < n; i++) {
			uint64_t tag = ev[i].data.u64;

			if (tag == TAG_LISTEN)
				on_accept();
			else if (tag == TAG_WAIT_FD)
				on_wait_fd();
			else if (conn[(uint32_t)tag].fd >= 0 && tag == tag_of((uint32_t)tag))
				on_conn((uint32_t)tag, ev[i].events);
		}
		reap_closing();
		if (listening && (stop || (limit && accepted == limit))) {
			watch(EPOLL_CTL_DEL, listen_fd, TAG_LISTEN, 0);
			listening = false;
		}
		if (stop && !stopped)
			stopped = now_ns();
		/* Stopping: read no more, send what was read; after the grace
		 * period, close the connections whose peers do not read. */
		for (unsigned c = 0; stopped && c < MAX_CONNS; c++)
			if (conn[c].fd >= 0 && now_ns() - stopped > GRACE_NS)
				close_conn(c);
			else if (conn[c].fd >= 0)
				shutdown(conn[c].fd, SHUT_RD);
		if ((ndry > 0) != wait_watched) {
			wait_watched = ndry > 0;
			watch(EPOLL_CTL_MOD, wait_fd, TAG_WAIT_FD, wait_watched ? EPOLLIN : 0);
		}
	}
	printf("served %u connections: %llu bytes echoed; %llu MSG_ZEROCOPY sends, all "
	       "complete (%llu reported copied by the kernel), %llu copying sends\n",
	       accepted, total.bytes, total.sends, total.copied, total.copy_sends);
	printf("short sends %llu, -EAGAIN %llu, -ENOBUFS %llu, pool dry %llu, "
	       "closes that waited for the kernel (-EBUSY) %llu, resets %llu, "
	       "sockets that fell back to copying %llu\n",
	       total.shorts, total.eagain, total.enobufs, total.dry, total.busy, total.resets,
	       total.fell_back);
	if (asyncpool_available(pool) != asyncpool_capacity(pool)) {
		fprintf(stderr, "echo-server-epoll: %zu of %zu buffers are back\n",
			asyncpool_available(pool), asyncpool_capacity(pool));
		bad = 1;
	} else {
		printf("every buffer back: %zu/%zu\n", asyncpool_available(pool),
		       asyncpool_capacity(pool));
	}

out:
	/* The pool (it stops the wait fd's thread and closes the fd), then
	 * the proactor (its region went with the pool). */
	if (pool && (rc = asyncpool_destroy(pool))) {
		fprintf(stderr, "echo-server-epoll: asyncpool_destroy: %s\n", strerror(-rc));
		bad = 1;
	}
	if (p && (rc = asyncpool_proactor_destroy(p))) {
		fprintf(stderr, "echo-server-epoll: asyncpool_proactor_destroy: %s\n", strerror(-rc));
		bad = 1;
	}
	close(ep);
	close(listen_fd);
	return bad;
}
