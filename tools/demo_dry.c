/* SPDX-License-Identifier: MIT */
/*
 * asyncpool demo --dry: multishot receives that survive a recv ring
 * running dry (issue 12, item 5).
 *
 * DRY_STREAMS TCP connections over loopback, each fed by its own sender
 * thread DRY_SEND bytes at a time, are received on one ring, a multishot
 * recv per connection, all selecting from one provided-buffer ring of
 * DRY_BUFS buffers: one round of sends needs DRY_STREAMS * DRY_SEND /
 * DRY_BUF_SIZE buffers, ten times the ring.  The receiver checks every
 * byte and hands each lease to a release thread that gives it back
 * DRY_HOLD_NS after it arrived.  So the ring runs dry again and again,
 * and each time a multishot recv ends with -ENOBUFS.  The receiver then
 * waits for the region to hold buffers again, with
 * asyncpool_region_prep_wait() (an IORING_OP_FUTEX_WAIT on the same
 * ring, so the other streams' completions keep coming meanwhile) or,
 * where the kernel has no futex opcodes, asyncpool_region_wait(), and
 * re-arms every stream that ran dry.  It fails unless every stream
 * reaches its end with every byte right.
 */
#include "config.h"

#ifdef HAVE_LIBURING
#include <errno.h>
#include <liburing.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <asyncpool.h>
#include "net.h"
#include "pattern.h"
#include "tool.h"

#define DRY_STREAMS 8u
#define DRY_BUFS 8u                             /* the provided-buffer ring */
#define DRY_BUF_SIZE 4096u
#define DRY_SEND (10u * DRY_BUF_SIZE)           /* one send() of a stream */
#define DRY_HOLD_NS 200000ull                   /* a lease is held this long */
#define DRY_STUCK_NS 10000000000ll              /* no byte for 10 s: a stream is lost */
#define UD_WAKE DRY_STREAMS                     /* user_data of the futex wait */
#define UD_NOP (DRY_STREAMS + 1)

struct dry_stream {
	pthread_t sender;
	int tx, rx;
	uint64_t base;          /* stream s carries the pattern from s << 40 */
	size_t bytes;           /* to send */
	int send_err;
	/* the receiver's */
	size_t got, bad;
	bool eof, dry_ended;    /* ended by -ENOBUFS, not re-armed yet */
};

/* The release thread: leases in arrival order, each with its due time. */
struct dry_releaser {
	pthread_t tid;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct { struct asyncpool_lease l; uint64_t due; } q[DRY_BUFS];
	unsigned head, count;
	bool stop;
};

static void *dry_send(void *arg)
{
	struct dry_stream *s = arg;
	unsigned char *buf = malloc(DRY_SEND);
	size_t pos = 0;

	if (!buf) {
		s->send_err = -ENOMEM;
		return NULL;
	}
	while (pos < s->bytes && !s->send_err) {
		size_t len = s->bytes - pos < DRY_SEND ? s->bytes - pos : DRY_SEND, off = 0;

		pattern_fill(buf, s->base + pos, len);
		while (off < len) {
			ssize_t w = send(s->tx, buf + off, len - off, MSG_NOSIGNAL);

			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0) {
				s->send_err = w < 0 ? -errno : -EIO;
				break;
			}
			off += (size_t)w;
		}
		pos += len;
	}
	shutdown(s->tx, SHUT_WR);       /* the receiver sees the end */
	free(buf);
	return NULL;
}

/* The oldest lease handed over and its due time; false once stopped and empty. */
static bool dry_oldest(struct dry_releaser *rel, struct asyncpool_lease *l, struct timespec *due)
{
	bool any;

	pthread_mutex_lock(&rel->lock);
	while (!rel->count && !rel->stop)
		pthread_cond_wait(&rel->cond, &rel->lock);
	any = rel->count != 0;
	if (any) {
		*l = rel->q[rel->head].l;
		due->tv_sec = (time_t)(rel->q[rel->head].due / 1000000000u);
		due->tv_nsec = (long)(rel->q[rel->head].due % 1000000000u);
	}
	pthread_mutex_unlock(&rel->lock);
	return any;
}

