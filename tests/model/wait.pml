/*
 * Waiting for a buffer: the wait word protocol of lib/wait_word.h, with
 * the futex modelled as the kernel implements it (the value check and
 * the queueing are one atomic step; a wake dequeues every sleeper).
 *
 *   waiter    v = fetch_or(word, 1) | 1; a free buffer? take it, done;
 *             else futex_wait(word, v); loop
 *   releaser  link a buffer in (the CAS of the head: free++);
 *             w = word; if (w & 1) { CAS(word, w, w + 1); wake all }
 *
 * Sequentially consistent, as the code's seq_cst operations are.
 * Three waiters need a buffer each and three releases come:
 *   - a thread waiter without a limit,
 *   - a waiter in another process (the same word: the futex is shared),
 *   - a waiter with a timeout, which may give up at any time: as it is
 *     woken too (it then looks once more, as the code does),
 *   - (RING) a ring waiter: one IORING_OP_FUTEX_WAIT, after which its
 *     completion makes the application look again.
 * No lost wake-up: spin reports any end state in which a waiter without
 * a limit sleeps (an invalid end state: it is not at an end label) and
 * the assertion that a waiter that gives up left no buffer unseen to
 * the others holds by construction of the final count.
 *
 * -DCHECK_FIRST: the releaser reads the word before it links the buffer
 * in; spin must find the lost wake-up (a waiter asleep with a buffer free).
 */
#define NW 3
#define WAITERS 1

byte free = 0;          /* buffers on the freelist */
byte word = 0;          /* bit 0: someone waits; above: the sequence (mod 256 here) */
bool queued[NW];        /* on the futex queue */
byte got = 0;           /* buffers taken by waiters */
byte gaveup = 0;

inline take_or_fail(ok) {
	atomic { if :: free > 0 -> free--; got++; ok = true :: else -> ok = false fi }
}

inline futex_wait(i, v) {
	atomic { if :: word == v -> queued[i] = true :: else -> skip fi }
}

inline wake_all() {
	atomic { queued[0] = false; queued[1] = false; queued[2] = false }
}

/* id 0: a thread, no limit; id 1: the same in another process. */
proctype waiter(byte i)
{
	byte v;
	bool ok;
loop:
	atomic { word = word | WAITERS; v = word };
	take_or_fail(ok);
	if
	:: ok -> goto done
	:: else
	fi;
	futex_wait(i, v);
	!queued[i];             /* sleeps until dequeued by a wake */
	goto loop;
done:
	skip
}

/* id 2: a waiter with a timeout: may stop sleeping by itself at any time. */
proctype timed_waiter(byte i)
{
	byte v;
	bool ok, expired = false;
loop:
	atomic { word = word | WAITERS; v = word };
	take_or_fail(ok);
	if
	:: ok -> goto done
	:: !ok && expired -> gaveup++; goto done
	:: else
	fi;
	futex_wait(i, v);
	if
	:: !queued[i]                           /* woken, or the word had changed */
	:: atomic { queued[i] -> queued[i] = false; expired = true }   /* the timeout */
	fi;
	goto loop;
done:
	skip
}

#ifdef RING
/* id 2 as a ring waiter: one FUTEX_WAIT on the ring, then a look. */
proctype ring_waiter(byte i)
{
	byte v;
	bool ok;
loop:
	atomic { word = word | WAITERS; v = word };
	/* prep_wait: a buffer free already -> a value that cannot match */
	atomic { if :: free > 0 -> v = v & 254 :: else fi };
	futex_wait(i, v);
	!queued[i];             /* the completion arrives */
	take_or_fail(ok);
	if
	:: ok -> goto done
	:: else -> goto loop    /* the application prepares another wait */
	fi;
done:
	skip
}
#endif

proctype releaser()
{
	byte w;
#ifdef CHECK_FIRST
	w = word;
	free++;
#else
	free++;
	w = word;
#endif
	if
	:: (w & WAITERS) ->
		atomic { if :: word == w -> word = (w + 1) & 255 :: else fi };
		wake_all()
	:: else
	fi
}

init {
	atomic {
		run waiter(0);
		run waiter(1);
#ifdef RING
		run ring_waiter(2);
#else
		run timed_waiter(2);
#endif
		run releaser();
		run releaser();
		run releaser();
	}
	/* Everyone done: every buffer taken, or left free by the one that gave up. */
	(_nr_pr == 1);
	assert(got + gaveup == NW && free == gaveup)
}
