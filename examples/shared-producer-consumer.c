/* SPDX-License-Identifier: MIT */
/*
 * shared-producer-consumer: processes that share one pool of buffers
 * through a named shared memory object, hand buffers to each other as
 * 64-bit tokens, and get back the buffers of a producer that is killed.
 *
 *   shared-producer-consumer [NAME]
 *
 * NAME is the shared memory object, "/asyncpool-example-PID" by default.
 *
 *   - The parent creates the pool (asyncpool_shared_create(3)) and is
 *     the consumer.
 *   - Producers, forked, each open the pool by name themselves
 *     (asyncpool_shared_open(3): a forked child must not use its
 *     parent's handle), lease a buffer with asyncpool_acquire_wait(3)
 *     (they sleep while the consumer holds every buffer), fill it and
 *     send its token (asyncpool_lease_token(3)) down a pipe.
 *   - The consumer adopts each token (asyncpool_lease_adopt_token(3)),
 *     checks the buffer and releases it: the buffer is free again for
 *     every process.
 *   - One producer leases a few buffers and is killed with SIGKILL while
 *     it holds them.  Nothing releases them; asyncpool_reclaim(3) finds
 *     that its process is gone and returns them, after a quarantine.
 *
 * At the end every buffer of the pool is back.
 *
 * Build:  cc -O2 -o shared-producer-consumer shared-producer-consumer.c \
 *             $(pkg-config --cflags --libs libasyncpool)
 *
 * Exit status: 0 when every item arrived intact and every buffer came
 * back, 1 otherwise.
 */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <asyncpool.h>

#define BUFFERS   64            /* in the pool */
#define SIZE      4096          /* bytes per buffer */
#define PRODUCERS 2
#define ITEMS     5000          /* per producer */
#define HELD      8             /* buffers the killed producer holds */

/* What a producer writes in a buffer. */
struct item {
	uint32_t producer, seq;
	unsigned char data[SIZE - 8];
};

static void fill(struct item *it, uint32_t producer, uint32_t seq)
{
	it->producer = producer;
	it->seq = seq;
	for (size_t i = 0; i < sizeof(it->data); i++)
		it->data[i] = (unsigned char)(producer * 131 + seq * 7 + i);
}

static int check(const struct item *it)
{
	for (size_t i = 0; i < sizeof(it->data); i++)
		if (it->data[i] != (unsigned char)(it->producer * 131 + it->seq * 7 + i))
			return -1;
	return 0;
}

/* Open the pool by name in this process. */
static struct asyncpool_shared *open_pool(const char *name)
{
	struct asyncpool_shared_open_options o;
	struct asyncpool_shared *sp;
	int rc;

	memset(&o, 0, sizeof(o));
	o.size = sizeof(o);
	o.fd = -1;                      /* by name, not by fd */
	o.name = name;
	rc = asyncpool_shared_open(&o, &sp);
	if (rc) {
		fprintf(stderr, "asyncpool_shared_open: %s\n", strerror(-rc));
		_exit(1);
	}
	return sp;
}

static void producer(const char *name, uint32_t id, int out)
{
	struct asyncpool_shared *sp = open_pool(name);
	struct asyncpool *pool = asyncpool_shared_pool(sp);

	for (uint32_t seq = 0; seq < ITEMS; seq++) {
		struct asyncpool_lease l;
		uint64_t token;
		/* Sleeps while every buffer is out, up to 10 s. */
		int rc = asyncpool_acquire_wait(pool, &l, 10LL * 1000 * 1000 * 1000);

		if (rc) {
			fprintf(stderr, "producer %u: asyncpool_acquire_wait: %s\n", id,
				strerror(-rc));
			_exit(1);
		}
		fill(asyncpool_span_ptr(l.span), id, seq);
		/* The token names the buffer and this lease of it; the lease
		 * itself is dropped: the consumer adopts the buffer. */
		token = asyncpool_lease_token(&l);
		if (write(out, &token, sizeof(token)) != sizeof(token))
			_exit(1);
	}
	asyncpool_shared_close(sp);
	_exit(0);
}

/* The producer that dies: it leases HELD buffers, says so, and waits. */
static void victim(const char *name, int ready)
{
	struct asyncpool *pool = asyncpool_shared_pool(open_pool(name));
	struct asyncpool_lease l[HELD];

	for (int i = 0; i < HELD; i++)
		if (asyncpool_acquire(pool, &l[i]))
			_exit(1);
	if (write(ready, "r", 1) != 1)
		_exit(1);
	alarm(30);                      /* never outlive a parent that died */
	pause();
	_exit(1);
}

static void sleep_ms(long ms)
{
	struct timespec t = { .tv_sec = ms / 1000, .tv_nsec = ms % 1000 * 1000000 };

	nanosleep(&t, NULL);
}

