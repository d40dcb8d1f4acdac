/* SPDX-License-Identifier: MIT */
/*
 * The scribble fuzzer (issue 21): a peer process writes random and
 * adversarial values into every record of a live shared pool that a peer
 * can write (attachment life and epoch, dead_since, pid, steps' busy,
 * count, buffers and words, the buffers' state words, the head word,
 * depth[], the reclaimer word) and takes and drops read and write OFD
 * locks on the lock bytes (the liveness bytes and the reclaim byte),
 * while a victim process runs every public call on the pool: acquire,
 * release, bulk, tokens, adoption, release by index, reclaim, check,
 * available, stats, waits with short timeouts, the wait fd, cache
 * flushes, opening and closing another handle.  The pool has channels
 * (issue 33): the scribbler writes their ends, steps, heads, wake words,
 * slots and counters too, and the victim opens and closes both ends of
 * one, sends and receives leases and tokens on it, and waits on it.
 *
 * A watchdog in the parent reads, through shared memory, which call the
 * victim is in and since when: a call that runs longer than its own
 * timeout + 1 s (20 s in a sanitizer build) is a hang (the victim is
 * killed, the test fails).  The
 * victim must exit 0 (no crash; the sanitizer builds stop at the first
 * report) and every lease it gets must lie inside the pool's buffers.
 *
 * Rounds, each on a fresh pool, each with a focus of the scribbler (one
 * kind of record, then all of them); iterations of the victim from
 * stress_iterations().  The layout is reached through tests/layout-util.h
 * (the library's geometry), not through offsets of its own.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <asyncpool.h>
#include "tap.h"
#include "testutil.h"
#include "layout-util.h"
#include "shared-common.h"
#include "../lib/channel_ring.h"

#define N      32
#define BS     64
#define HELD   64                       /* leases the victim keeps at most */
#define CHANS  2
#define CAP    4
/*
 * 1 s beyond a call's own timeout: the bound of issue 21.  A sanitizer
 * build slows every atomic 5 to 20 times, and a call that gives up on a
 * list a peer rewrites without end makes AP_MAX_RETRIES attempts (0.2 s
 * plain): there the bound is 20 s, which still tells a bounded call from
 * a loop without end.
 */
static uint64_t grace_ns(void)
{
	const char *san = getenv("ASYNCPOOL_SANITIZER_CFLAGS");

	return san && *san ? 20000000000ull : 1000000000ull;
}
#define GRACE grace_ns()

enum call {
	C_NONE, C_ACQUIRE, C_RELEASE, C_BULK, C_RELEASE_BULK, C_TOKENS, C_RELEASE_TOKENS,
	C_RELEASE_TOKEN, C_ADOPT_TOKEN, C_ADOPT, C_RELEASE_INDEX, C_RECLAIM, C_CHECK,
	C_AVAILABLE, C_STATS, C_WAIT, C_FLUSH, C_SET_CACHE, C_FLUSH_ALL, C_WAIT_FD,
	C_OPEN_CLOSE, C_QUARANTINE, C_CHAN_OPEN, C_CHAN_SEND, C_CHAN_RECV, C_CHAN_WAIT,
	C_CHAN_STATS, C_COUNT
};

static const char *const names[C_COUNT] = {
	"none", "acquire", "release", "acquire_bulk", "release_bulk", "acquire_tokens",
	"release_tokens", "release_token", "lease_adopt_token", "lease_adopt",
	"release_index", "reclaim", "check", "available", "stats", "acquire_wait",
	"cache_flush", "set_cache", "cache_flush_all", "wait_fd", "open+close",
	"set_quarantine", "channel_open+close", "channel_send", "channel_recv",
	"channel_recv_wait", "channel_stats",
};

