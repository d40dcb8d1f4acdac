/* SPDX-License-Identifier: MIT */
/*
 * Records a peer forges, and races made deterministic (issue 21):
 *  1. 62 DEAD attachments whose steps name an off-list buffer with the
 *     word the victim writes when it claims it: the victim's reclaim
 *     claims it once (it used to write past claimed[] for each step);
 *  2. busy = 1 in every step of the victim's attachment: its pops and a
 *     100 ms wait return (step_begin() used to spin for ever);
 *  3. read locks of a read-only description on a dead holder's liveness
 *     byte and on the reclaim byte: the dead holder is still reclaimed;
 *     a read-only fd of a memfd cannot be reopened read-write by another
 *     user, and a read-write fd still attaches there;
 *     two handles of that user, which cannot reopen the file and so lock
 *     through the one description they were sent, do not take each
 *     other for dead (a description never conflicts with its own
 *     locks: F_OFD_GETLK through it said the other's lock was free);
 *  6. a handle closed with a lease out right after a reclaim read its
 *     clock (a test hook): the lease waits out the quarantine;
 *  7. an open that finds every attachment record taken reclaims before
 *     it has one; killed between its claims and its push
 *     (AP_TP_PUSH_LINKED), it loses nothing;
 *  8. a dead_since forged an hour ahead: the first reclaim rewrites it
 *     to its clock, so the lease comes back one quarantine later, not
 *     an hour;
 *  9. a live peer's own name written in the reclaimer word: no reclaim
 *     runs while it stands (asyncpool-shared(7): such a claim cannot be
 *     bounded), the first after the peer let go gets the dead's
 *     buffers;
 * 10. a reclaimer word left by a handle that is gone, whose record a
 *     live handle took again since: the new epoch tells them apart, and
 *     the word is taken over.
 * Victims run in children: their exit status says they did not crash,
 * and alarm() bounds every call (a hang is a SIGALRM).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <asyncpool.h>
#include "tap.h"
#include "testutil.h"
#include "hooks.h"
#include "layout-util.h"
#include "shared-common.h"

#define N  16
#define BS 64

extern void (*ap_test_hook_reclaim_now)(void);

static struct asyncpool_shared *sp;
static struct asyncpool *pool;

/* What a victim child reports through its pipe. */
struct report {
	int rc[6];
	uint64_t n[4];
};

static pid_t run_child(int *rfd)
{
	int p[2];
	pid_t pid;

	if (pipe(p))
		bail_out("pipe");
	pid = fork_or_bail();
	if (pid == 0) {
		close(p[0]);
		*rfd = p[1];
		return 0;
	}
	close(p[1]);
	*rfd = p[0];
	return pid;
}

static void child_report(int fd, const struct report *r)
{
	if (write_full(fd, r, sizeof(*r)))
		_exit(9);
	close(fd);
	_exit(0);
}

static int collect(pid_t pid, int fd, struct report *r)
{
	int got = read_full(fd, r, sizeof(*r));
	int st = wait_peer(pid);

	close(fd);
	return got ? (st ? st : 99) : st;
}

