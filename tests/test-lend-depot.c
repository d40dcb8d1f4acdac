/* SPDX-License-Identifier: MIT */
/*
 * The bulk lends of a local pool without caches through its depot
 * (lib/pool_lend.c, lib/pool_depot.c, since 1.4.3): the owner's bulk
 * release of 32 of its own buffers puts them in a depot slot as arrays,
 * each word still its own at the next generation and the released[]
 * hint written; a bulk acquire takes a slot as it is (its own batch) or
 * stamps it (another's).  What must hold:
 * - the tokens that come back out of a slot are the ones put in, one
 *   generation on, and no buffer is handed out twice;
 * - a stale copy of a token put in the depot is refused, at once on
 *   another thread (-ESTALE, counted); a lease of the last generation
 *   before the wrap goes to the freelist instead;
 * - another thread's bulk acquire owns what it took (word and hints);
 * - the audit, asyncpool_available(3), a waiter, a single acquire on an
 *   empty freelist, a forked child, asyncpool_set_cache(3) and destroy
 *   all see the depot's buffers.
 *
 * 320 buffers: the depot holds 8 batches of 32, so a release of all
 * leaves 256 in the depot and 64 on the freelist.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <asyncpool.h>
#include "tap.h"
#include "testutil.h"
#include "hooks.h"

#define BUFFERS 320u
#define BATCH   32u     /* AP_LEND_CHUNK */
#define DEPOT   256u    /* 8 slots */

static struct asyncpool_proactor *proactor;

static struct asyncpool *lend_pool(void)
{
	struct asyncpool *pool = make_pool(proactor, 64, BUFFERS, 0);

	if (!pool->depot || ap_depot_batch(pool) != BATCH)
		bail_out("a pool without caches has no depot of %u", BATCH);
	return pool;
}

/* Whether t[0..n) are n different buffers in range. */
static bool distinct(const uint64_t *t, uint32_t n)
{
	unsigned char seen[BUFFERS] = { 0 };

	for (uint32_t j = 0; j < n; j++)
		if ((uint32_t)t[j] >= BUFFERS || seen[(uint32_t)t[j]]++)
			return false;
	return true;
}

/* How many of t[0..n) are in u[0..m) one generation on. */
static uint32_t matched_next(const uint64_t *t, uint32_t n, const uint64_t *u, uint32_t m)
{
	uint32_t found = 0;

	for (uint32_t j = 0; j < n; j++)
		for (uint32_t i = 0; i < m; i++)
			if ((uint32_t)u[i] == (uint32_t)t[j] &&
			    (uint32_t)(u[i] >> 32) == ap_gen_next((uint32_t)(t[j] >> 32))) {
				found++;
				break;
			}
	return found;
}

/*
 * How many of t[0..n) are owner o's: word CACHED o and owner_of[] o,
 * the word at the token's generation and released[] the one before
 * (lent), or one generation on and released[] the token's (released
 * into the depot, back).
 */
static uint32_t owned_by(struct asyncpool *pool, const uint64_t *t, uint32_t n, uint32_t o,
			 bool back)
{
	uint32_t good = 0;

	for (uint32_t j = 0; j < n; j++) {
		uint32_t i = (uint32_t)t[j], g = (uint32_t)(t[j] >> 32);
		uint32_t word_gen = back ? ap_gen_next(g) : g, hint = back ? g : ap_gen_prev(g);
		uint64_t w = ap_state_load(&pool->fl.state[i]);

		good += AP_W_KIND(w) == AP_K_CACHED && AP_W_OWNER(w) == o &&
			AP_W_GEN(w) == word_gen && atomic_load(&pool->released[i]) == hint &&
			atomic_load(&pool->owner_of[i]) == o;
	}
	return good;
}

static uint32_t lent_by(struct asyncpool *pool, const uint64_t *t, uint32_t n, uint32_t o)
{
	return owned_by(pool, t, n, o, false);
}

static uint32_t in_depot_state(struct asyncpool *pool, const uint64_t *t, uint32_t n, uint32_t o)
{
	return owned_by(pool, t, n, o, true);
}

