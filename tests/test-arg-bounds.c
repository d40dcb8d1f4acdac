/* SPDX-License-Identifier: MIT */
/*
 * Struct sizes and bulk counts are bounded before anything is read or
 * written (issue 14, findings 5 and 6).
 *   5. Every public struct with a leading size field: a size beyond 4096
 *      is -E2BIG, and nothing beyond the struct this build knows is read
 *      or written (the struct ends where a PROT_NONE page begins); below
 *      the minimum is -EINVAL; up to 4096 the unknown tail must be zero.
 *   6. asyncpool_acquire_bulk() with n beyond the capacity, or without a
 *      pool: -EINVAL and nothing written (n = UINT_MAX once crashed).
 * Each call runs in a child process, so that a crash is one failed test.
 * And a lease whose index was overwritten (beyond the capacity) is
 * refused by every release path before it touches the state array.
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <asyncpool.h>
#include "tap.h"
#include "testutil.h"

#define PAGE_MAX 65536
#define CAP 16

static struct asyncpool_proactor *prox;
static struct asyncpool_region *region;
static struct asyncpool *pool, *cached;
static struct asyncpool_shared *shared_cached;  /* CAP buffers, caches of 4 */
static unsigned char *page;     /* one page; a PROT_NONE one after it */
static size_t page_size;

/* The address where an object of len bytes ends at the guard page. */
static void *at_end(size_t len)
{
	return page + page_size - len;
}

typedef int (*call_fn)(void *arg);

/*
 * fn(arg) in a child: its return value, or INT_MIN + signal when it was
 * killed.  The child inherits the pools and the page.
 */
static int in_child(call_fn fn, void *arg)
{
	int pfd[2], rc = INT_MIN, st;
	pid_t pid;

	if (pipe(pfd))
		bail_out("pipe");
	pid = fork_or_bail();
	if (pid == 0) {
		close(pfd[0]);
		rc = fn(arg);
		if (write(pfd[1], &rc, sizeof(rc)) != sizeof(rc))
			_exit(2);
		_exit(0);
	}
	close(pfd[1]);
	if (read(pfd[0], &rc, sizeof(rc)) != sizeof(rc))
		rc = INT_MIN;
	close(pfd[0]);
	while (waitpid(pid, &st, 0) < 0)
		;
	if (WIFSIGNALED(st))
		rc = INT_MIN + WTERMSIG(st);
	return rc;
}

/* Compare a child's result, naming a signal that killed it. */
#define is_call(got, want, ...) do {                                          \
	int got_ = (got);                                                     \
	if (!ok(got_ == (want), __VA_ARGS__)) {                               \
		if (got_ < INT_MIN + 128)                                     \
			diag("  killed by signal %d", got_ - INT_MIN);        \
		else                                                          \
			diag("  got %d, want %d", got_, (int)(want));         \
	}                                                                     \
} while (0)

/* ---- the calls, with the struct at a given place and size ---- */

struct call {
	void  *at;      /* where the struct is */
	size_t size;    /* its size field */
	size_t known;   /* sizeof the struct */
};

static void fill_slab(struct asyncpool_slab_options *o, size_t size)
{
	o->size = size;
	o->buffer_size = 4096;
	o->buffer_count = 4;
	o->numa_node = -1;
}

static int call_slab(void *arg)
{
	struct call *c = arg;
	struct asyncpool_slab *slab;
	int rc;

	fill_slab(c->at, c->size);
	rc = asyncpool_slab_create(c->at, &slab);
	if (rc == 0)
		asyncpool_slab_unref(slab);
	return rc;
}

static int call_opts(void *arg)
{
	struct call *c = arg;
	struct asyncpool_options *o = c->at;
	struct asyncpool *p;
	int rc;

	o->size = c->size;
	rc = asyncpool_create_opts(region, o, &p);
	if (rc == 0)
		asyncpool_destroy(p);
	return rc;
}

static int call_shared(void *arg)
{
	struct call *c = arg;
	struct asyncpool_shared_options *o = c->at;
	struct asyncpool_shared *sp;
	int rc;

	o->size = c->size;
	o->buffer_size = 4096;
	o->buffer_count = 4;
	rc = asyncpool_shared_create(o, &sp);
	if (rc == 0)
		asyncpool_shared_close(sp);
	return rc;
}

static struct asyncpool_shared *bundle;