/* Shared between the parent, the victim and the scribbler. */
struct watch {
	_Atomic int call;               /* what the victim is in, C_NONE between */
	_Atomic uint64_t start;         /* CLOCK_MONOTONIC ns of its start */
	_Atomic uint64_t timeout;       /* its own timeout, ns */
	_Atomic int go;                 /* the victim has opened: scribble */
	_Atomic int stop;               /* the victim is done: stop scribbling */
	_Atomic uint64_t calls[C_COUNT];
	_Atomic uint64_t longest[C_COUNT];
	_Atomic uint64_t outside;       /* leases outside the buffers */
	_Atomic uint64_t writes;        /* values the scribbler wrote */
	_Atomic uint64_t locks;         /* lock calls of the scribbler that succeeded */
};

static struct watch *W;

static uint64_t rng_state;

static uint64_t rnd(void)
{
	/* xorshift64* */
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545f4914f6cdd1dull;
}

/* ---- the scribbler ---- */

/* An index or link: mostly near the edges of the pool. */
static uint32_t adv_index(void)
{
	static const uint32_t v[] = { 0, 1, N - 1, N, N + 1, AP_FL_END, AP_FL_END - 1,
				      0x7fffffffu, 0x80000000u };

	return rnd() % 2 ? (uint32_t)(rnd() % N) : v[rnd() % (sizeof(v) / sizeof(v[0]))];
}

/* A state word: random, or well formed with adversarial parts. */
static uint64_t adv_word(void *base)
{
	switch (rnd() % 4) {
	case 0:
		return rnd();
	case 1:         /* a copy of another buffer's word */
		return atomic_load(layout_state_at(base, N, (uint32_t)(rnd() % N)));
	default:
		return layout_word((uint32_t)(rnd() % 4),
				   (uint32_t)(rnd() % 2 ? rnd() % (AP_ATTACH_SLOTS + 2) : rnd()),
				   (uint32_t)rnd());
	}
}

static uint64_t adv_time(void)
{
	struct timespec ts;
	uint64_t now;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	now = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
	switch (rnd() % 5) {
	case 0: return 0;
	case 1: return UINT64_MAX;
	case 2: return now + rnd() % 10000000000ull;    /* in the future */
	case 3: return now - rnd() % 10000000000ull;
	default: return rnd();
	}
}

static void scribble_attach(void *base)
{
	struct ap_attach *a = layout_attach_at(base, N, (uint32_t)(rnd() % AP_ATTACH_SLOTS));

	switch (rnd() % 3) {
	case 0:
		atomic_store(&a->life, rnd() % 2 ? AP_ATT_MAKE(rnd() % 4, rnd() % 8) : rnd());
		break;
	case 1:
		atomic_store(&a->dead_since, adv_time());
		break;
	default:
		atomic_store(&a->pid, (uint32_t)rnd());
		break;
	}
}

static void scribble_step(void *base)
{
	struct ap_attach *a = layout_attach_at(base, N, (uint32_t)(rnd() % AP_ATTACH_SLOTS));
	struct ap_step *st = &a->step[rnd() % AP_STEPS];

	switch (rnd() % 4) {
	case 0:
		atomic_store(&st->busy, rnd() % 2 ? 1 : (uint32_t)rnd());
		break;
	case 1:
		atomic_store(&st->count, rnd() % 2 ? (uint32_t)(rnd() % (AP_STEP_WORDS + 3))
						   : (uint32_t)rnd());
		break;
	case 2:
		atomic_store(&st->idx[rnd() % AP_STEP_WORDS], adv_index());
		break;
	default:
		atomic_store(&st->word[rnd() % AP_STEP_WORDS], adv_word(base));
		break;
	}
}

/*
 * The forging of issue 21: a buffer made CACHED by a dead slot, and the
 * steps of many DEAD records naming it with the word a live attachment
 * (the victim, perhaps) writes when its reclaim claims it.
 */
