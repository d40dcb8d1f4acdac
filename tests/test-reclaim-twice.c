/* SPDX-License-Identifier: MIT */
/*
 * A reclaim claims a buffer once (layout version 3): with the link out
 * of the word, two in-flight steps of dead processes may name one buffer
 * with one word, and a claim may leave a word as it was (a FREE word the
 * reclaimer itself pushed).  The test hooks build that state: a buffer
 * off the list whose word is FREE, held by this attachment, and two steps
 * of a dead attachment that both recorded it.  asyncpool_reclaim() must
 * bring it back once (1, not 2: pushed twice, the list would have a
 * cycle), and the pool must end consistent and full.  tests/model/crash.pml
 * with 3 processes finds the same double push.
 */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "hooks.h"
#include "tap.h"
#include "testutil.h"

#define N    8
#define BS   64
#define DEAD 5                          /* the attachment slot made dead */

int main(void)
{
	struct asyncpool_shared_options o;
	struct asyncpool_shared *sp;
	struct asyncpool *pool;
	struct asyncpool_lease l;
	struct ap_attach *a;
	uint64_t w;

	plan(6);
	shared_options(&o, BS, N);
	if (asyncpool_shared_create(&o, &sp))
		bail_out("shared_create");
	pool = asyncpool_shared_pool(sp);
	ok(pool->lock_fd >= 0 && pool->slot != DEAD, "attached, slot %u", pool->slot);
	is_int(asyncpool_acquire(pool, &l), 0, "acquire");
	/* Off the list, FREE, ours: as a pop saw it before its mark. */
	w = AP_W_MAKE(AP_K_FREE, pool->fl.me, l.generation);
	atomic_store(&pool->fl.state[l.buffer_index], w);
	a = ap_attach_rec(pool, DEAD);
	for (uint32_t k = 0; k < 2; k++) {
		atomic_store(&a->step[k].idx[0], l.buffer_index);
		atomic_store(&a->step[k].word[0], w);
		atomic_store(&a->step[k].count, 1);
		atomic_store(&a->step[k].busy, 1);
	}
	atomic_store(&a->life, AP_ATT_MAKE(AP_ATT_DEAD, 1));
	is_int(asyncpool_reclaim(pool), 1, "reclaim: the buffer two dead steps name comes back once");
	is_int(asyncpool_check(pool), 0, "check: consistent (no cycle)");
	is_int((int)asyncpool_available(pool), N, "every buffer is free");
	is_int(AP_ATT_STATE(atomic_load(&a->life)), AP_ATT_FREE, "the dead record is freed");
	l.release.fn = NULL;
	asyncpool_shared_close(sp);
	return done_testing();
}
