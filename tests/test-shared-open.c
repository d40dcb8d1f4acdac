/* SPDX-License-Identifier: MIT */
/*
 * asyncpool_shared_open(): the one open call of a shared pool (issue 23).
 * Every bad combination of its options has its own exact errno and
 * leaves nothing behind; an fd, a proactor and flags work together (the
 * six calls it replaces could not take a proactor and a flag at once);
 * the six are its wrappers and still answer as they did.
 */
#include "config.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <liburing.h>

#include <asyncpool.h>
#include "tap.h"
#include "testutil.h"

#define BS 4096
#define NBUF 8

static void open_options(struct asyncpool_shared_open_options *o, int fd, const char *name)
{
	memset(o, 0, sizeof(*o));
	o->size = sizeof(*o);
	o->fd = fd;
	o->name = name;
}

/* Each bad combination: its errno, *out NULL, no fd left open. */
static void test_errors(int fd, const char *name)
{
	struct asyncpool_shared_open_options o;
	struct asyncpool_shared *sp = (struct asyncpool_shared *)&o;
	unsigned char big[sizeof(o) + 64];
	int before = count_fds();

	open_options(&o, fd, name);
	is_int(asyncpool_shared_open(&o, &sp), -EINVAL, "both an fd and a name: -EINVAL");
	ok(sp == NULL, "  *out is NULL");
	open_options(&o, -1, NULL);
	sp = (struct asyncpool_shared *)&o;
	is_int(asyncpool_shared_open(&o, &sp), -EINVAL, "neither an fd nor a name: -EINVAL");
	ok(sp == NULL, "  *out is NULL");
	open_options(&o, -7, NULL);
	is_int(asyncpool_shared_open(&o, &sp), -EINVAL, "a negative fd and no name: -EINVAL");
	is_int(asyncpool_shared_open(NULL, &sp), -EINVAL, "NULL options: -EINVAL");
	open_options(&o, fd, NULL);
	is_int(asyncpool_shared_open(&o, NULL), -EINVAL, "NULL out: -EINVAL");

	o.size = offsetof(struct asyncpool_shared_open_options, proactor);
	is_int(asyncpool_shared_open(&o, &sp), -EINVAL, "size before the proactor: -EINVAL");
	o.size = 0;
	is_int(asyncpool_shared_open(&o, &sp), -EINVAL, "size 0: -EINVAL");
	o.size = 4097;
	is_int(asyncpool_shared_open(&o, &sp), -E2BIG, "size over 4096: -E2BIG");

	/* A newer caller's struct: zero beyond ours is accepted, not else. */
	memset(big, 0, sizeof(big));
	open_options(&o, fd, NULL);
	o.size = sizeof(big);
	memcpy(big, &o, sizeof(o));
	big[sizeof(o) + 10] = 1;
	is_int(asyncpool_shared_open((const void *)big, &sp), -EINVAL,
	       "a non-zero byte beyond the struct: -EINVAL");
	big[sizeof(o) + 10] = 0;
	is_int(asyncpool_shared_open((const void *)big, &sp), 0,
	       "a larger struct, zero beyond: opens");
	asyncpool_shared_close(sp);

	for (unsigned i = 0; i < 4; i++) {
		open_options(&o, fd, NULL);
		o.reserved[i] = 1;
		is_int(asyncpool_shared_open(&o, &sp), -EINVAL, "reserved[%u] not zero: -EINVAL", i);
	}
	open_options(&o, fd, NULL);
	o.flags = ASYNCPOOL_SHM_OPEN_OTHER_WRITERS;
	is_int(asyncpool_shared_open(&o, &sp), -EINVAL, "a name's flag with an fd: -EINVAL");
	open_options(&o, -1, name);
	o.flags = ASYNCPOOL_SHM_OPEN_UNSEALED;
	is_int(asyncpool_shared_open(&o, &sp), -EINVAL, "an fd's flag with a name: -EINVAL");
	o.flags = 1u << 30;
	is_int(asyncpool_shared_open(&o, &sp), -EINVAL, "an unknown flag: -EINVAL");
	open_options(&o, -1, "no-slash");
	is_int(asyncpool_shared_open(&o, &sp), -EINVAL, "a bad name: -EINVAL");
	open_options(&o, 1000, NULL);
	is_int(asyncpool_shared_open(&o, &sp), -EBADF, "a closed fd: -EBADF");
	is_int(count_fds(), before, "no fd left behind by the failures");

	/* The wrappers answer as in 1.1. */
	is_int(asyncpool_shared_open_fd(-1, &sp), -EBADF, "shared_open_fd(-1): still -EBADF");
	is_int(asyncpool_shared_open_fd_flags(-1, ASYNCPOOL_SHM_OPEN_OTHER_WRITERS, &sp), -EINVAL,
	       "shared_open_fd_flags(-1, a name's flag): still -EINVAL");
	is_int(asyncpool_shared_open_named(NULL, &sp), -EINVAL, "shared_open_named(NULL): -EINVAL");
}

