/* SPDX-License-Identifier: MIT */
/*
 * The socket backend: leases sent with MSG_ZEROCOPY, released when the
 * socket's error queue reports their sends complete.
 *
 * The kernel's contract (Documentation/networking/msg_zerocopy.rst):
 * every sendmsg() with MSG_ZEROCOPY on a socket with SO_ZEROCOPY that
 * takes data, even a short one, gets the next number of a per-socket u32
 * counter (sk_zckey, from 0); a send that fails takes none (the kernel
 * gives the number back: msg_zerocopy_put_abort).  When the kernel no
 * longer reads the pages of a send (every skb that refers to them is
 * freed: acknowledged, reset, or purged), it queues on the socket's
 * error queue a sock_extended_err with ee_origin SO_EE_ORIGIN_ZEROCOPY
 * and the inclusive range [ee_info, ee_data]; consecutive ranges
 * coalesce in the queue.  ee_code SO_EE_CODE_ZEROCOPY_COPIED says the
 * kernel copied the data after all (loopback, a device without
 * scatter-gather): the send was correct, only not zero-copy.
 *
 * We keep one ring slot per sequence number, naming the record of the
 * lease it sent, and a record per lease with its pending count: a lease
 * goes back to its pool when its last send is complete and the caller
 * has handed it over.  One thread uses a socket's backend at a time
 * (as one thread owns a ring); the leases' releases are thread-safe.
 */
#include "internal.h"
#include "self_pid.h"

#include <fcntl.h>
#include <limits.h>
#include <linux/errqueue.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "zerocopy_internal.h"

#ifndef SO_ZEROCOPY
#define SO_ZEROCOPY 60
#endif
#ifndef MSG_ZEROCOPY
#define MSG_ZEROCOPY 0x4000000
#endif
#ifndef SO_EE_ORIGIN_ZEROCOPY
#define SO_EE_ORIGIN_ZEROCOPY 5
#endif
#ifndef SO_EE_CODE_ZEROCOPY_COPIED
#define SO_EE_CODE_ZEROCOPY_COPIED 1
#endif
/* The kernel's internal ENOTSUPP, which old kernels leaked from SO_ZEROCOPY. */
#define AP_KERNEL_ENOTSUPP 524

#define ZC_RING_MIN 64u
#define ZC_RECS_MIN 16u
/* The first size of struct asyncpool_zc_options and _stats. */
#define ZC_OPTS_V1  sizeof(struct asyncpool_zc_options)
#define ZC_STATS_V1 sizeof(struct asyncpool_zc_stats)

/*
 * One backend object per socket (issue 36).  Each follows the kernel's
 * per-socket counter of MSG_ZEROCOPY sends from 0 and reads the
 * socket's error queue: a second one, in this process, in a child of
 * fork(2) or in a process the descriptor was sent to, would number its
 * sends wrong and take the other's completions, releasing leases the
 * kernel still reads.  The mark is the socket's own SO_ZEROCOPY, which
 * the kernel keeps with the socket whoever holds a descriptor of it: a
 * socket that has it has a backend already (or someone else's
 * MSG_ZEROCOPY sends, as unknown to our count): -EBUSY.  The look and
 * the set are one step: a mutex between the threads of this process, a
 * POSIX record lock on a byte of the socket between processes (the
 * record locks of one process never conflict with each other; those of
 * two do, and a child does not inherit its parent's).
 */
static pthread_mutex_t zc_claim_mutex = PTHREAD_MUTEX_INITIALIZER;

static int zc_record_lock(int fd, short type)
{
	struct flock fl = { .l_type = type, .l_whence = SEEK_SET, .l_start = AP_ZC_CLAIM_BYTE,
			    .l_len = 1 };

	return fcntl(fd, F_SETLK, &fl) ? -errno : 0;
}

