/* SPDX-License-Identifier: MIT */
/*
 * A process killed at each test-hook point of each operation (issue 11):
 * a child opens the shared pool, runs one kind of operation (single,
 * cached, bulk, cached bulk, hand-off by token) and SIGKILLs itself the
 * k-th time it reaches point P (lib/freelist.h: a pop's step written,
 * after its head CAS, after marking one buffer of a chain, a release's
 * claim, a chain linked before its head CAS, a flush's uncache).  Then
 * the parent reclaims, and every buffer must be back: available ==
 * capacity, asyncpool_check() == 0, every state word FREE.
 *
 * Before each case the parent acquires and releases every buffer, so
 * that the last pusher of each word is alive: a buffer a child took off
 * the list and died holding comes back only through the child's step
 * record, not through the rule for a dead pusher's FREE words.
 *
 * Channels (issue 33): a sender killed in its sends (single and batch)
 * at "send recorded", "send queued" and "send published", a receiver in
 * its receives at "receive taken", and a reclaimer in its drain of a
 * dead receiver's ring at "drain claimed", and in its reclaim of the
 * lease that receiver died holding at "reclaim claimed" (a claimed word,
 * FREE and off the list) and "reclaim pushed" (the dead slot not yet
 * freed; issue 54).  Then the parent reclaims and
 * receives what the channel still holds: every buffer must be back, none
 * twice (what a dead sender published is delivered, what it queued and
 * did not publish comes back; a dead receiver's ring comes back).
 *
 * Then a pop and a reclaim that race for one buffer (a pop after its
 * last pusher died): the reclaim runs inside the pop, after its head
 * CAS (the hook at AP_TP_POP_CASED), and claims the buffer; the pop's
 * mark must then fail (a CAS from the word it saw) and the pop take
 * another, so that the buffer is never leased and free at once.
 *
 * A case whose child never reaches its point (an operation that does
 * not pass it k times: a single acquire marks no chain) is a SKIP, not a
 * pass.  Every point must be reached by some case, and the points the
 * test knows must be exactly the AP_TEST_AT() points in the sources of
 * lib/ (read at test time from $top_srcdir/lib): a point removed from
 * the library, or a new one no case kills at, fails the test.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <asyncpool.h>
#include "tap.h"
#include "testutil.h"
#include "hooks.h"
#include "layout-util.h"

#define N      24
#define CAP    16
#define BS     64
#define ROUNDS 2
#define KMAX   3

static const char *const points[AP_TP_COUNT] = {
	"pop step recorded", "pop after head CAS", "chain pop marked one",
	"release claimed", "push linked", "flush uncached",
	"send recorded", "send queued", "send published", "receive taken", "drain claimed",
	"send token stored", "receive from[] written", "redelivery slot written",
	"redelivery queued",
	"reclaim claimed", "reclaim pushed",
};
static const char *const names[AP_TP_COUNT] = {
	"AP_TP_POP_RECORDED", "AP_TP_POP_CASED", "AP_TP_POP_MARKED",
	"AP_TP_RELEASE_CLAIMED", "AP_TP_PUSH_LINKED", "AP_TP_FLUSH_UNCACHED",
	"AP_TP_CHAN_SEND_RECORDED", "AP_TP_CHAN_SEND_QUEUED", "AP_TP_CHAN_SEND_PUBLISHED",
	"AP_TP_CHAN_RECV_TAKEN", "AP_TP_CHAN_DRAIN_CLAIMED", "AP_TP_CHAN_SEND_TOKEN",
	"AP_TP_CHAN_RECV_FROM", "AP_TP_CHAN_REDO_TOKEN", "AP_TP_CHAN_REDO_QUEUED",
	"AP_TP_RECLAIM_CLAIMED", "AP_TP_RECLAIM_PUSHED",
};
static const char *const ops[] = { "single", "cached", "bulk", "cached bulk", "token",
				   "channel send", "channel receive", "channel drain" };
enum { OP_SEND = 5, OP_RECV, OP_DRAIN };
#define OPS (int)(sizeof(ops) / sizeof(ops[0]))

static enum ap_test_point kill_at;
static unsigned kill_after, seen;

static void hook(enum ap_test_point p)
{
	if (p == kill_at && ++seen == kill_after)
		raise(SIGKILL);
}

/* Channel 0: the child sends, the parent receives; 1: the parent sends. */
static void child_channel(struct asyncpool *pool, int op)
{
	struct asyncpool_channel *ch;
	struct asyncpool_lease l[6];
	uint64_t t[6];

	if (asyncpool_channel_open(pool, op == OP_SEND ? 0 : 1,
				   op == OP_SEND ? ASYNCPOOL_CHANNEL_SEND : ASYNCPOOL_CHANNEL_RECV, &ch))
		_exit(4);
	ap_test_hook_point = hook;
	for (int r = 0; r < ROUNDS; r++) {
		if (op == OP_SEND) {
			for (int j = 0; j < 6; j++)
				if (asyncpool_acquire(pool, &l[j]))
					_exit(3);
			for (int j = 0; j < 3; j++)
				if (asyncpool_channel_send(ch, &l[j]))
					_exit(3);
			for (int j = 3; j < 6; j++)
				t[j] = asyncpool_lease_token(&l[j]);
			if (asyncpool_channel_send_tokens(ch, t + 3, 3) != 3)
				_exit(3);
		} else {
			for (int j = 0; j < 2; j++) {
				if (asyncpool_channel_recv(ch, &l[j]))
					_exit(3);
				asyncpool_lease_release(&l[j]);
			}
			if (asyncpool_channel_recv_tokens(ch, t, 4) != 4 ||
			    asyncpool_release_tokens(pool, t, 4))
				_exit(3);
		}
	}
	ap_test_hook_point = NULL;
	asyncpool_channel_close(ch);
}

