/* SPDX-License-Identifier: MIT */
/*
 * A shared pool whose buffers are fixed buffers in two processes, each
 * with its own ring: both send their leases with WRITE_FIXED into one
 * file, which reads back right.  Then a region the caller registered
 * from the shared slab outlives asyncpool_shared_close(): the mapping
 * lives until the last reference.
 */
#include "config.h"

#include <stdlib.h>
#include <sys/wait.h>

#include <asyncpool.h>
#include "uring-util.h"

#define NBUF 8
#define BS 4096

/* Take 4 leases, mark them with tag and send them into the file. */
static bool send_four(struct io_uring *ring, struct asyncpool *pool, int fd, char tag,
		      struct asyncpool_lease *l)
{
	bool good = true;

	for (int i = 0; i < 4; i++) {
		int idx;

		if (asyncpool_acquire(pool, &l[i]))
			return false;
		idx = asyncpool_region_fixed_index(l[i].span.region, l[i].buffer_index);
		memset(asyncpool_span_ptr(l[i].span), tag, BS);
		good &= idx >= 0 && ut_write_fixed(ring, fd, asyncpool_span_ptr(l[i].span), BS,
						(off_t)l[i].buffer_index * BS, idx) == BS;
	}
	return good;
}

static int child(int shm_fd, int fd)
{
	struct asyncpool_lease l[4];
	struct asyncpool_proactor *p;
	struct asyncpool_shared *sp;
	struct io_uring ring;
	bool good;

	if (io_uring_queue_init(8, &ring, 0) || asyncpool_proactor_create_uring(&ring, 0, &p))
		return 2;
	if (asyncpool_shared_open_fd_proactor(shm_fd, p, &sp))
		return 3;
	good = send_four(&ring, asyncpool_shared_pool(sp), fd, 'C', l);
	for (int i = 0; i < 4; i++)
		asyncpool_lease_release(&l[i]);
	asyncpool_shared_close(sp);
	if (asyncpool_proactor_destroy(p))
		return 4;
	io_uring_queue_exit(&ring);
	return good ? 0 : 1;
}

int main(void)
{
	struct asyncpool_shared_options o = { .size = sizeof(o), .buffer_size = BS,
					      .buffer_count = NBUF };
	struct asyncpool_proactor *p, *pb;
	struct asyncpool_shared *sp;
	struct asyncpool_region *mine;
	struct asyncpool_lease l[4];
	struct io_uring ring, rb;
	char path[] = "/tmp/asyncpool-shared-XXXXXX";
	unsigned char back[BS];
	int fd, status, seen_c = 0, seen_p = 0;
	bool good = true;
	pid_t pid;

	plan(10);
	ut_ring_init(&ring, 8);
	ut_ring_init(&rb, 8);
	if (asyncpool_proactor_create_uring(&ring, 0, &p) ||
	    asyncpool_proactor_create_uring(&rb, 0, &pb))
		bail_out("create_uring");
	is_int(asyncpool_shared_create_proactor(&o, p, &sp), 0, "shared_create on an io_uring proactor");
	fd = mkstemp(path);
	if (fd < 0)
		bail_out("mkstemp");
	unlink(path);
	ok(send_four(&ring, asyncpool_shared_pool(sp), fd, 'P', l),
	   "the parent sends 4 leases as fixed buffers");
	pid = fork_or_bail();
	if (pid == 0)
		_exit(child(asyncpool_shared_fd(sp), fd));
	if (waitpid(pid, &status, 0) != pid)
		bail_out("waitpid");
	is_int(WIFEXITED(status) ? WEXITSTATUS(status) : -1, 0,
	       "the child opens the pool on its own ring and sends the other 4");
	for (int b = 0; b < NBUF; b++) {
		if (pread(fd, back, BS, (off_t)b * BS) != BS)
			good = false;
		for (int k = 1; k < BS; k++)
			good &= back[k] == back[0];
		seen_c += back[0] == 'C';
		seen_p += back[0] == 'P';
	}
	ok(good && seen_c == 4 && seen_p == 4, "the file holds 4 buffers of each process, whole");
	for (int i = 0; i < 4; i++)
		asyncpool_lease_release(&l[i]);
	is_int(asyncpool_available(asyncpool_shared_pool(sp)), NBUF, "every buffer back in the pool");

	/* A region of our own over the shared slab outlives the close. */
	is_int(asyncpool_proactor_register_slab(pb, asyncpool_region_slab(asyncpool_shared_region(sp)),
						ASYNCPOOL_ACCESS_READ, &mine), 0,
	       "register the shared slab on a second ring");
	asyncpool_shared_close(sp);
	memset(asyncpool_region_base(mine), 'x', BS);   /* SIGSEGV if unmapped */
	is_int(ut_write_fixed(&rb, fd, asyncpool_region_base(mine), BS, 0,
			   asyncpool_region_fixed_index(mine, 0)), BS,
	       "after shared_close the region's buffers are still mapped and fixed");
	ok(pread(fd, back, BS, 0) == BS && back[0] == 'x' && back[BS - 1] == 'x', "and read back");
	asyncpool_region_unref(mine);           /* the last reference: unmapped now */
	is_int(asyncpool_proactor_destroy(pb), 0, "destroy the second proactor");
	is_int(asyncpool_proactor_destroy(p), 0, "destroy the first");
	close(fd);
	io_uring_queue_exit(&ring);
	io_uring_queue_exit(&rb);
	return done_testing();
}