static void scribble_forge(void *base)
{
	uint32_t i = (uint32_t)(rnd() % N), live[AP_ATTACH_SLOTS], nlive = 0, v, d;
	uint64_t w = atomic_load(layout_state_at(base, N, i));

	for (uint32_t s = 0; s < AP_ATTACH_SLOTS; s++)
		if (AP_ATT_STATE(atomic_load(&layout_attach_at(base, N, s)->life)) == AP_ATT_LIVE)
			live[nlive++] = s;
	if (!nlive)
		return;
	v = live[rnd() % nlive];
	do
		d = (uint32_t)(rnd() % AP_ATTACH_SLOTS);
	while (d == v);
	atomic_store(layout_state_at(base, N, i),
		     layout_word(AP_K_CACHED, d + 1, AP_W_GEN(w)));
	for (uint32_t s = 0; s < AP_ATTACH_SLOTS; s++) {
		struct ap_attach *a = layout_attach_at(base, N, s);

		if (s == v || (s != d && AP_ATT_STATE(atomic_load(&a->life)) == AP_ATT_LIVE &&
				rnd() % 2))
			continue;
		atomic_store(&a->life, AP_ATT_MAKE(AP_ATT_DEAD, rnd() % 8));
		for (uint32_t k = 0; k < AP_STEPS; k++) {
			atomic_store(&a->step[k].idx[0], i);
			atomic_store(&a->step[k].word[0], layout_word(AP_K_FREE, v + 1, AP_W_GEN(w)));
			atomic_store(&a->step[k].count, 1);
		}
	}
}

static void scribble_words(void *base)
{
	if (rnd() % 2)
		atomic_store(layout_state_at(base, N, (uint32_t)(rnd() % N)), adv_word(base));
	else            /* layout version 3: the links are apart from the words */
		atomic_store(layout_link_at(base, N, (uint32_t)(rnd() % N)), adv_index());
}

static void scribble_head(void *base)
{
	struct ap_pool_head *h = (struct ap_pool_head *)((char *)base + AP_OFF_HEAD);
	struct ap_pool_counters *c = (struct ap_pool_counters *)((char *)base + AP_OFF_COUNTERS);

	switch (rnd() % 4) {
	case 0:
		atomic_store(&h->head, AP_HEAD_MAKE(adv_index(), (uint32_t)rnd()));
		break;
	case 1:
		atomic_store(layout_depth_at(base, N, (uint32_t)(rnd() % N)),
			     rnd() % 2 ? (uint32_t)rnd() : (uint32_t)(rnd() % (N + 2)));
		break;
	case 2:
		atomic_store(&c->reclaimer, rnd() % 2 ? rnd() % (AP_ATTACH_SLOTS + 3) |
							  (rnd() % 4) << 8 : rnd());
		break;
	default:
		atomic_store(&h->wait, (uint32_t)rnd());
		break;
	}
}

/*
 * A channel's every field: ends, step, head, wake words, slots (their
 * tag and span too), the redelivery ring and its head, counters, and
 * the pool's from[] records (layout 5).
 */
