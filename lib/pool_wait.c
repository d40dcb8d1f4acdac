/* SPDX-License-Identifier: MIT */
/*
 * Waiting for a buffer (the protocol: wait_word.h): a blocking acquire
 * with a timeout, an IORING_OP_FUTEX_WAIT on the same word for an
 * io_uring event loop, and an eventfd for epoll programs.
 */
#include "pool_internal.h"
#include "pool_pop.h"
#include "pool_takeover.h"
#include "pool_wait.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/eventfd.h>

#ifdef HAVE_LIBURING
#include <liburing.h>
#include "uring_futex.h"
#endif

/*
 * A holder that dies releases nothing, so no futex wake tells a waiter
 * that its buffers can come back: a waiter on a pool with attachments
 * (attach.c: lock_fd >= 0) sleeps at most this long, then looks again,
 * and its look reclaims (ap_pool_pop, at most once per
 * AP_RECLAIM_AUTO_MS, which must not be longer).  50 ms: a dead
 * holder's buffers reach a waiter at most 50 ms after the quarantine,
 * small beside the 5 s default; a waiter costs 20 wake-ups a second,
 * each a failed acquire and a scan of 3 to 25 us (reclaim.c), under
 * 0.1% of a CPU.  A local pool, or one over raw memory, has no dead
 * holder to reclaim from: its waiters sleep until woken.
 */
_Static_assert(AP_WAIT_SLICE_MS >= AP_RECLAIM_AUTO_MS, "every slice may reclaim");

#ifdef ASYNCPOOL_TEST_HOOKS
/* The test-hook build's slice (0: AP_WAIT_SLICE_MS), which a test makes
 * long so that no slice hides a lost wake (tests/test-wake-latency). */
_Atomic uint32_t ap_test_hook_slice_ms;
#define AP_SLICE_MS() (atomic_load_explicit(&ap_test_hook_slice_ms, memory_order_relaxed) ?: \
		       AP_WAIT_SLICE_MS)
#else
#define AP_SLICE_MS() AP_WAIT_SLICE_MS
#endif

/* The end of the next sleep: deadline (NULL: none), or a slice sooner if sliced. */
const struct timespec *ap_sleep_until(bool sliced, const struct timespec *deadline,
				      struct timespec *slice)
{
	if (!sliced)
		return deadline;
	ap_deadline_after((int64_t)AP_SLICE_MS() * 1000000, slice);
	if (deadline && (deadline->tv_sec < slice->tv_sec ||
			 (deadline->tv_sec == slice->tv_sec && deadline->tv_nsec < slice->tv_nsec)))
		return deadline;
	return slice;
}

/*
 * A wait interrupted by a signal handler: go on (true) or return -EINTR.
 * asyncpool_acquire_wait(3) promises that a handler installed with
 * SA_RESTART does not end the wait.  The kernel restarts an untimed
 * FUTEX_WAIT after such a handler, but never a timed one (it returns
 * EINTR whatever the flags), and our sleeps are timed: the deadline, or
 * the slices of a pool with attachments, infinite waits included.  It
 * does not say which signal came, so look at every handler this thread
 * could have run: a signal it blocks cannot interrupt it, and one left
 * at SIG_DFL or SIG_IGN runs no handler (a stop and continue restarts
 * the sleep in the kernel); nor do the signals of faults (SIGSEGV,
 * SIGBUS, SIGFPE, SIGILL, SIGTRAP), raised by an instruction, which a
 * sanitizer or a JIT handles.  About 65 sigaction(2) calls: 6.6 us with
 * warm caches, 8.4 us cold (bench/pipeline/wait-start, 1.12).  Reading
 * the caught set from SigCgt of /proc/thread-self/status (open, read,
 * close) and asking only those was measured and left out: 5.4 us warm
 * but 15.7 us cold, as a wait begins in a pipeline stage after other
 * work (a worker on asyncpool_channel_recv_item_wait went from 72 to
 * 83 us paced p50): the kernel's /proc path is long and cold, 65 calls
 * of one short path are not.
 *
 * Asked twice: before a wait begins, and after an interruption.  A
 * one-shot handler (SA_RESETHAND) is reset to SIG_DFL as it is
 * delivered, so after the interruption the handler that ran may be
 * gone: without SA_RESTART before, the wait would go on (an infinite
 * one for ever).  So the wait goes on only if every handler had
 * SA_RESTART when the wait began and has it after.  Not a snapshot of
 * the instant of delivery, which the kernel does not give: a handler
 * another thread installs or removes during the wait can still be
 * missed, and then the wait goes on as it would have without it.
 */
