/* SPDX-License-Identifier: MIT */
/*
 * The delivery rules of a channel (issue 52), across real processes:
 * - item 1: a receiver SIGKILLed with K items queued for it and J held
 *   (received, not released): the next receiver gets the K at once and
 *   the J after the quarantine, flagged ASYNCPOOL_CHANNEL_REDELIVERED,
 *   each exactly once with its tag, span and bytes, and every buffer is
 *   back at the end; with ASYNCPOOL_SHARED_CHANNEL_DROP (1.4's rule)
 *   the K go back to the pool at once and the J after the quarantine;
 * - item 2: an item's span and tag, refused spans (a peer's writing of
 *   the slot) counted and never handed out, the token form;
 * - items 3 and 4: a send that waits for room (blocking, the wait fd),
 *   a woken wait returns far inside the 50 ms slice (a lost wake-up
 *   would return at the slice), the ends' life, -EPIPE from a wait
 *   whose peer died;
 * - every new call's bad input, with exact errno values.
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifdef HAVE_LIBURING
#include <liburing.h>
#endif

#include <asyncpool.h>
#include "tap.h"
#include "testutil.h"
#include "layout-util.h"
#include "../lib/channel_ring.h"

#define N     32
#define BS    256
#define CAP   16
#define K     5         /* queued for the receiver that dies */
#define J     3         /* held by it */
#define QMS   100       /* the quarantine */
#define TAG0  1000u

static struct asyncpool_shared *make(uint32_t flags)
{
	struct asyncpool_shared_options o;
	struct asyncpool_shared *sp;

	shared_options(&o, BS, N);
	o.channels = 2;
	o.channel_capacity = CAP;
	o.flags = flags;
	if (asyncpool_shared_create(&o, &sp))
		bail_out("shared_create");
	return sp;
}

static struct asyncpool_channel_stats stats_of(struct asyncpool *pool, uint32_t c)
{
	struct asyncpool_channel_stats s = { .size = sizeof(s) };

	if (asyncpool_channel_stats(pool, c, &s))
		bail_out("stats");
	return s;
}

static struct asyncpool_channel *open_end(struct asyncpool *pool, uint32_t c, uint32_t end)
{
	struct asyncpool_channel *ch;

	if (asyncpool_channel_open(pool, c, end, &ch))
		bail_out("open channel %u end %u", c, end);
	return ch;
}

/* Item i: the span [16, 16 + 100 + i) of its buffer, filled with 'a' + i, tag TAG0 + i. */
static void send_item_i(struct asyncpool *pool, struct asyncpool_channel *s, unsigned i)
{
	struct asyncpool_lease l;

	if (asyncpool_acquire(pool, &l))
		bail_out("acquire");
	l.span.offset += 16;
	l.span.length = 100 + i;
	memset(asyncpool_span_ptr(l.span), 'a' + (int)i, l.span.length);
	if (asyncpool_channel_send_item(s, &l, TAG0 + i))
		bail_out("send_item %u", i);
}

/* Whether item it is item i, whole. */
static bool item_is(const struct asyncpool_channel_item *it, unsigned i)
{
	const unsigned char *p = asyncpool_span_ptr(it->lease.span);

	if (it->tag != TAG0 + i || it->lease.span.length != 100 + i ||
	    it->lease.span.offset != (size_t)it->lease.buffer_index * BS + 16)
		return false;
	for (size_t k = 0; k < it->lease.span.length; k++)
		if (p[k] != 'a' + i)
			return false;
	return true;
}

/* A child that opens the pool and channel 0's receiving end, receives j items, dies. */
static void receiver_dies_holding(struct asyncpool_shared *sp, unsigned j)
{
	int status;
	pid_t pid;

	fflush(stdout);
	pid = fork_or_bail();
	if (pid == 0) {
		struct asyncpool_channel_item it[J];
		struct asyncpool_shared *csp;
		struct asyncpool_channel *r;

		if (asyncpool_shared_open_fd(asyncpool_shared_fd(sp), &csp) ||
		    asyncpool_channel_open(asyncpool_shared_pool(csp), 0, ASYNCPOOL_CHANNEL_RECV, &r))
			_exit(2);
		if (asyncpool_channel_recv_items(r, it, j) != (int)j)
			_exit(3);
		for (unsigned k = 0; k < j; k++)
			if (!item_is(&it[k], k) || it[k].flags)
				_exit(4);
		raise(SIGKILL);
		_exit(5);
	}
	if (waitpid(pid, &status, 0) != pid || !WIFSIGNALED(status))
		bail_out("the receiving child did not die (status %d)", status);
}