static void scribble_chan(void *base)
{
	struct ap_chan *ch = ap_chan_in(base, N, CHANS, CAP, (uint32_t)(rnd() % CHANS));
	struct ap_chan_slot *sl = &ap_chan_slots(ch)[rnd() % CAP];
	struct ap_chan_slot *rs = &ap_chan_redo(ch, CAP)[rnd() % CAP];
	struct ap_chan_from *f = &ap_chan_from_in(base, N, CHANS, CAP)[rnd() % N];
	uint64_t h = atomic_load(&ch->head), rh = atomic_load(&ch->rhead);

	switch (rnd() % 14) {
	case 0:
		atomic_store(rnd() % 2 ? &ch->send_end : &ch->recv_end,
			     rnd() % 3 == 0 ? 0 : rnd() % 2 ? rnd() :
			     (rnd() % 8) << 8 | rnd() % (AP_ATTACH_SLOTS + 2));
		break;
	case 1:
		atomic_store(&ch->step_pos, rnd() % 2 ? h + rnd() % (2 * CAP) : rnd());
		atomic_store(&ch->step_n, rnd() % 2 ? (uint32_t)(rnd() % (CAP + 2)) : (uint32_t)rnd());
		break;
	case 2:
		atomic_store(&ch->head, rnd() % 2 ? h + rnd() % 3 - 1 : rnd());
		break;
	case 3:
		atomic_store(&ch->wait, (uint32_t)rnd());
		break;
	case 4:         /* a lap: this one, the next, one that jumps, anything */
		atomic_store(&sl->seq, rnd() % 4 ? h + rnd() % (2 * CAP) : rnd());
		break;
	case 5: {       /* a token: of a real buffer at its word's generation, or not */
		uint32_t i = adv_index();
		uint64_t w = i < N ? atomic_load(layout_state_at(base, N, i)) : rnd();

		atomic_store(&sl->token, rnd() % 2 ? ((uint64_t)(AP_W_GEN(w) + rnd() % 2) << 32) | i
						   : rnd());
		break;
	}
	case 6:         /* a buffer's word made QUEUED in some channel */
		atomic_store(layout_state_at(base, N, (uint32_t)(rnd() % N)),
			     ap_queued_word((uint32_t)(rnd() % (CHANS + 1)), (uint32_t)rnd()));
		break;
	case 7:         /* a span: inside, at the edge, past it, anything */
		atomic_store(&sl->span, rnd() % 2 ? AP_SPAN_MAKE(rnd() % (BS + 2), rnd() % (BS + 2))
						  : rnd());
		break;
	case 8:
		atomic_store(&sl->tag, rnd());
		break;
	case 9:         /* the redelivery ring: a lap, a token */
		if (rnd() % 2)
			atomic_store(&rs->seq, rnd() % 4 ? rh + rnd() % (2 * CAP) : rnd());
		else
			atomic_store(&rs->token, rnd() % 2 ? ((uint64_t)(uint32_t)rnd() << 32) |
							     adv_index() : rnd());
		break;
	case 10:
		atomic_store(&ch->rhead, rnd() % 2 ? rh + rnd() % 3 - 1 : rnd());
		break;
	case 11:
		atomic_store(&ch->room, (uint32_t)rnd());
		break;
	case 12: {      /* a from[] record: a real channel at the word's generation, or not */
		uint32_t i = (uint32_t)(f - ap_chan_from_in(base, N, CHANS, CAP));
		uint64_t w = atomic_load(layout_state_at(base, N, i));

		atomic_store(&f->chan_gen, rnd() % 2 ? AP_FROM_MAKE(rnd() % (CHANS + 1), AP_W_GEN(w))
						     : rnd());
		atomic_store(&f->span, rnd() % 2 ? AP_SPAN_MAKE(0, BS) : rnd());
		break;
	}
	default:
		atomic_store(rnd() % 2 ? &ch->corruptions : &ch->sent, rnd());
		break;
	}
}

static void scribble_lock(int rw, int ro)
{
	struct flock fl;
	int r = (int)(rnd() % 3);

	memset(&fl, 0, sizeof(fl));
	fl.l_type = r == 0 ? F_RDLCK : r == 1 ? F_WRLCK : F_UNLCK;
	fl.l_whence = SEEK_SET;
	fl.l_start = (off_t)(AP_LOCK_BASE + rnd() % (AP_ATTACH_SLOTS + 2));
	fl.l_len = rnd() % 8 ? 1 : 0;   /* now and then: to the end of the file */
	if (fcntl(fl.l_type == F_WRLCK ? rw : rnd() % 2 ? ro : rw, F_OFD_SETLK, &fl) == 0)
		atomic_fetch_add(&W->locks, 1);
}