static uint32_t my_id(struct asyncpool *pool)
{
	struct ap_cache *c = ap_cache_of(pool);

	return c ? c->id : 0;
}

static uint32_t available(struct asyncpool *pool)
{
	int n = asyncpool_available(pool);

	return n < 0 ? 0 : (uint32_t)n;
}

/* The round trip on one thread: what goes in comes out, one generation on. */
static void test_round_trip(void)
{
	struct asyncpool *pool = lend_pool();
	uint64_t t[BUFFERS], u[BUFFERS];
	uint32_t me;

	is_int(asyncpool_acquire_tokens(pool, t, BUFFERS), 0, "round trip: all %u lent", BUFFERS);
	me = my_id(pool);
	ok(me != 0 && distinct(t, BUFFERS), "round trip: %u different buffers, owner %u", BUFFERS, me);
	is_int(lent_by(pool, t, BUFFERS, me), (int)BUFFERS, "round trip: each word and hint says lent by us");
	is_int(asyncpool_release_tokens(pool, t, BUFFERS), 0, "round trip: all released in one call");
	is_int((int)ap_depot_count(pool), (int)DEPOT, "round trip: 8 batches in the depot");
	is_int((int)ap_fl_free(&pool->fl), (int)(BUFFERS - DEPOT), "round trip: 64 on the freelist");
	is_int(in_depot_state(pool, t, DEPOT, me), (int)DEPOT,
	       "round trip: each depot word ours at the next generation, its hint the one released");
	is_int((int)available(pool), (int)BUFFERS, "round trip: asyncpool_available counts them all");
	is_int(asyncpool_release_index(pool, (uint32_t)t[7]), -EALREADY,
	       "round trip: a release by index of a buffer in the depot is refused");
	is_int(asyncpool_check(pool), 0, "round trip: the audit agrees");

	/* The first full slot: the first 32 released. */
	is_int(asyncpool_acquire_tokens(pool, u, BATCH), 0, "round trip: a bulk of 32");
	is_int(matched_next(t, BATCH, u, BATCH), (int)BATCH,
	       "round trip: the first batch released, one generation on");
	is_int(lent_by(pool, u, BATCH, me), (int)BATCH, "round trip: lent as they were, ours");
	is_int((int)ap_depot_count(pool), (int)(DEPOT - BATCH), "round trip: one slot fewer");
	is_int(asyncpool_acquire_tokens(pool, u + BATCH, BUFFERS - BATCH), 0,
	       "round trip: and all the others");
	ok(distinct(u, BUFFERS), "round trip: no buffer twice");
	is_int(matched_next(t, BUFFERS, u, BUFFERS), (int)BUFFERS,
	       "round trip: every one, one generation on");
	is_int((int)ap_depot_count(pool), 0, "round trip: the depot is empty");
	is_int(asyncpool_check(pool), 0, "round trip: the audit agrees while all are lent");
	is_int(asyncpool_destroy(pool), -EBUSY, "round trip: destroy refuses while lent");
	is_int(asyncpool_release_tokens(pool, u, BUFFERS), 0, "round trip: all back");
	is_int(asyncpool_destroy(pool), 0, "round trip: destroy with 256 in the depot");
}

struct peer {
	struct asyncpool *pool;
	const uint64_t *tok;
	uint32_t n;
	int rc;
	uint64_t got[BATCH];
	uint32_t id, owned;
	int back;
};

static void *release_copy(void *arg)
{
	struct peer *p = arg;

	p->rc = asyncpool_release_token(p->pool, p->tok[0]);
	return NULL;
}

static void *take_batch(void *arg)
{
	struct peer *p = arg;

	p->rc = asyncpool_acquire_tokens(p->pool, p->got, BATCH);
	p->id = my_id(p->pool);
	if (!p->rc)
		p->owned = lent_by(p->pool, p->got, BATCH, p->id);
	p->back = asyncpool_release_tokens(p->pool, p->got, BATCH);
	return NULL;
}

static void run(void *(*fn)(void *), struct peer *p)
{
	pthread_t t;

	if (pthread_create(&t, NULL, fn, p) || pthread_join(t, NULL))
		bail_out("pthread");
}

