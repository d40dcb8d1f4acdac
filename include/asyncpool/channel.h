/* SPDX-License-Identifier: MIT */
/*
 * Channels (since 1.4): hand a buffer of a shared pool to another
 * process through the pool's own memory.  A pool created with
 * asyncpool_shared_options.channels has that many channels, each a
 * single-producer single-consumer ring of fixed capacity with one
 * sending and one receiving process at a time.  Sending moves the
 * buffer into the channel (the sender's lease and token are stale from
 * then on); receiving gives a lease of a new generation.  A dead sender's
 * sends stay deliverable.  Since 1.10 (layout 5) a dead receiver's
 * queue stays in the channel for the next receiver, and what it held
 * (received and not yet sent on or released) comes back into the channel
 * after the quarantine, flagged ASYNCPOOL_CHANNEL_REDELIVERED; a pool
 * created with ASYNCPOOL_SHARED_CHANNEL_DROP keeps the 1.4 rule (both go
 * back to the pool).  An item carries the sender's span and a 64-bit tag.
 * asyncpool_channel_open(3), libasyncpool(7) "Channels",
 * asyncpool-shared(7).
 */
#ifndef ASYNCPOOL_CHANNEL_H
#define ASYNCPOOL_CHANNEL_H

#include <stddef.h>
#include <stdint.h>

#include <asyncpool/span.h>

