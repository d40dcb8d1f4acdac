/* SPDX-License-Identifier: MIT */
/*
 * Stopping the owners of a pool's caches (pool_bypass.h): the flusher's
 * half of the window whose owner's half is ap_cache_enter() and
 * ap_cache_leave() (cache_state.h).  A flusher, under ap_cache_lock,
 * raises each cache's bypass, runs membarrier(2) so that every thread
 * of the process has a full barrier between that store and the
 * flusher's loads, then waits until no owner is inside: from then on
 * until it lowers bypass, no owner touches its cache, its outboxes or
 * the words it owns, and the flusher may (pool_takeover.c, and a
 * sender that empties a full inbox, pool_owner.c).
 */
#include "pool_bypass.h"
#include "test_stall.h"

#include <linux/membarrier.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

pthread_mutex_t ap_cache_lock = PTHREAD_MUTEX_INITIALIZER;

static pthread_once_t ap_mb_once = PTHREAD_ONCE_INIT;
static bool ap_mb_ok;

static void mb_register(void)
{
	ap_mb_ok = syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
}

bool ap_mb_available(void)
{
	pthread_once(&ap_mb_once, mb_register);
	return ap_mb_ok;
}

bool ap_bypass_all(struct asyncpool *pool)
{
	bool raised = false;

	if (!ap_mb_available())
		return false;
	for (struct ap_cache *c = pool->caches; c; c = c->reg_next)
		if (!__atomic_load_n(&c->bypass, __ATOMIC_RELAXED)) {
			ap_cache_set_bypass(c, true, __ATOMIC_RELAXED);
			raised = true;
		}
	if (raised && syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) != 0) {
		/* Registered, so it cannot fail; if it did, undo. */
		for (struct ap_cache *c = pool->caches; c; c = c->reg_next)
			ap_cache_set_bypass(c, pool->local_waiters != 0, __ATOMIC_RELEASE);
		return false;
	}
	for (struct ap_cache *c = pool->caches; c; c = c->reg_next)
		while (__atomic_load_n(&c->busy, __ATOMIC_ACQUIRE)) {
			AP_TEST_STALL(AP_TS_FLUSH_WAITS);
			sched_yield();
		}
	return true;
}

void ap_bypass_end(struct asyncpool *pool)
{
	if (pool->local_waiters)
		return;
	for (struct ap_cache *c = pool->caches; c; c = c->reg_next)
		ap_cache_set_bypass(c, false, __ATOMIC_RELEASE);
}
