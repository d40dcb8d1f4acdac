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
 * diagnostics.
 *
 * Then the kill points of the AF_XDP steps (lib/xdp_internal.h, enum
 * ap_xdp_point; since 1.11): a child in the loop of "random" kills
 * itself at the k-th pass (k = 1, 3) of each point: a refill that leased
 * its batch or wrote its descriptors, a receive that read descriptors
 * in the rx ring or made one lease, a send that marked its leases or
 * wrote or submitted its descriptors, a reap that took addresses off
 * the completion ring or gave them to the pool.  In its last breath it
 * lists the frames it had given to a ring or was moving (place[] not
 * 0); after the parent's first reclaim none of them may be FREE before
 * the quarantine (the kernel may still write or read them), and after
 * it every frame must be back, asyncpool_check() clean.  Every point
 * must be reached, and the points this test knows must be exactly the
 * AP_XDP_KILL_AT() calls in lib/xdp.c.
 *
 * SKIPs without root, netns, veth or XDP.
 */
#include "config.h"

#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>

#include <asyncpool.h>
#include "hooks.h"
#include "layout-util.h"
#include "../lib/xdp_internal.h"
#include "xdp-util.h"

#define FRAMES   4096u
#define FSIZE    2048u
#define RING     1024u
#define QUARANTINE_MS 100u

enum mode { M_FILL, M_LEASED, M_TX, M_COMP, M_RANDOM, M_COUNT, M_POINT = M_COUNT };
static const char *const mode_names[M_COUNT + 1] = { "fill", "leased", "tx", "completion", "random",
						     "kill point" };

/* The kill points, in the enum's order (lib/xdp_internal.h). */
static const char *const xnames[] = {
	"AP_XTP_FILL_LEASED", "AP_XTP_FILL_WRITTEN", "AP_XTP_RX_TAKEN", "AP_XTP_RX_LEASED",
	"AP_XTP_TX_CHECKED", "AP_XTP_TX_WRITTEN", "AP_XTP_TX_SUBMITTED", "AP_XTP_COMP_TAKEN",
	"AP_XTP_COMP_RELEASED",
};
_Static_assert(sizeof(xnames) / sizeof(xnames[0]) == AP_XTP_COUNT,
	       "a name for every kill point of enum ap_xdp_point");
#define KILL_KS 2
static const unsigned kill_ks[KILL_KS] = { 1, 3 };

/*
 * What a child killed at a point says in its last breath (a shared
 * mapping made before the fork): the point + 1, and the frames it held
 * in a ring or between a ring and the pool (place[] not 0).
 */
struct last_words {
	uint32_t point;
	uint32_t n;
	uint32_t idx[FRAMES];
};
static struct last_words *words;
static struct asyncpool_xdp *child_x;
static enum ap_xdp_point kill_at;
static unsigned kill_after, kill_seen;