/* Set SO_ZEROCOPY on fd, unless it has it: 0, -EBUSY or -EOPNOTSUPP. */
static int zc_claim(int fd)
{
	int on = 0, one = 1, rc, locked;
	socklen_t len = sizeof(on);

	pthread_mutex_lock(&zc_claim_mutex);
	/* Another process between its look and its set: it wins.  (A
	 * socket without record locks: the mutex alone.) */
	locked = zc_record_lock(fd, F_WRLCK);
	if (locked == -EAGAIN || locked == -EACCES) {
		rc = -EBUSY;
		goto out;
	}
	if (!getsockopt(fd, SOL_SOCKET, SO_ZEROCOPY, &on, &len) && on) {
		rc = -EBUSY;
	} else if (setsockopt(fd, SOL_SOCKET, SO_ZEROCOPY, &one, sizeof(one))) {
		rc = -errno;
		/* ENOPROTOOPT: before 4.14; EOPNOTSUPP: not TCP, or UDP before 5.0. */
		if (rc == -ENOPROTOOPT || rc == -AP_KERNEL_ENOTSUPP || rc == -EOPNOTSUPP)
			rc = -EOPNOTSUPP;
		/* else EBUSY: 4.14 takes it only before connect() */
	} else {
		rc = 0;
	}
	if (!locked)
		(void)zc_record_lock(fd, F_UNLCK);
out:
	pthread_mutex_unlock(&zc_claim_mutex);
	return rc;
}

/* In a child of fork(2), the object is a copy of its parent's, on the
 * same socket: it sends nothing, reads no completion, releases nothing. */
static bool zc_forked(const struct asyncpool_zc *zs)
{
	return zs->pid != ap_self_pid();  /* no system call a send: self_pid.c */
}

#ifdef ASYNCPOOL_TEST_HOOKS
ssize_t (*ap_zc_test_sendmsg)(int fd, const struct msghdr *msg, int flags);
ssize_t (*ap_zc_test_recvmsg)(int fd, struct msghdr *msg, int flags);

static ssize_t zc_sendmsg(int fd, const struct msghdr *msg, int flags)
{
	if (ap_zc_test_sendmsg)
		return ap_zc_test_sendmsg(fd, msg, flags);
	return sendmsg(fd, msg, flags);
}

static ssize_t zc_recvmsg(int fd, struct msghdr *msg, int flags)
{
	if (ap_zc_test_recvmsg)
		return ap_zc_test_recvmsg(fd, msg, flags);
	return recvmsg(fd, msg, flags);
}
#else
#define zc_sendmsg sendmsg
#define zc_recvmsg recvmsg
#endif

AP_EXPORT int asyncpool_zc_open(int fd, const struct asyncpool_zc_options *opts,
				struct asyncpool_zc **out)
{
	struct asyncpool_zc_options o;
	struct asyncpool_zc *zs;
	int type, domain, rc;
	socklen_t len = sizeof(type);

	if (out)
		*out = NULL;
	if (fd < 0 || !out)
		return -EINVAL;
	memset(&o, 0, sizeof(o));
	o.size = sizeof(o);
	if (opts) {
		rc = ap_opts_copy(&o, sizeof(o), opts, ZC_OPTS_V1);
		if (rc)
			return rc;
	}
	if (o.flags & ~(ASYNCPOOL_ZC_COPY | ASYNCPOOL_ZC_NO_FALLBACK))
		return -EINVAL;
	for (unsigned i = 0; i < sizeof(o.reserved) / sizeof(o.reserved[0]); i++)
		if (o.reserved[i])
			return -EINVAL;
	if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len))
		return -errno;
	if (type != SOCK_STREAM && type != SOCK_DGRAM)
		return -EOPNOTSUPP;
	/*
	 * The kernel takes SO_ZEROCOPY on more than TCP and UDP (vsock,
	 * Linux 6.7, reports on SOL_VSOCK): completions we would not read,
	 * leases that would never come back.  IP sockets only.
	 */
	len = sizeof(domain);
	if (!(o.flags & ASYNCPOOL_ZC_COPY) &&
	    (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) ||
	     (domain != AF_INET && domain != AF_INET6)))
		return -EOPNOTSUPP;
	zs = calloc(1, sizeof(*zs));
	if (!zs)
		return -ENOMEM;
	zs->cap = ZC_RING_MIN;
	zs->ring = malloc(zs->cap * sizeof(*zs->ring));
	zs->nrecs = ZC_RECS_MIN;
	zs->recs = calloc(zs->nrecs, sizeof(*zs->recs));
	/*
	 * Our own reference to the socket: the kernel reports completions
	 * on it even after the caller closed theirs (asyncpool_zc_close(3)).
	 */
	zs->fd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
	rc = zs->fd < 0 ? -errno : !zs->ring || !zs->recs ? -ENOMEM : 0;
	/* Last, so that a failure before leaves the socket as it was. */
	if (!rc && !(o.flags & ASYNCPOOL_ZC_COPY))
		rc = zc_claim(fd);
	if (rc) {
		if (zs->fd >= 0)
			close(zs->fd);
		free(zs->ring);
		free(zs->recs);
		free(zs);
		return rc;
	}
	for (uint32_t i = 0; i < zs->nrecs; i++)
		zs->recs[i].next_free = i + 1 < zs->nrecs ? i + 1 : AP_ZC_NONE;
	zs->free_rec = 0;
	zs->pid = ap_self_pid();
	zs->flags = o.flags;
	zs->fallback_after = o.fallback_after ? o.fallback_after : ASYNCPOOL_ZC_FALLBACK_AFTER;
	zs->zerocopy = !(o.flags & ASYNCPOOL_ZC_COPY);
	zs->dgram = type == SOCK_DGRAM;
	*out = zs;
	return 0;
}

