/*
 * SPDX-License-Identifier: MIT
 *
 * The ownership protocol of a local pool with thread caches (issue 22,
 * OWNERSHIP.md): each cached or lent buffer's word has one writer at a
 * time, its owner o (the cache that took it), with plain loads and
 * stores inside o's window (busy = 1 ... busy = 0, the bypass protocol
 * of lib/cache_state.h, tests/model/bypass.pml); an excluder (a thread
 * holding ap_cache_lock that raised bypass on every cache and waited
 * for every busy to be 0) by CAS; and anyone, by CAS, once o's thread
 * has exited (orphan).  A release on another thread does not write the
 * word: it appends the token (idx, gen) to its outgoing batch for o, in
 * its own window, and SENDs the batch to o's inbox, a bounded ring of
 * CAP tokens (0 = empty slot): reserve by CAS on tail (FULL: drain the
 * inbox as an excluder, then again), write the slots, a seq_cst fence,
 * wake the pool's waiters, re-read orphan[o] and, if set, drain the
 * inbox as an orphan drainer.  The owner DRAINs its inbox in its window
 * up to the first empty slot and APPLYs each token with the same check
 * as its own release (owner[idx] == o and word == CACHED g: store
 * CACHED g+1, into its cache; else refused).  An excluder or orphan
 * drainer applies by CAS CACHED g -> FREE g and pushes to the freelist
 * (which wakes waiters).  A thread that exits, under the lock: SENDs
 * its batches, gives its cache to the freelist, sets orphan, DRAINs its
 * inbox as an orphan drainer.
 *
 * The code (lib/pool_owner.c, ap_owner_release) differs in one place:
 * a release on another thread reads two hints, owner_of[idx] (changed
 * only when the buffer enters or leaves a cache, never while it is
 * lent) and released[idx] (the last generation released, written by
 * the releasers), instead of the word, so that the word's line stays
 * with its owner in a hand-off.  R's check of the word here is the best
 * those hints can give: a hint that is behind lets a copy through that
 * the word would have refused at once, and the owner's APPLY, which the
 * model keeps, refuses it later.  Safety rests on APPLY alone (mutant
 * NO_DRAIN_CHECK).
 *
 * Interleavings are sequentially consistent: the protocol's Dekker
 * pairs are seq_cst (the fence after the slots against the store of
 * orphan; the fence against the waiter's fetch_or) or membarrier(2)
 * (bypass against busy, as bypass.pml); the slots are release stores
 * read by acquire loads, and spin's order within a process is program
 * order.  Each load and store is its own step; atomic { } only around
 * what is one atomic instruction (a CAS, the futex's check-and-queue, a
 * freelist push) together with the ghost bookkeeping of that step.
 *
 * Configurations (one buffer b0 lent by thread O, cache 0, at
 * generation 1, unless said):
 *   (default) LOCAL: O releases one copy of the lease (load, check and
 *     store in its window), then acquires (drains its inbox in its
 *     window, lends what its cache holds and releases that lease too);
 *     thread R (cache 1) releases another copy (check the word, append
 *     to its batch for O; SEND at its next acquire, or at once when it
 *     cannot enter its window); a flusher F (asyncpool_cache_flush_all)
 *     runs once, anywhere.
 *   -DREMOTE: R1 and R2 (caches 1, 2) each release a copy to O's
 *     inbox (-DCAP=2: the second reservation may be written first, and
 *     a drain stops at the first one's empty slot; -DCAP=1: the second
 *     SEND finds the inbox FULL and drains it as an excluder, maybe
 *     before the first sender wrote its slot); O acquires twice (drains,
 *     lends the buffer again and releases that lease).  -DOWNER_EXIT:
 *     O exits instead of its second acquire: two senders race its exit.
 *   -DEXIT: O lends b0 to R, R lends b1 to O; O releases its copy of
 *     b1; R releases its copy of b0, sends its batch, releases the same
 *     copy again (an orphan CAS, if O has exited, against O's exit
 *     drain of the first); both exit, in any order against everything
 *     else.  At the end every buffer is free, once.  -DOWNER_COPY: O
 *     also releases a copy of b0 of its own before it exits.
 *   -DWAIT: a waiter W needs a buffer (the freelist is empty, b0 is
 *     lent); O and R release a copy of b0 each, O then acquires
 *     (drains); W begins to wait (as an excluder: takes the caches, the
 *     batches and the inboxes, keeps bypass), announces, drains the
 *     inboxes, looks at the freelist, sleeps.  -DIDLE: only R has a
 *     copy, and R releases it and stays idle: its batch is never sent
 *     by R itself.  -DOWNER_EXIT: O exits instead of acquiring.
 *   -DFLUSH: the flusher F runs too (LOCAL has it always).  Too big
 *     for make check, run by hand (no error, pan built with -O2):
 *     WAIT -DFLUSH 15.2 M states, 23 s; REMOTE -DCAP=1 -DFLUSH 62.8 M
 *     states, 3 GB (-DMEMLIM=8000), 200 s; REMOTE -DOWNER_EXIT -DFLUSH
 *     59.6 M states, 110 s.
 *
 * Checked, on every move of a buffer (ghost where[], lentgen[]): an
 * accepted copy takes a buffer that is lent, at that lease's
 * generation (never one in a cache or on the freelist: the buffer is
 * never in two places), a claim for the freelist takes it from where
 * the claim says; at the end (every thread done): a dead owner's
 * inbox holds nothing (nothing strands there; a live owner's may: its
 * next acquire or a flush takes it), then after a final excluder drain
 * every lease was accepted exactly once (accepted == leases, the other
 * copies refused), no buffer is still lent, every out[] is 0; in WAIT,
 * no waiter sleeps for ever (an invalid end state: spin reports it).
 *
 * Left out: the LEASED path of a release (today's CAS, states.pml); a
 * refill that makes another cache the owner (within the search a
 * stale token's generation already differs, so APPLY's owner check is
 * not exercised); the depot; a cache's capacity; generation wrap.
 * The model is SC: the code must make exit's store of orphan and its
 * drain's slot loads a Dekker pair with the SEND's fence, which in C11
 * takes a seq_cst fence after the store (a seq_cst store alone lets a
 * later acquire load pass it).
 *
 * Fixes to OWNERSHIP.md as written, which the model needs to hold
 * (each mutant below puts the text back and spin finds the failure):
 *   FIX 1: the owner's own release loads and checks the word again
 *     inside its window (step 1's load is only the early refusal);
 *   FIX 2: SEND called with ap_cache_lock held (thread exit) does not
 *     take it again for FULL or for the orphan re-check drain;
 *   FIX 3: an excluder (flush, wait begin) also applies the outgoing
 *     batches of the caches it stopped, or a buffer released into the
 *     batch of a thread that then stays idle never comes back;
 *   FIX 4: the orphan CAS of step 2 also decrements out[o].
 *
 * Mutants, which spin must catch:
 * -DNO_DRAIN_CHECK:  the owner's APPLY does not check the word: the
 *     racing copy is accepted twice (the buffer in two places).
 * -DOUT_OF_ORDER:    what is published is the written slot (a token is
 *     never 0), not the reserved tail; the mutant's drain takes the
 *     reserved tail as published (as a SEND that advanced a published
 *     counter before writing its slots would make it): it reads a
 *     slot its sender has not written yet (REMOTE).
 * -DNO_ORPHAN_RECHECK: SEND does not re-read orphan after its slots:
 *     a token strands in a dead owner's inbox (EXIT).
 * -DNO_WAKE:         SEND does not wake the waiters: a waiter sleeps
 *     with a buffer in an inbox (WAIT -DIDLE).
 * -DCHECK_BEFORE_WINDOW (FIX 1 undone): the owner stores after a check
 *     made before its window: a flush in between freed the buffer and
 *     the owner caches it too (LOCAL).
 * -DEXIT_RELOCK (FIX 2 undone): exit's SEND to an owner that exited
 *     first takes ap_cache_lock again: the thread deadlocks (EXIT).
 * -DNO_BATCH_TAKE (FIX 3 undone): a waiter sleeps for ever, the buffer
 *     in an idle thread's batch (WAIT -DIDLE).
 * -DNO_ORPHAN_OUT (FIX 4 undone): out[o] stays 1 (EXIT).
 */
