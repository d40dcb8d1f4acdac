/* SPDX-License-Identifier: MIT */
/*
 * The other process of the shared-pool tests, started by fork + exec
 * with one end of a socketpair: shared-peer SOCK MODE [ARG].  It
 * receives the memfd over the socket first, then does what MODE says:
 *
 *   truncate       try to shrink, grow and reseal the memfd; send the errnos
 *   serve          open the shared pool and answer struct peer_req
 *   consumer N     open it, take N indices from the socket, verify each
 *                  buffer and release it by index (or adopt + release)
 *   stress N       N acquire/write/check/release cycles after a go byte
 *   scribble MS    write random values into the head and next[] for MS ms
 *   scribble-all MS  the same, and into the header and counters too
 *
 * With SOCK "-" there is no socket and the pool is named (for scripts):
 *
 *   create NAME N  create a named pool of N 64-byte buffers, close it
 *   hold NAME L C  open it with a cache of 8, hold L leases and C
 *                  buffers in its cache, print "ready" and wait for
 *                  end of file on stdin (or a signal); then release
 */
#include "config.h"

#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <asyncpool.h>
#include "shared-common.h"
#include "../lib/pool_layout.h"

#define MAX_HELD 4096

static int sock;

static void die(const char *what)
{
	fprintf(stderr, "shared-peer: %s\n", what);
	exit(3);
}

static int do_truncate(int fd)
{
	struct stat st;
	int res[3];

	if (fstat(fd, &st) < 0)
		die("fstat");
	res[0] = ftruncate(fd, 0) < 0 ? errno : 0;
	res[1] = ftruncate(fd, st.st_size * 2) < 0 ? errno : 0;
	res[2] = fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE) < 0 ? errno : 0;
	return write_full(sock, res, sizeof(res)) ? 3 : 0;
}

static struct asyncpool_shared *open_or_report(int fd)
{
	struct asyncpool_shared *sp;
	int32_t rc = asyncpool_shared_open_fd(fd, &sp);

	close(fd);
	if (write_full(sock, &rc, sizeof(rc)))
		die("write");
	if (rc)
		exit(0);
	return sp;
}

static int do_serve(int fd)
{
	struct asyncpool_shared *sp = open_or_report(fd);
	struct asyncpool *pool = asyncpool_shared_pool(sp);
	static struct asyncpool_lease held[MAX_HELD];
	struct peer_req q;

	while (read_full(sock, &q, sizeof(q)) == 0) {
		struct peer_rep r = { 0, 0, 0 };
		struct asyncpool_lease l;

		switch (q.op) {
		case OP_ACQUIRE:
			r.rc = asyncpool_acquire(pool, &l);
			if (r.rc == 0) {
				r.index = l.buffer_index;
				if (r.index < MAX_HELD)
					held[r.index] = l;
			}
			break;
		case OP_RELEASE:
			if (q.index >= MAX_HELD || !asyncpool_lease_held(&held[q.index])) {
				r.rc = -ENOENT;
				break;
			}
			asyncpool_lease_release(&held[q.index]);
			break;
		case OP_RELEASE_INDEX:
			r.rc = asyncpool_release_index(pool, q.index);
			break;
		case OP_ADOPT:
			r.rc = asyncpool_lease_adopt(pool, q.index, &l);
			if (r.rc == 0 && q.index < MAX_HELD)
				held[q.index] = l;
			break;
		case OP_ADOPT_TOKEN:
			r.rc = asyncpool_lease_adopt_token(pool, q.value, &l);
			if (r.rc == 0) {
				r.index = l.buffer_index;
				r.value = asyncpool_lease_token(&l);
				if (r.index < MAX_HELD)
					held[r.index] = l;
			}
			break;
		case OP_RELEASE_TOKEN:
			r.rc = asyncpool_release_token(pool, q.value);
			break;
		case OP_CACHE:
			r.rc = asyncpool_set_cache(pool, q.index);
			break;
		case OP_AVAILABLE:
			(void)asyncpool_cache_flush(pool);
			r.value = asyncpool_available(pool);
			break;
		case OP_READ:
		case OP_WRITE:
			if (q.index >= asyncpool_capacity(pool)) {
				r.rc = -EINVAL;
				break;
			}
			{
				char *p = (char *)asyncpool_region_base(asyncpool_shared_region(sp)) +
					  (size_t)q.index * asyncpool_buffer_size(pool);

				if (q.op == OP_READ)
					memcpy(&r.value, p, sizeof(r.value));
				else
					memcpy(p, &q.value, sizeof(q.value));
			}
			break;
		case OP_CHECK:
			r.rc = asyncpool_check(pool);
			break;
		case OP_QUIT:
			write_full(sock, &r, sizeof(r));
			asyncpool_shared_close(sp);
			return 0;
		default:
			r.rc = -EINVAL;
		}
		if (write_full(sock, &r, sizeof(r)))
			break;
	}
	asyncpool_shared_close(sp);
	return 0;
}

