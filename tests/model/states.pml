/*
 * SPDX-License-Identifier: MIT
 *
 * A model of a shared pool's per-buffer states and of a double release,
 * checked exhaustively with spin by tests/test-model.sh.
 *
 * next[b] is the state of buffer b, in the shared mapping: a link (or
 * END) while b is free, LEASED while it is leased, CACHED while it sits
 * in some thread's cache (the cache work, lib/pool_cache.h).
 *   free   -> LEASED   ap_fl_pop: CAS on the head, then next[b] = LEASED
 *   LEASED -> free     ap_fl_push (asyncpool_lease_release, and
 *                      asyncpool_release_index from any process): claim
 *                      by CAS next[b] LEASED -> head.index, else
 *                      -EALREADY; then CAS the head to b
 *   LEASED -> CACHED   ap_cache_recycle: load, compare with LEASED (else
 *                      refused: bad_releases), plain store CACHED
 *   CACHED -> free     ap_fl_push_chain (cache_flush_batch, cache_drain)
 *   LEASED -> END      release_run (asyncpool_release_bulk of an
 *                      uncached pool): load, compare with LEASED, plain
 *                      store END; then ap_fl_push_chain
 *
 * Processes: the owner pops a buffer b and sends its index to a peer
 * process; both release b at once, the owner through its release path,
 * the peer with asyncpool_release_index (ap_fl_push); meanwhile TRAFFIC
 * = 2 more processes do OPS = 1 acquire+release round each, so the head
 * moves under both and b may be leased again in between.  N = 3 buffers.
 * (2 traffic processes x 2 rounds is exhaustive too, but 25M states and
 * over a minute: too long for make check.)
 *
 * Checked: no buffer is ever linked into the list while already on it
 * (ghost onlist[], set at the CAS that pushes, cleared at the CAS that
 * pops), no pop takes a buffer that is not on the list, exactly one of
 * the releases is refused (refused == 1, released == popped), and at the
 * end the list from the head is acyclic and holds all N buffers.
 *
 * A release by index cannot tell a stale copy from the current lease:
 * if a traffic process leases b again between the two releases, the
 * late duplicate releases its lease and its own release is the one
 * refused; b may then be leased to a second holder while the first
 * still uses it.  Still exactly one refusal and no double link: the
 * model allows that interleaving and asserts just that (the duplicate is
 * the program's bug, which no check by index can see).
 *
 * Variants (the owner's release path):
 *   default       ap_fl_push: must hold.
 *   -DOWNER_CACHE ap_cache_recycle, then the cache is flushed with
 *                 ap_fl_push_chain.  With -DSEQUENTIAL the peer releases
 *                 after the owner's release returned (a copied lease
 *                 released later, racing only with the flush): must
 *                 hold, the claim CAS refuses the CACHED buffer.  Racing:
 *                 must hold too, since the release into a cache claims by
 *                 CAS; with -DPLAIN_CACHE_CHECK (a plain check and store,
 *                 as before issue 14) spin must find the double link.
 *   -DOWNER_BULK  release_run: a claim CAS (LEASED -> END), as
 *                 ap_fl_push does, then ap_fl_push_chain: a racing
 *                 double release is refused: must hold, racing or
 *                 -DSEQUENTIAL.  (With a plain check and store, which an
 *                 earlier version had, spin found b linked twice.)
 */

#ifndef N
#define N 3
#endif
#ifndef OPS
#define OPS 1           /* acquire+release rounds of each traffic process */
#endif
#ifndef TRAFFIC
#define TRAFFIC 2       /* traffic processes */
#endif

#define END    255
#define LEASED 254
#define CACHED 253

byte next[N];
byte head_idx = 0;
byte head_tag = 0;
bool onlist[N];         /* ghost: b is linked into the list */
byte popped = 0;        /* ghost: successful pops */
byte released = 0;      /* ghost: successful releases */
byte refused = 0;       /* ghost: refused releases */
byte sent = END;        /* the index the owner sends the peer */
bool owner_done = false;
byte done = 0;

#define HEAD_SAME (head_idx == h_i && head_tag == h_t)

/* The CAS that links idx at the head succeeded. */
#define LINKED(idx) assert(!onlist[idx]); onlist[idx] = true