/* Stale copies of tokens in the depot, on this thread and another. */
static void test_stale(void)
{
	struct asyncpool *pool = lend_pool();
	uint64_t t[BATCH], u[BATCH];
	uint64_t bad = bad_releases(pool);
	struct peer p = { .pool = pool, .tok = &t[5] };

	is_int(asyncpool_acquire_tokens(pool, t, BATCH), 0, "stale: 32 lent");
	is_int(asyncpool_release_tokens(pool, t, BATCH), 0, "stale: 32 into the depot");
	is_int((int)ap_depot_count(pool), (int)BATCH, "stale: one batch there");
	is_int(asyncpool_release_token(pool, t[3]), -ESTALE, "stale: a copy on the owner's thread");
	is_int(asyncpool_release_tokens(pool, &t[7], 1), -ESTALE, "stale: a copy in a bulk");
	run(release_copy, &p);
	is_int(p.rc, -ESTALE, "stale: a copy on another thread, refused at once");
	is_int((int)(bad_releases(pool) - bad), 3, "stale: each counted");
	is_int((int)ap_depot_count(pool), (int)BATCH, "stale: the depot unchanged");
	is_int(asyncpool_acquire_tokens(pool, u, BATCH), 0, "stale: the batch lent again");
	is_int(matched_next(t, BATCH, u, BATCH), (int)BATCH, "stale: the same 32, one generation on");
	is_int(asyncpool_release_token(pool, t[9]), -ESTALE, "stale: an old copy of a lent one");
	is_int(asyncpool_release_tokens(pool, u, BATCH), 0, "stale: the new leases released");
	is_int(asyncpool_check(pool), 0, "stale: the audit agrees");
	is_int(asyncpool_destroy(pool), 0, "stale: destroy");
}

/* Another thread takes our batch: it owns it. */
static void test_other_owner(void)
{
	struct asyncpool *pool = lend_pool();
	uint64_t t[BATCH], u[BATCH];
	struct peer p = { .pool = pool };
	struct ap_depot_slot sl;
	uint32_t me;

	is_int(asyncpool_acquire_tokens(pool, t, BATCH), 0, "other: 32 lent");
	me = my_id(pool);
	is_int(asyncpool_release_tokens(pool, t, BATCH), 0, "other: into the depot");
	run(take_batch, &p);
	is_int(p.rc, 0, "other: another thread's bulk acquire");
	ok(p.id != 0 && p.id != me, "other: its owner id %u is not ours (%u)", p.id, me);
	is_int(matched_next(t, BATCH, p.got, BATCH), (int)BATCH, "other: it got our batch, one generation on");
	is_int((int)p.owned, (int)BATCH, "other: each word and hint names it");
	is_int(p.back, 0, "other: its own release of them");
	is_int(asyncpool_check(pool), 0, "other: the audit agrees");
	/* Its batch is its own in the depot now, stamped ours when we take it. */
	is_int(asyncpool_acquire_tokens(pool, u, BATCH), 0, "other: we take its batch");
	is_int(lent_by(pool, u, BATCH, me), (int)BATCH, "other: stamped ours");
	is_int(asyncpool_release_tokens(pool, u, BATCH), 0, "other: released");
	ok(ap_depot_grab(pool, true, &sl), "other: a full slot");
	is_int((int)sl.n, (int)BATCH, "other: of 32");
	is_int((int)sl.owner, (int)me, "other: which names us, who filled it");
	ap_depot_let_go(pool, &sl, sl.n);
	is_int(asyncpool_check(pool), 0, "other: the audit agrees");
	is_int(asyncpool_destroy(pool), 0, "other: destroy");
}

/*
 * A bulk smaller than a slot takes the slot's top: the last put in, in
 * the order they were stacked, one generation on, and leaves the rest
 * for the next; tokens and leases alike (a token bulk copies the top
 * as it is, a lease bulk writes each lease's index and generation).
 */