static void test_restart(void)
{
	struct asyncpool_shared *sp = make(0);
	struct asyncpool *pool = asyncpool_shared_pool(sp);
	struct asyncpool_channel *s, *r;
	struct asyncpool_channel_item it[N];
	struct asyncpool_channel_stats st;
	unsigned seen[K + J] = { 0 };
	uint64_t killed;
	bool whole = true, flags_ok = true;
	int got;

	if (asyncpool_set_quarantine(pool, QMS))
		bail_out("quarantine");
	s = open_end(pool, 0, ASYNCPOOL_CHANNEL_SEND);
	for (unsigned i = 0; i < K + J; i++)
		send_item_i(pool, s, i);
	receiver_dies_holding(sp, J);
	killed = now_ns();
	is_int(asyncpool_channel_peer(s), ASYNCPOOL_CHANNEL_END_DEAD,
	       "restart: the sender sees its receiver dead");
	is_int(asyncpool_channel_end(pool, 0, ASYNCPOOL_CHANNEL_RECV), ASYNCPOOL_CHANNEL_END_DEAD,
	       "  asyncpool_channel_end says the same");
	is_int(stats_of(pool, 0).depth, K, "  the %d items queued for it are still in the channel", K);
	r = open_end(pool, 0, ASYNCPOOL_CHANNEL_RECV);
	ok(true, "  a new receiver takes the dead end");
	is_int(asyncpool_channel_peer(s), ASYNCPOOL_CHANNEL_END_LIVE, "  the sender sees it live");
	got = asyncpool_channel_recv_items(r, it, N);
	is_int(got, K, "  it receives the %d queued at once", K);
	for (int k = 0; k < got; k++) {
		whole &= item_is(&it[k], J + (unsigned)k);
		flags_ok &= it[k].flags == 0;
	}
	ok(whole, "  in order, each with its tag, span and bytes");
	ok(flags_ok, "  not flagged redelivered");
	for (int k = 0; k < got; k++)
		asyncpool_lease_release(&it[k].lease);
	is_int(asyncpool_channel_recv_items(r, it, N), -EAGAIN,
	       "  the %d it held: not before the quarantine", J);
	is_int(asyncpool_available(pool), N - J, "  still leased by the dead");
	/* The wait runs the reclaim (every 10 ms at most) once the quarantine is over. */
	for (unsigned k = 0; k < J; k++) {
		got = asyncpool_channel_recv_item_wait(r, &it[k], 10000000000);
		if (got)
			break;
	}
	is_int(got, 0, "  then the %d held come back through the wait", J);
	ok((now_ns() - killed) / 1000000 >= QMS, "  after the quarantine (%llu ms since the kill)",
	   (unsigned long long)((now_ns() - killed) / 1000000));
	whole = flags_ok = true;
	for (unsigned k = 0; k < J && !got; k++) {
		unsigned i = (unsigned)(it[k].tag - TAG0);

		if (i < K + J)
			seen[i]++;
		whole &= i < J && item_is(&it[k], i);
		flags_ok &= it[k].flags == ASYNCPOOL_CHANNEL_REDELIVERED;
	}
	ok(whole, "  each with its tag, span and bytes");
	ok(flags_ok, "  flagged ASYNCPOOL_CHANNEL_REDELIVERED");
	ok(seen[0] == 1 && seen[1] == 1 && seen[2] == 1, "  each exactly once");
	for (unsigned k = 0; k < J && !got; k++)
		asyncpool_lease_release(&it[k].lease);
	is_int(asyncpool_channel_recv_items(r, it, N), -EAGAIN, "  nothing more");
	is_int(asyncpool_reclaim(pool), 0, "  nothing left to reclaim");
	st = stats_of(pool, 0);
	is_int((long)st.redelivered, J, "stats: redelivered %d", J);
	is_int((long)st.received, 2 * J + K, "stats: received %d (the dead's %d too)", 2 * J + K, J);
	ok(st.corruptions == 0 && st.bad_spans == 0 && st.reclaimed == 0 && st.drop == 0,
	   "stats: no corruption, no span refused, nothing reclaimed, not drop");
	is_int(asyncpool_available(pool), N, "every buffer back");
	is_int(asyncpool_check(pool), 0, "check clean");
	asyncpool_channel_close(r);
	asyncpool_channel_close(s);
	asyncpool_shared_close(sp);
}

/*
 * The same restart with the new receiver in asyncpool_channel_recv_any()
 * over channel 1's end and channel 0's: that wait runs the reclaim too
 * (1.11; before, the held items waited for somebody else's reclaim).
 */
