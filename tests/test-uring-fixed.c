/* SPDX-License-Identifier: MIT */
/*
 * Several READ regions on one ring: distinct fixed indices, runs reused
 * after the last unref, and real write_fixed/read_fixed through them.
 */
#include "config.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>

#include <asyncpool.h>
#include "uring-util.h"

#define BS 4096

/* One fixed read or write of BS bytes at off; the completion's result. */
static int rw_fixed(struct io_uring *ring, bool write, int fd, void *buf, int index,
		    off_t off)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
	struct io_uring_cqe *cqe;
	int res;

	if (write)
		io_uring_prep_write_fixed(sqe, fd, buf, BS, off, index);
	else
		io_uring_prep_read_fixed(sqe, fd, buf, BS, off, index);
	cqe = ut_wait(ring);
	res = cqe->res;
	io_uring_cqe_seen(ring, cqe);
	return res;
}

int main(void)
{
	struct asyncpool_proactor *p, *p2;
	struct asyncpool_region *a, *b, *c, *d, *e, *f, *g, *x;
	struct io_uring ring;
	char path[] = "/tmp/asyncpool-fixed-XXXXXX";
	unsigned char *seen, local[BS];
	int rc, fd, idx[28], n = 0, distinct = 1, good = 1;

	/* A guard against a hang, not a timed assertion. */
	tap_watchdog(120);
	ut_ring_init(&ring, 64);
	is_int(asyncpool_proactor_create_uring(&ring, 0, &p), 0, "create_uring");

	rc = new_region(p, BS, 8, ASYNCPOOL_ACCESS_READ, &a);
	is_int(rc, 0, "register A: 8 buffers");
	rc = new_region(p, BS, 4, ASYNCPOOL_ACCESS_READ, &b);
	is_int(rc, 0, "register B: 4 buffers");
	rc = new_region(p, BS, 16, ASYNCPOOL_ACCESS_READ, &c);
	is_int(rc, 0, "register C: 16 buffers");
	if (!a || !b || !c)
		bail_out("cannot register the regions");
	is_int(asyncpool_region_fixed_index(a, 0), 0, "A starts at slot 0");
	is_int(asyncpool_region_fixed_index(b, 0), 8, "B follows A");
	is_int(asyncpool_region_fixed_index(c, 15), 27, "C follows B, contiguous");

	for (uint32_t i = 0; i < 8; i++)
		idx[n++] = asyncpool_region_fixed_index(a, i);
	for (uint32_t i = 0; i < 4; i++)
		idx[n++] = asyncpool_region_fixed_index(b, i);
	for (uint32_t i = 0; i < 16; i++)
		idx[n++] = asyncpool_region_fixed_index(c, i);
	for (int i = 0; i < n; i++)
		for (int j = 0; j < i; j++)
			if (idx[i] < 0 || idx[i] == idx[j])
				distinct = 0;
	ok(distinct, "28 buffers in 3 regions: 28 distinct fixed indices");

	is_int(asyncpool_region_fixed_index(a, 8), -EINVAL, "fixed_index past the region");
	is_int(asyncpool_region_buffer_group(a), -EINVAL, "a READ region has no buffer group");
	is_int(asyncpool_proactor_destroy(p), -EBUSY, "destroy with live regions: -EBUSY");

	/* The kernel must see B's slots empty once B is gone. */
	asyncpool_region_unref(b);
	fd = open("/dev/zero", O_RDONLY | O_CLOEXEC);
	is_int(rw_fixed(&ring, false, fd, local, 8, 0), -EFAULT,
	       "after B's last unref its slot 8 is empty in the kernel");
	close(fd);
	rc = new_region(p, BS, 4, ASYNCPOOL_ACCESS_READ, &d);
	is_int(rc, 0, "register D: 4 buffers");
	is_int(asyncpool_region_fixed_index(d, 0), 8, "D reuses B's run (first fit)");
	rc = new_region(p, BS, 5, ASYNCPOOL_ACCESS_READ, &e);
	is_int(asyncpool_region_fixed_index(e, 0), 28, "E (5 buffers) does not fit the gap: after C");
	asyncpool_region_unref(e);

	/* A READ|WRITE region is fixed buffers too, without a group. */
	rc = new_region(p, BS, 2, ASYNCPOOL_ACCESS_READ | ASYNCPOOL_ACCESS_WRITE, &f);
	is_int(rc, 0, "register F: READ|WRITE");
	is_int(asyncpool_region_fixed_index(f, 1), 29, "F takes the freed run of E");
	is_int(asyncpool_region_buffer_group(f), -EINVAL, "READ|WRITE has no buffer group");
	rc = new_region(p, BS, 4, ASYNCPOOL_ACCESS_WRITE, &g);
	is_int(rc, 0, "register G: WRITE, a buffer ring");
	is_int(asyncpool_region_fixed_index(g, 0), -EINVAL, "a WRITE region has no fixed index");
	ok(asyncpool_region_buffer_group(g) >= 0, "a WRITE region has a buffer group");
	asyncpool_region_unref(g);

	/* A second proactor on the same ring cannot register a second table. */
	is_int(asyncpool_proactor_create_uring(&ring, 0, &p2), 0, "second proactor on the ring");
	rc = new_region(p2, BS, 1, ASYNCPOOL_ACCESS_READ, &x);
	is_int(rc, -EEXIST, "its READ region: the ring already has a table");
	ok(x == NULL, "out is NULL after the failure");
	is_int(asyncpool_proactor_destroy(p2), 0, "destroy the second proactor");

	/* write_fixed from A and C, then check the file. */
	fd = mkstemp(path);
	if (fd < 0)
		bail_out("mkstemp: %s", strerror(errno));
	unlink(path);
	for (int k = 0; k < 24; k++) {
		struct asyncpool_region *r = k < 8 ? a : c;
		uint32_t i = k < 8 ? (uint32_t)k : (uint32_t)k - 8;
		unsigned char *buf = (unsigned char *)asyncpool_region_base(r) + (size_t)i * BS;

		for (size_t j = 0; j < BS; j++)
			buf[j] = ut_pattern((size_t)k * BS + j);
		if (rw_fixed(&ring, true, fd, buf, asyncpool_region_fixed_index(r, i),
			     (off_t)k * BS) != BS)
			good = 0;
	}
	ok(good, "24 write_fixed of 4 KiB through A's and C's fixed indices");
	seen = malloc(24 * BS);
	good = pread(fd, seen, 24 * BS, 0) == 24 * BS;
	for (size_t j = 0; good && j < 24 * BS; j++)
		good = seen[j] == ut_pattern(j);
	ok(good, "the file holds every byte written");
	free(seen);

	/* read_fixed back into D (reused slots) and F (READ|WRITE). */
	good = 1;
	for (uint32_t i = 0; i < 6; i++) {
		struct asyncpool_region *r = i < 4 ? d : f;
		uint32_t bi = i < 4 ? i : i - 4;
		unsigned char *buf = (unsigned char *)asyncpool_region_base(r) + (size_t)bi * BS;
		off_t off = (off_t)(23 - i) * BS;

		memset(buf, 0, BS);
		if (rw_fixed(&ring, false, fd, buf, asyncpool_region_fixed_index(r, bi), off) != BS)
			good = 0;
		for (size_t j = 0; good && j < BS; j++)
			good = buf[j] == ut_pattern((size_t)off + j);
	}
	ok(good, "read_fixed into D's reused slots and F: bytes match");
	close(fd);

	asyncpool_region_unref(a);
	asyncpool_region_unref(c);
	asyncpool_region_unref(d);
	asyncpool_region_unref(f);
	is_int(asyncpool_proactor_destroy(p), 0, "destroy after the last region");

	/* The table went with the proactor: a new one starts afresh. */
	is_int(asyncpool_proactor_create_uring(&ring, 0, &p), 0, "create_uring again");
	rc = new_region(p, BS, 3, ASYNCPOOL_ACCESS_READ, &x);
	is_int(rc, 0, "register on the same ring after destroy");
	is_int(asyncpool_region_fixed_index(x, 0), 0, "it starts at slot 0 again");
	asyncpool_region_unref(x);
	is_int(asyncpool_proactor_destroy(p), 0, "destroy");
	io_uring_queue_exit(&ring);
	return done_testing();
}