static int call_shared_open(void *arg)
{
	struct call *c = arg;
	struct asyncpool_shared_open_options *o = c->at;
	struct asyncpool_shared *sp;
	int rc;

	o->size = c->size;
	o->fd = asyncpool_shared_fd(bundle);
	rc = asyncpool_shared_open(o, &sp);
	if (rc == 0)
		asyncpool_shared_close(sp);
	return rc;
}

static int call_stats(void *arg)
{
	struct call *c = arg;
	struct asyncpool_stats *s = c->at;
	unsigned char before[sizeof(struct asyncpool_stats)];
	int rc;

	s->size = c->size;
	memcpy(before, s, sizeof(before));
	rc = asyncpool_stats(pool, s);
	/* refused: the caller's memory must be as it was */
	if (rc && memcmp(before, s, sizeof(before)))
		return 1000;
	if (rc == 0 && s->capacity != CAP)
		return 1001;
	/* accepted: the bytes beyond the struct this build knows are zeroed */
	for (size_t i = sizeof(before); rc == 0 && c->size <= 4096 && i < c->size; i++)
		if (((unsigned char *)s)[i])
			return 1002;
	return rc;
}

/* One struct: the sizes around each bound. */
static void struct_bounds(const char *what, call_fn fn, size_t known, bool writes)
{
	static const size_t big[] = { 4097, 8192, (size_t)1 << 32, SIZE_MAX };
	struct call c = { .known = known };

	/* Too small: only the size field. */
	memset(page, 0, page_size);
	c.at = at_end(known);
	c.size = sizeof(size_t);
	is_call(in_child(fn, &c), -EINVAL, "%s: size %zu, below the minimum: EINVAL", what, c.size);
	c.size = 0;
	is_call(in_child(fn, &c), -EINVAL, "%s: size 0: EINVAL", what);
	c.size = known;
	is_call(in_child(fn, &c), 0, "%s: size %zu, this build's: accepted", what, known);

	/* Up to a page: a zero tail is fine, a non-zero one is not. */
	if (page_size >= 4096) {
		c.at = page + page_size - 4096;
		c.size = 4096;
		memset(page, 0, page_size);
		is_call(in_child(fn, &c), 0, "%s: size 4096, zero tail: accepted", what);
		if (writes) {
			memset(page, 0xa5, page_size);
			is_call(in_child(fn, &c), 0, "%s: size 4096: accepted, the unknown tail zeroed",
				what);
		} else {
			page[page_size - 1] = 1;
			is_call(in_child(fn, &c), -EINVAL, "%s: size 4096, non-zero tail: EINVAL", what);
		}
	} else {
		skip(2, "pages smaller than 4096 bytes");
	}

	/* Beyond a page: -E2BIG, and the struct ends at the guard page. */
	for (size_t i = 0; i < sizeof(big) / sizeof(big[0]); i++) {
		memset(page, writes ? 0xa5 : 0, page_size);
		c.at = at_end(known);
		c.size = big[i];
		is_call(in_child(fn, &c), -E2BIG,
			"%s: size %zu: E2BIG, nothing read or written past the struct%s", what,
			big[i], writes ? ", the struct untouched" : "");
	}
}

/* ---- 6: acquire_bulk ---- */

struct bulk {
	struct asyncpool *pool;
	struct asyncpool_lease *leases;
	unsigned int n;
	unsigned int room;      /* leases that fit before the guard page */
};

static int call_bulk(void *arg)
{
	struct bulk *b = arg;
	unsigned char *before = malloc((size_t)b->room * sizeof(*b->leases));
	int rc;

	if (!before)
		return 2000;
	memcpy(before, b->leases, (size_t)b->room * sizeof(*b->leases));
	rc = asyncpool_acquire_bulk(b->pool, b->leases, b->n);
	if (rc && memcmp(before, b->leases, (size_t)b->room * sizeof(*b->leases)))
		rc = 1000;      /* refused, but wrote into the array */
	else if (rc == 0)
		asyncpool_release_bulk(b->leases, b->n);
	free(before);
	return rc;
}