static void scribbler(int fd, int focus)
{
	struct asyncpool_shm shm;
	char path[64];
	int rw, ro;

	rng_state = (test_seed(0) ^ 0x9e3779b97f4a7c15ull ^ (uint64_t)focus << 20) | 1;
	if (asyncpool_shm_open_fd(fd, &shm))
		_exit(2);
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	rw = open(path, O_RDWR | O_CLOEXEC);
	ro = open(path, O_RDONLY | O_CLOEXEC);
	if (rw < 0 || ro < 0)
		_exit(3);
	while (!atomic_load(&W->go))
		usleep(1000);
	while (!atomic_load(&W->stop)) {
		unsigned burst = 1 + (unsigned)(rnd() % 16);

		for (unsigned b = 0; b < burst; b++) {
			switch (focus < 6 ? focus : (int)(rnd() % 6)) {
			case 0: scribble_attach(shm.base); break;
			case 1:
				if (rnd() % 8)
					scribble_step(shm.base);
				else
					scribble_forge(shm.base);
				break;
			case 2: scribble_words(shm.base); break;
			case 3: scribble_head(shm.base); break;
			case 4: scribble_lock(rw, ro); break;
			default: scribble_chan(shm.base); break;
			}
			atomic_fetch_add(&W->writes, 1);
		}
		/* Mostly flat out, now and then a pause that lets the victim
		 * run on what was written. */
		if (rnd() % 16 == 0)
			usleep((useconds_t)(rnd() % 500));
		else
			sched_yield();
	}
	_exit(0);
}

/* ---- the victim ---- */

static struct asyncpool_shared *vsp;
static struct asyncpool *vp;
static char *buf_lo, *buf_hi;

static void begin(enum call c, uint64_t timeout_ns)
{
	atomic_store(&W->timeout, timeout_ns);
	atomic_store(&W->start, now_ns());
	atomic_store(&W->call, c);
}

static void end(enum call c)
{
	uint64_t took = now_ns() - atomic_load(&W->start);

	atomic_store(&W->call, C_NONE);
	atomic_fetch_add(&W->calls[c], 1);
	if (took > atomic_load(&W->longest[c]))
		atomic_store(&W->longest[c], took);
}

static void check_lease(const struct asyncpool_lease *l)
{
	char *p = asyncpool_span_ptr(l->span);

	if (l->buffer_index >= N || p < buf_lo || p + l->span.length > buf_hi ||
	    l->span.length > BS)
		atomic_fetch_add(&W->outside, 1);
}

/* The victim's ends of channel 0, NULL while closed. */
static struct asyncpool_channel *ends[2];