static void rec_free(struct asyncpool_zc *zs, uint32_t r)
{
	struct ap_zc_rec *rec = &zs->recs[r];

	if (rec->held)
		zs->nheld--;
	rec->used = false;
	rec->held = false;
	rec->lease.release.fn = NULL;
	rec->next_free = zs->free_rec;
	zs->free_rec = r;
}

/* The kernel is done and the caller let go: back to the pool. */
static void rec_release(struct asyncpool_zc *zs, uint32_t r)
{
	asyncpool_lease_release(&zs->recs[r].lease);
	zs->leases_out--;
	rec_free(zs, r);
}

/* Handed over: ours until the kernel is done with it. */
static void rec_hand_over(struct asyncpool_zc *zs, struct asyncpool_lease *lease, uint32_t r)
{
	lease->release.fn = NULL;
	zs->recs[r].held = false;
	zs->nheld--;
	zs->leases_out++;
	if (!zs->recs[r].pending)
		rec_release(zs, r);
}

static bool same_lease(const struct asyncpool_lease *a, const struct asyncpool_lease *b)
{
	return a->span.region == b->span.region && a->buffer_index == b->buffer_index &&
	       a->generation == b->generation && a->release.ctx == b->release.ctx;
}

/* The record of a lease the caller still holds, or AP_ZC_NONE. */
static uint32_t rec_find(const struct asyncpool_zc *zs, const struct asyncpool_lease *l)
{
	/* Kept and short-sent leases are few; most sends scan nothing. */
	if (!zs->nheld)
		return AP_ZC_NONE;
	for (uint32_t i = 0; i < zs->nrecs; i++)
		if (zs->recs[i].used && zs->recs[i].held && same_lease(&zs->recs[i].lease, l))
			return i;
	return AP_ZC_NONE;
}

static int rec_new(struct asyncpool_zc *zs, const struct asyncpool_lease *l, uint32_t *out)
{
	struct ap_zc_rec *recs;
	uint32_t r, n;

	if (zs->free_rec == AP_ZC_NONE) {
		if (zs->nrecs > UINT32_MAX / 4)
			return -ENOMEM;
		n = zs->nrecs * 2;
		recs = realloc(zs->recs, (size_t)n * sizeof(*recs));
		if (!recs)
			return -ENOMEM;
		memset(recs + zs->nrecs, 0, (size_t)(n - zs->nrecs) * sizeof(*recs));
		for (uint32_t i = zs->nrecs; i < n; i++)
			recs[i].next_free = i + 1 < n ? i + 1 : AP_ZC_NONE;
		zs->free_rec = zs->nrecs;
		zs->recs = recs;
		zs->nrecs = n;
	}
	r = zs->free_rec;
	zs->free_rec = zs->recs[r].next_free;
	zs->recs[r].lease = *l;
	zs->recs[r].pending = 0;
	zs->recs[r].used = true;
	zs->recs[r].held = true;
	zs->nheld++;
	*out = r;
	return 0;
}

/* Room for one more sequence number: the ring doubles, in order. */
static int ring_room(struct asyncpool_zc *zs)
{
	uint32_t *ring, n;

	if (zs->head - zs->tail < zs->cap)
		return 0;
	if (zs->cap > UINT32_MAX / 4)
		return -ENOMEM;
	n = zs->cap * 2;
	ring = malloc((size_t)n * sizeof(*ring));
	if (!ring)
		return -ENOMEM;
	for (uint32_t s = zs->tail; s != zs->head; s++)
		ring[s & (n - 1)] = zs->ring[s & (zs->cap - 1)];
	free(zs->ring);
	zs->ring = ring;
	zs->cap = n;
	return 0;
}