static void child(int fd, int op)
{
	struct asyncpool_shared *sp;
	struct asyncpool *pool;
	struct asyncpool_lease l[6];

	/* The drain happens in a reclaim of a handle with no quarantine
	 * (the dead receiver's held buffer is redelivered). */
	if (asyncpool_shared_open_fd_flags(fd, op == OP_DRAIN ? ASYNCPOOL_SHARED_OPEN_NO_RECLAIM : 0,
					   &sp))
		_exit(2);
	pool = asyncpool_shared_pool(sp);
	if (op == OP_DRAIN) {
		if (asyncpool_set_quarantine(pool, 0))
			_exit(2);
		ap_test_hook_point = hook;
		if (asyncpool_reclaim(pool) < 0)
			_exit(2);
	}
	if (op >= OP_SEND) {
		if (op != OP_DRAIN)
			child_channel(pool, op);
		ap_test_hook_point = NULL;
		asyncpool_shared_close(sp);
		_exit(0);
	}
	if ((op == 1 || op == 3) && asyncpool_set_cache(pool, 4))
		_exit(2);
	ap_test_hook_point = hook;
	for (int r = 0; r < ROUNDS; r++) {
		switch (op) {
		case 0: case 1:
			for (int j = 0; j < 6; j++)
				if (asyncpool_acquire(pool, &l[j]))
					_exit(3);
			for (int j = 0; j < 6; j++)
				asyncpool_lease_release(&l[j]);
			break;
		case 2: case 3:
			if (asyncpool_acquire_bulk(pool, l, 5))
				_exit(3);
			asyncpool_release_bulk(l, 5);
			break;
		case 4:
			for (int j = 0; j < 2; j++) {
				struct asyncpool_lease a;

				if (asyncpool_acquire(pool, &l[j]) ||
				    asyncpool_lease_adopt_token(pool, asyncpool_lease_token(&l[j]), &a) ||
				    asyncpool_release_token(pool, asyncpool_lease_token(&a)))
					_exit(3);
			}
			break;
		}
		if (op == 1 || op == 3)
			asyncpool_cache_flush(pool);
	}
	ap_test_hook_point = NULL;
	asyncpool_shared_close(sp);
	_exit(0);
}

/*
 * Count the AP_TEST_AT(name) calls in the sources of lib/: in[p] for the
 * points the test knows; the number of calls of a point it does not know.
 */
