/* SPDX-License-Identifier: MIT */
/*
 * What the AF_XDP tests, the example's test and the bench share: a
 * network namespace of the process's own with veth pairs in it, and
 * test frames sent and captured with AF_PACKET raw sockets.
 *
 * The namespace is unshare(CLONE_NEWNET)'s: the process's own, and the
 * kernel deletes it, with its veths, when the last process in it exits,
 * however it exits (a failed assertion, the watchdog, SIGKILL): nothing
 * can be left behind, and nothing leaves it.
 */
#ifndef ASYNCPOOL_XDP_UTIL_H
#define ASYNCPOOL_XDP_UTIL_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* unshare(2) */
#endif

#include <arpa/inet.h>
#include <errno.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

/* Our frames' ethertype (IEEE 802 local experimental 1). */
#define XT_ETHERTYPE 0x88b5
#define XT_FRAME_LEN 128u

/* Into a network namespace of our own, lo up: 0, or -1 with why set. */
static inline int xt_netns(char *why, size_t len)
{
	if (geteuid() != 0) {
		snprintf(why, len, "not root (a netns and veths need CAP_NET_ADMIN, XDP CAP_BPF)");
		return -1;
	}
	if (unshare(CLONE_NEWNET)) {
		snprintf(why, len, "no network namespace: unshare(CLONE_NEWNET): %s", strerror(errno));
		return -1;
	}
	if (system("ip link set lo up 2>/dev/null")) {
		snprintf(why, len, "no ip(8) from iproute2");
		return -1;
	}
	return 0;
}

/* A veth pair a <-> b, both up: 0, or -1 with why set. */
static inline int xt_veth(const char *a, const char *b, char *why, size_t len)
{
	char cmd[200];

	snprintf(cmd, sizeof(cmd),
		 "ip link add %s type veth peer name %s 2>/dev/null && "
		 "ip link set %s up && ip link set %s up", a, b, a, b);
	if (system(cmd)) {
		snprintf(why, len, "no veth pair (%s)", cmd);
		return -1;
	}
	return 0;
}

/* The same with n rx and n tx queues on each end (veth's default is 1). */
static inline int xt_veth_queues(const char *a, const char *b, unsigned n, char *why, size_t len)
{
	char cmd[300];

	snprintf(cmd, sizeof(cmd),
		 "ip link add %s numtxqueues %u numrxqueues %u type veth peer name %s "
		 "numtxqueues %u numrxqueues %u 2>/dev/null && ip link set dev %s up && ip link set dev %s up",
		 a, n, n, b, n, n, a, b);
	if (system(cmd)) {
		snprintf(why, len, "no veth pair with %u queues (%.200s)", n, cmd);
		return -1;
	}
	return 0;
}

static inline int xt_mac(const char *ifname, uint8_t mac[6])
{
	struct ifreq ifr;
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), rc;

	if (fd < 0)
		return -errno;
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", ifname);
	rc = ioctl(fd, SIOCGIFHWADDR, &ifr) ? -errno : 0;
	if (!rc)
		memcpy(mac, ifr.ifr_hwaddr.sa_data, 6);
	close(fd);
	return rc;
}

/* A raw socket on ifname for our ethertype, reads time out after ms. */
static inline int xt_packet_socket(const char *ifname, int ms)
{
	struct sockaddr_ll sll;
	struct timeval tv = { .tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000 };
	int big = 16 << 20;
	int fd = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, htons(XT_ETHERTYPE));

	if (fd < 0)
		return -errno;
	memset(&sll, 0, sizeof(sll));
	sll.sll_family = AF_PACKET;
	sll.sll_protocol = htons(XT_ETHERTYPE);
	sll.sll_ifindex = (int)if_nametoindex(ifname);
	if (!sll.sll_ifindex || bind(fd, (struct sockaddr *)&sll, sizeof(sll)) ||
	    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) ||
	    setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof(big))) {
		int e = errno ? -errno : -ENODEV;

		close(fd);
		return e;
	}
	return fd;
}