int ap_zc_complete(struct asyncpool_zc *zs, uint32_t lo, uint32_t hi, bool copied)
{
	uint32_t out = zs->head - zs->tail, a = lo - zs->tail, b = hi - zs->tail;
	int released = 0;

	zs->st.notifications++;
	/* Only numbers the kernel gave our sends, in order: a range that
	 * names another is counted and left alone. */
	if (a >= out || a > b) {
		zs->st.bad_ranges++;
		return 0;
	}
	/*
	 * Up to lost numbers past ours are those of UDP sends that failed
	 * after the kernel numbered them (zc_maybe_numbered()); the socket
	 * copies since, so they follow all of ours, and the kernel may
	 * coalesce their range with our last: complete ours, count the range.
	 */
	if (b >= out) {
		zs->st.bad_ranges++;
		if (b - out >= zs->lost)
			return 0;
		b = out - 1;
	}
	for (uint32_t s = a;; s++) {
		uint32_t *slot = &zs->ring[(zs->tail + s) & (zs->cap - 1)];
		uint32_t r = *slot;

		if (r != AP_ZC_DONE) {
			*slot = AP_ZC_DONE;
			zs->st.pending--;
			zs->st.completions++;
			if (copied)
				zs->st.copied++;
			if (!--zs->recs[r].pending && !zs->recs[r].held) {
				rec_release(zs, r);
				released++;
			}
		}
		if (s == b)
			break;
	}
	/* Out of order: the tail moves only past what is complete. */
	while (zs->tail != zs->head && zs->ring[zs->tail & (zs->cap - 1)] == AP_ZC_DONE)
		zs->tail++;
	/*
	 * The kernel's advice: a socket whose sends it keeps copying is
	 * better served by copying in the first place (no page pinning, no
	 * notifications).  Once fallback_after sends in a row came back
	 * copied, this socket sends by copying; stats say so.
	 */
	if (copied) {
		zs->copied_run += (uint64_t)(b - a) + 1;
		if (zs->zerocopy && !(zs->flags & ASYNCPOOL_ZC_NO_FALLBACK) &&
		    zs->copied_run >= zs->fallback_after) {
			zs->zerocopy = false;
			zs->fell_back = true;
		}
	} else {
		zs->copied_run = 0;
	}
	return released;
}

AP_EXPORT int asyncpool_zc_reap(struct asyncpool_zc *zs)
{
	int released = 0;

	if (!zs)
		return -EINVAL;
	if (zc_forked(zs))
		return -EBUSY;
	/*
	 * A socket that never sends with MSG_ZEROCOPY has no completions,
	 * and its error queue is the caller's.  It may not even have one:
	 * recvmsg(2) of a Unix socket ignores MSG_ERRQUEUE and reads data
	 * (0 bytes of a stream, for ever; a datagram, lost).
	 */
	if (zs->flags & ASYNCPOOL_ZC_COPY)
		return 0;
	for (;;) {
		union {
			char buf[CMSG_SPACE(sizeof(struct sock_extended_err) +
					    sizeof(struct sockaddr_in6)) * 4];
			struct cmsghdr align;
		} ctl;
		struct msghdr msg;
		struct cmsghdr *cm;
		bool zc;

		memset(&msg, 0, sizeof(msg));
		msg.msg_control = ctl.buf;
		msg.msg_controllen = sizeof(ctl.buf);
		if (zc_recvmsg(zs->fd, &msg, MSG_ERRQUEUE | MSG_DONTWAIT) < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				break;
			return released ? released : -errno;
		}
		/*
		 * One message, one sock_extended_err (IP_RECVERR, or
		 * IPV6_RECVERR on an AF_INET6 socket, v4-mapped peers too);
		 * other control messages may come with it (SO_TIMESTAMP on a
		 * notification): the message is "other" only when it has no
		 * completion.
		 */
		zc = false;
		for (cm = CMSG_FIRSTHDR(&msg); cm; cm = CMSG_NXTHDR(&msg, cm)) {
			struct sock_extended_err ee;

			if (!((cm->cmsg_level == SOL_IP && cm->cmsg_type == IP_RECVERR) ||
			      (cm->cmsg_level == SOL_IPV6 && cm->cmsg_type == IPV6_RECVERR)) ||
			    cm->cmsg_len < CMSG_LEN(sizeof(ee)))
				continue;
			memcpy(&ee, CMSG_DATA(cm), sizeof(ee));
			if (ee.ee_origin != SO_EE_ORIGIN_ZEROCOPY || ee.ee_errno != 0)
				continue;
			zc = true;
			released += ap_zc_complete(zs, ee.ee_info, ee.ee_data,
						   ee.ee_code & SO_EE_CODE_ZEROCOPY_COPIED);
		}
		if (!zc)
			zs->st.other++;
	}
	return released;
}

