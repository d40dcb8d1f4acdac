/* SPDX-License-Identifier: MIT */
/*
 * asyncpool bench: a pool too small for its users (issue 12, "done when").
 *
 * contend-*: CONTEND_THREADS threads, each ops times acquire, hold (write
 * and read back the 4 KiB buffer), release, on one pool.  contend-spin
 * and contend-wait have fewer buffers than threads: the first retries
 * on -ENOBUFS with sched_yield(), the second sleeps in
 * asyncpool_acquire_wait().  contend-baseline has a buffer per thread:
 * nobody waits.  With the CPUs busy either way, the waiting case should
 * take as long as the baseline; the spinning one does not.
 *
 * handoff-2proc-*: a producer process acquires a buffer, writes a
 * sequence number in it and sends its token down a socket; a consumer
 * process adopts the token, checks the number and releases the lease.  The pool has
 * HANDOFF_BUFFERS buffers, so the producer runs out again and again:
 * -spin retries with sched_yield(), -wait sleeps in
 * asyncpool_acquire_wait().  One run of ops / 10 messages (as many
 * as in the issue by default), timed from the fork to the consumer's exit.
 *
 * Each case counts its retries: an acquire that gave no buffer.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <asyncpool.h>
#include "tool.h"

#define CONTEND_THREADS 4u
#define CONTEND_SIZE 4096u
#define HANDOFF_BUFFERS 16u

/* One acquire of the case's kind; the failed attempts before it. */
static int acquire_counting(struct asyncpool *pool, struct asyncpool_lease *l, bool wait,
			    unsigned long *retries)
{
	for (;;) {
		int rc = wait ? asyncpool_acquire_wait(pool, l, -1) : asyncpool_acquire(pool, l);

		if (rc == 0)
			return 0;
		if (rc != -ENOBUFS && rc != -EINTR)
			return rc;
		++*retries;
		if (!wait)
			sched_yield();
	}
}

struct contend {
	struct asyncpool *pool;
	unsigned long ops;
	bool wait;
	atomic_uint ready;
	atomic_int go;
	atomic_ulong retries, bad;
	atomic_int err;
};

static void *contend_thread(void *arg)
{
	struct contend *c = arg;
	unsigned long retries = 0, bad = 0;

	atomic_fetch_add(&c->ready, 1);
	while (!atomic_load_explicit(&c->go, memory_order_acquire))
		;
	for (unsigned long i = 0; i < c->ops; i++) {
		struct asyncpool_lease l;
		unsigned char *d, tag = (unsigned char)i;
		int rc = acquire_counting(c->pool, &l, c->wait, &retries);

		if (rc) {
			atomic_store(&c->err, rc);
			break;
		}
		d = asyncpool_span_ptr(l.span);        /* hold it briefly */
		memset(d, tag, CONTEND_SIZE);
		bad += d[0] != tag || d[CONTEND_SIZE - 1] != tag;
		asyncpool_lease_release(&l);
	}
	atomic_fetch_add(&c->retries, retries);
	atomic_fetch_add(&c->bad, bad);
	return NULL;
}

static uint64_t contend_once(struct contend *c)
{
	pthread_t t[CONTEND_THREADS];
	uint64_t start;

	atomic_store(&c->ready, 0);
	atomic_store(&c->go, 0);
	for (unsigned i = 0; i < CONTEND_THREADS; i++)
		pthread_create(&t[i], NULL, contend_thread, c);
	while (atomic_load(&c->ready) != CONTEND_THREADS)
		sched_yield();
	start = tool_now_ns();
	atomic_store_explicit(&c->go, 1, memory_order_release);
	for (unsigned i = 0; i < CONTEND_THREADS; i++)
		pthread_join(t[i], NULL);
	return tool_now_ns() - start;
}

int bench_contend(enum bench_contend_kind kind, unsigned long ops, unsigned reps,
		  struct bench_result *out)
{
	struct asyncpool_proactor *p;
	struct contend c;
	uint64_t el[64];
	uint32_t buffers = kind == CONTEND_BASELINE ? CONTEND_THREADS : CONTEND_THREADS / 2;
	int rc = tool_memory_pool(&p, &c.pool, CONTEND_SIZE, buffers, 0, true);

