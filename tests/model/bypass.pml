/*
 * Taking buffers out of another thread's cache: the asymmetric protocol
 * of lib/cache_state.h and lib/pool_bypass.c.  The owner's fast path is plain stores and loads
 * (busy = 1; bypass?; ... the cache ...; busy = 0); the flusher sets
 * bypass, runs membarrier(2), waits for busy to be 0, and drains.
 *
 * membarrier(2) puts a full barrier on every running thread between the
 * flusher's store of bypass and its load of busy, so the pair behaves as
 * sequentially consistent: spin's interleavings are exactly that.  (On
 * the real machine, without membarrier, the owner's store of busy could
 * pass its load of bypass, which is why the call is there.)
 *
 * Two buffers start in the owner's cache.  The owner acquires and
 * releases them through its fast path, falling back to the freelist
 * whenever it sees bypass, as the code does.  A flusher (asyncpool_
 * cache_flush_all, or a waiter starting to wait) drains the cache twice
 * and takes a buffer from the freelist in between.  Every move of a
 * buffer asserts where it was: no buffer is ever owned twice, or both
 * in the cache and on the list.
 *
 * -DNOWAIT: the flusher does not wait for busy to drop: spin must find
 * a buffer taken twice.
 */
#define CACHE   1
#define LIST    2
#define OWNER   3
#define FLUSHER 4

byte where[2];
byte idx[2];
byte n = 0;
bool busy, bypass;

inline move(b, from, to) {
	assert(where[b] == from);
	where[b] = to
}

/* The freelist: pop any listed buffer (one atomic CAS). */
inline list_pop(b, to) {
	atomic {
		if
		:: where[0] == LIST -> b = 0; move(b, LIST, to)
		:: where[1] == LIST -> b = 1; move(b, LIST, to)
		:: else -> b = 255
		fi
	}
}

proctype owner()
{
	byte b = 255, k, m;

	for (k : 1 .. 3) {
		/* acquire */
		busy = 1;
		if
		:: bypass -> busy = 0; list_pop(b, OWNER)
		:: else ->
			m = n;
			if
			:: m > 0 -> b = idx[m - 1]; move(b, CACHE, OWNER); n = m - 1
			:: else -> b = 255
			fi;
			busy = 0
		fi;
		/* release what it got */
		if
		:: b != 255 ->
			busy = 1;
			if
			:: bypass -> busy = 0; atomic { move(b, OWNER, LIST) }
			:: else -> m = n; idx[m] = b; move(b, OWNER, CACHE); n = m + 1; busy = 0
			fi
		:: else
		fi
	}
}

proctype flusher()
{
	byte b, r;

	for (r : 1 .. 2) {
		bypass = 1;
		/* membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) */
#ifndef NOWAIT
		!busy;
#endif
		do
		:: n > 0 -> n--; atomic { move(idx[n], CACHE, LIST) }
		:: else -> break
		od;
		bypass = 0;
		/* the buffers are the freelist's: a waiter takes one, gives it back */
		list_pop(b, FLUSHER);
		if
		:: b != 255 -> atomic { move(b, FLUSHER, LIST) }
		:: else
		fi
	}
}

init {
	atomic {
		where[0] = CACHE; where[1] = CACHE;
		idx[0] = 0; idx[1] = 1; n = 2;
		run owner();
		run flusher()
	}
}
