/* SPDX-License-Identifier: MIT */
/*
 * Reclaim: give back to the freelist every buffer held by an attachment
 * whose process died (attach.c), and finish the steps it died in.
 *
 * A dead attachment's buffers are found by their words (buffer_state.h):
 * - CACHED by it: off the list, never given to the kernel: at once;
 * - LEASED by it: after the quarantine (the kernel may still read or
 *   write them for a ring the dead process had, asyncpool_reclaim(3));
 * - FREE, pushed by it, and not on the list: it died between claiming
 *   them and its CAS on the head;
 * - FREE and not on the list, with exactly the word a step of it
 *   recorded: it died between its CAS on the head and its mark.
 * "Not on the list" needs a list that held still: the head is read, the
 * list walked, the head read again, and the walk counts only if the
 * head (index and tag) did not move.  Buffers off the list do not come
 * back onto it but by their owner's push, and a dead owner pushes
 * nothing, so what the walk did not reach stays unreachable until it is
 * claimed.  Each claim is a CAS from the word that was read: a live
 * popper marking the same buffer (a pop after the last pusher died)
 * and the claim exclude each other, and the popper pops again.
 *
 * Reclaims serialise on one more OFD lock byte, taken without waiting:
 * a second reclaimer returns 0 at once.  Nobody ever waits for one.  The
 * threads of one handle share its open file description, which never
 * conflicts with its own lock: a flag of the handle serialises them.
 *
 * The automatic reclaim of an acquire that finds the pool empty is rate
 * limited per handle (ap_reclaim_auto): a scan takes the lock byte and
 * asks the lock of every live attachment, one fcntl(2) each, about 3 us
 * alone and 24 us with 16 live attachments (measured), which a caller
 * that polls an empty pool would otherwise pay on every call.
 */
#include "pool_internal.h"
#include "attach_live.h"

#include <fcntl.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define SNAPSHOT_TRIES 64

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int reclaim_lock(int fd, short type)
{
	return ap_lock_byte(fd, F_OFD_SETLK, type, AP_LOCK_RECLAIM, NULL);
}

/* Mark in reach[] the list as it was at one instant; false if it never held still. */
static bool snapshot(const struct ap_freelist *fl, unsigned char *reach)
{
	size_t bytes = (size_t)fl->count / 8 + 1;

	for (int t = 0; t < SNAPSHOT_TRIES; t++) {
		uint64_t h = atomic_load_explicit(&fl->line->head, memory_order_acquire);
		uint32_t i = AP_HEAD_INDEX(h), n = 0;
		bool ok = true;

		memset(reach, 0, bytes);
		while (i != AP_FL_END) {
			uint64_t w;

			if (i >= fl->count || n++ >= fl->count || (reach[i / 8] & (1u << (i % 8)))) {
				ok = false;
				break;
			}
			w = atomic_load_explicit(&fl->state[i], memory_order_acquire);
			if (AP_W_KIND(w) != AP_K_FREE) {
				ok = false;
				break;
			}
			reach[i / 8] |= (unsigned char)(1u << (i % 8));
			i = atomic_load_explicit(&fl->link[i], memory_order_relaxed);
		}
		if (ok && atomic_load_explicit(&fl->line->head, memory_order_acquire) == h)
			return true;
		sched_yield();
	}
	return false;
}

struct reclaim {
	struct asyncpool *pool;
	uint32_t *claimed;
	uint32_t n;
	unsigned char *reach;
	bool have_snapshot;
};

/*
 * Claim buffer i from word w (now FREE, ours, unlinked).  A cached word
 * holds the generation of the next lease: it steps back (ap_gen_prev).
 * A claimed buffer counts as reached, so that no step claims it again:
 * the claim may leave the word as it was (a FREE word we pushed, or a
 * cached one we popped, is FREE, ours, at that generation already), and
 * two steps of the dead may name one buffer (tests/model/crash.pml with
 * 3 processes: a buffer pushed twice).
 */
static void claim(struct reclaim *r, uint32_t i, uint64_t w)
{
	struct ap_freelist *fl = &r->pool->fl;
	uint32_t g = AP_W_KIND(w) == AP_K_CACHED ? ap_gen_prev(AP_W_GEN(w)) : AP_W_GEN(w);

	if (ap_state_cas(&fl->state[i], &w, AP_W_MAKE(AP_K_FREE, fl->me, g))) {
		r->claimed[r->n++] = i;
		r->reach[i / 8] |= (unsigned char)(1u << (i % 8));
	}
}

static bool unreachable(const struct reclaim *r, uint32_t i)
{
	return r->have_snapshot && !(r->reach[i / 8] & (1u << (i % 8)));
}

