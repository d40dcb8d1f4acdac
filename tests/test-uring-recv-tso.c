/* SPDX-License-Identifier: MIT */
/*
 * The recv ring's two Dekker pairs (issue 54, kind 8; uring_recv.c
 * recv_drain), run in the interleaving that each barrier forbids:
 *
 * A. The drainer and a releaser:
 *      drainer                            releaser (recv_recycle)
 *      draining = false (seq_cst store)   push its buffer on pending (CAS)
 *      pending empty? done                exchange(draining, true): set? leave
 *                                           it to the drainer, else drain
 *    One must see the other's write, or the buffer stays on pending,
 *    out of the ring, until some later release drains it.
 * B. The drainer and a refill waiter (wait_word.h's protocol):
 *      drainer                            waiter (asyncpool_region_wait,
 *      put buffers in (holds), tail                  asyncpool_region_prep_wait)
 *      fence seq_cst                      fetch_or(refill, 1), fence
 *      look at refill: a waiter? wake     look at holds: a buffer? done
 *                                         futex_wait(refill)
 *    One must see the other's, or the waiter sleeps with a buffer in
 *    the ring and no wake coming (region_wait has no slice: for ever).
 *
 * The test-hook build emulates x86-TSO's store buffer (lib/test_stall.h,
 * AP_TSO_*): a releasing thread that sets ap_test_tso_armed holds its
 * stores of holds (and of draining) until its fence (or the barrier a
 * seq_cst store is), or, without it, until the end of recv_drain, past
 * a stall point after its load, where this test holds it while the
 * other side runs:
 *   A: the drainer held after its look at pending (AP_TS_RECV_DRAINED);
 *      another buffer released meanwhile must be in the ring at once,
 *      drained by its releaser (tests/mutants/uring-recv-undrain-release);
 *   B: the drainer held after its look at the refill word
 *      (AP_TS_RECV_WAKE_LOOKED); a wait begun meanwhile must find the
 *      buffer and return without sleeping (it reports any sleep at the
 *      stall point before its futex wait, AP_TS_RECV_WAITER_LOOKED),
 *      and a prep_wait must say so in its SQE's value, bit 0 clear
 *      (tests/mutants/uring-recv-wake-no-fence);
 *   B, the waiter's fence, between its announcement (a seq_cst
 *      fetch_or) and its look: x86 needs none (the fetch_or is a locked
 *      instruction), C11 does (the look is no seq_cst access), and so do
 *      weaker machines.  The armed waiter's announcement is held as a
 *      store (AP_TSO_ANNOUNCE) until its fence, or, without it, past the
 *      stall point after its look (AP_TS_RECV_WAITER_LOOKED), where this
 *      test holds it and releases a buffer: the release must see the
 *      announcement and wake, which moves the word
 *      (tests/mutants/uring-wait-no-fence); for prep_wait, the value its
 *      SQE sleeps on must then no longer be the word's
 *      (tests/mutants/uring-prep-wait-no-fence).  The word's address is
 *      a prep_wait SQE's: without IORING_OP_FUTEX_WAIT (Linux 6.7) the
 *      cases that need it are skipped.
 * Each round takes the whole ring of 4 buffers first (4 one-byte
 * messages over TCP loopback), so that the ring is empty.  No timing:
 * the stall points order the threads; a waiter that sleeps is woken by
 * the test once it has failed.  Skipped where io_uring is refused.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <asyncpool.h>
#include "hooks.h"
#include "uring-util.h"

#define NBUF    4
#define BS      4096
#define ROUNDS  3

enum role { NONE, DRAINER, WAITER };

static _Thread_local enum role role;
static _Atomic int hold_at = -1, drainer_at, release_drainer, waiter_looked;

/* The armed thread of the case, at the case's stall point: held once. */
static void hook(enum ap_test_stall p)
{
	if (role == WAITER && p == AP_TS_RECV_WAITER_LOOKED)
		atomic_store(&waiter_looked, 1);
	if (role == NONE || !ap_test_tso_armed || (int)p != atomic_load(&hold_at))
		return;
	atomic_store(&hold_at, -1);
	atomic_store(&drainer_at, 1);
	while (!atomic_load(&release_drainer))
		sched_yield();
}

static struct io_uring ring;
static struct asyncpool_region *reg;
static int tx, rx, group;
static bool armed;
static struct asyncpool_lease held[NBUF];

static uint32_t kernel_held(void)
{
	struct asyncpool_region_stats st = { .size = sizeof(st) };

	if (asyncpool_region_stats(reg, &st))
		bail_out("region_stats");
	return st.kernel_held;
}

