/*
 * SPDX-License-Identifier: MIT
 *
 * Channels (issue 33, lib/channel.c), checked exhaustively with spin by
 * tests/test-model.sh: a sender and a receiver process, either of which
 * may die (SIGKILL) before and after every step, and a reclaimer that
 * runs once after the first death, concurrently with the survivor, and
 * once when everyone is done or dead.
 *
 * The word of buffer b (lib/buffer_state.h): kind FREE, LEASED or
 * QUEUED, holder, generation.  The freelist is one atomic step here
 * (tests/model/freelist.pml and crash.pml prove it): onlist[b].  The
 * ring: CAP slots of {seq, token}; position p is published when
 * seq[p % CAP] == p + 1.
 *
 *   sender    acquire b; room (pos - head < CAP, else give b back);
 *             step {pos, 1}; token into the slot; CAS the word
 *             LEASED(S, g) -> QUEUED(g); publish seq = pos + 1; step 0
 *   receiver  while published: read the token; CAS the word
 *             QUEUED(g) -> LEASED(R, g + 1) (refused: the entry is
 *             skipped); head = pos + 1; release it (claim, push)
 *   reclaim   LEASED words of the dead, and FREE words of a dead holder
 *             off the list (a release that died before its push); a dead
 *             sender's step: its position if unpublished names in its
 *             slot a word that, still QUEUED at that generation and
 *             published nowhere in the ring with that generation, goes
 *             back (by index alone, an entry a dead receiver took but
 *             did not move head past would hide the buffer's next send:
 *             -DBY_INDEX, lost); a dead
 *             receiver's ring: every published entry whose word is
 *             QUEUED at the token's generation goes back, head moves on.
 *
 * Checked: a buffer has one holder at a time (held[], a ghost: nobody,
 * S, R, or the channel), is never pushed while on the list, and at the
 * end every buffer is FREE and on the list once.
 *
 * Mutants (each gives a counterexample, test-model.sh):
 *   -DNO_STEP        the reclaim ignores the dead sender's step: a send
 *                    that died between its CAS and its publish leaves a
 *                    QUEUED word outside the ring, lost.
 *   -DPUBLISH_FIRST  the sender publishes before its CAS: the receiver
 *                    sees the entry while the word is still LEASED and
 *                    refuses it, then the CAS queues a word that no
 *                    slot ahead of the receiver names, lost.
 *   -DNO_DRAIN       a dead receiver's ring is not drained: its queue is
 *                    lost.
 *   -DFORGE -DTRUST_HINT  a peer writes a published entry naming any
 *                    buffer; a receiver that takes the token without the
 *                    word's CAS takes the sender's lease: two holders.
 *   -DCOPY -DPLAIN_SEND  a copy of the sender's lease is released while
 *                    it sends; a send that checks the word and then
 *                    stores it (no CAS) queues a buffer that is also
 *                    on the freelist.
 *   -DBY_INDEX       the dead sender's step is matched against the ring
 *                    by buffer index alone (the first cut of reclaim.c).
 * -DFORGE and -DCOPY alone hold: the word decides.
 */
#define NB     2
#define CAP    2
#define NSEND  3
#define FREE   0
#define LEASED 1
#define QUEUED 2
#define S      1
#define R      2
#define X      3                        /* the reclaimer's holder id */
#define INCH   4                        /* ghost: in the channel */

byte kind[NB], holder[NB], gen[NB];
bool onlist[NB];
byte held[NB];                          /* ghost: 0 nobody, S, R, INCH */
byte seq[CAP], tokb[CAP], tokg[CAP];
byte head = 0;
byte step_pos = 0, step_n = 0;
bool dead[3];
bool sdone = false, rdone = false, rc_done = false;
byte sheld = NB, sgen = 0;              /* what the sender holds, for COPY */

#define crash(me) if :: dead[me] = true; goto out :: skip fi
#define published(p) (seq[(p) % CAP] == (p) + 1)

inline push(b) {
	atomic { assert(!onlist[b]); onlist[b] = true }
}

proctype Sender() {
	byte pos = 0, b, g, n = 0;
	bool ok;

	do
	:: n == NSEND -> break
	:: else ->
		n++;
		atomic {
			if
			:: onlist[0] -> b = 0
			:: onlist[1] -> b = 1
			:: else -> b = NB
			fi;
			if
			:: b < NB ->
				assert(kind[b] == FREE && held[b] == 0);
				onlist[b] = false; g = gen[b] + 1;
				kind[b] = LEASED; holder[b] = S; gen[b] = g; held[b] = S;
				sheld = b; sgen = g
			:: else -> skip
			fi
		}
		if
		:: b == NB -> goto next
		:: else -> skip
		fi;
		crash(S);
		if
		:: pos - head >= CAP ->
			/* full: the buffer stays ours; we give it back */
			atomic {
				if
				:: kind[b] == LEASED && holder[b] == S && gen[b] == g ->
					kind[b] = FREE; held[b] = 0; sheld = NB
				:: else -> goto next
				fi
			}
			crash(S);
			push(b);
			goto next
		:: else -> skip
		fi;
		step_pos = pos; step_n = 1;
		crash(S);
		tokb[pos % CAP] = b; tokg[pos % CAP] = g;
		crash(S);
#ifdef PUBLISH_FIRST
		seq[pos % CAP] = pos + 1;
		crash(S);
#endif
#ifdef PLAIN_SEND
		ok = kind[b] == LEASED && holder[b] == S && gen[b] == g;
		if
		:: ok ->
			kind[b] = QUEUED; holder[b] = 0; held[b] = INCH
		:: else -> skip
		fi;
#else
		atomic {
			ok = kind[b] == LEASED && holder[b] == S && gen[b] == g;
			if
			:: ok ->
				assert(held[b] == S);
				kind[b] = QUEUED; holder[b] = 0; held[b] = INCH
			:: else -> skip
			fi
		}
#endif
		sheld = NB;
		crash(S);
		if
		:: !ok -> step_n = 0; goto next
		:: else -> skip
		fi;
#ifndef PUBLISH_FIRST
		seq[pos % CAP] = pos + 1;
		crash(S);
#endif
		step_n = 0;
		pos++;
next:		skip
	od;
	sdone = true;
out:	skip
}

