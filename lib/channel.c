/* SPDX-License-Identifier: MIT */
/*
 * Channels (issue 33): a buffer handed to another process through the
 * shared pool itself.  The layout is pool_layout.h's struct ap_chan, the
 * word's transitions buffer_state.h's ap_state_send/_receive, what a
 * dead end leaves reclaim.c's, and tests/model/channel.pml proves the
 * protocol with a crash at every step.
 *
 * Send (one sender at a time, positions p .. p+n-1):
 *   1. room: p - head < capacity, head as last read (read again only
 *      when the ring looks full): else -EAGAIN, nothing changed
 *   2. step: step_pos = p, step_n = n               (the sender's line)
 *   3. per buffer: its token into the slot, then CAS its word
 *      LEASED(me, g) -> QUEUED(c, g)                 (the word's line)
 *   4. publish: each slot's seq = position + 1, in order (the slot's line)
 *   5. step_n = 0; if the receiver said it waits, wake it
 * Receive (one receiver at a time, from position p):
 *   1. the slot's seq is p + 1, or the channel is empty: -EAGAIN
 *   2. CAS the word named by the slot's token QUEUED(c, g) -> LEASED(me,
 *      g+1): a word that is not that refuses the entry (counted as a
 *      corruption of the channel, never handed out)
 *   3. head = p + 1 (once per call)
 * So a hand-off moves two cache lines between the processes, the slot's
 * and the buffer word's; the head line moves once per capacity entries
 * at most, and the wake line only when the receiver sleeps.
 *
 * A dead sender (reclaim.c): what it published stays deliverable; a
 * word of its step that it queued but did not publish goes back to the
 * freelist, so that a QUEUED word never exists outside the ring.  A dead
 * receiver: what is published in its ring goes back to the freelist at
 * once (it never touched those buffers: no quarantine); what it took is
 * LEASED by it and comes back after the quarantine, as any lease.  Then
 * its end is free.  An end held by a dead attachment is taken only after
 * the reclaim freed it: two drainers of one ring would race on its head.
 */
#include "pool_internal.h"
#include "pool_pop.h"
#include "pool_wait.h"
#include "attach_rec.h"
#include "channel_ring.h"

#include <asyncpool/channel.h>

#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <time.h>

struct asyncpool_channel {
	/* The hot fields, read on every call. */
	struct ap_chan      *ch;
	struct ap_chan_slot *slot;
	ap_word             *state;
	uint64_t             pos;       /* sender: the next position; receiver: the next to read */
	uint64_t             peer;      /* sender: the receiver's head as last read */
	uint64_t             done;      /* buffers this end sent or received (its counter) */
	uint32_t             mask;      /* capacity - 1 */
	uint32_t             cap;
	uint32_t             count;     /* buffers of the pool */
	uint32_t             c;
	uint32_t             me;        /* holder: attachment slot + 1 */
	bool                 send;
	uint64_t             end;       /* the end word we hold */
	uint64_t             bad_at;    /* a position counted corrupt already, + 1 */
	struct asyncpool    *pool;
	/* asyncpool_channel_wait_fd(): a thread waits on the wake word. */
	pthread_mutex_t      lock;
	int                  wait_fd;
	pid_t                wait_pid;
	_Atomic bool         wait_stop;
	pthread_t            waker;
};

/* Opening an end held by a dead attachment: the reclaim frees it; so often. */
#define OPEN_TRIES 64

/*
 * Whether end word v names an attachment that is alive: its record LIVE
 * at that epoch and its lock held (attach_rec.h).  Cannot tell: alive.
 */
static bool end_alive(const struct asyncpool *pool, uint64_t v)
{
	uint32_t who = AP_END_WHO(v);
	uint64_t life;

	if (who == 0 || who > AP_ATTACH_SLOTS)
		return false;
	life = atomic_load_explicit(&ap_attach_rec(pool, who - 1)->life, memory_order_acquire);
	if (AP_ATT_STATE(life) != AP_ATT_LIVE || AP_ATT_EPOCH(life) != AP_END_EPOCH(v))
		return false;
	return ap_attach_alive(pool, who - 1) != 0;
}

/* Take end word *w for us (mine): 0, or -EBUSY while a live attachment holds it. */
static int end_take(struct asyncpool *pool, _Atomic uint64_t *w, uint64_t mine)
{
	for (int t = 0; t < OPEN_TRIES; t++) {
		uint64_t v = atomic_load_explicit(w, memory_order_acquire);

		if (!v) {
			if (atomic_compare_exchange_strong_explicit(w, &v, mine, memory_order_acq_rel,
								    memory_order_relaxed))
				return 0;
			continue;
		}
		if (v == mine || end_alive(pool, v))
			return -EBUSY;
		/* Dead: the reclaim drains or finishes what it left, then
		 * frees the end.  Another process's reclaim may be at it. */
		if (ap_reclaim(pool) <= 0 && atomic_load_explicit(w, memory_order_acquire) == v) {
			struct timespec ts = { 0, 1000000 };

			nanosleep(&ts, NULL);
		}
	}
	return -EBUSY;
}

