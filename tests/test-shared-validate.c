/* SPDX-License-Identifier: MIT */
/*
 * Validation of shared state that another process may have written:
 * each header field corrupted in turn gives its errno; 100,000 random
 * headers never crash; a corrupted head or next[] gives -EUCLEAN or
 * -EBADMSG, never a crash or a hang; `asyncpool inspect` reports the
 * same, with its exit status, and writes nothing.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <asyncpool.h>
#include "tap.h"
#include "shared-common.h"
#include "../lib/pool_layout.h"

#define N 16
#define BS 64
#define RANDOM_HEADERS 100000

static struct asyncpool_proactor *prox;
static struct asyncpool_region *reg;
static unsigned char *mem;
static unsigned char good[1 << 17];
static size_t storage;

static uint64_t rnd_state = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
	rnd_state ^= rnd_state << 13;
	rnd_state ^= rnd_state >> 7;
	rnd_state ^= rnd_state << 17;
	return rnd_state;
}

static struct ap_pool_header *hdr(void)
{
	return (struct ap_pool_header *)mem;
}

static _Atomic uint64_t *head(void)
{
	return (_Atomic uint64_t *)(mem + AP_OFF_HEAD);
}

static _Atomic uint64_t *next(void)
{
	return (_Atomic uint64_t *)(mem + AP_OFF_NEXT);
}

static _Atomic uint32_t *links(void)
{
	struct ap_layout_geometry g;

	(void)ap_layout_geometry(N, true, &g);
	return (_Atomic uint32_t *)(mem + g.link_offset);
}

/* Buffer i: FREE with link v. */
static void set_link(int i, uint32_t v)
{
	atomic_store(&next()[i], AP_W_MAKE(AP_K_FREE, 0, 0));
	atomic_store(&links()[i], v);
}

static void restore(void)
{
	memcpy(mem, good, storage);
}

static void setup(void)
{
	struct asyncpool *pool;

	if (asyncpool_proactor_create_memory(&prox))
		bail_out("proactor");
	reg = make_region(prox, BS, N, ASYNCPOOL_ACCESS_READ);
	asyncpool_shared_storage_size(N, &storage);
	mem = mmap(NULL, sizeof(good), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED || storage > sizeof(good) ||
	    asyncpool_create_shared(mem, storage, reg, &pool))
		bail_out("create_shared");
	asyncpool_destroy(pool);
	memcpy(good, mem, storage);
}

/* The documented byte offsets of asyncpool-shared(7). */
static void test_offsets(void)
{
	ok(offsetof(struct ap_pool_header, magic) == 0 &&
	   offsetof(struct ap_pool_header, version) == 4 &&
	   offsetof(struct ap_pool_header, header_size) == 8 &&
	   offsetof(struct ap_pool_header, flags) == 12 &&
	   offsetof(struct ap_pool_header, storage_size) == 16 &&
	   offsetof(struct ap_pool_header, buffer_size) == 24 &&
	   offsetof(struct ap_pool_header, buffer_count) == 32 &&
	   offsetof(struct ap_pool_header, attach_slots) == 36 &&
	   offsetof(struct ap_pool_header, head_offset) == 40 &&
	   offsetof(struct ap_pool_header, counters_offset) == 48 &&
	   offsetof(struct ap_pool_header, next_offset) == 56 &&
	   offsetof(struct ap_pool_header, depth_offset) == 64 &&
	   offsetof(struct ap_pool_header, attach_offset) == 72 &&
	   offsetof(struct ap_pool_header, link_offset) == 80 &&
	   offsetof(struct ap_pool_header, channel_count) == 88 &&
	   offsetof(struct ap_pool_header, channel_capacity) == 92 &&
	   offsetof(struct ap_pool_header, channel_offset) == 96 &&
	   offsetof(struct ap_pool_header, from_offset) == 104 &&
	   offsetof(struct ap_pool_header, reserved) == 112,
	   "header fields at the offsets of asyncpool-shared(7)");
	ok(!memcmp(good, "APOL", 4), "the magic reads \"APOL\" in memory");
	is_int(((uint32_t *)good)[1], 3, "layout version 3");
	ok(offsetof(struct ap_step, idx) == 8 && offsetof(struct ap_step, word) == 64 &&
	   sizeof(struct ap_step) == 192 && offsetof(struct ap_attach, step) == 64 &&
	   sizeof(struct ap_attach) == 832,
	   "step and attachment records at the offsets of asyncpool-shared(7)");
	{
		struct ap_layout_geometry g;

		(void)ap_layout_geometry(N, true, &g);
		is_int(((uint64_t *)good)[10], g.link_offset, "link_offset: after state[]");
		is_int(g.link_offset, AP_OFF_NEXT + ((8 * N + 63) & ~63), "link[] follows state[]");
		is_int(g.depth_offset, g.link_offset + ((4 * N + 63) & ~63), "depth[] follows link[]");
	}
	is_int(AP_W_MAKE(AP_K_LEASED, 5, 0xfedcba98u), 0x42800000fedcba98ull,
	       "word: kind 62-63, holder 55-61, generation 0-31");
}