/* The producer wrote k into the first 8 bytes and k's low byte after. */
static int do_consumer(int fd, unsigned long n)
{
	struct asyncpool_shared *sp = open_or_report(fd);
	struct asyncpool *pool = asyncpool_shared_pool(sp);
	char *base = asyncpool_region_base(asyncpool_shared_region(sp));
	size_t bs = asyncpool_buffer_size(pool);
	uint64_t res[3] = { 0, 0, 0 };  /* verified, bad data, bad releases */

	for (unsigned long k = 0; k < n; k++) {
		uint32_t idx;
		uint64_t seq;
		const unsigned char *p;
		bool good = true;

		if (read_full(sock, &idx, sizeof(idx)))
			die("read index");
		if (idx >= asyncpool_capacity(pool)) {
			res[1]++;
			continue;
		}
		p = (const unsigned char *)base + (size_t)idx * bs;
		memcpy(&seq, p, sizeof(seq));
		if (seq != k)
			good = false;
		for (size_t i = sizeof(seq); i < bs; i++)
			if (p[i] != (unsigned char)k)
				good = false;
		res[good ? 0 : 1]++;
		if (k % 2) {
			if (asyncpool_release_index(pool, idx))
				res[2]++;
		} else {
			struct asyncpool_lease l;

			if (asyncpool_lease_adopt(pool, idx, &l))
				res[2]++;
			else
				asyncpool_lease_release(&l);
		}
	}
	write_full(sock, res, sizeof(res));
	asyncpool_shared_close(sp);
	return 0;
}

static int do_stress(int fd, unsigned long n)
{
	struct asyncpool_shared *sp = open_or_report(fd);
	struct asyncpool *pool = asyncpool_shared_pool(sp);
	uint64_t pid = (uint64_t)getpid();
	/* ops, wrong data, unexpected errors, empty, ns */
	uint64_t res[5] = { 0, 0, 0, 0, 0 };
	uint64_t t0;
	char go;

	if (read_full(sock, &go, 1))
		die("read go");
	t0 = now_ns();
	for (unsigned long k = 0; k < n; k++) {
		struct asyncpool_lease l;
		uint64_t *p, seq = k;
		int rc = asyncpool_acquire(pool, &l);

		if (rc == -ENOBUFS) {
			res[3]++;
			k--;
			sched_yield();
			continue;
		}
		if (rc) {
			res[2]++;
			continue;
		}
		p = asyncpool_span_ptr(l.span);
		p[0] = pid;
		p[1] = seq;
		if (k % 1024 == 0)
			sched_yield();  /* hold it across a reschedule now and then */
		if (p[0] != pid || p[1] != seq)
			res[1]++;
		asyncpool_lease_release(&l);
		res[0]++;
	}
	res[4] = now_ns() - t0;
	write_full(sock, res, sizeof(res));
	asyncpool_shared_close(sp);
	return 0;
}

