/* SPDX-License-Identifier: MIT */
/*
 * The other end of the AF_XDP example's test (tests/test-example-xdp.sh):
 *
 *   xdp-peer send IF DST-MAC N        N test frames out of IF
 *   xdp-peer count IF N IDLE-MS       test frames into IF: prints
 *                                     "got K of N" after N, or after
 *                                     IDLE-MS ms without one
 *
 * Test frames are tests/xdp-util.h's (AF_PACKET, ethertype 0x88b5,
 * numbered, checked byte for byte); a frame counts once.
 */
#define _GNU_SOURCE 1
#include <stdio.h>
#include <stdlib.h>

#include "xdp-util.h"

static int parse_mac(const char *s, uint8_t mac[6])
{
	unsigned int b[6];

	if (sscanf(s, "%x:%x:%x:%x:%x:%x", &b[0], &b[1], &b[2], &b[3], &b[4], &b[5]) != 6)
		return -1;
	for (int i = 0; i < 6; i++)
		mac[i] = (uint8_t)b[i];
	return 0;
}

int main(int argc, char **argv)
{
	uint8_t dst[6], src[6], buf[2048];
	unsigned long n;
	int fd;

	if (argc != 5)
		return 2;
	n = strtoul(argv[4 - (argv[1][0] == 'c')], NULL, 0);
	fd = xt_packet_socket(argv[2], 100);
	if (fd < 0) {
		fprintf(stderr, "xdp-peer: %s: %s\n", argv[2], strerror(-fd));
		return 1;
	}
	if (!strcmp(argv[1], "send")) {
		if (parse_mac(argv[3], dst) || xt_mac(argv[2], src))
			return 2;
		for (unsigned long i = 0; i < n; i++) {
			if (xt_send(fd, dst, src, (uint32_t)i))
				return 1;
			if (i % 32 == 31)
				usleep(200);    /* veth's queue is 256 frames deep */
		}
		close(fd);
		return 0;
	}
	if (!strcmp(argv[1], "count")) {
		unsigned long idle_ms = strtoul(argv[4], NULL, 0), got = 0, waited = 0;
		uint8_t *seen, me[6];

		n = strtoul(argv[3], NULL, 0);
		seen = calloc(n ? n : 1, 1);
		if (xt_mac(argv[2], me))
			return 1;
		while (seen && got < n && waited < idle_ms) {
			ssize_t k = recv(fd, buf, sizeof(buf), 0);
			uint32_t seq;

			if (k <= 0) {
				waited += 100;
				continue;
			}
			waited = 0;
			/* ours, whole, addressed to IF (rewritten on the way) */
			if (xt_frame_ok(buf, (size_t)k, &seq) && seq < n && !memcmp(buf, me, 6) &&
			    !seen[seq]++)
				got++;
		}
		printf("got %lu of %lu\n", got, n);
		free(seen);
		close(fd);
		return 0;
	}
	return 2;
}
