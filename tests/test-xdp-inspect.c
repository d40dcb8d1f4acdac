/* SPDX-License-Identifier: MIT */
/*
 * asyncpool inspect, a second process reading the shared pool
 * read-only, shows where the AF_XDP frames of each attachment are (the
 * summary in its record, since 1.12: pool_layout.h, struct ap_xdp_sum):
 * exact counts while frames sit in known places, the same as
 * asyncpool_xdp_places() in the owner, in text and JSON:
 *
 *   a socket opened: its fill ring full, nothing else;
 *   40 frames received by the kernel, 10 taken as leases: 30 in rx;
 *   5 of those sent (copy mode: the kernel sends them at the kick and
 *   puts them in the completion ring), then reaped;
 *   a summary a peer scribbled (once far past what we lease, then 40
 *   random ones), and one of a process SIGKILLed with its fill ring
 *   full: "unknown", never numbers that do not add up;
 *   the socket closed: no summary.
 *
 * A veth pair in a network namespace of its own (IPv6 off, so that no
 * stray frame lands in a ring); SKIPs without root, netns, veth or XDP.
 */
#include "config.h"

#include <signal.h>
#include <sys/wait.h>

#include <asyncpool.h>
#include "tap.h"
#include "testutil.h"
#include "layout-util.h"
#include "../lib/xdp_internal.h"
#include "xdp-util.h"

#define is_str(got, want, ...) do {                                          \
	const char *got_ = (got), *want_ = (want);                            \
	if (!ok(!strcmp(got_, want_), __VA_ARGS__))                          \
		diag("  got  %s\n  want %s", got_, want_);                    \
} while (0)

#define FRAMES 1024u
#define FSIZE  2048u
#define RING   256u

static uint8_t mac_va[6], mac_vb[6];

/* The tool's output on our pool's fd; its exit status in *status. */
static void run_inspect(int fd, bool json, char *out, size_t len, int *status)
{
	const char *top = getenv("top_builddir");
	char cmd[512];
	size_t n;
	FILE *f;

	snprintf(cmd, sizeof(cmd), "%s/tools/asyncpool inspect %s/proc/%ld/fd/%d",
		 top ? top : ".", json ? "--json " : "", (long)getpid(), fd);
	f = popen(cmd, "r");
	n = f ? fread(out, 1, len - 1, f) : 0;
	out[n] = 0;
	*status = f ? pclose(f) : -1;
}

/* What inspect --json says of slot's frames, as text to compare; "none" without. */
static void json_xdp(const char *out, uint32_t slot, char *got, size_t len)
{
	char key[64];
	const char *p, *x, *end;

	snprintf(key, sizeof(key), "{\"slot\":%u,", slot);
	p = strstr(out, key);
	x = p ? strstr(p, "\"xdp\":") : NULL;
	end = p ? strstr(p + 1, "{\"slot\":") : NULL;
	if (!x || (end && x > end)) {
		snprintf(got, len, "none");
		return;
	}
	x += 6;
	end = strchr(x, '}');
	snprintf(got, len, "%.*s", end ? (int)(end - x + 1) : 0, x);
}

static void want_json(uint32_t slot, uint32_t sockets, const struct asyncpool_xdp_places *pl,
		      char *buf, size_t len)
{
	snprintf(buf, len,
		 "{\"known\":true,\"sockets\":%u,\"fill\":%u,\"kernel_rx\":%u,\"rx\":%u,\"leased\":%u,"
		 "\"tx\":%u,\"kernel_tx\":%u,\"completion\":%u}",
		 sockets, pl->fill, pl->kernel_rx, pl->rx, pl->leased, pl->tx, pl->kernel_tx,
		 pl->completion);
	(void)slot;
}

static void places(struct asyncpool_xdp *x, struct asyncpool_xdp_places *pl)
{
	memset(pl, 0, sizeof(*pl));
	pl->size = sizeof(*pl);
	if (asyncpool_xdp_places(x, pl))
		bail_out("asyncpool_xdp_places");
}

/*
 * inspect (JSON and text) says of our slot exactly what places() says
 * here, and what the test expects: fill, rx, leased, tx side.
 */
