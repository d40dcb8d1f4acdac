/* SPDX-License-Identifier: MIT */
/*
 * Crash safety (issue 11): worker processes on one shared pool are
 * SIGKILLed at random moments and restarted, while a survivor reclaims
 * what the dead held.  Workers acquire and release singly and in bulk,
 * half with per-thread caches, and hand leases to each other by token.
 *
 * Each worker stamps the buffers it holds: owner[idx] is set by CAS from
 * 0 to the worker's id after an acquire and back before a release, and
 * the buffer holds the id.  A buffer whose owner is a live worker must
 * never be handed to another (counted as a violation); one whose owner
 * is a worker the parent reaped may be (its lease was reclaimed).
 *
 * At the end every buffer is back: the live workers release what they
 * hold, the tokens in the mailbox are released, one reclaim, and then
 * available == capacity, asyncpool_check() == 0, and no attachment left
 * but the parent's.
 *
 * Kills: ASYNCPOOL_STRESS_ITERATIONS / 100 (1000 by default).
 */
#include "config.h"

#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <asyncpool.h>
#include "tap.h"
#include "testutil.h"
#include "layout-util.h"

#define BUFFERS  64
#define BS       64
#define WORKERS  4
#define HOLD     12
#define MAILBOX  8
#define MAX_IDS  (1u << 16)

struct control {
	_Atomic uint32_t owner[BUFFERS];
	_Atomic uint64_t mailbox[MAILBOX];
	_Atomic unsigned char dead[MAX_IDS];
	atomic_int stop;
	atomic_long violations, stamp_errors, errors, ops, stale_tokens, takeovers;
	atomic_int first_error;
};

static struct control *ctl;
static char name[128];
static uint64_t rng;

static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static void error(int rc)
{
	int zero = 0;

	atomic_compare_exchange_strong(&ctl->first_error, &zero, rc);
	atomic_fetch_add(&ctl->errors, 1);
}

static volatile uint64_t *stamp_of(struct asyncpool_lease *l)
{
	return asyncpool_span_ptr(l->span);
}

/* The buffer is ours now: owner 0 (or a reaped worker's) -> id. */
static void own(struct asyncpool_lease *l, uint32_t id)
{
	uint32_t idx = l->buffer_index, was = 0;

	while (!atomic_compare_exchange_strong(&ctl->owner[idx], &was, id)) {
		if (!atomic_load(&ctl->dead[was % MAX_IDS])) {
			atomic_fetch_add(&ctl->violations, 1);
			return;
		}
		atomic_fetch_add(&ctl->takeovers, 1);
	}
	*stamp_of(l) = id;
}

/* Before a release or a hand-off: the buffer was ours all along. */
static void disown(struct asyncpool_lease *l, uint32_t id)
{
	uint32_t mine = id;

	if (*stamp_of(l) != id)
		atomic_fetch_add(&ctl->stamp_errors, 1);
	if (!atomic_compare_exchange_strong(&ctl->owner[l->buffer_index], &mine, 0))
		atomic_fetch_add(&ctl->violations, 1);
}

