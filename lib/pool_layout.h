/* SPDX-License-Identifier: MIT */
/*
 * The memory layout of a pool's freelist, version 3, or 5 for a shared
 * pool with channels (channel.c; 4 was 1.4-1.9's, which this build
 * refuses: its delivery rules differ).  A local pool keeps
 * it on the heap, a shared pool in memory that several processes map, so
 * it holds no pointers: only indices and offsets from its start.
 * man/man7/asyncpool-shared.7 documents it for other implementations.
 *
 *   0    header            (2 cache lines; magic published last)
 *   128  head line         head word, the wait and flush words
 *   192  counters line     statistics
 *   256  state[]           uint64 per buffer: generation, holder, kind
 *   ...  link[]            uint32 per buffer: the next free buffer
 *   ...  depth[]           uint32 per buffer: free buffers from it to the end
 *   ...  attach[]          AP_ATTACH_SLOTS x AP_ATTACH_SIZE bytes  shared only
 *   ...  chan[]            channel_count x the stride of a channel  version 5 only
 *   ...  from[]            32 bytes per buffer: the channel a lease came from  version 5 only
 *
 * A pool created without channels is version 3, byte for byte as 1.3
 * wrote it, so that 1.3 opens it; one with channels is version 5 (since
 * 1.10), which 1.3 to 1.9 refuse (-EPROTONOSUPPORT), and which differs
 * from 3 only by the channel area, from[], and the header fields that
 * describe them.  Version 4 (1.4 to 1.9) had 16-byte slots, no
 * redelivery ring and no from[]; this build refuses it.
 *
 * Version 1 had uint32 words (a link or a state, no generation, no
 * holder) and a reserved owners[] array; version 2 kept the link in the
 * state word beside a 23-bit generation, which a buffer cycled as fast
 * as the library goes wrapped in under a second.  Both are refused
 * (-EPROTONOSUPPORT).
 */
#ifndef ASYNCPOOL_POOL_LAYOUT_H
#define ASYNCPOOL_POOL_LAYOUT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#define AP_POOL_MAGIC   0x4c4f5041u     /* "APOL" in little-endian memory */
#define AP_POOL_VERSION 3u
#define AP_POOL_VERSION_CHANNELS 5u     /* a shared pool with channels (1.10) */
#define AP_ATTACH_SLOTS 64u
#define AP_ATTACH_SIZE  832u            /* one struct ap_attach */

/* A link beyond any index: the end of the list; an empty head. */
#define AP_FL_END    0xffffffffu

/*
 * The state word of a buffer (buffer_state.h has the transitions):
 *
 *   bits  0-31  generation: changes on every acquire, never 0 once leased
 *   bits 32-54  zero (a word with any of them set matches no transition)
 *   bits 55-61  holder: 0 (a local pool, raw shared memory, nobody), or
 *               1 + the attachment slot that leased, cached or pushed it
 *   bits 62-63  kind: FREE (on the list, or being pushed or popped),
 *               LEASED, CACHED (in a per-thread cache of the holder),
 *               QUEUED (version 5: in channel c, bits 32-47, holder 0,
 *               the generation of the lease that was sent)
 *
 * The generation is as wide as the one of a lease and of a token: all
 * 32 bits.  ap_gen_next() skips 0, so a buffer comes back to a
 * generation after exactly 2^32 - 1 acquires.
 *
 * link[i] is the next free buffer after i (or AP_FL_END) while i is on
 * the list, written by its pusher before the CAS on the head; kept when
 * the buffer is taken, so that a popped chain stays walkable.  Only the
 * link of a buffer whose word is FREE is a link: a walker reads the word
 * first and re-reads the head when it meets another kind.  A pop reads
 * link[head] between its load of the head and its CAS: the head's tag
 * changes with every push and pop, so a CAS that succeeds proves that
 * nothing was pushed or popped since, and the link it read was the one
 * the head's pusher wrote.
 *
 * depth[i] of a buffer on the list is the number of buffers from it to
 * the end of the list, itself included: a pusher writes it (one plus
 * the depth of the head it links to) before its CAS on the head, so the
 * head's depth is the free count, read in O(1) with no counter that
 * every acquire and release would have to update atomically.  Only
 * asyncpool_available() reads it; nothing trusts it.
 *
 * A leased buffer's link[] and depth[] mean nothing to the list, so an
 * adoption (buffer_state.h, ap_state_adopt) records there the
 * generation it fenced, while its adopter holds the buffer: link[i]
 * AP_FL_FENCED (no index and not the end, so a walker that reads it
 * re-reads the head, as every version 3 walker does), depth[i] the
 * giver's generation.  A release of that generation refused while the
 * word is still LEASED at the next one is counted in fenced_releases,
 * not bad_releases (freelist.c, ap_fl_count_refused); the push that
 * gives the buffer back writes both again.
 */
