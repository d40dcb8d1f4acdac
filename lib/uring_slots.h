/* SPDX-License-Identifier: MIT */
/*
 * uring_slots.c: the process-wide state of the io_uring proactor's fixed
 * buffers.  A slab takes one run of fixed-table slots for the whole
 * process (first fit in a process-wide map), the same run on every ring
 * it is registered with, so that a lease's fixed index is valid on each
 * of them.  Where the kernel clones buffers, the run's pages are pinned
 * once, into a private "anchor" ring that no thread owns, and cloned
 * from it into each ring (memlock charged once).
 */
#ifndef ASYNCPOOL_URING_SLOTS_H
#define ASYNCPOOL_URING_SLOTS_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct asyncpool_slab;
struct io_uring;
struct iovec;

/* A slab's run of slots, the same on every ring (slab->uring_run). */
struct ur_run {
	uint32_t first, n;
	uint32_t users;         /* rings the slab is registered with */
	bool anchored;          /* pinned in the anchor ring, cloned from it */
	pid_t pid;              /* the process that made it */
};

/*
 * The process-wide lock of the io_uring proactor: the slot map, the
 * anchor ring, the runs, and the handles' table (uring_handles.c).
 * Held over fork() (ap_ur_slots_init()).
 */
extern pthread_mutex_t ap_ur_lock __attribute__((visibility("hidden")));

/* Install the fork handlers of ap_ur_lock, once per process. */
void ap_ur_slots_init(void);

/* Empty n slots of ring from first; returns 0 or the kernel's error. */
int ap_ur_slots_clear(struct io_uring *ring, uint32_t first, uint32_t n);
/*
 * Pin iov[0..n) into slots first.. of ring; all or nothing, or
 * -EUCLEAN: half-registered, the caller keeps the slots.
 */
int ap_ur_slots_fill(struct io_uring *ring, uint32_t first, const struct iovec *iov, uint32_t n);

/*
 * The run of slab (iov: its buffers), made if it has none, and pinned
 * into the anchor if anchor (the kernel clones buffers).  ap_ur_lock held.
 */
int ap_ur_run_get(bool anchor, struct asyncpool_slab *slab, const struct iovec *iov,
		  struct ur_run **out);
/* Drop one ring's use of a slab's run (ap_ur_lock held). */
void ap_ur_run_put(struct asyncpool_slab *slab);
/* Clone the run's slots from the anchor into ring (6.13: offsets, replace). */
int ap_ur_clone_run(struct io_uring *ring, const struct ur_run *run);

/* Slots the anchor kept, failing to clear them (never handed out again). */
uint64_t ap_ur_anchor_failures(void);

#endif /* ASYNCPOOL_URING_SLOTS_H */