static void test_part_of_slot(void)
{
	struct asyncpool *pool = lend_pool();
	struct asyncpool_lease l[BATCH], m[BATCH];
	uint64_t t[BATCH], u[BATCH], lt[BATCH], mt[BATCH];
	const uint32_t k = 8;

	is_int(asyncpool_acquire_tokens(pool, t, BATCH), 0, "part: 32 lent");
	is_int(asyncpool_release_tokens(pool, t, BATCH), 0, "part: 32 released");
	is_int((int)ap_depot_count(pool), (int)BATCH, "part: one slot of 32");
	is_int(asyncpool_acquire_tokens(pool, u, k), 0, "part: a bulk of 8");
	is_int(matched_next(t + BATCH - k, k, u, k), (int)k, "part: the slot's top 8, one generation on");
	is_int((int)ap_depot_count(pool), (int)(BATCH - k), "part: 24 left in the slot");
	is_int(asyncpool_acquire_tokens(pool, u + k, BATCH - k), 0, "part: a bulk of 24");
	is_int(matched_next(t, BATCH - k, u + k, BATCH - k), (int)(BATCH - k),
	       "part: the other 24, one generation on");
	ok(distinct(u, BATCH), "part: none twice");
	is_int(asyncpool_release_tokens(pool, u, BATCH), 0, "part: released");

	is_int(asyncpool_acquire_bulk(pool, l, BATCH), 0, "part: 32 leases lent");
	for (uint32_t j = 0; j < BATCH; j++)
		lt[j] = asyncpool_lease_token(&l[j]);
	asyncpool_release_bulk(l, BATCH);
	is_int((int)ap_depot_count(pool), (int)BATCH, "part: the leases in one slot");
	is_int(asyncpool_acquire_bulk(pool, m, k), 0, "part: a bulk of 8 leases");
	is_int(asyncpool_acquire_bulk(pool, m + k, BATCH - k), 0, "part: a bulk of 24 leases");
	for (uint32_t j = 0; j < BATCH; j++)
		mt[j] = asyncpool_lease_token(&m[j]);
	is_int(matched_next(lt + BATCH - k, k, mt, k), (int)k, "part: the 8 leases are the top");
	is_int(matched_next(lt, BATCH - k, mt + k, BATCH - k), (int)(BATCH - k),
	       "part: the 24 leases are the rest");
	ok(distinct(mt, BATCH), "part: no lease twice");
	asyncpool_release_bulk(m, BATCH);
	is_int(asyncpool_check(pool), 0, "part: the audit agrees");
	is_int(asyncpool_available(pool), BUFFERS, "part: all back");
	is_int(asyncpool_destroy(pool), 0, "part: destroy");
}

/*
 * A release with a stale copy among 32: the slot takes 31, and a bulk
 * acquire takes them and one more from the freelist.
 */
static void test_partial(void)
{
	struct asyncpool *pool = lend_pool();
	uint64_t t[2 * BATCH], u[BATCH], mix[BATCH], all[BUFFERS];
	uint64_t bad = bad_releases(pool);
	uint32_t depot;

	is_int(asyncpool_acquire_tokens(pool, t, 2 * BATCH), 0, "partial: 64 lent");
	is_int(asyncpool_release_token(pool, t[0]), 0, "partial: one released alone");
	memcpy(mix, t, sizeof(mix));    /* t[0], now stale, and 31 lent */
	is_int(asyncpool_release_tokens(pool, mix, BATCH), -ESTALE,
	       "partial: 31 released, the stale copy refused");
	is_int((int)(bad_releases(pool) - bad), 1, "partial: counted");
	is_int((int)ap_depot_count(pool), (int)BATCH - 1, "partial: 31 in one slot");
	is_int(asyncpool_check(pool), 0, "partial: the audit agrees");
	is_int(asyncpool_acquire_tokens(pool, u, BATCH), 0, "partial: a bulk of 32");
	is_int(matched_next(t + 1, BATCH - 1, u, BATCH), (int)BATCH - 1,
	       "partial: the 31, one generation on, and one more");
	ok(distinct(u, BATCH), "partial: all different");
	is_int((int)ap_depot_count(pool), 0, "partial: the slot emptied");
	is_int(asyncpool_release_tokens(pool, u, BATCH), 0, "partial: released");
	/* The same token twice in one array: the second is refused. */
	memcpy(mix, t + BATCH, (BATCH - 1) * sizeof(uint64_t));
	mix[BATCH - 1] = t[BATCH];
	bad = bad_releases(pool);
	depot = ap_depot_count(pool);
	is_int(asyncpool_release_tokens(pool, mix, BATCH), -ESTALE,
	       "partial: a token twice in an array: 31 released, the copy refused");
	is_int((int)(bad_releases(pool) - bad), 1, "partial: counted");
	is_int((int)(ap_depot_count(pool) - depot), (int)BATCH - 1,
	       "partial: 31 more in the depot, not 32");
	is_int(asyncpool_release_token(pool, t[2 * BATCH - 1]), 0, "partial: the last one alone");
	is_int(asyncpool_acquire_tokens(pool, all, BUFFERS), 0, "partial: every buffer lent");
	ok(distinct(all, BUFFERS), "partial: none twice");
	is_int(asyncpool_release_tokens(pool, all, BUFFERS), 0, "partial: all back");
	is_int(asyncpool_check(pool), 0, "partial: the audit agrees");
	is_int(asyncpool_destroy(pool), 0, "partial: destroy");
}

