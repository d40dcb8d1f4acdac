/*
 * SPDX-License-Identifier: MIT
 *
 * A model of the freelist's chain operations (lib/pool.c of the cache
 * work: ap_fl_pop_chain and ap_fl_push_chain) mixed with the single
 * ones (ap_fl_pop, ap_fl_push), checked exhaustively with spin by
 * tests/test-model.sh.  Same conventions as freelist.pml: the head is
 * one word {index, tag} changed only by CAS; next[i] is a link while i
 * is free, LEASED while leased, CACHED while in a thread's cache.  Each
 * step between two shared accesses is a separate Promela statement; the
 * model is sequentially consistent (the protocol, not C11 orders).
 *
 *   pop_chain(min, max, mark)  ap_fl_pop_chain: read the head; walk at
 *         most max links from it, stopping at a value >= N (each load of
 *         next[] one step); if the walk stopped on a mark (not END) the
 *         chain was popped under us: re-read the head, or -EUCLEAN if it
 *         did not move; fewer than min: re-read the head, and retry if
 *         it moved, else -ENOBUFS; CAS head {h, t} -> {node after the
 *         chain, t + 1}; then next[] = mark for each.
 *   push_chain(idx[], n)       ap_fl_push_chain: link idx[j] -> idx[j+1]
 *         (plain stores: the caller owns them); read the head; loop:
 *         next[idx[n-1]] = head.index, CAS head {h, t} -> {idx[0], t + 1}.
 *
 * Every process does OPS rounds; each round is one of these, chosen
 * nondeterministically (spin explores every choice in every process):
 *   A  ap_fl_pop + ap_fl_push                   (asyncpool_acquire/release)
 *   B  ap_fl_pop_chain(2, 2, LEASED), then ap_fl_push of each
 *                       (asyncpool_acquire_bulk uncached, single releases)
 *   C  ap_fl_pop_chain(1, 2, CACHED)            (cache_refill, batch 2)
 *      take one (ap_cache_take: CACHED -> LEASED), release it into the
 *      cache (ap_cache_recycle: check LEASED, store CACHED), then
 *      ap_fl_push_chain of all of them          (cache_flush_batch/drain)
 *   D  ap_fl_pop twice, then asyncpool_release_bulk on them
 *      (release_run: check LEASED, store END, then ap_fl_push_chain)
 *
 * Checked: no buffer is held by two owners (the ghost holders[] is
 * incremented at the CAS that pops a buffer, decremented at the CAS that
 * pushes it), every release finds its buffer LEASED (or CACHED), no
 * spurious -EUCLEAN, no spurious -ENOBUFS, and at the end the list walked
 * from the head (bounded by N) is acyclic and holds every free buffer
 * once: free + held == N, held == 0.
 *
 * -ENOBUFS must mean the pool was empty: the ghost nfree counts the free
 * buffers (changed at each CAS of the head), and low[p] records that
 * nfree was below what process p asked for (want[p]) at some instant of
 * its current operation; an -ENOBUFS asserts low[p].
 * -DNOBUFS_NO_RECHECK is the code before issue 14: a walk that ends
 * short of min returns -ENOBUFS without re-reading the head.  Spin must
 * find the spurious -ENOBUFS: a walk reads the head a; another process
 * pops a (and more), then releases them with asyncpool_release_bulk,
 * whose claim stores END into next[a] before it relinks the chain; the
 * walk loads next[a] == END, takes it for the end of the list, and
 * returns -ENOBUFS while other buffers are free.
 *
 * Configuration: N = 4 buffers, NPROC = 2 processes x OPS = 2 rounds
 * (3.8M states, 5 to 10 s): what tests/test-model.sh runs.  Three
 * processes are exhaustive too but too slow for make check on 2 shared
 * cores, so they are run by hand (measured, no error):
 *   spin -a -DNPROC=3 -DOPS=1 -DN=3: 12.8M states, 25-30 s
 *   spin -a -DNPROC=3 -DOPS=1:       about 27M states, 87 s, 1.2 GB
 * (cc -O2 -DSAFETY -DCOLLAPSE -DMEMLIM=2048 pan.c; ./pan -m100000).
 *
 * -DTAGLESS: the head carries no tag; only double ownership is asserted
 * (a spurious -EUCLEAN becomes a failed operation, as the code reports
 * it); spin must find a buffer popped by two owners.  It does, in
 * every configuration above (18K states for 2 x 2): a chain walk reads
 * next[a] = b; the list changes under it until the head shows a again
 * with b leased; the untagged CAS succeeds and the chain {a, b} takes b,
 * which another process holds.
 */

#ifndef N
#define N 4             /* buffers */
#endif
#ifndef NPROC
#define NPROC 2         /* processes */
#endif
#ifndef OPS
#define OPS 2           /* rounds per process */
#endif

#define END    255
#define LEASED 254
#define CACHED 253

#ifdef TAGLESS
#define TAG_NEXT(t) 0
#else
#define TAG_NEXT(t) ((t) + 1)
#endif

