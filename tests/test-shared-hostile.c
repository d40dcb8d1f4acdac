/* SPDX-License-Identifier: MIT */
/*
 * A hostile peer: another process writes random values into the head
 * word and next[] of a shared pool while this one acquires, writes,
 * adopts and releases for 2 s (ASYNCPOOL_HOSTILE_MS).  No crash, no
 * hang, every lease inside the buffer memory, only documented errors.
 * Then a quarter of that time with the header scribbled too, while this
 * process also opens the pool again and again.
 * Meant to run under AddressSanitizer too (--enable-sanitizers).
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <asyncpool.h>
#include "tap.h"
#include "shared-common.h"

#define N 64
#define BS 64
#define HOLD 8

/* A new pool, sent to a peer that scribbles on it in mode for ms; the
 * test point what: the peer mapped it. */
static pid_t start_scribbler(const char *mode, unsigned long ms, const char *what,
			     struct asyncpool_shared **sp, int *sock)
{
	struct asyncpool_shared_options o;
	uint32_t count = 0;
	char arg[32];
	pid_t pid;

	shared_options(&o, BS, N);
	if (asyncpool_shared_create(&o, sp))
		bail_out("shared_create");
	snprintf(arg, sizeof(arg), "%lu", ms);
	pid = spawn_peer(sock, mode, arg);
	if (pid < 0)
		bail_out("spawn");
	asyncpool_shm_send_fd(*sock, asyncpool_shared_fd(*sp));
	ok(read_full(*sock, &count, sizeof(count)) == 0 && count == N, "%s", what);
	return pid;
}

/* Count rc in counts[i] where codes[i] == rc; false if it is none of them. */
static bool tally(int rc, const int *codes, unsigned long *counts, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (codes[i] == rc) {
			counts[i]++;
			return true;
		}
	}
	return false;
}

/* Has the peer said it is done (its count of writes is waiting)? */
static bool peer_done(int sock)
{
	struct pollfd pfd = { .fd = sock, .events = POLLIN };

	return poll(&pfd, 1, 0) != 0;
}

/* The end of a scribbler: its count of writes, then its exit status
 * (wait_peer()); the socket is closed. */
static int scribbler_end(pid_t pid, int sock, uint64_t *writes)
{
	int rc;

	if (read_full(sock, writes, sizeof(*writes)))
		*writes = 0;
	rc = wait_peer(pid);
	close(sock);
	return rc;
}

/* The header too: opens validate it, checks may find it bad. */
static void header_phase(unsigned long ms)
{
	/* What an open of a pool whose header is being scribbled on may say. */
	static const int open_codes[] = { 0, -EPROTO, -EPROTONOSUPPORT, -EBADMSG };
	struct asyncpool_shared *sp, *again;
	struct asyncpool *pool;
	char *base;
	unsigned long opens[4] = { 0, 0, 0, 0 }, wrong = 0, outside = 0, ops = 0;
	uint64_t writes = 0;
	int sock, status, done = 0;
	pid_t pid;

	pid = start_scribbler("scribble-all", ms, "the header scribbler mapped the pool", &sp, &sock);
	pool = asyncpool_shared_pool(sp);
	base = asyncpool_region_base(asyncpool_shared_region(sp));
	while (!done) {
		int rc;

		for (int k = 0; k < 256; k++, ops++) {
			struct asyncpool_lease l;

			rc = asyncpool_acquire(pool, &l);
			if (rc == 0) {
				if (asyncpool_span_ptr(l.span) != base + (size_t)l.buffer_index * BS ||
				    l.buffer_index >= N)
					outside++;
				else
					memset(asyncpool_span_ptr(l.span), 1, BS);
				rc = asyncpool_release_index(pool, l.buffer_index);
				if (rc && rc != -EALREADY && rc != -EUCLEAN)
					wrong++;
			} else if (rc != -ENOBUFS && rc != -EUCLEAN) {
				wrong++;
			}
		}
		rc = asyncpool_shared_open_fd(asyncpool_shared_fd(sp), &again);
		if (rc == 0)
			asyncpool_shared_close(again);
		if (!tally(rc, open_codes, opens, 4))
			wrong++;
		rc = asyncpool_check(pool);
		if (rc && rc != -EUCLEAN && rc != -EBADMSG)
			wrong++;
		done = peer_done(sock);
	}
	status = scribbler_end(pid, sock, &writes);
	ok(writes > 0, "header phase: %llu random values written", (unsigned long long)writes);
	is_int(status, 0, "the header scribbler exited 0");
	is_int(outside, 0, "header phase: every lease inside the buffer memory");
	is_int(wrong, 0, "header phase: only documented errors");
	diag("header phase: %lu ops; opens: %lu ok, %lu EPROTO, %lu EPROTONOSUPPORT, %lu EBADMSG",
	     ops, opens[0], opens[1], opens[2], opens[3]);
	asyncpool_shared_close(sp);
}