int ap_reclaim(struct asyncpool *pool)
{
	struct ap_freelist *fl = &pool->fl;
	uint64_t dead = 0, pending = 0, since[AP_ATTACH_SLOTS], now;
	struct reclaim r = { .pool = pool };
	int rc;

	if (pool->lock_fd < 0)
		return -EOPNOTSUPP;
	if (atomic_exchange_explicit(&pool->reclaiming, true, memory_order_acquire))
		return 0;               /* another thread of this handle is */
	if (reclaim_lock(pool->lock_fd, F_WRLCK)) {
		atomic_store_explicit(&pool->reclaiming, false, memory_order_release);
		return 0;               /* another process is reclaiming */
	}
	now = now_ns();
	for (uint32_t s = 0; s < AP_ATTACH_SLOTS; s++) {
		struct ap_attach *a = ap_attach_rec(pool, s);
		uint64_t life = atomic_load_explicit(&a->life, memory_order_acquire), zero = 0;

		if (AP_ATT_STATE(life) == AP_ATT_LIVE) {
			if (ap_attach_alive(pool, s) != 0)
				continue;
			if (!atomic_compare_exchange_strong_explicit(
				    &a->life, &life, AP_ATT_MAKE(AP_ATT_DEAD, AP_ATT_EPOCH(life)),
				    memory_order_acq_rel, memory_order_relaxed))
				continue;
		} else if (AP_ATT_STATE(life) != AP_ATT_DEAD) {
			continue;
		}
		(void)atomic_compare_exchange_strong(&a->dead_since, &zero, now);
		since[s] = atomic_load(&a->dead_since);
		dead |= (uint64_t)1 << s;
	}
	if (!dead) {
		rc = 0;
		goto unlock;
	}
	r.claimed = malloc((size_t)fl->count * sizeof(uint32_t));
	r.reach = malloc((size_t)fl->count / 8 + 1);
	if (!r.claimed || !r.reach) {
		rc = -ENOMEM;
		goto out;
	}
	r.have_snapshot = snapshot(fl, r.reach);
	for (uint32_t i = 0; i < fl->count; i++) {
		uint64_t w = ap_state_load(&fl->state[i]);
		uint32_t h = AP_W_HOLDER(w), s = h - 1;

		if (!h || h > AP_ATTACH_SLOTS || !(dead & ((uint64_t)1 << s)))
			continue;
		switch (AP_W_KIND(w)) {
		case AP_K_CACHED:
			claim(&r, i, w);
			break;
		case AP_K_LEASED:
			if (now - since[s] >= (uint64_t)pool->quarantine_ms * 1000000u)
				claim(&r, i, w);
			else
				pending |= (uint64_t)1 << s;
			break;
		case AP_K_FREE:
			if (unreachable(&r, i))
				claim(&r, i, w);
			else if (!r.have_snapshot)
				pending |= (uint64_t)1 << s;
			break;
		default:
			break;
		}
	}
	/* The pops the dead died in. */
	for (uint32_t s = 0; s < AP_ATTACH_SLOTS; s++) {
		struct ap_attach *a = ap_attach_rec(pool, s);

		if (!(dead & ((uint64_t)1 << s)))
			continue;
		for (uint32_t k = 0; k < AP_STEPS; k++) {
			struct ap_step *st = &a->step[k];
			uint32_t n = atomic_load(&st->count);

			if (!n) {
				atomic_store(&st->busy, 0);
				continue;
			}
			if (!r.have_snapshot) {
				pending |= (uint64_t)1 << s;
				continue;
			}
			for (uint32_t j = 0; j < n && j < AP_STEP_WORDS; j++) {
				uint32_t i = atomic_load(&st->idx[j]);
				uint64_t seen = atomic_load(&st->word[j]);

				if (i < fl->count && ap_state_load(&fl->state[i]) == seen &&
				    unreachable(&r, i))
					claim(&r, i, seen);
			}
			atomic_store(&st->count, 0);
			atomic_store(&st->busy, 0);
		}
	}
	rc = ap_fl_push_chain(fl, r.claimed, r.n);
	if (!rc)
		rc = (int)r.n;
	/* Free the slots that hold nothing any more. */
	for (uint32_t s = 0; s < AP_ATTACH_SLOTS; s++) {
		struct ap_attach *a = ap_attach_rec(pool, s);
		uint64_t life;

		if (!(dead & ((uint64_t)1 << s)) || (pending & ((uint64_t)1 << s)))
			continue;
		life = atomic_load(&a->life);
		atomic_store(&a->pid, 0);
		atomic_store(&a->dead_since, 0);
		atomic_store_explicit(&a->life, AP_ATT_MAKE(AP_ATT_FREE, AP_ATT_EPOCH(life)),
				      memory_order_release);
	}
out:
	free(r.claimed);
	free(r.reach);
unlock:
	(void)reclaim_lock(pool->lock_fd, F_UNLCK);
	atomic_store_explicit(&pool->reclaiming, false, memory_order_release);
	return rc;
}

/*
 * At most one scan per AP_RECLAIM_AUTO_MS per handle: at 24 us a scan
 * with 16 live attachments (about 90 us with all 64), a thread that
 * polls an empty pool spends at most 0.25% (0.9%) of a CPU on them, and
 * the buffers of a dead process come back at most 10 ms later than
 * without the limit (its leased ones wait out 5 s of quarantine
 * anyway).  CLOCK_MONOTONIC_COARSE is a vDSO read of a few ns, up to a
 * jiffy (1 to 10 ms) old: the interval is 10 ms give or take a jiffy.
 */
int ap_reclaim_auto(struct asyncpool *pool)
{
	struct timespec ts;
	uint64_t now, after;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	now = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
	after = atomic_load_explicit(&pool->reclaim_after, memory_order_relaxed);
	if (now < after ||
	    !atomic_compare_exchange_strong_explicit(&pool->reclaim_after, &after,
						     now + AP_RECLAIM_AUTO_MS * 1000000u,
						     memory_order_relaxed, memory_order_relaxed))
		return 0;
	return ap_reclaim(pool);
}

AP_EXPORT int asyncpool_reclaim(struct asyncpool *pool)
{
	if (!pool)
		return -EINVAL;
	return ap_reclaim(pool);
}

AP_EXPORT int asyncpool_set_quarantine(struct asyncpool *pool, uint32_t ms)
{
	if (!pool)
		return -EINVAL;
	if (pool->lock_fd < 0)
		return -EOPNOTSUPP;
	pool->quarantine_ms = ms;
	return 0;
}