static void *dry_release(void *arg)
{
	struct dry_releaser *rel = arg;
	struct asyncpool_lease l;
	struct timespec due;

	while (dry_oldest(rel, &l, &due)) {
		while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &due, NULL) == EINTR)
			;
		asyncpool_lease_release(&l);    /* back in the ring: wakes the receiver */
		pthread_mutex_lock(&rel->lock);
		rel->head = (rel->head + 1) % DRY_BUFS;
		rel->count--;
		pthread_mutex_unlock(&rel->lock);
	}
	return NULL;
}

/* At most DRY_BUFS leases exist, so the queue never overflows. */
static void dry_hand_over(struct dry_releaser *rel, const struct asyncpool_lease *l)
{
	pthread_mutex_lock(&rel->lock);
	rel->q[(rel->head + rel->count) % DRY_BUFS].l = *l;
	rel->q[(rel->head + rel->count) % DRY_BUFS].due = tool_now_ns() + DRY_HOLD_NS;
	rel->count++;
	pthread_cond_broadcast(&rel->cond);
	pthread_mutex_unlock(&rel->lock);
}

/* Stop the release thread once it has given back every lease. */
static void dry_release_stop(struct dry_releaser *rel)
{
	pthread_mutex_lock(&rel->lock);
	rel->stop = true;
	pthread_cond_broadcast(&rel->cond);
	pthread_mutex_unlock(&rel->lock);
	pthread_join(rel->tid, NULL);
}

static void dry_arm(struct io_uring *ring, struct dry_stream *s, unsigned idx, int group)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(ring);

	io_uring_prep_recv_multishot(sqe, s->rx, NULL, 0, 0);
	sqe->flags |= IOSQE_BUFFER_SELECT;
	sqe->buf_group = (uint16_t)group;
	sqe->user_data = idx;
	s->dry_ended = false;
}

struct dry_run {
	struct io_uring ring;
	struct asyncpool_region *r;
	struct dry_stream st[DRY_STREAMS];
	struct dry_releaser rel;
	int group;
	bool on_ring;           /* waits with IORING_OP_FUTEX_WAIT */
	bool waiting;           /* a futex wait is on the ring */
	unsigned live;          /* streams before their end */
	uint64_t progress_ns;   /* when a byte or an end last came */
	unsigned long nobufs, rearms, other_ends;
	int err;
};

/* Re-arm every stream that ran dry: the ring holds buffers again. */
static void dry_rearm_all(struct dry_run *d)
{
	for (unsigned i = 0; i < DRY_STREAMS; i++)
		if (d->st[i].dry_ended) {
			dry_arm(&d->ring, &d->st[i], i, d->group);
			d->rearms++;
		}
}

/* One completion of stream i. */
static void dry_completion(struct dry_run *d, unsigned i, const struct io_uring_cqe *cqe)
{
	struct dry_stream *s = &d->st[i];
	struct asyncpool_lease l;
	int rc;

	if (cqe->res > 0) {
		rc = asyncpool_region_recv_lease(d->r, cqe, &l);
		if (rc) {
			d->err = rc;
			return;
		}
		s->bad += pattern_check(asyncpool_span_ptr(l.span), s->base + s->got, l.span.length);
		s->got += l.span.length;
		dry_hand_over(&d->rel, &l);
		d->progress_ns = tool_now_ns();
	} else if (cqe->res == 0) {
		s->eof = true;
		d->progress_ns = tool_now_ns();
		d->live--;
		return;
	} else if (cqe->res == -ENOBUFS) {
		/* Counted in the region's dry statistic; no lease. */
		if (asyncpool_region_recv_lease(d->r, cqe, &l) != -ENOBUFS) {
			d->err = -EPROTO;
			return;
		}
		d->nobufs++;
	} else {
		d->err = cqe->res;
		return;
	}
	if (cqe->flags & IORING_CQE_F_MORE)
		return;
	if (cqe->res == -ENOBUFS) {
		s->dry_ended = true;    /* re-armed when the ring holds buffers */
	} else {
		d->other_ends++;        /* ended for another reason: re-arm now */
		dry_arm(&d->ring, s, i, d->group);
	}
}

