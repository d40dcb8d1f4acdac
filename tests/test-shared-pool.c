/* SPDX-License-Identifier: MIT */
/*
 * Shared pools across processes: create in this process, open in a peer
 * started by fork + exec with the memfd passed over a Unix socket;
 * acquire and release across both, exhaustion and data seen by both,
 * release by index and lease adoption, and a hand-off of 100,000
 * buffers from a producer to a consumer process.
 */
#include "config.h"

#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <asyncpool.h>
#include "tap.h"
#include "shared-common.h"

#define N 16
#define BS 256
#define HANDOFF 100000ul
#define HANDOFF_N 64

static void test_storage_and_create(void)
{
	struct asyncpool_proactor *p;
	struct asyncpool_region *r, *w, *other;
	struct asyncpool *a = (void *)1, *b;
	struct asyncpool_lease l;
	size_t size = 1;
	void *mem;

	is_int(asyncpool_shared_storage_size(0, &size), -EINVAL, "storage_size: 0 buffers");
	is_int(size, 0, "storage_size: out zeroed on failure");
	is_int(asyncpool_shared_storage_size(ASYNCPOOL_MAX_BUFFERS + 1u, &size), -EINVAL,
	       "storage_size: beyond ASYNCPOOL_MAX_BUFFERS");
	is_int(asyncpool_shared_storage_size(16, NULL), -EINVAL, "storage_size: NULL out");
	is_int(asyncpool_shared_storage_size(64, &size), 0, "storage_size: 64 buffers");
	is_int(size, 256 + 64 * 8 + 64 * 4 + 64 * 4 + 64 * 832,
	       "storage_size: header, head, counters, state, link, depth, attach");
	is_int(asyncpool_shared_storage_size(ASYNCPOOL_MAX_BUFFERS, &size), 0, "storage_size: the maximum");

	if (asyncpool_proactor_create_memory(&p))
		bail_out("proactor");
	r = make_region(p, BS, N, ASYNCPOOL_ACCESS_READ);
	w = make_region(p, BS, N, ASYNCPOOL_ACCESS_WRITE);
	other = make_region(p, BS, N + 1, ASYNCPOOL_ACCESS_READ);
	asyncpool_shared_storage_size(N, &size);
	mem = mmap(NULL, 65536, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	is_int(asyncpool_create_shared(NULL, size, r, &a), -EINVAL, "create_shared: NULL memory");
	ok(a == NULL, "create_shared: out NULL on failure");
	is_int(asyncpool_create_shared((char *)mem + 8, size, r, &a), -EINVAL, "create_shared: misaligned memory");
	is_int(asyncpool_create_shared(mem, size - 1, r, &a), -EINVAL, "create_shared: too small");
	is_int(asyncpool_create_shared(mem, size, NULL, &a), -EINVAL, "create_shared: NULL region");
	is_int(asyncpool_create_shared(mem, size, w, &a), -EINVAL, "create_shared: WRITE-only region");
	is_int(asyncpool_create_shared(mem, size, r, NULL), -EINVAL, "create_shared: NULL out");
	is_int(((uint32_t *)mem)[0], 0, "create_shared: the errors wrote nothing");
	is_int(asyncpool_open_shared(mem, size, r, &a), -EPROTO, "open_shared: nothing there yet");

	is_int(asyncpool_create_shared(mem, size, r, &a), 0, "create_shared");
	is_int(asyncpool_capacity(a), N, "capacity");
	is_int(asyncpool_available(a), N, "available");
	is_int(asyncpool_create_shared(mem, size, r, &b), -EEXIST, "create_shared: a live pool is there");
	is_int(asyncpool_open_shared(mem, size, other, &b), -EBADMSG, "open_shared: region of another count");
	is_int(asyncpool_open_shared(mem, size - 64, r, &b), -EBADMSG, "open_shared: size below storage_size");
	is_int(asyncpool_open_shared(mem, 64, r, &b), -EINVAL, "open_shared: size below a header");
	is_int(asyncpool_open_shared(mem, size, w, &b), -EINVAL, "open_shared: WRITE-only region");
	is_int(asyncpool_open_shared(mem, size, r, &b), 0, "open_shared: a second handle");
	is_int(asyncpool_acquire(a, &l), 0, "acquire through the first handle");
	is_int(asyncpool_available(b), N - 1, "the second handle sees it");
	is_int(asyncpool_destroy(b), 0, "destroy a shared handle with a buffer out");
	is_int(asyncpool_release_index(a, l.buffer_index), 0, "release_index");
	is_int(asyncpool_release_index(a, l.buffer_index), -EALREADY, "release_index: twice");
	is_int(asyncpool_release_index(a, N), -EINVAL, "release_index: out of range");
	is_int(asyncpool_release_index(NULL, 0), -EINVAL, "release_index: NULL pool");
	memset(&l, 0x55, sizeof(l));
	is_int(asyncpool_lease_adopt(a, 0, &l), -EALREADY, "lease_adopt: a free buffer");
	ok(l.release.fn == NULL && l.span.region == NULL, "lease_adopt: lease zeroed on failure");
	is_int(asyncpool_lease_adopt(a, N, &l), -EINVAL, "lease_adopt: out of range");
	is_int(asyncpool_lease_adopt(NULL, 0, &l), -EINVAL, "lease_adopt: NULL pool");
	is_int(asyncpool_lease_adopt(a, 0, NULL), -EINVAL, "lease_adopt: NULL out");
	is_int(asyncpool_check(a), 0, "check: consistent");
	is_int(asyncpool_check(NULL), -EINVAL, "check: NULL");
	is_int(asyncpool_destroy(a), 0, "destroy the creator's handle");
	is_int(((uint32_t *)mem)[0], 0x4c4f5041, "destroy leaves the shared pool to the others");
	is_int(asyncpool_open_shared(mem, size, r, &b), 0, "open_shared after the creator left");
	is_int(asyncpool_available(b), N, "everything free");
	/*
	 * Cached buffers are available only through the handle whose
	 * threads cache them (issue 15): another handle, or process, can
	 * get them only once that one flushes.
	 */
	is_int(asyncpool_open_shared(mem, size, r, &a), 0, "a handle with caches");
	is_int(asyncpool_set_cache(a, 4), 0, "  set_cache 4 (batches of 2)");
	is_int(asyncpool_acquire(a, &l), 0, "  acquire: its cache takes 2, leases 1");
	asyncpool_lease_release(&l);
	is_int(asyncpool_available(a), N, "  its 2 cached buffers are available to it");
	is_int(asyncpool_available(b), N - 2, "  not to the other handle");
	is_int(asyncpool_destroy(a), 0, "  close it: its caches flush");
	is_int(asyncpool_available(b), N, "  then all are available to the other");
	asyncpool_destroy(b);
	munmap(mem, 65536);
	asyncpool_region_unref(r);
	asyncpool_region_unref(w);
	asyncpool_region_unref(other);
	is_int(asyncpool_proactor_destroy(p), 0, "the handles freed their regions");
}

static void test_bundle_errors(void)
{
	struct asyncpool_shared_options o;
	struct asyncpool_shared *sp = (void *)1;
	struct asyncpool_shm shm;
	char name[128];

	shared_options(&o, BS, N);
	is_int(asyncpool_shared_create(NULL, &sp), -EINVAL, "shared_create: NULL options");
	ok(sp == NULL, "shared_create: out NULL on failure");
	is_int(asyncpool_shared_create(&o, NULL), -EINVAL, "shared_create: NULL out");
	o.size = 8;
	is_int(asyncpool_shared_create(&o, &sp), -EINVAL, "shared_create: size too small");
	o.size = sizeof(o);
	o.reserved = 1;
	is_int(asyncpool_shared_create(&o, &sp), -EINVAL, "shared_create: reserved set");
	o.reserved = 0;
	o.flags = 0x100;
	is_int(asyncpool_shared_create(&o, &sp), -EINVAL, "shared_create: unknown flag");
	o.flags = 0;
	o.mode = 0600;
	is_int(asyncpool_shared_create(&o, &sp), -EINVAL, "shared_create: mode without a name");
	test_shm_name(name, sizeof(name), "bundle-err");
	o.name = name;
	o.flags = ASYNCPOOL_SHARED_HUGE_PREFER;
	is_int(asyncpool_shared_create(&o, &sp), -EINVAL, "shared_create: huge pages with a name");
	o.flags = 0;
	o.mode = 01600;
	is_int(asyncpool_shared_create(&o, &sp), -EINVAL, "shared_create: mode beyond 0777");
	o.mode = 0;
	o.name = "bad";
	is_int(asyncpool_shared_create(&o, &sp), -EINVAL, "shared_create: bad name");
	o.name = NULL;
	o.buffer_size = 100;
	is_int(asyncpool_shared_create(&o, &sp), -EINVAL, "shared_create: buffer size not a multiple of 64");
	o.buffer_size = BS;
	o.buffer_count = 0;
	is_int(asyncpool_shared_create(&o, &sp), -EINVAL, "shared_create: no buffers");
	o.buffer_count = 1u << 30;
	o.buffer_size = 1ull << 40;
	is_int(asyncpool_shared_create(&o, &sp), -EOVERFLOW, "shared_create: size overflows");

	is_int(asyncpool_shared_open_fd(-1, &sp), -EBADF, "shared_open_fd: -1");
	is_int(asyncpool_shared_open_fd(0, NULL), -EINVAL, "shared_open_fd: NULL out");
	is_int(asyncpool_shared_open_named(NULL, &sp), -EINVAL, "shared_open_named: NULL name");
	is_int(asyncpool_shared_open_named(name, &sp), -ENOENT, "shared_open_named: missing");
	if (asyncpool_shm_create(65536, 0, &shm))
		bail_out("shm");
	{
		int before = count_fds();

		is_int(asyncpool_shared_open_fd(shm.fd, &sp), -EPROTO, "shared_open_fd: no pool in it");
		is_int(count_fds(), before, "shared_open_fd: no fd left behind by a failure");
	}
	asyncpool_shm_close(&shm);

	/* A pool layout without room for its buffers after it. */
	{
		struct asyncpool_proactor *p;
		struct asyncpool_region *r;
		struct asyncpool *pool;
		size_t size;

		asyncpool_shared_storage_size(N, &size);
		if (asyncpool_shm_create(size, 0, &shm) || asyncpool_proactor_create_memory(&p))
			bail_out("shm");
		r = make_region(p, BS, N, ASYNCPOOL_ACCESS_READ);
		is_int(asyncpool_create_shared(shm.base, shm.size, r, &pool), 0, "a pool layout alone");
		is_int(asyncpool_shared_open_fd(shm.fd, &sp), -EBADMSG, "shared_open_fd: buffers not in the object");
		asyncpool_destroy(pool);
		asyncpool_region_unref(r);
		asyncpool_proactor_destroy(p);
		asyncpool_shm_close(&shm);
	}
	asyncpool_shared_close(NULL);
	ok(asyncpool_shared_pool(NULL) == NULL && asyncpool_shared_region(NULL) == NULL &&
	   asyncpool_shared_shm(NULL) == NULL && asyncpool_shared_fd(NULL) == -EINVAL,
	   "accessors of NULL");
}

static void test_two_processes(void)
{
	struct asyncpool_shared_options o;
	struct asyncpool_shared *sp;
	struct asyncpool *pool;
	struct asyncpool_lease mine[N];
	struct peer_rep rep;
	uint32_t theirs[N];
	int sock, nmine = 0, ntheirs = 0, rc, bad;
	int32_t orc = -1;
	pid_t pid;
	char *base;

	shared_options(&o, BS, N);
	is_int(asyncpool_shared_create(&o, &sp), 0, "shared_create: anonymous");
	pool = asyncpool_shared_pool(sp);
	base = asyncpool_region_base(asyncpool_shared_region(sp));
	ok(asyncpool_shared_fd(sp) >= 0, "shared_fd");
	ok((uintptr_t)base % 4096 == 0 && base == (char *)asyncpool_shared_shm(sp)->base + 4096 * 14,
	   "buffers on the first 4096-byte boundary after the layout");

	pid = spawn_peer(&sock, "serve", NULL);
	if (pid < 0)
		bail_out("spawn");
	is_int(asyncpool_shm_send_fd(sock, asyncpool_shared_fd(sp)), 0, "send the memfd to the peer");
	ok(read_full(sock, &orc, sizeof(orc)) == 0 && orc == 0, "the peer opened the pool (%d)", orc);

	for (int i = 0; i < 10; i++)
		if (asyncpool_acquire(pool, &mine[nmine]) == 0)
			nmine++;
	is_int(nmine, 10, "this process acquires 10");
	bad = 0;
	for (int i = 0; i < 6; i++) {
		rc = peer_call(sock, OP_ACQUIRE, 0, 0, &rep);
		if (rc == 0)
			theirs[ntheirs++] = rep.index;
		else
			bad++;
	}
	is_int(ntheirs, 6, "the peer acquires the other 6");
	is_int(peer_call(sock, OP_ACQUIRE, 0, 0, NULL), -ENOBUFS, "the peer finds the pool empty");
	{
		struct asyncpool_lease l;

		is_int(asyncpool_acquire(pool, &l), -ENOBUFS, "this process finds it empty too");
	}
	peer_call(sock, OP_AVAILABLE, 0, 0, &rep);
	is_int(rep.value, 0, "the peer sees 0 available");
	bad = 0;
	for (int i = 0; i < nmine; i++)
		for (int j = 0; j < ntheirs; j++)
			if (mine[i].buffer_index == theirs[j])
				bad++;
	is_int(bad, 0, "no buffer is held by both processes");

	*(uint64_t *)asyncpool_span_ptr(mine[3].span) = 0x1122334455667788ull;
	peer_call(sock, OP_READ, mine[3].buffer_index, 0, &rep);
	is_int(rep.value, 0x1122334455667788ull, "the peer reads what this process wrote");
	peer_call(sock, OP_WRITE, theirs[2], 0xfeedfacecafebeefull, NULL);
	is_int(*(uint64_t *)(base + (size_t)theirs[2] * BS), (long long)0xfeedfacecafebeefull,
	       "this process reads what the peer wrote");

	is_int(peer_call(sock, OP_RELEASE, theirs[5], 0, NULL), 0, "the peer releases one");
	{
		struct asyncpool_lease l;

		is_int(asyncpool_acquire(pool, &l), 0, "this process acquires it");
		is_int(l.buffer_index, theirs[5], "the same buffer");
		mine[nmine++] = l;
	}
	ntheirs--;

	/* Hand-off: the peer releases a buffer this process acquired. */
	is_int(peer_call(sock, OP_RELEASE_INDEX, mine[0].buffer_index, 0, NULL), 0,
	       "the peer releases this process's buffer by index");
	is_int(asyncpool_release_index(pool, mine[0].buffer_index), -EALREADY,
	       "a second release here is refused");
	is_int(peer_call(sock, OP_RELEASE_INDEX, mine[0].buffer_index, 0, NULL), -EALREADY,
	       "and in the peer");
	is_int(peer_call(sock, OP_RELEASE_INDEX, N, 0, NULL), -EINVAL, "release_index out of range in the peer");
	mine[0].release.fn = NULL;      /* handed off */

	/* Adoption: the peer takes over a lease of this process. */
	is_int(peer_call(sock, OP_ADOPT, mine[1].buffer_index, 0, NULL), 0, "the peer adopts a lease by index");
	is_int(peer_call(sock, OP_RELEASE, mine[1].buffer_index, 0, NULL), 0, "and releases it");
	mine[1].release.fn = NULL;
	is_int(peer_call(sock, OP_ADOPT, mine[1].buffer_index, 0, NULL), -EALREADY, "adopting a free buffer");
	is_int(peer_call(sock, OP_ADOPT, N + 5, 0, NULL), -EINVAL, "adopting out of range");

	for (int i = 0; i < nmine; i++)
		asyncpool_lease_release(&mine[i]);
	for (int j = 0; j < 5; j++)
		peer_call(sock, OP_RELEASE, theirs[j], 0, NULL);
	is_int(asyncpool_available(pool), N, "all buffers back");
	peer_call(sock, OP_AVAILABLE, 0, 0, &rep);
	is_int(rep.value, N, "the peer sees all of them back");
	is_int(peer_call(sock, OP_CHECK, 0, 0, NULL), 0, "check in the peer: consistent");
	is_int(asyncpool_check(pool), 0, "check here: consistent");
	{
		struct asyncpool_stats st;

		memset(&st, 0, sizeof(st));
		st.size = sizeof(st);
		asyncpool_stats(pool, &st);
		is_int(st.bad_releases, 2, "the two refused releases are counted in shared memory");
		is_int(st.corruptions, 0, "no corruption");
	}
	peer_call(sock, OP_QUIT, 0, 0, NULL);
	is_int(wait_peer(pid), 0, "the peer exited 0");
	close(sock);
	asyncpool_shared_close(sp);
}

static void test_named_bundle(void)
{
	struct asyncpool_shared_options o;
	struct asyncpool_shared *a, *b;
	struct asyncpool_lease l;
	struct stat st;
	char name[128];

	test_shm_name(name, sizeof(name), "bundle");
	shared_options(&o, BS, N);
	o.name = name;
	is_int(asyncpool_shared_create(&o, &a), 0, "shared_create: named");
	fstat(asyncpool_shared_fd(a), &st);
	is_int(st.st_mode & 0777, 0600, "named: mode 0600");
	is_int(asyncpool_shared_create(&o, &b), -EEXIST, "shared_create: the name is taken");
	is_int(asyncpool_shared_open_named(name, &b), 0, "shared_open_named");
	is_int(asyncpool_acquire(asyncpool_shared_pool(a), &l), 0, "acquire from the creator");
	is_int(asyncpool_available(asyncpool_shared_pool(b)), N - 1, "seen through the name");
	memset(asyncpool_span_ptr(l.span), 0x5a, BS);
	is_int(((unsigned char *)asyncpool_region_base(asyncpool_shared_region(b)))
	       [(size_t)l.buffer_index * BS + BS - 1], 0x5a, "the same buffer memory");
	asyncpool_lease_release(&l);
	asyncpool_shared_close(b);
	asyncpool_shared_close(a);
	is_int(asyncpool_shm_unlink_named(name), 0, "close leaves the name; unlink it");
}

static void test_handoff(void)
{
	struct asyncpool_shared_options o;
	struct asyncpool_shared *sp;
	struct asyncpool *pool;
	uint64_t res[3] = { 0, 0, 0 }, t0, t1, waits = 0;
	int sock, gone = 0;
	int32_t orc = -1;
	char arg[32];
	pid_t pid;

	shared_options(&o, BS, HANDOFF_N);
	if (asyncpool_shared_create(&o, &sp))
		bail_out("shared_create");
	pool = asyncpool_shared_pool(sp);
	snprintf(arg, sizeof(arg), "%lu", HANDOFF);
	pid = spawn_peer(&sock, "consumer", arg);
	if (pid < 0)
		bail_out("spawn");
	asyncpool_shm_send_fd(sock, asyncpool_shared_fd(sp));
	ok(read_full(sock, &orc, sizeof(orc)) == 0 && orc == 0, "the consumer opened the pool");
	t0 = now_ns();
	for (unsigned long k = 0; k < HANDOFF && !gone; k++) {
		struct asyncpool_lease l;
		unsigned char *p;
		uint32_t idx;
		int rc;

		while ((rc = asyncpool_acquire(pool, &l)) == -ENOBUFS) {
			waits++;
			sched_yield();
			if (waits % 4096 == 0 && waitpid(pid, NULL, WNOHANG) == pid) {
				gone = 1;
				break;
			}
		}
		if (rc)
			break;
		p = asyncpool_span_ptr(l.span);
		memcpy(p, &(uint64_t){ k }, sizeof(uint64_t));
		memset(p + sizeof(uint64_t), (int)(k & 0xff), BS - sizeof(uint64_t));
		idx = l.buffer_index;
		if (write_full(sock, &idx, sizeof(idx)))
			break;
	}
	ok(!gone && read_full(sock, res, sizeof(res)) == 0, "the consumer reported");
	t1 = now_ns();
	is_int(res[0], HANDOFF, "the consumer verified 100,000 buffers");
	is_int(res[1], 0, "no buffer had the wrong contents");
	is_int(res[2], 0, "every release by index or adoption succeeded");
	is_int(wait_peer(pid), 0, "the consumer exited 0");
	is_int(asyncpool_available(pool), HANDOFF_N, "every buffer came back");
	is_int(asyncpool_check(pool), 0, "the freelist is consistent");
	diag("hand-off: %lu buffers in %.1f ms (%.2f M/s), producer waited %llu times",
	     HANDOFF, (double)(t1 - t0) / 1e6, (double)HANDOFF * 1e3 / (double)(t1 - t0),
	     (unsigned long long)waits);
	close(sock);
	asyncpool_shared_close(sp);
}

int main(void)
{
	test_storage_and_create();
	test_bundle_errors();
	test_two_processes();
	test_named_bundle();
	test_handoff();
	return done_testing();
}