struct field_case {
	const char *what;
	size_t off;
	int width;              /* 4 or 8 */
	uint64_t value;
	int want;
};

static void put(size_t off, int width, uint64_t v)
{
	if (width == 4) {
		uint32_t x = (uint32_t)v;

		memcpy(mem + off, &x, 4);
	} else {
		memcpy(mem + off, &v, 8);
	}
}

static void test_fields(void)
{
	struct ap_layout_geometry g;
	uint64_t dep, att;

	(void)ap_layout_geometry(N, true, &g);
	dep = g.depth_offset;
	att = g.attach_offset;
#define F(f) offsetof(struct ap_pool_header, f)
	const struct field_case cases[] = {
		{ "magic zero", F(magic), 4, 0, -EPROTO },
		{ "magic off by one bit", F(magic), 4, AP_POOL_MAGIC ^ 1, -EPROTO },
		{ "magic byte-swapped", F(magic), 4, __builtin_bswap32(AP_POOL_MAGIC), -EPROTO },
		{ "version 0", F(version), 4, 0, -EPROTONOSUPPORT },
		{ "version 1 (the layout before generations)", F(version), 4, 1, -EPROTONOSUPPORT },
		{ "version 2 (the link in the word, a 23-bit generation)", F(version), 4, 2,
		  -EPROTONOSUPPORT },
		{ "version 4 (1.4 to 1.9's channels)", F(version), 4, 4, -EPROTONOSUPPORT },
		{ "version 5 without channels", F(version), 4, 5, -EBADMSG },
		{ "version 6", F(version), 4, 6, -EPROTONOSUPPORT },
		{ "version 0xffffffff", F(version), 4, 0xffffffff, -EPROTONOSUPPORT },
		{ "header_size 64", F(header_size), 4, 64, -EBADMSG },
		{ "header_size 256", F(header_size), 4, 256, -EBADMSG },
		{ "flags 0 (a local layout)", F(flags), 4, 0, -EBADMSG },
		{ "flags: CHAN_DROP in version 3", F(flags), 4, 3, -EBADMSG },
		{ "storage_size + 64", F(storage_size), 8, storage + 64, -EBADMSG },
		{ "storage_size - 64", F(storage_size), 8, storage - 64, -EBADMSG },
		{ "storage_size 0", F(storage_size), 8, 0, -EBADMSG },
		{ "storage_size huge", F(storage_size), 8, UINT64_MAX, -EBADMSG },
		{ "buffer_size other than the region's", F(buffer_size), 8, 128, -EBADMSG },
		{ "buffer_size 0", F(buffer_size), 8, 0, -EBADMSG },
		{ "buffer_size not a multiple of 64", F(buffer_size), 8, 65, -EBADMSG },
		{ "buffer_count other than the region's", F(buffer_count), 4, N - 1, -EBADMSG },
		{ "buffer_count 0", F(buffer_count), 4, 0, -EBADMSG },
		{ "buffer_count 0xffffffff", F(buffer_count), 4, 0xffffffff, -EBADMSG },
		{ "attach_slots 0", F(attach_slots), 4, 0, -EBADMSG },
		{ "attach_slots 65", F(attach_slots), 4, 65, -EBADMSG },
		{ "head_offset 0", F(head_offset), 8, 0, -EBADMSG },
		{ "head_offset misaligned", F(head_offset), 8, 129, -EBADMSG },
		{ "head_offset on the counters", F(head_offset), 8, AP_OFF_COUNTERS, -EBADMSG },
		{ "head_offset out of bounds", F(head_offset), 8, 1ull << 62, -EBADMSG },
		{ "counters_offset on the head", F(counters_offset), 8, AP_OFF_HEAD, -EBADMSG },
		{ "counters_offset misaligned", F(counters_offset), 8, AP_OFF_COUNTERS + 4, -EBADMSG },
		{ "next_offset 0", F(next_offset), 8, 0, -EBADMSG },
		{ "next_offset past the end", F(next_offset), 8, storage, -EBADMSG },
		{ "next_offset wraps", F(next_offset), 8, UINT64_MAX - 63, -EBADMSG },
		{ "depth_offset 0", F(depth_offset), 8, 0, -EBADMSG },
		{ "depth_offset on state[]", F(depth_offset), 8, AP_OFF_NEXT, -EBADMSG },
		{ "depth_offset misaligned", F(depth_offset), 8, dep + 4, -EBADMSG },
		{ "depth_offset + 64", F(depth_offset), 8, dep + 64, -EBADMSG },
		{ "attach_offset 0", F(attach_offset), 8, 0, -EBADMSG },
		{ "attach_offset at the end", F(attach_offset), 8, storage, -EBADMSG },
		{ "attach_offset + 64", F(attach_offset), 8, att + 64, -EBADMSG },
		{ "link_offset 0 (a version 2 header)", F(link_offset), 8, 0, -EBADMSG },
		{ "link_offset on state[]", F(link_offset), 8, AP_OFF_NEXT, -EBADMSG },
		{ "link_offset on depth[]", F(link_offset), 8, dep, -EBADMSG },
		{ "link_offset misaligned", F(link_offset), 8, dep - 64 + 4, -EBADMSG },
		{ "channel_count in version 3", F(channel_count), 4, 1, -EBADMSG },
		{ "channel_capacity in version 3", F(channel_capacity), 4, 1, -EBADMSG },
		{ "channel_offset in version 3", F(channel_offset), 8, 1, -EBADMSG },
		{ "reserved[0]", F(reserved) + 0, 8, 1, -EBADMSG },
		{ "reserved[1]", F(reserved) + 8, 8, 1, -EBADMSG },
		{ "from_offset in version 3", F(from_offset), 8, 1ull << 63, -EBADMSG },
		{ "flags unknown bit 2", F(flags), 4, AP_POOL_F_SHARED | 4, -EBADMSG },
		{ "head index = buffer_count", AP_OFF_HEAD, 8, AP_HEAD_MAKE(N, 7), -EBADMSG },
		{ "head index = AP_FL_END - 1", AP_OFF_HEAD, 8, AP_HEAD_MAKE(AP_FL_END - 1, 0), -EBADMSG },
	};
#undef F
	struct asyncpool *pool;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		restore();
		put(cases[i].off, cases[i].width, cases[i].value);
		pool = (void *)1;
		is_int(asyncpool_open_shared(mem, storage, reg, &pool), cases[i].want,
		       "open_shared: %s", cases[i].what);
		if (pool) {
			diag("  a pool handle was returned");
			asyncpool_destroy(pool);
		}
	}
	restore();
	is_int(asyncpool_open_shared(mem, storage, reg, &pool), 0, "open_shared: the good header again");
	put(offsetof(struct ap_pool_header, buffer_count), 4, N + 1);
	is_int(asyncpool_check(pool), -EBADMSG, "check: header rewritten after open");
	restore();
	atomic_store(&hdr()->magic, 0);
	is_int(asyncpool_check(pool), -EBADMSG, "check: magic cleared after open");
	restore();
	is_int(asyncpool_check(pool), 0, "check: restored");
	asyncpool_destroy(pool);
}