int main(void)
{
	/* What releases and acquires of a scribbled pool may say. */
	static const int rel_codes[] = { 0, -EALREADY, -EUCLEAN };
	static const int acq_codes[] = { 0, -ENOBUFS, -EUCLEAN };
	unsigned long ms = env_number("ASYNCPOOL_HOSTILE_MS", 2000);
	struct asyncpool_shared *sp;
	struct asyncpool *pool;
	struct asyncpool_lease held[HOLD];
	char *base;
	uint64_t writes = 0, x = 88172645463325252ull;
	unsigned long ops = 0, acq[3] = { 0, 0, 0 }, rel[3] = { 0, 0, 0 };
	unsigned long outside = 0, wrong_errors = 0, checks = 0, adopted = 0;
	int sock, status, done = 0;
	pid_t pid;

	plan(13);
	(void)test_seed(0x5eed0017);    /* the scribbling peers' (shared-peer.c) */
	memset(held, 0, sizeof(held));
	pid = start_scribbler("scribble", ms, "the scribbler mapped the pool", &sp, &sock);
	pool = asyncpool_shared_pool(sp);
	base = asyncpool_region_base(asyncpool_shared_region(sp));

	while (!done) {
		for (int k = 0; k < 1024; k++, ops++) {
			struct asyncpool_lease *l = &held[ops % HOLD];
			int rc;

			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			if (asyncpool_lease_held(l)) {
				if (x & 1) {
					rc = asyncpool_release_index(pool, l->buffer_index);
					l->release.fn = NULL;
				} else {
					asyncpool_lease_release(l);
					rc = 0;
				}
				if (!tally(rc, rel_codes, rel, 3))
					wrong_errors++;
			}
			rc = asyncpool_acquire(pool, l);
			if (!tally(rc, acq_codes, acq, 3))
				wrong_errors++;
			if (rc == 0) {
				char *p = asyncpool_span_ptr(l->span);

				if (l->buffer_index >= N || l->span.length != BS ||
				    p != base + (size_t)l->buffer_index * BS) {
					outside++;
					l->release.fn = NULL;
					continue;
				}
				memset(p, (int)ops, BS);
			}
			if ((x >> 8) % 64 == 0) {
				struct asyncpool_lease a;

				rc = asyncpool_lease_adopt(pool, (uint32_t)(x >> 16) % N, &a);
				if (rc == 0) {
					adopted++;
					if (asyncpool_span_ptr(a.span) !=
					    base + (size_t)a.buffer_index * BS)
						outside++;
					asyncpool_lease_release(&a);
				} else if (rc != -EALREADY) {
					wrong_errors++;
				}
			}
		}
		if (asyncpool_available(pool) > N)
			outside++;
		if (ops % (64 * 1024) == 0) {
			int rc = asyncpool_check(pool);

			checks++;
			if (rc != 0 && rc != -EUCLEAN)
				wrong_errors++;
		}
		done = peer_done(sock);
	}
	status = scribbler_end(pid, sock, &writes);
	ok(writes > 0, "the scribbler wrote %llu random values", (unsigned long long)writes);
	is_int(status, 0, "the scribbler exited 0");
	diag("%lu operations under attack", ops);
	is_int(outside, 0, "every lease inside the buffer memory");
	is_int(wrong_errors, 0, "only documented errors");
	diag("acquire: %lu ok, %lu ENOBUFS, %lu EUCLEAN; release: %lu ok, %lu EALREADY, %lu EUCLEAN; "
	     "%lu adopted, %lu checks",
	     acq[0], acq[1], acq[2], rel[0], rel[1], rel[2], adopted, checks);
	ok(acq[0] > 0, "some acquires succeeded");
	{
		struct asyncpool_stats st;

		memset(&st, 0, sizeof(st));
		st.size = sizeof(st);
		is_int(asyncpool_stats(pool, &st), 0, "stats still work");
		diag("counted: %llu corruptions, %llu bad releases",
		     (unsigned long long)st.corruptions, (unsigned long long)st.bad_releases);
	}
	ok(asyncpool_available(pool) <= N, "available is bounded");
	for (int i = 0; i < HOLD; i++)
		held[i].release.fn = NULL;     /* the pool is garbage: nothing to give back */
	asyncpool_shared_close(sp);
	header_phase(ms / 4 ? ms / 4 : 1);
	return done_testing();
}