static void test_restart_any(void)
{
	struct asyncpool_shared *sp = make(0);
	struct asyncpool *pool = asyncpool_shared_pool(sp);
	struct asyncpool_channel *s, *r[2];
	struct asyncpool_channel_item it[N];
	unsigned seen[J] = { 0 };
	bool whole = true, flags_ok = true;
	int got = 0;

	if (asyncpool_set_quarantine(pool, QMS))
		bail_out("quarantine");
	s = open_end(pool, 0, ASYNCPOOL_CHANNEL_SEND);
	for (unsigned i = 0; i < J; i++)
		send_item_i(pool, s, i);
	receiver_dies_holding(sp, J);
	r[0] = open_end(pool, 1, ASYNCPOOL_CHANNEL_RECV);
	r[1] = open_end(pool, 0, ASYNCPOOL_CHANNEL_RECV);
	is_int(asyncpool_channel_recv_any(r, 2, &it[0], 0), -ETIMEDOUT,
	       "restart, recv_any: the %d held, not before the quarantine", J);
	for (unsigned k = 0; k < J; k++) {
		got = asyncpool_channel_recv_any(r, 2, &it[k], 10000000000);
		if (got != 1)
			break;
	}
	is_int(got, 1, "  then the %d held come back through recv_any, from end 1 (channel 0)", J);
	for (unsigned k = 0; k < J && got == 1; k++) {
		unsigned i = (unsigned)(it[k].tag - TAG0);

		if (i < J)
			seen[i]++;
		whole &= i < J && item_is(&it[k], i);
		flags_ok &= it[k].flags == ASYNCPOOL_CHANNEL_REDELIVERED;
		asyncpool_lease_release(&it[k].lease);
	}
	ok(whole && flags_ok && seen[0] == 1 && seen[1] == 1 && seen[2] == 1,
	   "  each once, whole, flagged ASYNCPOOL_CHANNEL_REDELIVERED");
	is_int(asyncpool_available(pool), N, "  every buffer back");
	asyncpool_channel_close(r[0]);
	asyncpool_channel_close(r[1]);
	asyncpool_channel_close(s);
	asyncpool_shared_close(sp);
}

/* ASYNCPOOL_SHARED_CHANNEL_DROP: 1.4's rule. */
static void test_drop(void)
{
	struct asyncpool_shared *sp = make(ASYNCPOOL_SHARED_CHANNEL_DROP);
	struct asyncpool *pool = asyncpool_shared_pool(sp);
	struct asyncpool_channel_item it[N];
	struct asyncpool_channel *s, *r;
	int rc = 0;

	if (asyncpool_set_quarantine(pool, QMS))
		bail_out("quarantine");
	is_int((long)stats_of(pool, 0).drop, 1, "drop: stats say so");
	s = open_end(pool, 0, ASYNCPOOL_CHANNEL_SEND);
	for (unsigned i = 0; i < K + J; i++)
		send_item_i(pool, s, i);
	receiver_dies_holding(sp, J);
	r = open_end(pool, 0, ASYNCPOOL_CHANNEL_RECV);
	is_int(asyncpool_channel_recv_items(r, it, N), -EAGAIN,
	       "drop: the next receiver gets nothing");
	is_int((long)stats_of(pool, 0).reclaimed, K, "  the %d queued went back to the pool", K);
	is_int(asyncpool_available(pool), N - J, "  the %d held are still leased", J);
	for (int t = 0; t < 100 && asyncpool_available(pool) != N; t++) {
		struct timespec ts = { 0, 10000000 };

		nanosleep(&ts, NULL);
		rc = asyncpool_reclaim(pool);
	}
	is_int(asyncpool_available(pool), N, "  after the quarantine, to the pool (reclaim %d)", rc);
	is_int(asyncpool_channel_recv_items(r, it, N), -EAGAIN, "  and not to the channel");
	is_int((long)stats_of(pool, 0).redelivered, 0, "  redelivered 0");
	is_int(asyncpool_check(pool), 0, "  check clean");
	asyncpool_channel_close(r);
	asyncpool_channel_close(s);
	asyncpool_shared_close(sp);
}