/* Some stream ran dry: wait for buffers on the ring, or here. */
static void dry_wait(struct dry_run *d)
{
	struct io_uring_sqe *sqe;
	int rc;

	if (d->on_ring) {
		sqe = io_uring_get_sqe(&d->ring);
		rc = asyncpool_region_prep_wait(d->r, sqe);
		if (rc == 0) {
			sqe->user_data = UD_WAKE;
			d->waiting = true;
			return;
		}
		io_uring_prep_nop(sqe);         /* the SQE back, unused */
		sqe->user_data = UD_NOP;
		if (rc != -EOPNOTSUPP) {
			d->err = rc;
			return;
		}
		d->on_ring = false;
	}
	rc = asyncpool_region_wait(d->r, -1);
	if (rc)
		d->err = rc;
	else
		dry_rearm_all(d);
}

/* The receiver's event loop, until every stream ended or something failed. */
static void dry_receive(struct dry_run *d)
{
	for (unsigned i = 0; i < DRY_STREAMS; i++)
		dry_arm(&d->ring, &d->st[i], i, d->group);
	d->progress_ns = tool_now_ns();
	while (d->live && !d->err) {
		struct __kernel_timespec idle = { DRY_STUCK_NS / 1000000000, 0 };
		struct io_uring_cqe *cqe;
		unsigned head, n = 0;
		bool dry = false;
		int rc = io_uring_submit_and_wait_timeout(&d->ring, &cqe, 1, &idle, NULL);

		/* A guard against a hang, not a measurement. */
		if (rc == -ETIME || tool_now_ns() - d->progress_ns > (uint64_t)DRY_STUCK_NS) {
			d->err = -ETIMEDOUT;    /* a stream was lost */
			break;
		}
		if (rc < 0 && rc != -EINTR) {
			d->err = rc;
			break;
		}
		io_uring_for_each_cqe(&d->ring, head, cqe) {
			n++;
			if (cqe->user_data == UD_WAKE) {
				/* 0: a release woke us; -EAGAIN: buffers came first. */
				d->waiting = false;
				if (cqe->res && cqe->res != -EAGAIN)
					d->err = cqe->res;
				else
					dry_rearm_all(d);
			} else if (cqe->user_data < DRY_STREAMS) {
				dry_completion(d, (unsigned)cqe->user_data, cqe);
			}
			if (d->err)
				break;
		}
		io_uring_cq_advance(&d->ring, n);
		for (unsigned i = 0; i < DRY_STREAMS; i++)
			dry |= d->st[i].dry_ended;
		if (dry && !d->waiting && !d->err)
			dry_wait(d);
	}
}

