/* SPDX-License-Identifier: MIT */
/*
 * Who may touch a ring.  A SINGLE_ISSUER|DEFER_TASKRUN ring: the last
 * release of a recv lease and the last unref of a READ region on a
 * worker thread defer their unregistration to the owner, which runs it
 * with asyncpool_proactor_run_deferred().  fork(): the child's cleanup
 * of an inherited proactor leaves the parent's registrations alone.
 */
#include "config.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <asyncpool.h>
#include "uring-util.h"
#include "../lib/uring_compat.h"    /* SINGLE_ISSUER, DEFER_TASKRUN */

#define NBUF 4
#define BS 4096

static struct io_uring ring;
static struct asyncpool_proactor *p;
static int tx, rx, devnull;
static char junk[BS];

static struct asyncpool_region *region(uint32_t access)
{
	struct asyncpool_slab_options so = { .size = sizeof(so), .buffer_size = BS,
					     .buffer_count = NBUF, .numa_node = -1 };
	struct asyncpool_slab *slab;
	struct asyncpool_region *r;

	if (asyncpool_slab_create(&so, &slab) || asyncpool_proactor_register_slab(p, slab, access, &r))
		bail_out("region");
	asyncpool_slab_unref(slab);
	return r;
}

static int submit_one(struct io_uring_sqe *sqe)
{
	struct io_uring_cqe *cqe;
	int res;

	(void)sqe;
	cqe = ut_wait(&ring);
	res = cqe->res;
	io_uring_cqe_seen(&ring, cqe);
	return res;
}

static int write_fixed(void *buf, int idx)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);

	io_uring_prep_write_fixed(sqe, devnull, buf, BS, 0, idx);
	return submit_one(sqe);
}

static int recv_lease(struct asyncpool_region *r, struct asyncpool_lease *l)
{
	struct io_uring_sqe *sqe;
	struct io_uring_cqe *cqe, copy;

	if (write(tx, "hello", 5) != 5)
		bail_out("write");
	sqe = io_uring_get_sqe(&ring);
	io_uring_prep_recv(sqe, rx, NULL, 0, 0);
	sqe->flags |= IOSQE_BUFFER_SELECT;
	sqe->buf_group = (uint16_t)asyncpool_region_buffer_group(r);
	cqe = ut_wait(&ring);
	copy = *cqe;
	io_uring_cqe_seen(&ring, cqe);
	return asyncpool_region_recv_lease(r, &copy, l);
}

/* Is group bgid registered on the ring?  Register it raw: -EEXIST if so. */
static int group_taken(int bgid)
{
	static char page[4096] __attribute__((aligned(4096)));
	struct io_uring_buf_reg reg;
	int rc;

	memset(&reg, 0, sizeof(reg));
	reg.ring_addr = (uintptr_t)page;
	reg.ring_entries = 1;
	reg.bgid = (uint16_t)bgid;
	rc = io_uring_register_buf_ring(&ring, &reg, 0);
	if (rc)
		return rc;
	io_uring_unregister_buf_ring(&ring, bgid);
	return 0;
}

struct work {
	struct asyncpool_lease lease;
	struct asyncpool_region *fixed;
	int deferred_rc, destroy_rc;
};

static void *worker(void *arg)
{
	struct work *w = arg;

	asyncpool_lease_release(&w->lease);     /* the recv region's last reference */
	asyncpool_region_unref(w->fixed);       /* the READ region's last reference */
	w->deferred_rc = asyncpool_proactor_run_deferred(p);
	w->destroy_rc = asyncpool_proactor_destroy(p);
	return NULL;
}

static struct asyncpool_proactor_stats pstats(void)
{
	struct asyncpool_proactor_stats st = { .size = sizeof(st) };

	asyncpool_proactor_stats(p, &st);
	return st;
}