/* Spans and tags; a peer's span refused; the token form. */
static void test_spans(void)
{
	struct asyncpool_shared *sp = make(0);
	struct asyncpool *pool = asyncpool_shared_pool(sp);
	struct asyncpool_channel *s = open_end(pool, 1, ASYNCPOOL_CHANNEL_SEND);
	struct asyncpool_channel *r = open_end(pool, 1, ASYNCPOOL_CHANNEL_RECV);
	struct ap_chan *ch = ap_chan_in(asyncpool_shared_shm(sp)->base, N, 2, CAP, 1);
	struct asyncpool_channel_entry en[2], back[4];
	struct asyncpool_channel_item it;
	struct asyncpool_lease l, got;
	uint64_t t[2];
	static const uint64_t forged[] = { AP_SPAN_MAKE(200, 100), AP_SPAN_MAKE(0, BS + 1),
					   AP_SPAN_MAKE(0xffffffffu, 0xffffffffu),
					   AP_SPAN_MAKE(BS, 1) };

	/* The old calls: the whole buffer, tag 0. */
	if (asyncpool_acquire(pool, &l))
		bail_out("acquire");
	is_int(asyncpool_channel_send(s, &l), 0, "spans: send");
	is_int(asyncpool_channel_recv_items(r, &it, 1), 1, "  recv_items");
	ok(it.tag == 0 && it.flags == 0 && it.lease.span.length == BS &&
	   it.lease.span.offset == (size_t)it.lease.buffer_index * BS,
	   "  the old send: the whole buffer, tag 0");
	/* An item's span to the old recv. */
	it.lease.span.offset += 64;
	it.lease.span.length = 10;
	is_int(asyncpool_channel_send_item(s, &it.lease, 77), 0, "send_item of a span of 10 at 64");
	is_int(asyncpool_channel_recv(r, &got), 0, "  the old recv");
	ok(got.span.length == 10 && got.span.offset == (size_t)got.buffer_index * BS + 64,
	   "  gives the lease that span");
	/* The token form. */
	t[0] = asyncpool_lease_token(&got);
	if (asyncpool_acquire_tokens(pool, &t[1], 1))
		bail_out("acquire");
	memset(en, 0, sizeof(en));
	en[0] = (struct asyncpool_channel_entry){ .token = t[0], .tag = 5, .offset = 8, .length = 9 };
	en[1] = (struct asyncpool_channel_entry){ .token = t[1], .tag = UINT64_MAX };
	is_int(asyncpool_channel_send_entries(s, en, 2), 2, "send_entries of 2");
	is_int(asyncpool_channel_recv_entries(r, back, 4), 2, "  recv_entries: 2");
	ok(back[0].tag == 5 && back[0].offset == 8 && back[0].length == 9 && back[0].flags == 0 &&
	   (uint32_t)back[0].token == (uint32_t)t[0] && back[0].token != t[0],
	   "  the first: its span and tag, a new generation");
	ok(back[1].tag == UINT64_MAX && back[1].offset == 0 && back[1].length == BS,
	   "  the second: offset 0 and length 0 sent, the whole buffer received");
	is_int(asyncpool_release_token(pool, back[0].token), 0, "  released by token");
	t[1] = back[1].token;
	/* A peer rewrites the span of a published entry. */
	for (unsigned f = 0; f < sizeof(forged) / sizeof(forged[0]); f++) {
		uint64_t head = atomic_load(&ch->head);
		struct asyncpool_lease x;

		if (asyncpool_channel_send_token(s, t[1]))
			bail_out("send");
		atomic_store(&ap_chan_slots(ch)[head & (CAP - 1)].span, forged[f]);
		is_int(asyncpool_channel_recv(r, &x), -EAGAIN,
		       "a forged span %u+%u: refused", AP_SPAN_OFF(forged[f]), AP_SPAN_LEN(forged[f]));
		is_int((long)stats_of(pool, 1).bad_spans, (long)f + 1, "  counted in bad_spans");
		is_int(asyncpool_available(pool), N, "  the buffer back in the pool");
		if (asyncpool_acquire_tokens(pool, &t[1], 1))
			bail_out("acquire");
	}
	asyncpool_release_token(pool, t[1]);
	is_int((long)stats_of(pool, 1).corruptions, 0, "no corruption counted");
	is_int(asyncpool_available(pool), N, "every buffer back");
	asyncpool_channel_close(r);
	asyncpool_channel_close(s);
	asyncpool_shared_close(sp);
}