byte next[N];
byte head_idx = 0;
byte head_tag = 0;
byte holders[N];        /* ghost: how many owners hold each buffer */
byte done = 0;
byte nfree = N;         /* ghost: buffers on the list */
byte want[NPROC + 1];   /* ghost: buffers process _pid asks for now */
bool low[NPROC + 1];    /* ghost: nfree < want[_pid] once during the op */

/* After each change of nfree (inside the CAS's atomic step). */
#define NOTE_LOW(p) if :: nfree < want[p] -> low[p] = true :: else -> skip fi
#if NPROC > 2
#define NOTE_LOW_ALL NOTE_LOW(1); NOTE_LOW(2); NOTE_LOW(3)
#else
#define NOTE_LOW_ALL NOTE_LOW(1); NOTE_LOW(2)
#endif

/* An operation of this process that wants m buffers starts, ends. */
#define OP_WANTS(m) atomic { want[_pid] = m; low[_pid] = (nfree < m) }
#define OP_DONE     atomic { want[_pid] = 0; low[_pid] = false }

/* -ENOBUFS: the pool held fewer than asked at some instant. */
#ifdef TAGLESS
#define ASSERT_EMPTY skip
#else
#define ASSERT_EMPTY assert(low[_pid])
#endif

/* The head changed since it was read (the CAS fails): re-read it. */
#define HEAD_SAME (head_idx == h_i && head_tag == h_t)

/*
 * ap_fl_pop: on success got[cnt] = the buffer, cnt++.
 */
inline fl_pop()
{
	OP_WANTS(1);
	atomic { h_i = head_idx; h_t = head_tag };
	do
	:: h_i == END -> ASSERT_EMPTY; break            /* -ENOBUFS */
	:: else ->
		assert(h_i < N);
		n = next[h_i];
		if
		:: n >= N && n != END ->
			atomic {
				if
				:: HEAD_SAME ->
#ifdef TAGLESS
					h_i = END               /* -EUCLEAN */
#else
					assert(false)           /* spurious -EUCLEAN */
#endif
				:: else -> h_i = head_idx; h_t = head_tag
				fi
			}
		:: else ->
			atomic {
				if
				:: HEAD_SAME ->
					head_idx = n; head_tag = TAG_NEXT(h_t);
					assert(holders[h_i] == 0);  /* one owner */
					holders[h_i]++;
					nfree--; NOTE_LOW_ALL;
					ok = true
				:: else -> h_i = head_idx; h_t = head_tag
				fi
			};
			if
			:: ok ->
				next[h_i] = LEASED;
				d_step { got[cnt] = h_i; cnt++; ok = false };
				break
			:: else -> skip
			fi
		fi
	od;
	OP_DONE;
	atomic { h_i = 0; h_t = 0; n = 0 }
}

/*
 * ap_fl_push of idx, a buffer this process leased: the claim CAS
 * LEASED -> head.index must win (no one else releases it here).
 */
inline fl_push(idx)
{
	atomic { h_i = head_idx; h_t = head_tag };
	atomic {
		assert(next[idx] == LEASED);
		next[idx] = h_i
	};
	do
	:: atomic {
		if
		:: HEAD_SAME ->
			head_idx = idx; head_tag = TAG_NEXT(h_t);
			holders[idx]--;
			nfree++;
			ok = true
		:: else -> h_i = head_idx; h_t = head_tag
		fi
	   };
	   if
	   :: ok -> ok = false; break
	   :: else -> next[idx] = h_i
	   fi
	od;
	atomic { h_i = 0; h_t = 0 }
}

/*
 * ap_fl_pop_chain(min, max, mark): on success got[0..k-1], cnt = k.
 */
inline fl_pop_chain(min, max, mark)
{
	OP_WANTS(min);
	atomic { h_i = head_idx; h_t = head_tag };
	do
	:: d_step { n = h_i; k = 0 };
		do
		:: k < max && n < N ->
			/* one load of next[] per step */
			d_step { got[k] = n; k++; n = next[n] }
		:: else -> break
		od;
		if
		:: n >= N && n != END ->
			atomic {
				if
				:: HEAD_SAME ->
#ifdef TAGLESS
					k = 0; ok = true        /* -EUCLEAN */
#else
					assert(false)           /* spurious -EUCLEAN */
#endif
				:: else -> h_i = head_idx; h_t = head_tag
				fi
			};
			if
			:: ok -> ok = false; break
			:: else -> skip
			fi
		:: else ->
			if
			:: k < min ->
#ifdef NOBUFS_NO_RECHECK
				ASSERT_EMPTY; k = 0; break      /* -ENOBUFS */
#else
				/* the walk may have met a buffer claimed
				 * under it (END): empty only if the head
				 * did not move */
				atomic {
					if
					:: HEAD_SAME -> ASSERT_EMPTY; k = 0; ok = true
					:: else -> h_i = head_idx; h_t = head_tag
					fi
				};
				if
				:: ok -> ok = false; break      /* -ENOBUFS */
				:: else -> skip                 /* retry */
				fi
#endif
			:: else ->
				atomic {
					if
					:: HEAD_SAME ->
						head_idx = n; head_tag = TAG_NEXT(h_t);
						/* one owner for each buffer of the chain */
						assert(holders[got[0]] == 0);
						holders[got[0]]++;
						if
						:: k > 1 ->
							assert(holders[got[1]] == 0);
							holders[got[1]]++
						:: else -> skip
						fi;
						nfree = nfree - k; NOTE_LOW_ALL;
						ok = true
					:: else -> h_i = head_idx; h_t = head_tag
					fi
				};
				if
				:: ok ->
					ok = false;
					/* the marks, after the CAS, one store each */
					next[got[0]] = mark;
					if
					:: k > 1 -> next[got[1]] = mark
					:: else -> skip
					fi;
					break
				:: else -> skip
				fi
			fi
		fi
	od;
	OP_DONE;
	atomic { cnt = k; k = 0; n = 0; h_i = 0; h_t = 0 }
}