static void victim(int fd, long iterations, int round)
{
	struct asyncpool_lease held[HELD];
	uint64_t tokens[8];
	unsigned nheld = 0;
	int wfd = -1;

	rng_state = (test_seed(0) ^ 0x2545f4914f6cdd1dull ^ (uint64_t)round << 20) | 1;
	if (asyncpool_shared_open_fd(fd, &vsp))
		_exit(2);
	vp = asyncpool_shared_pool(vsp);
	buf_lo = asyncpool_region_base(asyncpool_region(vp));
	buf_hi = buf_lo + (size_t)N * BS;
	(void)asyncpool_set_quarantine(vp, (uint32_t)(rnd() % 20));
	atomic_store(&W->go, 1);
	/* At least iterations calls, and on until the scribbler (which may
	 * get less of the CPUs) has written half as many values. */
	for (long it = 0; it < 4 * iterations &&
			  (it < iterations || atomic_load(&W->writes) < (uint64_t)iterations / 2);
	     it++) {
		enum call c = (enum call)(1 + rnd() % (C_COUNT - 1));
		struct asyncpool_lease l;
		int rc, n;

		/* Keep the slow calls rare, so that the rounds stay short. */
		if ((c == C_WAIT || c == C_OPEN_CLOSE || c == C_WAIT_FD || c == C_CHAN_WAIT ||
		     c == C_CHAN_OPEN) && rnd() % 8)
			c = C_ACQUIRE;
		switch (c) {
		case C_ACQUIRE:
			begin(c, 0);
			rc = asyncpool_acquire(vp, &l);
			end(c);
			if (rc == 0) {
				check_lease(&l);
				if (nheld < HELD)
					held[nheld++] = l;
				else
					asyncpool_lease_release(&l);
			}
			break;
		case C_RELEASE:
			if (!nheld)
				break;
			begin(c, 0);
			asyncpool_lease_release(&held[--nheld]);
			end(c);
			break;
		case C_BULK:
			n = 1 + (int)(rnd() % 8);
			if (nheld + (unsigned)n > HELD)
				break;
			begin(c, 0);
			rc = asyncpool_acquire_bulk(vp, &held[nheld], (unsigned)n);
			end(c);
			if (rc == 0) {
				for (int j = 0; j < n; j++)
					check_lease(&held[nheld + (unsigned)j]);
				nheld += (unsigned)n;
			}
			break;
		case C_RELEASE_BULK:
			n = (int)(rnd() % (nheld + 1));
			begin(c, 0);
			asyncpool_release_bulk(&held[nheld - (unsigned)n], (unsigned)n);
			end(c);
			nheld -= (unsigned)n;
			break;
		case C_TOKENS:
			n = 1 + (int)(rnd() % 8);
			begin(c, 0);
			rc = asyncpool_acquire_tokens(vp, tokens, (unsigned)n);
			end(c);
			if (rc == 0) {
				begin(C_RELEASE_TOKENS, 0);
				(void)asyncpool_release_tokens(vp, tokens, (unsigned)n);
				end(C_RELEASE_TOKENS);
			}
			break;
		case C_RELEASE_TOKENS:
			for (int j = 0; j < 8; j++)
				tokens[j] = rnd() % 2 ? rnd() : (rnd() % 64) << 32 | adv_index();
			begin(c, 0);
			(void)asyncpool_release_tokens(vp, tokens, 1 + (unsigned)(rnd() % 8));
			end(c);
			break;
		case C_RELEASE_TOKEN:
			begin(c, 0);
			(void)asyncpool_release_token(vp, (rnd() % 64) << 32 | adv_index());
			end(c);
			break;
		case C_ADOPT_TOKEN:
			begin(c, 0);
			rc = asyncpool_lease_adopt_token(vp, (rnd() % 64) << 32 | adv_index(), &l);
			end(c);
			if (rc == 0) {
				check_lease(&l);
				asyncpool_lease_release(&l);
			}
			break;
		case C_ADOPT:
			begin(c, 0);
			rc = asyncpool_lease_adopt(vp, adv_index(), &l);
			end(c);
			if (rc == 0) {
				check_lease(&l);
				asyncpool_lease_release(&l);
			}
			break;
		case C_RELEASE_INDEX:
			begin(c, 0);
			(void)asyncpool_release_index(vp, adv_index());
			end(c);
			break;
		case C_RECLAIM:
			begin(c, 0);
			(void)asyncpool_reclaim(vp);
			end(c);
			break;
		case C_CHECK:
			begin(c, 0);
			(void)asyncpool_check(vp);
			end(c);
			break;
		case C_AVAILABLE:
			begin(c, 0);
			if (asyncpool_available(vp) > N)
				atomic_fetch_add(&W->outside, 1);
			end(c);
			break;
		case C_STATS: {
			struct asyncpool_stats s = { .size = sizeof(s) };

			begin(c, 0);
			(void)asyncpool_stats(vp, &s);
			end(c);
			break;
		}
		case C_WAIT: {
			int64_t t = (int64_t)(rnd() % 5000000);

			begin(c, (uint64_t)t);
			rc = asyncpool_acquire_wait(vp, &l, t);
			end(c);
			if (rc == 0) {
				check_lease(&l);
				asyncpool_lease_release(&l);
			}
			break;
		}
		case C_FLUSH:
			begin(c, 0);
			(void)asyncpool_cache_flush(vp);
			end(c);
			break;
		case C_SET_CACHE:
			begin(c, 0);
			(void)asyncpool_set_cache(vp, (uint32_t)(rnd() % 3) * 4);
			end(c);
			break;
		case C_FLUSH_ALL:
			begin(c, 0);
			(void)asyncpool_cache_flush_all(vp);
			end(c);
			break;
		case C_WAIT_FD:
			begin(c, 0);
			if (wfd < 0)
				wfd = asyncpool_wait_fd(vp);
			end(c);
			break;
		case C_OPEN_CLOSE: {
			struct asyncpool_shared *o;

			begin(c, 0);
			if (asyncpool_shared_open_fd(fd, &o) == 0)
				asyncpool_shared_close(o);
			end(c);
			break;
		}
		case C_QUARANTINE:
			begin(c, 0);
			(void)asyncpool_set_quarantine(vp, (uint32_t)(rnd() % 20));
			end(c);
			break;
		case C_CHAN_OPEN: {
			unsigned e = (unsigned)(rnd() % 2);

			begin(c, 0);
			if (ends[e]) {
				(void)asyncpool_channel_close(ends[e]);
				ends[e] = NULL;
			} else {
				(void)asyncpool_channel_open(vp, 0, e ? ASYNCPOOL_CHANNEL_RECV :
							     ASYNCPOOL_CHANNEL_SEND, &ends[e]);
			}
			end(c);
			break;
		}
		case C_CHAN_SEND:
			if (!ends[0] || !nheld)
				break;
			if (rnd() % 2) {
				begin(c, 0);
				rc = asyncpool_channel_send(ends[0], &held[nheld - 1]);
				end(c);
				if (rc == 0)
					nheld--;
			} else {
				n = nheld < 3 ? (int)nheld : 3;
				for (int j = 0; j < n; j++)
					tokens[j] = asyncpool_lease_token(&held[nheld - 1 - j]);
				begin(c, 0);
				rc = asyncpool_channel_send_tokens(ends[0], tokens, (uint32_t)n);
				end(c);
				if (rc > n)
					atomic_fetch_add(&W->outside, 1);
				else if (rc > 0)
					nheld -= (unsigned)rc;
			}
			break;
		case C_CHAN_RECV:
			if (!ends[1])
				break;
			begin(c, 0);
			rc = asyncpool_channel_recv_tokens(ends[1], tokens, 8);
			end(c);
			for (int j = 0; j < rc; j++) {
				if ((uint32_t)tokens[j] >= N)
					atomic_fetch_add(&W->outside, 1);
				else
					(void)asyncpool_release_token(vp, tokens[j]);
			}
			break;
		case C_CHAN_WAIT: {
			int64_t t = (int64_t)(rnd() % 5000000);

			if (!ends[1])
				break;
			begin(c, (uint64_t)t);
			rc = asyncpool_channel_recv_wait(ends[1], &l, t);
			end(c);
			if (rc == 0) {
				check_lease(&l);
				asyncpool_lease_release(&l);
			}
			break;
		}
		case C_CHAN_STATS: {
			struct asyncpool_channel_stats s = { .size = sizeof(s) };

			begin(c, 0);
			(void)asyncpool_channel_stats(vp, (uint32_t)(rnd() % (CHANS + 1)), &s);
			end(c);
			/* depth counts both rings since 1.10: each at most CAP. */
			if (s.queued_redelivered > CAP || s.depth - s.queued_redelivered > CAP)
				atomic_fetch_add(&W->outside, 1);
			break;
		}
		default:
			break;
		}
	}
	for (unsigned e = 0; e < 2; e++)
		if (ends[e])
			asyncpool_channel_close(ends[e]);
	begin(C_RELEASE_BULK, 0);
	asyncpool_release_bulk(held, nheld);
	end(C_RELEASE_BULK);
	begin(C_OPEN_CLOSE, 0);
	asyncpool_shared_close(vsp);
	end(C_OPEN_CLOSE);
	_exit(0);
}

