/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tap.h"
#include "testutil.h"

void slab_options(struct asyncpool_slab_options *o, size_t buffer_size, uint32_t count)
{
	memset(o, 0, sizeof(*o));
	o->size = sizeof(*o);
	o->buffer_size = buffer_size;
	o->buffer_count = count;
	o->numa_node = -1;
}

void shared_options(struct asyncpool_shared_options *o, size_t buffer_size, uint32_t count)
{
	memset(o, 0, sizeof(*o));
	o->size = sizeof(*o);
	o->buffer_size = buffer_size;
	o->buffer_count = count;
}

int new_region(struct asyncpool_proactor *p, size_t buffer_size, uint32_t count,
	       uint32_t access, struct asyncpool_region **out)
{
	struct asyncpool_slab_options o;
	struct asyncpool_slab *s;
	int rc;

	*out = NULL;
	slab_options(&o, buffer_size, count);
	rc = asyncpool_slab_create(&o, &s);
	if (rc)
		return rc;
	rc = asyncpool_proactor_register_slab(p, s, access, out);
	asyncpool_slab_unref(s);
	return rc;
}

struct asyncpool_region *make_region(struct asyncpool_proactor *p, size_t buffer_size,
				     uint32_t count, uint32_t access)
{
	struct asyncpool_region *r;
	int rc = new_region(p, buffer_size, count, access, &r);

	if (rc)
		bail_out("a region of %u x %zu: %s", count, buffer_size, strerror(-rc));
	return r;
}

struct asyncpool *make_pool(struct asyncpool_proactor *p, size_t buffer_size, uint32_t count,
			    uint32_t cache)
{
	struct asyncpool_region *r = make_region(p, buffer_size, count, ASYNCPOOL_ACCESS_READ);
	struct asyncpool_options o;
	struct asyncpool *pool;
	int rc;

	/* cache 0: a pool without caches, which asyncpool_create() no
	 * longer gives (it has caches by default since 1.3). */
	memset(&o, 0, sizeof(o));
	o.size = sizeof(o);
	o.cache_size = cache;
	rc = asyncpool_create_opts(r, &o, &pool);
	if (rc)
		bail_out("a pool of %u x %zu: %s", count, buffer_size, strerror(-rc));
	asyncpool_region_unref(r);
	return pool;
}

unsigned long env_number(const char *name, unsigned long def)
{
	const char *s = getenv(name);
	unsigned long v;
	char *end;

	if (!s || !*s)
		return def;
	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || *end || v == 0 || s[0] == '-' || v > LONG_MAX)
		bail_out("%s=%s: a positive number, please", name, s);
	return v;
}

long stress_iterations(long def)
{
	return (long)env_number("ASYNCPOOL_STRESS_ITERATIONS", (unsigned long)def);
}

uint64_t test_seed(uint64_t def)
{
	static uint64_t seed;
	static int said;
	const char *s = getenv("ASYNCPOOL_TEST_SEED");
	char text[32];
	char *end;

	if (said)
		return seed;
	seed = def;
	if (s && *s) {
		errno = 0;
		seed = strtoull(s, &end, 0);
		if (errno || *end || s[0] == '-')
			bail_out("ASYNCPOOL_TEST_SEED=%s: a number, please", s);
	}
	said = 1;
	snprintf(text, sizeof(text), "%#llx", (unsigned long long)seed);
	if (!s || strcmp(s, text))
		(void)setenv("ASYNCPOOL_TEST_SEED", text, 1);
	diag("seed %s (ASYNCPOOL_TEST_SEED to repeat or change it)", text);
	return seed;
}

int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void test_shm_name(char *buf, size_t len, const char *tag)
{
	const char *prefix = getenv("ASYNCPOOL_TEST_SHM_PREFIX");

	snprintf(buf, len, "/%s%ld-%s", prefix && *prefix ? prefix : "asyncpool-test-",
		 (long)getpid(), tag);
}

pid_t fork_or_bail(void)
{
	pid_t pid;

	fflush(stdout);
	pid = fork();
	if (pid < 0)
		bail_out("fork");
	return pid;
}

uint64_t bad_releases(struct asyncpool *pool)
{
	struct asyncpool_stats st;

	memset(&st, 0, sizeof(st));
	st.size = sizeof(st);
	asyncpool_stats(pool, &st);
	return st.bad_releases;
}

uint64_t fenced_releases(struct asyncpool *pool)
{
	struct asyncpool_stats st;

	memset(&st, 0, sizeof(st));
	st.size = sizeof(st);
	asyncpool_stats(pool, &st);
	return st.fenced_releases;
}

