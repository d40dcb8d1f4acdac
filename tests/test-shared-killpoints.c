/* SPDX-License-Identifier: MIT */
/*
 * A process killed at each test-hook point of each operation (issue 11):
 * a child opens the shared pool, runs one kind of operation (single,
 * cached, bulk, cached bulk, hand-off by token) and SIGKILLs itself the
 * k-th time it reaches point P (lib/freelist.h: a pop's step written,
 * after its head CAS, after marking one buffer of a chain, a release's
 * claim, a chain linked before its head CAS, a flush's uncache).  Then
 * the parent reclaims, and every buffer must be back: available ==
 * capacity, asyncpool_check() == 0, every state word FREE.
 */
#include "config.h"

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <asyncpool.h>
#include "tap.h"
#include "testutil.h"
#include "hooks.h"
#include "layout-util.h"

#define N      16
#define BS     64
#define ROUNDS 2
#define KMAX   3

static const char *const points[AP_TP_COUNT] = {
	"pop step recorded", "pop after head CAS", "chain pop marked one",
	"release claimed", "push linked", "flush uncached",
};
static const char *const ops[] = { "single", "cached", "bulk", "cached bulk", "token" };
#define OPS (int)(sizeof(ops) / sizeof(ops[0]))

static enum ap_test_point kill_at;
static unsigned kill_after, seen;

static void hook(enum ap_test_point p)
{
	if (p == kill_at && ++seen == kill_after)
		raise(SIGKILL);
}

static void child(int fd, int op)
{
	struct asyncpool_shared *sp;
	struct asyncpool *pool;
	struct asyncpool_lease l[6];

	if (asyncpool_shared_open_fd(fd, &sp))
		_exit(2);
	pool = asyncpool_shared_pool(sp);
	if ((op == 1 || op == 3) && asyncpool_set_cache(pool, 4))
		_exit(2);
	ap_test_hook_point = hook;
	for (int r = 0; r < ROUNDS; r++) {
		switch (op) {
		case 0: case 1:
			for (int j = 0; j < 6; j++)
				if (asyncpool_acquire(pool, &l[j]))
					_exit(3);
			for (int j = 0; j < 6; j++)
				asyncpool_lease_release(&l[j]);
			break;
		case 2: case 3:
			if (asyncpool_acquire_bulk(pool, l, 5))
				_exit(3);
			asyncpool_release_bulk(l, 5);
			break;
		case 4:
			for (int j = 0; j < 2; j++) {
				struct asyncpool_lease a;

				if (asyncpool_acquire(pool, &l[j]) ||
				    asyncpool_lease_adopt_token(pool, asyncpool_lease_token(&l[j]), &a) ||
				    asyncpool_release_token(pool, asyncpool_lease_token(&a)))
					_exit(3);
			}
			break;
		}
		if (op == 1 || op == 3)
			asyncpool_cache_flush(pool);
	}
	ap_test_hook_point = NULL;
	asyncpool_shared_close(sp);
	_exit(0);
}

int main(void)
{
	struct asyncpool_shared_options o;
	struct asyncpool_shared *sp;
	struct asyncpool *pool;
	unsigned kills = 0, clean = 0;

	plan(AP_TP_COUNT * OPS * KMAX + 1);
	shared_options(&o, BS, N);
	if (asyncpool_shared_create(&o, &sp))
		bail_out("shared_create");
	pool = asyncpool_shared_pool(sp);
	if (asyncpool_set_quarantine(pool, 0))
		bail_out("set_quarantine");
	for (int p = 0; p < AP_TP_COUNT; p++) {
		for (int op = 0; op < OPS; op++) {
			for (unsigned k = 1; k <= KMAX; k++) {
				int status, rc;
				pid_t pid;

				kill_at = (enum ap_test_point)p;
				kill_after = k;
				seen = 0;
				fflush(stdout);
				pid = fork();
				if (pid < 0)
					bail_out("fork");
				if (pid == 0)
					child(asyncpool_shared_fd(sp), op);
				if (waitpid(pid, &status, 0) != pid)
					bail_out("waitpid");
				if (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
					kills++;
				else if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
					clean++;
				rc = asyncpool_reclaim(pool);
				ok(rc >= 0 && asyncpool_available(pool) == N && asyncpool_check(pool) == 0 &&
				   layout_not_free(sp, N) == 0,
				   "%s, killed at \"%s\" #%u (%s): reclaim %d, all %u back, check clean",
				   ops[op], points[p], k,
				   WIFSIGNALED(status) ? "killed" : "not reached", rc,
				   (unsigned)asyncpool_available(pool));
			}
		}
	}
	diag("%u processes killed at a hook point, %u ran to the end", kills, clean);
	is_int(kills + clean, AP_TP_COUNT * OPS * KMAX, "every child was killed or finished");
	asyncpool_shared_close(sp);
	return done_testing();
}