static void test_bad_input(void)
{
	struct asyncpool_shared *sp = make(0);
	struct asyncpool *pool = asyncpool_shared_pool(sp);
	struct asyncpool_channel *s = open_end(pool, 0, ASYNCPOOL_CHANNEL_SEND);
	struct asyncpool_channel *r = open_end(pool, 0, ASYNCPOOL_CHANNEL_RECV);
	struct asyncpool_channel_entry en = { 0 };
	struct asyncpool_channel_item it;
	struct asyncpool_shared_options o;
	struct asyncpool_shared *bad;
	struct asyncpool_lease l, keep;
	unsigned char sqe[64];

	if (asyncpool_acquire(pool, &l))
		bail_out("acquire");
	keep = l;
	is_int(asyncpool_channel_send_item(NULL, &l, 1), -EINVAL, "send_item: NULL channel");
	is_int(asyncpool_channel_send_item(s, NULL, 1), -EINVAL, "send_item: NULL lease");
	is_int(asyncpool_channel_send_item(r, &l, 1), -EINVAL, "send_item: a receiving end");
	l.span.offset = keep.span.offset + 200;
	l.span.length = 100;
	is_int(asyncpool_channel_send_item(s, &l, 1), -EINVAL, "send_item: a span past the buffer");
	l.span.offset = keep.span.offset - 1;
	l.span.length = 1;
	is_int(asyncpool_channel_send_item(s, &l, 1), -EINVAL, "send_item: a span before it");
	l = keep;
	is_int(asyncpool_channel_send_wait(s, NULL, 1, 0), -EINVAL, "send_wait: NULL lease");
	is_int(asyncpool_channel_send_wait(r, &l, 1, 0), -EINVAL, "send_wait: a receiving end");
	is_int(asyncpool_channel_send_entries(s, NULL, 1), -EINVAL, "send_entries: NULL");
	is_int(asyncpool_channel_send_entries(s, &en, 0), -EINVAL, "send_entries: 0");
	en.token = asyncpool_lease_token(&l);
	en.offset = BS;
	en.length = 1;
	is_int(asyncpool_channel_send_entries(s, &en, 1), -EINVAL, "send_entries: a span past the buffer");
	en.offset = 0;
	en.flags = ASYNCPOOL_CHANNEL_REDELIVERED;
	is_int(asyncpool_channel_send_entries(s, &en, 1), -EINVAL, "send_entries: flags");
	en.flags = 0;
	en.reserved = 1;
	is_int(asyncpool_channel_send_entries(s, &en, 1), -EINVAL, "send_entries: reserved");
	en.reserved = 0;
	en.token = (uint64_t)N;
	is_int(asyncpool_channel_send_entries(s, &en, 1), -EINVAL, "send_entries: generation 0");
	is_int(asyncpool_channel_send_entries(r, &en, 1), -EINVAL, "send_entries: a receiving end");
	is_int((long)stats_of(pool, 0).sent, 0, "  nothing was sent");
	is_int(asyncpool_channel_recv_items(r, NULL, 1), -EINVAL, "recv_items: NULL");
	is_int(asyncpool_channel_recv_items(r, &it, 0), -EINVAL, "recv_items: 0");
	is_int(asyncpool_channel_recv_items(s, &it, 1), -EINVAL, "recv_items: a sending end");
	is_int(asyncpool_channel_recv_items(NULL, &it, 1), -EINVAL, "recv_items: NULL channel");
	is_int(asyncpool_channel_recv_entries(r, NULL, 1), -EINVAL, "recv_entries: NULL");
	is_int(asyncpool_channel_recv_entries(s, &en, 1), -EINVAL, "recv_entries: a sending end");
	is_int(asyncpool_channel_recv_item_wait(r, NULL, 0), -EINVAL, "recv_item_wait: NULL");
	is_int(asyncpool_channel_recv_item_wait(s, &it, 0), -EINVAL, "recv_item_wait: a sending end");
	is_int(asyncpool_channel_recv_item_wait(r, &it, 0), -ETIMEDOUT, "recv_item_wait 0, empty: -ETIMEDOUT");
	is_int(asyncpool_channel_prep_send_wait(r, (void *)sqe), -EINVAL,
	       "prep_send_wait: a receiving end");
	is_int(asyncpool_channel_prep_send_wait(s, NULL), -EINVAL, "prep_send_wait: NULL sqe");
	is_int(asyncpool_channel_peer(NULL), -EINVAL, "peer: NULL");
	is_int(asyncpool_channel_end(NULL, 0, ASYNCPOOL_CHANNEL_SEND), -EINVAL, "end: NULL pool");
	is_int(asyncpool_channel_end(pool, 2, ASYNCPOOL_CHANNEL_SEND), -EINVAL, "end: channel 2 of 2");
	is_int(asyncpool_channel_end(pool, 0, 3), -EINVAL, "end: end 3");
	is_int(asyncpool_channel_end(pool, 0, ASYNCPOOL_CHANNEL_SEND), ASYNCPOOL_CHANNEL_END_LIVE,
	       "end: ours, live");
	is_int(asyncpool_channel_end(pool, 1, ASYNCPOOL_CHANNEL_RECV), ASYNCPOOL_CHANNEL_END_FREE,
	       "end: channel 1's, free");
	shared_options(&o, BS, N);
	o.flags = ASYNCPOOL_SHARED_CHANNEL_DROP;
	is_int(asyncpool_shared_create(&o, &bad), -EINVAL, "create: CHANNEL_DROP without channels");
	asyncpool_lease_release(&keep);
	is_int(asyncpool_available(pool), N, "every buffer back");
	asyncpool_channel_close(r);
	asyncpool_channel_close(s);
	asyncpool_shared_close(sp);
}

/* ---- waits ---- */

struct later {
	struct asyncpool        *pool;
	struct asyncpool_channel *ch;
	long                     delay_ms;
	uint64_t                 at;     /* when it acted */
};

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };

	nanosleep(&ts, NULL);
}

/* After delay_ms, receive one item and release it. */
/* Run asyncpool inspect (args: "" or "--json ") on sp into out. */
static void inspect(struct asyncpool_shared *sp, const char *args, char *out, size_t size)
{
	const char *top = getenv("top_builddir");
	char cmd[512];
	size_t n;
	FILE *f;

	snprintf(cmd, sizeof(cmd), "%s/tools/asyncpool inspect %s/proc/%ld/fd/%d",
		 top ? top : ".", args, (long)getpid(), asyncpool_shared_fd(sp));
	f = popen(cmd, "r");
	n = f ? fread(out, 1, size - 1, f) : 0;
	out[n] = 0;
	if (f)
		pclose(f);
}