AP_EXPORT int asyncpool_channel_open(struct asyncpool *pool, uint32_t channel, uint32_t end,
				     struct asyncpool_channel **out)
{
	struct asyncpool_channel *e;
	uint64_t mine;
	int rc;

	if (!out)
		return -EINVAL;
	*out = NULL;
	if (!pool || (end != ASYNCPOOL_CHANNEL_SEND && end != ASYNCPOOL_CHANNEL_RECV))
		return -EINVAL;
	/* An end names an attachment: raw memory and local pools have none. */
	if (!pool->shared || pool->lock_fd < 0 || !pool->fl.att)
		return -EOPNOTSUPP;
	if (channel >= pool->chan_count)
		return -EINVAL;
	e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	e->pool = pool;
	e->ch = ap_chan_in(pool->storage, pool->fl.count, pool->chan_count, pool->chan_cap, channel);
	e->slot = ap_chan_slots(e->ch);
	e->state = pool->fl.state;
	e->cap = pool->chan_cap;
	e->mask = pool->chan_cap - 1;
	e->count = pool->fl.count;
	e->c = channel;
	e->me = pool->fl.me;
	e->send = end == ASYNCPOOL_CHANNEL_SEND;
	e->wait_fd = -1;
	pthread_mutex_init(&e->lock, NULL);
	mine = ap_end_word(pool->slot, AP_ATT_EPOCH(atomic_load_explicit(&pool->fl.att->life,
									  memory_order_relaxed)));
	rc = end_take(pool, e->send ? &e->ch->send_end : &e->ch->recv_end, mine);
	if (rc) {
		pthread_mutex_destroy(&e->lock);
		free(e);
		return rc;
	}
	e->end = mine;
	if (e->send) {
		/* The next position: the first one not published from head
		 * on.  A step a peer left there is none of ours. */
		e->peer = atomic_load_explicit(&e->ch->head, memory_order_acquire);
		e->pos = e->peer + ap_chan_depth(e->ch, e->cap, e->peer);
		atomic_store_explicit(&e->ch->step_n, 0, memory_order_relaxed);
		e->done = atomic_load_explicit(&e->ch->sent, memory_order_relaxed);
	} else {
		e->pos = atomic_load_explicit(&e->ch->head, memory_order_acquire);
		e->done = atomic_load_explicit(&e->ch->received, memory_order_relaxed);
	}
	*out = e;
	return 0;
}

static void wait_fd_stop(struct asyncpool_channel *e);

AP_EXPORT int asyncpool_channel_close(struct asyncpool_channel *e)
{
	uint64_t mine;

	if (!e)
		return -EINVAL;
	wait_fd_stop(e);
	mine = e->end;
	/* By CAS: an end a peer rewrote is left as it is. */
	(void)atomic_compare_exchange_strong_explicit(e->send ? &e->ch->send_end : &e->ch->recv_end,
						      &mine, 0, memory_order_release,
						      memory_order_relaxed);
	pthread_mutex_destroy(&e->lock);
	free(e);
	return 0;
}

/* ---- send ---- */

/* Wake the receiver if it said it waits (pool_wait.h): one load when it does not. */
static inline void wake_receiver(struct asyncpool_channel *e)
{
	ap_word_wake(&e->ch->wait, true);
}

/*
 * Room for up to n entries: how many fit (the receiver's head read again
 * only when our copy says full), 0 if none.  A head a peer wrote beyond
 * ours, or more than a capacity behind, leaves no room.
 */
static inline uint32_t room(struct asyncpool_channel *e, uint32_t n)
{
	uint64_t used = e->pos - e->peer;

	if (used + n > e->cap) {
		uint64_t h = atomic_load_explicit(&e->ch->head, memory_order_acquire);

		used = e->pos - h;
		if (used > e->cap)
			return 0;
		e->peer = h;
	}
	return e->cap - (uint32_t)used < n ? e->cap - (uint32_t)used : n;
}

/*
 * Queue tokens[0 .. n-1], all of which name a buffer of the pool: how
 * many were queued (a prefix: the first the word refuses stops it), or
 * -EAGAIN (full) or -ESTALE (the first is not our lease).
 */
