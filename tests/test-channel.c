/* SPDX-License-Identifier: MIT */
/*
 * Channels (issue 33): the calls, their errors, the word's rules (a sent
 * lease is stale at once; only the receiver gets it, at a new
 * generation), full and empty, batches, the waits, the counters, a
 * receiver in another process, and layout version 5 beside 3.
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <asyncpool.h>
#include "tap.h"
#include "testutil.h"
#include "layout-util.h"

#define N   16
#define BS  64
#define CAP 4

static struct asyncpool_shared *chan_pool(uint32_t channels, uint32_t capacity)
{
	struct asyncpool_shared_options o;
	struct asyncpool_shared *sp;

	shared_options(&o, BS, N);
	o.channels = channels;
	o.channel_capacity = capacity;
	if (asyncpool_shared_create(&o, &sp))
		bail_out("shared_create with %u channels of %u", channels, capacity);
	return sp;
}

static struct asyncpool_channel_stats stats_of(struct asyncpool *pool, uint32_t c)
{
	struct asyncpool_channel_stats s;

	memset(&s, 0, sizeof(s));
	s.size = sizeof(s);
	if (asyncpool_channel_stats(pool, c, &s))
		bail_out("channel_stats");
	return s;
}

static void test_options(void)
{
	struct asyncpool_shared_options o;
	struct asyncpool_shared *sp;

	shared_options(&o, BS, N);
	o.channels = 1;
	is_int(asyncpool_shared_create(&o, &sp), -EINVAL, "create: channels without a capacity");
	o.channel_capacity = 3;
	is_int(asyncpool_shared_create(&o, &sp), -EINVAL, "create: a capacity not a power of two");
	o.channel_capacity = 65536 * 2;
	is_int(asyncpool_shared_create(&o, &sp), -EINVAL, "create: a capacity over 65536");
	o.channels = 1025;
	o.channel_capacity = 4;
	is_int(asyncpool_shared_create(&o, &sp), -EINVAL, "create: over 1024 channels");
	o.channels = 0;
	is_int(asyncpool_shared_create(&o, &sp), -EINVAL, "create: a capacity without channels");
}

/* A pool without channels is version 3 byte for byte; with, version 5. */
static void test_versions(void)
{
	struct asyncpool_shared_options o;
	struct asyncpool_shared *a, *b, *c;
	const unsigned char *ha, *hb, *hc;
	size_t storage;

	shared_options(&o, BS, N);
	if (asyncpool_shared_create(&o, &a))
		bail_out("create");
	/* An options struct of 1.3's size. */
	o.size = offsetof(struct asyncpool_shared_options, channels);
	if (asyncpool_shared_create(&o, &b))
		bail_out("create with 1.3's options");
	c = chan_pool(2, CAP);
	ha = asyncpool_shared_shm(a)->base;
	hb = asyncpool_shared_shm(b)->base;
	hc = asyncpool_shared_shm(c)->base;
	if (asyncpool_shared_storage_size(N, &storage))
		bail_out("storage_size");
	ok(!memcmp(ha, hb, storage), "a pool without channels: the same layout as with 1.3's options");
	is_int(((const uint32_t *)ha)[1], 3, "  version 3");
	ok(!memcmp(ha + 88, (const char[40]){ 0 }, 40),
	   "  the channel fields and reserved words are zero (1.3 requires it)");
	is_int((long)*(const uint64_t *)(ha + 16), (long)storage, "  storage_size as in 1.3");
	is_int(((const uint32_t *)hc)[1], 5, "a pool with channels: version 5");
	is_int(((const uint32_t *)hc)[22], 2, "  channel_count at 88");
	is_int(((const uint32_t *)hc)[23], CAP, "  channel_capacity at 92");
	is_int((long)*(const uint64_t *)(hc + 96), (long)storage,
	       "  channel_offset at 96: right after the attachments");
	is_int((long)*(const uint64_t *)(hc + 104), (long)(storage + 2 * (320 + 2 * CAP * 32)),
	       "  from_offset at 104: right after the channels");
	is_int((long)*(const uint64_t *)(hc + 16), (long)(storage + 2 * (320 + 2 * CAP * 32) + N * 32),
	       "  storage_size: two channels of 5 lines and 2 x 4 slots of 32 bytes, from[] of 32 bytes");
	asyncpool_shared_close(a);
	asyncpool_shared_close(b);
	asyncpool_shared_close(c);
}