/*
 * Whether a MSG_ZEROCOPY send that failed with err may have taken a
 * sequence number all the same.  TCP never: it returns what it queued,
 * or fails having queued nothing and gives the number back.  UDP gives
 * it back when the datagram cannot be built (the errors below), but an
 * error of the IP layer after it was built and numbered comes back too:
 * a full device queue (ENOBUFS, to a socket with IP_RECVERR or
 * IPV6_RECVERR: udp_send_skb()), a netfilter or BPF drop (EPERM), a
 * neighbour that cannot be made (EINVAL); the datagram is freed and its
 * completion comes, for a number our count does not have.
 */
static bool zc_maybe_numbered(const struct asyncpool_zc *zs, int err)
{
	int on = 0;
	socklen_t len = sizeof(on);

	if (!zs->dgram)
		return false;
	switch (err) {
	case -EAGAIN:
	case -EMSGSIZE:
	case -EDESTADDRREQ:
	case -ENOTCONN:
	case -EFAULT:
		return false;
	case -ENOBUFS:
		/* Without IP_RECVERR the IP layer's ENOBUFS is a success;
		 * this one is the notification's or the pinning's. */
		if (!getsockopt(zs->fd, SOL_IP, IP_RECVERR, &on, &len) && on)
			return true;
		on = 0;
		len = sizeof(on);
		return !getsockopt(zs->fd, SOL_IPV6, IPV6_RECVERR, &on, &len) && on;
	default:
		return true;
	}
}

static ssize_t send_once(struct asyncpool_zc *zs, const void *p, size_t len, int msg_flags,
			 bool zc)
{
	struct iovec iov = { .iov_base = (void *)p, .iov_len = len };
	struct msghdr msg;
	ssize_t n;

	memset(&msg, 0, sizeof(msg));
	msg.msg_iov = &iov;
	msg.msg_iovlen = 1;
	do
		n = zc_sendmsg(zs->fd, &msg, msg_flags | MSG_NOSIGNAL | (zc ? MSG_ZEROCOPY : 0));
	while (n < 0 && errno == EINTR);
	return n < 0 ? -errno : n;
}