static int send_run(struct asyncpool_channel *e, const uint64_t *tokens, uint32_t n)
{
	uint64_t p = e->pos;
	uint32_t k;

	n = room(e, n);
	if (!n) {
		atomic_fetch_add_explicit(&e->ch->full, 1, memory_order_relaxed);
		return -EAGAIN;
	}
	atomic_store_explicit(&e->ch->step_pos, p, memory_order_relaxed);
	atomic_store_explicit(&e->ch->step_n, n, memory_order_relaxed);
	AP_TEST_AT(AP_TP_CHAN_SEND_RECORDED);
	for (k = 0; k < n; k++) {
		uint64_t t = tokens[k];

		/* The token first: a reclaim after our death finds in the
		 * slot what this step may have queued (reclaim.c). */
		atomic_store_explicit(&e->slot[(p + k) & e->mask].token, t, memory_order_relaxed);
		if (!ap_state_send(&e->state[AP_TOKEN_INDEX(t)], e->me, AP_TOKEN_GEN(t), e->c))
			break;
		AP_TEST_AT(AP_TP_CHAN_SEND_QUEUED);
	}
	if (k < n)
		ap_fl_count_bad_release(&e->pool->fl, 1);
	if (!k) {
		atomic_store_explicit(&e->ch->step_n, 0, memory_order_relaxed);
		return -ESTALE;
	}
	/* Publish in order; the last with a full barrier, so that the look
	 * at the wake word comes after it (pool_wait.h's protocol). */
	for (uint32_t i = 0; i + 1 < k; i++)
		atomic_store_explicit(&e->slot[(p + i) & e->mask].seq, p + i + 1,
				      memory_order_release);
	atomic_store_explicit(&e->slot[(p + k - 1) & e->mask].seq, p + k, memory_order_seq_cst);
	AP_TEST_AT(AP_TP_CHAN_SEND_PUBLISHED);
	atomic_store_explicit(&e->ch->step_n, 0, memory_order_relaxed);
	e->pos = p + k;
	e->done += k;
	atomic_store_explicit(&e->ch->sent, e->done, memory_order_relaxed);
	wake_receiver(e);
	return (int)k;
}

static bool token_in(const struct asyncpool_channel *e, uint64_t t)
{
	return AP_TOKEN_GEN(t) && AP_TOKEN_INDEX(t) < e->count;
}

AP_EXPORT int asyncpool_channel_send_token(struct asyncpool_channel *e, uint64_t token)
{
	int rc;

	if (!e || !e->send || !token_in(e, token))
		return -EINVAL;
	rc = send_run(e, &token, 1);
	return rc < 0 ? rc : 0;
}

AP_EXPORT int asyncpool_channel_send_tokens(struct asyncpool_channel *e, const uint64_t *tokens,
					    uint32_t n)
{
	if (!e || !e->send || !tokens || !n)
		return -EINVAL;
	/* Bad input changes nothing: every token checked first. */
	for (uint32_t i = 0; i < n; i++)
		if (!token_in(e, tokens[i]))
			return -EINVAL;
	return send_run(e, tokens, n);
}

AP_EXPORT int asyncpool_channel_send(struct asyncpool_channel *e, struct asyncpool_lease *lease)
{
	uint64_t t;
	int rc;

	if (!e || !e->send || !lease || lease->release.ctx != e->pool ||
	    !(ap_release_is(lease, ap_pool_recycle) || ap_release_is(lease, ap_cache_recycle)))
		return -EINVAL;
	t = AP_TOKEN_MAKE(lease->generation, lease->buffer_index);
	if (!token_in(e, t))
		return -EINVAL;
	rc = send_run(e, &t, 1);
	if (rc < 0)
		return rc;
	/* The channel has it: the lease is spent (releasing it does nothing). */
	memset(lease, 0, sizeof(*lease));
	return 0;
}

/* ---- receive ---- */

/*
 * Take up to max published entries: their tokens (of the new
 * generation) into tokens[], or leases into leases[].  How many, or
 * -EAGAIN.  At most capacity slots are looked at per call, refused
 * entries included.
 */