/* ---- the parent ---- */

/*
 * The call the victim has been in for longer than its timeout + GRACE,
 * or C_NONE.  The start is read before the clock: read after it, a
 * begin() in between made now - start wrap to a huge unsigned value, a
 * hang reported in a victim that had just started a call (found under
 * ASan, where it came in 5 rounds of 6).  And only from a call that held
 * still across the reads: begin() writes timeout, start and call in that
 * order, end() clears call, so the same start before and after the
 * other reads, with a call in between, is one call's.
 */
static int overdue(void)
{
	uint64_t s = atomic_load(&W->start), t, n;
	int c = atomic_load(&W->call);

	t = atomic_load(&W->timeout);
	n = now_ns();
	if (c == C_NONE || atomic_load(&W->start) != s || atomic_load(&W->call) != c || n < s)
		return C_NONE;
	return n - s > t + GRACE ? c : C_NONE;
}

static const char *const focuses[] = {
	"attachments", "steps", "buffer words", "head, depth, reclaimer word", "lock bytes",
	"channels", "everything",
};
#define ROUNDS (int)(sizeof(focuses) / sizeof(focuses[0]))

int main(void)
{
	long total = stress_iterations(24000), per = total / ROUNDS + 1;
	uint64_t longest = 0, calls = 0;
	int longest_call = C_NONE, crashed = 0, hangs = 0, scribbler_bad = 0;

	plan(ROUNDS * 3 + 4);
	(void)test_seed(0x5eed0021);    /* each process's stream: the seed and its round */
	alarm(600);     /* the watchdog's own bound */
	W = mmap(NULL, sizeof(*W), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (W == MAP_FAILED)
		bail_out("mmap");
	for (int r = 0; r < ROUNDS; r++) {
		struct asyncpool_shared_options o;
		struct asyncpool_shared *sp;
		pid_t sc, vi;
		int st, hung = C_NONE;

		memset(W, 0, sizeof(*W));
		shared_options(&o, BS, N);
		o.channels = CHANS;
		o.channel_capacity = CAP;
		if (asyncpool_shared_create(&o, &sp))
			bail_out("shared_create");
		sc = fork_or_bail();
		if (sc == 0)
			scribbler(asyncpool_shared_fd(sp), r);
		vi = fork_or_bail();
		if (vi == 0)
			victim(asyncpool_shared_fd(sp), per, r);
		/* The watchdog. */
		for (;;) {
			pid_t w = waitpid(vi, &st, WNOHANG);
			int c;

			if (w == vi)
				break;
			if ((c = overdue()) != C_NONE) {
				hung = c;
				kill(vi, SIGKILL);
				waitpid(vi, &st, 0);
				break;
			}
			usleep(10000);
		}
		atomic_store(&W->stop, 1);
		scribbler_bad += wait_peer(sc) != 0;
		ok(hung == C_NONE, "%s: no call over its timeout + 1 s%s%s", focuses[r],
		   hung ? ": hung in " : "", hung ? names[hung] : "");
		ok(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s: the victim exited 0 (status %#x)",
		   focuses[r], (unsigned)st);
		hangs += hung != C_NONE;
		crashed += !(WIFEXITED(st) && WEXITSTATUS(st) == 0);
		{
			uint64_t n = 0, lr = 0;
			int lc = C_NONE;

			for (int c = 1; c < C_COUNT; c++) {
				n += atomic_load(&W->calls[c]);
				if (atomic_load(&W->longest[c]) > lr) {
					lr = atomic_load(&W->longest[c]);
					lc = c;
				}
			}
			calls += n;
			if (lr > longest) {
				longest = lr;
				longest_call = lc;
			}
			diag("%s: %llu calls, %llu values written, %llu locks taken or dropped, "
			     "longest call %s %.1f ms", focuses[r], (unsigned long long)n,
			     (unsigned long long)atomic_load(&W->writes),
			     (unsigned long long)atomic_load(&W->locks), names[lc], lr / 1e6);
		}
		is_int(atomic_load(&W->outside), 0, "%s: every lease inside the buffers", focuses[r]);
		asyncpool_shared_close(sp);
	}
	is_int(hangs, 0, "%d rounds: 0 hangs", ROUNDS);
	is_int(crashed, 0, "%d rounds: 0 crashes", ROUNDS);
	is_int(scribbler_bad, 0, "the scribblers exited 0");
	ok(calls > 0, "%llu calls in all; the longest: %s, %.1f ms", (unsigned long long)calls,
	   names[longest_call], longest / 1e6);
	return done_testing();
}