/* asyncpool inspect shows what waits in a channel's redelivery ring (1.11). */
static void test_inspect_redo(void)
{
	struct asyncpool_shared *sp = make(0);
	struct asyncpool *pool = asyncpool_shared_pool(sp);
	struct asyncpool_channel *s, *r;
	struct asyncpool_channel_item it[N];
	char out[8192];
	int rc;

	if (asyncpool_set_quarantine(pool, QMS))
		bail_out("quarantine");
	s = open_end(pool, 0, ASYNCPOOL_CHANNEL_SEND);
	for (unsigned i = 0; i < J + 1; i++)
		send_item_i(pool, s, i);
	receiver_dies_holding(sp, J);
	(void)asyncpool_reclaim(pool);  /* sees the death: the quarantine starts */
	sleep_ms(QMS + 20);
	rc = asyncpool_reclaim(pool);
	ok(rc >= 0, "inspect: a reclaim after the quarantine (%d to the freelist)", rc);
	inspect(sp, "", out, sizeof(out));
	ok(strstr(out, " reclaimed 0 redelivery 3 redelivered 3 bad_spans 0") != NULL,
	   "inspect: channel 0's redelivery ring holds the 3 held, redelivered 3");
	inspect(sp, "--json ", out, sizeof(out));
	ok(strstr(out, "\"in_flight\":0,\"redelivery_depth\":3,\"redelivered\":3,"
		       "\"bad_spans\":0}") != NULL,
	   "inspect --json: the same");
	r = open_end(pool, 0, ASYNCPOOL_CHANNEL_RECV);
	is_int(asyncpool_channel_recv_items(r, it, N), J + 1, "  the receiver takes the 3 and the 1");
	for (unsigned k = 0; k < J + 1; k++)
		asyncpool_lease_release(&it[k].lease);
	inspect(sp, "", out, sizeof(out));
	ok(strstr(out, " redelivery 0 redelivered 3 bad_spans 0") != NULL,
	   "inspect: the redelivery ring empty again");
	is_int(asyncpool_available(pool), N, "  every buffer back");
	asyncpool_channel_close(r);
	asyncpool_channel_close(s);
	asyncpool_shared_close(sp);
}

static void *recv_later(void *arg)
{
	struct later *w = arg;
	struct asyncpool_lease l;

	sleep_ms(w->delay_ms);
	/* Before the receive that makes the room: the waiter may run
	 * before this thread's next instruction. */
	w->at = now_ns();
	if (asyncpool_channel_recv(w->ch, &l))
		return (void *)1;
	asyncpool_lease_release(&l);
	return NULL;
}

/* After delay_ms, send one item. */
static void *send_later(void *arg)
{
	struct later *w = arg;
	struct asyncpool_lease l;

	sleep_ms(w->delay_ms);
	if (asyncpool_acquire(w->pool, &l))
		return (void *)1;
	w->at = now_ns();
	if (asyncpool_channel_send(w->ch, &l))
		return (void *)2;
	return NULL;
}

static void fill(struct asyncpool *pool, struct asyncpool_channel *s, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		struct asyncpool_lease l;

		if (asyncpool_acquire(pool, &l) || asyncpool_channel_send(s, &l))
			bail_out("fill %u", i);
	}
}

static void drain(struct asyncpool *pool, struct asyncpool_channel *r)
{
	uint64_t t[CAP];
	int rc;

	while ((rc = asyncpool_channel_recv_tokens(r, t, CAP)) > 0)
		asyncpool_release_tokens(pool, t, (uint32_t)rc);
}

static void test_send_wait(void)
{
	struct asyncpool_shared *sp = make(0);
	struct asyncpool *pool = asyncpool_shared_pool(sp);
	struct asyncpool_channel *s = open_end(pool, 0, ASYNCPOOL_CHANNEL_SEND);
	struct asyncpool_channel *r = open_end(pool, 0, ASYNCPOOL_CHANNEL_RECV);
	uint64_t best = UINT64_MAX;
	struct asyncpool_lease l, keep;
	struct pollfd p;
	pthread_t th;
	int fd;

	fill(pool, s, CAP);
	if (asyncpool_acquire(pool, &l))
		bail_out("acquire");
	keep = l;
	is_int(asyncpool_channel_send_wait(s, &l, 1, 0), -ETIMEDOUT, "send_wait 0, full: -ETIMEDOUT");
	is_int(asyncpool_channel_send_wait(s, &l, 1, 2000000), -ETIMEDOUT,
	       "send_wait 2 ms, full: -ETIMEDOUT");
	ok(!memcmp(&l, &keep, sizeof(l)), "  the lease untouched");
	/* Woken: the receive's wake, not the slice's end. */
	for (int round = 0; round < 3; round++) {
		struct later w = { .pool = pool, .ch = r, .delay_ms = 5 };
		uint64_t d;

		if (pthread_create(&th, NULL, recv_later, &w))
			bail_out("thread");
		if (asyncpool_channel_send_wait(s, &l, 1, -1))
			bail_out("send_wait round %d", round);
		d = now_ns();
		pthread_join(th, NULL);    /* then w.at is ours to read */
		d -= w.at;
		if (d < best)
			best = d;
		if (asyncpool_acquire(pool, &l))
			bail_out("acquire");
	}
	ok(best < 25000000, "send_wait woken by a receive: %.3f ms after it (a slice is 50 ms)",
	   best / 1e6);
	/* The wait fd of a sending end: readable when there is room. */
	fd = asyncpool_channel_wait_fd(s);
	ok(fd >= 0, "wait_fd of a sending end");
	p = (struct pollfd){ .fd = fd, .events = POLLIN };
	is_int(poll(&p, 1, 0), 0, "  not readable while full");
	{
		struct later w = { .pool = pool, .ch = r, .delay_ms = 0 };

		recv_later(&w);
	}
	is_int(poll(&p, 1, 60000), 1, "  readable after a receive");
	is_int(asyncpool_channel_send_wait(s, &l, 1, 0), 0, "  and the send goes");
	drain(pool, r);
	is_int(asyncpool_available(pool), N, "every buffer back");
	asyncpool_channel_close(r);
	asyncpool_channel_close(s);
	asyncpool_shared_close(sp);
}

