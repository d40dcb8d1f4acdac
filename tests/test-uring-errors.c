/* SPDX-License-Identifier: MIT */
/*
 * The error table of the io_uring proactor: limits checked before any
 * system call, foreign completions, argument errors, and a locked-memory
 * limit that is too small (in a child without CAP_IPC_LOCK).
 */
#include "config.h"

#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include <asyncpool.h>
#include "uring-util.h"

struct mapping {
	void *base;
	size_t len;
};

static void unmap(void *ctx)
{
	struct mapping *m = ctx;

	munmap(m->base, m->len);
	free(m);
}

/* A slab over mmap'd memory; MAP_NORESERVE memory is never touched. */
static struct asyncpool_slab *mapped(size_t size, uint32_t count, bool noreserve)
{
	struct asyncpool_slab *s = NULL;
	struct mapping *m = malloc(sizeof(*m));

	m->len = size * count;
	m->base = mmap(NULL, m->len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | (noreserve ? MAP_NORESERVE : 0), -1, 0);
	if (m->base == MAP_FAILED) {
		free(m);
		return NULL;
	}
	madvise(m->base, m->len, MADV_NOHUGEPAGE);
	if (asyncpool_slab_wrap(m->base, size, count, unmap, m, &s)) {
		unmap(m);
		return NULL;
	}
	return s;
}

static int reg(struct asyncpool_proactor *p, struct asyncpool_slab *s, uint32_t access,
	       struct asyncpool_region **r)
{
	*r = (void *)1;
	return s ? asyncpool_proactor_register_slab(p, s, access, r) : -ENOMEM;
}

/* One single-shot recv with buffer selection; the completion is left unseen. */
static struct io_uring_cqe *recv_one(struct io_uring *ring, int fd, int group)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(ring);

	io_uring_prep_recv(sqe, fd, NULL, 0, 0);
	sqe->flags |= IOSQE_BUFFER_SELECT;
	sqe->buf_group = (uint16_t)group;
	return ut_wait(ring);
}

static int read_fixed(struct io_uring *ring, int fd, void *buf, unsigned len, int index)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
	struct io_uring_cqe *cqe;
	int res;

	io_uring_prep_read_fixed(sqe, fd, buf, len, 0, index);
	cqe = ut_wait(ring);
	res = cqe->res;
	io_uring_cqe_seen(ring, cqe);
	return res;
}

enum { MEMLOCK_RAN, MEMLOCK_NO_SETUID, MEMLOCK_CAP_KEPT, MEMLOCK_NO_RING };
#define LIMIT (1u << 20)

/*
 * In a child: RLIMIT_MEMLOCK 1 MiB, an unprivileged uid of its own (no
 * CAP_IPC_LOCK, no locked memory of other processes counted), then 2 MiB
 * of fixed buffers.  res[]: status, big, slot 0, slot 1, small, its index,
 * a read into it.
 */
static void memlock_child(int wfd)
{
	int res[7] = { MEMLOCK_RAN };
	struct rlimit rl = { LIMIT, LIMIT };
	struct __user_cap_header_struct hdr = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct cap[2];
	uid_t uid = 40000 + (uid_t)(getpid() % 20000);
	struct asyncpool_proactor *p;
	struct asyncpool_region *big, *small;
	struct asyncpool_slab *sb, *ss;
	struct io_uring ring;
	char tmp[64];
	int fd;

	if (setrlimit(RLIMIT_MEMLOCK, &rl) || setgroups(0, NULL) || setgid(uid) || setuid(uid)) {
		res[0] = MEMLOCK_NO_SETUID;
		goto out;
	}
	if (syscall(SYS_capget, &hdr, cap) || (cap[0].effective & (1u << CAP_IPC_LOCK))) {
		res[0] = MEMLOCK_CAP_KEPT;
		goto out;
	}
	if (io_uring_queue_init(8, &ring, 0)) {
		res[0] = MEMLOCK_NO_RING;
		goto out;
	}
	fd = open("/dev/zero", O_RDONLY | O_CLOEXEC);
	sb = mapped(65536, 32, false);
	ss = mapped(65536, 4, false);
	asyncpool_proactor_create_uring(&ring, 0, &p);
	res[1] = reg(p, sb, ASYNCPOOL_ACCESS_READ, &big);
	/* Whatever the kernel took before it ran out must be gone again. */
	res[2] = read_fixed(&ring, fd, tmp, sizeof(tmp), 0);
	res[3] = read_fixed(&ring, fd, tmp, sizeof(tmp), 1);
	res[4] = reg(p, ss, ASYNCPOOL_ACCESS_READ, &small);
	if (!res[4]) {
		res[5] = asyncpool_region_fixed_index(small, 0);
		res[6] = read_fixed(&ring, fd, asyncpool_region_base(small), 64, res[5]);
		asyncpool_region_unref(small);
	}
	asyncpool_proactor_destroy(p);
	io_uring_queue_exit(&ring);
out:
	if (write(wfd, res, sizeof(res)) != sizeof(res))
		_exit(1);
	_exit(0);
}