#ifndef CAP
#define CAP 2
#endif
#define NB    2     /* buffers */
#ifdef REMOTE
#define NC    3     /* caches (thread ids 0..2) */
#else
#define NC    2
#endif
#define BMAX  2     /* batch size (32 in the code) */

#define FREE    0
#define LEASED  1
#define CACHED  2
#define W(k, g)    ((k) * 8 + (g))
#define KIND(w)    ((w) / 8)
#define GEN(w)     ((w) % 8)
#define TOK(b, g)  ((b) * 8 + (g))   /* never 0: generations start at 1 */

/* where a buffer is (ghost) */
#define LIST     1   /* on the freelist */
#define LENT     2   /* a lease is out: copies of its token may be released */
#define CLAIMED  3   /* claimed for the freelist (CAS to FREE), not linked yet */
#define TAKEN    4   /* acquired from the freelist by the waiter */
#define CACHE(o) (8 + (o))

byte word[NB];
byte owner[NB];
byte where[NB];
byte lentgen[NB];
byte cmask[NC];            /* the cache arrays: bit b = buffer b */
bool busy[NC], bypass[NC];
byte out[NC];              /* lent by cache o, not given back */
/* the inboxes */
byte slot[NC * CAP];
byte tail[NC], head[NC], hpub[NC];
bool orphan[NC];
/* outgoing batches: thread t's for owner o at (t * NC + o) */
byte bat[NC * NC * BMAX];
byte nbat[NC * NC];
bool lock;                 /* ap_cache_lock */
byte waiters;              /* local waiters (under the lock) */
byte wword;                /* the wait word: bit 0 someone waits */
bool queued;               /* the waiter is on the futex queue */
byte leases, copies, accepted, refused;