AP_EXPORT int asyncpool_zc_send(struct asyncpool_zc *zs, struct asyncpool_lease *lease,
				size_t offset, size_t length, int msg_flags, uint32_t flags)
{
	bool zc, fresh = false;
	uint32_t r;
	ssize_t n;
	int rc;

	if (!zs || !asyncpool_lease_held(lease) || !lease->span.region || !length ||
	    length > INT_MAX || offset > lease->span.length ||
	    length > lease->span.length - offset || (flags & ~ASYNCPOOL_ZC_KEEP) ||
	    (msg_flags & (MSG_ZEROCOPY | MSG_ERRQUEUE)))
		return -EINVAL;
	if (zc_forked(zs))
		return -EBUSY;
	zc = zs->zerocopy;
	r = rec_find(zs, lease);
	if (r == AP_ZC_NONE) {
		rc = rec_new(zs, lease, &r);
		if (rc)
			return rc;
		fresh = true;
	}
	if (zc && (rc = ring_room(zs))) {
		/* Completions may make room where memory would not. */
		asyncpool_zc_reap(zs);
		if ((rc = ring_room(zs)))
			goto fail;
	}
	n = send_once(zs, (char *)asyncpool_span_ptr(lease->span) + offset, length, msg_flags, zc);
	if (n < 0 && zc && zc_maybe_numbered(zs, (int)n))
		goto lost;
	if (n == -ENOBUFS && zc) {
		/*
		 * The socket's optmem (a notification per send not yet read,
		 * or one the kernel could not allocate) or RLIMIT_MEMLOCK (the
		 * pages it pins) is spent.  Reading the error queue frees the
		 * first and, as leases go back, the second: reap, try again.
		 * With nothing of ours left in flight, waiting cannot help:
		 * this send copies.  Otherwise the caller waits for POLLERR.
		 */
		zs->st.enobufs++;
		asyncpool_zc_reap(zs);
		n = send_once(zs, (char *)asyncpool_span_ptr(lease->span) + offset, length,
			      msg_flags, true);
		if (n < 0 && n != -ENOBUFS && zc_maybe_numbered(zs, (int)n))
			goto lost;
		if (n == -ENOBUFS) {
			zs->st.enobufs++;
			if (zs->st.pending) {
				rc = -ENOBUFS;
				goto fail;
			}
			zs->st.enobufs_copies++;
			zc = false;
			n = send_once(zs, (char *)asyncpool_span_ptr(lease->span) + offset,
				      length, msg_flags, false);
		}
	}
	if (n < 0) {
		zs->st.failed++;
		rc = (int)n;
		goto fail;
	}
	if (zc && n > 0) {
		/* Every MSG_ZEROCOPY send that took data, short or not, took a number. */
		zs->ring[zs->head & (zs->cap - 1)] = r;
		zs->head++;
		zs->recs[r].pending++;
		zs->st.sends++;
		zs->st.pending++;
	} else {
		zs->st.copy_sends++;
	}
	if ((size_t)n == length && !(flags & ASYNCPOOL_ZC_KEEP))
		rec_hand_over(zs, lease, r);
	return (int)n;
lost:
	/*
	 * Our count may be behind the kernel's for good: the numbers of the
	 * sends made so far are right, no later one could be.  This socket
	 * copies from now on; ranges that name the lost numbers, past ours,
	 * are counted (ap_zc_complete()).
	 */
	if (n == -ENOBUFS)
		zs->st.enobufs++;
	zs->zerocopy = false;
	zs->fell_back = true;
	zs->lost++;
	zs->st.failed++;
	rc = (int)n;
fail:
	/* The lease stays the caller's; a record with nothing in flight goes. */
	if (fresh)
		rec_free(zs, r);
	return rc;
}

AP_EXPORT int asyncpool_zc_release(struct asyncpool_zc *zs, struct asyncpool_lease *lease)
{
	uint32_t r;

	if (!zs || !asyncpool_lease_held(lease))
		return -EINVAL;
	if (zc_forked(zs))
		return -EBUSY;
	r = rec_find(zs, lease);
	if (r == AP_ZC_NONE) {
		/* Nothing of it in flight: it goes back now. */
		asyncpool_lease_release(lease);
		return 0;
	}
	rec_hand_over(zs, lease, r);
	return 0;
}

static int64_t zc_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The clock at which timeout_ns from now is up; INT64_MAX: never. */
static int64_t zc_deadline(int64_t timeout_ns)
{
	int64_t now = zc_now_ns();

	if (timeout_ns < 0 || timeout_ns > INT64_MAX - now)
		return INT64_MAX;
	return now + timeout_ns;
}

AP_EXPORT int asyncpool_zc_wait(struct asyncpool_zc *zs, int64_t timeout_ns)
{
	int64_t end, left;
	struct pollfd pfd;
	uint64_t seen;
	int rc, ms;

	if (!zs)
		return -EINVAL;
	if (zc_forked(zs))
		return -EBUSY;
	if (!zs->st.pending)
		return 0;
	end = zc_deadline(timeout_ns);
	rc = asyncpool_zc_reap(zs);
	if (rc)
		return rc;
	for (;;) {
		left = end == INT64_MAX ? -1 : end - zc_now_ns();
		if (left < 0 && end != INT64_MAX)
			left = 0;
		/* POLLERR: the error queue holds something (or the socket has an error). */
		pfd.fd = zs->fd;
		pfd.events = 0;
		pfd.revents = 0;
		ms = left < 0 ? -1 :
		     left / 1000000 >= INT_MAX ? INT_MAX : (int)((left + 999999) / 1000000);
		do
			rc = poll(&pfd, 1, ms);
		while (rc < 0 && errno == EINTR);
		if (rc < 0)
			return -errno;
		if (rc == 0)
			return -ETIMEDOUT;
		seen = zs->st.notifications + zs->st.other;
		rc = asyncpool_zc_reap(zs);
		if (rc || zs->st.notifications + zs->st.other != seen || !zs->st.pending)
			return rc;
		/*
		 * Nothing was queued: poll(2) answered for a condition that
		 * stays up, a socket error (a reset: POLLERR) or a socket shut
		 * down both ways (POLLHUP), and would answer again at once.
		 * Sleep a millisecond at a time, until the time is up, so that
		 * neither this call nor a loop around it spins.
		 */
		if (end != INT64_MAX && zc_now_ns() >= end)
			return -ETIMEDOUT;
		{
			struct timespec ts = { 0, 1000000 };

			nanosleep(&ts, NULL);
		}
	}
}