/* 1. The forging of the issue, in a victim that reclaims. */
static void forged_steps(void)
{
	struct report r = { 0 };
	int fd, st;
	pid_t pid = run_child(&fd);

	if (pid == 0) {
		struct asyncpool_shared *v;
		struct asyncpool *vp;
		struct asyncpool_lease l;
		uint32_t me, x, g, dead = 0;

		alarm(10);
		if (asyncpool_shared_open_fd(asyncpool_shared_fd(sp), &v) ||
		    asyncpool_acquire(asyncpool_shared_pool(v), &l))
			_exit(2);
		vp = asyncpool_shared_pool(v);
		me = vp->fl.me;
		x = l.buffer_index;
		g = l.generation;
		/* x: cached by dead slot 2, so the victim claims it ... */
		atomic_store(layout_state(v, x), layout_word(AP_K_CACHED, 3, g));
		/* ... and every step of 62 DEAD records names it with the
		 * word of that claim. */
		for (uint32_t s = 0; s < AP_ATTACH_SLOTS; s++) {
			struct ap_attach *a = layout_attach(v, s);

			if (s + 1 == me || AP_ATT_STATE(atomic_load(&a->life)) == AP_ATT_LIVE)
				continue;
			atomic_store(&a->life, AP_ATT_MAKE(AP_ATT_DEAD, 1));
			atomic_store(&a->dead_since, 1);
			for (uint32_t k = 0; k < AP_STEPS; k++) {
				atomic_store(&a->step[k].idx[0], x);
				atomic_store(&a->step[k].word[0], layout_word(AP_K_FREE, me, g));
				atomic_store(&a->step[k].count, 1);
			}
			dead++;
		}
		r.n[0] = dead;
		r.rc[0] = asyncpool_reclaim(vp);
		r.n[1] = asyncpool_available(vp);
		r.rc[1] = asyncpool_check(vp);
		r.n[2] = 0;
		for (uint32_t s = 0; s < AP_ATTACH_SLOTS; s++)
			r.n[2] += AP_ATT_STATE(atomic_load(&layout_attach(v, s)->life)) ==
				  AP_ATT_FREE;
		asyncpool_shared_close(v);
		child_report(fd, &r);
	}
	st = collect(pid, fd, &r);
	is_int(st, 0, "forged steps: the victim exited 0 (no crash, no hang)");
	is_int(r.n[0], 62, "forged steps: 62 DEAD records, 4 steps each, naming one buffer");
	is_int(r.rc[0], 1, "forged steps: the reclaim claimed it once");
	is_int(r.n[1], N, "forged steps: all %d buffers free", N);
	is_int(r.rc[1], 0, "forged steps: asyncpool_check: consistent");
	is_int(r.n[2], 62, "forged steps: the 62 dead records freed");
	is_int(asyncpool_check(pool), 0, "forged steps: the creator's check: consistent");
}

/* 2. busy = 1 in every step of the victim. */
static void busy_steps(void)
{
	struct report r = { 0 };
	int fd, st;
	pid_t pid = run_child(&fd);

	if (pid == 0) {
		struct asyncpool_shared *v;
		struct asyncpool *vp;
		struct asyncpool_lease l, all[N];
		struct ap_attach *a;

		alarm(10);
		if (asyncpool_shared_open_fd(asyncpool_shared_fd(sp), &v))
			_exit(2);
		vp = asyncpool_shared_pool(v);
		a = layout_attach(v, vp->fl.me - 1);
		for (uint32_t k = 0; k < AP_STEPS; k++)
			atomic_store(&a->step[k].busy, 1);
		r.rc[0] = asyncpool_acquire(vp, &l);
		asyncpool_lease_release(&l);
		r.rc[1] = asyncpool_acquire_bulk(vp, all, N);
		r.rc[2] = asyncpool_acquire_wait(vp, &l, 100 * 1000000);
		asyncpool_release_bulk(all, N);
		r.rc[3] = asyncpool_set_cache(vp, 4);
		r.rc[4] = asyncpool_acquire(vp, &l);
		asyncpool_lease_release(&l);
		r.rc[5] = asyncpool_cache_flush(vp);
		r.n[0] = asyncpool_available(vp);
		asyncpool_shared_close(v);
		child_report(fd, &r);
	}
	st = collect(pid, fd, &r);
	is_int(st, 0, "busy steps: the victim exited 0 (no hang: alarm 10 s)");
	is_int(r.rc[0], 0, "busy steps: acquire");
	is_int(r.rc[1], 0, "busy steps: acquire_bulk of all %d", N);
	is_int(r.rc[2], -ETIMEDOUT, "busy steps: acquire_wait 100 ms on the empty pool: -ETIMEDOUT");
	is_int(r.rc[4], 0, "busy steps: a cached acquire");
	is_int(r.n[0], N, "busy steps: all back");
}

/* A description of the pool's file of its own, read-only. */
static int reader_fd(void)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/self/fd/%d", asyncpool_shared_fd(sp));
	return open(path, O_RDONLY | O_CLOEXEC);
}