/* ---- ghost moves ---- */

inline move(b, from, to) {
	assert(where[b] == from);
	where[b] = to
}

/* A copy of lease (b, g) accepted: the buffer was lent, at g. */
inline won(b, g, to) {
	assert(where[b] == LENT);
	assert(lentgen[b] == g);
	where[b] = to;
	accepted++
}

/* ---- the wait word (wait_word.h) ---- */

inline wake() {
	w = wword;                      /* one load when nobody waits */
	if
	:: (w & 1) ->
		atomic { if :: wword == w -> wword = w + 1 :: else fi };
		queued = 0              /* FUTEX_WAKE, all */
	:: else
	fi
}

/* The freelist push of a claimed buffer, then its wake. */
inline fl_push(b) {
	atomic { move(b, CLAIMED, LIST) };
	wake()
}

/* ---- APPLY ---- */

/* The owner o, inside its window: plain load, check, plain store. */
inline owner_apply(o, tok) {
	b = tok / 8; g = tok % 8;
	w = word[b];
#ifdef NO_DRAIN_CHECK
	if
	:: true ->
#else
	if
	:: owner[b] == o && w == W(CACHED, g) ->
#endif
		atomic { word[b] = W(CACHED, g + 1); won(b, g, CACHE(o)) };
		cmask[o] = cmask[o] | (1 << b);
		out[o]--
	:: else -> refused++
	fi
}

/* An excluder or an orphan drainer: CAS CACHED g -> FREE g, push. */
inline excl_apply(o, tok) {
	b = tok / 8; g = tok % 8;
	atomic {
		if
		:: word[b] == W(CACHED, g) ->
			word[b] = W(FREE, g); won(b, g, CLAIMED); ok = 1
		:: else -> refused++; ok = 0
		fi
	};
	if
	:: ok -> atomic { out[o]-- }; fl_push(b)
	:: else
	fi
}

/* ---- DRAIN: up to the first empty slot ---- */

#ifdef OUT_OF_ORDER
/* The mutant: what is reserved is taken as published. */
#define NEXT_TOKEN(o) \
	if \
	:: h == tail[o] -> break \
	:: else \
	fi; \
	tok = slot[(o) * CAP + h % CAP]; \
	assert(tok != 0)
#else
#define NEXT_TOKEN(o) \
	tok = slot[(o) * CAP + h % CAP]; \
	if \
	:: tok == 0 -> break \
	:: else \
	fi
#endif

inline drain_owner(o) {
	h = head[o];
	do
	:: NEXT_TOKEN(o);
		slot[o * CAP + h % CAP] = 0;
		h++;
		owner_apply(o, tok)
	od;
	head[o] = h;
	hpub[o] = h
}

