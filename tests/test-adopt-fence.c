/* SPDX-License-Identifier: MIT */
/*
 * An adoption fences the giver (issue 21, item 5):
 * asyncpool_lease_adopt_token() and asyncpool_lease_adopt() start a new
 * generation for the adopter, so the giver's token and lease are
 * refused (-ESTALE, -EALREADY, nothing for a lease's void release) and
 * counted in bad_releases from then on, and the adopter keeps the
 * buffer.  In one process (local and shared pools, with and without
 * caches) and across two (a peer adopts what this process gives, with
 * and without a cache of its own), with the hand-off protocol of
 * asyncpool_lease_adopt_token(3): a token in transit when the receiver
 * dies is still the giver's; one adopted is the dead adopter's, and a
 * reclaim returns it.
 */
#include "config.h"

#include <errno.h>
#include <stddef.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>

#include <asyncpool.h>
#include "tap.h"
#include "testutil.h"
#include "shared-common.h"

#define N  8
#define BS 64

static size_t out(struct asyncpool *pool)
{
	asyncpool_cache_flush(pool);
	return N - asyncpool_available(pool);
}

/* bad_releases and fenced_releases moved by exactly bad and fenced since *b0, *f0. */
static void counted(struct asyncpool *pool, uint64_t b0, uint64_t f0, uint64_t bad,
		    uint64_t fenced, const char *what, const char *why)
{
	is_int(fenced_releases(pool) - f0, fenced, "%s: %s: fenced_releases", what, why);
	is_int(bad_releases(pool) - b0, bad, "%s: %s: bad_releases", what, why);
}

static void one_process(struct asyncpool *pool, const char *what)
{
	struct asyncpool_lease l, a, b, c;
	uint64_t bad = bad_releases(pool), fen = fenced_releases(pool), t, ta;

	/* by token */
	is_int(asyncpool_acquire(pool, &l), 0, "%s: acquire", what);
	t = asyncpool_lease_token(&l);
	is_int(asyncpool_lease_adopt_token(pool, t, &a), 0, "%s: adopt the token", what);
	is_int(a.buffer_index, l.buffer_index, "%s: the same buffer", what);
	ok(a.generation != l.generation && a.generation != 0, "%s: a new generation", what);
	is_int(asyncpool_lease_token(&a), ((uint64_t)a.generation << 32) | a.buffer_index,
	       "%s: the adopter's token names the new generation", what);
	is_int(asyncpool_release_token(pool, t), -ESTALE, "%s: the giver's token: -ESTALE", what);
	asyncpool_lease_release(&l);
	counted(pool, bad, fen, 0, 2, what, "the giver's token and lease, fenced, not bad");
	memset(&b, 0x55, sizeof(b));
	is_int(asyncpool_lease_adopt_token(pool, t, &b), -ESTALE,
	       "%s: the giver's token cannot be adopted again", what);
	ok(b.release.fn == NULL, "%s: and the lease is zeroed", what);
	is_int(out(pool), 1, "%s: the adopter keeps the buffer", what);
	asyncpool_lease_release(&a);
	is_int(out(pool), 0, "%s: the adopter releases it", what);
	counted(pool, bad, fen, 0, 2, what, "the adopter's release is accepted");
	/* Once the adopter gave it back, the fence is no longer told apart. */
	is_int(asyncpool_release_token(pool, t), -ESTALE, "%s: the giver's token later: -ESTALE",
	       what);
	counted(pool, bad, fen, 1, 2, what, "after the adopter's release, a bad release");

	/* by index */
	is_int(asyncpool_acquire(pool, &l), 0, "%s: acquire", what);
	is_int(asyncpool_lease_adopt(pool, l.buffer_index, &a), 0, "%s: adopt by index", what);
	ok(a.generation != l.generation && a.generation != 0, "%s: a new generation", what);
	is_int(asyncpool_release_token(pool, asyncpool_lease_token(&l)), -ESTALE,
	       "%s: the giver's token: -ESTALE", what);
	asyncpool_lease_release(&l);
	counted(pool, bad, fen, 1, 4, what, "by index: the giver's token and lease, fenced");
	is_int(out(pool), 1, "%s: the adopter keeps the buffer", what);
	/* Adopted again: the newest adoption's record is the one kept. */
	ta = asyncpool_lease_token(&a);
	is_int(asyncpool_lease_adopt_token(pool, ta, &b), 0, "%s: the adopter's token adopted",
	       what);
	asyncpool_lease_release(&a);
	counted(pool, bad, fen, 1, 5, what, "the first adopter's lease, fenced by the second");
	is_int(asyncpool_release_token(pool, asyncpool_lease_token(&l)), -ESTALE,
	       "%s: the first giver's token: -ESTALE", what);
	counted(pool, bad, fen, 2, 5, what, "two adoptions on, a bad release");
	is_int(asyncpool_release_token(pool, asyncpool_lease_token(&b)), 0,
	       "%s: the last adopter's token releases it", what);
	b.release.fn = NULL;
	is_int(out(pool), 0, "%s: back", what);

	/* a double release is a bad release, not a fenced one */
	is_int(asyncpool_acquire(pool, &l), 0, "%s: acquire", what);
	c = l;
	asyncpool_lease_release(&l);
	asyncpool_lease_release(&c);
	counted(pool, bad, fen, 3, 5, what, "a copy released twice");
	is_int(asyncpool_acquire(pool, &l), 0, "%s: acquire", what);
	is_int(asyncpool_lease_adopt_token(pool, asyncpool_lease_token(&l), &a), 0, "%s: adopt",
	       what);
	c = a;
	asyncpool_lease_release(&a);
	asyncpool_lease_release(&c);
	counted(pool, bad, fen, 4, 5, what, "the adopter's copy released twice");
	l.release.fn = NULL;

	/* the giver released first: nothing to adopt */
	is_int(asyncpool_acquire(pool, &l), 0, "%s: acquire", what);
	t = asyncpool_lease_token(&l);
	asyncpool_lease_release(&l);
	is_int(asyncpool_lease_adopt_token(pool, t, &a), -ESTALE, "%s: a released token: -ESTALE", what);
	counted(pool, bad, fen, 4, 5, what, "a refused adoption is not a release");
	is_int(out(pool), 0, "%s: every buffer back", what);
	is_int(asyncpool_check(pool), 0, "%s: check", what);
}
#define ONE_PROCESS 45