int main(int argc, char **argv)
{
	struct asyncpool_shared_options o;
	struct asyncpool_shared *sp;
	struct asyncpool *pool;
	char name[64];
	uint32_t next[PRODUCERS] = { 0 };
	uint64_t token;
	pid_t pid[PRODUCERS], dead;
	int tokens[2], ready[2], rc, status, bad = 0, reclaimed = 0;
	long items = 0;
	char c;

	if (argc > 1)
		snprintf(name, sizeof(name), "%s", argv[1]);
	else
		snprintf(name, sizeof(name), "/asyncpool-example-%ld", (long)getpid());

	/* The pool: BUFFERS buffers in the named object, mode 0600. */
	memset(&o, 0, sizeof(o));
	o.size = sizeof(o);
	o.buffer_size = SIZE;
	o.buffer_count = BUFFERS;
	o.name = name;
	rc = asyncpool_shared_create(&o, &sp);
	if (rc) {
		fprintf(stderr, "asyncpool_shared_create %s: %s\n", name, strerror(-rc));
		return 1;
	}
	pool = asyncpool_shared_pool(sp);
	if (pipe(tokens) || pipe(ready))
		return 1;

	/* The victim: killed while it holds HELD buffers.  (stdout is
	 * flushed before each fork, or a child could print it again.) */
	fflush(stdout);
	dead = fork();
	if (dead == 0)
		victim(name, ready[1]);
	if (dead < 0 || read(ready[0], &c, 1) != 1) {
		bad = 1;
		goto out;
	}
	printf("producer %ld holds %d buffers: %zu of %zu free\n", (long)dead, HELD,
	       asyncpool_available(pool), asyncpool_capacity(pool));
	kill(dead, SIGKILL);
	waitpid(dead, &status, 0);
	printf("producer %ld killed (%s)\n", (long)dead,
	       WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL ? "SIGKILL" : "?");

	/* The producers, and the parent consumes what they send. */
	fflush(stdout);
	for (uint32_t i = 0; i < PRODUCERS; i++) {
		pid[i] = fork();
		if (pid[i] == 0) {
			close(tokens[0]);
			producer(name, i, tokens[1]);
		}
	}
	close(tokens[1]);
	while (read(tokens[0], &token, sizeof(token)) == sizeof(token)) {
		struct asyncpool_lease l;
		const struct item *it;

		rc = asyncpool_lease_adopt_token(pool, token, &l);
		if (rc) {
			fprintf(stderr, "asyncpool_lease_adopt_token: %s\n", strerror(-rc));
			bad = 1;
			continue;
		}
		it = asyncpool_span_ptr(l.span);
		/* Each producer's items arrive in order, intact. */
		if (it->producer >= PRODUCERS || it->seq != next[it->producer]++ || check(it))
			bad = 1;
		asyncpool_lease_release(&l);
		items++;
	}
	for (int i = 0; i < PRODUCERS; i++)
		if (waitpid(pid[i], &status, 0) != pid[i] || !WIFEXITED(status) ||
		    WEXITSTATUS(status) != 0)
			bad = 1;
	{
		struct asyncpool_stats st = { .size = sizeof(st) };

		/* The counters live in the shared layout: every process's. */
		asyncpool_stats(pool, &st);
		printf("consumed %ld items of %d producers, who found the pool empty "
		       "%llu times\n", items, PRODUCERS,
		       (unsigned long long)st.empty);
	}

	/*
	 * The killed producer's buffers.  A reclaim sees that its process
	 * is gone (the kernel dropped the lock its attachment held) and,
	 * once the quarantine has passed since it first saw the death,
	 * frees what it had leased.  The quarantine (5 s by default) is for
	 * a buffer the kernel may still be sending; 100 ms here.
	 * Producers that found the pool empty may have reclaimed some
	 * already: an acquire does so by itself.
	 */
	asyncpool_set_quarantine(pool, 100);
	for (int i = 0; i < 200 && asyncpool_available(pool) < asyncpool_capacity(pool); i++) {
		rc = asyncpool_reclaim(pool);
		if (rc > 0)
			reclaimed += rc;
		sleep_ms(10);
	}
	printf("asyncpool_reclaim returned %d buffers\n", reclaimed);
	if (asyncpool_available(pool) != asyncpool_capacity(pool) || asyncpool_check(pool) != 0)
		bad = 1;
	printf("every buffer back: %zu of %zu free%s\n", asyncpool_available(pool),
	       asyncpool_capacity(pool), bad ? " (FAILED)" : "");

out:
	asyncpool_shared_close(sp);
	asyncpool_shm_unlink_named(name);       /* the pool ends with its last handle */
	return bad;
}