/* The lock held (an excluder, or an orphan drainer). */
inline drain_excl(o) {
	h = head[o];
	do
	:: NEXT_TOKEN(o);
		slot[o * CAP + h % CAP] = 0;
		h++;
		excl_apply(o, tok)
	od;
	head[o] = h;
	hpub[o] = h
}

/* ---- excluders (pool_bypass.c ap_bypass_all / ap_bypass_end) ---- */

inline lock_take() {
	atomic { !lock -> lock = 1 }
}

#if NC == 3
#define BYPASS_2(v) bypass[2] = v
#define BUSY_2 !busy[2]
#else
#define BYPASS_2(v) skip
#define BUSY_2 skip
#endif

inline excl_begin() {
	bypass[0] = 1; bypass[1] = 1; BYPASS_2(1);
	/* membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) */
	!busy[0]; !busy[1]; BUSY_2
}

inline excl_end() {
	if
	:: waiters == 0 -> bypass[0] = 0; bypass[1] = 0; BYPASS_2(0)
	:: else
	fi
}

/* The outgoing batches of the stopped caches (FIX 3). */
inline take_batches() {
	j = 0;
	do
	:: j < NC * NC ->
		i = 0;
		do
		:: i < nbat[j] -> excl_apply(j % NC, bat[j * BMAX + i]); i++
		:: else -> break
		od;
		nbat[j] = 0;
		j++
	:: else -> break
	od
}

#ifdef NO_BATCH_TAKE
#define excl_take_batches() skip
#else
#define excl_take_batches() take_batches()
#endif

/* The stopped caches' arrays to the freelist. */
inline take_caches() {
	j = 0;
	do
	:: j < NC ->
		b = 0;
		do
		:: b < NB ->
			if
			:: cmask[j] & (1 << b) ->
				atomic {
					w = word[b];
					assert(KIND(w) == CACHED);
					word[b] = W(FREE, GEN(w));
					move(b, CACHE(j), CLAIMED)
				};
				cmask[j] = cmask[j] & ~(1 << b);
				fl_push(b)
			:: else
			fi;
			b++
		:: else -> break
		od;
		j++
	:: else -> break
	od
}

inline drain_all() {
	j = 0;
	do
	:: j < NC -> drain_excl(j); j++
	:: else -> break
	od
}

/* ---- SEND of snd[0 .. k-1] to o's inbox; held: the lock is ours ---- */

inline send(o, held) {
	do
	:: t0 = tail[o];
		if
		:: t0 + k - hpub[o] > CAP ->
			/* FULL: drain it as an excluder, then again */
#ifdef EXIT_RELOCK
			lock_take();
#else
			if :: !held -> lock_take() :: else fi;
#endif
			excl_begin();
			drain_excl(o);
			excl_end();
			if :: !held -> lock = 0 :: else fi
		:: else ->
			atomic {
				if
				:: tail[o] == t0 -> tail[o] = t0 + k; break
				:: else
				fi
			}
		fi
	od;
	i = 0;
	do
	:: i < k -> slot[o * CAP + (t0 + i) % CAP] = snd[i]; i++
	:: else -> break
	od;
	/* atomic_thread_fence(memory_order_seq_cst) */
#ifndef NO_WAKE
	wake();
#endif
#ifndef NO_ORPHAN_RECHECK
	if
	:: orphan[o] ->
#ifdef EXIT_RELOCK
		lock_take();
#else
		if :: !held -> lock_take() :: else fi;
#endif
		drain_excl(o);
		if :: !held -> lock = 0 :: else fi
	:: else
	fi
#endif
}

/* ---- a thread's operations (t: its cache) ---- */