#define AP_FL_FENCED 0xfffffffeu
#define AP_K_FREE    0u
#define AP_K_LEASED  1u
#define AP_K_CACHED  2u
#define AP_K_QUEUED  3u                 /* in a channel (version 5); never in version 3 */

#define AP_GEN_BITS    32u
#define AP_HOLDER_MASK 0x7fu

#define AP_W_GEN(w)    ((uint32_t)(w))
#define AP_W_HOLDER(w) ((uint32_t)((w) >> 55) & AP_HOLDER_MASK)
#define AP_W_KIND(w)   ((uint32_t)((w) >> 62))
#define AP_W_MAKE(kind, holder, gen)                                        \
	(((uint64_t)(kind) << 62) | ((uint64_t)((holder) & AP_HOLDER_MASK) << 55) | \
	 (uint32_t)(gen))

/*
 * A buffer in channel c, sent as the lease of generation g: no holder
 * (no process's death reclaims it: the channel's rules do, channel.c).
 */
#define AP_W_CHAN(w)   ((uint32_t)((w) >> 32) & 0xffffu)
static inline uint64_t ap_queued_word(uint32_t c, uint32_t g)
{
	return ((uint64_t)AP_K_QUEUED << 62) | ((uint64_t)(c & 0xffffu) << 32) | g;
}

/*
 * The generation after g: never 0, the "no generation" of a lease.  The
 * period is 2^32 - 1: a stale lease or token is refused unless its
 * buffer was leased again a multiple of 2^32 - 1 times since.
 *
 * Exactly once per lease: a word on the freelist holds the generation
 * of the last lease (a pop takes the next), a cached word the one of
 * the next lease (the cache hands it out as it is).  So a cached word
 * that goes back to the freelist (a flush, a reclaim of a dead
 * process's cache) steps back with ap_gen_prev(), and so does a chain
 * pop that gives back what it marked: a generation that was never
 * leased is not spent.
 */
static inline uint32_t ap_gen_next(uint32_t g)
{
	g++;
	return g ? g : 1;
}

static inline uint32_t ap_gen_prev(uint32_t g)
{
	return g > 1 ? g - 1 : 0xffffffffu;
}

/* The head word: index in the low 32 bits, ABA tag in the high 32. */
#define AP_HEAD_INDEX(h)      ((uint32_t)(h))
#define AP_HEAD_TAG(h)        ((uint32_t)((h) >> 32))
#define AP_HEAD_MAKE(idx, tag) (((uint64_t)(uint32_t)(tag) << 32) | (uint32_t)(idx))

struct ap_pool_header {
	_Atomic uint32_t magic;         /* AP_POOL_MAGIC once initialised */
	uint32_t version;               /* AP_POOL_VERSION */
	uint32_t header_size;           /* sizeof(struct ap_pool_header) */
	uint32_t flags;                 /* AP_POOL_F_* */
	uint64_t storage_size;          /* bytes of the layout */
	uint64_t buffer_size;
	uint32_t buffer_count;
	uint32_t attach_slots;          /* 0 for local pools */
	uint64_t head_offset;
	uint64_t counters_offset;
	uint64_t next_offset;           /* state[] */
	uint64_t depth_offset;          /* depth[] */
	uint64_t attach_offset;         /* 0 for local pools */
	uint64_t link_offset;           /* link[] (version 3) */
	uint32_t channel_count;         /* version 5: channels, else 0 */
	uint32_t channel_capacity;      /* version 5: entries per channel, a power of two, else 0 */
	uint64_t channel_offset;        /* version 5: chan[], else 0 */
	uint64_t from_offset;           /* version 5: from[], else 0 */
	uint64_t reserved[2];           /* zero */
};

