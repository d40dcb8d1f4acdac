/* SPDX-License-Identifier: MIT */
/*
 * Instructions, loads and stores a token through a channel, for
 * cachegrind (doc/performance.md, 2026-12-07 (1.11)): one thread takes
 * blocks of 32 tokens from its cache, sends them PER at a time on
 * channel 0, receives them PER at a time and releases them, as
 * `asyncpool bench chan-2proc-1` / `-32` do on two sides (one thread, so
 * no side's polls are counted).  The difference of two lengths divided
 * by the tokens between them leaves out the setup.
 *
 * With a third argument "back" (chan-back-2proc-*, issue 53's way
 * back): no acquire or release in the loop; the tokens go out on
 * channel 0 and come back on channel 1, PER at a time each way (a
 * token counted once, for both trips).
 *
 *   cc -O2 -Iinclude -o /tmp/chan-count bench/handoff/chan-count.c \
 *      -Llib/.libs -lasyncpool -Wl,-rpath,$PWD/lib/.libs
 *   for per in 1 32; do for n in 65536 131072; do
 *     valgrind --tool=cachegrind --cache-sim=yes \
 *       --cachegrind-out-file=/tmp/cc.$per.$n /tmp/chan-count $n $per; done; done
 *   # (summary at 131072 - summary at 65536) / 65536: Ir, Dr, Dw a token
 */
#include <asyncpool.h>
#include <stdlib.h>
#include <string.h>

#define BULK 32

int main(int argc, char **argv)
{
	struct asyncpool_shared_options o;
	struct asyncpool_shared *sp;
	struct asyncpool_channel *tx, *rx, *btx, *brx;
	struct asyncpool *pool;
	unsigned long n;
	uint64_t t[BULK];
	unsigned per;
	int back;

	if (argc != 3 && (argc != 4 || strcmp(argv[3], "back")))
		return 64;
	back = argc == 4;
	n = strtoul(argv[1], NULL, 0);
	per = (unsigned)atoi(argv[2]);
	if (per != 1 && per != BULK)
		return 64;
	memset(&o, 0, sizeof(o));
	o.size = sizeof(o);
	o.buffer_size = 64;
	o.buffer_count = 4096;
	o.channels = 2;
	o.channel_capacity = 1024;
	if (asyncpool_shared_create(&o, &sp))
		return 1;
	pool = asyncpool_shared_pool(sp);
	if (asyncpool_set_cache(pool, 256) ||
	    asyncpool_channel_open(pool, 0, ASYNCPOOL_CHANNEL_SEND, &tx) ||
	    asyncpool_channel_open(pool, 0, ASYNCPOOL_CHANNEL_RECV, &rx) ||
	    asyncpool_channel_open(pool, 1, ASYNCPOOL_CHANNEL_SEND, &btx) ||
	    asyncpool_channel_open(pool, 1, ASYNCPOOL_CHANNEL_RECV, &brx))
		return 2;
	if (back && asyncpool_acquire_tokens(pool, t, BULK))
		return 3;
	for (unsigned long k = 0; back && k < n; k += BULK) {
		for (unsigned j = 0; j < BULK; j += per)
			if (asyncpool_channel_send_tokens(tx, t + j, per) != (int)per)
				return 4;
		for (unsigned j = 0; j < BULK; j += per)
			if (asyncpool_channel_recv_tokens(rx, t + j, per) != (int)per ||
			    asyncpool_channel_send_tokens(btx, t + j, per) != (int)per)
				return 5;
		for (unsigned j = 0; j < BULK; j += per)
			if (asyncpool_channel_recv_tokens(brx, t + j, per) != (int)per)
				return 5;
	}
	if (back && asyncpool_release_tokens(pool, t, BULK))
		return 5;
	for (unsigned long k = 0; !back && k < n; k += BULK) {
		if (asyncpool_acquire_tokens(pool, t, BULK))
			return 3;
		for (unsigned j = 0; j < BULK; j += per)
			if (per == 1 ? asyncpool_channel_send_token(tx, t[j]) != 0
				     : asyncpool_channel_send_tokens(tx, t + j, per) != (int)per)
				return 4;
		for (unsigned j = 0; j < BULK; j += per)
			if (asyncpool_channel_recv_tokens(rx, t + j, per) != (int)per ||
			    asyncpool_release_tokens(pool, t + j, per))
				return 5;
	}
	asyncpool_channel_close(tx);
	asyncpool_channel_close(rx);
	asyncpool_channel_close(btx);
	asyncpool_channel_close(brx);
	asyncpool_shared_close(sp);
	return 0;
}