static int recv_run(struct asyncpool_channel *e, uint64_t *tokens, struct asyncpool_lease *leases,
		    uint32_t max)
{
	uint64_t p = e->pos;
	uint32_t got = 0, bad = 0;

	for (uint32_t k = 0; got < max && k < e->cap; k++) {
		struct ap_chan_slot *s = &e->slot[p & e->mask];
		uint64_t seq = atomic_load_explicit(&s->seq, memory_order_acquire), t;
		uint32_t i, g = 0;

		if (seq != p + 1) {
			/* A slot ahead of the sender's lap is a peer's
			 * writing: counted once, and the ring waits there. */
			if (seq > p + 1 && e->bad_at != p + 1) {
				e->bad_at = p + 1;
				bad++;
			}
			break;
		}
		t = atomic_load_explicit(&s->token, memory_order_relaxed);
		i = AP_TOKEN_INDEX(t);
		/* Only a hint: the word decides. */
		if (AP_TOKEN_GEN(t) && i < e->count)
			g = ap_state_receive(&e->state[i], e->c, AP_TOKEN_GEN(t), e->me);
		AP_TEST_AT(AP_TP_CHAN_RECV_TAKEN);
		p++;
		if (!g) {
			bad++;
			continue;
		}
		if (tokens)
			tokens[got] = AP_TOKEN_MAKE(g, i);
		else
			ap_pool_lease(e->pool, i, g, e->pool->release_fn, &leases[got]);
		got++;
	}
	if (bad)
		atomic_fetch_add_explicit(&e->ch->corruptions, bad, memory_order_relaxed);
	if (p != e->pos) {
		e->pos = p;
		atomic_store_explicit(&e->ch->head, p, memory_order_release);
		if (got) {
			e->done += got;
			atomic_store_explicit(&e->ch->received, e->done, memory_order_relaxed);
		}
	}
	return got ? (int)got : -EAGAIN;
}

AP_EXPORT int asyncpool_channel_recv(struct asyncpool_channel *e, struct asyncpool_lease *out)
{
	int rc;

	if (!out)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	if (!e || e->send)
		return -EINVAL;
	rc = recv_run(e, NULL, out, 1);
	return rc < 0 ? rc : 0;
}

AP_EXPORT int asyncpool_channel_recv_tokens(struct asyncpool_channel *e, uint64_t *tokens,
					    uint32_t max)
{
	if (!e || e->send || !tokens || !max)
		return -EINVAL;
	return recv_run(e, tokens, NULL, max);
}

AP_EXPORT int asyncpool_channel_recv_leases(struct asyncpool_channel *e,
					    struct asyncpool_lease *out, uint32_t max)
{
	if (!out || !max)
		return -EINVAL;
	memset(out, 0, (size_t)max * sizeof(*out));
	if (!e || e->send)
		return -EINVAL;
	return recv_run(e, NULL, out, max);
}

/* ---- waits ---- */

/* Something to receive at the receiver's head (any thread may ask). */
static bool receivable(struct asyncpool_channel *e)
{
	return ap_chan_published(e->ch, e->mask,
				 atomic_load_explicit(&e->ch->head, memory_order_acquire));
}

AP_EXPORT int asyncpool_channel_recv_wait(struct asyncpool_channel *e,
					  struct asyncpool_lease *out, int64_t timeout_ns)
{
	struct timespec deadline, slice;
	bool interrupted = false, restart;
	int rc;

	rc = asyncpool_channel_recv(e, out);
	if (rc != -EAGAIN)
		return rc;
	if (timeout_ns == 0)
		return -ETIMEDOUT;
	if (timeout_ns > 0)
		ap_deadline_after(timeout_ns, &deadline);
	restart = ap_handlers_restart();
	for (;;) {
		uint32_t v = ap_word_announce(&e->ch->wait);

		/* The announcement before the look (pool_wait.h). */
		atomic_thread_fence(memory_order_seq_cst);
		rc = asyncpool_channel_recv(e, out);
		if (rc != -EAGAIN)
			return rc;
		if (interrupted)
			return -EINTR;
		if (timeout_ns > 0 && ap_deadline_passed(&deadline))
			return -ETIMEDOUT;
		/* Sliced: a sender that dies wakes nobody, and a peer may
		 * rewrite the word; the look after each slice is bounded. */
		if (ap_futex_wait(&e->ch->wait, v,
				  ap_sleep_until(true, timeout_ns > 0 ? &deadline : NULL, &slice),
				  true) == -EINTR && !(restart && ap_handlers_restart()))
			interrupted = true;     /* one more look, then -EINTR */
	}
}

AP_EXPORT int asyncpool_channel_prep_wait(struct asyncpool_channel *e, struct io_uring_sqe *sqe)
{
	uint32_t v;

	if (!e || e->send || !sqe)
		return -EINVAL;
	v = ap_word_announce(&e->ch->wait);
	atomic_thread_fence(memory_order_seq_cst);
	/* Something there already: a value the word cannot hold, so that
	 * the wait completes at once with -EAGAIN (asyncpool_prep_wait). */
	if (receivable(e))
		v &= ~AP_WAIT_WAITERS;
	return ap_prep_futex_wait(sqe, &e->ch->wait, v, true);
}