/* Test frame seq: our header, then seq, then bytes that depend on both. */
static inline void xt_frame(uint8_t *p, size_t len, const uint8_t dst[6], const uint8_t src[6],
			    uint32_t seq)
{
	uint16_t et = htons(XT_ETHERTYPE);
	uint32_t be = htonl(seq);

	memcpy(p, dst, 6);
	memcpy(p + 6, src, 6);
	memcpy(p + 12, &et, 2);
	memcpy(p + 14, &be, 4);
	for (size_t i = 18; i < len; i++)
		p[i] = (uint8_t)(seq * 7 + i);
}

/* Whether p is a whole test frame; its seq. */
static inline bool xt_frame_ok(const uint8_t *p, size_t len, uint32_t *seq)
{
	uint16_t et;
	uint32_t be;

	if (len != XT_FRAME_LEN)
		return false;
	memcpy(&et, p + 12, 2);
	if (et != htons(XT_ETHERTYPE))
		return false;
	memcpy(&be, p + 14, 4);
	*seq = ntohl(be);
	for (size_t i = 18; i < len; i++)
		if (p[i] != (uint8_t)(*seq * 7 + i))
			return false;
	return true;
}

/* Whether p is of our ethertype at all (the rest are strays: IPv6 and such). */
static inline bool xt_ours(const uint8_t *p, size_t len)
{
	uint16_t et;

	if (len < 14)
		return false;
	memcpy(&et, p + 12, 2);
	return et == htons(XT_ETHERTYPE);
}

static inline int xt_send(int fd, const uint8_t dst[6], const uint8_t src[6], uint32_t seq)
{
	uint8_t f[XT_FRAME_LEN];

	xt_frame(f, sizeof(f), dst, src, seq);
	for (int tries = 0; tries < 1000; tries++) {
		if (send(fd, f, sizeof(f), 0) == (ssize_t)sizeof(f))
			return 0;
		if (errno != ENOBUFS && errno != EAGAIN)
			return -errno;
		usleep(100);
	}
	return -ENOBUFS;
}

/*
 * Test frames into ifname from src to dst as fast as AF_PACKET goes
 * (sendmmsg of 64, the qdisc bypassed), until killed: for a forked
 * sender.  Never returns.  It dies with the process that forked it: a
 * parent killed (or halted by a sanitizer) leaves no flood behind.
 */
static inline void xt_flood(const char *ifname, const uint8_t dst[6], const uint8_t src[6])
{
	struct sockaddr_ll sll;
	static uint8_t frames[64][XT_FRAME_LEN];
	struct mmsghdr m[64];
	struct iovec iov[64];
	int fd, one = 1;

	/* Already orphaned before the prctl: adopted by init or a reaper. */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) || getppid() == 1)
		_exit(1);
	fd = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, 0);
	if (fd < 0)
		_exit(1);
	(void)setsockopt(fd, SOL_PACKET, PACKET_QDISC_BYPASS, &one, sizeof(one));
	memset(&sll, 0, sizeof(sll));
	sll.sll_family = AF_PACKET;
	sll.sll_ifindex = (int)if_nametoindex(ifname);
	sll.sll_halen = 6;
	memcpy(sll.sll_addr, dst, 6);
	memset(m, 0, sizeof(m));
	for (unsigned int i = 0; i < 64; i++) {
		xt_frame(frames[i], XT_FRAME_LEN, dst, src, i);
		iov[i].iov_base = frames[i];
		iov[i].iov_len = XT_FRAME_LEN;
		m[i].msg_hdr.msg_iov = &iov[i];
		m[i].msg_hdr.msg_iovlen = 1;
		m[i].msg_hdr.msg_name = &sll;
		m[i].msg_hdr.msg_namelen = sizeof(sll);
	}
	for (;;)
		(void)sendmmsg(fd, m, 64, 0);
}

/* Wait until fd is readable, at most ms: true if it is. */
static inline bool xt_wait(int fd, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	return poll(&p, 1, ms) > 0;
}

#endif /* ASYNCPOOL_XDP_UTIL_H */
