/* SPDX-License-Identifier: MIT */
/*
 * tools/demo_xdp.c: `asyncpool demo --xdp` (issue 55).  A child process
 * goes into a network namespace of its own (unshare(CLONE_NEWNET): the
 * kernel deletes it, with its veth pair, when the child exits), makes a
 * shared pool (a memfd) of 1024 frames of 2 KiB, registers it as an
 * AF_XDP UMEM with a socket on vb queue 0 (zero-copy asked: veth
 * refuses it, copy mode, and the reason is printed), sends frames into
 * va from a raw socket, receives them as leases, checks every byte,
 * holds 64, sends those back out, reaps the completions, and prints
 * where the frames are (asyncpool_xdp_places()) at each step.
 */
#include "config.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tool.h"

#ifdef HAVE_XDP
#include <asyncpool.h>
#include "../tests/xdp-util.h"

#define DX_FRAMES 1024u
#define DX_FSIZE  2048u
#define DX_RING   256u
#define DX_HOLD   64u

struct dx_report {
	int rc;                 /* DEMO_URING_* */
	char why[256];
};

static void dx_places(const struct asyncpool_xdp *x, const char *when)
{
	struct asyncpool_xdp_places pl = { .size = sizeof(pl) };

	if (asyncpool_xdp_places(x, &pl))
		return;
	printf("%-34s fill %4u  kernel %3u  rx %3u | leased %3u | tx %3u  kernel %3u  "
	       "completion %3u | moving %u | free %4u of %u\n", when, pl.fill, pl.kernel_rx, pl.rx,
	       pl.leased, pl.tx, pl.kernel_tx, pl.completion, pl.moving, pl.free, pl.capacity);
}

static int dx_fail(struct dx_report *rep, int rc, const char *what, int err)
{
	snprintf(rep->why, sizeof(rep->why), "%s: %s", what, strerror(err < 0 ? -err : err));
	return rc;
}

