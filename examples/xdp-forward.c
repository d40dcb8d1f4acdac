/* SPDX-License-Identifier: MIT */
/*
 * xdp-forward: frames received on one interface forwarded on another
 * with AF_XDP, through a pool, with no copy in the program.
 *
 *   xdp-forward IN OUT DST-MAC [COUNT [IDLE-MS]]
 *
 *   - One pool of 4096 frames of 2048 bytes (asyncpool_create(3)) is
 *     the UMEM (asyncpool_xdp_create(3)): frame i is buffer i.
 *   - One AF_XDP socket on queue 0 of IN, one on queue 0 of OUT, on the
 *     same UMEM (asyncpool_xsk_open(3)): zero-copy asked, copy mode
 *     where the driver has none (veth); each reports its mode.
 *   - The pool keeps each socket's fill ring full; a received frame is
 *     a lease of its frame (asyncpool_xsk_recv(3)): the program
 *     rewrites its Ethernet addresses in place (destination DST-MAC,
 *     source OUT's address) and hands the same lease to the other
 *     socket (asyncpool_xsk_send(3)).  The frame goes back to the pool
 *     when OUT's completion ring returns it (asyncpool_xsk_complete(3)).
 *
 * It stops after COUNT frames (0: no limit), after IDLE-MS milliseconds
 * without a frame (0: never), or on SIGINT or SIGTERM; then it closes
 * both sockets and checks that every frame is back in the pool.
 *
 * Build:  cc -O2 -o xdp-forward xdp-forward.c \
 *             $(pkg-config --cflags --libs libasyncpool)
 * Run as root (AF_XDP sockets and XDP programs need CAP_NET_RAW,
 * CAP_NET_ADMIN and CAP_BPF).
 *
 * Exit status: 0 when every frame came back, 1 otherwise.
 */
#include <errno.h>
#include <net/if.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <asyncpool.h>

#define FRAMES 4096u
#define FRAME_SIZE 2048u
#define BATCH 64u

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static int parse_mac(const char *s, uint8_t mac[6])
{
	unsigned int b[6];

	if (sscanf(s, "%x:%x:%x:%x:%x:%x", &b[0], &b[1], &b[2], &b[3], &b[4], &b[5]) != 6)
		return -1;
	for (int i = 0; i < 6; i++) {
		if (b[i] > 255)
			return -1;
		mac[i] = (uint8_t)b[i];
	}
	return 0;
}