/*
 * The wait fd's thread: announced on the wake word, it makes the
 * eventfd readable whenever the receiver's head has something, and
 * looks again at least every slice (a dead sender wakes nobody).
 */
static void *waker_main(void *arg)
{
	struct asyncpool_channel *e = arg;
	struct timespec slice;

	for (;;) {
		uint32_t v = ap_word_announce(&e->ch->wait);

		atomic_thread_fence(memory_order_seq_cst);
		if (atomic_load_explicit(&e->wait_stop, memory_order_acquire))
			break;
		if (receivable(e))
			(void)eventfd_write(e->wait_fd, 1);
		(void)ap_futex_wait(&e->ch->wait, v, ap_sleep_until(true, NULL, &slice), true);
	}
	return NULL;
}

AP_EXPORT int asyncpool_channel_wait_fd(struct asyncpool_channel *e)
{
	sigset_t all, old;
	int rc, fd;

	if (!e || e->send)
		return -EINVAL;
	pthread_mutex_lock(&e->lock);
	if (e->wait_fd >= 0 && e->wait_pid == getpid()) {
		rc = e->wait_fd;
		goto out;
	}
	fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (fd < 0) {
		rc = errno == EMFILE || errno == ENFILE ? -errno : -ENOMEM;
		goto out;
	}
	if (e->wait_fd >= 0)            /* a parent's, before a fork */
		close(e->wait_fd);
	e->wait_fd = fd;
	e->wait_pid = getpid();
	atomic_store_explicit(&e->wait_stop, false, memory_order_relaxed);
	/* The thread takes no signals of the application's. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = -pthread_create(&e->waker, NULL, waker_main, e);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc) {
		close(fd);
		e->wait_fd = -1;
		rc = rc == -EAGAIN ? -EAGAIN : -ENOMEM;
		goto out;
	}
	rc = fd;
out:
	pthread_mutex_unlock(&e->lock);
	return rc;
}

static void wait_fd_stop(struct asyncpool_channel *e)
{
	if (e->wait_fd < 0)
		return;
	if (e->wait_pid == getpid()) {
		atomic_store_explicit(&e->wait_stop, true, memory_order_release);
		/* Change the word so that the thread cannot sleep on it, then wake it. */
		atomic_fetch_add_explicit(&e->ch->wait, 2, memory_order_seq_cst);
		ap_futex_wake_all(&e->ch->wait, true);
		pthread_join(e->waker, NULL);
	}
	close(e->wait_fd);
	e->wait_fd = -1;
}

/* ---- counters ---- */

#define CHAN_STATS_V1 (offsetof(struct asyncpool_channel_stats, reclaimed) + sizeof(uint64_t))

AP_EXPORT int asyncpool_channel_stats(const struct asyncpool *pool, uint32_t channel,
				      struct asyncpool_channel_stats *out)
{
	struct asyncpool_channel_stats s;
	struct ap_chan *ch;
	size_t given;

	if (!pool || !out)
		return -EINVAL;
	given = out->size;
	if (given < CHAN_STATS_V1)
		return -EINVAL;
	if (given > AP_STRUCT_SIZE_MAX)
		return -E2BIG;
	if (channel >= pool->chan_count)
		return -EINVAL;
	ch = ap_chan_in(pool->storage, pool->fl.count, pool->chan_count, pool->chan_cap, channel);
	memset(&s, 0, sizeof(s));
	s.size = given;
	s.channels = pool->chan_count;
	s.capacity = pool->chan_cap;
	s.depth = ap_chan_depth(ch, pool->chan_cap,
				atomic_load_explicit(&ch->head, memory_order_acquire));
	s.ends = (atomic_load_explicit(&ch->send_end, memory_order_relaxed) ?
		  ASYNCPOOL_CHANNEL_SEND : 0) |
		 (atomic_load_explicit(&ch->recv_end, memory_order_relaxed) ?
		  ASYNCPOOL_CHANNEL_RECV : 0);
	s.sent = atomic_load_explicit(&ch->sent, memory_order_relaxed);
	s.received = atomic_load_explicit(&ch->received, memory_order_relaxed);
	s.full = atomic_load_explicit(&ch->full, memory_order_relaxed);
	s.corruptions = atomic_load_explicit(&ch->corruptions, memory_order_relaxed);
	s.reclaimed = atomic_load_explicit(&ch->reclaimed, memory_order_relaxed);
	memcpy(out, &s, given < sizeof(s) ? given : sizeof(s));
	if (given > sizeof(s))
		memset((char *)out + sizeof(s), 0, given - sizeof(s));
	return 0;
}
