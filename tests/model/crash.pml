/*
 * SPDX-License-Identifier: MIT
 *
 * Crash safety of a shared pool (issue 11), checked exhaustively with
 * spin by tests/test-model.sh.
 *
 * The state word of buffer b (lib/buffer_state.h): kind (FREE or
 * LEASED), holder (the process that leased or pushed it), generation;
 * its link apart (link[], layout version 3), read by a pop after the
 * word, in a step of its own.  3 processes each acquire one buffer and release it (2
 * operations) on a pool of 3 buffers:
 *   pop      read head, read word w of its index (FREE), re-read the
 *            head: if it held still, record the step {b, w} in its
 *            attachment, CAS the head, then take: CAS the
 *            word from w to LEASED|me|gen+1 (a failed take pops again)
 *   release  claim: CAS LEASED|me|g -> FREE|me|g; push: link, CAS
 *            the head
 * A crash can fire before and after every step of every process: the
 * process stops for good (SIGKILL).  A reclaimer runs once after the
 * first death, concurrently with the survivors, and once when everyone
 * is done or dead; it claims (CAS from the word it read) every buffer
 * LEASED by a dead process, every FREE buffer of a dead holder that is
 * off the list, and every buffer a dead process's recorded step names
 * whose word is still the recorded one and which is off the list, then
 * pushes them.  A buffer it claimed counts as reached: two steps may
 * name one buffer with one word (version 3 has no link in the word to
 * tell them apart), and without that, -DPROCS=3 finds it pushed twice.  Its walk of the list is one atomic step here: the code
 * reads the head, walks, and re-reads the head (index and tag), and
 * counts the walk only if the head held still, which is the same.
 *
 * Checked: a buffer is never leased to two holders at once (owner[]),
 * never linked while on the list (onlist[]), and at the end all N
 * buffers are on the list, FREE, once each.
 *
 * Variants:
 *   -DNO_STEP    pops record no step: a pop that dies between its head
 *                CAS and its take loses the buffer (the final count).
 *   -DPLAIN_TAKE the take is a plain store: a reclaim that claimed the
 *                buffer (its last pusher died) and the popper both own it.
 *   -DNO_RECHECK the step is recorded without checking that the head held
 *                still since it was read: a pop with a stale head records
 *                the word of a buffer being pushed, and a reclaim after
 *                its death takes that buffer from a live pusher.
 *
 * The reclaim of an open (issue 21, lib/attach.c): when every attachment
 * record is taken, an opener reclaims before it has a record, so it has
 * no holder id of its own.  -DATTACH makes the concurrent reclaim that
 * opener's (proctype Opener): it may crash before and after each claim
 * and in its pushes, like a process.  It claims a buffer for the dead
 * holder it belonged to (a step's buffer: for the dead popper), with
 * the next generation; the dead stays dead until the push, so the final
 * reclaim finds what a crashed opener claimed FREE, of a dead holder,
 * off the list.  Variants:
 *   -DHOLDER0    the opener claims with holder 0 (the code before issue
 *                21): a crash before its push loses the buffer.
 *   -DSAMEGEN    the opener claims without a new generation: a FREE word
 *                of a dead pusher, off the list because a live popper
 *                took it, does not change, and the popper's take and
 *                the claim both succeed.
 *   -DTAKEOVER   the final reclaim does not wait for the opener's to end
 *                (the reclaimer word taken over from a live claimant that
 *                has not moved for a while, as a bound on a forged claim
 *                would): what the opener claimed for the dead, not yet
 *                pushed, the reclaim claims again and pushes, and so does
 *                the opener.  Reclaims must not overlap: a live claim
 *                cannot be bounded (asyncpool-shared(7), the reclaimer).
 */
#define N      3
#define END    7
#define FREE   0
#define LEASED 1
#define R      4                        /* the reclaimer's holder id */
#ifndef PROCS
#define PROCS  3                        /* make check: 2 (3: 34M states, 4 min) */
#endif

byte hidx = 0;
byte htag = 0;
byte kind[N], holder[N], gen[N], link[N];
byte owner[N];                          /* ghost: the lease holder, 0 none */
bool onlist[N];                         /* ghost: on the list */
bool dead[5];
byte finished = 0;
/* the step record of each process */
bool st_on[4];
byte st_b[4], st_h[4], st_g[4];