/* Every buffer of the ring leased to us: one one-byte message each. */
static void take_all(void)
{
	for (int k = 0; k < NBUF; k++) {
		unsigned char byte = (unsigned char)k;
		struct io_uring_cqe *cqe;

		if (!armed) {
			ut_arm_recv(&ring, rx, group, 0);
			armed = true;
		}
		if (send(tx, &byte, 1, MSG_NOSIGNAL) != 1)
			bail_out("send: %s", strerror(errno));
		cqe = ut_wait(&ring);
		if (asyncpool_region_recv_lease(reg, cqe, &held[k]))
			bail_out("message %d: no lease (res %d)", k, cqe->res);
		armed = cqe->flags & IORING_CQE_F_MORE;
		io_uring_cqe_seen(&ring, cqe);
	}
	if (kernel_held() != 0)
		bail_out("the ring is not empty after %d messages", NBUF);
}

static void *drainer(void *arg)
{
	role = DRAINER;
	ap_test_tso_armed = 1;
	asyncpool_lease_release(arg);
	ap_test_tso_flush();
	ap_test_tso_armed = 0;
	return NULL;
}

/* The first buffer released by an armed thread held at stall point at. */
static void drainer_start(pthread_t *t, enum ap_test_stall at)
{
	atomic_store(&drainer_at, 0);
	atomic_store(&release_drainer, 0);
	atomic_store(&hold_at, (int)at);
	if (pthread_create(t, NULL, drainer, &held[0]))
		bail_out("pthread_create");
	while (!atomic_load(&drainer_at))
		sched_yield();
}

static void drainer_end(pthread_t t)
{
	atomic_store(&release_drainer, 1);
	pthread_join(t, NULL);
}

/* The rest released here (they drain what a lost release left), all back. */
static void give_back(const char *what, int r, int from)
{
	for (int k = from; k < NBUF; k++)
		asyncpool_lease_release(&held[k]);
	is_int(kernel_held(), NBUF, "%s %d: every buffer back in the ring at the end", what, r);
}

/* A: a release while the drainer is held after its look at pending. */
static void case_pending(int r)
{
	pthread_t t;

	take_all();
	drainer_start(&t, AP_TS_RECV_DRAINED);
	asyncpool_lease_release(&held[1]);
	is_int(kernel_held(), 2, "pending %d: a release while the drainer looked at pending put its "
	       "buffer in the ring (it saw draining let go)", r);
	drainer_end(t);
	is_int(kernel_held(), 2, "pending %d: and both buffers are in once the drainer is done", r);
	give_back("pending", r, 2);
}

static _Atomic uint32_t *refill;       /* the word, from a prep_wait's SQE */
static int wait_rc;
static _Atomic int wait_done;
static int arm_waiter;

static void *waiter(void *arg)
{
	(void)arg;
	role = WAITER;
	ap_test_tso_armed = arm_waiter;
	wait_rc = asyncpool_region_wait(reg, 10 * 1000000000ll);
	ap_test_tso_flush();
	ap_test_tso_armed = 0;
	atomic_store(&wait_done, 1);
	return NULL;
}

static void waiter_start(pthread_t *t, int arm)
{
	atomic_store(&waiter_looked, 0);
	atomic_store(&wait_done, 0);
	wait_rc = -1;
	arm_waiter = arm;
	if (pthread_create(t, NULL, waiter, NULL))
		bail_out("pthread_create");
}

/* A waiter that did not return (not woken): wake it, the test failed. */
static void rescue(const char *what, int r)
{
	if (atomic_load(&wait_done))
		return;
	diag("%s %d: the waiter sleeps with a buffer in the ring: a lost wake", what, r);
	if (refill) {
		atomic_fetch_add(refill, 2);    /* a value it does not sleep on */
		ap_futex_wake_all(refill, false);
	}       /* else its 10 s timeout ends it */
}

/* B, asyncpool_region_wait: begun while the drainer is held after its look. */
static void case_wait(int r)
{
	pthread_t t, w;

	take_all();
	if (refill)     /* nobody waits: a stale announcement would only be cleared */
		atomic_fetch_and(refill, ~(uint32_t)1);
	drainer_start(&t, AP_TS_RECV_WAKE_LOOKED);
	waiter_start(&w, 0);
	while (!atomic_load(&wait_done) && !atomic_load(&waiter_looked))
		sched_yield();
	ok(atomic_load(&wait_done) && !atomic_load(&waiter_looked),
	   "wait %d: a wait begun after the drainer's look at the refill word found the buffer "
	   "and did not sleep", r);
	drainer_end(t);
	rescue("wait", r);
	pthread_join(w, NULL);
	is_int(wait_rc, 0, "wait %d: the wait says a buffer is there", r);
	give_back("wait", r, 1);
}

/* B, asyncpool_region_prep_wait: its SQE's value says what it saw. */
static void case_prep(int r)
{
	struct io_uring_sqe sqe;
	pthread_t t;
	int rc;

	take_all();
	atomic_fetch_and(refill, ~(uint32_t)1);
	drainer_start(&t, AP_TS_RECV_WAKE_LOOKED);
	memset(&sqe, 0, sizeof(sqe));
	rc = asyncpool_region_prep_wait(reg, &sqe);
	is_int(rc, 0, "prep %d: prep_wait", r);
	is_int(sqe.off & 1, 0, "prep %d: a prep_wait after the drainer's look at the refill word "
	       "found the buffer: its futex value cannot match (bit 0 clear)", r);
	drainer_end(t);
	give_back("prep", r, 1);
}