static void test_random_headers(void)
{
	unsigned long got[5] = { 0, 0, 0, 0, 0 }, other = 0;

	for (unsigned long i = 0; i < RANDOM_HEADERS; i++) {
		struct asyncpool *pool;
		int rc;

		restore();
		switch (i % 4) {
		case 0:         /* anything */
		case 1:         /* anything but the magic */
		case 2:         /* anything but magic and version */
			for (size_t b = 0; b < 256; b += 8)
				put(b, 8, rnd());
			if (i % 4 >= 1)
				atomic_store(&hdr()->magic, AP_POOL_MAGIC);
			if (i % 4 == 2)
				hdr()->version = AP_POOL_VERSION;
			break;
		default:        /* a few bytes of a good header */
			for (int k = 1 + (int)(rnd() % 3); k > 0; k--)
				mem[rnd() % 256] = (unsigned char)rnd();
		}
		rc = asyncpool_open_shared(mem, storage, reg, &pool);
		switch (rc) {
		case 0: {
			struct asyncpool_lease l;

			got[0]++;
			/* whatever the rest holds, using it stays in bounds */
			for (int k = 0; k < 4; k++)
				if (asyncpool_acquire(pool, &l) == 0)
					asyncpool_lease_release(&l);
			(void)asyncpool_available(pool);
			(void)asyncpool_check(pool);
			asyncpool_destroy(pool);
			break;
		}
		case -EPROTO: got[1]++; break;
		case -EPROTONOSUPPORT: got[2]++; break;
		case -EBADMSG: got[3]++; break;
		case -EINVAL: got[4]++; break;
		default: other++;
		}
	}
	is_int(other, 0, "%d random headers: only documented errors", RANDOM_HEADERS);
	is_int(got[4], 0, "no -EINVAL for a bad header");
	diag("random headers: %lu opened (harmless bytes), %lu EPROTO, %lu EPROTONOSUPPORT, %lu EBADMSG",
	     got[0], got[1], got[2], got[3]);
}