/* Release a copy of lease (b0, g0). */
inline release(t, b0, g0) {
	w = word[b0];
	if
	:: w != W(CACHED, g0) -> refused++      /* stale or double: at once */
	:: else ->
		o = owner[b0];
		if
		:: orphan[o] ->
			atomic {
				if
				:: word[b0] == W(CACHED, g0) ->
					word[b0] = W(FREE, g0); won(b0, g0, CLAIMED); ok = 1
				:: else -> refused++; ok = 0
				fi
			};
			if
			:: ok ->
#ifndef NO_ORPHAN_OUT
				atomic { out[o]-- };     /* FIX 4 */
#endif
				fl_push(b0)
			:: else
			fi
		:: else ->
			busy[t] = 1;
			if
			:: bypass[t] ->
				busy[t] = 0;
				snd[0] = TOK(b0, g0); k = 1;
				send(o, 0)
			:: !bypass[t] && o == t ->
#ifndef CHECK_BEFORE_WINDOW
				w = word[b0];           /* FIX 1 */
#endif
				if
				:: w == W(CACHED, g0) ->
					atomic { word[b0] = W(CACHED, g0 + 1); won(b0, g0, CACHE(t)) };
					cmask[t] = cmask[t] | (1 << b0);
					out[t]--
				:: else -> refused++
				fi;
				busy[t] = 0
			:: !bypass[t] && o != t ->
				/* A full batch (32) is sent as send_batches() does;
				 * no batch fills within this search. */
				assert(nbat[t * NC + o] < BMAX);
				bat[(t * NC + o) * BMAX + nbat[t * NC + o]] = TOK(b0, g0);
				nbat[t * NC + o]++;
				busy[t] = 0
			fi
		fi
	fi
}

/* Send the thread's batches (acquire, wait, exit: held = the lock). */
inline send_batches(t, held) {
	p = 0;
	do
	:: p < NC ->
		if
		:: !held -> busy[t] = 1
		:: else
		fi;
		if
		:: !held && bypass[t] -> busy[t] = 0; k = 0     /* the excluder's */
		:: else ->
			k = nbat[t * NC + p]; i = 0;
			do
			:: i < k -> snd[i] = bat[(t * NC + p) * BMAX + i]; i++
			:: else -> break
			od;
			nbat[t * NC + p] = 0;
			busy[t] = 0
		fi;
		if
		:: k > 0 -> send(p, held)
		:: else
		fi;
		p++
	:: else -> break
	od
}

/* The acquire's slow path: drain the inbox in the window, then (lend)
 * lend from the cache; lb: the buffer lent (255: none). */
inline acquire(t, lend) {
	lb = 255;
	busy[t] = 1;
	if
	:: bypass[t] -> busy[t] = 0
	:: else ->
		drain_owner(t);
		if
		:: lend && (cmask[t] & 1) -> lb = 0
		:: lend && (cmask[t] & 2) -> lb = 1
		:: else
		fi;
		if
		:: lb != 255 ->
			cmask[t] = cmask[t] & ~(1 << lb);
			atomic {
				lg = GEN(word[lb]);
				move(lb, CACHE(t), LENT);
				lentgen[lb] = lg;
				leases++; copies++
			};
			out[t]++
		:: else
		fi;
		busy[t] = 0
	fi
}

/* Thread exit: under the lock, batches, cache, orphan, drain. */
inline thread_exit(t) {
	lock_take();
	send_batches(t, 1);
	b = 0;
	do
	:: b < NB ->
		if
		:: cmask[t] & (1 << b) ->
			atomic {
				w = word[b];
				word[b] = W(FREE, GEN(w));
				move(b, CACHE(t), CLAIMED)
			};
			cmask[t] = cmask[t] & ~(1 << b);
			fl_push(b)
		:: else
		fi;
		b++
	:: else -> break
	od;
	orphan[t] = 1;          /* seq_cst */
	drain_excl(t);
	lock = 0
}

#define LOCALS \
	byte b, g, w, o, h, tok, t0, k, i, j, p, lb, lg; \
	bool ok; \
	byte snd[BMAX]

/* ---- the threads ---- */

#if defined(REMOTE)
proctype O()
{
	LOCALS;
	acquire(0, 1);
	if
	:: lb != 255 -> release(0, lb, lg)
	:: else
	fi;
#ifdef OWNER_EXIT
	thread_exit(0)
#else
	acquire(0, 0)
#endif
}

proctype Rm(byte t)
{
	LOCALS;
	release(t, 0, 1);
	send_batches(t, 0)
}
#elif defined(EXIT)
proctype O()
{
	LOCALS;
	release(0, 1, 1);       /* R's buffer, lent to O */
#ifdef OWNER_COPY
	release(0, 0, 1);       /* its own, racing R's copies */
#endif
	thread_exit(0)
}