/*
 * B, the waiter's side: asyncpool_region_wait, armed, held after its
 * announcement and its look (it found the ring empty); a release then
 * must see the announcement and wake it, which moves the word.
 */
static void case_announce(int r)
{
	uint32_t before, after;
	pthread_t w;

	take_all();
	atomic_fetch_and(refill, ~(uint32_t)1);
	atomic_store(&release_drainer, 0);
	atomic_store(&drainer_at, 0);
	atomic_store(&hold_at, AP_TS_RECV_WAITER_LOOKED);
	waiter_start(&w, 1);
	while (!atomic_load(&drainer_at))
		sched_yield();
	before = atomic_load(refill);
	asyncpool_lease_release(&held[0]);
	after = atomic_load(refill);
	ok((before & 1) && after != before,
	   "announce %d: a release after the wait's look saw its announcement and woke it "
	   "(the word %#x, then %#x)", r, before, after);
	atomic_store(&release_drainer, 1);
	if (after == before) {
		/* it sleeps once it let its announcement go */
		while (!atomic_load(&wait_done) && !(atomic_load(refill) & 1))
			sched_yield();
		rescue("announce", r);
	}
	pthread_join(w, NULL);
	is_int(wait_rc, 0, "announce %d: the wait says a buffer is there", r);
	give_back("announce", r, 1);
}

static struct io_uring_sqe prep_sqe;
static int prep_rc;

static void *preparer(void *arg)
{
	(void)arg;
	role = WAITER;
	ap_test_tso_armed = 1;
	prep_rc = asyncpool_region_prep_wait(reg, &prep_sqe);
	ap_test_tso_flush();
	ap_test_tso_armed = 0;
	return NULL;
}

/* The same for asyncpool_region_prep_wait: its SQE's value, stale. */
static void case_prep_announce(int r)
{
	pthread_t t;

	take_all();
	atomic_fetch_and(refill, ~(uint32_t)1);
	atomic_store(&release_drainer, 0);
	atomic_store(&drainer_at, 0);
	atomic_store(&hold_at, AP_TS_RECV_WAITER_LOOKED);
	memset(&prep_sqe, 0, sizeof(prep_sqe));
	prep_rc = -1;
	if (pthread_create(&t, NULL, preparer, NULL))
		bail_out("pthread_create");
	while (!atomic_load(&drainer_at))
		sched_yield();
	asyncpool_lease_release(&held[0]);
	atomic_store(&release_drainer, 1);
	pthread_join(t, NULL);
	is_int(prep_rc, 0, "prep-announce %d: prep_wait", r);
	ok((uint32_t)prep_sqe.off != atomic_load(refill),
	   "prep-announce %d: a release after the prep's look saw its announcement and moved "
	   "the word: the SQE's value %#x is not the word's %#x, its wait completes at once", r,
	   (uint32_t)prep_sqe.off, atomic_load(refill));
	give_back("prep-announce", r, 1);
}

int main(void)
{
	struct asyncpool_proactor *p;
	struct io_uring_sqe sqe;
	bool prep;

	tap_watchdog(60);
	ut_ring_init(&ring, 64);
	plan(5 + ROUNDS * (3 + 3 + 3 + 3 + 3));
	reg = ut_uring_region(&ring, &p, BS, NBUF, ASYNCPOOL_ACCESS_WRITE,
			      "register WRITE: a ring of 4 buffers");
	group = asyncpool_region_buffer_group(reg);
	if (group < 0 || tcp_loopback_pair(&tx, &rx))
		bail_out("buffer group %d, or no TCP loopback connection", group);
	/* The refill word's address, from an SQE (IORING_OP_FUTEX_WAIT, 6.7). */
	memset(&sqe, 0, sizeof(sqe));
	prep = asyncpool_region_prep_wait(reg, &sqe) == 0;
	if (prep)
		refill = (_Atomic uint32_t *)(uintptr_t)sqe.addr;
	ut_arm_recv(&ring, rx, group, 0);
	armed = true;
	ap_test_hook_stall = hook;
	for (int r = 0; r < ROUNDS; r++) {
		case_pending(r);
		case_wait(r);
		if (prep) {
			case_prep(r);
			case_announce(r);
			case_prep_announce(r);
		} else {
			skip(9, "round %d: no IORING_OP_FUTEX_WAIT here (Linux 6.7): no prep_wait, "
			     "and the refill word unknown", r);
		}
	}
	ap_test_hook_stall = NULL;
	is_int(kernel_held(), NBUF, "all %d buffers in the ring", NBUF);
	close(tx);
	if (armed) {
		/* the multishot receive ends with the EOF */
		struct io_uring_cqe *cqe = ut_wait(&ring);

		io_uring_cqe_seen(&ring, cqe);
	}
	close(rx);
	asyncpool_region_unref(reg);
	is_int(asyncpool_proactor_destroy(p), 0, "destroy");
	io_uring_queue_exit(&ring);
	return done_testing();
}