/* ap_fl_pop: mine = the buffer, or END for -ENOBUFS. */
inline fl_pop()
{
	atomic { h_i = head_idx; h_t = head_tag };
	do
	:: h_i == END -> mine = END; break
	:: else ->
		n = next[h_i];
		if
		:: n >= N && n != END ->
			atomic {
				assert(!HEAD_SAME);     /* spurious -EUCLEAN */
				h_i = head_idx; h_t = head_tag
			}
		:: else ->
			atomic {
				if
				:: HEAD_SAME ->
					head_idx = n; head_tag = h_t + 1;
					assert(onlist[h_i]);
					onlist[h_i] = false;
					popped++;
					ok = true
				:: else -> h_i = head_idx; h_t = head_tag
				fi
			};
			if
			:: ok -> next[h_i] = LEASED; mine = h_i; ok = false; break
			:: else -> skip
			fi
		fi
	od;
	atomic { h_i = 0; h_t = 0; n = 0 }
}

/* The head CAS loop of ap_fl_push and ap_fl_push_chain (of one buffer):
 * next[idx] already holds h_i. */
inline push_head(idx)
{
	do
	:: atomic {
		if
		:: HEAD_SAME ->
			head_idx = idx; head_tag = h_t + 1;
			LINKED(idx);
			released++;
			ok = true
		:: else -> h_i = head_idx; h_t = head_tag
		fi
	   };
	   if
	   :: ok -> ok = false; break
	   :: else -> next[idx] = h_i
	   fi
	od
}

/* ap_fl_push: claim by CAS, -EALREADY if the buffer is not LEASED. */
inline fl_push(idx)
{
	atomic { h_i = head_idx; h_t = head_tag };
	atomic {
		if
		:: next[idx] == LEASED -> next[idx] = h_i; ok = true
		:: else -> refused++; ok = false
		fi
	};
	if
	:: ok -> ok = false; push_head(idx)
	:: else -> skip
	fi;
	atomic { h_i = 0; h_t = 0 }
}

/* ap_fl_push_chain of the one buffer idx, which this process owns. */
inline push_chain1(idx)
{
	atomic { h_i = head_idx; h_t = head_tag };
	next[idx] = h_i;
	push_head(idx);
	atomic { h_i = 0; h_t = 0 }
}

proctype owner()
{
	byte h_i, h_t, n, mine;
	bool ok;

	fl_pop();
	assert(mine != END);    /* traffic holds at most TRAFFIC < N */
	sent = mine;
#if defined(OWNER_CACHE) && defined(PLAIN_CACHE_CHECK)
	/* The old ap_cache_recycle: a plain check, then a store. */
	if
	:: next[mine] == LEASED ->
		next[mine] = CACHED;
		owner_done = true;
		push_chain1(mine)
	:: else -> refused++; owner_done = true
	fi;
#elif defined(OWNER_CACHE)
	/* ap_cache_recycle: a claim CAS LEASED -> CACHED
	 * (ap_state_leased_to_cached); returns once the buffer is cached;
	 * the cache is flushed (ap_cache_flush_batch) later. */
	if
	:: atomic { next[mine] == LEASED -> next[mine] = CACHED };
		owner_done = true;
		push_chain1(mine)
	:: atomic { next[mine] != LEASED -> refused++ }; owner_done = true
	fi;
#elif defined(OWNER_BULK)
	/* release_run: claim CAS LEASED -> END, then ap_fl_push_chain */
	if
	:: atomic { next[mine] == LEASED -> next[mine] = END };
		push_chain1(mine)
	:: atomic { next[mine] != LEASED -> refused++ }
	fi;
	owner_done = true;
#else
	fl_push(mine);
	owner_done = true;
#endif
	done++
}

proctype peer()
{
	byte h_i, h_t, b;
	bool ok;

	sent != END;
#ifdef SEQUENTIAL
	owner_done;
#endif
	b = sent;
	fl_push(b);             /* asyncpool_release_index(pool, b) */
	done++
}

proctype traffic()
{
	byte h_i, h_t, n, mine, r = 0;
	bool ok;

	do
	:: r < OPS ->
		fl_pop();
		if
		:: mine != END -> fl_push(mine)
		:: else -> skip
		fi;
		d_step { r++; mine = 0 }
	:: else -> break
	od;
	done++
}

init {
	byte i, free;
	bool seen[N];

	atomic {
		i = 0;
		do
		:: i < N - 1 -> next[i] = i + 1; onlist[i] = true; i++
		:: else -> next[N - 1] = END; onlist[N - 1] = true; break
		od;
		run owner();
		run peer();
		i = 0;
		do
		:: i < TRAFFIC -> run traffic(); i++
		:: else -> break
		od
	};
	done == 2 + TRAFFIC;
	d_step {
		/* one release of the pair refused, every lease released once */
		assert(refused == 1);
		assert(released == popped);
		i = head_idx;
		free = 0;
		do
		:: i == END -> break
		:: else ->
			assert(i < N);
			assert(!seen[i]);
			assert(onlist[i]);
			seen[i] = true;
			free++;
			i = next[i]
		od;
		assert(free == N)
	}
}