	if (rc)
		return rc;
	c.ops = ops;
	c.wait = kind == CONTEND_WAIT;
	atomic_init(&c.retries, 0);
	atomic_init(&c.bad, 0);
	atomic_init(&c.err, 0);
	contend_once(&c);               /* warm up */
	atomic_store(&c.retries, 0);
	for (unsigned i = 0; i < reps; i++)
		el[i] = contend_once(&c);
	rc = atomic_load(&c.err);
	if (!rc && (atomic_load(&c.bad) || asyncpool_available(c.pool) != buffers))
		rc = -EPROTO;
	tool_memory_pool_free(p, c.pool);
	if (rc)
		return rc;
	bench_summarize(out, el, reps, ops, CONTEND_THREADS, ops * CONTEND_THREADS);
	out->extra_name = "retries";     /* per repetition */
	out->extra = (double)atomic_load(&c.retries) / reps;
	out->extra2_name = "total_ms";   /* the median repetition */
	out->extra2 = out->ns[0] * (double)ops / 1e6;
	return 0;
}

/* The consumer process: every token the socket brings, adopted, checked
 * and released, on its own handle; its exit status. */
static int handoff_consume(struct tool_shared_pool *t, int fds[2], unsigned long msgs)
{
	struct asyncpool *mine;

	close(fds[1]);
	if (asyncpool_open_shared(t->layout_mem, t->layout, t->r, &mine))
		return 1;
	for (unsigned long i = 0; i < msgs; i++) {
		uint64_t token, *d;
		struct asyncpool_lease l;

		if (recv(fds[0], &token, sizeof(token), MSG_WAITALL) != sizeof(token))
			return 2;
		if (asyncpool_lease_adopt_token(mine, token, &l))
			return 3;
		d = asyncpool_span_ptr(l.span);
		if (*d != i)
			return 4;
		asyncpool_lease_release(&l);
	}
	return asyncpool_destroy(mine) ? 5 : 0;
}

int bench_handoff_2proc(bool wait, unsigned long msgs, struct bench_result *out)
{
	struct tool_shared_pool t;
	unsigned long retries = 0;
	uint64_t start, el;
	int fds[2] = { -1, -1 }, st = 0, rc;
	pid_t pid = -1;

	rc = tool_shared_pool(&t, 4096, HANDOFF_BUFFERS);
	if (rc)
		goto out;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds)) {
		rc = -errno;
		goto out;
	}
	start = tool_now_ns();
	pid = fork();
	if (pid == 0)
		_exit(handoff_consume(&t, fds, msgs));
	if (pid < 0) {
		rc = -errno;
		goto out;
	}
	close(fds[0]);
	fds[0] = -1;
	for (unsigned long i = 0; i < msgs && !rc; i++) {
		struct asyncpool_lease l;
		uint64_t token;

		rc = acquire_counting(t.pool, &l, wait, &retries);
		if (rc)
			break;
		*(uint64_t *)asyncpool_span_ptr(l.span) = i;
		token = asyncpool_lease_token(&l);
		if (send(fds[1], &token, sizeof(token), MSG_NOSIGNAL) != sizeof(token))
			rc = -EPIPE;    /* the consumer is gone */
	}
	close(fds[1]);
	fds[1] = -1;
	if (rc)
		kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	el = tool_now_ns() - start;
	if (!rc && (!WIFEXITED(st) || WEXITSTATUS(st) ||
		    asyncpool_available(t.pool) != HANDOFF_BUFFERS))
		rc = -EPROTO;
	if (!rc) {
		bench_summarize(out, &el, 1, msgs, 2, msgs);
		out->extra_name = "retries";
		out->extra = (double)retries;
		out->extra2_name = "total_ms";
		out->extra2 = (double)el / 1e6;
	}
out:
	if (fds[0] >= 0)
		close(fds[0]);
	if (fds[1] >= 0)
		close(fds[1]);
	tool_shared_pool_free(&t);
	return rc;
}