/* Random bytes in the layout of a memfd given to asyncpool_shared_open_fd(). */
static void test_random_bundles(void)
{
	struct asyncpool_shared_options o;
	struct asyncpool_shared *sp, *peer;
	unsigned char *base;
	unsigned long opened = 0, other = 0;

	shared_options(&o, BS, N);
	if (asyncpool_shared_create(&o, &sp))
		bail_out("shared_create");
	base = asyncpool_shared_shm(sp)->base;
	memcpy(good + 4096, base, 256);
	for (int i = 0; i < 2000; i++) {
		int rc;

		memcpy(base, good + 4096, 256);
		if (i % 2)
			for (size_t b = 0; b < 128; b += 8)
				memcpy(base + b, &(uint64_t){ rnd() }, 8);
		else
			for (int k = 1 + (int)(rnd() % 3); k > 0; k--)
				base[rnd() % 256] = (unsigned char)rnd();
		rc = asyncpool_shared_open_fd(asyncpool_shared_fd(sp), &peer);
		if (rc == 0) {
			opened++;
			asyncpool_shared_close(peer);
		} else if (rc != -EPROTO && rc != -EPROTONOSUPPORT && rc != -EBADMSG) {
			other++;
		}
	}
	is_int(other, 0, "2000 random bundle headers: only documented errors (%lu opened)", opened);
	memcpy(base, good + 4096, 256);
	asyncpool_shared_close(sp);
}

static struct asyncpool *fresh(void)
{
	struct asyncpool *pool;

	restore();
	if (asyncpool_open_shared(mem, storage, reg, &pool))
		bail_out("open_shared");
	return pool;
}

/* Acquire until an error (bounded): that error. */
static int drain(struct asyncpool *pool, int *got)
{
	struct asyncpool_lease l;
	int rc = 0;

	*got = 0;
	for (int i = 0; i < 4 * N && rc == 0; i++) {
		rc = asyncpool_acquire(pool, &l);
		if (rc == 0)
			(*got)++;
	}
	return rc;
}