#define AP_POOL_F_SHARED    1u
#define AP_POOL_F_CHAN_DROP 2u          /* version 5: a dead receiver's items go to the freelist */

/*
 * The head line.  Beside the head word, the two words of waiting
 * (wait_word.h): a release that just CASed the head pays one load on a
 * line it already owns.  Layouts made before they existed have zeros
 * there, which means "nobody waits, no flush asked".
 */
struct ap_pool_head {
	_Atomic uint64_t head;
	_Atomic uint32_t wait;          /* futex word: bit 0 someone waits, 1-31 a sequence */
	_Atomic uint32_t flush;         /* flush requests of cached buffers, a generation */
	uint64_t pad[6];                /* zero */
};

#define AP_WAIT_WAITERS 1u

struct ap_pool_counters {
	_Atomic uint64_t bad_releases;
	_Atomic uint64_t corruptions;
	_Atomic uint64_t empty;
	_Atomic uint64_t reclaimer;     /* who reclaims, 0 nobody (reclaim.c) */
	/* Since 1.4: refused releases of a lease an adoption fenced (AP_FL_FENCED). */
	_Atomic uint64_t fenced_releases;
	uint64_t pad[3];
};

_Static_assert(sizeof(struct ap_pool_header) == 128, "header is two cache lines");
_Static_assert(sizeof(struct ap_pool_head) == 64, "head line is one cache line");
_Static_assert(sizeof(struct ap_pool_counters) == 64, "counters are one cache line");

#define AP_OFF_HEAD     128u
#define AP_OFF_COUNTERS 192u
#define AP_OFF_NEXT     256u

/*
 * An attachment record: one per pool handle of a process attached to a
 * shared pool.  Liveness is not in here: it is an OFD lock on byte
 * AP_LOCK_BASE + slot of the pool's file, which the kernel drops when
 * the process dies (attach.c).  life: AP_ATT_* in the low 8 bits, an
 * epoch above, bumped by every attach so that a reused slot is never
 * taken for its previous owner.
 *
 * The in-flight steps: a pop writes the buffers (idx[]) and the words it
 * saw (word[]) into a step of its attachment before its CAS on the head,
 * and clears
 * it after it marked what it took, like a robust futex's
 * list_op_pending: a survivor reads the steps of a dead process to
 * finish its pops.  The threads of a process each take a free step
 * for the length of one pop, chosen in the process's own memory
 * (freelist.c, step_begin): busy is written 0 and never trusted.
 */
#define AP_ATT_FREE 0u
#define AP_ATT_LIVE 1u
#define AP_ATT_DEAD 2u
#define AP_ATT_STATE(l) ((uint32_t)(l) & 0xffu)
#define AP_ATT_EPOCH(l) ((l) >> 8)
#define AP_ATT_MAKE(state, epoch) (((uint64_t)(epoch) << 8) | (state))

#define AP_STEP_WORDS 14u               /* buffers a shared pop takes per CAS, at most */
#define AP_STEPS      4u                /* steps per attachment */

struct ap_step {
	_Atomic uint32_t busy;          /* a thread is using this step */
	_Atomic uint32_t count;         /* 0: nothing in flight; else entries below */
	_Atomic uint32_t idx[AP_STEP_WORDS];  /* the buffers popped, in list order */
	_Atomic uint64_t word[AP_STEP_WORDS]; /* the word the pop saw of each */
	uint64_t pad[2];                /* zero */
};