static void test_recv_woken(void)
{
	struct asyncpool_shared *sp = make(0);
	struct asyncpool *pool = asyncpool_shared_pool(sp);
	struct asyncpool_channel *s = open_end(pool, 0, ASYNCPOOL_CHANNEL_SEND);
	struct asyncpool_channel *r = open_end(pool, 0, ASYNCPOOL_CHANNEL_RECV);
	struct asyncpool_channel_item it;
	uint64_t best = UINT64_MAX;
	pthread_t th;

	for (int round = 0; round < 3; round++) {
		struct later w = { .pool = pool, .ch = s, .delay_ms = 5 };
		uint64_t d;

		if (pthread_create(&th, NULL, send_later, &w))
			bail_out("thread");
		if (asyncpool_channel_recv_item_wait(r, &it, -1))
			bail_out("recv_item_wait round %d", round);
		d = now_ns();
		pthread_join(th, NULL);    /* then w.at is ours to read */
		d -= w.at;
		asyncpool_lease_release(&it.lease);
		if (d < best)
			best = d;
	}
	ok(best < 25000000, "recv_item_wait woken by a send: %.3f ms after it (a slice is 50 ms)",
	   best / 1e6);
	asyncpool_channel_close(r);
	asyncpool_channel_close(s);
	asyncpool_shared_close(sp);
}

/*
 * A child that takes channel 1's end and, once told, dies holding it
 * (after delay_ms: while the parent waits).
 */
static pid_t peer_child(struct asyncpool_shared *sp, uint32_t end, long delay_ms)
{
	int go[2], ready[2];
	char c = 0;
	pid_t pid;

	if (pipe(go) || pipe(ready))
		bail_out("pipe");
	fflush(stdout);
	pid = fork_or_bail();
	if (pid == 0) {
		struct asyncpool_shared *csp;
		struct asyncpool_channel *ch;

		if (asyncpool_shared_open_fd(asyncpool_shared_fd(sp), &csp) ||
		    asyncpool_channel_open(asyncpool_shared_pool(csp), 1, end, &ch))
			_exit(2);
		if (write(ready[1], &c, 1) != 1 || read(go[0], &c, 1) != 1)
			_exit(3);
		sleep_ms(delay_ms);
		raise(SIGKILL);
		_exit(4);
	}
	if (read(ready[0], &c, 1) != 1 || write(go[1], &c, 1) != 1)
		bail_out("the child's pipe");
	close(go[0]);
	close(go[1]);
	close(ready[0]);
	close(ready[1]);
	return pid;
}

static void reap(pid_t pid)
{
	int status;

	if (waitpid(pid, &status, 0) != pid || !WIFSIGNALED(status))
		bail_out("the child did not die");
}