static void check_seen(int fd, uint32_t slot, struct asyncpool_xdp *x, uint32_t fill, uint32_t rx,
		       uint32_t leased, uint32_t tx_side, const char *what)
{
	struct asyncpool_xdp_places pl;
	char out[16384], got[512], want[512], line[256];
	int st;

	places(x, &pl);
	ok(pl.fill + pl.kernel_rx == fill && pl.rx == rx && pl.leased == leased &&
	   pl.tx + pl.kernel_tx + pl.completion == tx_side && pl.moving == 0,
	   "%s: the owner's places: fill %u + %u, rx %u, leased %u, tx side %u + %u + %u",
	   what, pl.fill, pl.kernel_rx, pl.rx, pl.leased, pl.tx, pl.kernel_tx, pl.completion);
	run_inspect(fd, true, out, sizeof(out), &st);
	json_xdp(out, slot, got, sizeof(got));
	want_json(slot, 1, &pl, want, sizeof(want));
	is_str(got, want, "%s: inspect --json sees the same, exactly", what);
	is_int(st, 0, "%s: inspect exits 0", what);
	run_inspect(fd, false, out, sizeof(out), &st);
	snprintf(line, sizeof(line),
		 "xdp frames:      slot %u sockets 1 fill %u kernel-rx %u rx %u leased %u tx %u "
		 "kernel-tx %u completion %u\n", slot, pl.fill, pl.kernel_rx, pl.rx, pl.leased,
		 pl.tx, pl.kernel_tx, pl.completion);
	ok(strstr(out, line) != NULL, "%s: inspect (text) the same", what);
}

/*
 * A peer writes random summaries (the epoch kept or not, sockets, places
 * near and far from what we lease): inspect exits 0 every time, and a
 * summary it calls known adds up to what the attachment leases, every
 * place no more than that.
 */
static void scribbled(int fd, uint32_t slot, struct asyncpool_xdp *x)
{
	static const char unknown[] = "{\"known\":false,\"why\":\"";
	uint32_t keep[2 + AP_XS_PLACES], bad = 0, known = 0, failed = 0;
	char out[16384], got[512], key[64];

	keep[0] = atomic_load(&x->sum->epoch);
	keep[1] = atomic_load(&x->sum->sockets);
	for (uint32_t i = 0; i < AP_XS_PLACES; i++)
		keep[2 + i] = atomic_load(&x->sum->place[i]);
	srand((unsigned)test_seed(55));
	for (int r = 0; r < 40; r++) {
		unsigned long long v[2 + AP_XS_PLACES], sum = 0, leased = 0;
		const char *p;
		int st;

		atomic_store(&x->sum->epoch, rand() % 4 ? keep[0] : (uint32_t)rand());
		atomic_store(&x->sum->sockets, rand() % 4 ? 1 : (uint32_t)rand());
		for (uint32_t i = 0; i < AP_XS_PLACES; i++)
			atomic_store(&x->sum->place[i], rand() % 2 ? (uint32_t)(rand() % 64) :
							rand() % 2 ? keep[2 + i] : (uint32_t)rand());
		run_inspect(fd, true, out, sizeof(out), &st);
		failed += st != 0;
		json_xdp(out, slot, got, sizeof(got));
		snprintf(key, sizeof(key), "{\"slot\":%u,", slot);
		p = strstr(out, key);
		p = p ? strstr(p, "\"leased\":") : NULL;
		if (p)
			leased = strtoull(p + 9, NULL, 10);
		if (sscanf(got, "{\"known\":true,\"sockets\":%llu,\"fill\":%llu,\"kernel_rx\":%llu,"
				"\"rx\":%llu,\"leased\":%llu,\"tx\":%llu,\"kernel_tx\":%llu,"
				"\"completion\":%llu}", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6],
			   &v[7]) == 8) {
			known++;
			for (int i = 1; i < 8; i++)
				sum += v[i];
			if (sum != leased || !v[0]) {
				bad++;
				diag("known: %s, but the attachment leases %llu", got, leased);
			}
		} else if (strcmp(got, "none") && strncmp(got, unknown, strlen(unknown))) {
			bad++;
			diag("neither known, unknown nor none: %s", got);
		}
	}
	atomic_store(&x->sum->epoch, keep[0]);
	atomic_store(&x->sum->sockets, keep[1]);
	for (uint32_t i = 0; i < AP_XS_PLACES; i++)
		atomic_store(&x->sum->place[i], keep[2 + i]);
	is_int(failed, 0, "40 scribbled summaries: inspect exits 0 every time");
	is_int(bad, 0, "every summary shown as known adds up to what the attachment leases "
		       "(%u of 40 known)", known);
}

