/* SPDX-License-Identifier: MIT */
/*
 * Channels (since 1.4): hand a buffer of a shared pool to another
 * process through the pool's own memory.  A pool created with
 * asyncpool_shared_options.channels has that many channels, each a
 * single-producer single-consumer ring of fixed capacity with one
 * sending and one receiving process at a time.  Sending moves the
 * buffer into the channel (the sender's lease and token are stale from
 * then on); receiving gives a lease of a new generation.  A dead sender's
 * sends stay deliverable; a dead receiver's queue goes back to the pool.
 * asyncpool_channel_open(3), asyncpool-shared(7).
 */
#ifndef ASYNCPOOL_CHANNEL_H
#define ASYNCPOOL_CHANNEL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct asyncpool;
struct asyncpool_lease;
struct asyncpool_channel;
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
};
int  asyncpool_channel_stats(const struct asyncpool *pool, uint32_t channel,
			     struct asyncpool_channel_stats *out);

#ifdef __cplusplus
}
#endif

#endif /* ASYNCPOOL_CHANNEL_H */