static int rdlock(int fd, uint64_t at)
{
	struct flock fl = { .l_type = F_RDLCK, .l_whence = SEEK_SET, .l_start = (off_t)at,
			    .l_len = 1 };

	return fcntl(fd, F_OFD_SETLK, &fl) ? -errno : 0;
}

/* A child that leases one buffer, caches some, reports its slot and dies. */
static int dying_holder(void)
{
	struct report r = { 0 };
	int fd;
	pid_t pid = run_child(&fd);

	if (pid == 0) {
		struct asyncpool_shared *v;
		struct asyncpool_lease l;

		if (asyncpool_shared_open_fd(asyncpool_shared_fd(sp), &v) ||
		    asyncpool_set_cache(asyncpool_shared_pool(v), 4) ||
		    asyncpool_acquire(asyncpool_shared_pool(v), &l))
			_exit(2);
		r.rc[0] = (int)asyncpool_shared_pool(v)->fl.me - 1;
		if (write_full(fd, &r, sizeof(r)))
			_exit(9);
		raise(SIGKILL);
	}
	if (read_full(fd, &r, sizeof(r)))
		r.rc[0] = -1;
	close(fd);
	wait_peer(pid);
	return r.rc[0];
}

/* 3. Read locks of a read-only description do not keep the dead alive. */
static void read_locks(void)
{
	for (int what = 0; what < 2; what++) {
		const char *name = what ? "a read lock on the reclaim byte"
					: "a read lock on the dead's liveness byte";
		int rfd = reader_fd(), slot, rc;
		size_t held;

		if (rfd < 0)
			bail_out("reopen read-only");
		slot = dying_holder();
		if (slot < 0)
			bail_out("dying holder");
		rc = rdlock(rfd, what ? AP_LOCK_RECLAIM : AP_LOCK_BASE + (uint64_t)slot);
		is_int(rc, 0, "%s: taken through a read-only description", name);
		held = N - asyncpool_available(pool);
		rc = asyncpool_reclaim(pool);
		ok(held > 0 && rc == (int)held, "%s: the reclaim got the %zu buffers of the dead (%d)",
		   name, held, rc);
		is_int(asyncpool_available(pool), N, "%s: all %d free", name, N);
		is_int(asyncpool_check(pool), 0, "%s: consistent", name);
		close(rfd);
	}
}

/* 3. Another user: a read-only fd stays read-only; a read-write one attaches. */
static void other_user(void)
{
	struct report r = { 0 };
	int fd, st;
	pid_t pid;

	if (geteuid() != 0) {
		skip(4, "not root: cannot become another user");
		return;
	}
	pid = run_child(&fd);
	if (pid == 0) {
		char path[64];
		int ro = reader_fd(), rw = asyncpool_shared_fd(sp), again;
		struct asyncpool_shared *v;
		struct asyncpool_lease l;

		alarm(10);
		if (ro < 0)
			_exit(2);
		if (setgroups(0, NULL) || setresgid(65534, 65534, 65534) ||
		    setresuid(65534, 65534, 65534)) {
			r.rc[0] = 1;    /* a container that maps no other uid */
			child_report(fd, &r);
		}
		/* Changing uid made us not dumpable, which alone would hide
		 * /proc/self/fd: make it reachable, so that only the file's
		 * mode decides. */
		prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
		snprintf(path, sizeof(path), "/proc/self/fd/%d", ro);
		again = open(path, O_RDWR);
		r.rc[0] = again < 0 ? -errno : 0;
		r.rc[1] = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, ro, 0) ==
				  MAP_FAILED ? -errno : 0;
		r.rc[2] = asyncpool_shared_open_fd(rw, &v);
		if (!r.rc[2]) {
			r.rc[3] = asyncpool_acquire(asyncpool_shared_pool(v), &l);
			asyncpool_lease_release(&l);
			asyncpool_shared_close(v);
		}
		child_report(fd, &r);
	}
	st = collect(pid, fd, &r);
	is_int(st, 0, "another user: exited 0");
	if (r.rc[0] == 1) {
		skip(3, "cannot become uid 65534 here");
		return;
	}
	is_int(r.rc[0], -EACCES, "another user: a read-only fd is not reopened read-write");
	is_int(r.rc[1], -EACCES, "another user: nor mapped writable");
	ok(r.rc[2] == 0 && r.rc[3] == 0, "another user: a read-write fd opens the pool (%d) and acquires (%d)",
	   r.rc[2], r.rc[3]);
}