/* The child: its own handle on the pool, a socket on vd, its fill ring full; then it waits. */
static void child(int shfd, int ready)
{
	struct asyncpool_shared_open_options oo = { .size = sizeof(oo), .fd = shfd,
						    .flags = ASYNCPOOL_SHARED_OPEN_NO_RECLAIM };
	struct asyncpool_xsk_options so = { .size = sizeof(so), .ifname = "vd", .ring_size = RING };
	struct asyncpool_shared *sp;
	struct asyncpool_xdp *x;
	struct asyncpool_xsk *s;
	char c = 1;
	int rc;

	if (asyncpool_shared_open(&oo, &sp) ||
	    asyncpool_xdp_create(asyncpool_shared_pool(sp), NULL, &x))
		_exit(2);
	for (int tries = 0; (rc = asyncpool_xsk_open(x, &so, &s)) == -EBUSY && tries < 2000; tries++)
		usleep(1000);
	if (rc || write(ready, &c, 1) != 1)
		_exit(3);
	for (;;)
		pause();
}

int main(void)
{
	struct asyncpool_xsk_options so = { .size = sizeof(so), .ifname = "vb", .ring_size = RING,
					    .fill_batch = 64 };
	struct asyncpool_shared_options o;
	struct asyncpool_xdp_places pl;
	struct asyncpool_lease held[3], l[16];
	struct asyncpool_shared *sp;
	struct asyncpool *pool;
	struct asyncpool_xdp *x;
	struct asyncpool_xsk *s;
	char why[256], out[16384], got[512];
	uint32_t slot, saved;
	int pk, fd, rc, st, k, pipefd[2];
	pid_t pid;

	tap_watchdog(120);
#ifndef HAVE_XDP
	skip_all("built without libxdp and libbpf (--without-xdp)");
#endif
	if (xt_netns(why, sizeof(why)))
		skip_all("%s", why);
	/* No IPv6 on the veths: no router solicitation lands in a ring. */
	if (system("sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1 "
		   ">/dev/null 2>&1"))
		diag("IPv6 stays on: a stray frame may land in a ring");
	if (xt_veth("va", "vb", why, sizeof(why)) || xt_veth("vc", "vd", why, sizeof(why)))
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
	fd = asyncpool_shared_fd(sp);
	if ((rc = asyncpool_xdp_create(pool, NULL, &x)))
		bail_out("asyncpool_xdp_create: %s", strerror(-rc));
	for (int tries = 0; (rc = asyncpool_xsk_open(x, &so, &s)) == -EBUSY && tries < 2000; tries++)
		usleep(1000);
	if (rc)
		skip_all("no AF_XDP socket with an XDP program here: %s", strerror(-rc));
	plan(40);

	if (!x->sum)
		bail_out("the creator's handle has no attachment summary");
	for (slot = 0; slot < AP_ATTACH_SLOTS; slot++)
		if (&layout_attach(sp, slot)->xdp == x->sum)
			break;
	ok(slot < AP_ATTACH_SLOTS, "the summary is in attachment record %u", slot);

	/* 1. Opened: the fill ring full; then 3 frames leased by the caller. */
	check_seen(fd, slot, x, RING, 0, 0, 0, "opened");
	for (int i = 0; i < 3; i++)
		if (asyncpool_acquire(pool, &held[i]))
			bail_out("acquire");
	check_seen(fd, slot, x, RING, 0, 3, 0, "3 acquired");

	/* 2. 40 frames received by the kernel, 10 of them taken. */
	for (uint32_t i = 0; i < 40; i++)
		if (xt_send(pk, mac_vb, mac_va, i))
			bail_out("send");
	for (int i = 0; i < 5000; i++) {
		places(x, &pl);
		if (pl.rx >= 40)
			break;
		usleep(1000);
	}
	is_int(pl.rx, 40, "the kernel put the 40 frames in the rx ring");
	k = asyncpool_xsk_recv(s, l, 10);
	is_int(k, 10, "10 received as leases");
	/* 40 left the fill ring; refills go by whole batches of 64. */
	check_seen(fd, slot, x, RING - 40, 30, 13, 0, "10 of 40 received");

	/* 3. 5 sent back out: the kick sends them, the completion ring has them. */
	rc = asyncpool_xsk_send(s, l, 5);
	is_int(rc, 5, "5 sent");
	check_seen(fd, slot, x, RING - 40, 30, 8, 5, "5 sent");
	for (int i = 0; i < 1000 && asyncpool_xsk_complete(s) == 0; i++) {
		places(x, &pl);
		if (pl.tx + pl.kernel_tx + pl.completion == 0)
			break;
		usleep(1000);
	}
	check_seen(fd, slot, x, RING - 40, 30, 8, 0, "5 reaped");
	asyncpool_release_bulk(l + 5, 5);
	asyncpool_release_bulk(held, 3);
	check_seen(fd, slot, x, RING - 40, 30, 0, 0, "the leases released");

	/* 4. A peer scribbles the summary: unknown, not its numbers. */
	saved = atomic_load(&x->sum->place[AP_XS_FILL]);
	atomic_store(&x->sum->place[AP_XS_FILL], 100000);
	run_inspect(fd, true, out, sizeof(out), &st);
	json_xdp(out, slot, got, sizeof(got));
	is_str(got, "{\"known\":false,\"why\":\"more frames in its rings than it leases\"}",
	       "a summary past what the attachment leases: unknown (JSON)");
	run_inspect(fd, false, out, sizeof(out), &st);
	ok(strstr(out, "unknown (more frames in its rings than it leases)") != NULL,
	   "the same in text");
	is_int(st, 0, "inspect exits 0: the summary is display only, the pool consistent");
	atomic_store(&x->sum->place[AP_XS_FILL], saved);
	scribbled(fd, slot, x);

	/* 5. Another process with its fill ring full, then SIGKILLed. */
	if (pipe(pipefd))
		bail_out("pipe");
	pid = fork();
	if (pid < 0)
		bail_out("fork");
	if (!pid) {
		close(pipefd[0]);
		child(fd, pipefd[1]);
	}
	close(pipefd[1]);
	{
		char c;

		if (!xt_wait(pipefd[0], 20000) || read(pipefd[0], &c, 1) != 1)
			bail_out("the child did not open its socket");
	}
	run_inspect(fd, true, out, sizeof(out), &st);
	{
		uint32_t cs = AP_ATTACH_SLOTS;

		for (uint32_t i = 0; i < AP_ATTACH_SLOTS; i++) {
			char key[64];

			snprintf(key, sizeof(key), "{\"slot\":%u,", i);
			if (i != slot && strstr(out, key))
				cs = i;
		}
		ok(cs < AP_ATTACH_SLOTS, "the child's attachment is listed (slot %u)", cs);
		json_xdp(out, cs, got, sizeof(got));
		is_str(got, "{\"known\":true,\"sockets\":1,\"fill\":256,\"kernel_rx\":0,\"rx\":0,"
			    "\"leased\":0,\"tx\":0,\"kernel_tx\":0,\"completion\":0}",
		       "the child's frames: its fill ring, seen from a third process");
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		close(pipefd[0]);
		run_inspect(fd, true, out, sizeof(out), &st);
		json_xdp(out, cs, got, sizeof(got));
		is_str(got, "{\"known\":false,\"why\":\"its process is gone\"}",
		       "the child killed: its frames unknown");
		json_xdp(out, slot, got, sizeof(got));
		ok(strstr(got, "\"known\":true,\"sockets\":1,\"fill\":216,") != NULL,
		   "ours still known: %s", got);
	}

	/* 6. Closed: no summary. */
	is_int(asyncpool_xsk_close(s), 0, "socket closed");
	run_inspect(fd, true, out, sizeof(out), &st);
	json_xdp(out, slot, got, sizeof(got));
	is_str(got, "none", "no socket: no xdp summary");
	is_int(asyncpool_xdp_destroy(x), 0, "UMEM destroyed");
	close(pk);
	asyncpool_shared_close(sp);
	return done_testing();
}