/*
 * Where the AF_XDP frames of an attachment are (since 1.12, xdp.c), in
 * what was the record's padding: zero since 1.1 and read by no earlier
 * library, so layout 3 and 5 keep their version.  Written only by the
 * attachment's process, at the points where its sockets move frames (a
 * refill, a receive, a send, a reap, a close; a batch each), by relaxed
 * adds of what changed (its sockets run under locks of their own).
 * epoch: the low 32 bits of the record's epoch when the process took
 * it (0: never); a reader takes the rest only while it equals the
 * record's, and trusts none of it (asyncpool inspect: bounded, and
 * "unknown" unless it adds up to what the attachment holds).
 * Display only: the library never reads it.
 */
#define AP_XS_FILL       0u             /* in fill rings, not taken by the kernel */
#define AP_XS_KERNEL_RX  1u             /* taken by the kernel, not in an rx ring */
#define AP_XS_RX         2u             /* in rx rings, not received */
#define AP_XS_TX         3u             /* in tx rings, not taken by the kernel */
#define AP_XS_KERNEL_TX  4u             /* being sent by the kernel */
#define AP_XS_COMPLETION 5u             /* in completion rings, not reaped */
#define AP_XS_PLACES     6u

struct ap_xdp_sum {
	_Atomic uint32_t epoch;
	_Atomic uint32_t sockets;       /* its AF_XDP sockets on this pool */
	_Atomic uint32_t place[AP_XS_PLACES]; /* frames, by AP_XS_* */
};

struct ap_attach {
	_Atomic uint64_t life;          /* state and epoch */
	_Atomic uint64_t dead_since;    /* CLOCK_MONOTONIC ns, when found dead */
	_Atomic uint32_t pid;           /* for display only: not trusted */
	uint32_t pad0;
	_Atomic uint64_t pidns;         /* the PID namespace pid is of (ap_pid_ns), 0 unknown */
	struct ap_xdp_sum xdp;          /* since 1.12; zero before */
	struct ap_step step[AP_STEPS];
};

_Static_assert(sizeof(struct ap_step) == 192, "a step is three cache lines");
_Static_assert(offsetof(struct ap_step, word) == 64, "the words start the second line");
_Static_assert(sizeof(struct ap_attach) == AP_ATTACH_SIZE, "attachment size");
_Static_assert(offsetof(struct ap_attach, xdp) == 32 && sizeof(struct ap_xdp_sum) == 32,
	       "the AF_XDP summary takes the 32 bytes of padding before the steps");

/*
 * The PID namespace of this process, for the display of attachment
 * records: the inode number of /proc/self/ns/pid, 0 if unknown.  A
 * record's pid means something to a reader only in the same namespace.
 */
static inline uint64_t ap_pid_ns(void)
{
	struct stat st;

	return stat("/proc/self/ns/pid", &st) == 0 ? (uint64_t)st.st_ino : 0;
}

/* OFD lock bytes, far past any data (locks need none). */
#define AP_LOCK_BASE    ((uint64_t)1 << 40)
#define AP_LOCK_RECLAIM (AP_LOCK_BASE + AP_ATTACH_SLOTS)

/*
 * A channel (version 5, channel.c): a single-producer single-consumer
 * ring of items, its two ends, its step record and its counters, on
 * lines of their own, then capacity slots of 32 bytes (the ring), then
 * capacity slots more (the redelivery ring, whose producer is the
 * reclaim, reclaim.c).  The sender writes a slot's token, tag and span,
 * then its seq (the position + 1: it is published); the receiver polls
 * the seq of the slot at its position, so it reads no index of the
 * sender's, and writes head, which the sender reads only when the ring
 * looks full by its own copy.  An item's metadata rides in its slot's
 * line.  Every field is writable by every holder of the fd: channel.c
 * trusts none.
 */
#define AP_CHAN_MAX     1024u           /* channels per pool */
#define AP_CHAN_CAP_MAX 65536u          /* entries per channel */
#define AP_CHAN_LINES   5u              /* control lines before the slots */

struct ap_chan_slot {
	_Atomic uint64_t seq;           /* position + 1 once published */
	_Atomic uint64_t token;         /* generation << 32 | index */
	_Atomic uint64_t tag;           /* the sender's */
	_Atomic uint64_t span;          /* length << 32 | offset, inside the buffer */
};

