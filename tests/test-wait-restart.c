/* SPDX-License-Identifier: MIT */
/*
 * asyncpool_acquire_wait(3) and signals (issue 21, item 8): with a
 * handler installed with SA_RESTART the wait goes on to the same
 * deadline (a timed FUTEX_WAIT is never restarted by the kernel: it used
 * to return -EINTR); without SA_RESTART it returns -EINTR.  Local and
 * shared pools (the shared ones sleep in 50 ms slices), finite and
 * infinite waits.  A thread sends SIGUSR1 to the waiter every 10 ms for
 * as long as the waiter is announced on the wait word, so that some
 * signal lands in the sleep itself; in the infinite SA_RESTART case it
 * releases the buffer after 5 signals.
 *
 * A one-shot handler (SA_RESETHAND, without SA_RESTART) is reset to
 * SIG_DFL as it is delivered: the wait must still end with -EINTR,
 * although no handler is left to look at afterwards (it went on, and an
 * infinite wait hung).  One signal only (a second would kill us), sent
 * while the waiter sleeps in futex(2) (/proc/self/task/TID/syscall); if
 * the waiter goes back to sleep after the handler, the sender releases
 * a buffer, so that the test ends (with a buffer, not -EINTR).
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <asyncpool.h>
#include "tap.h"
#include "testutil.h"
#include "hooks.h"

#define N  1
#define BS 64

static atomic_int handled;

static void on_usr1(int sig)
{
	(void)sig;
	atomic_fetch_add(&handled, 1);
}

struct kicker {
	pthread_t waiter;
	struct asyncpool *pool;
	struct asyncpool_lease *held;   /* released after 5 signals, or NULL */
	atomic_bool stop;
	int sent;
};

static void *kick(void *arg)
{
	struct kicker *k = arg;

	while (!atomic_load(&k->stop)) {
		if (atomic_load(&k->pool->fl.line->wait) & AP_WAIT_WAITERS) {
			pthread_kill(k->waiter, SIGUSR1);
			if (++k->sent == 5 && k->held)
				asyncpool_lease_release(k->held);
		}
		usleep(10000);
	}
	return NULL;
}

static void one(const char *kind, struct asyncpool *pool, bool restart, bool infinite)
{
	struct sigaction sa;
	struct asyncpool_lease held, got;
	struct kicker k = { .waiter = pthread_self(), .pool = pool };
	pthread_t t;
	int rc, want;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_usr1;
	sa.sa_flags = restart ? SA_RESTART : 0;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGUSR1, &sa, NULL) || asyncpool_acquire(pool, &held))
		bail_out("setup");
	k.held = restart && infinite ? &held : NULL;
	atomic_store(&handled, 0);
	if (pthread_create(&t, NULL, kick, &k))
		bail_out("pthread_create");
	rc = asyncpool_acquire_wait(pool, &got, infinite ? -1 : 300 * 1000000);
	atomic_store(&k.stop, true);
	pthread_join(t, NULL);
	want = !restart ? -EINTR : infinite ? 0 : -ETIMEDOUT;
	is_int(rc, want, "%s pool, %s wait, handler %s SA_RESTART: %s after %d signal(s)", kind,
	       infinite ? "infinite" : "300 ms", restart ? "with" : "without",
	       want == 0 ? "a buffer" : want == -EINTR ? "-EINTR" : "-ETIMEDOUT",
	       atomic_load(&handled));
	if (rc == 0)
		asyncpool_lease_release(&got);
	if (!k.held || k.sent < 5)
		asyncpool_lease_release(&held);
	if (asyncpool_available(pool) != N)
		bail_out("a buffer is missing");
}

struct oneshot {
	pid_t tid;                      /* the waiter's */
	pthread_t waiter;
	struct asyncpool_lease *held;
	atomic_bool returned;
	bool released;
};

/* Is thread tid asleep in futex(2)?  /proc says the system call it is
 * in; -1 if it cannot (a kernel without it). */
static int in_futex(pid_t tid)
{
	char path[64], buf[32] = "";
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/task/%d/syscall", (int)tid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	if (!fgets(buf, sizeof(buf), f))
		buf[0] = 0;
	fclose(f);
	return atoi(buf) == SYS_futex;
}

static void *kick_once(void *arg)
{
	struct oneshot *o = arg;

	/* Bounded by the waiter's return too: a test must not hang. */
	while (in_futex(o->tid) != 1)
		if (atomic_load(&o->returned))
			return NULL;
		else
			usleep(1000);
	pthread_kill(o->waiter, SIGUSR1);
	while (!atomic_load(&handled) && !atomic_load(&o->returned))
		usleep(1000);
	/* Handled: the waiter returns, or sleeps again (the defect). */
	while (!atomic_load(&o->returned)) {
		if (in_futex(o->tid)) {
			asyncpool_lease_release(o->held);
			o->released = true;
			break;
		}
		usleep(1000);
	}
	return NULL;
}

static void oneshot(const char *kind, struct asyncpool *pool, bool infinite)
{
	struct sigaction sa;
	struct asyncpool_lease held, got;
	struct oneshot o = { .tid = (pid_t)syscall(SYS_gettid), .waiter = pthread_self(),
			     .held = &held };
	pthread_t t;
	int rc;

	if (in_futex(o.tid) < 0) {
		skip(1, "no /proc/self/task/TID/syscall to see the waiter asleep");
		return;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_usr1;
	sa.sa_flags = SA_RESETHAND;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGUSR1, &sa, NULL) || asyncpool_acquire(pool, &held))
		bail_out("setup");
	atomic_store(&handled, 0);
	if (pthread_create(&t, NULL, kick_once, &o))
		bail_out("pthread_create");
	rc = asyncpool_acquire_wait(pool, &got, infinite ? -1 : INT64_C(30) * 1000000000);
	atomic_store(&o.returned, true);
	pthread_join(t, NULL);
	is_int(rc, -EINTR, "%s pool, %s wait, one-shot handler (SA_RESETHAND) without "
	       "SA_RESTART: -EINTR after %d signal(s)", kind, infinite ? "infinite" : "30 s",
	       atomic_load(&handled));
	if (rc == 0)
		asyncpool_lease_release(&got);
	if (!o.released)
		asyncpool_lease_release(&held);
	if (asyncpool_available(pool) != N)
		bail_out("a buffer is missing");
}

static void all(const char *kind, struct asyncpool *pool)
{
	for (int restart = 1; restart >= 0; restart--)
		for (int infinite = 0; infinite < 2; infinite++)
			one(kind, pool, restart, infinite);
	for (int infinite = 0; infinite < 2; infinite++)
		oneshot(kind, pool, infinite);
}

int main(void)
{
	struct asyncpool_shared_options o;
	struct asyncpool_shared *sp;
	struct asyncpool_proactor *p;
	struct asyncpool *pool;

	plan(12);
	alarm(60);
	if (asyncpool_proactor_create_memory(&p))
		bail_out("proactor");
	pool = make_pool(p, BS, N, 0);
	all("local", pool);
	asyncpool_destroy(pool);
	asyncpool_proactor_destroy(p);

	shared_options(&o, BS, N);
	if (asyncpool_shared_create(&o, &sp))
		bail_out("shared_create");
	all("shared", asyncpool_shared_pool(sp));
	asyncpool_shared_close(sp);
	return done_testing();
}
