/*
 * SPDX-License-Identifier: MIT
 *
 * A local pool's caches lend (lib/buffer_state.h, "Lent, not leased";
 * HACKING.md): a cache hands a buffer out with no store to its state
 * word, which stays CACHED at the lease's generation g.  A release of
 * generation g (by lease or token) accepts CACHED g as it accepts
 * LEASED g; a release by index, which knows no generation, must ask the
 * caches (ap_cache_claim_lent): stop them all as a flush does (bypass,
 * membarrier, wait for busy, as tests/model/bypass.pml), look through
 * them, and release only a buffer that none holds.
 *
 * One buffer; its word is kind and generation (WORD(k, g)), holder 0.
 * Thread A's cache holds it at generation 1.  A lends it and hands the
 * lease (generation 1) to thread B; then A acquires once more, which
 * refills its cache from the freelist if the buffer is back there.  B
 * releases the lease by token: into its own cache (CAS to CACHED g+1,
 * entry g+1), or, when it sees bypass, to the freelist (claim CAS to
 * FREE g, then the push).  Concurrently thread R releases the same
 * buffer by index: the double release that is the program's bug, which
 * must be refused, not corrupt the pool.  R runs at any point: before
 * the lend (the buffer sits in A's cache), while it is lent, after B's
 * release (in B's cache, or on the list, or back in A's cache).
 *
 * membarrier(2) makes R's store of bypass and its loads of busy
 * sequentially consistent with the owners' stores of busy and loads of
 * bypass (bypass.pml): spin's interleavings are exactly that.  The
 * depot is left out (it is looked through as a cache is).  Generations
 * stay below 4: no wrap within the search.
 *
 * Checked, on every move of the buffer (ghost where): it comes from
 * where the move says; a claim for the freelist never takes a buffer
 * that sits in a cache (in a cache and on the list at once); it is never
 * linked twice; and at the end exactly one of the two releases of the
 * lease won (the other was refused).
 *
 * -DB_INDEX: B releases by index too: two releases by index race (the
 *     lock orders their looks through the caches).  Must hold.
 * Mutants, which spin must catch:
 * -DNO_SCAN:    R trusts a CACHED word as lent, without asking the
 *     caches: spin finds the buffer claimed out of a cache.
 * -DNO_BYPASS:  R looks through the caches without stopping them: it
 *     misses an entry that an owner is writing.
 * -DNO_RECHECK: R does not re-read the word after its look.  Not
 *     caught, and not run by tests/test-model.sh: the claim's CAS on the
 *     whole word refuses any word that changed since R's load, because a
 *     word's generation only grows (CACHED g leaves for CACHED g+1 or
 *     FREE g, FREE g for g+1), so CACHED g never comes back until the
 *     generations wrap, which this search does not reach.
 */
#define FREE    0
#define LEASED  1
#define CACHED  2
#define WORD(k, g)  ((k) * 8 + (g))
#define KIND(w)     ((w) / 8)
#define GEN(w)      ((w) % 8)

/* where the buffer is (ghost) */
#define IN_A     1   /* in A's cache */
#define IN_B     2   /* in B's cache */
#define LIST     3   /* on the freelist */
#define LENT     4   /* lent out by a cache: a lease, no store to the word */
#define CLAIMED  5   /* claimed for the freelist, not linked yet */
#define REFILL   6   /* popped by A's refill, not in its cache yet */

byte word = WORD(CACHED, 1);
byte where = IN_A;
/* the caches: at most one entry each */
byte nA = 1, idxA = 0, genA = 1;
byte nB = 0, idxB = 255, genB = 0;
bool busyA, busyB, bypassA, bypassB;
bool lock;
byte lease = 0;    /* the generation A handed to B, once lent */
byte wins = 0, refusals = 0;

inline move(from, to) {
	assert(where == from);
	where = to
}

/* A claim for the freelist: never a buffer sitting in a cache. */
inline claim() {
	assert(where != IN_A && where != IN_B);
	move(LENT, CLAIMED)
}