static void worker(uint32_t id, bool cached)
{
	struct asyncpool_shared *sp;
	struct asyncpool *pool;
	struct asyncpool_lease held[HOLD];
	unsigned n = 0;
	int rc;

	rng = 0x9e3779b97f4a7c15ull * id | 1;
	rc = asyncpool_shared_open_named(name, &sp);
	if (rc) {
		error(rc);
		_exit(1);
	}
	pool = asyncpool_shared_pool(sp);
	if (cached && (rc = asyncpool_set_cache(pool, 8)))
		error(rc);
	while (!atomic_load_explicit(&ctl->stop, memory_order_relaxed)) {
		unsigned op = rnd() % 8, k;
		uint64_t t;

		switch (op) {
		case 0: case 1:
			if (n == HOLD)
				break;
			rc = asyncpool_acquire(pool, &held[n]);
			if (rc == 0)
				own(&held[n++], id);
			else if (rc != -ENOBUFS)
				error(rc);
			break;
		case 2:
			k = 2 + rnd() % 3;
			if (n + k > HOLD)
				break;
			rc = asyncpool_acquire_bulk(pool, &held[n], k);
			if (rc == 0)
				for (unsigned j = 0; j < k; j++)
					own(&held[n++], id);
			else if (rc != -ENOBUFS)
				error(rc);
			break;
		case 3: case 4:
			if (!n)
				break;
			k = rnd() % n;
			disown(&held[k], id);
			asyncpool_lease_release(&held[k]);
			held[k] = held[--n];
			break;
		case 5:
			k = n < 3 ? n : 1 + rnd() % 3;
			for (unsigned j = 0; j < k; j++)
				disown(&held[n - k + j], id);
			asyncpool_release_bulk(&held[n - k], k);
			n -= k;
			break;
		case 6:         /* hand one over by token */
			if (!n)
				break;
			k = rnd() % n;
			t = asyncpool_lease_token(&held[k]);
			disown(&held[k], id);
			for (unsigned j = 0; j < MAILBOX; j++) {
				uint64_t empty = 0;

				if (atomic_compare_exchange_strong(&ctl->mailbox[j], &empty, t)) {
					held[k] = held[--n];
					t = 0;
					break;
				}
			}
			if (t) {
				asyncpool_lease_release(&held[k]);
				held[k] = held[--n];
			}
			break;
		case 7:         /* take one */
			if (n == HOLD)
				break;
			t = atomic_exchange(&ctl->mailbox[rnd() % MAILBOX], 0);
			if (!t)
				break;
			rc = asyncpool_lease_adopt_token(pool, t, &held[n]);
			if (rc == 0)
				own(&held[n++], id);
			else if (rc == -ESTALE)
				atomic_fetch_add(&ctl->stale_tokens, 1);   /* its giver died */
			else
				error(rc);
			break;
		}
		/* Now and then leave the CPU: a SIGKILLed worker dies only
		 * when it runs, and the killer waits for that. */
		if ((atomic_fetch_add_explicit(&ctl->ops, 1, memory_order_relaxed) & 1023) == 0)
			usleep(100);
	}
	while (n) {
		disown(&held[--n], id);
		asyncpool_lease_release(&held[n]);
	}
	asyncpool_shared_close(sp);
	_exit(0);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Attachments not FREE, read from the layout (lib/pool_layout.h). */
static int attachments(struct asyncpool_shared *sp)
{
	struct ap_layout_geometry g;
	const struct ap_attach *a;
	int n = 0;

	ap_layout_geometry(BUFFERS, true, &g);
	a = (const void *)((const char *)asyncpool_shared_shm(sp)->base + g.attach_offset);
	for (uint32_t s = 0; s < AP_ATTACH_SLOTS; s++)
		n += AP_ATT_STATE(atomic_load(&a[s].life)) != AP_ATT_FREE;
	return n;
}

static pid_t spawn(uint32_t id)
{
	pid_t pid = fork();

	if (pid < 0)
		bail_out("fork");
	if (pid == 0)
		worker(id, id % 2);
	return pid;
}

int main(void)
{
	struct asyncpool_shared_options o;
	struct asyncpool_shared *sp;
	struct asyncpool *pool;
	pid_t pids[WORKERS];
	uint32_t ids[WORKERS], next_id = 1;
	long kills = stress_iterations(100000) / 100, reclaimed = 0, stale = 0;
	uint64_t *lat, t_sleep = 0, t_wait = 0, t_spawn = 0;
	int rc, clean = 0, early_exits = 0;

	if (kills < 1)
		kills = 1;
	if (kills > MAX_IDS - WORKERS - 2)
		kills = MAX_IDS - WORKERS - 2;
	plan(14);
	ctl = mmap(NULL, sizeof(*ctl), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (ctl == MAP_FAILED)
		bail_out("mmap");
	test_shm_name(name, sizeof(name), "crash");
	shared_options(&o, BS, BUFFERS);
	o.name = name;
	o.mode = 0600;
	rc = asyncpool_shared_create(&o, &sp);
	if (rc)
		bail_out("shared_create: %d", rc);
	pool = asyncpool_shared_pool(sp);
	is_int(asyncpool_set_quarantine(pool, 0), 0, "set_quarantine: 0 for the test");

	for (int w = 0; w < WORKERS; w++) {
		ids[w] = next_id++;
		pids[w] = spawn(ids[w]);
	}
	lat = calloc((size_t)kills, sizeof(*lat));
	if (!lat)
		bail_out("calloc");
	rng = 0x2545f4914f6cdd1dull;
	for (long k = 0; k < kills; k++) {
		int w = (int)(rnd() % WORKERS), status;
		uint64_t t0;

		t0 = now_ns();
		usleep((useconds_t)(rnd() % 500));
		t_sleep += now_ns() - t0;
		t0 = now_ns();
		kill(pids[w], SIGKILL);
		if (waitpid(pids[w], &status, 0) != pids[w])
			bail_out("waitpid");
		t_wait += now_ns() - t0;
		if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGKILL)
			early_exits++;
		atomic_store(&ctl->dead[ids[w]], 1);
		t0 = now_ns();
		rc = asyncpool_reclaim(pool);
		lat[k] = now_ns() - t0;
		if (rc < 0)
			error(rc);
		else
			reclaimed += rc;
		ids[w] = next_id++;
		t0 = now_ns();
		pids[w] = spawn(ids[w]);
		t_spawn += now_ns() - t0;
	}
	diag("time: sleep %.2fs, kill+wait %.2fs, spawn %.2fs", t_sleep / 1e9, t_wait / 1e9,
	     t_spawn / 1e9);
	atomic_store(&ctl->stop, 1);
	for (int w = 0; w < WORKERS; w++) {
		int status;

		if (waitpid(pids[w], &status, 0) == pids[w] && WIFEXITED(status) &&
		    WEXITSTATUS(status) == 0)
			clean++;
	}
	/* Tokens nobody took: their leases are released, or gone with their giver. */
	for (int j = 0; j < MAILBOX; j++) {
		uint64_t t = atomic_exchange(&ctl->mailbox[j], 0);

		if (!t)
			continue;
		rc = asyncpool_release_token(pool, t);
		if (rc == -ESTALE)
			stale++;
		else if (rc)
			error(rc);
	}
	rc = asyncpool_reclaim(pool);
	ok(rc >= 0, "the last reclaim: %d", rc);
	if (rc > 0)
		reclaimed += rc;
	qsort(lat, (size_t)kills, sizeof(*lat), cmp_u64);
	diag("%ld kills, %ld operations, %ld buffers reclaimed, %ld takeovers of reclaimed leases, "
	     "%ld stale tokens (+%ld at the end)", kills, atomic_load(&ctl->ops), reclaimed,
	     atomic_load(&ctl->takeovers), atomic_load(&ctl->stale_tokens), stale);
	diag("reclaim latency: median %.1f us, worst %.1f us", lat[kills / 2] / 1e3,
	     lat[kills - 1] / 1e3);
	if (atomic_load(&ctl->first_error))
		diag("first error: %d", atomic_load(&ctl->first_error));
	is_int(early_exits, 0, "every worker died of the SIGKILL, none before");
	is_int(clean, WORKERS, "the last workers stopped cleanly");
	is_int(atomic_load(&ctl->errors), 0, "no undocumented error in any worker");
	is_int(atomic_load(&ctl->violations), 0, "no buffer held by two live workers");
	is_int(atomic_load(&ctl->stamp_errors), 0, "no buffer written by another holder");
	ok(atomic_load(&ctl->ops) > kills, "the workers worked between kills");
	is_int(asyncpool_available(pool), BUFFERS, "0 buffers lost: all %d back", BUFFERS);
	is_int(asyncpool_check(pool), 0, "asyncpool_check: consistent");
	is_int(attachments(sp), 1, "no attachment left but ours");
	is_int(layout_not_free(sp, BUFFERS), 0, "every buffer FREE, on the list");
	{
		struct asyncpool_lease all[BUFFERS];

		is_int(asyncpool_acquire_bulk(pool, all, BUFFERS), 0, "all of them can be leased");
		asyncpool_release_bulk(all, BUFFERS);
	}
	ok(count_fds() < 64, "no descriptor leaked by the reclaims");
	free(lat);
	asyncpool_shared_close(sp);
	asyncpool_shm_unlink_named(name);
	return done_testing();
}