void index_queue_init(struct index_queue *q, bool pshared)
{
	pthread_mutexattr_t ma;

	memset(q, 0, sizeof(*q));
	pthread_mutexattr_init(&ma);
	if (pshared)
		pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED);
	pthread_mutex_init(&q->lock, &ma);
	pthread_mutexattr_destroy(&ma);
}

void index_queue_push(struct index_queue *q, uint32_t idx)
{
	pthread_mutex_lock(&q->lock);
	if (q->tail - q->head == INDEX_QUEUE_MAX)
		bail_out("index queue full");
	q->v[q->tail++ % INDEX_QUEUE_MAX] = idx;
	pthread_mutex_unlock(&q->lock);
}

bool index_queue_pop(struct index_queue *q, uint32_t *idx)
{
	bool got = false;

	pthread_mutex_lock(&q->lock);
	if (q->head != q->tail) {
		*idx = q->v[q->head++ % INDEX_QUEUE_MAX];
		got = true;
	}
	pthread_mutex_unlock(&q->lock);
	return got;
}

/* What a sender writes into a buffer: a random word, it again ^ MARK, the index. */
#define HANDOFF_MARK 0x5a5a5a5a5a5a5a5aull

void handoff_init(struct handoff *h, unsigned threads, uint32_t buffers, long rounds,
		  bool pshared)
{
	if (threads == 0 || threads > HANDOFF_MAX_THREADS || buffers > INDEX_QUEUE_MAX)
		bail_out("handoff_init: %u threads, %u buffers", threads, buffers);
	memset(h, 0, sizeof(*h));
	for (unsigned i = 0; i < threads; i++)
		index_queue_init(&h->q[i], pshared);
	atomic_init(&h->producing, (int)threads);
	h->threads = threads;
	h->buffers = buffers;
	h->rounds = rounds;
}

/* Check and release what was handed to thread id; how many. */
static int handoff_drain(struct handoff *h, unsigned id, struct asyncpool *pool,
			 const struct handoff_ops *ops)
{
	uint32_t idx;
	int n = 0;

	while (index_queue_pop(&h->q[id], &idx)) {
		struct asyncpool_lease l;
		uint64_t *w;

		if (ops->take(pool, idx, &l)) {
			atomic_fetch_add(&h->errors, 1);
			continue;
		}
		w = asyncpool_span_ptr(l.span);
		if (w[1] != (w[0] ^ HANDOFF_MARK) || w[2] != idx)
			atomic_fetch_add(&h->violations, 1);
		if (atomic_exchange(&h->inuse[idx], 0) != 1)
			atomic_fetch_add(&h->violations, 1);
		asyncpool_lease_release(&l);
		atomic_fetch_add(&h->released, 1);
		n++;
	}
	return n;
}

void handoff_thread(struct handoff *h, unsigned id, struct asyncpool *pool,
		    const struct handoff_ops *ops)
{
	uint64_t seed = 0x2545f4914f6cdd1dull * (id + 1);

	for (long i = 0; i < h->rounds; i++) {
		struct asyncpool_lease l;
		uint64_t *w;
		int rc;

		if (i % 16 == 0)
			handoff_drain(h, id, pool, ops);
		rc = asyncpool_acquire(pool, &l);
		if (rc == -ENOBUFS) {
			atomic_fetch_add(&h->enobufs, 1);
			if (!handoff_drain(h, id, pool, ops))
				sched_yield();
			i--;
			continue;
		}
		if (rc) {
			atomic_fetch_add(&h->errors, 1);
			break;
		}
		if (l.buffer_index >= h->buffers) {
			/* Not a buffer of the pool: nowhere to mark it. */
			atomic_fetch_add(&h->violations, 1);
			asyncpool_lease_release(&l);
			atomic_fetch_add(&h->released, 1);
			continue;
		}
		if (atomic_exchange(&h->inuse[l.buffer_index], 1))
			atomic_fetch_add(&h->violations, 1);
		w = asyncpool_span_ptr(l.span);
		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		w[0] = seed;
		w[1] = seed ^ HANDOFF_MARK;
		w[2] = l.buffer_index;
		if (ops->send)
			ops->send(&l);
		index_queue_push(&h->q[(seed >> 33) % h->threads], l.buffer_index);
	}
	atomic_fetch_sub(&h->producing, 1);
	/* Release what the others send until everyone has stopped sending. */
	while (atomic_load(&h->producing) > 0)
		if (!handoff_drain(h, id, pool, ops))
			sched_yield();
	handoff_drain(h, id, pool, ops);
	if (asyncpool_cache_flush(pool))
		atomic_fetch_add(&h->errors, 1);
}