/* The push of a claimed buffer: never linked twice. */
inline push() {
	atomic { assert(where != LIST); move(CLAIMED, LIST) }
}

/* Release by token of generation g: ap_cache_push or, under bypass,
 * ap_fl_release.  A failed CAS re-reads and re-checks: an atomic test
 * and set here. */
inline token_release(g) {
	busyB = 1;
	if
	:: bypassB ->
		busyB = 0;
		atomic {
			if
			:: word == WORD(LEASED, g) || word == WORD(CACHED, g) ->
				word = WORD(FREE, g); claim(); wins++; won = 1
			:: else -> refusals++
			fi
		}
		if
		:: won -> push()
		:: else
		fi
	:: else ->
		atomic {
			if
			:: word == WORD(LEASED, g) || word == WORD(CACHED, g) ->
				word = WORD(CACHED, g + 1); move(LENT, IN_B); wins++; won = 1
			:: else -> refusals++
			fi
		}
		if
		:: won -> idxB = 0; genB = g + 1; nB = 1
		:: else
		fi;
		busyB = 0
	fi
}

/* Release by index: ap_cache_lease_gen, then ap_fl_release. */
inline index_release() {
	w = word;
	if
	:: KIND(w) == LEASED -> g = GEN(w)
	:: KIND(w) == FREE -> g = 0
	:: KIND(w) == CACHED ->
#ifdef NO_SCAN
		g = GEN(w)
#else
		atomic { !lock -> lock = 1 };
#ifndef NO_BYPASS
		bypassA = 1; bypassB = 1;
		/* membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) */
		!busyA; !busyB;
#endif
		held = 0;
		m = nA;
		if
		:: m > 0 && idxA == 0 -> held = 1
		:: else
		fi;
		m = nB;
		if
		:: m > 0 && idxB == 0 -> held = 1
		:: else
		fi;
		if
#ifdef NO_RECHECK
		:: !held -> g = GEN(w)
#else
		:: !held && word == w -> g = GEN(w)
#endif
		:: else -> g = 0
		fi;
		bypassA = 0; bypassB = 0;
		lock = 0
#endif
	fi;
	atomic {
		if
		:: g != 0 && (word == WORD(LEASED, g) || word == WORD(CACHED, g)) ->
			word = WORD(FREE, g); claim(); wins++; won = 1
		:: else -> refusals++
		fi
	}
	if
	:: won -> push()
	:: else
	fi
}

proctype A()
{
	byte m, g;

	/* acquire: lend from the cache (no store to the word) */
	do
	:: busyA = 1;
		if
		:: bypassA -> busyA = 0   /* to the freelist: empty; try again */
		:: else ->
			m = nA;
			assert(m == 1 && idxA == 0);
			atomic { g = genA; move(IN_A, LENT) };
			nA = 0;
			busyA = 0;
			break
		fi
	od;
	lease = g;
	/* acquire again: a refill if the buffer is back on the list */
	busyA = 1;
	if
	:: bypassA -> busyA = 0
	:: else ->
		atomic {
			if
			:: KIND(word) == FREE && where == LIST ->
				g = GEN(word) + 1; word = WORD(CACHED, g); move(LIST, REFILL)
			:: else -> g = 0
			fi
		}
		if
		:: g != 0 -> idxA = 0; genA = g; atomic { nA = 1; move(REFILL, IN_A) }
		:: else
		fi;
		busyA = 0
	fi
}

proctype B()
{
	byte g, w, m;
	bool won, held;

	lease != 0;
	g = lease;
#ifdef B_INDEX
	index_release()
#else
	token_release(g)
#endif
}

proctype R()
{
	byte g, w, m;
	bool won, held;

	index_release()
}

init {
	atomic { run A(); run B(); run R() }
	_nr_pr == 1;
	assert(wins == 1 && refusals == 1)
}