static int do_scribble(int fd, unsigned long ms, bool header)
{
	struct asyncpool_shm shm;
	const struct ap_pool_header *h;
	_Atomic uint64_t *head;
	_Atomic uint64_t *next;
	uint32_t count;
	const char *seed = getenv("ASYNCPOOL_TEST_SEED");   /* the test's (test_seed()) */
	uint64_t x = (seed ? strtoull(seed, NULL, 0) : 0x5eed) * 0x9e3779b97f4a7c15ull | 1, writes = 0, end;
	char good[128];

	if (asyncpool_shm_open_fd(fd, &shm))
		die("shm_open_fd");
	close(fd);
	h = shm.base;
	count = h->buffer_count;        /* from our own creator: trusted here */
	memcpy(good, shm.base, sizeof(good));
	head = (void *)((char *)shm.base + AP_OFF_HEAD);
	next = (void *)((char *)shm.base + AP_OFF_NEXT);
	if (write_full(sock, &count, sizeof(count)))
		die("write");
	end = now_ns() + ms * 1000000ull;
	while (now_ns() < end) {
		for (int i = 0; i < 256; i++) {
			uint32_t v, which;

			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			/* in range, a sentinel, or anything */
			switch ((x >> 60) & 3) {
			case 0: v = (uint32_t)(x >> 8) % count; break;
			case 1: v = AP_FL_END - (uint32_t)(x >> 8 & 1); break;
			default: v = (uint32_t)(x >> 16); break;
			}
			which = (uint32_t)(x >> 40) % (count + 1);
			if (header && (x >> 36 & 3) == 0)
				/* a header or counters word, but the magic and
				 * version (test-shared-validate covers them) */
				atomic_store_explicit((_Atomic uint32_t *)shm.base +
						      2 + (x >> 20) % 62, v, memory_order_relaxed);
			else if (which == count)
				atomic_store_explicit(head, ((x >> 32) << 32) | v,
						      memory_order_relaxed);
			else
				/* a FREE link, or any kind */
				atomic_store_explicit(&next[which], (x & 0xffffffff00000000ull) |
						      v, memory_order_relaxed);
			writes++;
		}
		/* now and then a good header again, so that opens get past it */
		if (header && writes % 4096 == 0) {
			memcpy((char *)shm.base + 8, good + 8, sizeof(good) - 8);
			atomic_store_explicit(head, AP_HEAD_MAKE(0, 0), memory_order_relaxed);
			usleep(500);
		}
		sched_yield();
	}
	write_full(sock, &writes, sizeof(writes));
	asyncpool_shm_close(&shm);
	return 0;
}

static int do_create(const char *name, unsigned long n)
{
	struct asyncpool_shared_options o;
	struct asyncpool_shared *sp;

	memset(&o, 0, sizeof(o));
	o.size = sizeof(o);
	o.buffer_size = 64;
	o.buffer_count = (uint32_t)n;
	o.name = name;
	if (asyncpool_shared_create(&o, &sp))
		die("shared_create");
	asyncpool_shared_close(sp);
	return 0;
}

/* Exactly c cached: a refill leaves up to a batch behind, so flush it
 * first and release c (at most the cache size: no flush) into it. */
static int do_hold(const char *name, unsigned long l, unsigned long c)
{
	static struct asyncpool_lease held[MAX_HELD];
	struct asyncpool_shared *sp;
	struct asyncpool *pool;
	char buf[64];

	if (l + c > MAX_HELD || c > 8 || asyncpool_shared_open_named(name, &sp))
		die("hold: open");
	pool = asyncpool_shared_pool(sp);
	if (asyncpool_set_cache(pool, 8))
		die("hold: set_cache");
	for (unsigned long k = 0; k < l + c; k++)
		if (asyncpool_acquire(pool, &held[k]))
			die("hold: acquire");
	if (asyncpool_cache_flush(pool) < 0)
		die("hold: cache_flush");
	for (unsigned long k = l; k < l + c; k++)
		asyncpool_lease_release(&held[k]);
	printf("ready %ld\n", (long)getpid());
	fflush(stdout);
	while (read(0, buf, sizeof(buf)) > 0)
		;
	for (unsigned long k = 0; k < l; k++)
		asyncpool_lease_release(&held[k]);
	asyncpool_shared_close(sp);
	return 0;
}

int main(int argc, char **argv)
{
	unsigned long arg = 0;
	int fd, rc;

	if (argc >= 5 && !strcmp(argv[1], "-") && !strcmp(argv[2], "create"))
		return do_create(argv[3], strtoul(argv[4], NULL, 10));
	if (argc >= 6 && !strcmp(argv[1], "-") && !strcmp(argv[2], "hold"))
		return do_hold(argv[3], strtoul(argv[4], NULL, 10), strtoul(argv[5], NULL, 10));
	if (argc < 3)
		die("usage: shared-peer SOCK MODE [ARG]");
	sock = atoi(argv[1]);
	if (argc > 3)
		arg = strtoul(argv[3], NULL, 10);
	rc = asyncpool_shm_recv_fd(sock, &fd);
	if (rc)
		die("recv_fd");
	if (!strcmp(argv[2], "truncate"))
		return do_truncate(fd);
	if (!strcmp(argv[2], "serve"))
		return do_serve(fd);
	if (!strcmp(argv[2], "consumer"))
		return do_consumer(fd, arg);
	if (!strcmp(argv[2], "stress"))
		return do_stress(fd, arg);
	if (!strcmp(argv[2], "scribble"))
		return do_scribble(fd, arg, false);
	if (!strcmp(argv[2], "scribble-all"))
		return do_scribble(fd, arg, true);
	die("unknown mode");
	return 3;
}