static void kill_hook(enum ap_xdp_point p)
{
	if (p != kill_at || ++kill_seen != kill_after)
		return;
	words->n = 0;
	for (uint32_t i = 0; i < child_x->count && i < FRAMES; i++)
		if (atomic_load_explicit(&child_x->place[i], memory_order_relaxed))
			words->idx[words->n++] = i;
	words->point = (uint32_t)p + 1;
	raise(SIGKILL);
}

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
	if (m == M_POINT) {
		child_x = x;
		ap_xdp_test_hook_point = kill_hook;
	}
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
		if (m == M_RANDOM || m == M_POINT) {
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

/* What one death showed. */
struct outcome {
	bool killed;                /* by SIGKILL */
	bool at_point;              /* M_POINT: at the point asked */
	unsigned long lost;         /* frames not back */
	unsigned long early;        /* frames back before the quarantine that may not be */
	unsigned long held;         /* frames held at death */
	unsigned long ring_frames;  /* M_POINT: frames it had in a ring or between */
	uint64_t back_ms;           /* until every frame was back */
};

/*
 * One child, forked, killed (by itself where m says, or by us for
 * M_RANDOM, or at the point of kill_at for M_POINT), then the reclaim
 * until every frame is back or 10 s past the quarantine.
 */
static struct outcome one_death(struct asyncpool_shared *sp, int pk, enum mode m, unsigned int *seq)
{
	struct asyncpool *pool = asyncpool_shared_pool(sp);
	struct outcome out = { 0 };
	int ready[2], status;
	size_t avail;
	uint64_t t0;
	bool dead = false;
	char c;
	pid_t pid;

	if (pipe(ready))
		bail_out("pipe");
	memset(words, 0, sizeof(*words));
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
			(void)xt_send(pk, mac_vb, mac_va, (*seq)++);
		if (xt_wait(ready[0], 1)) {
			if (read(ready[0], &c, 1) != 1)
				dead = true;   /* it died before saying so (M_POINT: always) */
			break;
		}
	}
	if (m == M_RANDOM) {
		/* Keep it busy, then kill it at a random moment. */
		int bursts = 1 + rand() % 64;

		for (int b = 0; b < bursts; b++)
			for (int i = 0; i < 16; i++)
				(void)xt_send(pk, mac_vb, mac_va, (*seq)++);
		usleep((useconds_t)(rand() % 3000));
		kill(pid, SIGKILL);
	}
	if (m == M_POINT && !dead)
		kill(pid, SIGTERM);     /* never reached its point: not a kill at it */
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	close(ready[0]);
	out.killed = WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
	out.at_point = out.killed && words->point == (uint32_t)kill_at + 1;
	if (!out.killed)
		diag("%s: the child %s %d, not killed", mode_names[m],
		     WIFEXITED(status) ? "exited" : "died of signal",
		     WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
	t0 = now_ns();
	(void)asyncpool_reclaim(pool);
	avail = asyncpool_available(pool);
	out.held = FRAMES - avail;
	if (ms_since(t0) < QUARANTINE_MS) {
		/* The fill ring alone holds RING frames, leased: not before the quarantine. */
		if (m != M_POINT && avail == FRAMES)
			out.early = FRAMES;
		/* Nothing it had given a ring, or was moving, is FREE yet. */
		if (m == M_POINT && out.at_point)
			for (uint32_t i = 0; i < words->n && i < FRAMES; i++)
				if (words->idx[i] < FRAMES &&
				    AP_W_KIND(atomic_load(layout_state(sp, words->idx[i]))) == AP_K_FREE)
					out.early++;
	}
	out.ring_frames = words->n;
	while (asyncpool_available(pool) != FRAMES && ms_since(t0) < QUARANTINE_MS + 10000) {
		usleep(5000);
		(void)asyncpool_reclaim(pool);
	}
	out.back_ms = ms_since(t0);
	if (asyncpool_available(pool) != FRAMES || asyncpool_check(pool) != 0)
		out.lost = FRAMES - asyncpool_available(pool) + (asyncpool_check(pool) != 0);
	return out;
}

/* The AP_XDP_KILL_AT(name) calls in lib/xdp.c: in[p] per point; how many unknown. */
static int scan_xdp_source(unsigned *in)
{
	const char *top = getenv("top_srcdir");
	char path[4096], line[1024];
	int unknown = 0;
	FILE *f;

	snprintf(path, sizeof(path), "%s/lib/xdp.c", top ? top : ".");
	f = fopen(path, "r");
	if (!f)
		bail_out("cannot read %s: set top_srcdir", path);
	while (fgets(line, sizeof(line), f)) {
		char *at = strstr(line, "AP_XDP_KILL_AT(");
		int p;

		if (!at)
			continue;
		at += strlen("AP_XDP_KILL_AT(");
		for (p = 0; p < AP_XTP_COUNT; p++)
			if (!strncmp(at, xnames[p], strlen(xnames[p])) && at[strlen(xnames[p])] == ')')
				break;
		if (p < AP_XTP_COUNT) {
			in[p]++;
		} else {
			diag("lib/xdp.c: a kill point this test does not know: %s", at);
			unknown++;
		}
	}
	fclose(f);
	return unknown;
}

int main(void)
{
	struct asyncpool_shared_options o;
	struct asyncpool_shared *sp;
	struct asyncpool *pool;
	unsigned long rounds = env_number("ASYNCPOOL_XDP_KILLS", 10);
	unsigned long lost = 0, early = 0, slow = 0, failed = 0, held_total = 0;
	unsigned in[AP_XTP_COUNT] = { 0 };
	uint64_t worst_ms = 0;
	unsigned int seq = 0;
	char why[256];
	int pk;

	tap_watchdog(120 + (unsigned)(rounds * 2));
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
	words = mmap(NULL, sizeof(*words), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (words == MAP_FAILED)
		bail_out("mmap");
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
	plan(4 + AP_XTP_COUNT * KILL_KS + 1 + AP_XTP_COUNT);
	srand((unsigned)test_seed(55));
	for (unsigned long r = 0; r < rounds; r++) {
		enum mode m = (enum mode)(r % M_COUNT);
		struct outcome d = one_death(sp, pk, m, &seq);

		if (!d.killed) {
			failed++;
			continue;
		}
		held_total += d.held;
		early += d.early != 0;
		if (d.lost) {
			lost += d.lost;
			diag("round %lu (%s): %lu frames not back", r, mode_names[m], d.lost);
			continue;
		}
		if (d.back_ms > worst_ms)
			worst_ms = d.back_ms;
		if (d.back_ms > QUARANTINE_MS + 1000)
			slow++;
	}
	diag("%lu kills; %lu frames held at death in all (%.0f a kill); every frame back within %llu ms "
	     "(quarantine %u ms)", rounds, held_total, rounds ? (double)held_total / rounds : 0.0,
	     (unsigned long long)worst_ms, QUARANTINE_MS);
	is_int(failed, 0, "every child died by SIGKILL where it was told to");
	is_int(lost, 0, "no frame lost across %lu kills", rounds);
	is_int(early, 0, "no leased frame back before the quarantine");
	is_int(slow, 0, "every frame back within the quarantine plus 1 s");

	for (int p = 0; p < AP_XTP_COUNT; p++) {
		for (int j = 0; j < KILL_KS; j++) {
			struct outcome d;

			kill_at = (enum ap_xdp_point)p;
			kill_after = kill_ks[j];
			kill_seen = 0;
			d = one_death(sp, pk, M_POINT, &seq);
			in[p] += d.at_point;
			ok(d.at_point && !d.lost && !d.early,
			   "killed at %s #%u: %lu frames held, %lu in a ring or between; "
			   "none of those free before the quarantine (%lu were); all back (%lu not), "
			   "in %llu ms", xnames[p], kill_after, d.held, d.ring_frames, d.early,
			   d.lost, (unsigned long long)d.back_ms);
		}
	}
	{
		unsigned src[AP_XTP_COUNT] = { 0 };

		is_int(scan_xdp_source(src), 0, "every AP_XDP_KILL_AT() in lib/xdp.c is one this test kills at");
		for (int p = 0; p < AP_XTP_COUNT; p++)
			ok(src[p] > 0 && in[p] > 0, "%s is in lib/xdp.c (%u calls) and reached (%u kills)",
			   xnames[p], src[p], in[p]);
	}
	close(pk);
	asyncpool_shared_close(sp);
	return done_testing();
}