static int scan_sources(unsigned *in)
{
	const char *top = getenv("top_srcdir");
	char dir[4096], path[4600], line[1024];
	struct dirent *e;
	int unknown = 0;
	DIR *d;

	snprintf(dir, sizeof(dir), "%s/lib", top ? top : ".");
	d = opendir(dir);
	if (!d)
		bail_out("cannot read %s: set top_srcdir", dir);
	while ((e = readdir(d))) {
		size_t len = strlen(e->d_name);
		FILE *f;

		if (len < 3 || (strcmp(e->d_name + len - 2, ".c") && strcmp(e->d_name + len - 2, ".h")))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		while (fgets(line, sizeof(line), f)) {
			char *at = strstr(line, "AP_TEST_AT(");
			int p;

			if (!at || strstr(line, "#define"))
				continue;
			at += strlen("AP_TEST_AT(");
			for (p = 0; p < AP_TP_COUNT; p++)
				if (!strncmp(at, names[p], strlen(names[p])) &&
				    at[strlen(names[p])] == ')')
					break;
			if (p < AP_TP_COUNT)
				in[p]++;
			else {
				diag("%s: a kill point this test does not know: %s", e->d_name, at);
				unknown++;
			}
		}
		fclose(f);
	}
	closedir(d);
	return unknown;
}

/* Every buffer's last pusher is this (live) process. */
static void push_all(struct asyncpool *pool)
{
	struct asyncpool_lease l[N];

	if (asyncpool_acquire_bulk(pool, l, N))
		bail_out("acquire_bulk");
	asyncpool_release_bulk(l, N);
}

/* The parent's ends: it receives on channel 0 and sends on channel 1. */
static struct asyncpool_channel *recv0, *send1;

/* Send n buffers on channel 1 (before a receiving or draining child). */
static void send_n(struct asyncpool *pool, int n)
{
	for (int j = 0; j < n; j++) {
		struct asyncpool_lease l;

		if (asyncpool_acquire(pool, &l) || asyncpool_channel_send(send1, &l))
			bail_out("send_n");
	}
}

/*
 * A receiver of channel 1 that takes one buffer and dies holding it, and
 * a second that it released into its cache (CACHED: a reclaim claims it
 * at once, whatever the reclaimer's quarantine: "reclaim claimed").
 */
static void dead_receiver(int fd)
{
	int status;
	pid_t pid;

	fflush(stdout);
	pid = fork();
	if (pid < 0)
		bail_out("fork");
	if (pid == 0) {
		struct asyncpool_shared *sp;
		struct asyncpool_channel *ch;
		struct asyncpool_lease l, c;

		if (asyncpool_shared_open_fd(fd, &sp) ||
		    asyncpool_set_cache(asyncpool_shared_pool(sp), 4) ||
		    asyncpool_channel_open(asyncpool_shared_pool(sp), 1, ASYNCPOOL_CHANNEL_RECV, &ch) ||
		    asyncpool_channel_recv(ch, &l) || asyncpool_channel_recv(ch, &c))
			_exit(2);
		asyncpool_lease_release(&c);
		raise(SIGKILL);
	}
	if (waitpid(pid, &status, 0) != pid || !WIFSIGNALED(status))
		bail_out("the receiving child did not die");
}

static void kill_first_queued(enum ap_test_point p)
{
	if (p == AP_TP_CHAN_SEND_QUEUED)
		raise(SIGKILL);
}

/*
 * A sender of channel 0 that dies between its send's CAS and its publish
 * (so that the draining child's reclaim has a step to finish: "drain
 * claimed").
 */
static void dead_sender(int fd)
{
	int status;
	pid_t pid;

	fflush(stdout);
	pid = fork();
	if (pid < 0)
		bail_out("fork");
	if (pid == 0) {
		struct asyncpool_shared *sp;
		struct asyncpool_channel *ch;
		struct asyncpool_lease l;

		/* No reclaim of its own: what the dead receiver left is the
		 * draining child's to claim ("reclaim claimed"). */
		if (asyncpool_shared_open_fd_flags(fd, ASYNCPOOL_SHARED_OPEN_NO_RECLAIM, &sp) ||
		    asyncpool_channel_open(asyncpool_shared_pool(sp), 0, ASYNCPOOL_CHANNEL_SEND, &ch) ||
		    asyncpool_acquire(asyncpool_shared_pool(sp), &l))
			_exit(2);
		ap_test_hook_point = kill_first_queued;
		(void)asyncpool_channel_send(ch, &l);
		_exit(3);
	}
	if (waitpid(pid, &status, 0) != pid || !WIFSIGNALED(status))
		bail_out("the sending child did not die");
}