/*
 * 3b. Two handles of another user, on the one read-write description it
 * was sent (it cannot open the memfd again, mode 0600): the second's
 * reclaims must not take the first, alive, for dead.  Through a shared
 * description every lock of it looks free, so they did: the open of the
 * second marked the first DEAD, and with a quarantine of 0 its reclaim
 * took the first's lease (returned 1, every buffer free) while it was
 * held.
 */
static void borrowed_description(void)
{
	struct report r = { 0 };
	int fd, st;
	pid_t pid;

	if (geteuid() != 0) {
		skip(4, "not root: cannot become another user");
		return;
	}
	pid = run_child(&fd);
	if (pid == 0) {
		int rw = asyncpool_shared_fd(sp);
		struct asyncpool_shared *v1, *v2;
		struct asyncpool_lease l;

		alarm(10);
		if (setgroups(0, NULL) || setresgid(65534, 65534, 65534) ||
		    setresuid(65534, 65534, 65534)) {
			r.rc[0] = 1;    /* a container that maps no other uid */
			child_report(fd, &r);
		}
		prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
		if (asyncpool_shared_open_fd(rw, &v1) ||
		    asyncpool_acquire(asyncpool_shared_pool(v1), &l) ||
		    asyncpool_shared_open_fd(rw, &v2) ||
		    asyncpool_set_quarantine(asyncpool_shared_pool(v2), 0))
			_exit(2);
		r.rc[1] = asyncpool_reclaim(asyncpool_shared_pool(v2));
		r.n[0] = asyncpool_available(asyncpool_shared_pool(v2));
		asyncpool_lease_release(&l);
		r.n[1] = asyncpool_available(asyncpool_shared_pool(v1));
		r.rc[2] = asyncpool_check(asyncpool_shared_pool(v1));
		asyncpool_shared_close(v2);
		asyncpool_shared_close(v1);
		child_report(fd, &r);
	}
	st = collect(pid, fd, &r);
	is_int(st, 0, "one description, two handles: exited 0");
	if (r.rc[0] == 1) {
		skip(3, "cannot become uid 65534 here");
		return;
	}
	is_int(r.rc[1], 0, "one description, two handles: the second's reclaim takes nothing "
	       "of the first, alive");
	ok(r.n[0] == N - 1 && r.n[1] == N, "one description, two handles: its lease stays out "
	   "(%llu free of %d) until it releases it (%llu)", (unsigned long long)r.n[0], N,
	   (unsigned long long)r.n[1]);
	is_int(r.rc[2], 0, "one description, two handles: consistent");
}

/* 6. dead_since later than the reclaimer's clock. */
static struct asyncpool_shared *closing;

static void close_now(void)
{
	if (closing) {
		asyncpool_shared_close(closing);
		closing = NULL;
	}
}

static void quarantine_race(void)
{
	int trials = (int)stress_iterations(20), early = 0, bad = 0;

	if (asyncpool_set_quarantine(pool, 3000))
		bail_out("set_quarantine");
	for (int t = 0; t < trials; t++) {
		struct asyncpool_lease l;
		int rc;

		if (asyncpool_shared_open_fd(asyncpool_shared_fd(sp), &closing) ||
		    asyncpool_acquire(asyncpool_shared_pool(closing), &l))
			bail_out("open and lease");
		/* The handle closes, lease out, after the reclaim read its clock. */
		ap_test_hook_reclaim_now = close_now;
		rc = asyncpool_reclaim(pool);
		ap_test_hook_reclaim_now = NULL;
		if (closing)
			bail_out("the hook did not run");
		if (rc != 0)
			early++;
		/* Clean up: no quarantine, then back to 3 s. */
		if (asyncpool_set_quarantine(pool, 0) || asyncpool_reclaim(pool) != (rc ? 0 : 1) ||
		    asyncpool_set_quarantine(pool, 3000))
			bad++;
	}
	is_int(early, 0, "quarantine: 0 of %d leases of a handle closed during a reclaim taken early",
	       trials);
	is_int(bad, 0, "quarantine: each came back once the quarantine was 0");
	is_int(asyncpool_available(pool), N, "quarantine: all %d free", N);
	asyncpool_set_quarantine(pool, 0);
}