static int if_mac(const char *ifname, uint8_t mac[6])
{
	struct ifreq ifr;
	int fd = socket(AF_INET, SOCK_DGRAM, 0), rc;

	if (fd < 0)
		return -1;
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", ifname);
	rc = ioctl(fd, SIOCGIFHWADDR, &ifr);
	if (!rc)
		memcpy(mac, ifr.ifr_hwaddr.sa_data, 6);
	close(fd);
	return rc;
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static int open_socket(struct asyncpool_xdp *x, const char *ifname, struct asyncpool_xsk **out)
{
	struct asyncpool_xsk_options o;
	struct asyncpool_xsk_stats st;
	int rc;

	memset(&o, 0, sizeof(o));
	o.size = sizeof(o);
	o.ifname = ifname;
	o.queue = 0;
	o.flags = ASYNCPOOL_XSK_ZEROCOPY;   /* ask; the kernel decides */
	rc = asyncpool_xsk_open(x, &o, out);
	if (rc) {
		fprintf(stderr, "xdp-forward: asyncpool_xsk_open(%s): %s\n", ifname, strerror(-rc));
		return rc;
	}
	memset(&st, 0, sizeof(st));
	st.size = sizeof(st);
	asyncpool_xsk_stats(*out, &st);
	printf("%s queue 0: %s mode", ifname,
	       st.mode == ASYNCPOOL_XSK_MODE_ZEROCOPY ? "zero-copy" : "copy");
	if (st.zerocopy_error)
		printf(" (zero-copy refused: %s)", strerror(-st.zerocopy_error));
	printf("\n");
	return 0;
}

int main(int argc, char **argv)
{
	struct asyncpool_proactor *p = NULL;
	struct asyncpool_slab_options so;
	struct asyncpool_slab *slab = NULL;
	struct asyncpool_region *r = NULL;
	struct asyncpool *pool = NULL;
	struct asyncpool_xdp *x = NULL;
	struct asyncpool_xsk *in = NULL, *out = NULL;
	unsigned long count = 0, idle_ms = 0, forwarded = 0;
	uint8_t dst[6], src[6];
	uint64_t last;
	int rc, status = 1;

	if (argc < 4 || argc > 6 || parse_mac(argv[3], dst)) {
		fprintf(stderr, "usage: xdp-forward IN OUT DST-MAC [COUNT [IDLE-MS]]\n");
		return 2;
	}
	if (argc > 4)
		count = strtoul(argv[4], NULL, 0);
	if (argc > 5)
		idle_ms = strtoul(argv[5], NULL, 0);
	if (if_mac(argv[2], src)) {
		fprintf(stderr, "xdp-forward: no interface %s\n", argv[2]);
		return 1;
	}
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);

	/* The pool: its buffers are the UMEM's frames. */
	memset(&so, 0, sizeof(so));
	so.size = sizeof(so);
	so.buffer_size = FRAME_SIZE;
	so.buffer_count = FRAMES;
	so.numa_node = -1;
	if ((rc = asyncpool_slab_create(&so, &slab)) ||
	    (rc = asyncpool_proactor_create_memory(&p)) ||
	    (rc = asyncpool_proactor_register_slab(p, slab, ASYNCPOOL_ACCESS_READ, &r)) ||
	    (rc = asyncpool_create(r, &pool)) ||
	    (rc = asyncpool_xdp_create(pool, NULL, &x))) {
		fprintf(stderr, "xdp-forward: the pool as a UMEM: %s\n", strerror(-rc));
		goto out;
	}
	if (open_socket(x, argv[1], &in) || open_socket(x, argv[2], &out))
		goto out;
	printf("ready\n");
	fflush(stdout);

	last = now_ms();
	while (!stop && (!count || forwarded < count)) {
		struct asyncpool_lease l[BATCH];
		int k = asyncpool_xsk_recv(in, l, BATCH);

		asyncpool_xsk_complete(out);
		if (k <= 0) {
			struct pollfd pfd = { .fd = asyncpool_xsk_fd(in), .events = POLLIN };

			if (idle_ms && now_ms() - last >= idle_ms)
				break;
			poll(&pfd, 1, 10);
			continue;
		}
		last = now_ms();
		for (int i = 0; i < k; i++) {
			/* The frame in place: no copy. */
			uint8_t *f = asyncpool_span_ptr(l[i].span);

			if (l[i].span.length >= 12) {
				memcpy(f, dst, 6);
				memcpy(f + 6, src, 6);
			}
		}
		/* The same leases to the other socket; a full tx ring takes some. */
		for (int sent = 0, tries = 0; sent < k; tries++) {
			int n = asyncpool_xsk_send(out, l + sent, (unsigned int)(k - sent));

			if (n < 0 || tries > 10000) {
				/* Not sendable or no room: give the rest back. */
				asyncpool_release_bulk(l + sent, (unsigned int)(k - sent));
				break;
			}
			sent += n;
			forwarded += (unsigned long)n;
			if (sent < k)
				asyncpool_xsk_complete(out);
		}
	}
	/* What is still in flight completes; then the sockets go. */
	for (int i = 0; i < 1000; i++) {
		struct asyncpool_xsk_stats st = { .size = sizeof(st) };

		asyncpool_xsk_complete(out);
		asyncpool_xsk_stats(out, &st);
		if (!st.in_tx)
			break;
		usleep(1000);
	}
	printf("forwarded %lu frames\n", forwarded);
	status = 0;
out:
	if (out)
		asyncpool_xsk_close(out);
	if (in)
		asyncpool_xsk_close(in);
	if (x)
		asyncpool_xdp_destroy(x);
	if (pool) {
		asyncpool_cache_flush_all(pool);
		printf("every frame back: %zu of %zu free\n", asyncpool_available(pool),
		       asyncpool_capacity(pool));
		if (asyncpool_available(pool) != asyncpool_capacity(pool))
			status = 1;
		asyncpool_destroy(pool);
	}
	if (r)
		asyncpool_region_unref(r);
	if (slab)
		asyncpool_slab_unref(slab);
	if (p)
		asyncpool_proactor_destroy(p);
	return status;
}