#define crash() if :: dead[me] = true; goto out :: skip fi

/* locals pt, pn, pok of the caller */
inline push_one(b, who) {
	pok = false;
	do
	:: !pok ->
		atomic { pt = htag; pn = hidx }
		link[b] = pn;
		if
		:: who != R -> crash()
		:: else -> skip
		fi;
		atomic {
			if
			:: hidx == pn && htag == pt ->
				assert(!onlist[b]);
				onlist[b] = true;
				hidx = b; htag++; pok = true
			:: else -> skip
			fi
		}
	:: else -> break
	od
}

proctype P(byte me) {
	byte h, t, k, ho, g, l, pt, pn;
	bool ok, pok;
pop:
	crash();
	atomic { h = hidx; t = htag }
	if :: h == END -> goto done :: else -> skip fi;
	ok = true;
	atomic { k = kind[h]; ho = holder[h]; g = gen[h] }
	if :: k != FREE -> goto pop :: else -> skip fi;
	l = link[h];
#ifndef NO_STEP
	/* Record only a word read while h was the head: the head (index and
	 * tag) did not move between the two reads, so h was on the list and
	 * its word was a list word, not one of a push in progress. */
	atomic {
		if
#ifdef NO_RECHECK
		:: true ->
#else
		:: hidx == h && htag == t ->
#endif
			st_b[me] = h; st_h[me] = ho; st_g[me] = g; st_on[me] = true
		:: else -> ok = false
		fi
	}
	if :: !ok -> goto pop :: else -> skip fi;
#endif
	crash();
	atomic {
		if
		:: hidx == h && htag == t -> onlist[h] = false; hidx = l; htag++; ok = true
		:: else -> ok = false
		fi
	}
	if :: !ok -> goto pop :: else -> skip fi;
	crash();
	/* take */
	atomic {
#ifdef PLAIN_TAKE
		if
		:: true ->
#else
		if
		:: kind[h] == FREE && holder[h] == ho && gen[h] == g ->
#endif
			assert(owner[h] == 0);
			kind[h] = LEASED; holder[h] = me; gen[h] = (g + 1) % 8; owner[h] = me;
			ok = true
		:: else -> ok = false
		fi
	}
	if :: !ok -> st_on[me] = false; goto pop :: else -> skip fi;
	crash();
	st_on[me] = false;
	crash();
	/* release: claim, then push */
	atomic {
		assert(kind[h] == LEASED && holder[h] == me && owner[h] == me);
		kind[h] = FREE; owner[h] = 0
	}
	crash();
	push_one(h, me);
#ifdef ATTACH
	/* dead after its push: its FREE words on the list name it */
	crash();
#endif
done:
	skip;
out:
	finished++
}

/* locals i, c, n, reach[], gone[], claimed[], pt, pn, pok of the reclaimer */
inline reclaim() {
	n = 0;
	/* who is dead, first: the dead do nothing after, so the walk below
	 * sees their last state (the code: liveness, then the walk) */
	atomic { gone[1] = dead[1]; gone[2] = dead[2]; gone[3] = dead[3] }
	atomic {
		i = 0;
		do :: i < N -> reach[i] = false; i++ :: else -> break od;
		i = hidx;
		do
		:: i != END && kind[i] == FREE && !reach[i] -> reach[i] = true; i = link[i]
		:: else -> break
		od
	}
	i = 0;
	do
	:: i < N ->
		atomic {
			if
			:: holder[i] >= 1 && holder[i] <= 3 && gone[holder[i]] &&
			   (kind[i] == LEASED || (kind[i] == FREE && !reach[i])) ->
				kind[i] = FREE; holder[i] = R; owner[i] = 0;
				reach[i] = true; claimed[n] = i; n++
			:: else -> skip
			fi
		}
		i++
	:: else -> break
	od;
	/* the pops the dead died in */
	c = 1;
	do
	:: c <= 3 ->
		atomic {
			if
			:: gone[c] && st_on[c] ->
				i = st_b[c];
				if
				:: kind[i] == FREE && holder[i] == st_h[c] && gen[i] == st_g[c] &&
				   !reach[i] ->
					holder[i] = R; owner[i] = 0;
					reach[i] = true; claimed[n] = i; n++
				:: else -> skip
				fi;
				st_on[c] = false
			:: else -> skip
			fi
		}
		c++
	:: else -> break
	od;
	i = 0;
	do
	:: i < n -> push_one(claimed[i], R); i++
	:: else -> break
	od
}