/*
 * A lease of the last generation before the wrap in a release of 32:
 * not put in the slot (its next generation is 1, not g + 1), but
 * released all the same, to the freelist, and lent next at 1.
 */
static void test_wrap(void)
{
	struct asyncpool *pool = lend_pool();
	uint64_t t[BATCH], all[BUFFERS];
	uint64_t bad = bad_releases(pool);
	uint32_t me, i, found = 0;

	is_int(asyncpool_acquire_tokens(pool, t, BATCH), 0, "wrap: 32 lent");
	me = my_id(pool);
	i = (uint32_t)t[5];
	/* As if lent 2^32 - 1 - g times more: its word, its hint, its token. */
	atomic_store(&pool->fl.state[i], ap_owned_word(me, 0xffffffffu));
	atomic_store(&pool->released[i], 0xfffffffeu);
	t[5] = AP_TOKEN_MAKE(0xffffffffu, i);
	is_int(asyncpool_release_tokens(pool, t, BATCH), 0, "wrap: all 32 released");
	is_int((int)(bad_releases(pool) - bad), 0, "wrap: none refused");
	is_int((int)ap_depot_count(pool), (int)BATCH - 1, "wrap: 31 in the depot");
	is_int(asyncpool_check(pool), 0, "wrap: the audit agrees");
	is_int(asyncpool_acquire_tokens(pool, all, BUFFERS), 0, "wrap: every buffer lent");
	ok(distinct(all, BUFFERS), "wrap: none twice");
	for (uint32_t j = 0; j < BUFFERS; j++)
		if ((uint32_t)all[j] == i)
			found = (uint32_t)(all[j] >> 32);
	is_int((int)found, 1, "wrap: the buffer lent at generation 1");
	is_int(asyncpool_release_tokens(pool, all, BUFFERS), 0, "wrap: all back");
	is_int(asyncpool_destroy(pool), 0, "wrap: destroy");
}

/* Fill the depot from this thread: 256 in it, 64 on the freelist. */
static void fill_depot(struct asyncpool *pool, const char *what)
{
	uint64_t t[BUFFERS];

	if (asyncpool_acquire_tokens(pool, t, BUFFERS) || asyncpool_release_tokens(pool, t, BUFFERS))
		bail_out("%s: a cycle of every buffer", what);
	is_int((int)ap_depot_count(pool), (int)DEPOT, "%s: 256 in the depot", what);
}

struct single {
	struct asyncpool *pool;
	uint32_t got;
	bool distinct;
};

/* Every buffer by single acquires on a thread of its own: the depot's come when the freelist is empty. */
static void *acquire_singly(void *arg)
{
	struct single *s = arg;
	uint64_t t[BUFFERS + 1] = { 0 };

	while (s->got < BUFFERS + 1 && asyncpool_acquire_tokens(s->pool, &t[s->got], 1) == 0)
		s->got++;
	s->distinct = distinct(t, s->got);
	for (uint32_t j = 0; j < s->got; j++)
		(void)asyncpool_release_token(s->pool, t[j]);
	return NULL;
}