static int dx_run(unsigned frames, struct dx_report *rep)
{
	struct asyncpool_shared_options so = { .size = sizeof(so), .buffer_size = DX_FSIZE,
					      .buffer_count = DX_FRAMES };
	struct asyncpool_xsk_options xo = { .size = sizeof(xo), .ifname = "vb", .queue = 0,
					    .flags = ASYNCPOOL_XSK_ZEROCOPY, .ring_size = DX_RING };
	struct asyncpool_xsk_stats st = { .size = sizeof(st) };
	struct asyncpool_lease l[64], hold[DX_HOLD];
	struct asyncpool_shared *sp;
	struct asyncpool *pool;
	struct asyncpool_xdp *x;
	struct asyncpool_xsk *s;
	uint8_t mac_va[6], mac_vb[6];
	unsigned nhold = 0, got = 0, bad = 0, strays = 0;
	uint8_t *seen;
	int rc, pk, sent;

	if (xt_netns(rep->why, sizeof(rep->why)) || xt_veth("va", "vb", rep->why, sizeof(rep->why)))
		return DEMO_URING_REFUSED;
	xt_mac("va", mac_va);
	xt_mac("vb", mac_vb);
	pk = xt_packet_socket("va", 200);
	if (pk < 0)
		return dx_fail(rep, DEMO_URING_REFUSED, "an AF_PACKET socket on va", pk);
	if ((rc = asyncpool_shared_create(&so, &sp)))
		return dx_fail(rep, DEMO_URING_FAILED, "asyncpool_shared_create", rc);
	pool = asyncpool_shared_pool(sp);
	if ((rc = asyncpool_xdp_create(pool, NULL, &x)))
		return dx_fail(rep, DEMO_URING_FAILED, "asyncpool_xdp_create", rc);
	rc = asyncpool_xsk_open(x, &xo, &s);
	if (rc)
		return dx_fail(rep, DEMO_URING_REFUSED, "no AF_XDP socket with an XDP program here", rc);
	printf("libasyncpool %s demo (AF_XDP)\n", asyncpool_version());
	asyncpool_xsk_stats(s, &st);
	printf("UMEM: a shared pool (memfd) of %u frames of %u bytes; a socket on vb queue 0, %s mode",
	       DX_FRAMES, DX_FSIZE, st.mode == ASYNCPOOL_XSK_MODE_ZEROCOPY ? "zero-copy" : "copy");
	if (st.zerocopy_error)
		printf(" (zero-copy asked, refused: %s)", strerror(-st.zerocopy_error));
	printf("; rings of %u\n", DX_RING);
	dx_places(x, "after the open:");

	seen = calloc(frames, 1);
	if (!seen)
		return dx_fail(rep, DEMO_URING_FAILED, "calloc", ENOMEM);
	for (unsigned base = 0; base < frames; base += 64) {
		unsigned burst = frames - base < 64 ? frames - base : 64, want = got + burst;

		for (unsigned i = 0; i < burst; i++)
			if ((rc = xt_send(pk, mac_vb, mac_va, base + i)))
				return dx_fail(rep, DEMO_URING_FAILED, "a frame sent from va", rc);
		for (int idle = 0; got < want && idle < 200;) {
			int k = asyncpool_xsk_recv(s, l, 64);

			if (k <= 0) {
				idle++;
				xt_wait(asyncpool_xsk_fd(s), 10);
				continue;
			}
			for (int i = 0; i < k; i++) {
				const uint8_t *f = asyncpool_span_ptr(l[i].span);
				uint32_t seq;

				if (!xt_ours(f, l[i].span.length))
					strays++;       /* IPv6 and such: the kernel's own */
				else if (!xt_frame_ok(f, l[i].span.length, &seq) || seq >= frames ||
					 seen[seq]++)
					bad++;
				else
					got++;
				if (nhold < DX_HOLD && xt_ours(f, l[i].span.length))
					hold[nhold++] = l[i];
				else
					asyncpool_lease_release(&l[i]);
			}
		}
	}
	free(seen);
	printf("%u of %u frames received as leases, every byte checked: %u wrong; %u strays "
	       "(not ours) released\n", got, frames, bad, strays);
	dx_places(x, "holding the first 64 received:");
	/* Back out of vb, rewritten in place: a lease sent, no copy. */
	for (unsigned i = 0; i < nhold; i++) {
		uint8_t *f = asyncpool_span_ptr(hold[i].span);

		memcpy(f, mac_va, 6);
		memcpy(f + 6, mac_vb, 6);
	}
	sent = asyncpool_xsk_send(s, hold, nhold);
	if (sent < 0)
		return dx_fail(rep, DEMO_URING_FAILED, "asyncpool_xsk_send", sent);
	dx_places(x, "sent back out, before the reap:");
	for (int i = 0; i < 1000 && !asyncpool_xsk_stats(s, &st) && st.in_tx; i++) {
		asyncpool_xsk_complete(s);
		usleep(1000);
	}
	dx_places(x, "completions reaped:");
	asyncpool_xsk_stats(s, &st);
	printf("%d sent, %llu completed; %llu wakeups of the kernel; %llu descriptors refused\n",
	       sent, (unsigned long long)st.completed, (unsigned long long)st.wakeups,
	       (unsigned long long)st.refused);
	if ((rc = asyncpool_xsk_close(s)) || (rc = asyncpool_xdp_destroy(x)))
		return dx_fail(rep, DEMO_URING_FAILED, "close", rc);
	printf("socket closed: %zu of %u frames in the pool\n", asyncpool_available(pool), DX_FRAMES);
	if (got != frames || bad || (unsigned)sent != nhold || st.completed != (uint64_t)sent ||
	    asyncpool_available(pool) != DX_FRAMES || asyncpool_check(pool)) {
		snprintf(rep->why, sizeof(rep->why),
			 "%u of %u received, %u wrong, %d of %u sent, %llu completed, %zu of %u back",
			 got, frames, bad, sent, nhold, (unsigned long long)st.completed,
			 asyncpool_available(pool), DX_FRAMES);
		return DEMO_URING_FAILED;
	}
	close(pk);
	asyncpool_shared_close(sp);
	return DEMO_URING_OK;
}

int demo_xdp(unsigned frames, char *why, size_t whylen)
{
	struct dx_report *rep;
	int status, rc;
	pid_t pid;

	rep = mmap(NULL, sizeof(*rep), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (rep == MAP_FAILED) {
		snprintf(why, whylen, "mmap: %s", strerror(errno));
		return DEMO_URING_FAILED;
	}
	rep->rc = DEMO_URING_FAILED;
	snprintf(rep->why, sizeof(rep->why), "the demo process died");
	fflush(stdout);
	fflush(stderr);
	pid = fork();
	if (pid < 0) {
		snprintf(why, whylen, "fork: %s", strerror(errno));
		munmap(rep, sizeof(*rep));
		return DEMO_URING_FAILED;
	}
	if (pid == 0) {
		rep->rc = dx_run(frames, rep);
		fflush(stdout);
		_exit(0);
	}
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	rc = rep->rc;
	snprintf(why, whylen, "%s", rep->why);
	munmap(rep, sizeof(*rep));
	return rc;
}

#else /* !HAVE_XDP */

int demo_xdp(unsigned frames, char *why, size_t whylen)
{
	(void)frames;
	snprintf(why, whylen, "built without libxdp and libbpf (--without-xdp)");
	return DEMO_URING_REFUSED;
}

#endif /* HAVE_XDP */
