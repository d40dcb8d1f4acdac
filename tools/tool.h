/* SPDX-License-Identifier: MIT */
/* Shared by the subcommands of the asyncpool tool. */
#ifndef ASYNCPOOL_TOOL_H
#define ASYNCPOOL_TOOL_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

struct asyncpool;
struct asyncpool_proactor;

int cmd_demo(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_inspect(int argc, char **argv);

/* demo_uring.c: zero-copy TCP loopback on io_uring. */
enum { DEMO_URING_OK, DEMO_URING_FAILED, DEMO_URING_REFUSED };
int demo_uring(size_t bytes, char *why, size_t whylen);

/* Monotonic time in nanoseconds. */
static inline uint64_t tool_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* A memory-proactor pool of count x size buffers; 0 or -errno. */
int tool_memory_pool(struct asyncpool_proactor **p, struct asyncpool **pool,
		     size_t size, uint32_t count);
void tool_memory_pool_free(struct asyncpool_proactor *p, struct asyncpool *pool);

/* Parse a positive decimal number, or exit with a usage message. */
unsigned long tool_number(const char *opt, const char *arg, unsigned long max);

#endif
