/* SPDX-License-Identifier: MIT */
/*
 * asyncpool demo: threads acquire buffers from one pool, fill them with a
 * pattern, verify it and release them; then the totals and ns per op.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <asyncpool.h>
#include "tool.h"

/* What threads did: leases used, pattern mismatches, empty-pool retries. */
struct demo_count {
	unsigned long done, bad, empty;
};

struct demo_thread {
	pthread_t tid;
	struct asyncpool *pool;
	unsigned id;
	unsigned long ops;
	struct demo_count n;
};

static void demo_count_add(struct demo_count *to, const struct demo_count *c)
{
	to->done += c->done;
	to->bad += c->bad;
	to->empty += c->empty;
}

static void *demo_worker(void *arg)
{
	struct demo_thread *t = arg;

	for (unsigned long i = 0; i < t->ops; i++) {
		struct asyncpool_lease l;
		unsigned char *p;
		unsigned char tag = (unsigned char)(t->id * 31 + i);
		size_t len;

		if (asyncpool_acquire(t->pool, &l) != 0) {
			t->n.empty++;
			i--;
			continue;
		}
		p = asyncpool_span_ptr(l.span);
		len = asyncpool_span_length(l.span);
		memset(p, tag, len);
		for (size_t k = 0; k < len; k += 64)
			if (p[k] != tag)
				t->n.bad++;
		asyncpool_lease_release(&l);
		t->n.done++;
	}
	return NULL;
}

static void demo_usage(FILE *f)
{
	fputs("Usage: asyncpool demo [--mib N] [--memory] [--threads N] [--ops N]\n"
	      "       asyncpool demo --zerocopy [--mib N]\n"
	      "       asyncpool demo --rings N [--mib N]\n"
	      "       asyncpool demo --dry [--mib N]\n"
	      "       asyncpool demo --xdp [--ops N]\n", f);
}

/* The end of a demo that ran (ok, or failed and why). */
static int demo_done(int rc, const char *why)
{
	if (rc == DEMO_URING_OK) {
		puts("ok");
		return TOOL_EXIT_OK;
	}
	fprintf(stderr, "asyncpool demo: %s\n", why);
	puts("FAILED");
	return TOOL_EXIT_FAILURE;
}

int cmd_demo(int argc, char **argv)
{
	struct tool_args a;
	unsigned threads;
	unsigned long ops;
	struct demo_count total = { 0, 0, 0 };
	struct asyncpool_proactor *p;
	struct asyncpool *pool;
	struct demo_thread *t;
	uint64_t start, ns;
	unsigned long mib;
	bool memory, dry, zerocopy;
	unsigned rings;
	char why[256] = "";
	int rc;

	if ((rc = tool_options(argc, argv, 0, demo_usage, &a)) != TOOL_GO)
		return rc;
	threads = a.given['t'] ? (unsigned)a.value['t'] : 4;
	ops = a.given['n'] ? a.value['n'] : 250000;
	mib = a.value['m'];     /* 0: the default of the demo chosen */
	memory = a.given['M'];
	dry = a.given['d'];
	zerocopy = a.given['z'];
	rings = (unsigned)a.value['r'];

	/* AF_XDP on a veth pair in a netns of its own: --ops frames (default 1000). */
	if (a.given['x']) {
		rc = demo_xdp(a.given['n'] ? (unsigned)(ops < 100000 ? ops : 100000) : 1000, why,
			      sizeof(why));
		if (rc != DEMO_URING_OK)
			fprintf(stderr, "asyncpool demo: %s\n", why);
		puts(rc == DEMO_URING_OK ? "ok" : rc == DEMO_URING_REFUSED ? "SKIPPED" : "FAILED");
		return rc == DEMO_URING_FAILED ? TOOL_EXIT_FAILURE : TOOL_EXIT_OK;
	}
	/* Multishot receives that outlive a recv ring running dry. */
	if (dry) {
		rc = demo_dry((size_t)(mib ? mib : 16) << 20, why, sizeof(why));
		if (rc != DEMO_URING_OK)
			fprintf(stderr, "asyncpool demo: %s\n", why);
		puts(rc == DEMO_URING_OK ? "ok" : rc == DEMO_URING_REFUSED ? "SKIPPED" : "FAILED");
		return rc == DEMO_URING_FAILED ? TOOL_EXIT_FAILURE : TOOL_EXIT_OK;
	}
	if (!mib)
		mib = 256;

	/* N threads, a ring each, sending from one shared pool. */
	if (rings) {
		rc = demo_rings(rings, (size_t)mib << 20, why, sizeof(why));
		if (rc != DEMO_URING_OK)
			fprintf(stderr, "asyncpool demo: %s\n", why);
		puts(rc == DEMO_URING_OK ? "ok" : rc == DEMO_URING_REFUSED ? "SKIPPED" : "FAILED");
		return rc == DEMO_URING_FAILED ? TOOL_EXIT_FAILURE : TOOL_EXIT_OK;
	}

	/* Zero-copy I/O on io_uring where the kernel lets us. */
	if (!memory && !zerocopy) {
		rc = demo_uring((size_t)mib << 20, why, sizeof(why));
		if (rc != DEMO_URING_REFUSED)
			return demo_done(rc, why);
		printf("io_uring is not usable here (%s): running the MSG_ZEROCOPY demo\n", why);
		zerocopy = true;
	}
	/* Where io_uring is refused (containers): MSG_ZEROCOPY sockets. */
	if (!memory && zerocopy) {
		char uring_why[256];

		snprintf(uring_why, sizeof(uring_why), "%s", *why ? why : "not used: --zerocopy");
		*why = 0;
		rc = demo_zc((size_t)mib << 20, uring_why, why, sizeof(why));
		if (rc != DEMO_URING_REFUSED)
			return demo_done(rc, why);
		printf("MSG_ZEROCOPY is not usable here either (%s): running the memory-proactor demo\n",
		       why);
	}

	rc = tool_memory_pool(&p, &pool, 4096, 64, 0, true);
	if (rc) {
		fprintf(stderr, "asyncpool demo: cannot create a pool: %s\n", strerror(-rc));
		return TOOL_EXIT_FAILURE;
	}
	printf("libasyncpool %s demo (memory proactor)\n", asyncpool_version());
	printf("pool: %zu buffers of %zu bytes\n", asyncpool_capacity(pool), asyncpool_buffer_size(pool));
	t = calloc(threads, sizeof(*t));
	start = tool_now_ns();
	for (unsigned i = 0; i < threads; i++) {
		t[i] = (struct demo_thread){ .pool = pool, .id = i, .ops = ops };
		pthread_create(&t[i].tid, NULL, demo_worker, &t[i]);
	}
	for (unsigned i = 0; i < threads; i++) {
		pthread_join(t[i].tid, NULL);
		demo_count_add(&total, &t[i].n);
	}
	ns = tool_now_ns() - start;
	free(t);
	printf("%u threads: %lu leases acquired, filled, verified and released\n", threads,
	       total.done);
	printf("%lu pattern mismatches, %lu empty-pool retries, %zu of %zu buffers available\n",
	       total.bad, total.empty, asyncpool_available(pool), asyncpool_capacity(pool));
	printf("%.1f ns per lease (fill and verify of 4 KiB included)\n",
	       (double)ns / (double)(total.done / threads));
	rc = (total.bad == 0 && asyncpool_available(pool) == asyncpool_capacity(pool)) ?
		TOOL_EXIT_OK : TOOL_EXIT_FAILURE;
	tool_memory_pool_free(p, pool);
	printf("%s\n", rc == TOOL_EXIT_OK ? "ok" : "FAILED");
	return rc;
}