/*
 * ap_fl_push_chain(got, cnt): buffers this process owns (claimed).
 */
inline fl_push_chain()
{
	if
	:: cnt > 1 -> next[got[0]] = got[1]
	:: else -> skip
	fi;
	atomic { h_i = head_idx; h_t = head_tag };
	do
	:: next[got[cnt - 1]] = h_i;
	   atomic {
		if
		:: HEAD_SAME ->
			head_idx = got[0]; head_tag = TAG_NEXT(h_t);
			holders[got[0]]--;
			if
			:: cnt > 1 -> holders[got[1]]--
			:: else -> skip
			fi;
			nfree = nfree + cnt;
			ok = true
		:: else -> h_i = head_idx; h_t = head_tag
		fi
	   };
	   if
	   :: ok -> ok = false; break
	   :: else -> skip
	   fi
	od;
	atomic { h_i = 0; h_t = 0 }
}

proctype worker()
{
	byte h_i, h_t, n, k, cnt, r = 0;
	byte got[2];
	bool ok;

	do
	:: r < OPS ->
		if
		:: /* A: acquire + release */
			fl_pop();
			if
			:: cnt == 1 -> fl_push(got[0])
			:: else -> skip
			fi
		:: /* B: acquire_bulk of 2 (uncached), single releases */
			fl_pop_chain(2, 2, LEASED);
			if
			:: cnt == 2 -> fl_push(got[0]); fl_push(got[1])
			:: else -> skip
			fi
		:: /* C: cache refill (batch 2), take, recycle, flush */
			fl_pop_chain(1, 2, CACHED);
			if
			:: cnt > 0 ->
				/* ap_cache_take of the last cached one, then
				 * ap_cache_recycle of it: check, plain store.
				 * One step: CACHED and LEASED look alike to
				 * every other process (a value >= N, not END). */
				atomic {
					assert(next[got[cnt - 1]] == CACHED);
					next[got[cnt - 1]] = LEASED;
					assert(next[got[cnt - 1]] == LEASED);
					next[got[cnt - 1]] = CACHED
				};
				fl_push_chain()
			:: else -> skip
			fi
		:: /* D: two acquires, release_bulk (release_run) */
			fl_pop();
			fl_pop();
			if
			:: cnt > 0 ->
				atomic {
					assert(next[got[0]] == LEASED);
					next[got[0]] = END
				};
				if
				:: cnt > 1 ->
					atomic {
						assert(next[got[1]] == LEASED);
						next[got[1]] = END
					}
				:: else -> skip
				fi;
				fl_push_chain()
			:: else -> skip
			fi
		fi;
		/* dead now: forget them, so that equal states merge */
		d_step { r++; cnt = 0; got[0] = 0; got[1] = 0; ok = false }
	:: else -> break
	od;
	done++
}

init {
	byte i, free, held;
	bool seen[N];

	atomic {
		i = 0;
		do
		:: i < N - 1 -> next[i] = i + 1; i++
		:: else -> next[N - 1] = END; break
		od;
		i = 0;
		do
		:: i < NPROC -> run worker(); i++
		:: else -> break
		od
	};
	done == NPROC;
#ifndef TAGLESS
	/* audit: a walk bounded by N meets every free buffer once (so the
	 * list is acyclic), and free + held == N with none held. */
	d_step {
		i = head_idx;
		free = 0;
		do
		:: i == END -> break
		:: else ->
			assert(i < N);
			assert(!seen[i]);
			seen[i] = true;
			free++;
			assert(free <= N);
			i = next[i]
		od;
		held = 0;
		i = 0;
		do
		:: i < N ->
			if
			:: !seen[i] -> assert(holders[i] == 1); held++
			:: else -> assert(holders[i] == 0)
			fi;
			i++
		:: else -> break
		od;
		assert(free + held == N);
		assert(held == 0)
	}
#endif
}