AP_EXPORT int asyncpool_zc_close(struct asyncpool_zc *zs, int64_t timeout_ns)
{
	int64_t end;
	int rc;

	if (!zs)
		return -EINVAL;
	if (zc_forked(zs))
		goto free;              /* the parent's sends, and its socket */
	end = zc_deadline(timeout_ns);
	asyncpool_zc_reap(zs);
	while (zs->st.pending) {
		int64_t left = -1;

		if (end != INT64_MAX) {
			left = end - zc_now_ns();
			if (left <= 0)
				return -EBUSY;
		}
		rc = asyncpool_zc_wait(zs, left);
		if (rc < 0 && rc != -ETIMEDOUT)
			return rc;
	}
	/*
	 * Every send complete: records left are leases the caller holds.
	 * A socket whose counter we never moved is left as it was, free
	 * for another backend; one we numbered sends on keeps SO_ZEROCOPY,
	 * so that a new backend, which would count from 0, is refused.
	 */
	if (!(zs->flags & ASYNCPOOL_ZC_COPY) && !zs->st.sends && !zs->lost) {
		int off = 0;

		(void)setsockopt(zs->fd, SOL_SOCKET, SO_ZEROCOPY, &off, sizeof(off));
	}
free:
	close(zs->fd);
	free(zs->ring);
	free(zs->recs);
	free(zs);
	return 0;
}

AP_EXPORT int asyncpool_zc_fd(const struct asyncpool_zc *zs)
{
	return zs ? zs->fd : -EINVAL;
}

AP_EXPORT int asyncpool_zc_stats(const struct asyncpool_zc *zs, struct asyncpool_zc_stats *out)
{
	struct asyncpool_zc_stats s;
	size_t given;

	if (!zs || !out)
		return -EINVAL;
	given = out->size;
	if (given < ZC_STATS_V1)
		return -EINVAL;
	if (given > AP_STRUCT_SIZE_MAX)
		return -E2BIG;
	s = zs->st;
	s.size = given;
	s.flags = (zs->zerocopy ? ASYNCPOOL_ZC_ZEROCOPY : 0) |
		  (zs->fell_back ? ASYNCPOOL_ZC_FELL_BACK : 0);
	s.leases_out = zs->leases_out;
	memcpy(out, &s, given < sizeof(s) ? given : sizeof(s));
	if (given > sizeof(s))
		memset((char *)out + sizeof(s), 0, given - sizeof(s));
	return 0;
}

AP_EXPORT int asyncpool_zc_recv(struct asyncpool *pool, int fd, int msg_flags,
				struct asyncpool_lease *out)
{
	size_t len;
	ssize_t n;
	int rc;

	if (out)
		memset(out, 0, sizeof(*out));
	/* MSG_TRUNC makes recv(2) answer a datagram's whole length (or
	 * discard stream bytes): more than the buffer holds, or nothing in it. */
	if (!pool || fd < 0 || !out || (msg_flags & (MSG_ERRQUEUE | MSG_PEEK | MSG_TRUNC)))
		return -EINVAL;
	rc = asyncpool_acquire(pool, out);
	if (rc)
		return rc;
	len = out->span.length < INT_MAX ? out->span.length : INT_MAX;
	do
		n = recv(fd, asyncpool_span_ptr(out->span), len, msg_flags);
	while (n < 0 && errno == EINTR);
	if (n <= 0) {
		rc = n < 0 ? -errno : 0;
		asyncpool_lease_release(out);
		memset(out, 0, sizeof(*out));
		return rc;
	}
	out->span.length = (size_t)n;
	return (int)n;
}