static void bulk_bounds(const char *what, struct asyncpool *p)
{
	static const unsigned int bad[] = { CAP + 1, 1000, UINT_MAX / 2, UINT_MAX };
	unsigned int room = 4;
	struct bulk b = { .pool = p, .room = room };

	b.leases = at_end(room * sizeof(struct asyncpool_lease));
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		memset(page, 0xa5, page_size);
		b.n = bad[i];
		is_call(in_child(call_bulk, &b), -EINVAL,
			"acquire_bulk (%s): n = %u > capacity %d: EINVAL, nothing written",
			what, bad[i], CAP);
	}
	memset(page, 0xa5, page_size);
	b.pool = NULL;
	b.n = room;
	is_call(in_child(call_bulk, &b), -EINVAL, "acquire_bulk (%s): NULL pool: EINVAL, nothing written",
		what);
	b.pool = p;
	b.n = room;
	is_call(in_child(call_bulk, &b), 0, "acquire_bulk (%s): n = %u: acquired", what, room);
	b.leases = at_end(CAP * sizeof(struct asyncpool_lease));
	b.room = CAP;
	b.n = CAP;
	is_call(in_child(call_bulk, &b), 0, "acquire_bulk (%s): n = capacity: acquired", what);
}

static void forged_index(const char *what, struct asyncpool *p)
{
	struct asyncpool_lease l, bad;

	if (asyncpool_acquire(p, &l))
		bail_out("acquire");
	bad = l;
	bad.buffer_index = 0x7ffffff0u;
	asyncpool_lease_release(&bad);
	bad = l;
	bad.buffer_index = 0x7ffffff0u;
	asyncpool_release_bulk(&bad, 1);
	is_int(asyncpool_release_index(p, 0x7ffffff0u), -EINVAL,
	       "%s: release_index beyond the capacity: EINVAL", what);
	is_int(asyncpool_available(p), CAP - 1, "%s: a lease with an index out of range released nothing", what);
	is_int(asyncpool_check(p), 0, "%s: and left the pool whole", what);
	asyncpool_lease_release(&l);
	is_int(asyncpool_available(p), CAP, "%s: the real lease goes back", what);
}

static void setup(void)
{
	struct asyncpool_slab_options so;
	struct asyncpool_options po;
	struct asyncpool_slab *slab;
	long ps = sysconf(_SC_PAGESIZE);
	unsigned char *map;

	page_size = ps > 0 && ps <= PAGE_MAX ? (size_t)ps : 4096;
	map = mmap(NULL, 2 * page_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (map == MAP_FAILED || mprotect(map + page_size, page_size, PROT_NONE))
		bail_out("guard page");
	page = map;

	memset(&so, 0, sizeof(so));
	fill_slab(&so, sizeof(so));
	so.buffer_count = CAP;
	if (asyncpool_proactor_create_memory(&prox) || asyncpool_slab_create(&so, &slab) ||
	    asyncpool_proactor_register_slab(prox, slab, ASYNCPOOL_ACCESS_READ, &region))
		bail_out("setup");
	asyncpool_slab_unref(slab);
	memset(&po, 0, sizeof(po));
	po.size = sizeof(po);
	po.cache_size = 4;
	if (asyncpool_create(region, &pool) || asyncpool_create_opts(region, &po, &cached))
		bail_out("pools");
	{
		struct asyncpool_shared_options o;

		shared_options(&o, 4096, 4);
		if (asyncpool_shared_create(&o, &bundle))
			bail_out("shared_create");
		shared_options(&o, 64, CAP);
		if (asyncpool_shared_create(&o, &shared_cached) ||
		    asyncpool_set_cache(asyncpool_shared_pool(shared_cached), 4))
			bail_out("shared_create (cached)");
	}
}

int main(void)
{
	setup();
	struct_bounds("slab_create", call_slab, sizeof(struct asyncpool_slab_options), false);
	struct_bounds("create_opts", call_opts, sizeof(struct asyncpool_options), false);
	struct_bounds("shared_create", call_shared, sizeof(struct asyncpool_shared_options), false);
	struct_bounds("shared_open", call_shared_open,
		      sizeof(struct asyncpool_shared_open_options), false);
	struct_bounds("stats", call_stats, sizeof(struct asyncpool_stats), true);
	bulk_bounds("uncached", pool);
	bulk_bounds("cached", cached);
	forged_index("uncached", pool);
	forged_index("cached", cached);
	forged_index("shared cached", asyncpool_shared_pool(shared_cached));

	asyncpool_shared_close(bundle);
	asyncpool_shared_close(shared_cached);
	asyncpool_destroy(cached);
	asyncpool_destroy(pool);
	asyncpool_region_unref(region);
	asyncpool_proactor_destroy(prox);
	munmap(page, 2 * page_size);
	return done_testing();
}