#define AP_SPAN_MAKE(off, len) (((uint64_t)(uint32_t)(len) << 32) | (uint32_t)(off))
#define AP_SPAN_OFF(s)         ((uint32_t)(s))
#define AP_SPAN_LEN(s)         ((uint32_t)((s) >> 32))

/*
 * from[i] (version 5): while buffer i is LEASED at generation g by the
 * receiver of channel c that took it, chan_gen is (c + 1) << 32 | g,
 * and tag and span are the item's: what a reclaim puts back in channel
 * c if that receiver dies holding it (reclaim.c).  The receiver writes
 * it before its CAS on the word (chan_gen last), so that a receiver
 * that dies after the CAS left it whole.  Meaningful only while the
 * word is LEASED at g (like the fenced generation): a release, a send,
 * an adoption or a new lease changes the word, and a reclaim that reads
 * a chan_gen of another generation gives the buffer to the freelist.
 */
struct ap_chan_from {
	_Atomic uint64_t chan_gen;
	_Atomic uint64_t tag;
	_Atomic uint64_t span;
	uint64_t pad;
};
#define AP_FROM_MAKE(c, g) (((uint64_t)((c) + 1) << 32) | (uint32_t)(g))

struct ap_chan {
	/* The ends: 0 free, else epoch << 8 | attachment slot + 1. */
	_Atomic uint64_t send_end;
	_Atomic uint64_t recv_end;
	uint64_t pad0[6];
	/* The sender's line: the send in flight (positions step_pos to
	 * step_pos + step_n - 1, their tokens in their slots), its counts. */
	_Atomic uint64_t step_pos;
	_Atomic uint32_t step_n;        /* 0: no send in flight */
	uint32_t pad1;
	_Atomic uint64_t sent;
	_Atomic uint64_t full;          /* sends that found the channel full */
	uint64_t pad1b[4];
	/* The receiver's line. */
	_Atomic uint64_t head;          /* the next position to receive */
	_Atomic uint64_t received;
	_Atomic uint64_t rhead;         /* the next redelivered position to receive */
	_Atomic uint32_t room;          /* the sender's wake word: bit 0 it waits for room */
	uint32_t pad2a;
	uint64_t pad2[4];
	/* The wake word: bit 0 the receiver waits, 1-31 a sequence (pool_wait.h). */
	_Atomic uint32_t wait;
	uint32_t pad3[15];
	/* Counted by whoever sees it, rarely. */
	_Atomic uint64_t corruptions;   /* entries the word refused */
	_Atomic uint64_t reclaimed;     /* buffers a reclaim took out of the channel */
	_Atomic uint64_t redelivered;   /* held items a reclaim put in the redelivery ring */
	_Atomic uint64_t bad_spans;     /* entries refused: a span outside the buffer */
	uint64_t pad4[4];
};

_Static_assert(sizeof(struct ap_chan) == AP_CHAN_LINES * 64, "a channel's control lines");
_Static_assert(offsetof(struct ap_chan, step_pos) == 64, "the sender's line");
_Static_assert(offsetof(struct ap_chan, head) == 128, "the receiver's line");
_Static_assert(offsetof(struct ap_chan, wait) == 192, "the wake line");
_Static_assert(offsetof(struct ap_chan, corruptions) == 256, "the counters' line");
_Static_assert(sizeof(struct ap_chan_slot) == 32, "two slots a line");
_Static_assert(sizeof(struct ap_chan_from) == 32, "two from[] a line");

/* Bytes of one channel of capacity entries (two rings), a multiple of 64. */
static inline uint64_t ap_chan_stride(uint32_t capacity)
{
	return sizeof(struct ap_chan) +
	       2 * (((uint64_t)capacity * sizeof(struct ap_chan_slot) + 63) & ~(uint64_t)63);
}

/* The largest buffer_count of a layout (ASYNCPOOL_MAX_BUFFERS). */
#define AP_MAX_COUNT 0x7ffffffeu

/*
 * The bundle of asyncpool_shared_create() puts the buffers at the first
 * multiple of this after the layout: fixed, not this machine's page size.
 */
#define AP_SHARED_BUFFER_ALIGN 4096u