static void test_freelist(void)
{
	struct asyncpool *pool;
	struct asyncpool_stats st;
	int got;

	pool = fresh();
	atomic_store(head(), AP_HEAD_MAKE(N + 5, 1));
	is_int(asyncpool_check(pool), -EUCLEAN, "check: head out of range");
	is_int(drain(pool, &got), -EUCLEAN, "acquire: head out of range");
	ok(asyncpool_available(pool) <= N, "available stays bounded");
	memset(&st, 0, sizeof(st));
	st.size = sizeof(st);
	asyncpool_stats(pool, &st);
	ok(st.corruptions >= 1, "the corruption is counted (%llu)", (unsigned long long)st.corruptions);
	asyncpool_destroy(pool);

	pool = fresh();
	set_link(1, 0);
	is_int(asyncpool_check(pool), -EUCLEAN, "check: a cycle 0 -> 1 -> 0");
	ok(asyncpool_available(pool) <= N, "available: bounded over the cycle");
	is_int(drain(pool, &got), -EUCLEAN, "acquire: the cycle ends in -EUCLEAN");
	is_int(got, 2, "after the two buffers of the cycle");
	asyncpool_destroy(pool);

	pool = fresh();
	set_link(5, 1000);
	is_int(asyncpool_check(pool), -EUCLEAN, "check: next[] out of range");
	is_int(drain(pool, &got), -EUCLEAN, "acquire: next[] out of range");
	is_int(got, 5, "after the buffers before it");
	asyncpool_destroy(pool);

	pool = fresh();
	atomic_store(&next()[3], AP_W_MAKE(AP_K_LEASED, 0, 1));
	is_int(asyncpool_check(pool), -EUCLEAN, "check: the list reaches a buffer marked leased");
	is_int(drain(pool, &got), -EUCLEAN, "acquire: it ends in -EUCLEAN");
	asyncpool_destroy(pool);

	pool = fresh();
	set_link(2, 4);
	is_int(asyncpool_check(pool), -EUCLEAN, "check: a lost buffer (neither free nor leased)");
	asyncpool_destroy(pool);

	pool = fresh();
	set_link(10, 3);
	is_int(asyncpool_check(pool), -EUCLEAN, "check: a buffer on the list twice");
	is_int(drain(pool, &got), -EUCLEAN, "acquire: stops at the repeated buffer");
	asyncpool_destroy(pool);

	pool = fresh();
	for (int i = 0; i < N; i++)
		atomic_store(&next()[i], 0xdeadbeefdeadbeefull);
	is_int(asyncpool_check(pool), -EUCLEAN, "check: next[] all garbage");
	is_int(drain(pool, &got), -EUCLEAN, "acquire: next[] all garbage");
	is_int(asyncpool_release_index(pool, 7), -EALREADY, "release_index: a buffer not marked leased");
	asyncpool_destroy(pool);

	pool = fresh();
	atomic_store(head(), AP_HEAD_MAKE(AP_FL_END, 3));
	is_int(asyncpool_check(pool), -EUCLEAN, "check: empty head over free buffers");
	is_int(drain(pool, &got), -ENOBUFS, "acquire: an empty head is just empty");
	asyncpool_destroy(pool);

	pool = fresh();
	is_int(asyncpool_check(pool), 0, "check: the good layout");
	asyncpool_destroy(pool);
}