static void test_epipe(void)
{
	struct asyncpool_shared *sp = make(0);
	struct asyncpool *pool = asyncpool_shared_pool(sp);
	struct asyncpool_channel_item it;
	struct asyncpool_channel *r, *s;
	struct asyncpool_lease l;
	pid_t pid;

	/* A receiver whose sender dies while it waits, and after. */
	r = open_end(pool, 1, ASYNCPOOL_CHANNEL_RECV);
	pid = peer_child(sp, ASYNCPOOL_CHANNEL_SEND, 30);
	is_int(asyncpool_channel_recv_item_wait(r, &it, 5000000000), -EPIPE,
	       "recv_item_wait: the sender dies while it waits: -EPIPE");
	reap(pid);
	is_int(asyncpool_channel_peer(r), ASYNCPOOL_CHANNEL_END_DEAD, "  peer: dead");
	is_int(asyncpool_channel_recv_wait(r, &l, 5000000000), -EPIPE,
	       "recv_wait after its death: -EPIPE");
	/* Once the reclaim freed it: free, and a wait waits. */
	s = open_end(pool, 1, ASYNCPOOL_CHANNEL_SEND);
	asyncpool_channel_close(s);
	is_int(asyncpool_channel_peer(r), ASYNCPOOL_CHANNEL_END_FREE, "  taken and closed: free");
	is_int(asyncpool_channel_recv_wait(r, &l, 1000000), -ETIMEDOUT,
	       "  a wait with no sender: -ETIMEDOUT");
	asyncpool_channel_close(r);
	/* A sender waiting for room whose receiver dies. */
	s = open_end(pool, 1, ASYNCPOOL_CHANNEL_SEND);
	fill(pool, s, CAP);
	if (asyncpool_acquire(pool, &l))
		bail_out("acquire");
	pid = peer_child(sp, ASYNCPOOL_CHANNEL_RECV, 30);
	is_int(asyncpool_channel_send_wait(s, &l, 0, 5000000000), -EPIPE,
	       "send_wait: the receiver dies while it waits: -EPIPE");
	reap(pid);
	is_int(asyncpool_channel_send_wait(s, &l, 0, 5000000000), -EPIPE,
	       "send_wait after its death: -EPIPE");
	asyncpool_lease_release(&l);
	r = open_end(pool, 1, ASYNCPOOL_CHANNEL_RECV);
	is_int((long)stats_of(pool, 1).depth, CAP, "  the %d queued are still there", CAP);
	drain(pool, r);
	is_int(asyncpool_available(pool), N, "every buffer back");
	asyncpool_channel_close(r);
	asyncpool_channel_close(s);
	asyncpool_shared_close(sp);
}

#ifdef HAVE_LIBURING
/* asyncpool_channel_prep_send_wait on a real ring: completes when a receive makes room. */
static void test_prep_send_wait(void)
{
	struct asyncpool_shared *sp = make(0);
	struct asyncpool *pool = asyncpool_shared_pool(sp);
	struct asyncpool_channel *s = open_end(pool, 0, ASYNCPOOL_CHANNEL_SEND);
	struct asyncpool_channel *r = open_end(pool, 0, ASYNCPOOL_CHANNEL_RECV);
	struct io_uring_sqe sqe_copy;
	struct io_uring_cqe *cqe;
	struct io_uring ring;
	struct later w = { .pool = pool, .ch = r, .delay_ms = 5 };
	pthread_t th;
	int rc;

	if (io_uring_queue_init(8, &ring, 0)) {
		skip(6, "no io_uring here");
		goto out;
	}
	rc = asyncpool_channel_prep_send_wait(s, &sqe_copy);
	if (rc == -EOPNOTSUPP) {
		skip(6, "the kernel has no IORING_OP_FUTEX_WAIT (Linux 6.7)");
		io_uring_queue_exit(&ring);
		goto out;
	}
	is_int(rc, 0, "prep_send_wait with room");
	*io_uring_get_sqe(&ring) = sqe_copy;
	io_uring_submit(&ring);
	rc = io_uring_wait_cqe(&ring, &cqe);
	is_int(rc == 0 ? cqe->res : rc, -EAGAIN, "  room: completes at once with -EAGAIN");
	io_uring_cqe_seen(&ring, cqe);
	fill(pool, s, CAP);
	is_int(asyncpool_channel_prep_send_wait(s, io_uring_get_sqe(&ring)), 0,
	       "prep_send_wait, full");
	io_uring_submit(&ring);
	if (pthread_create(&th, NULL, recv_later, &w))
		bail_out("thread");
	rc = io_uring_wait_cqe(&ring, &cqe);
	ok(rc == 0 && (cqe->res == 0 || cqe->res == -EAGAIN),
	   "  the ring completes the wait after a receive (res %d)", rc == 0 ? cqe->res : rc);
	io_uring_cqe_seen(&ring, cqe);
	pthread_join(th, NULL);
	{
		struct asyncpool_lease l;

		if (asyncpool_acquire(pool, &l))
			bail_out("acquire");
		is_int(asyncpool_channel_send_item(s, &l, 9), 0, "  then the send goes");
	}
	drain(pool, r);
	is_int(asyncpool_available(pool), N, "every buffer back");
	io_uring_queue_exit(&ring);
out:
	asyncpool_channel_close(r);
	asyncpool_channel_close(s);
	asyncpool_shared_close(sp);
}
#endif

int main(void)
{
	tap_watchdog(240);
	test_restart();
	test_restart_any();
	test_drop();
	test_spans();
	test_bad_input();
	test_send_wait();
	test_recv_woken();
	test_epipe();
	test_inspect_redo();
#ifdef HAVE_LIBURING
	test_prep_send_wait();
#endif
	return done_testing();
}