/* Set up, run and report; a DEMO_URING_* result. */
int demo_dry(size_t bytes, char *why, size_t whylen)
{
	struct dry_run *d = calloc(1, sizeof(*d));
	struct asyncpool_proactor *p = NULL;
	struct asyncpool_region_stats rs;
	size_t per = ((bytes / DRY_STREAMS + 7) & ~(size_t)7), got = 0, bad = 0;
	unsigned started = 0, complete = 0, unarmed = 0;
	int rc, result = DEMO_URING_FAILED;

	if (!d) {
		snprintf(why, whylen, "out of memory");
		return DEMO_URING_FAILED;
	}
	if (!per)
		per = 8;
	rc = io_uring_queue_init(64, &d->ring, 0);
	if (rc) {
		snprintf(why, whylen, "io_uring_queue_init: %s", strerror(-rc));
		free(d);
		return rc == -EPERM || rc == -ENOSYS || rc == -EOPNOTSUPP ? DEMO_URING_REFUSED :
		       DEMO_URING_FAILED;
	}
	rc = asyncpool_proactor_create_uring(&d->ring, 0, &p);
	if (!rc)
		d->r = tool_region(p, DRY_BUF_SIZE, DRY_BUFS, ASYNCPOOL_ACCESS_WRITE, &rc);
	if (rc) {
		snprintf(why, whylen, "cannot register a buffer ring: %s", strerror(-rc));
		result = rc == -EOPNOTSUPP || rc == -EPERM || rc == -ENOSYS ?
			 DEMO_URING_REFUSED : DEMO_URING_FAILED;
		goto out;
	}
	d->group = asyncpool_region_buffer_group(d->r);
	d->on_ring = true;
	pthread_mutex_init(&d->rel.lock, NULL);
	pthread_cond_init(&d->rel.cond, NULL);
	for (unsigned i = 0; i < DRY_STREAMS; i++) {
		d->st[i].tx = d->st[i].rx = -1;
		d->st[i].base = (uint64_t)i << 40;
		d->st[i].bytes = per;
		rc = tcp_loopback_pair(&d->st[i].tx, &d->st[i].rx);
		if (rc) {
			snprintf(why, whylen, "TCP loopback: %s", strerror(-rc));
			goto close;
		}
	}

	printf("libasyncpool %s demo: multishot receives on a recv ring that runs dry\n",
	       asyncpool_version());
	printf("%u TCP streams over loopback, %zu KiB each, sent %u KiB at a time: "
	       "%u buffers in flight\n", DRY_STREAMS, per >> 10, DRY_SEND >> 10,
	       DRY_STREAMS * (DRY_SEND / DRY_BUF_SIZE));
	printf("receiver: one ring, a multishot recv per stream, one provided-buffer ring "
	       "of %u buffers of %u KiB (group %d)\n", DRY_BUFS, DRY_BUF_SIZE >> 10, d->group);
	printf("release thread: gives each lease back %llu us after it arrived\n",
	       DRY_HOLD_NS / 1000);
	fflush(stdout);

	pthread_create(&d->rel.tid, NULL, dry_release, &d->rel);
	for (; started < DRY_STREAMS; started++)
		pthread_create(&d->st[started].sender, NULL, dry_send, &d->st[started]);
	d->live = DRY_STREAMS;
	dry_receive(d);
	if (d->err)
		for (unsigned i = 0; i < DRY_STREAMS; i++)
			shutdown(d->st[i].tx, SHUT_RDWR);       /* a blocked send() fails */
	for (unsigned i = 0; i < started; i++)
		pthread_join(d->st[i].sender, NULL);
	dry_release_stop(&d->rel);

	for (unsigned i = 0; i < DRY_STREAMS; i++) {
		got += d->st[i].got;
		bad += d->st[i].bad;
		complete += d->st[i].eof && d->st[i].got == per && !d->st[i].bad;
		unarmed += d->st[i].dry_ended;
		if (d->st[i].send_err && !d->err)
			d->err = d->st[i].send_err;
	}
	memset(&rs, 0, sizeof(rs));
	rs.size = sizeof(rs);
	asyncpool_region_stats(d->r, &rs);
	printf("waited for buffers with: %s\n", d->on_ring ?
	       "IORING_OP_FUTEX_WAIT on the ring (asyncpool_region_prep_wait)" :
	       "asyncpool_region_wait (no futex opcodes in this kernel)");
	printf("streams: %u of %u complete\n", complete, DRY_STREAMS);
	printf("bytes: %zu of %zu received, %zu bad\n", got, per * DRY_STREAMS, bad);
	printf("ring ran dry: %lu times (region stats: %llu)\n", d->nobufs,
	       (unsigned long long)rs.dry);
	printf("re-arms after -ENOBUFS: %lu\n", d->rearms);
	printf("re-arms after other ends: %lu\n", d->other_ends);
	printf("streams ended by -ENOBUFS without re-arm: %u\n", unarmed);
	printf("ring: %u/%u buffers back\n", rs.kernel_held, DRY_BUFS);
	if (d->err)
		snprintf(why, whylen, "%s", d->err == -ETIMEDOUT ?
			 "no byte for 10 s: a stream was lost" : strerror(-d->err));
	else if (complete != DRY_STREAMS || bad || unarmed)
		snprintf(why, whylen, "%s", bad ? "wrong bytes received" : "a stream was lost");
	else if (rs.dry != d->nobufs || rs.kernel_held != DRY_BUFS || rs.leased)
		snprintf(why, whylen, "the region's statistics disagree");
	else
		result = DEMO_URING_OK;
close:
	for (unsigned i = 0; i < DRY_STREAMS; i++) {
		if (d->st[i].tx >= 0)
			close(d->st[i].tx);
		if (d->st[i].rx >= 0)
			close(d->st[i].rx);
	}
	pthread_cond_destroy(&d->rel.cond);
	pthread_mutex_destroy(&d->rel.lock);
out:
	asyncpool_region_unref(d->r);
	if (p)
		asyncpool_proactor_destroy(p);
	io_uring_queue_exit(&d->ring);
	free(d);
	return result;
}
#else
#include <stdio.h>
#include <stddef.h>
#include "tool.h"

int demo_dry(size_t bytes, char *why, size_t whylen)
{
	(void)bytes;
	snprintf(why, whylen, "built without liburing");
	return DEMO_URING_REFUSED;
}
#endif