static void test_open(void)
{
	struct asyncpool_shared *v3 = NULL, *sp = chan_pool(2, CAP);
	struct asyncpool *pool = asyncpool_shared_pool(sp), *raw;
	struct asyncpool_channel *s, *r, *x;
	struct asyncpool_shared_options o;
	void *mem;
	size_t need;

	x = (void *)1;
	is_int(asyncpool_channel_open(pool, 0, 0, &x), -EINVAL, "open: end 0");
	ok(x == NULL, "  *out is NULL on failure");
	is_int(asyncpool_channel_open(pool, 0, 3, &x), -EINVAL, "open: end 3");
	is_int(asyncpool_channel_open(pool, 2, ASYNCPOOL_CHANNEL_SEND, &x), -EINVAL,
	       "open: channel 2 of 2");
	is_int(asyncpool_channel_open(NULL, 0, ASYNCPOOL_CHANNEL_SEND, &x), -EINVAL, "open: NULL pool");
	is_int(asyncpool_channel_open(pool, 0, ASYNCPOOL_CHANNEL_SEND, NULL), -EINVAL, "open: NULL out");
	shared_options(&o, BS, N);
	if (asyncpool_shared_create(&o, &v3))
		bail_out("create");
	is_int(asyncpool_channel_open(asyncpool_shared_pool(v3), 0, ASYNCPOOL_CHANNEL_SEND, &x),
	       -EINVAL, "open: a pool without channels");
	asyncpool_shared_close(v3);
	/* The same layout opened as raw memory: no attachment, no end. */
	need = asyncpool_shared_shm(sp)->size;
	mem = asyncpool_shared_shm(sp)->base;
	is_int(asyncpool_open_shared(mem, need, asyncpool_shared_region(sp), &raw), 0,
	       "open_shared (raw) of a version 5 layout");
	is_int(asyncpool_channel_open(raw, 0, ASYNCPOOL_CHANNEL_SEND, &x), -EOPNOTSUPP,
	       "open: a handle over raw memory: -EOPNOTSUPP");
	asyncpool_destroy(raw);

	is_int(asyncpool_channel_open(pool, 0, ASYNCPOOL_CHANNEL_SEND, &s), 0, "open the send end");
	is_int(asyncpool_channel_open(pool, 0, ASYNCPOOL_CHANNEL_SEND, &x), -EBUSY,
	       "open it again: -EBUSY");
	is_int(asyncpool_channel_open(pool, 0, ASYNCPOOL_CHANNEL_RECV, &r), 0, "open the receive end");
	is_int(stats_of(pool, 0).ends, ASYNCPOOL_CHANNEL_SEND | ASYNCPOOL_CHANNEL_RECV,
	       "stats: both ends taken");
	is_int(asyncpool_channel_close(s), 0, "close the send end");
	is_int(asyncpool_channel_close(NULL), -EINVAL, "close NULL: -EINVAL");
	is_int(stats_of(pool, 0).ends, ASYNCPOOL_CHANNEL_RECV, "stats: the receive end only");
	is_int(asyncpool_channel_open(pool, 0, ASYNCPOOL_CHANNEL_SEND, &s), 0, "open the send end again");
	asyncpool_channel_close(s);
	asyncpool_channel_close(r);
	asyncpool_shared_close(sp);
}