/* The region of sp is on p and (on a ring) has fixed slots. */
static bool on_proactor(struct asyncpool_shared *sp, struct asyncpool_proactor *p, bool ring)
{
	struct asyncpool_region *r = asyncpool_shared_region(sp);

	if (asyncpool_region_proactor(r) != p)
		return false;
	return !ring || asyncpool_region_fixed_index(r, NBUF - 1) >= 0;
}

/* A copy of the object in an unsealed memfd: only UNSEALED opens it. */
static int unsealed_copy(const struct asyncpool_shm *shm)
{
	int fd = memfd_create("asyncpool-test-unsealed", MFD_CLOEXEC);

	if (fd < 0 || pwrite(fd, shm->base, shm->size, 0) != (ssize_t)shm->size)
		bail_out("memfd copy");
	return fd;
}

static void test_together(struct asyncpool_shared *creator, const char *name,
			  struct asyncpool_proactor *p, bool ring)
{
	struct asyncpool_shared_open_options o;
	struct asyncpool_shared *sp;
	struct asyncpool_lease l;
	int fd = unsealed_copy(asyncpool_shared_shm(creator));

	open_options(&o, fd, NULL);
	o.proactor = p;
	is_int(asyncpool_shared_open(&o, &sp), -EPERM, "an unsealed fd without the flag: -EPERM");
	o.flags = ASYNCPOOL_SHM_OPEN_UNSEALED | ASYNCPOOL_SHARED_OPEN_NO_RECLAIM;
	is_int(asyncpool_shared_open(&o, &sp), 0, "fd + proactor + UNSEALED|NO_RECLAIM: opens");
	ok(sp && on_proactor(sp, p, ring), "  its buffers are registered on the proactor%s",
	   ring ? " (fixed slots of the ring)" : "");
	is_int(asyncpool_acquire(asyncpool_shared_pool(sp), &l), 0, "  and it hands out a lease");
	asyncpool_lease_release(&l);
	asyncpool_shared_close(sp);
	close(fd);

	/* A name that others may write (mode 0620). */
	open_options(&o, -1, name);
	o.proactor = p;
	is_int(asyncpool_shared_open(&o, &sp), -EPERM, "a group-writable name without the flag: -EPERM");
	o.flags = ASYNCPOOL_SHM_OPEN_OTHER_WRITERS | ASYNCPOOL_SHARED_OPEN_NO_RECLAIM;
	is_int(asyncpool_shared_open(&o, &sp), 0, "name + proactor + OTHER_WRITERS|NO_RECLAIM: opens");
	ok(sp && on_proactor(sp, p, ring), "  its buffers are registered on the proactor");
	asyncpool_shared_close(sp);
	/* The old named call, with neither, sees the same object. */
	is_int(asyncpool_shared_open_named(name, &sp), -EPERM, "shared_open_named: the same -EPERM");
}

int main(void)
{
	struct asyncpool_shared_options co;
	struct asyncpool_shared *anon, *named;
	struct asyncpool_proactor *p;
	struct io_uring ring;
	char name[128];
	bool have_ring;
	int rc;

	test_shm_name(name, sizeof(name), "open");
	shared_options(&co, BS, NBUF);
	if (asyncpool_shared_create(&co, &anon))
		bail_out("shared_create");
	co.name = name;
	co.mode = 0620;
	if (asyncpool_shared_create(&co, &named))
		bail_out("shared_create named");

	test_errors(asyncpool_shared_fd(anon), name);

	rc = io_uring_queue_init(8, &ring, 0);
	have_ring = rc == 0;
	if (!have_ring)
		diag("io_uring refused (%s): the proactor is a memory one", strerror(-rc));
	rc = have_ring ? asyncpool_proactor_create_uring(&ring, 0, &p) :
			 asyncpool_proactor_create_memory(&p);
	if (rc)
		bail_out("proactor");
	test_together(anon, name, p, have_ring);
	is_int(asyncpool_proactor_destroy(p), 0, "the proactor is free after the closes");
	if (have_ring)
		io_uring_queue_exit(&ring);

	asyncpool_shared_close(named);
	asyncpool_shared_close(anon);
	asyncpool_shm_unlink_named(name);
	return done_testing();
}