proctype Receiver() {
	byte pos = 0, b, g;
	bool ok;

	do
	:: published(pos) ->
		b = tokb[pos % CAP]; g = tokg[pos % CAP];
		crash(R);
		atomic {
#ifdef TRUST_HINT
			ok = true;
#else
			ok = kind[b] == QUEUED && gen[b] == g;
#endif
			if
			:: ok ->
				assert(held[b] == INCH);
				kind[b] = LEASED; holder[b] = R; gen[b] = g + 1; held[b] = R
			:: else -> skip
			fi
		}
		crash(R);
		head = pos + 1;
		pos++;
		crash(R);
		if
		:: ok ->
			/* release: the claim, then the push */
			atomic {
				if
				:: kind[b] == LEASED && holder[b] == R ->
					kind[b] = FREE; held[b] = 0
				:: else -> goto skipped
				fi
			}
			crash(R);
			push(b);
skipped:		skip
		:: else -> skip
		fi
	:: !published(pos) && (sdone || dead[S]) -> break
	od;
	rdone = true;
out:	skip
}

#ifdef FORGE
/* A peer with the fd writes one published entry naming any buffer. */
proctype Forger() {
	byte p = head;
	if
	:: tokb[p % CAP] = 0
	:: tokb[p % CAP] = 1
	fi;
	if
	:: tokg[p % CAP] = gen[tokb[p % CAP]]
	:: tokg[p % CAP] = gen[tokb[p % CAP]] + 1
	fi;
	seq[p % CAP] = p + 1
}
#endif

#ifdef COPY
/* A copy of the sender's lease, released by another thread of the sender. */
proctype Copy() {
	byte b, g;
	atomic { sheld < NB || sdone || dead[S] -> b = sheld; g = sgen }
	if
	:: b == NB -> goto out
	:: else -> skip
	fi;
	atomic {
		if
		:: kind[b] == LEASED && holder[b] == S && gen[b] == g ->
			assert(held[b] == S);
			kind[b] = FREE; held[b] = 0; onlist[b] = true
		:: else -> skip
		fi
	}
out:	skip
}
#endif

/* Claim buffer b for the reclaimer (a CAS from what it saw), push it. */
inline rclaim(b, k, g) {
	atomic {
		if
		:: kind[b] == k && gen[b] == g && (k != LEASED || dead[holder[b]]) &&
		   (k != FREE || (!onlist[b] && holder[b] != X && dead[holder[b]])) ->
			kind[b] = FREE; holder[b] = X; held[b] = 0; got = true
		:: else -> got = false
		fi
	}
	if
	:: got -> push(b)
	:: else -> skip
	fi
}

proctype Reclaimer(bool final) {
	byte b, g, k, p, q;
	bool got, pub;

	if
	:: final -> (sdone || dead[S]) && (rdone || dead[R]) && rc_done
	:: else -> dead[S] || dead[R] || ((sdone || dead[S]) && (rdone || dead[R]))
	fi;
	/* the buffers of the dead */
	for (b : 0 .. NB - 1) {
		atomic { k = kind[b]; g = gen[b] }
		if
		:: k != QUEUED -> rclaim(b, k, g)
		:: else -> skip
		fi
	}
#ifndef NO_STEP
	if
	:: dead[S] && step_n > 0 && !published(step_pos) ->
		b = tokb[step_pos % CAP]; g = tokg[step_pos % CAP];
		/* published anywhere in the ring? */
		pub = false;
		for (q : 0 .. CAP - 1) {
			if
			:: published(head + q) && tokb[(head + q) % CAP] == b &&
#ifndef BY_INDEX
			   tokg[(head + q) % CAP] == g &&
#endif
			   true -> pub = true
			:: else -> skip
			fi
		}
		if
		:: !pub -> rclaim(b, QUEUED, g)
		:: else -> skip
		fi;
		step_n = 0
	:: else -> skip
	fi;
#endif
#ifndef NO_DRAIN
	if
	:: dead[R] ->
		p = head;
		for (q : 0 .. CAP - 1) {
			if
			:: published(p) ->
				b = tokb[p % CAP]; g = tokg[p % CAP];
				rclaim(b, QUEUED, g);
				p++
			:: else -> break
			fi
		}
		head = p
	:: else -> skip
	fi;
#endif
	if
	:: final ->
#ifndef FORGE
		/* A forger may make the ring skip a buffer: held, not lost. */
		for (b : 0 .. NB - 1) {
			assert(kind[b] == FREE && onlist[b])
		}
#endif
		skip
	:: else -> rc_done = true
	fi
}

init {
	atomic {
		onlist[0] = true; onlist[1] = true;
		run Sender(); run Receiver();
#ifdef FORGE
		run Forger();
#endif
#ifdef COPY
		run Copy();
#endif
		run Reclaimer(false); run Reclaimer(true)
	}
}