static void test_handoff(void)
{
	struct asyncpool_shared *sp = chan_pool(2, CAP);
	struct asyncpool *pool = asyncpool_shared_pool(sp);
	struct asyncpool_channel *s, *r;
	struct asyncpool_lease l, got, ls[CAP + 1];
	struct asyncpool_channel_stats st;
	uint64_t tok, toks[8], before;
	int rc;

	if (asyncpool_channel_open(pool, 0, ASYNCPOOL_CHANNEL_SEND, &s) ||
	    asyncpool_channel_open(pool, 0, ASYNCPOOL_CHANNEL_RECV, &r))
		bail_out("open ends");
	is_int(asyncpool_channel_recv(r, &got), -EAGAIN, "recv of an empty channel: -EAGAIN");
	ok(got.release.fn == NULL, "  the lease is zeroed");
	is_int(asyncpool_channel_send(r, &l), -EINVAL, "send on a receive end: -EINVAL");
	is_int(asyncpool_channel_recv(s, &got), -EINVAL, "recv on a send end: -EINVAL");

	if (asyncpool_acquire(pool, &l))
		bail_out("acquire");
	tok = asyncpool_lease_token(&l);
	memcpy(asyncpool_span_ptr(l.span), "hello", 6);
	before = bad_releases(pool);
	is_int(asyncpool_channel_send(s, &l), 0, "send a lease");
	ok(l.release.fn == NULL && l.generation == 0, "  the lease is spent");
	is_int(asyncpool_release_token(pool, tok), -ESTALE, "  its token is stale at once");
	is_int(asyncpool_lease_adopt_token(pool, tok, &got), -ESTALE, "  and cannot be adopted");
	is_int(asyncpool_release_index(pool, (uint32_t)tok), -EALREADY,
	       "  nor released by index");
	is_int((long)(bad_releases(pool) - before), 2,
	       "  the two releases counted in bad_releases (an adoption is not, as ever)");
	is_int(asyncpool_check(pool), 0, "check: a queued buffer is consistent");
	is_int(asyncpool_available(pool), N - 1, "available: the queued buffer is not");
	is_int(stats_of(pool, 0).depth, 1, "stats: depth 1");
	is_int(asyncpool_channel_recv(r, &got), 0, "recv it");
	is_int(got.buffer_index, (uint32_t)tok, "  the same buffer");
	is_int(got.generation, (uint32_t)(tok >> 32) + 1, "  at the next generation");
	ok(!strcmp(asyncpool_span_ptr(got.span), "hello"), "  its bytes, not copied");
	is_int(asyncpool_release_token(pool, tok), -ESTALE, "  the sender's token still stale");
	asyncpool_lease_release(&got);
	is_int(asyncpool_available(pool), N, "released: all back");

	/* Full: the buffer stays the sender's, untouched. */
	for (int i = 0; i <= CAP; i++)
		if (asyncpool_acquire(pool, &ls[i]))
			bail_out("acquire");
	for (int i = 0; i < CAP; i++)
		if (asyncpool_channel_send(s, &ls[i]))
			bail_out("send %d", i);
	tok = asyncpool_lease_token(&ls[CAP]);
	is_int(asyncpool_channel_send(s, &ls[CAP]), -EAGAIN, "send to a full channel: -EAGAIN");
	is_int(asyncpool_lease_token(&ls[CAP]), (long)tok, "  the lease is untouched");
	is_int(asyncpool_channel_send_token(s, tok), -EAGAIN, "send_token: -EAGAIN too");
	is_int((long)stats_of(pool, 0).full, 2, "stats: 2 sends found it full");
	is_int(asyncpool_channel_recv_tokens(r, toks, 8), CAP, "recv_tokens: the 4 queued");
	is_int(asyncpool_channel_send_token(s, tok), 0, "send_token now");
	is_int(asyncpool_channel_recv_leases(r, ls, 2), 1, "recv_leases: the 1 queued");
	asyncpool_lease_release(&ls[0]);
	is_int(asyncpool_release_tokens(pool, toks, CAP), 0, "the received tokens release");

	/* Batches: as many as fit, a prefix up to the first refused. */
	for (int i = 0; i < 6; i++) {
		if (asyncpool_acquire(pool, &ls[0]))
			bail_out("acquire");
		toks[i] = asyncpool_lease_token(&ls[0]);
	}
	is_int(asyncpool_channel_send_tokens(s, toks, 6), CAP, "send_tokens of 6: 4 fit");
	is_int(asyncpool_channel_recv_tokens(r, toks + 6, 2), 2, "recv_tokens of 2");
	is_int(asyncpool_channel_send_tokens(s, toks + 4, 2), 2, "send_tokens: the other 2");
	is_int(asyncpool_channel_recv_tokens(r, toks, 8), CAP, "recv_tokens: the other 4");
	is_int(asyncpool_release_tokens(pool, toks, CAP), 0, "released");
	is_int(asyncpool_release_tokens(pool, toks + 6, 2), 0, "released");
	if (asyncpool_acquire(pool, &ls[0]) || asyncpool_acquire(pool, &ls[1]))
		bail_out("acquire");
	toks[0] = asyncpool_lease_token(&ls[0]);
	toks[1] = asyncpool_lease_token(&ls[1]) + ((uint64_t)5 << 32);     /* stale */
	toks[2] = asyncpool_lease_token(&ls[1]);
	before = bad_releases(pool);
	is_int(asyncpool_channel_send_tokens(s, toks, 3), 1, "send_tokens: stops at a stale token");
	is_int((long)(bad_releases(pool) - before), 1, "  counted in bad_releases");
	is_int(asyncpool_channel_send_tokens(s, toks + 1, 1), -ESTALE, "a stale token alone: -ESTALE");
	toks[3] = (uint64_t)N;
	is_int(asyncpool_channel_send_tokens(s, toks + 2, 2), -EINVAL,
	       "a token out of range: -EINVAL, nothing queued");
	is_int(stats_of(pool, 0).depth, 1, "  depth still 1");
	is_int(asyncpool_channel_send_token(s, 0), -EINVAL, "send_token 0: -EINVAL");
	is_int(asyncpool_channel_send_tokens(s, toks, 0), -EINVAL, "send_tokens of 0: -EINVAL");
	is_int(asyncpool_channel_recv_tokens(r, toks + 4, 0), -EINVAL, "recv_tokens of 0: -EINVAL");
	/* A lease of another pool. */
	{
		struct asyncpool_shared *other = chan_pool(1, CAP);
		struct asyncpool_lease ol;

		if (asyncpool_acquire(asyncpool_shared_pool(other), &ol))
			bail_out("acquire");
		is_int(asyncpool_channel_send(s, &ol), -EINVAL, "send a lease of another pool: -EINVAL");
		asyncpool_lease_release(&ol);
		asyncpool_shared_close(other);
	}
	is_int(asyncpool_channel_recv(r, &got), 0, "recv the one queued");
	asyncpool_lease_release(&got);
	asyncpool_lease_release(&ls[1]);
	st = stats_of(pool, 0);
	is_int((long)st.sent, (long)st.received, "stats: sent == received");
	is_int((long)st.sent, 1 + CAP + 1 + 6 + 1, "stats: 13 sent");
	is_int((long)st.corruptions, 0, "stats: no corruption");
	is_int(asyncpool_available(pool), N, "every buffer back");
	is_int(asyncpool_check(pool), 0, "check: consistent");
	/* Stats arguments. */
	st.size = 8;
	is_int(asyncpool_channel_stats(pool, 0, &st), -EINVAL, "stats: a size too small");
	st.size = sizeof(st);
	is_int(asyncpool_channel_stats(pool, 2, &st), -EINVAL, "stats: channel 2 of 2");
	/* Waits. */
	is_int(asyncpool_channel_recv_wait(r, &got, 0), -ETIMEDOUT, "recv_wait 0 of empty: -ETIMEDOUT");
	is_int(asyncpool_channel_recv_wait(r, &got, 2000000), -ETIMEDOUT,
	       "recv_wait 2 ms of empty: -ETIMEDOUT");
	{
		int fd = asyncpool_channel_wait_fd(r);
		struct pollfd p = { .fd = fd, .events = POLLIN };

		ok(fd >= 0, "wait_fd");
		is_int(asyncpool_channel_wait_fd(r), fd, "  the same fd again");
		is_int(asyncpool_channel_wait_fd(NULL), -EINVAL, "  of NULL: -EINVAL");
		is_int(poll(&p, 1, 0), 0, "  not readable while empty");
		if (asyncpool_acquire(pool, &l))
			bail_out("acquire");
		if (asyncpool_channel_send(s, &l))
			bail_out("send");
		is_int(poll(&p, 1, 60000), 1, "  readable after a send");
		rc = asyncpool_channel_recv_wait(r, &got, -1);
		is_int(rc, 0, "recv_wait of a full channel");
		asyncpool_lease_release(&got);
	}
	asyncpool_channel_close(s);
	asyncpool_channel_close(r);
	asyncpool_shared_close(sp);
}

