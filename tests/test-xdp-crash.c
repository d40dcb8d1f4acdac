/* SPDX-License-Identifier: MIT */
/*
 * A UMEM in a shared pool (asyncpool_shared_create()'s memfd), and a
 * second process with its own AF_XDP socket, fill and completion rings
 * on it (its own UMEM registration of the same pages), SIGKILLed while
 * it holds frames.  The kernel gives none of them back; the pool's
 * reclaim does, every one, after the quarantine and not before (for
 * what the kernel may still write or read until it has torn the socket
 * down).  Each round dies at one place a frame can be:
 *
 *   fill       its fill ring full, nothing received yet;
 *   leased     holding received frames (more arriving in its rx ring);
 *   tx         frames just put on its tx ring, not completed;
 *   completion frames sent, their completions left in the ring;
 *   random     anywhere in a loop of receive, hold, send, complete,
 *              release, killed by the parent at a random moment.
 *
 * ASYNCPOOL_XDP_KILLS rounds (default 10; make check-long: 1000).  The
 * figures (frames held at death, time until all were back) go to the
 * diagnostics.  SKIPs without root, netns, veth or XDP.
 */
#include "config.h"

#include <signal.h>
#include <sys/wait.h>
#include <time.h>

#include <asyncpool.h>
#include "tap.h"
#include "testutil.h"
#include "xdp-util.h"

#define FRAMES   4096u
#define FSIZE    2048u
#define RING     1024u
#define QUARANTINE_MS 100u

enum mode { M_FILL, M_LEASED, M_TX, M_COMP, M_RANDOM, M_COUNT };
static const char *const mode_names[M_COUNT] = { "fill", "leased", "tx", "completion", "random" };

static uint8_t mac_va[6], mac_vb[6];

static void die_here(int ready)
{
	char c = 1;

	if (ready >= 0 && write(ready, &c, 1) != 1)
		_exit(3);
	raise(SIGKILL);
	_exit(4);
}

/* The child: a socket on vb on its own registration of the shared pool's frames. */
static void child(int shfd, enum mode m, int ready)
{
	struct asyncpool_shared_open_options oo;
	struct asyncpool_xsk_options so;
	struct asyncpool_shared *sp;
	struct asyncpool_xdp *x;
	struct asyncpool_xsk *s;
	struct asyncpool_lease held[512], l[64];
	unsigned int nheld = 0;

	memset(&oo, 0, sizeof(oo));
	oo.size = sizeof(oo);
	oo.fd = shfd;
	oo.flags = ASYNCPOOL_SHARED_OPEN_NO_RECLAIM;
	int rc;

	if ((rc = asyncpool_shared_open(&oo, &sp)) ||
	    (rc = asyncpool_xdp_create(asyncpool_shared_pool(sp), NULL, &x))) {
		fprintf(stderr, "child: the shared pool as a UMEM: %s\n", strerror(-rc));
		_exit(2);
	}
	memset(&so, 0, sizeof(so));
	so.size = sizeof(so);
	so.ifname = "vb";
	so.ring_size = RING;
	/* -EBUSY: the kernel tears the last socket on the queue down later (deferred). */
	for (int tries = 0; (rc = asyncpool_xsk_open(x, &so, &s)) == -EBUSY && tries < 2000; tries++)
		usleep(1000);
	if (rc) {
		fprintf(stderr, "child: a socket on vb: %s\n", strerror(-rc));
		_exit(2);
	}
	if (m == M_FILL)
		die_here(ready);
	if (m == M_RANDOM) {
		char c = 1;

		if (write(ready, &c, 1) != 1)
			_exit(3);
	}
	for (;;) {
		int k = asyncpool_xsk_recv(s, l, 64);

		if (k <= 0) {
			xt_wait(asyncpool_xsk_fd(s), 5);
			continue;
		}
		for (int i = 0; i < k; i++) {
			/* Make it a frame back to va, for a send. */
			uint8_t *f = asyncpool_span_ptr(l[i].span);

			memcpy(f, mac_va, 6);
			memcpy(f + 6, mac_vb, 6);
			if (nheld < 512)
				held[nheld++] = l[i];
			else
				asyncpool_lease_release(&l[i]);
		}
		if (m == M_LEASED && nheld >= 128)
			die_here(ready);
		if ((m == M_TX || m == M_COMP) && nheld >= 128) {
			int sent = asyncpool_xsk_send(s, held, nheld);

			if (sent <= 0)
				_exit(5);
			if (m == M_COMP)
				usleep(20000);     /* the kernel completes; nobody reaps */
			die_here(ready);
		}
		if (m == M_RANDOM) {
			/* Send half of what it holds, release a quarter, keep the rest. */
			unsigned int half = nheld / 2, keep;
			int sent = asyncpool_xsk_send(s, held, half);

			if (sent < 0)
				_exit(5);
			keep = nheld - half;
			memmove(held, held + half, keep * sizeof(held[0]));
			nheld = keep;
			asyncpool_release_bulk(held, nheld / 2);
			memmove(held, held + nheld / 2, (nheld - nheld / 2) * sizeof(held[0]));
			nheld -= nheld / 2;
			asyncpool_xsk_complete(s);
		}
	}
}