/* 7. Killed in the reclaim of an open that has no record yet. */
static void kill_hook(enum ap_test_point p)
{
	if (p == AP_TP_PUSH_LINKED)
		raise(SIGKILL);
}

static void attach_reclaim_kill(void)
{
	struct asyncpool_shared *h[AP_ATTACH_SLOTS];
	int n = 0, st, rc;
	size_t held;
	pid_t pid;

	/* Every record but one taken by live handles, the last by a dead one. */
	while (layout_live_slot(sp, -1) >= 0 && n < (int)AP_ATTACH_SLOTS - 2) {
		if (asyncpool_shared_open_fd(asyncpool_shared_fd(sp), &h[n]))
			bail_out("open handle %d", n);
		n++;
	}
	if (dying_holder() < 0)
		bail_out("dying holder");
	held = N - asyncpool_available(pool);
	pid = fork_or_bail();
	if (pid == 0) {
		struct asyncpool_shared *v;

		alarm(10);
		ap_test_hook_point = kill_hook;
		rc = asyncpool_shared_open_fd(asyncpool_shared_fd(sp), &v);
		_exit(rc == 0 ? 0 : 3);
	}
	st = wait_peer(pid);
	is_int(st, 128 + SIGKILL, "attach-time reclaim: the opener was killed before its push");
	rc = asyncpool_reclaim(pool);
	ok(held > 0 && rc == (int)held, "attach-time reclaim: a later reclaim gets the %zu buffers (%d)",
	   held, rc);
	is_int(asyncpool_available(pool), N, "attach-time reclaim: all %d free", N);
	is_int(asyncpool_check(pool), 0, "attach-time reclaim: consistent");
	is_int(layout_not_free(sp, N), 0, "attach-time reclaim: every word FREE");
	while (n > 0)
		asyncpool_shared_close(h[--n]);
}

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* 8. A dead_since far in the future delays a reclaim by one quarantine at most. */
static void forged_future_since(void)
{
	const uint32_t q_ms = 200;
	struct asyncpool_lease l;
	struct ap_attach *a = NULL;
	uint64_t forged, seen, after;
	uint32_t s;
	int first, second;

	is_int(asyncpool_acquire(pool, &l), 0, "future dead_since: a lease");
	for (s = 0; s < AP_ATTACH_SLOTS; s++) {
		a = layout_attach(sp, s);
		if (s + 1 != pool->fl.me && AP_ATT_STATE(atomic_load(&a->life)) == AP_ATT_FREE)
			break;
	}
	/* A dead holder of the lease, dead "an hour from now". */
	forged = mono_ns() + 3600ull * 1000000000u;
	atomic_store(&a->life, AP_ATT_MAKE(AP_ATT_DEAD, 1));
	atomic_store(&a->dead_since, forged);
	atomic_store(layout_state(sp, l.buffer_index), layout_word(AP_K_LEASED, s + 1, l.generation));
	if (asyncpool_set_quarantine(pool, q_ms))
		bail_out("set_quarantine");
	first = asyncpool_reclaim(pool);
	seen = atomic_load(&a->dead_since);
	after = mono_ns();
	is_int(first, 0, "future dead_since: the first reclaim waits out the quarantine");
	ok(seen <= after, "future dead_since: rewritten to the reclaim's clock, not kept an hour ahead");
	/* One quarantine later (or more: a slow machine only waits longer). */
	while (mono_ns() - after < (uint64_t)q_ms * 1000000u + 1000000u)
		usleep(10000);
	second = asyncpool_reclaim(pool);
	is_int(second, 1, "future dead_since: the lease back one quarantine later, not an hour");
	l.release.fn = NULL;            /* it went back through the reclaim */
	is_int(asyncpool_available(pool), N, "future dead_since: all %d free", N);
	is_int(asyncpool_check(pool), 0, "future dead_since: consistent");
	if (asyncpool_set_quarantine(pool, 0))
		bail_out("set_quarantine");
}