static void memlock_test(void)
{
	int res[7] = { -1 }, pfd[2], st;
	pid_t pid;

	if (pipe(pfd))
		bail_out("pipe: %s", strerror(errno));
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		close(pfd[0]);
		memlock_child(pfd[1]);
	}
	close(pfd[1]);
	if (read(pfd[0], res, sizeof(res)) != sizeof(res))
		res[0] = -1;
	close(pfd[0]);
	waitpid(pid, &st, 0);
	if (res[0] == MEMLOCK_NO_SETUID || res[0] == MEMLOCK_CAP_KEPT || res[0] == MEMLOCK_NO_RING) {
		skip(6, "%s", res[0] == MEMLOCK_NO_SETUID ? "cannot switch to an unprivileged uid" :
		     res[0] == MEMLOCK_CAP_KEPT ? "CAP_IPC_LOCK cannot be dropped" :
		     "no io_uring for an unprivileged uid");
		return;
	}
	is_int(res[0], MEMLOCK_RAN, "memlock child ran");
	is_int(res[1], -ENOMEM, "2 MiB of fixed buffers under a 1 MiB RLIMIT_MEMLOCK: -ENOMEM");
	is_int(res[2], -EFAULT, "slot 0 is empty in the kernel afterwards");
	is_int(res[3], -EFAULT, "slot 1 is empty too: nothing half-registered");
	is_int(res[4], 0, "256 KiB registers afterwards: the pinned memory was given back");
	is_int(res[6], 64, "and I/O through it works (index %d)", res[5]);
}

/* The geometry a buffer ring (WRITE) or the fixed-buffer table (READ) takes. */
static const struct limit {
	size_t size;
	uint32_t count;
	bool noreserve;
	uint32_t access;
	int want;
	const char *what;
} limits[] = {
	{ 64, 65536, false, ASYNCPOOL_ACCESS_WRITE, -EINVAL, "WRITE: 65536 buffers, over 32768" },
	{ 64, 32768, false, ASYNCPOOL_ACCESS_WRITE, 0, "WRITE: 32768 buffers, the largest ring" },
	{ (1ul << 32) + 64, 1, true, ASYNCPOOL_ACCESS_WRITE, -EINVAL,
	  "WRITE: a 4 GiB + 64 buffer: over a u32" },
	{ (1ul << 30) + 64, 1, true, ASYNCPOOL_ACCESS_READ, -EINVAL, "READ: a buffer over 1 GiB" },
	{ 64, 16385, false, ASYNCPOOL_ACCESS_READ, -EINVAL, "READ: 16385 buffers never fit the table" },
};

