/*
 * SPDX-License-Identifier: MIT
 *
 * A model of the pool's freelist protocol (lib/pool.c, ap_fl_pop and
 * ap_fl_push), checked exhaustively with spin by tests/test-model.sh.
 *
 * The head is one word {index, tag} changed only by CAS; next[i] holds
 * the index after i while i is free and LEASED while it is leased.
 *   pop:  read head; END: -ENOBUFS; n = next[head.index]; if n is LEASED
 *         the head moved (re-read it) or the list is corrupt (-EUCLEAN);
 *         CAS head {i, t} -> {n, t + 1}; then next[i] = LEASED.
 *   push: read head; claim next[idx] by CAS LEASED -> head.index (a
 *         second release fails here: -EALREADY); CAS head {h, t} ->
 *         {idx, t + 1}; on failure next[idx] = the new head.index, retry.
 * Each step between two shared accesses is a separate Promela statement,
 * so every interleaving of NPROC processes is explored, including a
 * process stalled between reading the head and its CAS.  The model is
 * sequentially consistent: it checks the protocol, not C11 memory orders.
 *
 * Every process does OPS operations, each an acquire and the release of
 * the buffer it got.  Checked: no buffer is leased to two holders at once,
 * no release is refused, no spurious -EUCLEAN, and at the end the list
 * walked from the head (bounded) holds every buffer once: free + leased
 * == N with none leased.
 *
 * -DTAGLESS: the head carries no tag (AP_HEAD_MAKE ignores it) and only
 * the double lease is asserted; spin must find the ABA double lease.
 */

#ifndef N
#define N 3             /* buffers */
#endif
#ifndef NPROC
#define NPROC 3         /* processes */
#endif
#ifndef OPS
#define OPS 2           /* acquire+release rounds per process */
#endif

#define END    255
#define LEASED 254

#ifdef TAGLESS
#define TAG_NEXT(t) 0
#else
#define TAG_NEXT(t) ((t) + 1)
#endif

byte next[N];
byte head_idx = 0;
byte head_tag = 0;
byte holders[N];        /* ghost: how many processes hold each buffer */
byte done = 0;

proctype worker()
{
	byte h_i, h_t, n, mine, k = 0;
	bool ok;

	do
	:: k < OPS ->
		/* ---- pop ---- */
		atomic { h_i = head_idx; h_t = head_tag }
pop_retry:
		if
		:: h_i == END -> mine = END; goto popped      /* -ENOBUFS */
		:: else -> skip
		fi;
		assert(h_i < N);
		n = next[h_i];
		/* the test hook point: any interleaving may happen here */
		if
		:: n >= N && n != END ->
			atomic {
				if
				:: head_idx == h_i && head_tag == h_t ->
#ifdef TAGLESS
					/* -EUCLEAN: the code reports, does not lease */
					mine = END; goto popped
#else
					assert(false)  /* a spurious -EUCLEAN */
#endif
				:: else -> h_i = head_idx; h_t = head_tag; n = 0
				fi
			};
			goto pop_retry
		:: else -> skip
		fi;
		atomic {
			if
			:: head_idx == h_i && head_tag == h_t ->
				head_idx = n; head_tag = TAG_NEXT(h_t); ok = true;
				/* the lease starts at the CAS */
				assert(holders[h_i] == 0);      /* no double lease */
				holders[h_i]++
			:: else ->
				h_i = head_idx; h_t = head_tag; n = 0; ok = false
			fi
		};
		if
		:: ok -> next[h_i] = LEASED; mine = h_i; n = 0; ok = false
		:: else -> goto pop_retry
		fi;
popped:
		/* ---- push the buffer back ---- */
		if
		:: mine == END -> skip
		:: else ->
			atomic { h_i = head_idx; h_t = head_tag };
			atomic {
				assert(next[mine] == LEASED);   /* the claim CAS wins */
				next[mine] = h_i
			};
push_retry:
			atomic {
				if
				:: head_idx == h_i && head_tag == h_t ->
					head_idx = mine; head_tag = TAG_NEXT(h_t); ok = true;
					/* the lease ends at the CAS */
					holders[mine]--
				:: else ->
					h_i = head_idx; h_t = head_tag; ok = false
				fi
			};
			if
			:: !ok -> next[mine] = h_i; goto push_retry
			:: else -> ok = false
			fi
		fi;
		/* dead now: forget them, so that equal states merge */
		d_step { k++; h_i = 0; h_t = 0; n = 0; mine = 0; ok = false }
	:: else -> break
	od;
	done++
}

init {
	byte i, free, leased;
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
	/* audit: a walk bounded by N meets every buffer once.  The tagless
	 * model asks one question only, whether a buffer is leased twice,
	 * so that the violation spin reports is that one. */
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
		leased = 0;
		i = 0;
		do
		:: i < N ->
			if
			:: next[i] == LEASED -> assert(!seen[i]); leased++
			:: else -> assert(seen[i])
			fi;
			assert(holders[i] == 0);
			i++
		:: else -> break
		od;
		assert(free + leased == N);
		assert(leased == 0)
	}
#endif
}
