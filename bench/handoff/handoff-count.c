/* SPDX-License-Identifier: MIT */
/*
 * Instructions a token on each side of a cached hand-off, for callgrind
 * (doc/performance.md, 2026-12-04, sixth session).  Thread A takes 200
 * tokens one at a time from its cache (acq_side), thread B releases them
 * (rel_side), ROUNDS times, the two in turn: callgrind counts each side
 * alone with --toggle-collect, and the difference of two round counts
 * divided by the tokens between them leaves out the setup.
 *
 *   cc -O2 -pthread -Iinclude -o /tmp/handoff-count \
 *      bench/handoff/handoff-count.c -Llib/.libs -lasyncpool
 *   for side in acq_side rel_side; do for r in 250 500; do
 *     LD_LIBRARY_PATH=lib/.libs valgrind --tool=callgrind \
 *       --callgrind-out-file=/tmp/hc.$side.$r --toggle-collect=$side \
 *       /tmp/handoff-count $r; done; done
 *   # (total at 500 - total at 250) / 50000 = instructions a token
 */
#define _GNU_SOURCE
#include <asyncpool.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define K 200
static struct asyncpool *pool;
static uint64_t tok[K];
static pthread_barrier_t turn;
static int rounds;

__attribute__((noinline)) void acq_side(void)
{
	for (int i = 0; i < K; i++)
		if (asyncpool_acquire_tokens(pool, &tok[i], 1))
			abort();
}

__attribute__((noinline)) void rel_side(void)
{
	for (int i = 0; i < K; i++)
		if (asyncpool_release_token(pool, tok[i]))
			abort();
}

static void *releaser(void *arg)
{
	(void)arg;
	for (int r = 0; r < rounds; r++) {
		pthread_barrier_wait(&turn);
		rel_side();
		pthread_barrier_wait(&turn);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	struct asyncpool_slab_options o;
	struct asyncpool_options po;
	struct asyncpool_proactor *pr;
	struct asyncpool_slab *s;
	struct asyncpool_region *rg;
	pthread_t t;

	memset(&o, 0, sizeof(o));
	o.size = sizeof(o);
	o.buffer_size = 2048;
	o.buffer_count = 8191;
	o.numa_node = -1;
	memset(&po, 0, sizeof(po));
	po.size = sizeof(po);
	po.cache_size = 256;
	if (argc != 2 || asyncpool_proactor_create_memory(&pr) || asyncpool_slab_create(&o, &s) ||
	    asyncpool_proactor_register_slab(pr, s, ASYNCPOOL_ACCESS_READ, &rg) ||
	    asyncpool_create_opts(rg, &po, &pool))
		return 1;
	rounds = atoi(argv[1]);
	pthread_barrier_init(&turn, NULL, 2);
	if (pthread_create(&t, NULL, releaser, NULL))
		return 1;
	for (int r = 0; r < rounds; r++) {
		acq_side();
		pthread_barrier_wait(&turn);
		pthread_barrier_wait(&turn);
	}
	pthread_join(t, NULL);
	return 0;
}