/* asyncpool inspect: its exit status and the lines it printed. */
static int inspect(const char *arg, char *out, size_t len)
{
	char cmd[512];
	FILE *f;
	size_t n;
	int st;

	snprintf(cmd, sizeof(cmd), "'%s/tools/asyncpool' inspect %s 2>&1",
		 getenv("top_builddir") ? getenv("top_builddir") : ".", arg);
	f = popen(cmd, "r");
	if (!f)
		return -1;
	n = fread(out, 1, len - 1, f);
	out[n] = 0;
	st = pclose(f);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

static void test_inspect(void)
{
	struct asyncpool_shared_options o;
	struct asyncpool_shared *sp;
	struct asyncpool_lease l;
	char name[128], path[128], out[8192];
	unsigned char *base, *snap;
	size_t size;
	int fd;

	test_shm_name(name, sizeof(name), "inspect");
	shared_options(&o, BS, N);
	o.name = name;
	if (asyncpool_shared_create(&o, &sp))
		bail_out("shared_create");
	base = asyncpool_shared_shm(sp)->base;
	size = asyncpool_shared_shm(sp)->size;
	asyncpool_acquire(asyncpool_shared_pool(sp), &l);
	snap = malloc(size);
	memcpy(snap, base, size);

	is_int(inspect(name, out, sizeof(out)), 0, "inspect NAME: consistent, exit 0");
	ok(strstr(out, "freelist:        consistent") && strstr(out, "capacity:        16\n") &&
	   strstr(out, "available:       15 (on the freelist)\n") && strstr(out, "leased:          1\n"),
	   "inspect: capacity, available, leased");
	ok(!memcmp(snap, base, size), "inspect wrote nothing");
	snprintf(path, sizeof(path), "/proc/%ld/fd/%d", (long)getpid(), asyncpool_shared_fd(sp));
	is_int(inspect(path, out, sizeof(out)), 0, "inspect /proc/PID/fd/N: exit 0");

	{
		struct ap_layout_geometry g;

		(void)ap_layout_geometry(N, true, &g);
		atomic_store((_Atomic uint32_t *)(base + g.link_offset + 4 * 9), 4);
	}
	is_int(inspect(name, out, sizeof(out)), 1, "inspect: a corrupt next[], exit 1");
	ok(strstr(out, "INCONSISTENT") != NULL, "inspect: says INCONSISTENT");
	memcpy(base, snap, size);
	atomic_store((_Atomic uint64_t *)(base + AP_OFF_HEAD), AP_HEAD_MAKE(0x7fffffff, 0));
	is_int(inspect(name, out, sizeof(out)), 1, "inspect: head out of range, exit 1");
	memcpy(base, snap, size);
	base[0] ^= 0xff;
	is_int(inspect(name, out, sizeof(out)), 1, "inspect: bad magic, exit 1");
	ok(strstr(out, "EPROTO") != NULL, "inspect: says EPROTO");
	memcpy(base, snap, size);
	for (int i = 0; i < 256; i += 8)
		memcpy(base + i, &(uint64_t){ rnd() }, 8);
	atomic_store((_Atomic uint32_t *)base, AP_POOL_MAGIC);
	((uint32_t *)base)[1] = 1;
	is_int(inspect(name, out, sizeof(out)), 1, "inspect: random header, exit 1");
	memcpy(base, snap, size);

	is_int(inspect("", out, sizeof(out)), 2, "inspect without an argument: exit 2");
	is_int(inspect("a b", out, sizeof(out)), 2, "inspect with two arguments: exit 2");
	{
		char missing[160];

		snprintf(missing, sizeof(missing), "%s-missing", name);
		is_int(inspect(missing, out, sizeof(out)), 1, "inspect a missing name: exit 1");
	}
	snprintf(path, sizeof(path), "/tmp/asyncpool-test-%ld-empty", (long)getpid());
	fd = open(path, O_RDWR | O_CREAT | O_EXCL, 0600);
	is_int(inspect(path, out, sizeof(out)), 1, "inspect an empty file: exit 1");
	for (int i = 0; i < 64; i++)
		write(fd, &(uint64_t){ rnd() }, 8);
	is_int(inspect(path, out, sizeof(out)), 1, "inspect random bytes: exit 1");
	close(fd);
	unlink(path);

	asyncpool_lease_release(&l);
	free(snap);
	asyncpool_shared_close(sp);
	asyncpool_shm_unlink_named(name);
}

int main(void)
{
	setup();
	test_offsets();
	test_fields();
	test_random_headers();
	test_random_bundles();
	test_freelist();
	test_inspect();
	munmap(mem, sizeof(good));
	asyncpool_region_unref(reg);
	asyncpool_proactor_destroy(prox);
	return done_testing();
}
