/* SPDX-License-Identifier: MIT */
/*
 * Attachments: every handle of a shared pool that has a file (the
 * bundle of shared_bundle.c) takes one of the AP_ATTACH_SLOTS records of
 * the layout, and every buffer it leases, caches or pushes carries
 * 1 + that slot as its holder (buffer_state.h).
 *
 * Liveness is an OFD lock (fcntl(2) F_OFD_SETLK) on byte AP_LOCK_BASE +
 * slot of the pool's file, taken through an open file description of
 * our own (the file reopened through /proc/self/fd): the kernel drops it
 * when the last descriptor of that description is closed, so when the
 * process dies, however it dies.  It names no PID, so PID reuse cannot
 * make a dead process look alive, and it works across PID namespaces
 * (containers sharing a memfd).  A pidfd needs the PID to be meaningful
 * in the checker's namespace; a robust futex list is per thread and is
 * processed by the kernel only for futex words, not for our records.
 *
 * The lock is taken before the record says LIVE, and the record stops
 * saying LIVE before the lock is dropped, so a LIVE record whose lock
 * is free is a dead process, never one being born or leaving.
 *
 * When every slot is taken, an attach reclaims the dead ones
 * (reclaim.c, below this file); the reclaim reads the records and their
 * liveness through attach_rec.h, never through this file.
 */
#include "attach_rec.h"

#include <fcntl.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

/*
 * Our own open file description of fd's file: an inherited one would
 * keep a dead parent alive.  A memfd of another user (mode 0600, shm.c)
 * cannot be opened again: then the description we were given, which
 * works but is shared with whoever sent it, so that our attachment
 * looks alive while the sender keeps its copy (reclaim waits; it never
 * takes a live holder's buffers).  *borrowed then says so: that
 * description may hold the locks of other attachments too (another
 * handle of ours, another process it was sent to), and it never
 * conflicts with its own locks, so a test of their liveness through it
 * would find them free and take the living for dead (ap_attach_alive).
 */
static int reopen(int fd, bool *borrowed)
{
	char path[64];
	int lfd;

	*borrowed = false;
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	lfd = open(path, O_RDWR | O_CLOEXEC);
	if (lfd < 0 && errno == EACCES) {
		lfd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
		*borrowed = true;
	}
	return lfd < 0 ? -errno : lfd;
}

int ap_attach(struct asyncpool *pool, int fd)
{
	bool borrowed;
	int lfd, rc;

	if (!pool->shared || fd < 0)
		return 0;
	lfd = reopen(fd, &borrowed);
	if (lfd < 0)
		return lfd;
	pool->lock_borrowed = borrowed;
	for (int pass = 0; pass < 2; pass++) {
		for (uint32_t s = 0; s < AP_ATTACH_SLOTS; s++) {
			struct ap_attach *a = ap_attach_rec(pool, s);
			uint64_t life = atomic_load_explicit(&a->life, memory_order_acquire);

			if (AP_ATT_STATE(life) != AP_ATT_FREE)
				continue;
			if (ap_lock_byte(lfd, F_OFD_SETLK, F_WRLCK, AP_LOCK_BASE + s, NULL))
				continue;       /* a live process has it */
			if (!atomic_compare_exchange_strong_explicit(
				    &a->life, &life, AP_ATT_MAKE(AP_ATT_LIVE, AP_ATT_EPOCH(life) + 1),
				    memory_order_acq_rel, memory_order_relaxed)) {
				/* A borrowed description took the lock for
				 * whoever won (it shares it): not ours to drop. */
				if (!borrowed)
					(void)ap_lock_byte(lfd, F_OFD_SETLK, F_UNLCK,
							   AP_LOCK_BASE + s, NULL);
				continue;
			}
			/* (The steps' busy words are not cleared here: nothing
			 * reads them since 1.2, freelist.c's step_begin.) */
			atomic_store_explicit(&a->pid, (uint32_t)getpid(), memory_order_relaxed);
			atomic_store_explicit(&a->pidns, ap_pid_ns(), memory_order_relaxed);
			atomic_store_explicit(&a->dead_since, 0, memory_order_relaxed);
			pool->lock_fd = lfd;
			pool->slot = s;
			pool->fl.me = s + 1;
			pool->fl.att = a;
			return 0;
		}
		/* All taken: the dead ones may free theirs. */
		pool->lock_fd = lfd;
		pool->slot = AP_ATTACH_SLOTS;
		rc = ap_reclaim(pool);
		pool->lock_fd = -1;
		if (rc <= 0 && pass)
			break;
	}
	close(lfd);
	return -EUSERS;
}

void ap_detach(struct asyncpool *pool)
{
	struct ap_attach *a;
	bool holds = false;

	if (pool->lock_fd < 0)
		return;
	a = pool->fl.att;
	/* Leases we still hold (given away by index, or never released)
	 * come back by a reclaim, after the quarantine. */
	for (uint32_t i = 0; i < pool->fl.count && !holds; i++) {
		uint64_t w = ap_state_load(&pool->fl.state[i]);

		holds = AP_W_KIND(w) != AP_K_FREE && AP_W_HOLDER(w) == pool->fl.me;
	}
	if (holds) {
		struct timespec ts;

		clock_gettime(CLOCK_MONOTONIC, &ts);
		atomic_store_explicit(&a->dead_since,
				      (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec,
				      memory_order_relaxed);
	} else {
		atomic_store_explicit(&a->pid, 0, memory_order_relaxed);
	}
	atomic_store_explicit(&a->life,
			      AP_ATT_MAKE(holds ? AP_ATT_DEAD : AP_ATT_FREE,
					  AP_ATT_EPOCH(atomic_load(&a->life))),
			      memory_order_release);
	/* Explicitly: a description we share (reopen()) keeps its locks
	 * after our close. */
	(void)ap_lock_byte(pool->lock_fd, F_OFD_SETLK, F_UNLCK, AP_LOCK_BASE + pool->slot, NULL);
	close(pool->lock_fd);
	pool->lock_fd = -1;
	pool->fl.att = NULL;
	pool->fl.me = 0;
}