bool ap_handlers_restart(void)
{
	sigset_t blocked;

	if (pthread_sigmask(SIG_BLOCK, NULL, &blocked))
		sigemptyset(&blocked);
	for (int sig = 1; sig < NSIG; sig++) {
		struct sigaction sa;

		if (sig == SIGSEGV || sig == SIGBUS || sig == SIGFPE || sig == SIGILL ||
		    sig == SIGTRAP)
			continue;
		if (sigismember(&blocked, sig) == 1 || sigaction(sig, NULL, &sa))
			continue;       /* blocked, or reserved by the C library */
		if (!(sa.sa_flags & SA_SIGINFO) &&
		    (sa.sa_handler == SIG_DFL || sa.sa_handler == SIG_IGN))
			continue;
		if (!(sa.sa_flags & SA_RESTART))
			return false;
	}
	return true;
}

AP_EXPORT int asyncpool_acquire_wait(struct asyncpool *pool, struct asyncpool_lease *out,
				     int64_t timeout_ns)
{
	struct ap_pool_head *line;
	struct timespec deadline, slice;
	bool interrupted = false;
	bool restart;
	int rc;

	if (!out)
		return -EINVAL;
	if (!pool) {
		memset(out, 0, sizeof(*out));
		return -EINVAL;
	}
	/* An empty freelist brings the other threads' caches back first. */
	rc = asyncpool_acquire(pool, out);
	if (rc != -ENOBUFS)
		return rc;
	if (timeout_ns == 0)
		return -ETIMEDOUT;
	if (timeout_ns > 0)
		ap_deadline_after(timeout_ns, &deadline);
	line = pool->fl.line;
	/* Before the announcement and the look: about 7 us (65 system
	 * calls, measured), which a release meanwhile does not wait for. */
	restart = ap_handlers_restart();
	/* Releases of this process go to the freelist while we wait. */
	ap_cache_wait_begin(pool);
	for (;;) {
		uint32_t v = ap_wait_announce(line);

		/* The announcement before the look at the list (wait_word.h);
		 * the look reclaims from dead holders (ap_pool_pop). */
		atomic_thread_fence(memory_order_seq_cst);
		rc = asyncpool_acquire(pool, out);
		if (rc != -ENOBUFS)
			break;
		if (interrupted) {
			rc = -EINTR;
			break;
		}
		if (timeout_ns > 0 && ap_deadline_passed(&deadline)) {
			rc = -ETIMEDOUT;
			break;
		}
		AP_TEST_STALL(AP_TS_WAITER_LOOKED);
		if (ap_futex_wait(&line->wait, v,
				  ap_sleep_until(pool->lock_fd >= 0,
						 timeout_ns > 0 ? &deadline : NULL, &slice),
				  pool->fl.shared) == -EINTR && !(restart && ap_handlers_restart()))
			interrupted = true;     /* one more look, then -EINTR */
	}
	ap_cache_wait_end(pool);
	return rc;
}

/* ---- IORING_OP_FUTEX_WAIT ---- */

#ifdef HAVE_LIBURING
static pthread_once_t futex_probe_once = PTHREAD_ONCE_INIT;
static bool futex_op_ok;

static void futex_probe(void)
{
	struct io_uring_probe *p = io_uring_get_probe();

	if (p) {
		futex_op_ok = io_uring_opcode_supported(p, AP_IORING_OP_FUTEX_WAIT);
		io_uring_free_probe(p);
	}
}
#endif

int ap_prep_futex_wait(struct io_uring_sqe *sqe, _Atomic uint32_t *word, uint32_t v,
		       bool shared)
{
#ifdef HAVE_LIBURING
	pthread_once(&futex_probe_once, futex_probe);
	if (!futex_op_ok)
		return -EOPNOTSUPP;
	memset(sqe, 0, sizeof(*sqe));
	sqe->opcode = AP_IORING_OP_FUTEX_WAIT;
	sqe->fd = FUTEX2_SIZE_U32 | (shared ? 0 : FUTEX2_PRIVATE);
	sqe->addr = (uint64_t)(uintptr_t)word;
	sqe->off = v;           /* addr2: the value */
	sqe->addr3 = FUTEX_BITSET_MATCH_ANY;
	return 0;
#else
	(void)sqe;
	(void)word;
	(void)v;
	(void)shared;
	return -EOPNOTSUPP;
#endif
}

AP_EXPORT int asyncpool_prep_wait(struct asyncpool *pool, struct io_uring_sqe *sqe)
{
#ifdef HAVE_LIBURING
	struct ap_pool_head *line;
	uint32_t v;

	if (!pool || !sqe)
		return -EINVAL;
	pthread_once(&futex_probe_once, futex_probe);
	if (!futex_op_ok)
		return -EOPNOTSUPP;
	line = pool->fl.line;
	(void)ap_cache_flush_others(pool, false);
	v = ap_wait_announce(line);
	atomic_thread_fence(memory_order_seq_cst);
	/*
	 * A buffer is there already: a value the word cannot hold (bit 0
	 * set is all it can have until a release bumps it), so that the
	 * wait completes at once with -EAGAIN.
	 */
	if (AP_HEAD_INDEX(atomic_load_explicit(&line->head, memory_order_acquire)) != AP_FL_END)
		v &= ~AP_WAIT_WAITERS;
	return ap_prep_futex_wait(sqe, &line->wait, v, pool->fl.shared);
#else
	/* Bad arguments first, as with liburing: the same errno everywhere. */
	return !pool || !sqe ? -EINVAL : -EOPNOTSUPP;
#endif
}