/* A receiver in another process, blocked in recv_wait. */
static void test_processes(void)
{
	struct asyncpool_shared *sp = chan_pool(1, CAP);
	struct asyncpool *pool = asyncpool_shared_pool(sp);
	long rounds = stress_iterations(20000);
	struct asyncpool_channel *s;
	int status, sent = 0;
	pid_t pid;

	fflush(stdout);
	pid = fork_or_bail();
	if (pid == 0) {
		struct asyncpool_shared *csp;
		struct asyncpool_channel *r;
		struct asyncpool_lease l;

		if (asyncpool_shared_open_fd(asyncpool_shared_fd(sp), &csp) ||
		    asyncpool_channel_open(asyncpool_shared_pool(csp), 0, ASYNCPOOL_CHANNEL_RECV, &r))
			_exit(2);
		for (long i = 0; i < rounds; i++) {
			if (asyncpool_channel_recv_wait(r, &l, -1))
				_exit(3);
			if (*(long *)asyncpool_span_ptr(l.span) != i)
				_exit(4);
			asyncpool_lease_release(&l);
		}
		asyncpool_channel_close(r);
		asyncpool_shared_close(csp);
		_exit(0);
	}
	if (asyncpool_channel_open(pool, 0, ASYNCPOOL_CHANNEL_SEND, &s))
		bail_out("open");
	for (long i = 0; i < rounds; i++) {
		struct asyncpool_lease l;

		while (asyncpool_acquire(pool, &l))
			sched_yield();
		*(long *)asyncpool_span_ptr(l.span) = i;
		while (asyncpool_channel_send(s, &l) == -EAGAIN)
			sched_yield();
		sent++;
	}
	is_int(waitpid(pid, &status, 0), pid, "the receiving process ended");
	ok(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	   "it received %d buffers in order, each with its bytes (status %d)", sent, status);
	is_int(asyncpool_available(pool), N, "every buffer back");
	is_int((long)stats_of(pool, 0).received, rounds, "stats: all received");
	asyncpool_channel_close(s);
	asyncpool_shared_close(sp);
}

