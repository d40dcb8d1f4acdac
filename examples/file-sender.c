/* SPDX-License-Identifier: MIT */
/*
 * file-sender: send a file to one TCP client with no copy in user space.
 *
 *   file-sender [-p PORT] FILE
 *
 * listens on 127.0.0.1:PORT (0, the default, picks a free port), prints
 * "listening on 127.0.0.1:PORT", sends FILE to the first client that
 * connects, and exits.  Try it with
 *
 *   ./file-sender -p 7778 /usr/share/common-licenses/GPL-3 &
 *   socat -u TCP:127.0.0.1:7778 - | cmp - /usr/share/common-licenses/GPL-3
 *
 * What it shows, beside echo-server.c:
 *
 *   - the bytes never pass through the program: the kernel reads the
 *     file into a pool buffer (IORING_OP_READ_FIXED) and sends it from
 *     there (IORING_OP_SEND_ZC), both with the buffer's fixed index;
 *   - linked requests: each read is linked to its send, and the sends of
 *     a window are linked one after the other, so that they leave in
 *     file order without the program waiting between them;
 *   - asyncpool_acquire_bulk(3): a whole window of buffers in one call,
 *     all or nothing;
 *   - one ring, one thread, a pool without caches.
 *
 * Build:  cc -O2 -o file-sender file-sender.c \
 *             $(pkg-config --cflags --libs libasyncpool liburing)
 *
 * Exit status: 0 when the whole file was sent and everything was torn
 * down, 1 on an error, 77 when io_uring is not available here.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <liburing.h>
#include <asyncpool.h>

#define CHUNK   65536           /* bytes per buffer */
#define BUFFERS 32              /* in the pool: 2 MiB pinned */
#define WINDOW  8               /* read+send pairs in one chain */

static int listen_on(int *port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)*port) };
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(fd, (struct sockaddr *)&a, sizeof(a)) || listen(fd, 1) ||
	    getsockname(fd, (struct sockaddr *)&a, &len))
		return -1;
	*port = ntohs(a.sin_port);
	return fd;
}

/*
 * Send size bytes of file from offset 0 to sock.  Buffers in flight are
 * in out[], by buffer index, until their send's notification.
 */
static int send_file(struct io_uring *ring, struct asyncpool *pool, int file, int sock,
		     off_t size)
{
	struct asyncpool_lease out[BUFFERS], win[WINDOW];
	off_t queued = 0;
	unsigned chain = 0, in_flight = 0;
	int err = 0;

	/* Until every request is done and the file is queued (or failed). */
	while (chain || in_flight || (queued < size && !err)) {
		struct io_uring_cqe *cqe;
		unsigned n = 0;

		/* The next window, when the last one is sent and the pool has
		 * the buffers.  A buffer comes back at its notification, which
		 * on loopback waits for the client to read. */
		if (!chain && queued < size && !err) {
			off_t left = (size - queued + CHUNK - 1) / CHUNK;

			n = left < WINDOW ? (unsigned)left : WINDOW;
			if (asyncpool_acquire_bulk(pool, win, n) != 0)
				n = 0;                  /* -ENOBUFS: wait for notifications */
		}
		for (unsigned i = 0; i < n; i++) {
			struct asyncpool_lease *l = &out[win[i].buffer_index];
			size_t len = size - queued < CHUNK ? (size_t)(size - queued) : CHUNK;
			int idx = asyncpool_region_fixed_index(win[i].span.region, win[i].buffer_index);
			struct io_uring_sqe *sqe;

			*l = win[i];
			/* read len bytes at queued into the buffer, then send them */
			sqe = io_uring_get_sqe(ring);
			io_uring_prep_read_fixed(sqe, file, asyncpool_span_ptr(l->span), (unsigned)len,
						 (uint64_t)queued, idx);
			sqe->flags |= IOSQE_IO_LINK;
			sqe->user_data = 0;     /* its completion says nothing new */
			sqe = io_uring_get_sqe(ring);
			io_uring_prep_send_zc_fixed(sqe, sock, asyncpool_span_ptr(l->span), len,
						    MSG_WAITALL, 0, (unsigned)idx);
			if (i + 1 < n)
				sqe->flags |= IOSQE_IO_LINK;
			sqe->user_data = 1 + (uint64_t)l->buffer_index;
			queued += (off_t)len;
		}
		if (!n && !in_flight)
			return -ENOBUFS;        /* nothing would ever come back */
		chain += n;
		in_flight += n;
		if (io_uring_submit_and_wait(ring, 1) < 0)
			return -EIO;
		while (io_uring_peek_cqe(ring, &cqe) == 0) {
			uint64_t ud = cqe->user_data;

			if (ud == 0) {                  /* a read */
				if (cqe->res < 0 && !err)
					err = cqe->res;
			} else if (cqe->flags & IORING_CQE_F_NOTIF) {
				/* the kernel is done with the buffer */
				asyncpool_lease_release(&out[ud - 1]);
				in_flight--;
			} else {                        /* a send */
				chain--;
				if (cqe->res < 0 && !err)
					err = cqe->res; /* -ECANCELED: its read failed */
				if (!(cqe->flags & IORING_CQE_F_MORE)) {
					asyncpool_lease_release(&out[ud - 1]);
					in_flight--;
				}
			}
			io_uring_cqe_seen(ring, cqe);
		}
	}
	return err;
}