/* 9. A live peer's claim of the reclaimer word stands as long as it lives. */
static void live_reclaimer_claim(void)
{
	struct asyncpool_shared *peer;
	struct asyncpool *pp;
	size_t held;
	int rc;

	if (asyncpool_shared_open_fd(asyncpool_shared_fd(sp), &peer))
		bail_out("open the peer");
	pp = asyncpool_shared_pool(peer);
	if (dying_holder() < 0)
		bail_out("dying holder");
	held = N - asyncpool_available(pool);
	/* The peer's slot and epoch: a name of a write lock it holds. */
	atomic_store(&pool->fl.ctr->reclaimer,
		     (AP_ATT_EPOCH(atomic_load(&pp->fl.att->life)) << 8) | (pp->slot + 1));
	rc = asyncpool_reclaim(pool);
	is_int(rc, 0, "live claim: the reclaim returns 0 while the peer's claim stands");
	is_int(asyncpool_available(pool), N - held, "live claim: the dead's %zu buffers stay held",
	       held);
	asyncpool_shared_close(peer);
	rc = asyncpool_reclaim(pool);
	ok(held > 0 && rc == (int)held,
	   "live claim: once the peer let go, the reclaim gets the %zu buffers (%d)", held, rc);
	is_int(asyncpool_available(pool), N, "live claim: all %d free", N);
	is_int(asyncpool_check(pool), 0, "live claim: consistent");
}

/* 10. A word naming a record's old epoch does not name its new holder. */
static void reclaimer_old_epoch(void)
{
	struct asyncpool_shared *h;
	struct asyncpool *hp;
	uint64_t name;
	uint32_t slot;
	size_t held;
	int rc;

	if (dying_holder() < 0)
		bail_out("dying holder");
	if (asyncpool_shared_open_fd(asyncpool_shared_fd(sp), &h))
		bail_out("open");
	hp = asyncpool_shared_pool(h);
	slot = hp->slot;
	name = (AP_ATT_EPOCH(atomic_load(&hp->fl.att->life)) << 8) | (slot + 1);
	asyncpool_shared_close(h);
	/* The same record, the lowest free one, taken again. */
	if (asyncpool_shared_open_fd(asyncpool_shared_fd(sp), &h))
		bail_out("open again");
	hp = asyncpool_shared_pool(h);
	is_int(hp->slot, slot, "old epoch: a new handle has the record again");
	/* (an open reclaims too: what is left, its lease in quarantine) */
	held = N - asyncpool_available(pool);
	atomic_store(&pool->fl.ctr->reclaimer, name);
	rc = asyncpool_reclaim(pool);
	ok(held > 0 && rc == (int)held,
	   "old epoch: the word of the record's last holder is taken over, the reclaim runs (%d of %zu)",
	   rc, held);
	is_int(asyncpool_available(pool), N, "old epoch: all %d free", N);
	asyncpool_shared_close(h);
}

/* A FREE record, not ours, made DEAD with one step naming idx with word:
 * what a peer forges.  Returns it. */
static struct ap_attach *forge_dead_step(uint32_t idx, uint64_t word)
{
	struct ap_attach *a = NULL;

	for (uint32_t s = 0; s < AP_ATTACH_SLOTS; s++) {
		a = layout_attach(sp, s);
		if (s + 1 != pool->fl.me && AP_ATT_STATE(atomic_load(&a->life)) == AP_ATT_FREE)
			break;
	}
	atomic_store(&a->life, AP_ATT_MAKE(AP_ATT_DEAD, 1));
	atomic_store(&a->dead_since, 1);
	atomic_store(&a->step[0].idx[0], idx);
	atomic_store(&a->step[0].word[0], word);
	atomic_store(&a->step[0].count, 1);
	return a;
}