/*
 * Send tokens[0 .. CAP-1] through channel 0 from a child of fork():
 * with its parent's handle (own 0), or (the recipe of
 * asyncpool_channel_open(3)) a handle of its own, opened from the
 * parent's fd, which attaches the child.  The tokens are the parent's
 * leases, adopted by the child first.  die: the child SIGKILLs itself
 * holding the end, after its sends.  The child's exit status says what
 * its open and send returned (-1: killed).
 */
static int child_sends_how(struct asyncpool_shared *sp, const uint64_t *tokens, bool own, bool die)
{
	struct asyncpool *pool = asyncpool_shared_pool(sp);
	struct asyncpool_shared *csp;
	struct asyncpool_channel *s;
	uint64_t t[CAP];
	int status, rc;
	pid_t pid;

	fflush(stdout);
	pid = fork_or_bail();
	if (pid == 0) {
		memcpy(t, tokens, sizeof(t));
		if (own) {
			if (asyncpool_shared_open_fd(asyncpool_shared_fd(sp), &csp))
				_exit(14);
			pool = asyncpool_shared_pool(csp);
		}
		rc = asyncpool_channel_open(pool, 0, ASYNCPOOL_CHANNEL_SEND, &s);
		if (rc)
			_exit(rc == -EBUSY ? 10 : rc == -ECHILD ? 13 : 11);
		/* The parent's leases become the child's (asyncpool_lease_adopt(3)). */
		for (int k = 0; own && k < CAP; k++) {
			struct asyncpool_lease l;

			if (asyncpool_lease_adopt_token(pool, t[k], &l))
				_exit(15);
			t[k] = asyncpool_lease_token(&l);
		}
		rc = asyncpool_channel_send_tokens(s, t, CAP);
		if (die)
			raise(SIGKILL);
		asyncpool_channel_close(s);
		_exit(rc == CAP ? 0 : 12);
	}
	if (waitpid(pid, &status, 0) != pid)
		return -2;
	if (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
		return -1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : -2;
}

static int child_sends(struct asyncpool_shared *sp, const uint64_t *tokens)
{
	return child_sends_how(sp, tokens, true, false);
}

/*
 * After fork(): an end's position is in the handle of the process that
 * uses it (asyncpool_channel_open(3)), so a child that is to send opens
 * the end itself once its parent closed it, each child in turn; while
 * the parent holds the end, the child's open is -EBUSY.
 */
static void test_fork_ends(void)
{
	struct asyncpool_shared *sp = chan_pool(1, CAP);
	struct asyncpool *pool = asyncpool_shared_pool(sp);
	struct asyncpool_channel *s, *r;
	uint64_t t[CAP], got[CAP];
	int round, same;

	if (asyncpool_channel_open(pool, 0, ASYNCPOOL_CHANNEL_SEND, &s) ||
	    asyncpool_channel_open(pool, 0, ASYNCPOOL_CHANNEL_RECV, &r))
		bail_out("open");
	/* The parent moves the channel on first: 3 positions. */
	for (int k = 0; k < 3; k++) {
		if (asyncpool_acquire_tokens(pool, t, 1) || asyncpool_channel_send_token(s, t[0]) ||
		    asyncpool_channel_recv_tokens(r, got, 1) != 1)
			bail_out("the parent's round %d", k);
		asyncpool_release_token(pool, got[0]);
	}
	if (asyncpool_acquire_tokens(pool, t, CAP))
		bail_out("acquire");
	is_int(child_sends_how(sp, t, false, false), 13,
	       "fork: the child's open with its parent's handle: -ECHILD");
	is_int(child_sends(sp, t), 10, "fork: the child's open of the end its parent holds: -EBUSY");
	is_int(asyncpool_channel_recv_tokens(r, got, CAP), -EAGAIN, "  nothing sent");
	asyncpool_channel_close(s);
	for (round = 0; round < 2; round++) {
		is_int(child_sends(sp, t), 0,
		       "fork %d: the parent closed the end; the child opens it, sends %d, closes it",
		       round + 1, CAP);
		is_int(asyncpool_channel_recv_tokens(r, got, CAP), CAP, "  the parent receives %d", CAP);
		same = 1;
		for (int k = 0; k < CAP; k++)
			same &= (uint32_t)got[k] == (uint32_t)t[k];
		ok(same, "  the child's buffers, in order");
		/* The next child sends them again. */
		memcpy(t, got, sizeof(t));
	}
	/* Item 7 of issue 52: the child dies holding the end. */
	is_int(child_sends_how(sp, t, true, true), -1,
	       "fork 3: the child opens the pool and the end, sends %d, dies holding the end", CAP);
	is_int(asyncpool_channel_peer(r), ASYNCPOOL_CHANNEL_END_DEAD, "  the receiver sees its sender dead");
	is_int(asyncpool_channel_recv_tokens(r, got, CAP), CAP, "  the parent receives %d", CAP);
	memcpy(t, got, sizeof(t));
	is_int(asyncpool_channel_open(pool, 0, ASYNCPOOL_CHANNEL_SEND, &s), 0,
	       "  the parent takes the end again");
	is_int(asyncpool_channel_peer(r), ASYNCPOOL_CHANNEL_END_LIVE, "  the receiver sees it live");
	is_int(asyncpool_channel_send_tokens(s, t, CAP), CAP, "  and sends through it");
	is_int(asyncpool_channel_recv_tokens(r, got, CAP), CAP, "  received");
	memcpy(t, got, sizeof(t));
	asyncpool_channel_close(s);
	is_int(asyncpool_channel_peer(r), ASYNCPOOL_CHANNEL_END_FREE, "  closed: the end is free");
	is_int((long)stats_of(pool, 0).sent, 3 + 4 * CAP, "stats: every send counted, the children's too");
	is_int((long)stats_of(pool, 0).corruptions, 0, "stats: no entry refused");
	is_int(asyncpool_release_tokens(pool, t, CAP), 0, "the buffers released");
	is_int(asyncpool_available(pool), N, "every buffer back");
	asyncpool_channel_close(r);
	asyncpool_shared_close(sp);
}

/* asyncpool inspect shows each channel: depth, ends, alive or dead. */
static void test_inspect(void)
{
	struct asyncpool_shared *sp = chan_pool(2, CAP);
	struct asyncpool *pool = asyncpool_shared_pool(sp);
	struct asyncpool_channel *s;
	struct asyncpool_lease l;
	const char *top = getenv("top_builddir");
	char cmd[512], out[4096];
	size_t n;
	FILE *f;

	if (asyncpool_channel_open(pool, 1, ASYNCPOOL_CHANNEL_SEND, &s))
		bail_out("open");
	for (int i = 0; i < 3; i++)
		if (asyncpool_acquire(pool, &l) || asyncpool_channel_send(s, &l))
			bail_out("send");
	snprintf(cmd, sizeof(cmd), "%s/tools/asyncpool inspect --json /proc/%ld/fd/%d",
		 top ? top : ".", (long)getpid(), asyncpool_shared_fd(sp));
	f = popen(cmd, "r");
	n = f ? fread(out, 1, sizeof(out) - 1, f) : 0;
	out[n] = 0;
	is_int(f ? pclose(f) : -1, 0, "inspect --json: exit 0");
	ok(strstr(out, "\"queued\":3,\"channel_capacity\":4,\"channels\":[{\"channel\":0,"
			"\"depth\":0,\"send\":null,\"recv\":null") != NULL,
	   "inspect --json: 3 queued, channel 0 empty with no end");
	ok(strstr(out, "{\"channel\":1,\"depth\":3,\"send\":{\"slot\":0,\"state\":\"alive\"},"
			"\"recv\":null,\"sent\":3") != NULL,
	   "inspect --json: channel 1 holds 3, its sender alive");
	snprintf(cmd, sizeof(cmd), "%s/tools/asyncpool inspect /proc/%ld/fd/%d",
		 top ? top : ".", (long)getpid(), asyncpool_shared_fd(sp));
	f = popen(cmd, "r");
	n = f ? fread(out, 1, sizeof(out) - 1, f) : 0;
	out[n] = 0;
	if (f)
		pclose(f);
	ok(strstr(out, "channel:         1 depth 3 send slot 0 alive recv free sent 3") != NULL,
	   "inspect: the same in text");
	asyncpool_channel_close(s);
	asyncpool_shared_close(sp);
}

int main(void)
{
	test_options();
	test_versions();
	test_open();
	test_handoff();
	test_processes();
	test_fork_ends();
	test_inspect();
	return done_testing();
}