proctype Rm(byte t)
{
	LOCALS;
	release(t, 0, 1);
	send_batches(t, 0);
	release(t, 0, 1);       /* the same copy again: a double release */
	thread_exit(t)
}
#elif defined(WAIT)
proctype O()
{
	LOCALS;
#ifndef IDLE
	release(0, 0, 1);
#endif
#ifdef OWNER_EXIT
	thread_exit(0)
#else
	acquire(0, 0)
#endif
}

proctype Rm(byte t)
{
	LOCALS;
	release(t, 0, 1);
#ifndef IDLE
	send_batches(t, 0)
#endif
}

/* asyncpool_acquire_wait: wait begin (an excluder that keeps bypass),
 * then announce, drain the inboxes, look, sleep. */
proctype Wt()
{
	LOCALS;
	byte v;

	lock_take();
	waiters++;
	excl_begin();
	excl_take_batches();
	drain_all();
	take_caches();
	lock = 0;
	do
	:: atomic { wword = wword | 1; v = wword };
		lock_take();
		drain_all();
		lock = 0;
		/* the freelist */
		atomic {
			if
			:: where[0] == LIST -> b = 0
			:: where[1] == LIST -> b = 1
			:: else -> b = 255
			fi;
			if
			:: b != 255 ->
				assert(KIND(word[b]) == FREE);
				word[b] = W(LEASED, GEN(word[b]) + 1);
				move(b, LIST, TAKEN)
			:: else
			fi
		};
		if
		:: b != 255 -> break
		:: else
		fi;
		atomic { if :: wword == v -> queued = 1 :: else fi };
		!queued
	od;
	lock_take();
	waiters--;
	excl_end();
	lock = 0
}
#else
#define FLUSH
/* LOCAL */
proctype O()
{
	LOCALS;
	release(0, 0, 1);
	acquire(0, 1);
	if
	:: lb != 255 -> release(0, lb, lg)
	:: else
	fi
}

proctype Rm(byte t)
{
	LOCALS;
	release(t, 0, 1);
	send_batches(t, 0)
}

#endif

#ifdef FLUSH
/* asyncpool_cache_flush_all, once, anywhere. */
proctype F()
{
	LOCALS;
	lock_take();
	excl_begin();
	excl_take_batches();
	drain_all();
	take_caches();
	excl_end();
	lock = 0
}
#endif

init {
	LOCALS;

	atomic {
		/* b0: lent by O (cache 0) at generation 1 */
		word[0] = W(CACHED, 1); owner[0] = 0;
		where[0] = LENT; lentgen[0] = 1; out[0] = 1;
#ifdef EXIT
		/* b1: lent by R (cache 1) to O at generation 1 */
		word[1] = W(CACHED, 1); owner[1] = 1;
		where[1] = LENT; lentgen[1] = 1; out[1] = 1;
#ifdef OWNER_COPY
		leases = 2; copies = 4;
#else
		leases = 2; copies = 3;
#endif
		run O(); run Rm(1);
#ifdef FLUSH
		run F()
#endif
#else
		/* b1: not in this story (taken by nobody: leased elsewhere) */
		word[1] = W(LEASED, 1); owner[1] = 1; where[1] = TAKEN;
#if defined(REMOTE)
		leases = 1; copies = 2;
		run O(); run Rm(1); run Rm(2);
#ifdef FLUSH
		run F()
#endif
#elif defined(WAIT)
#ifdef IDLE
		leases = 1; copies = 1;
#else
		leases = 1; copies = 2;
#endif
		run O(); run Rm(1); run Wt();
#ifdef FLUSH
		run F()
#endif
#else
		leases = 1; copies = 2;
		run O(); run Rm(1); run F()
#endif
#endif
	}
	(_nr_pr == 1);
	/* Nothing strands in a dead owner's inbox. */
	j = 0;
	do
	:: j < NC ->
		if
		:: orphan[j] -> assert(head[j] == tail[j])
		:: else
		fi;
		j++
	:: else -> break
	od;
	/* A final excluder (a flush): then every lease came back once. */
	lock_take();
	excl_begin();
	take_batches();
	drain_all();
	excl_end();
	lock = 0;
	assert(accepted == leases && refused == copies - leases);
	assert(where[0] != LENT && where[1] != LENT);
	j = 0;
	do
	:: j < NC -> assert(out[j] == 0); j++
	:: else -> break
	od;
#ifdef EXIT
	assert(where[0] == LIST && where[1] == LIST)
#endif
}