int main(int argc, char **argv)
{
	struct asyncpool_slab_options so = { .size = sizeof(so), .buffer_size = CHUNK,
					     .buffer_count = BUFFERS, .numa_node = -1 };
	struct asyncpool_proactor *proactor = NULL;
	struct asyncpool_region *region;
	struct asyncpool_slab *slab;
	struct asyncpool *pool = NULL;
	struct io_uring ring;
	struct stat st;
	int port = 0, opt, lfd, sock = -1, file, rc, bad = 0;

	while ((opt = getopt(argc, argv, "p:")) != -1) {
		if (opt != 'p')
			return 2;
		port = atoi(optarg);
	}
	if (optind + 1 != argc) {
		fprintf(stderr, "usage: file-sender [-p PORT] FILE\n");
		return 2;
	}
	file = open(argv[optind], O_RDONLY | O_CLOEXEC);
	if (file < 0 || fstat(file, &st)) {
		perror(argv[optind]);
		return 1;
	}
	lfd = listen_on(&port);
	if (lfd < 0) {
		perror("file-sender: listen");
		return 1;
	}
	rc = io_uring_queue_init(2 * WINDOW + 8, &ring, 0);
	if (rc == -EPERM || rc == -ENOSYS) {
		fprintf(stderr, "file-sender: io_uring is not available: %s\n", strerror(-rc));
		return 77;
	}
	if (rc)
		goto out;

	/* The buffers: fixed buffers of the ring, a pool over them. */
	if ((rc = asyncpool_proactor_create_uring(&ring, 0, &proactor)) ||
	    (rc = asyncpool_slab_create(&so, &slab)))
		goto out;
	rc = asyncpool_proactor_register_slab(proactor, slab, ASYNCPOOL_ACCESS_READ, &region);
	asyncpool_slab_unref(slab);             /* the region holds it */
	if (rc)
		goto out;
	rc = asyncpool_create(region, &pool);
	asyncpool_region_unref(region);         /* the pool holds it */
	if (rc)
		goto out;

	printf("listening on 127.0.0.1:%d\n", port);
	fflush(stdout);
	sock = accept(lfd, NULL, NULL);
	if (sock < 0) {
		rc = -errno;
		goto out;
	}
	rc = send_file(&ring, pool, file, sock, st.st_size);
	if (rc == 0)
		printf("sent %lld bytes\n", (long long)st.st_size);

out:
	if (rc) {
		fprintf(stderr, "file-sender: %s\n", strerror(-rc));
		bad = 1;
	}
	if (sock >= 0)
		close(sock);
	/* Teardown: the pool (every buffer back), the proactor, the ring. */
	if (pool && asyncpool_destroy(pool))
		bad = 1;
	if (proactor && asyncpool_proactor_destroy(proactor))
		bad = 1;
	if (proactor)
		io_uring_queue_exit(&ring);
	close(lfd);
	close(file);
	return bad;
}