int main(void)
{
	struct asyncpool_proactor *p = (void *)1, *mp;
	struct asyncpool_region *r, *full, *w8, *w2, *rd, *mr;
	struct asyncpool_slab *s;
	struct asyncpool_lease l;
	struct asyncpool *pool = (void *)1;
	struct io_uring_cqe fake;
	struct io_uring ring, bogus;
	struct io_uring_cqe *cqe;
	int tx, rx, rc;

	/* A guard against a hang, not a timed assertion. */
	tap_watchdog(120);
	ut_ring_init(&ring, 16);

	/* create_uring arguments */
	is_int(asyncpool_proactor_create_uring(&ring, 0, NULL), -EINVAL, "create_uring: NULL out");
	is_int(asyncpool_proactor_create_uring(NULL, 0, &p), -EINVAL, "create_uring: NULL ring");
	ok(p == NULL, "out is NULL after a failure");
	is_int(asyncpool_proactor_create_uring(&ring, 1, &p), -EINVAL, "create_uring: unknown flag");
	memset(&bogus, 0, sizeof(bogus));
	bogus.ring_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	is_int(asyncpool_proactor_create_uring(&bogus, 0, &p), -EINVAL,
	       "create_uring: a file that is not a ring");
	close(bogus.ring_fd);
	bogus.ring_fd = -1;
	is_int(asyncpool_proactor_create_uring(&bogus, 0, &p), -EINVAL,
	       "create_uring: a closed ring");
	is_int(asyncpool_proactor_create_uring(&ring, 0, &p), 0, "create_uring");

	/* buffer rings, then the limits[] of both kinds */
	s = mapped(64, 3, false);
	is_int(reg(p, s, ASYNCPOOL_ACCESS_WRITE, &r), -EINVAL, "WRITE: 3 buffers, not a power of two");
	ok(r == NULL, "out is NULL after a failure");
	asyncpool_slab_unref(s);
	for (size_t i = 0; i < sizeof(limits) / sizeof(limits[0]); i++) {
		const struct limit *c = &limits[i];

		s = mapped(c->size, c->count, c->noreserve);
		rc = reg(p, s, c->access, &r);
		is_int(rc, c->want, "%s", c->what);
		if (rc == 0)
			asyncpool_region_unref(r);
		asyncpool_slab_unref(s);
	}

	/* fixed buffers: the table */
	s = mapped(64, 16384, false);
	is_int(reg(p, s, ASYNCPOOL_ACCESS_READ, &full), 0, "READ: 16384 buffers fill the table");
	asyncpool_slab_unref(s);
	s = mapped(64, 1, false);
	is_int(reg(p, s, ASYNCPOOL_ACCESS_READ, &r), -ENOBUFS, "READ: one more buffer: the table is full");
	asyncpool_region_unref(full);
	is_int(reg(p, s, ASYNCPOOL_ACCESS_READ, &r), 0, "after the unref it fits");
	is_int(asyncpool_region_fixed_index(r, 0), 0, "at slot 0");
	is_int(asyncpool_region_fixed_index(r, 1), -EINVAL, "fixed_index past the region");
	is_int(asyncpool_region_recv_lease(r, &(struct io_uring_cqe){ .flags = IORING_CQE_F_BUFFER }, &l),
	       -EINVAL, "recv_lease on a READ region: no buffer group");
	asyncpool_region_unref(r);
	asyncpool_slab_unref(s);

	/* a pool over a WRITE-only region */
	s = mapped(4096, 8, false);
	is_int(reg(p, s, ASYNCPOOL_ACCESS_WRITE, &w8), 0, "WRITE: 8 buffers");
	is_int(asyncpool_create(w8, &pool), -EINVAL, "no pool over a WRITE-only region");
	ok(pool == NULL, "pool is NULL after the failure");
	is_int(asyncpool_region_fixed_index(w8, 0), -EINVAL, "a WRITE region has no fixed index");
	asyncpool_slab_unref(s);
	s = mapped(4096, 2, false);
	is_int(reg(p, s, ASYNCPOOL_ACCESS_WRITE, &w2), 0, "WRITE: 2 buffers, another group");
	asyncpool_slab_unref(s);
	ok(asyncpool_region_buffer_group(w8) != asyncpool_region_buffer_group(w2),
	   "two regions, two buffer groups");

	/* foreign completions */
	memset(&fake, 0, sizeof(fake));
	fake.res = 10;
	is_int(asyncpool_region_recv_lease(w8, &fake, &l), -EINVAL, "a completion without a buffer");
	ok(l.release.fn == NULL && l.span.region == NULL, "the lease is zeroed");
	fake.flags = IORING_CQE_F_BUFFER | (8u << IORING_CQE_BUFFER_SHIFT);
	is_int(asyncpool_region_recv_lease(w8, &fake, &l), -EINVAL, "a buffer id out of range");
	fake.flags = IORING_CQE_F_BUFFER | (1u << IORING_CQE_BUFFER_SHIFT);
	fake.res = -ECONNRESET;
	is_int(asyncpool_region_recv_lease(w8, &fake, &l), -EINVAL, "a failed completion");
	fake.res = -ENOBUFS;
	is_int(asyncpool_region_recv_lease(w8, &fake, &l), -ENOBUFS,
	       "a completion -ENOBUFS: counted, -ENOBUFS");
	fake.res = 4097;
	is_int(asyncpool_region_recv_lease(w8, &fake, &l), -EINVAL, "more bytes than a buffer holds");
	is_int(asyncpool_region_recv_lease(w8, NULL, &l), -EINVAL, "NULL completion");
	is_int(asyncpool_region_recv_lease(NULL, &fake, &l), -EINVAL, "NULL region");
	is_int(asyncpool_region_recv_lease(w8, &fake, NULL), -EINVAL, "NULL lease");

	/* Real completions of w8's group, passed to w2. */
	if (tcp_loopback_pair(&tx, &rx))
		bail_out("no TCP loopback connection");
	{
		struct asyncpool_lease got[3];
		int bid2 = -1;

		for (int k = 0; k < 3; k++) {
			if (send(tx, "abcde", 5, MSG_NOSIGNAL) != 5)
				bail_out("send");
			cqe = recv_one(&ring, rx, asyncpool_region_buffer_group(w8));
			if (k == 2) {
				bid2 = (int)(cqe->flags >> IORING_CQE_BUFFER_SHIFT);
				is_int(asyncpool_region_recv_lease(w2, cqe, &l), -EINVAL,
				       "a completion of another group (bid %d of 2): -EINVAL", bid2);
			}
			rc = asyncpool_region_recv_lease(w8, cqe, &got[k]);
			if (k == 2) {
				is_int(rc, 0, "the same completion with its own region");
				is_int(got[k].span.length, 5, "the lease covers the 5 bytes received");
				ok(!memcmp(asyncpool_span_ptr(got[k].span), "abcde", 5), "and holds them");
				is_int(asyncpool_region_recv_lease(w8, cqe, &l), -EALREADY,
				       "the same completion twice: -EALREADY");
			}
			io_uring_cqe_seen(&ring, cqe);
		}
		asyncpool_region_unref(w8);
		is_int(asyncpool_proactor_destroy(p), -EBUSY, "destroy while recv leases are out: -EBUSY");
		{
			/* A copy of a lease released after the lease: its
			 * buffer holds no lease, it is refused and counted. */
			struct asyncpool_lease copy = got[0];
			struct asyncpool_region_stats st = { .size = sizeof(st) };

			asyncpool_lease_release(&got[0]);
			asyncpool_lease_release(&copy);
			asyncpool_region_stats(got[1].span.region, &st);
			ok(st.bad_releases == 1 && st.leased == 2,
			   "a copy released after its lease: refused, counted (%llu), 2 leased",
			   (unsigned long long)st.bad_releases);
		}
		for (int k = 0; k < 3; k++) {
			asyncpool_lease_release(&got[k]);
			asyncpool_lease_release(&got[k]);
		}
		ok(!asyncpool_lease_held(&got[0]), "release is idempotent");
	}
	close(tx);
	close(rx);
	asyncpool_region_unref(w2);

	/* the memory proactor has no ring */
	asyncpool_proactor_create_memory(&mp);
	s = mapped(4096, 4, false);
	is_int(reg(mp, s, ASYNCPOOL_ACCESS_READ, &mr), 0, "memory proactor region");
	is_int(asyncpool_region_fixed_index(mr, 0), -EOPNOTSUPP, "memory: fixed_index -EOPNOTSUPP");
	fake.res = 1;
	is_int(asyncpool_region_recv_lease(mr, &fake, &l), -EOPNOTSUPP, "memory: recv_lease -EOPNOTSUPP");
	asyncpool_region_unref(mr);
	asyncpool_slab_unref(s);
	asyncpool_proactor_destroy(mp);

	/* a READ|WRITE region is fixed buffers: a pool works over it */
	s = mapped(4096, 4, false);
	is_int(reg(p, s, ASYNCPOOL_ACCESS_READ | ASYNCPOOL_ACCESS_WRITE, &rd), 0, "READ|WRITE region");
	is_int(asyncpool_create(rd, &pool), 0, "a pool over READ|WRITE");
	asyncpool_region_unref(rd);
	asyncpool_destroy(pool);
	asyncpool_slab_unref(s);
	is_int(asyncpool_proactor_destroy(p), 0, "destroy after the last region and lease");

	memlock_test();
	io_uring_queue_exit(&ring);
	return done_testing();
}