/* ---- the eventfd ---- */

/*
 * A thread that waits on the futex for the eventfd's owner: a release in
 * any process of a shared pool wakes it, and it makes the eventfd
 * readable.  It stays announced, so every release that reaches the
 * freelist wakes it (one futex wake system call per release while a
 * wait fd exists).  On a pool with attachments it also wakes every
 * slice and, while the pool is empty, reclaims what dead holders left
 * (as asyncpool_acquire_wait does, through the pop's ap_pool_refund):
 * their buffers make the fd readable.
 */
struct ap_wait_fd {
	int fd;
	pid_t pid;              /* the process whose thread it is */
	_Atomic bool stop;
	pthread_t thread;
	struct asyncpool *pool;
};

static void *waker_main(void *arg)
{
	struct ap_wait_fd *w = arg;
	struct asyncpool *pool = w->pool;
	struct ap_pool_head *line = pool->fl.line;
	struct timespec slice;

	for (;;) {
		uint32_t v = ap_wait_announce(line);
		bool empty;

		atomic_thread_fence(memory_order_seq_cst);
		if (atomic_load_explicit(&w->stop, memory_order_acquire))
			break;
		AP_TEST_STALL(AP_TS_WAKER_LOOK);
		empty = AP_HEAD_INDEX(atomic_load_explicit(&line->head, memory_order_acquire)) ==
			AP_FL_END;
		if (empty && ap_pool_refunded(pool, -ENOBUFS))
			empty = false;
		/*
		 * While the fd exists every cache is bypassed, but the release
		 * of a lent buffer still goes to its owner's inbox (pool_owner.c),
		 * not to the freelist: it wakes this thread, which settles it
		 * to the freelist, or the fd would stay silent.
		 */
		if (empty && pool->fl.lazy && ap_cache_flush_others(pool, false) > 0)
			empty = false;
		if (!empty)
			(void)eventfd_write(w->fd, 1);
		(void)ap_futex_wait(&line->wait, v,
				    ap_sleep_until(pool->lock_fd >= 0, NULL, &slice),
				    pool->fl.shared);
	}
	return NULL;
}

static pthread_mutex_t wait_fd_lock = PTHREAD_MUTEX_INITIALIZER;

static void wait_fd_close(struct asyncpool *pool);

AP_EXPORT int asyncpool_wait_fd(struct asyncpool *pool)
{
	struct ap_wait_fd *w;
	sigset_t all, old;
	int rc;

	if (!pool)
		return -EINVAL;
	pthread_mutex_lock(&wait_fd_lock);
	w = pool->wait_fd;
	if (w && w->pid == getpid()) {
		rc = w->fd;
		goto out;
	}
	rc = -ENOMEM;
	w = calloc(1, sizeof(*w));
	if (!w)
		goto out;
	w->fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (w->fd < 0) {
		rc = errno == EMFILE || errno == ENFILE ? -errno : -ENOMEM;
		free(w);
		goto out;
	}
	w->pid = getpid();
	w->pool = pool;
	/* Releases of this process go to the freelist while the fd exists. */
	ap_cache_wait_begin(pool);
	/* The thread takes no signals of the application's. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = -pthread_create(&w->thread, NULL, waker_main, w);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc) {
		ap_cache_wait_end(pool);
		close(w->fd);
		free(w);
		rc = rc == -EAGAIN ? -EAGAIN : -ENOMEM;
		goto out;
	}
	pool->wait_fd = w;
	/* pool.c is below this file: it closes the fd through this hook. */
	pool->wait_fd_close = wait_fd_close;
	rc = w->fd;
out:
	pthread_mutex_unlock(&wait_fd_lock);
	return rc;
}

/* The hook of asyncpool_destroy(): stop the thread and close the eventfd. */
static void wait_fd_close(struct asyncpool *pool)
{
	struct ap_wait_fd *w = pool->wait_fd;

	if (!w)
		return;
	pool->wait_fd = NULL;
	if (w->pid == getpid()) {
		AP_TEST_STALL(AP_TS_WAIT_FD_STOP);
		atomic_store_explicit(&w->stop, true, memory_order_release);
		/* Change the word so that the thread cannot sleep on it, then wake it. */
		atomic_fetch_add_explicit(&pool->fl.line->wait, 2, memory_order_seq_cst);
		ap_futex_wake_all(&pool->fl.line->wait, pool->fl.shared);
		pthread_join(w->thread, NULL);
		ap_cache_wait_end(pool);
	}
	/* In a child after fork the thread did not come along: the copy of
	 * the fd is closed all the same. */
	close(w->fd);
	free(w);
}