/*
 * What channel 1 holds once its receiver died (since 1.10 it stays, and
 * what the receiver held comes back into it): received and released by
 * a receiver of ours, -1 if its end cannot be taken.
 */
static int drain_channel1(struct asyncpool *pool)
{
	struct asyncpool_channel *r;
	uint64_t t[CAP];
	int n = 0, rc;

	if (asyncpool_channel_open(pool, 1, ASYNCPOOL_CHANNEL_RECV, &r))
		return -1;
	while ((rc = asyncpool_channel_recv_tokens(r, t, CAP)) > 0) {
		if (asyncpool_release_tokens(pool, t, (uint32_t)rc))
			bail_out("release of channel 1's tokens");
		n += rc;
	}
	asyncpool_channel_close(r);
	return n;
}

/* What channel 0 still holds: received and released (what a dead sender sent). */
static int drain_received(struct asyncpool *pool)
{
	uint64_t t[CAP];
	int n = 0, rc;

	while ((rc = asyncpool_channel_recv_tokens(recv0, t, CAP)) > 0) {
		if (asyncpool_release_tokens(pool, t, (uint32_t)rc))
			bail_out("release of received tokens");
		n += rc;
	}
	return n;
}

static struct asyncpool *racing_pool;
static int racing_reclaimed = -1;

static void reclaim_inside(enum ap_test_point p)
{
	if (p != AP_TP_POP_CASED || racing_reclaimed >= 0)
		return;
	racing_reclaimed = asyncpool_reclaim(racing_pool);
}

static void pop_vs_reclaim(struct asyncpool_shared *sp)
{
	struct asyncpool *pool = asyncpool_shared_pool(sp);
	struct asyncpool_lease l;
	int status;
	pid_t pid;

	/* a child pushes every buffer, then dies without closing */
	fflush(stdout);
	pid = fork();
	if (pid < 0)
		bail_out("fork");
	if (pid == 0) {
		struct asyncpool_shared *csp;
		struct asyncpool_lease cl[N];

		if (asyncpool_shared_open_fd(asyncpool_shared_fd(sp), &csp) ||
		    asyncpool_acquire_bulk(asyncpool_shared_pool(csp), cl, N))
			_exit(2);
		asyncpool_release_bulk(cl, N);
		raise(SIGKILL);
	}
	if (waitpid(pid, &status, 0) != pid || !WIFSIGNALED(status))
		bail_out("the pushing child did not die");
	racing_pool = pool;
	racing_reclaimed = -1;
	ap_test_hook_point = reclaim_inside;
	is_int(asyncpool_acquire(pool, &l), 0, "pop vs reclaim: the pop succeeds");
	ap_test_hook_point = NULL;
	ok(racing_reclaimed >= 1, "pop vs reclaim: the reclaim inside the pop claimed %d", racing_reclaimed);
	is_int(asyncpool_check(pool), 0, "pop vs reclaim: the buffer is not leased and free at once");
	is_int(asyncpool_available(pool), N - 1, "pop vs reclaim: one buffer leased");
	asyncpool_lease_release(&l);
	is_int(asyncpool_reclaim(pool), 0, "pop vs reclaim: nothing more to reclaim");
	ok(asyncpool_available(pool) == N && asyncpool_check(pool) == 0 && layout_not_free(sp, N) == 0,
	   "pop vs reclaim: every buffer back once");
}