static void single_issuer(void)
{
	struct asyncpool_region *r, *f;
	struct work w = { 0 };
	void *fbase;
	pthread_t t;
	int group, rc;

	rc = io_uring_queue_init(8, &ring, IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN);
	if (rc) {
		skip(12, "no SINGLE_ISSUER|DEFER_TASKRUN rings: %s", strerror(-rc));
		return;
	}
	if (asyncpool_proactor_create_uring(&ring, 0, &p))
		bail_out("create_uring");
	ok(pstats().features & ASYNCPOOL_URING_SINGLE_ISSUER, "single issuer: the proactor knows");
	r = region(ASYNCPOOL_ACCESS_WRITE);
	f = region(ASYNCPOOL_ACCESS_READ);
	group = asyncpool_region_buffer_group(r);
	is_int(recv_lease(r, &w.lease), 0, "single issuer: a recv lease");
	asyncpool_region_unref(r);              /* the lease holds the last reference */
	w.fixed = f;
	fbase = asyncpool_region_base(f);       /* the deferred work keeps the slab */
	pthread_create(&t, NULL, worker, &w);
	pthread_join(t, NULL);
	is_int(w.deferred_rc, -EEXIST, "run_deferred on a worker thread: -EEXIST");
	is_int(w.destroy_rc, -EEXIST, "destroy on a worker thread with work deferred: -EEXIST");
	is_int(pstats().deferred, 2, "two unregistrations wait for the owner");
	is_int(group_taken(group), -EEXIST, "the buffer group is still registered meanwhile");
	is_int(write_fixed(fbase, 0), BS, "and the fixed slots still filled");
	is_int(asyncpool_proactor_run_deferred(p), 2, "the owner runs both");
	is_int(group_taken(group), 0, "the buffer group is gone from the kernel");
	is_int(write_fixed(junk, 0), -EFAULT, "the fixed slot is empty");
	ok(pstats().deferred == 0 && pstats().deferred_done == 2 && pstats().unregister_failures == 0,
	   "stats: 0 waiting, 2 done, 0 failed");
	is_int(asyncpool_proactor_destroy(p), 0, "the owner destroys the proactor");
	io_uring_queue_exit(&ring);
}

static void forked(void)
{
	struct asyncpool_region *r, *f;
	struct asyncpool_lease l;
	struct asyncpool *pool;
	int status;
	pid_t pid;

	ut_ring_init(&ring, 8);
	if (asyncpool_proactor_create_uring(&ring, 0, &p))
		bail_out("create_uring");
	r = region(ASYNCPOOL_ACCESS_WRITE);
	f = region(ASYNCPOOL_ACCESS_READ);
	if (asyncpool_create(f, &pool))
		bail_out("pool");
	pid = fork_or_bail();
	if (pid == 0) {
		struct asyncpool_region *x;
		struct asyncpool_slab *slab = asyncpool_region_slab(f);
		int bad = 0;

		/* The child's ordinary cleanup, and one registration. */
		bad |= (asyncpool_proactor_register_slab(p, slab, ASYNCPOOL_ACCESS_READ, &x) != -EPERM) << 0;
		bad |= (asyncpool_destroy(pool) != 0) << 1;
		asyncpool_region_unref(f);
		asyncpool_region_unref(r);
		bad |= (asyncpool_proactor_run_deferred(p) != 0) << 2;
		bad |= (asyncpool_proactor_destroy(p) != 0) << 3;
		_exit(bad);
	}
	if (waitpid(pid, &status, 0) != pid)
		bail_out("waitpid");
	is_int(WIFEXITED(status) ? WEXITSTATUS(status) : -1, 0,
	       "fork: the child registers nothing (-EPERM) and cleans up with 0s");
	is_int(write_fixed(asyncpool_region_base(f), asyncpool_region_fixed_index(f, 0)), BS,
	       "fork: the parent's WRITE_FIXED still works");
	is_int(recv_lease(r, &l), 0, "fork: the parent's buffer ring still works");
	asyncpool_lease_release(&l);
	is_int(asyncpool_destroy(pool), 0, "fork: the parent destroys its pool");
	asyncpool_region_unref(f);
	asyncpool_region_unref(r);
	is_int(asyncpool_proactor_destroy(p), 0, "fork: and its proactor");
	io_uring_queue_exit(&ring);
}

int main(void)
{
	plan(12 + 5);
	devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
	if (devnull < 0 || tcp_loopback_pair(&tx, &rx))
		bail_out("setup");
	single_issuer();
	forked();
	close(tx);
	close(rx);
	close(devnull);
	return done_testing();
}