#ifdef __cplusplus
extern "C" {
#endif

struct asyncpool;
struct asyncpool_lease;
struct asyncpool_channel;
struct asyncpool_channel_item;
struct asyncpool_channel_entry;
struct io_uring_sqe;

/* The end of asyncpool_channel_open(). */
#define ASYNCPOOL_CHANNEL_SEND 1u
#define ASYNCPOOL_CHANNEL_RECV 2u

int  asyncpool_channel_open(struct asyncpool *pool, uint32_t channel, uint32_t end,
			    struct asyncpool_channel **out);
int  asyncpool_channel_close(struct asyncpool_channel *ch);

/* Send: 0 (or how many were queued), -EAGAIN when the channel is full. */
int  asyncpool_channel_send(struct asyncpool_channel *ch, struct asyncpool_lease *lease);
int  asyncpool_channel_send_token(struct asyncpool_channel *ch, uint64_t token);
int  asyncpool_channel_send_tokens(struct asyncpool_channel *ch, const uint64_t *tokens,
				   uint32_t n);

/* Receive: 0 (or how many), -EAGAIN when the channel is empty. */
int  asyncpool_channel_recv(struct asyncpool_channel *ch, struct asyncpool_lease *out);
int  asyncpool_channel_recv_tokens(struct asyncpool_channel *ch, uint64_t *tokens,
				   uint32_t max);
int  asyncpool_channel_recv_leases(struct asyncpool_channel *ch, struct asyncpool_lease *out,
				   uint32_t max);
int  asyncpool_channel_recv_wait(struct asyncpool_channel *ch, struct asyncpool_lease *out,
				 int64_t timeout_ns);
int  asyncpool_channel_prep_wait(struct asyncpool_channel *ch, struct io_uring_sqe *sqe);
int  asyncpool_channel_wait_fd(struct asyncpool_channel *ch);

/* ---- Since 1.10 ---- */

/* flags of an item or entry: it was held by a receiver that died. */
#define ASYNCPOOL_CHANNEL_REDELIVERED 1u

/*
 * An item: the lease received (its span the sender's), the sender's tag
 * and flags.
 */
struct asyncpool_channel_item {
	struct asyncpool_lease lease;
	uint64_t               tag;
	uint32_t               flags;           /* ASYNCPOOL_CHANNEL_REDELIVERED */
	uint32_t               reserved;        /* zero */
};

/*
 * The token form of an item: the token of the lease, the span inside
 * its buffer (offset and length, at most the buffer size; offset 0 and
 * length 0 on a send: the whole buffer), the tag and flags.
 */
struct asyncpool_channel_entry {
	uint64_t token;
	uint64_t tag;
	uint32_t offset;
	uint32_t length;
	uint32_t flags;                         /* ASYNCPOOL_CHANNEL_REDELIVERED */
	uint32_t reserved;                      /* zero */
};

/* Send with the lease's span and a tag: 0, -EAGAIN when full. */
int  asyncpool_channel_send_item(struct asyncpool_channel *ch, struct asyncpool_lease *lease,
				 uint64_t tag);
/* The same, waiting for room up to timeout_ns (-1: for ever, 0: no wait). */
int  asyncpool_channel_send_wait(struct asyncpool_channel *ch, struct asyncpool_lease *lease,
				 uint64_t tag, int64_t timeout_ns);
/* Token form: how many were queued (a prefix), -EAGAIN when full. */
int  asyncpool_channel_send_entries(struct asyncpool_channel *ch,
				    const struct asyncpool_channel_entry *entries, uint32_t n);
/* An io_uring FUTEX_WAIT that completes when the channel may have room. */
int  asyncpool_channel_prep_send_wait(struct asyncpool_channel *ch, struct io_uring_sqe *sqe);

/* Receive items (redelivered ones first): how many, -EAGAIN when empty. */
int  asyncpool_channel_recv_items(struct asyncpool_channel *ch,
				  struct asyncpool_channel_item *items, uint32_t max);
int  asyncpool_channel_recv_item_wait(struct asyncpool_channel *ch,
				      struct asyncpool_channel_item *item, int64_t timeout_ns);
int  asyncpool_channel_recv_entries(struct asyncpool_channel *ch,
				    struct asyncpool_channel_entry *entries, uint32_t max);

/*
 * The other end of ch (of the pool's channel for asyncpool_channel_end()):
 * free, held by a live process, or held by one that died (the reclaim
 * frees it).  >= 0 one of these, or -errno.  A wait of one end whose
 * other end died returns -EPIPE.
 */
#define ASYNCPOOL_CHANNEL_END_FREE 0
#define ASYNCPOOL_CHANNEL_END_LIVE 1
#define ASYNCPOOL_CHANNEL_END_DEAD 2
int  asyncpool_channel_peer(const struct asyncpool_channel *ch);
int  asyncpool_channel_end(const struct asyncpool *pool, uint32_t channel, uint32_t end);

/*
 * Many senders to one receiver (1.10): wait on the receiving ends of up
 * to 64 channels at once; an item of any, the index of its end, or -errno.
 */
int  asyncpool_channel_recv_any(struct asyncpool_channel *const *ends, uint32_t n,
				struct asyncpool_channel_item *item, int64_t timeout_ns);

/*
 * Counters of a channel.  Set size to sizeof(struct
 * asyncpool_channel_stats) before the call.
 */
struct asyncpool_channel_stats {
	size_t   size;             /* sizeof(struct asyncpool_channel_stats) */
	uint32_t channels;         /* channels of the pool */
	uint32_t capacity;         /* entries per channel */
	uint32_t depth;            /* entries queued now */
	uint32_t ends;             /* ASYNCPOOL_CHANNEL_SEND | _RECV: the ends taken */
	uint64_t sent;             /* buffers sent */
	uint64_t received;         /* buffers received */
	uint64_t full;             /* sends that found the channel full */
	uint64_t corruptions;      /* entries refused: their word was not in this channel */
	uint64_t reclaimed;        /* buffers a reclaim took out of the channel */
	/* Since 1.10 (layout 5; 0 before). */
	uint64_t redelivered;      /* held items a reclaim put back in the channel */
	uint64_t bad_spans;        /* entries refused: their span lay outside the buffer */
	uint32_t queued_redelivered; /* of depth: redelivered items queued now */
	uint32_t drop;             /* 1: the pool drops a dead receiver's items */
};
int  asyncpool_channel_stats(const struct asyncpool *pool, uint32_t channel,
			     struct asyncpool_channel_stats *out);

#ifdef __cplusplus
}
#endif

#endif /* ASYNCPOOL_CHANNEL_H */
