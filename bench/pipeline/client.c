/* SPDX-License-Identifier: MIT */
/*
 * The client of bench/pipeline: one TCP connection to examples/pipeline
 * (channels, or -u: Unix sockets), in two ways.
 *
 *   client PORT sat MIB       a sender thread writes MIB MiB of digits
 *                             as fast as it can, the main thread reads
 *                             them back: MB/s from the first byte sent
 *                             to the last byte back
 *   client PORT paced RATE N  N messages of 64 bytes, RATE per second,
 *                             each carrying its send time: the round
 *                             trip of each, p50, p99 and max
 *
 * The pacing sleeps (clock_nanosleep to an absolute time): a spinning
 * client would take one of the machine's CPUs from the stages.
 *
 * Digits and newlines only: the pipeline's upper-casing leaves them as
 * they are, so every byte back is checked too.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MSG 64

static int fd;
static size_t total;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void write_all(const char *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			perror("write");
			exit(1);
		}
		p += w;
		n -= (size_t)w;
	}
}

static void *sender(void *arg)
{
	static char buf[65536];

	(void)arg;
	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (char)('0' + i % 10);
	for (size_t sent = 0; sent < total;) {
		size_t n = total - sent < sizeof(buf) ? total - sent : sizeof(buf);

		write_all(buf, n);
		sent += n;
	}
	shutdown(fd, SHUT_WR);
	return NULL;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	int one = 1;

	if (argc < 4) {
		fprintf(stderr, "usage: client PORT sat MIB | client PORT paced RATE N\n");
		return 2;
	}
	a.sin_port = htons((unsigned short)atoi(argv[1]));
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a))) {
		perror("connect");
		return 1;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (!strcmp(argv[2], "sat")) {
		static char buf[65536], want[2 * 65536];
		size_t got = 0, bad = 0;
		pthread_t t;
		uint64_t t0 = now_ns(), t1;

		total = (size_t)atol(argv[3]) << 20;
		for (size_t i = 0; i < sizeof(want); i++)
			want[i] = (char)('0' + i % 65536 % 10);
		pthread_create(&t, NULL, sender, NULL);
		for (;;) {
			ssize_t r = read(fd, buf, sizeof(buf));

			if (r <= 0)
				break;
			/* Checked with memcmp against the pattern: a byte
			 * loop here made the client the bottleneck. */
			if (memcmp(buf, want + got % 65536, (size_t)r))
				for (ssize_t i = 0; i < r; i++)
					bad += buf[i] != want[(got + (size_t)i) % 65536];
			got += (size_t)r;
		}
		t1 = now_ns();
		pthread_join(t, NULL);
		printf("saturated: %zu bytes back, %zu wrong, %.1f MB/s\n", got, bad,
		       (double)got / ((double)(t1 - t0) / 1e9) / 1e6);
		return got == total && !bad ? 0 : 1;
	}
	if (!strcmp(argv[2], "paced") && argc >= 5) {
		long rate = atol(argv[3]), n = atol(argv[4]);
		uint64_t *rtt = calloc((size_t)n, sizeof(*rtt)), gap = 1000000000u / (uint64_t)rate;
		uint64_t next = now_ns();
		char msg[MSG], in[MSG];
		long bad = 0;

		if (!rtt || n <= 0)
			return 2;
		/* One message in flight at a time, sent on the pace's clock:
		 * a round trip longer than the gap delays the next (no
		 * coordinated omission hidden: the delay counts in it). */
		for (long i = 0; i < n; i++) {
			uint64_t t0;
			size_t got = 0;

			{
				struct timespec ts = { (time_t)(next / 1000000000u),
						       (long)(next % 1000000000u) };

				while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL))
					;
			}
			t0 = next;
			snprintf(msg, sizeof(msg), "%020llu%042llu\n", (unsigned long long)t0,
				 (unsigned long long)i);
			write_all(msg, MSG);
			while (got < MSG) {
				ssize_t r = read(fd, in + got, MSG - got);

				if (r <= 0) {
					perror("read");
					return 1;
				}
				got += (size_t)r;
			}
			rtt[i] = now_ns() - t0;
			bad += memcmp(in, msg, MSG) != 0;
			next += gap;
			if (next < now_ns())
				next = now_ns();
		}
		qsort(rtt, (size_t)n, sizeof(*rtt), cmp_u64);
		printf("paced %ld/s, %ld messages of %d bytes: p50 %.1f us, p99 %.1f us, "
		       "max %.1f us, %ld wrong\n", rate, n, MSG, rtt[n / 2] / 1e3,
		       rtt[n * 99 / 100] / 1e3, rtt[n - 1] / 1e3, bad);
		shutdown(fd, SHUT_WR);
		while (read(fd, in, sizeof(in)) > 0)
			;
		return bad ? 1 : 0;
	}
	return 2;
}
