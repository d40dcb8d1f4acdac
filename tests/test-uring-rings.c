/* SPDX-License-Identifier: MIT */
/*
 * One slab, two rings, the same slots: a pool over the region of ring A
 * hands out leases whose fixed index is valid on ring B too.  Checked
 * with WRITE_FIXED through ring B and a read back of the file.  Memlock
 * (VmPin) is charged once when the kernel clones buffers, twice when it
 * cannot (ASYNCPOOL_URING_DISABLE=clone forces that path).
 */
#include "config.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>

#include <asyncpool.h>
#include "uring-util.h"
#include "../tools/vm_pin.h"

#define NBUF 8
#define BS 4096

static void run(const char *mode, bool clone_expected)
{
	struct io_uring ra, rb;
	struct asyncpool_proactor *pa, *pb;
	struct asyncpool_slab_options so = { .size = sizeof(so), .buffer_size = BS,
					     .buffer_count = NBUF, .numa_node = -1 };
	struct asyncpool_slab *slab, *other;
	struct asyncpool_region *a, *b, *c;
	struct asyncpool_region_stats st = { .size = sizeof(st) };
	struct asyncpool_lease l[NBUF];
	struct asyncpool *pool;
	char path[] = "/tmp/asyncpool-rings-XXXXXX";
	unsigned char back[BS];
	long pin0, pin1, pin2;
	bool same = true, good = true;
	int fd;

	diag("mode: %s", mode);
	ut_ring_init(&ra, 8);
	ut_ring_init(&rb, 8);
	if (asyncpool_proactor_create_uring(&ra, 0, &pa) || asyncpool_proactor_create_uring(&rb, 0, &pb))
		bail_out("create_uring");
	if (asyncpool_slab_create(&so, &slab))
		bail_out("slab_create");
	memset(asyncpool_slab_base(slab), 0, (size_t)BS * NBUF);  /* fault the pages in */

	pin0 = vm_pin_kib();
	is_int(asyncpool_proactor_register_slab(pa, slab, ASYNCPOOL_ACCESS_READ, &a), 0,
	       "%s: register on ring A", mode);
	pin1 = vm_pin_kib();
	is_int(asyncpool_proactor_register_slab(pb, slab, ASYNCPOOL_ACCESS_READ, &b), 0,
	       "%s: register the same slab on ring B", mode);
	pin2 = vm_pin_kib();
	for (uint32_t i = 0; i < NBUF; i++)
		same &= asyncpool_region_fixed_index(a, i) == asyncpool_region_fixed_index(b, i);
	ok(same, "%s: the same fixed slots on both rings", mode);
	asyncpool_region_stats(b, &st);
	is_int(!!(st.flags & ASYNCPOOL_REGION_CLONED), clone_expected,
	       "%s: ring B's buffers %s", mode, clone_expected ? "cloned" : "pinned again");
	diag("%s: VmPin +%ld KiB on ring A, +%ld KiB on ring B", mode, pin1 - pin0, pin2 - pin1);
	if (pin0 < 0) {
		skip(1, "no VmPin in /proc/self/status");
	} else if (clone_expected) {
		ok(pin1 - pin0 == NBUF * BS / 1024 && pin2 == pin1,
		   "%s: memlock charged once (%ld KiB, then +%ld)", mode, pin1 - pin0, pin2 - pin1);
	} else {
		ok(pin1 - pin0 == NBUF * BS / 1024 && pin2 - pin1 == NBUF * BS / 1024,
		   "%s: memlock charged per ring (%ld + %ld KiB)", mode, pin1 - pin0, pin2 - pin1);
	}
	is_int(asyncpool_proactor_register_slab(pb, slab, ASYNCPOOL_ACCESS_READ, &c), -EEXIST,
	       "%s: the same slab twice on one ring: -EEXIST", mode);

	/* A pool over A's region; its leases go out through ring B. */
	if (asyncpool_create(a, &pool))
		bail_out("asyncpool_create");
	fd = mkstemp(path);
	if (fd < 0)
		bail_out("mkstemp");
	unlink(path);
	for (int i = 0; i < NBUF; i++) {
		int idx;

		if (asyncpool_acquire(pool, &l[i]))
			bail_out("acquire");
		memset(asyncpool_span_ptr(l[i].span), 'a' + i, BS);
		idx = asyncpool_region_fixed_index(l[i].span.region, l[i].buffer_index);
		good &= ut_write_fixed(&rb, fd, asyncpool_span_ptr(l[i].span), BS, (off_t)i * BS,
				       idx) == BS;
	}
	ok(good, "%s: WRITE_FIXED through ring B with ring A's leases", mode);
	for (int i = 0; i < NBUF; i++) {
		if (pread(fd, back, BS, (off_t)i * BS) != BS)
			good = false;
		for (int k = 0; k < BS; k++)
			good &= back[k] == (unsigned char)('a' + i);
	}
	ok(good, "%s: the file reads back every byte", mode);
	for (int i = 0; i < NBUF; i++)
		asyncpool_lease_release(&l[i]);
	is_int(asyncpool_destroy(pool), 0, "%s: pool destroyed, every lease back", mode);

	/* Ring B lets go; ring A still serves. */
	asyncpool_region_unref(b);
	memset(asyncpool_region_base(a), 'z', BS);
	is_int(ut_write_fixed(&ra, fd, asyncpool_region_base(a), BS, 0,
			   asyncpool_region_fixed_index(a, 0)), BS,
	       "%s: ring A still writes after ring B let go", mode);
	asyncpool_region_unref(a);
	/* The run is free again: a new slab takes slot 0. */
	if (asyncpool_slab_create(&so, &other))
		bail_out("slab_create");
	is_int(asyncpool_proactor_register_slab(pb, other, ASYNCPOOL_ACCESS_READ, &c), 0,
	       "%s: register another slab", mode);
	is_int(asyncpool_region_fixed_index(c, 0), 0, "%s: it takes the freed slots", mode);
	asyncpool_region_unref(c);
	asyncpool_slab_unref(other);
	asyncpool_slab_unref(slab);
	is_int(vm_pin_kib(), pin0, "%s: every pinned page let go", mode);
	is_int(asyncpool_proactor_destroy(pa), 0, "%s: destroy A", mode);
	is_int(asyncpool_proactor_destroy(pb), 0, "%s: destroy B", mode);
	close(fd);
	io_uring_queue_exit(&ra);
	io_uring_queue_exit(&rb);
}

int main(void)
{
	struct asyncpool_proactor_stats st = { .size = sizeof(st) };
	struct asyncpool_proactor *p;
	struct io_uring ring;
	bool clone;

	plan(2 * 15);
	ut_ring_init(&ring, 4);
	if (asyncpool_proactor_create_uring(&ring, 0, &p))
		bail_out("create_uring");
	asyncpool_proactor_stats(p, &st);
	asyncpool_proactor_destroy(p);
	io_uring_queue_exit(&ring);
	clone = st.features & ASYNCPOOL_URING_CLONE_BUFFERS;
	diag("kernel features %#x", st.features);

	run(clone ? "cloned" : "no clone in this kernel", clone);
	setenv("ASYNCPOOL_URING_DISABLE", "clone", 1);
	run("clone disabled", false);
	return done_testing();
}