/*
 * A caller built against the struct of 1.3 (up to empty) gets its bytes
 * alone, and bad_releases as 1.3 counted: the fenced releases too.
 */
static void old_caller(struct asyncpool *pool, const char *what)
{
	const size_t v1 = offsetof(struct asyncpool_stats, empty) + sizeof(uint64_t);
	union {
		struct asyncpool_stats st;
		unsigned char b[sizeof(struct asyncpool_stats) + 8];
	} u;
	size_t k;

	memset(&u, 0xa5, sizeof(u));
	u.st.size = v1;
	is_int(asyncpool_stats(pool, &u.st), 0, "%s: the 1.3 struct: accepted", what);
	is_int(u.st.size, v1, "%s: the 1.3 struct: size kept", what);
	is_int(u.st.bad_releases, bad_releases(pool) + fenced_releases(pool),
	       "%s: the 1.3 struct: bad_releases counts the fenced ones too", what);
	for (k = v1; k < sizeof(u.b) && u.b[k] == 0xa5; k++)
		;
	is_int(k, sizeof(u.b), "%s: the 1.3 struct: no byte past it written", what);
}
#define OLD_CALLER 4

/* This process gives, a peer adopts. */
static void two_processes(bool peer_cache)
{
	const char *what = peer_cache ? "2 processes, the adopter cached" : "2 processes";
	struct asyncpool_shared_options o;
	struct asyncpool_shared *sp;
	struct asyncpool *pool;
	struct asyncpool_lease l;
	struct peer_rep rep;
	int sock;
	int32_t orc = -1;
	uint64_t bad, fen, t;
	pid_t pid;

	shared_options(&o, BS, N);
	if (asyncpool_shared_create(&o, &sp))
		bail_out("shared_create");
	pool = asyncpool_shared_pool(sp);
	is_int(asyncpool_set_quarantine(pool, 0), 0, "%s: quarantine 0", what);
	pid = spawn_peer(&sock, "serve", NULL);
	if (pid < 0)
		bail_out("spawn");
	if (asyncpool_shm_send_fd(sock, asyncpool_shared_fd(sp)) ||
	    read_full(sock, &orc, sizeof(orc)) || orc)
		bail_out("the peer did not open the pool (%d)", orc);
	is_int(peer_call(sock, OP_CACHE, peer_cache ? 4 : 0, 0, NULL), 0, "%s: the peer's cache",
	       what);
	bad = bad_releases(pool);
	fen = fenced_releases(pool);

	is_int(asyncpool_acquire(pool, &l), 0, "%s: acquire", what);
	t = asyncpool_lease_token(&l);
	is_int(peer_call(sock, OP_ADOPT_TOKEN, 0, t, &rep), 0, "%s: the peer adopts the token", what);
	ok(rep.index == l.buffer_index && rep.value >> 32 != t >> 32 && rep.value >> 32 != 0,
	   "%s: the same buffer, a new generation", what);
	is_int(asyncpool_release_token(pool, t), -ESTALE, "%s: the giver's token: -ESTALE", what);
	asyncpool_lease_release(&l);
	counted(pool, bad, fen, 0, 2, what, "the giver's token and lease, fenced by the peer");
	is_int(peer_call(sock, OP_AVAILABLE, 0, 0, &rep), 0, "%s: available", what);
	is_int(rep.value, N - 1, "%s: the adopter keeps the buffer", what);
	is_int(peer_call(sock, OP_RELEASE, l.buffer_index, 0, NULL), 0, "%s: the adopter releases it",
	       what);
	is_int(peer_call(sock, OP_AVAILABLE, 0, 0, &rep), 0, "%s: available", what);
	is_int(rep.value, N, "%s: every buffer is back", what);
	counted(pool, bad, fen, 0, 2, what, "the adopter's release is not counted");

	/* In transit when the receiver dies: still the giver's. */
	is_int(asyncpool_acquire(pool, &l), 0, "%s: acquire, token in transit", what);
	t = asyncpool_lease_token(&l);
	{
		struct asyncpool_lease a;
		uint64_t ta;

		is_int(asyncpool_acquire(pool, &a), 0, "%s: acquire another", what);
		ta = asyncpool_lease_token(&a);
		is_int(peer_call(sock, OP_ADOPT_TOKEN, 0, ta, &rep), 0, "%s: the peer adopts it", what);
		a.release.fn = NULL;
		kill(pid, SIGKILL);
		is_int(wait_peer(pid), 128 + SIGKILL, "%s: the receiver is killed", what);
		close(sock);
		/* The giver cleans up before the reclaim: what the dead
		 * receiver adopted is fenced, not a double release. */
		is_int(asyncpool_release_token(pool, ta), -ESTALE,
		       "%s: the adopted one is not the giver's", what);
		counted(pool, bad, fen, 0, 3, what, "the dead adopter's buffer, fenced");
		is_int(asyncpool_reclaim(pool), 1, "%s: a reclaim returns the adopted buffer only",
		       what);
		/* Once the buffer is back, the fence is no longer told apart. */
		is_int(asyncpool_release_token(pool, ta), -ESTALE,
		       "%s: after the reclaim: -ESTALE", what);
		counted(pool, bad, fen, 1, 3, what, "after the reclaim, a bad release");
	}
	is_int(out(pool), 1, "%s: the token in transit is still held", what);
	is_int(asyncpool_release_token(pool, t), 0, "%s: the giver releases it", what);
	l.release.fn = NULL;
	is_int(out(pool), 0, "%s: every buffer is back", what);
	is_int(asyncpool_check(pool), 0, "%s: check", what);
	asyncpool_shared_close(sp);
}
#define TWO_PROCESSES 30

int main(void)
{
	struct asyncpool_proactor *p;
	struct asyncpool_shared_options o;
	struct asyncpool_shared *sp;
	struct asyncpool *pool;

	plan(4 * ONE_PROCESS + OLD_CALLER + 2 * TWO_PROCESSES);
	alarm(60);
	if (asyncpool_proactor_create_memory(&p))
		bail_out("proactor");
	pool = make_pool(p, BS, N, 0);
	one_process(pool, "local");
	old_caller(pool, "local");
	asyncpool_destroy(pool);
	pool = make_pool(p, BS, N, 4);
	one_process(pool, "local cached");
	asyncpool_destroy(pool);
	for (int cached = 0; cached < 2; cached++) {
		shared_options(&o, BS, N);
		if (asyncpool_shared_create(&o, &sp))
			bail_out("shared_create");
		if (cached && asyncpool_set_cache(asyncpool_shared_pool(sp), 4))
			bail_out("set_cache");
		one_process(asyncpool_shared_pool(sp), cached ? "shared cached" : "shared");
		asyncpool_shared_close(sp);
	}
	two_processes(false);
	two_processes(true);
	asyncpool_proactor_destroy(p);
	return done_testing();
}