/*
 * Where each part of a layout of count buffers lives.  The one place
 * that computes it: the library, its checks and `asyncpool inspect`
 * all call this.
 */
struct ap_layout_geometry {
	uint64_t per;                   /* bytes of state[] */
	uint64_t next_offset;           /* state[] */
	uint64_t link_per;              /* bytes of link[] */
	uint64_t link_offset;           /* link[] */
	uint64_t depth_per;             /* bytes of depth[] */
	uint64_t depth_offset;          /* depth[] */
	uint64_t attach_offset;         /* 0 for local pools */
	uint64_t chan_offset;           /* chan[]: 0 without channels */
	uint64_t chan_stride;           /* bytes per channel: 0 without */
	uint64_t from_offset;           /* from[]: 0 without channels */
	uint64_t storage_size;          /* bytes of the whole layout */
};

/* Whether channels x capacity is a channel area a layout may have (0 x 0: none). */
static inline bool ap_channels_ok(uint32_t channels, uint32_t capacity)
{
	if (!channels)
		return !capacity;
	return channels <= AP_CHAN_MAX && capacity && capacity <= AP_CHAN_CAP_MAX &&
	       !(capacity & (capacity - 1));
}

/*
 * false for a count of 0 or beyond AP_MAX_COUNT, or channels that
 * ap_channels_ok() refuses, or channels in a local pool.  channels 0:
 * version 3 (capacity 0 too).
 */
static inline bool ap_layout_geometry_ch(uint32_t count, bool shared, uint32_t channels,
					 uint32_t capacity, struct ap_layout_geometry *g)
{
	bool ok = count != 0 && count <= AP_MAX_COUNT && ap_channels_ok(channels, capacity) &&
		  (shared || !channels);

	if (!ok)
		channels = capacity = 0;
	g->per = ((uint64_t)count * sizeof(uint64_t) + 63) & ~(uint64_t)63;
	g->next_offset = AP_OFF_NEXT;
	g->link_per = ((uint64_t)count * sizeof(uint32_t) + 63) & ~(uint64_t)63;
	g->link_offset = AP_OFF_NEXT + g->per;
	g->depth_per = g->link_per;
	g->depth_offset = g->link_offset + g->link_per;
	g->attach_offset = shared ? g->depth_offset + g->depth_per : 0;
	g->storage_size = g->depth_offset + g->depth_per +
			  (shared ? (uint64_t)AP_ATTACH_SLOTS * AP_ATTACH_SIZE : 0);
	g->chan_offset = channels ? g->storage_size : 0;
	g->chan_stride = channels ? ap_chan_stride(capacity) : 0;
	g->storage_size += (uint64_t)channels * g->chan_stride;
	g->from_offset = channels ? g->storage_size : 0;
	if (channels)
		g->storage_size += (uint64_t)count * sizeof(struct ap_chan_from);
	return ok;
}

/* A layout of version 3: no channels. */
static inline bool ap_layout_geometry(uint32_t count, bool shared, struct ap_layout_geometry *g)
{
	return ap_layout_geometry_ch(count, shared, 0, 0, g);
}

/*
 * The shared bundle: the layout, then count x buffer_size bytes of
 * buffers at *buffers_offset; *total bytes in all.  false when the
 * count is out of range or the sizes overflow 64 bits.
 */
static inline bool ap_bundle_geometry(uint32_t count, uint64_t buffer_size, uint32_t channels,
				      uint32_t capacity, uint64_t *buffers_offset, uint64_t *total)
{
	struct ap_layout_geometry g;
	uint64_t bytes;

	if (!ap_layout_geometry_ch(count, true, channels, capacity, &g))
		return false;
	*buffers_offset = (g.storage_size + AP_SHARED_BUFFER_ALIGN - 1) &
			  ~(uint64_t)(AP_SHARED_BUFFER_ALIGN - 1);
	return !__builtin_mul_overflow(buffer_size, (uint64_t)count, &bytes) &&
	       !__builtin_add_overflow(*buffers_offset, bytes, total);
}

#endif /* ASYNCPOOL_POOL_LAYOUT_H */