int main(void)
{
	struct asyncpool_shared_options o;
	struct asyncpool_shared *sp;
	struct asyncpool *pool;
	unsigned kills = 0, clean = 0, reached[AP_TP_COUNT] = { 0 }, in[AP_TP_COUNT] = { 0 };

	plan(AP_TP_COUNT * OPS * KMAX + 1 + 2 * AP_TP_COUNT + 1 + 6 + 2 * KMAX);
	shared_options(&o, BS, N);
	o.channels = 2;
	o.channel_capacity = CAP;
	if (asyncpool_shared_create(&o, &sp))
		bail_out("shared_create");
	pool = asyncpool_shared_pool(sp);
	if (asyncpool_set_quarantine(pool, 0))
		bail_out("set_quarantine");
	if (asyncpool_channel_open(pool, 0, ASYNCPOOL_CHANNEL_RECV, &recv0) ||
	    asyncpool_channel_open(pool, 1, ASYNCPOOL_CHANNEL_SEND, &send1))
		bail_out("the parent's ends");
	for (int p = 0; p < AP_TP_COUNT; p++) {
		for (int op = 0; op < OPS; op++) {
			for (unsigned k = 1; k <= KMAX; k++) {
				int status, rc, got;
				pid_t pid;

				push_all(pool);
				if (op == OP_RECV || op == OP_DRAIN)
					send_n(pool, op == OP_RECV ? 12 : 8);
				if (op == OP_DRAIN) {
					dead_receiver(asyncpool_shared_fd(sp));
					dead_sender(asyncpool_shared_fd(sp));
				}
				kill_at = (enum ap_test_point)p;
				kill_after = k;
				seen = 0;
				fflush(stdout);
				pid = fork();
				if (pid < 0)
					bail_out("fork");
				if (pid == 0)
					child(asyncpool_shared_fd(sp), op);
				if (waitpid(pid, &status, 0) != pid)
					bail_out("waitpid");
				if (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) {
					kills++;
					reached[p]++;
				} else if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
					clean++;
				}
				rc = asyncpool_reclaim(pool);
				/* What the child's channels still hold: channel 1's
				 * receiver is dead (drained), channel 0's sends are
				 * ours to receive. */
				if (rc >= 0)
					(void)asyncpool_reclaim(pool);
				got = drain_received(pool);
				if (op == OP_RECV || op == OP_DRAIN)
					(void)drain_channel1(pool);
				/* The k-th single send killed after its publish: k
				 * delivered; before it: the k - 1 before it, and the
				 * k-th back to the pool. */
				if (op == OP_SEND && WIFSIGNALED(status) &&
				    (p == AP_TP_CHAN_SEND_PUBLISHED || p == AP_TP_CHAN_SEND_QUEUED))
					is_int(got, p == AP_TP_CHAN_SEND_PUBLISHED ? (int)k : (int)k - 1,
					       "channel send, killed at \"%s\" #%u: what it published "
					       "is delivered, nothing else", points[p], k);
				if (WIFEXITED(status) && WEXITSTATUS(status) == 0 &&
				    rc >= 0 && asyncpool_available(pool) == N && asyncpool_check(pool) == 0 &&
				    layout_not_free(sp, N) == 0) {
					skip(1, "%s does not reach \"%s\" %u time%s", ops[op], points[p], k,
					     k > 1 ? "s" : "");
					continue;
				}
				ok(WIFSIGNALED(status) && rc >= 0 && asyncpool_available(pool) == N &&
				   asyncpool_check(pool) == 0 && layout_not_free(sp, N) == 0,
				   "%s, killed at \"%s\" #%u: reclaim %d, all %u back, check clean",
				   ops[op], points[p], k, rc, (unsigned)asyncpool_available(pool));
			}
		}
	}
	diag("%u processes killed at a hook point, %u ran to the end", kills, clean);
	is_int(kills + clean, AP_TP_COUNT * OPS * KMAX, "every child was killed or finished");
	pop_vs_reclaim(sp);
	for (int p = 0; p < AP_TP_COUNT; p++)
		ok(reached[p] > 0, "\"%s\" is reached by some case (%u kills)", points[p], reached[p]);
	is_int(scan_sources(in), 0, "every AP_TEST_AT() point in lib/ is one this test kills at");
	for (int p = 0; p < AP_TP_COUNT; p++)
		ok(in[p] > 0, "%s is in the sources of lib/ (%u calls)", names[p], in[p]);
	asyncpool_channel_close(recv0);
	asyncpool_channel_close(send1);
	asyncpool_shared_close(sp);
	return done_testing();
}