static uint64_t ms_since(uint64_t t0)
{
	return (now_ns() - t0) / 1000000u;
}

int main(void)
{
	struct asyncpool_shared_options o;
	struct asyncpool_shared *sp;
	struct asyncpool *pool;
	unsigned long rounds = env_number("ASYNCPOOL_XDP_KILLS", 10);
	unsigned long lost = 0, early = 0, slow = 0, failed = 0, held_total = 0;
	uint64_t worst_ms = 0;
	char why[256];
	int pk;

	tap_watchdog(60 + (unsigned)(rounds * 2));
#ifndef HAVE_XDP
	skip_all("built without libxdp and libbpf (--without-xdp)");
#endif
	if (xt_netns(why, sizeof(why)) || xt_veth("va", "vb", why, sizeof(why)))
		skip_all("%s", why);
	xt_mac("va", mac_va);
	xt_mac("vb", mac_vb);
	pk = xt_packet_socket("va", 50);
	if (pk < 0)
		skip_all("no AF_PACKET socket: %s", strerror(-pk));
	shared_options(&o, FSIZE, FRAMES);
	if (asyncpool_shared_create(&o, &sp))
		bail_out("asyncpool_shared_create");
	pool = asyncpool_shared_pool(sp);
	asyncpool_set_quarantine(pool, QUARANTINE_MS);
	{
		/* Can this machine do it at all?  An XDP socket on vb, here. */
		struct asyncpool_xsk_options so = { .size = sizeof(so), .ifname = "vb", .ring_size = 64 };
		struct asyncpool_xdp *x;
		struct asyncpool_xsk *s;
		int rc = asyncpool_xdp_create(pool, NULL, &x);

		if (!rc && (rc = asyncpool_xsk_open(x, &so, &s)) == 0)
			asyncpool_xsk_close(s);
		if (!rc)
			asyncpool_xdp_destroy(x);
		if (rc)
			skip_all("no AF_XDP socket with an XDP program here: %s", strerror(-rc));
	}
	plan(4);
	for (unsigned long r = 0; r < rounds; r++) {
		enum mode m = (enum mode)(r % M_COUNT);
		int ready[2], status;
		unsigned int seq = 0;
		size_t avail;
		uint64_t t0;
		bool dead = false;
		char c;
		pid_t pid;

		if (pipe(ready))
			bail_out("pipe");
		fflush(stdout);
		pid = fork();
		if (pid < 0)
			bail_out("fork");
		if (pid == 0) {
			close(ready[0]);
			child(asyncpool_shared_fd(sp), m, ready[1]);
			_exit(6);
		}
		close(ready[1]);
		/* Frames to vb until the child says it is where it dies (or died). */
		for (int burst = 0; burst < 20000 && !dead; burst++) {
			for (int i = 0; i < 16; i++)
				(void)xt_send(pk, mac_vb, mac_va, seq++);
			if (xt_wait(ready[0], 1)) {
				if (read(ready[0], &c, 1) != 1)
					dead = true;   /* it died before saying so */
				break;
			}
		}
		if (m == M_RANDOM) {
			/* Keep it busy, then kill it at a random moment. */
			int bursts = 1 + rand() % 64;

			for (int b = 0; b < bursts; b++)
				for (int i = 0; i < 16; i++)
					(void)xt_send(pk, mac_vb, mac_va, seq++);
			usleep((useconds_t)(rand() % 3000));
			kill(pid, SIGKILL);
		}
		while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
			;
		close(ready[0]);
		if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGKILL) {
			failed++;
			diag("round %lu (%s): the child exited %d, not killed", r, mode_names[m],
			     WIFEXITED(status) ? WEXITSTATUS(status) : -1);
			continue;
		}
		t0 = now_ns();
		(void)asyncpool_reclaim(pool);
		avail = asyncpool_available(pool);
		held_total += FRAMES - avail;
		/* The fill ring alone holds RING frames, leased: not before the quarantine. */
		if (avail == FRAMES && ms_since(t0) < QUARANTINE_MS)
			early++;
		while (asyncpool_available(pool) != FRAMES && ms_since(t0) < QUARANTINE_MS + 10000) {
			usleep(5000);
			(void)asyncpool_reclaim(pool);
		}
		if (asyncpool_available(pool) != FRAMES) {
			lost += FRAMES - asyncpool_available(pool);
			diag("round %lu (%s): %zu frames not back", r, mode_names[m],
			     FRAMES - asyncpool_available(pool));
			continue;
		}
		if (ms_since(t0) > worst_ms)
			worst_ms = ms_since(t0);
		if (ms_since(t0) > QUARANTINE_MS + 1000)
			slow++;
	}
	diag("%lu kills; %lu frames held at death in all (%.0f a kill); every frame back within %llu ms "
	     "(quarantine %u ms)", rounds, held_total, rounds ? (double)held_total / rounds : 0.0,
	     (unsigned long long)worst_ms, QUARANTINE_MS);
	is_int(failed, 0, "every child died by SIGKILL where it was told to");
	is_int(lost, 0, "no frame lost across %lu kills", rounds);
	is_int(early, 0, "no leased frame back before the quarantine");
	is_int(slow, 0, "every frame back within the quarantine plus 1 s");
	close(pk);
	asyncpool_shared_close(sp);
	return done_testing();
}