/*
 * A forged step that names a live holder's LEASED buffer with its word:
 * a pop records only FREE words, so the reclaim must not take it (it
 * would hand the holder's buffer to another while the holder writes it).
 */
static void forged_leased_step(void)
{
	struct asyncpool_lease l;
	int rc;

	is_int(asyncpool_acquire(pool, &l), 0, "leased step: a lease");
	forge_dead_step(l.buffer_index, atomic_load(layout_state(sp, l.buffer_index)));
	rc = asyncpool_reclaim(pool);
	is_int(rc, 0, "leased step: the reclaim takes nothing");
	is_int(AP_W_KIND(atomic_load(layout_state(sp, l.buffer_index))), AP_K_LEASED,
	       "leased step: the buffer is still leased");
	is_int(asyncpool_release_token(pool, asyncpool_lease_token(&l)), 0,
	       "leased step: its holder releases it");
	l.release.fn = NULL;
	is_int(asyncpool_available(pool), N, "leased step: all back");
	is_int(asyncpool_check(pool), 0, "leased step: consistent");
}

/* A forged step naming a buffer far out of range, with a FREE word: the
 * reclaim checks the index before it reads state[] (no read outside). */
static void forged_step_index(void)
{
	forge_dead_step(0x7ffffff0u, layout_word(AP_K_FREE, 1, 5));
	is_int(asyncpool_reclaim(pool), 0, "step index out of range: the reclaim takes nothing");
	is_int(asyncpool_check(pool), 0, "step index out of range: consistent");
}

static unsigned long chain_attempts;

static void count_attempt(void)
{
	chain_attempts++;
}

/*
 * A list made cyclic (one buffer pushed twice, as a forged record can
 * make a reclaim do): a chain pop walks a buffer twice, and its second
 * take fails.  It gives up at once (-EUCLEAN, a corruption counted), not
 * after AP_MAX_RETRIES rounds (seconds).
 */
static void cyclic_chain(void)
{
	struct asyncpool_stats st0, st1;
	uint64_t tokens[6];
	uint32_t x, y, z;

	st0.size = st1.size = sizeof(st0);
	asyncpool_stats(pool, &st0);
	x = AP_HEAD_INDEX(atomic_load(&pool->fl.line->head));
	y = atomic_load(&pool->fl.link[x]);
	z = atomic_load(&pool->fl.link[y]);
	atomic_store(&pool->fl.link[y], x);
	chain_attempts = 0;
	ap_test_hook_before_cas = count_attempt;
	is_int(asyncpool_acquire_tokens(pool, tokens, 6), -EUCLEAN,
	       "cyclic list: a bulk acquire of 6 gives -EUCLEAN");
	ap_test_hook_before_cas = NULL;
	ok(chain_attempts >= 2 && chain_attempts <= 64,
	   "cyclic list: it gave up after %lu attempts (at most 64)", chain_attempts);
	asyncpool_stats(pool, &st1);
	is_int(st1.corruptions - st0.corruptions, 1, "cyclic list: a corruption counted");
	/* the peer is gone: put the link back */
	atomic_store(&pool->fl.link[y], z);
	is_int(asyncpool_available(pool), N, "cyclic list repaired: all free");
	is_int(asyncpool_check(pool), 0, "cyclic list repaired: consistent");
}

int main(void)
{
	struct asyncpool_shared_options o;

	plan(7 + 6 + 8 + 4 + 4 + 3 + 5 + 6 + 5 + 3 + 6 + 2 + 5);
	shared_options(&o, BS, N);
	if (asyncpool_shared_create(&o, &sp))
		bail_out("shared_create");
	pool = asyncpool_shared_pool(sp);
	if (asyncpool_set_quarantine(pool, 0))
		bail_out("set_quarantine");
	forged_steps();
	busy_steps();
	read_locks();
	other_user();
	borrowed_description();
	quarantine_race();
	attach_reclaim_kill();
	forged_future_since();
	live_reclaimer_claim();
	reclaimer_old_epoch();
	forged_leased_step();
	forged_step_index();
	cyclic_chain();
	asyncpool_shared_close(sp);
	return done_testing();
}