static void test_single_and_wait(void)
{
	struct asyncpool *pool = lend_pool();
	struct single s = { .pool = pool };
	struct asyncpool_lease l[BUFFERS - DEPOT + 1];
	pthread_t t;
	int rc = 0;

	fill_depot(pool, "single");
	if (pthread_create(&t, NULL, acquire_singly, &s) || pthread_join(t, NULL))
		bail_out("pthread");
	is_int((int)s.got, (int)BUFFERS, "single: another thread gets every buffer one by one");
	ok(s.distinct, "single: all different");
	is_int(asyncpool_check(pool), 0, "single: the audit agrees");
	is_int(asyncpool_destroy(pool), 0, "single: destroy");

	/* A waiter finds the depot when the freelist is empty. */
	pool = lend_pool();
	fill_depot(pool, "wait");
	for (uint32_t j = 0; j < BUFFERS - DEPOT; j++)
		rc |= ap_fl_pop(&pool->fl, AP_K_LEASED, &l[j].buffer_index, &l[j].generation);
	is_int(rc, 0, "wait: the freelist's 64 taken below the lends");
	is_int((int)ap_fl_free(&pool->fl), 0, "wait: the freelist is empty");
	is_int(asyncpool_acquire_wait(pool, &l[BUFFERS - DEPOT], 1000000000), 0,
	       "wait: acquire_wait gets one");
	asyncpool_lease_release(&l[BUFFERS - DEPOT]);
	rc = 0;
	for (uint32_t j = 0; j < BUFFERS - DEPOT; j++)
		rc |= asyncpool_release_index(pool, l[j].buffer_index);
	is_int(rc, 0, "wait: the 64 back by index");
	is_int((int)available(pool), (int)BUFFERS, "wait: all available");
	is_int(asyncpool_check(pool), 0, "wait: the audit agrees");
	is_int(asyncpool_destroy(pool), 0, "wait: destroy");
}

/* A forked child sees the depot, and the parent's pool is unchanged by it. */
static void test_fork_and_set_cache(void)
{
	struct asyncpool *pool = lend_pool();
	uint64_t t[BUFFERS];
	int status = -1;
	pid_t pid;

	fill_depot(pool, "fork");
	pid = fork_or_bail();
	if (pid == 0) {
		int code = 0;

		if (asyncpool_acquire_tokens(pool, t, BUFFERS) || !distinct(t, BUFFERS))
			code |= 1;
		if (asyncpool_release_tokens(pool, t, BUFFERS) || asyncpool_check(pool))
			code |= 2;
		_exit(code);
	}
	waitpid(pid, &status, 0);
	is_int(status, 0, "fork: the child gets every buffer once, and its audit agrees");
	is_int((int)ap_depot_count(pool), (int)DEPOT, "fork: the parent's depot as it was");
	is_int(asyncpool_check(pool), 0, "fork: the parent's audit agrees");

	/* Caches set now: the depot's batches of 32 go back to the freelist. */
	is_int(asyncpool_set_cache(pool, 16), 0, "set_cache: caches on a pool that lent without");
	is_int((int)ap_depot_count(pool), 0, "set_cache: the old depot given back");
	is_int((int)available(pool), (int)BUFFERS, "set_cache: every buffer available");
	is_int(asyncpool_check(pool), 0, "set_cache: the audit agrees");
	is_int(asyncpool_acquire_tokens(pool, t, BUFFERS), 0, "set_cache: all lent again");
	ok(distinct(t, BUFFERS), "set_cache: all different");
	is_int(asyncpool_release_tokens(pool, t, BUFFERS), 0, "set_cache: all back");
	is_int(asyncpool_check(pool), 0, "set_cache: the audit agrees");
	is_int(asyncpool_destroy(pool), 0, "set_cache: destroy");
}

