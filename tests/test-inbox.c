/* SPDX-License-Identifier: MIT */
/*
 * An owner's inbox (lib/pool_inbox.h), alone: a ring of 8 slots, one
 * receiver.  Its rules, each stated and checked exactly:
 *   reserve: a send of k tokens takes k slots, only below head_pub + cap
 *            (a full ring refuses the send whole, and nothing is
 *            overwritten: tests/mutants/inbox-full-unchecked);
 *   publish: the receiver's ap_inbox_done() gives the slots it read back
 *            to the senders (tests/mutants/inbox-publish-missing);
 *   read:    tokens come out once, in the order sent, and a slot read is
 *            empty again, so the receiver stops there the next time round
 *            (tests/mutants/inbox-slot-kept).
 */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hooks.h"

#define CAP 8

static struct ap_inbox *box;

/* Read what is published: how many, checking they are from, from + 1, ... */
static unsigned take(uint64_t from, unsigned max, bool *in_order)
{
	unsigned n = 0;
	uint64_t tok;

	*in_order = true;
	while (n < max && (tok = ap_inbox_next(box)) != 0) {
		*in_order &= tok == from + n;
		n++;
	}
	ap_inbox_done(box);
	return n;
}

int main(void)
{
	uint64_t tok[CAP + 1];
	bool in_order;

	plan(16);
	box = aligned_alloc(AP_CACHE_LINE, sizeof(*box) + CAP * sizeof(uint64_t));
	if (!box)
		bail_out("alloc");
	memset(box, 0, sizeof(*box) + CAP * sizeof(uint64_t));
	box->mask = CAP - 1;
	for (unsigned i = 0; i <= CAP; i++)
		tok[i] = 100 + i;

	is_int(take(100, CAP, &in_order), 0, "empty: nothing to read");
	ok(ap_inbox_send(box, tok, 5), "reserve: 5 of 8");
	ok(!ap_inbox_send(box, &tok[5], 4), "full: 4 more do not fit, refused whole");
	is_int(ap_inbox_count(box), 5, "full: the refused send reserved nothing");
	ok(ap_inbox_send(box, &tok[5], 3), "reserve: the last 3 fit");
	ok(!ap_inbox_send(box, &tok[8], 1), "full: a ninth is refused");
	is_int(take(100, 6, &in_order), 6, "read: 6 of them");
	ok(in_order, "read: in the order sent");
	is_int(ap_inbox_count(box), 2, "publish: 2 left in flight");
	ok(ap_inbox_send(box, tok, 6), "publish: the 6 slots read take 6 more");
	ok(!ap_inbox_send(box, tok, 1), "full again: refused");
	is_int(take(106, 2, &in_order), 2, "read: the 2 left");
	ok(in_order, "read: the 2 left are the last sent first");
	is_int(take(100, CAP, &in_order), 6, "read round the ring: the 6, no slot read twice");
	ok(in_order, "read round the ring: in order");
	is_int(take(100, CAP, &in_order), 0, "empty again: every slot read is empty");
	free(box);
	return done_testing();
}
