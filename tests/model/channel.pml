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
 * Delivery (issue 52, layout 5; not with -DDROP, 1.4's rule): a dead
 * receiver's ring stays for the next receiver (R2, which takes the end
 * once a reclaim freed it), and what it held goes back into the
 * channel's redelivery ring: the receiver writes from[b] = g + 1 before
 * its CAS; a reclaim (past the quarantine, or not yet: either) puts a
 * LEASED word of the dead whose from[] is its generation into the
 * redelivery ring (token, CAS LEASED -> QUEUED, publish), after
 * publishing a QUEUED word that a dead reclaimer left in the slot at
 * the first unpublished position.  The first reclaimer may die at any
 * step; the final one finishes.  Receivers take the redelivery ring
 * first.  Each item is a ghost (item[b], its number): sent when
 * published, consumed when a receiver releases it; checked: none
 * consumed twice, and at the end every item sent consumed exactly once.
 *
 * Mutants of the delivery (each a counterexample, test-model.sh):
 *   -DNO_REDO        a dead receiver's held buffer goes to the freelist
 *                    (1.4's rule): the item is lost.
 *   -DFROM_AFTER     the receiver writes from[] after its CAS: dead
 *                    between the two, its buffer is not known to come
 *                    from the channel: lost.
 *   -DREDO_CAS_FIRST the reclaim CASes the word before it writes the
 *                    slot: dead between, the next reclaim finds no slot
 *                    naming the QUEUED word: lost.
 *   -DNO_FINISH      the next reclaim does not publish what a dead
 *                    reclaimer queued: lost.
 *   -DDRAIN_DEAD     a dead receiver's ring drained to the freelist
 *                    without -DDROP: its queue lost.
 * -DDROP keeps 1.4's rule (items may be lost, never buffers): -DNO_DRAIN
 * is its mutant.
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
 *   -DFORGE -DPLAIN_RECV  the receive as a checked plain store (the word
 *                    read, then LEASED stored: issue 53 item 4): a forged
 *                    entry naming a dead sender's unpublished QUEUED
 *                    word, taken while the reclaim gives that word
 *                    back: two holders.  The reclaim does not lock a
 *                    live receiver out, so the receive keeps its CAS.
 * -DFORGE and -DCOPY alone hold: the word decides.
 */
#define NB     2
#define CAP    2
#if defined(FORGE) || defined(COPY)
#define NSEND  2                        /* a third party: a smaller search */
#else
#define NSEND  3
#endif
#define FREE   0
#define LEASED 1
#define QUEUED 2
#define S      1
#define R      2
#define X      3                        /* the first reclaimer's holder id */
#define X2     4                        /* the final reclaimer's */
#define R2     5                        /* the next receiver */
#define INCH   6                        /* ghost: in the channel */

byte kind[NB], holder[NB], gen[NB];
bool onlist[NB];
byte held[NB];                          /* ghost: 0 nobody, S, R, R2, INCH */
byte seq[CAP], tokb[CAP], tokg[CAP];
byte head = 0;
byte rseq[CAP], rtokb[CAP], rtokg[CAP]; /* the redelivery ring */
byte rhead = 0;
byte fromg[NB];                         /* from[b]: the generation taken at */
byte item[NB];                          /* ghost: the item in buffer b, 0 none */
bool sent[NSEND + 1];                   /* ghost: item n published */
byte consumed[NSEND + 1];               /* ghost: item n released by a receiver */
byte step_pos = 0, step_n = 0;
bool dead[6];
bool sdone = false, rdone = false, rc_done = false, endfree = false, final_work = false;
bool r2done = false;
byte sheld = NB, sgen = 0;              /* what the sender holds, for COPY */

#define crash(me) if :: dead[me] = true; goto out :: skip fi
/* the first reclaimer may die at any step; the final one does not */
/* R may die at any step; R2 does not */
#ifdef FORGE
#define rxcrash skip                    /* a forger: the sender dies, not R */
#else
#define rxcrash if :: me == R -> dead[me] = true; goto out :: skip fi
#endif
#ifdef FORGE
#define rcrash skip                     /* a forger: a smaller search */
#else
#define rcrash if :: !final -> dead[me] = true; goto out :: skip fi
#endif
#define published(p) (seq[(p) % CAP] == (p) + 1)
#define rpublished(p) (rseq[(p) % CAP] == (p) + 1)

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
		atomic { seq[pos % CAP] = pos + 1; sent[n] = true }
		crash(S);
#endif
#ifdef PLAIN_SEND
		ok = kind[b] == LEASED && holder[b] == S && gen[b] == g;
		if
		:: ok ->
			kind[b] = QUEUED; holder[b] = 0; held[b] = INCH; item[b] = n
		:: else -> skip
		fi;
#else
		atomic {
			ok = kind[b] == LEASED && holder[b] == S && gen[b] == g;
			if
			:: ok ->
				assert(held[b] == S);
				kind[b] = QUEUED; holder[b] = 0; held[b] = INCH; item[b] = n
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
		atomic { seq[pos % CAP] = pos + 1; sent[n] = true }
		crash(S);
#endif
		step_n = 0;
		pos++;
next:		skip
	od;
	sdone = true;
out:	skip
}

/*
 * A receiver: R from the start, R2 once R died and a reclaim freed the
 * end (it starts at head and rhead).  R2 does not die.
 */
proctype Receiver(byte me) {
	byte pos, rpos, b, g, n;
	bool ok, redo;

	if
	:: me == R2 ->
		if
		:: dead[R] && endfree -> skip
		:: rdone -> goto out
		fi
	:: else -> skip
	fi;
	atomic { pos = head; rpos = rhead }
	do
	:: rpublished(rpos) || published(pos) ->
		atomic {
			if
			:: rpublished(rpos) ->
				redo = true; b = rtokb[rpos % CAP]; g = rtokg[rpos % CAP]
			:: else ->
				redo = false; b = tokb[pos % CAP]; g = tokg[pos % CAP]
			fi
		}
		rxcrash;
#ifndef FROM_AFTER
		fromg[b] = g + 1;
		rxcrash;
#endif
#ifdef PLAIN_RECV
		/* The receive as a checked plain store: the word read, then
		 * stored, two steps (issue 53 item 4's proposal). */
		ok = kind[b] == QUEUED && gen[b] == g;
		if
		:: ok ->
			atomic {
				assert(held[b] == INCH);
				kind[b] = LEASED; holder[b] = me; gen[b] = g + 1; held[b] = me
			}
		:: else -> skip
		fi;
#else
		atomic {
#ifdef TRUST_HINT
			ok = true;
#else
			ok = kind[b] == QUEUED && gen[b] == g;
#endif
			if
			:: ok ->
				assert(held[b] == INCH);
				kind[b] = LEASED; holder[b] = me; gen[b] = g + 1; held[b] = me
			:: else -> skip
			fi
		}
#endif
		rxcrash;
#ifdef FROM_AFTER
		if
		:: ok -> fromg[b] = g + 1
		:: else -> skip
		fi;
		rxcrash;
#endif
		if
		:: redo -> rhead = rpos + 1; rpos++
		:: else -> head = pos + 1; pos++
		fi;
		rxcrash;
		if
		:: ok ->
			/* release (the item consumed): the claim, then the push */
			atomic {
				if
				:: kind[b] == LEASED && holder[b] == me ->
					kind[b] = FREE; held[b] = 0;
					n = item[b]; item[b] = 0;
					if
					:: n > 0 -> consumed[n]++; assert(consumed[n] == 1)
					:: else -> skip
					fi
				:: else -> goto skipped
				fi
			}
			rxcrash;
			push(b);
skipped:		skip
		:: else -> skip
		fi
	:: !rpublished(rpos) && !published(pos) && (sdone || dead[S]) &&
	   (me == R || final_work) -> break
	od;
	if
	:: me == R -> rdone = true
	:: else -> r2done = true
	fi;
out:	skip
}

#ifdef FORGE
/*
 * A peer with the fd writes one published entry naming any buffer, in
 * the ring, or (-DFORGE_REDO) in the redelivery ring or a from[] record.
 */
proctype Forger() {
	byte p;
	if
#ifndef FORGE_REDO
	:: p = head;
		if
		:: tokb[p % CAP] = 0
		:: tokb[p % CAP] = 1
		fi;
		if
		:: tokg[p % CAP] = gen[tokb[p % CAP]]
		:: tokg[p % CAP] = gen[tokb[p % CAP]] + 1
		fi;
		seq[p % CAP] = p + 1
#else
	:: p = rhead;
		if
		:: rtokb[p % CAP] = 0
		:: rtokb[p % CAP] = 1
		fi;
		rtokg[p % CAP] = gen[rtokb[p % CAP]];
		rseq[p % CAP] = p + 1
	:: fromg[0] = gen[0]
#endif
	fi
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

/* Claim buffer b for reclaimer me (a CAS from what it saw), push it. */
inline rclaim(b, k, g) {
	atomic {
		if
		:: kind[b] == k && gen[b] == g && (k != LEASED || dd[holder[b]]) &&
		   (k != FREE || (!onlist[b] && holder[b] != me && dd[holder[b]])) ->
			kind[b] = FREE; holder[b] = me; held[b] = 0; item[b] = 0; got = true
		:: else -> got = false
		fi
	}
	if
	:: got ->
		rcrash;
		push(b)
	:: else -> skip
	fi
}

proctype Reclaimer(bool final) {
	byte b, g, k, h, p, q, rpos, me;
	bool got, pub, qpassed, ok;
	bool dd[6];

	if
	:: final -> me = X2; (sdone || dead[S]) && (rdone || dead[R]) && rc_done
	:: else -> me = X;
		dead[S] || dead[R] || ((sdone || dead[S]) && (rdone || dead[R]))
	fi;
	/* who is dead, as the scan found at its start (reclaim.c: dead) */
	atomic { for (q : 0 .. 5) { dd[q] = dead[q] } };
	/* The quarantine: past for the final one; either for the first. */
	if
	:: final -> qpassed = true
	:: else -> if :: qpassed = true :: qpassed = false fi
	fi;
#if !defined(DROP) && !defined(NO_REDO)
	/* The redelivery ring: the first unpublished position, and what a
	 * dead reclaimer queued there and did not publish. */
	atomic {
		rpos = rhead;
		if
		:: rpublished(rpos) -> rpos++
		:: else -> skip
		fi;
		if
		:: rpublished(rpos) -> rpos++
		:: else -> skip
		fi
	}
#ifndef NO_FINISH
	atomic {
		if
		:: rpos - rhead < CAP && kind[rtokb[rpos % CAP]] == QUEUED &&
		   gen[rtokb[rpos % CAP]] == rtokg[rpos % CAP] ->
			rseq[rpos % CAP] = rpos + 1; rpos++
		:: else -> skip
		fi
	}
	rcrash;
#endif
#endif
	/* the buffers of the dead */
	for (b : 0 .. NB - 1) {
		atomic { k = kind[b]; g = gen[b]; h = holder[b] }
		if
		:: k == QUEUED -> skip
		:: k == LEASED && !qpassed -> skip
#if !defined(DROP) && !defined(NO_REDO)
		:: k == LEASED && qpassed && dd[h] && fromg[b] == g ->
			/* into the redelivery ring, if there is room */
			if
			:: rpos - rhead < CAP ->
#ifdef REDO_CAS_FIRST
				atomic {
					ok = kind[b] == LEASED && holder[b] == h && gen[b] == g;
					if
					:: ok -> kind[b] = QUEUED; holder[b] = 0; held[b] = INCH
					:: else -> skip
					fi
				}
				rcrash;
				rtokb[rpos % CAP] = b; rtokg[rpos % CAP] = g;
#else
				rtokb[rpos % CAP] = b; rtokg[rpos % CAP] = g;
				rcrash;
				atomic {
					ok = kind[b] == LEASED && holder[b] == h && gen[b] == g;
					if
					:: ok -> kind[b] = QUEUED; holder[b] = 0; held[b] = INCH
					:: else -> skip
					fi
				}
#endif
				rcrash;
				if
				:: ok -> rseq[rpos % CAP] = rpos + 1; rpos++
				:: else -> skip
				fi;
				rcrash
			:: else -> skip     /* full: a later reclaim */
			fi
		:: else -> rclaim(b, k, g)
#else
		:: else -> rclaim(b, k, g)
#endif
		fi
	}
#ifndef NO_STEP
	if
	:: dd[S] && step_n > 0 && !published(step_pos) ->
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
#if (defined(DROP) && !defined(NO_DRAIN)) || defined(DRAIN_DEAD)
	if
#ifdef DROP
	:: dd[R] ->             /* no next receiver here: the final one drains too */
#else
	:: dd[R] && !endfree ->
#endif
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
	/* the dead receiver's end is free: R2 may take it */
	if
	:: dd[R] -> endfree = true
	:: else -> skip
	fi;
	if
	:: final ->
		final_work = true;
#ifndef DROP
		/* the next receiver has taken everything */
		!dd[R] || r2done;
#endif
#ifndef FORGE
		/* A forger may make the ring skip a buffer: held, not lost. */
		for (b : 0 .. NB - 1) {
			assert(kind[b] == FREE && onlist[b])
		}
#ifndef DROP
		/* Every item sent was consumed, once. */
		for (q : 1 .. NSEND) {
			assert(!sent[q] || consumed[q] == 1)
		}
#endif
#endif
		skip
	:: else -> skip
	fi;
out:	if
	:: !final -> rc_done = true
	:: else -> skip
	fi
}

init {
	atomic {
		onlist[0] = true; onlist[1] = true;
		run Sender(); run Receiver(R);
#ifndef DROP
		/* With -DDROP no next receiver: what is not drained is lost. */
		run Receiver(R2);
#endif
#ifdef FORGE
		run Forger();
#endif
#ifdef COPY
		run Copy();
#endif
		run Reclaimer(false); run Reclaimer(true)
	}
}