/*
 * Threads racing through the depot: two bulk threads (32 to 64 per
 * call, so slots fill, empty and split), one that takes 100 one at a
 * time and gives them back one at a time, on
 * a pool of 200 so that the freelist runs empty and pops drain the
 * depot (ap_pool_refund); each marks what it holds, so a buffer handed
 * out twice is seen at once.  A bulk acquire may find too few while
 * another thread holds a slot (-ENOBUFS, counted, not a failure).
 */
#define RACERS 3
#define RACE_BUFFERS 200u

struct racer {
	struct asyncpool *pool;
	_Atomic unsigned char *held;
	long rounds;
	unsigned id;
	long twice, failed, nobufs;
};

static void *race(void *arg)
{
	struct racer *r = arg;
	uint64_t t[100];

	for (long k = 0; k < r->rounds; k++) {
		unsigned n = r->id == 0 ? 100 : 32 + (unsigned)((k * 7 + r->id) % 33), got = 0;
		int rc = 0;

		/* Thread 0 one at a time, 100 held, then one at a time back. */
		if (r->id == 0)
			while (got < n && (rc = asyncpool_acquire_tokens(r->pool, &t[got], 1)) == 0)
				got++;
		else if ((rc = asyncpool_acquire_tokens(r->pool, t, n)) == 0)
			got = n;
		r->nobufs += rc == -ENOBUFS;
		r->failed += rc && rc != -ENOBUFS;
		n = got;
		for (unsigned j = 0; j < n; j++)
			if ((uint32_t)t[j] >= RACE_BUFFERS || atomic_exchange(&r->held[(uint32_t)t[j]], 1))
				r->twice++;
		for (unsigned j = 0; j < n; j++)
			if ((uint32_t)t[j] < RACE_BUFFERS)
				atomic_store(&r->held[(uint32_t)t[j]], 0);
		if (r->id == 0)
			for (unsigned j = 0; j < n; j++)
				r->failed += asyncpool_release_token(r->pool, t[j]) != 0;
		else if (n && asyncpool_release_tokens(r->pool, t, n))
			r->failed++;
	}
	return NULL;
}

static void test_race(void)
{
	struct asyncpool *pool = make_pool(proactor, 64, RACE_BUFFERS, 0);
	static _Atomic unsigned char held[RACE_BUFFERS];
	struct racer r[RACERS];
	pthread_t th[RACERS];
	long twice = 0, failed = 0, nobufs = 0, rounds = stress_iterations(50000);
	uint64_t t[RACE_BUFFERS];

	for (unsigned i = 0; i < RACERS; i++) {
		r[i] = (struct racer){ .pool = pool, .held = held, .rounds = rounds, .id = i };
		if (pthread_create(&th[i], NULL, race, &r[i]))
			bail_out("pthread");
	}
	for (unsigned i = 0; i < RACERS; i++) {
		pthread_join(th[i], NULL);
		twice += r[i].twice;
		failed += r[i].failed;
		nobufs += r[i].nobufs;
	}
	diag("race: %ld rounds on each of %u threads, %ld acquires found too few", rounds, RACERS,
	     nobufs);
	is_int((int)twice, 0, "race: no buffer held twice");
	is_int((int)failed, 0, "race: every release, and every acquire but -ENOBUFS, succeeded");
	is_int((int)available(pool), (int)RACE_BUFFERS, "race: every buffer available");
	is_int(asyncpool_check(pool), 0, "race: the audit agrees");
	is_int(asyncpool_acquire_tokens(pool, t, RACE_BUFFERS), 0, "race: all lent at once");
	ok(distinct(t, RACE_BUFFERS), "race: all different");
	is_int(asyncpool_release_tokens(pool, t, RACE_BUFFERS), 0, "race: all back");
	is_int(asyncpool_destroy(pool), 0, "race: destroy");
}

int main(void)
{
	if (asyncpool_proactor_create_memory(&proactor))
		bail_out("proactor");
	test_round_trip();
	test_stale();
	test_other_owner();
	test_part_of_slot();
	test_partial();
	test_wrap();
	test_single_and_wait();
	test_fork_and_set_cache();
	test_race();
	is_int(asyncpool_proactor_destroy(proactor), 0, "proactor destroy");
	return done_testing();
}