#ifdef ATTACH
#define O 0                             /* the opener: no holder id */
bool odone = false;
#ifdef HOLDER0
#define OHOLDER(h) 0
#else
#define OHOLDER(h) h
#endif
#ifdef SAMEGEN
#define OGEN(g) g
#else
#define OGEN(g) ((g + 1) % 8)
#endif

proctype Opener() {
	byte me = O;
	byte i, c, n, pt, pn, oh;
	bool pok;
	bool reach[N], gone[4];
	byte claimed[N];
	(dead[1] || dead[2] || (PROCS == 3 && dead[3]) || finished == 3);
	n = 0;
	atomic { gone[1] = dead[1]; gone[2] = dead[2]; gone[3] = dead[3] }
	atomic {
		i = 0;
		do :: i < N -> reach[i] = false; i++ :: else -> break od;
		i = hidx;
		do
		:: i != END && kind[i] == FREE && !reach[i] -> reach[i] = true; i = link[i]
		:: else -> break
		od
	}
	i = 0;
	do
	:: i < N ->
		atomic {
			if
			:: holder[i] >= 1 && holder[i] <= 3 && gone[holder[i]] &&
			   (kind[i] == LEASED || (kind[i] == FREE && !reach[i])) ->
				/* the word must change: a new generation only
				 * where kind and holder stay (lib/reclaim.c) */
				oh = OHOLDER(holder[i]);
				if
				:: kind[i] == FREE && holder[i] == oh -> gen[i] = OGEN(gen[i])
				:: else -> skip
				fi;
				kind[i] = FREE; holder[i] = oh; owner[i] = 0;
				reach[i] = true; claimed[n] = i; n++
			:: else -> skip
			fi
		}
		crash();
		i++
	:: else -> break
	od;
	c = 1;
	do
	:: c <= 3 ->
		atomic {
			if
			:: gone[c] && st_on[c] ->
				i = st_b[c];
				if
				:: kind[i] == FREE && holder[i] == st_h[c] && gen[i] == st_g[c] &&
				   !reach[i] ->
					if
					:: holder[i] == OHOLDER(c) -> gen[i] = OGEN(gen[i])
					:: else -> skip
					fi;
					holder[i] = OHOLDER(c); owner[i] = 0;
					reach[i] = true; claimed[n] = i; n++
				:: else -> skip
				fi;
				st_on[c] = false
			:: else -> skip
			fi
		}
		crash();
		c++
	:: else -> break
	od;
	i = 0;
	do
	:: i < n -> push_one(claimed[i], O); i++
	:: else -> break
	od;
out:
	odone = true
}
#endif

proctype Reclaimer() {
	byte me = R;
	byte i, c, n, cnt, pt, pn;
	bool pok;
	bool reach[N], gone[4];
	byte claimed[N];
#ifdef ATTACH
	/* The opener reclaims concurrently; this one after it crashed or ended. */
#ifdef TAKEOVER
	/* Or while it is still reclaiming: the reclaimer word taken over
	 * from a claim that is alive but has not moved (issue 36, item 4). */
	(finished == 3);
#else
	(finished == 3 && odone);
#endif
#else
	(dead[1] || dead[2] || (PROCS == 3 && dead[3]) || finished == 3);
	reclaim();
	(finished == 3);
#endif
	reclaim();
	atomic {
		i = hidx; cnt = 0;
		do
		:: i != END -> assert(i < N && kind[i] == FREE && onlist[i]); cnt++;
			assert(cnt <= N); i = link[i]
		:: else -> break
		od;
		assert(cnt == N)
	}
out:
	skip
}

init {
	atomic {
		link[0] = 1; link[1] = 2; link[2] = END;
		onlist[0] = true; onlist[1] = true; onlist[2] = true;
		run P(1); run P(2);
		if :: PROCS == 3 -> run P(3) :: else -> dead[3] = true; finished++ fi;
#ifdef ATTACH
		run Opener();
#endif
		run Reclaimer()
	}
}
