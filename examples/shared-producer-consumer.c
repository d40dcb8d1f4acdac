/* SPDX-License-Identifier: MIT */
/*
 * shared-producer-consumer: processes that share one pool of buffers
 * through a named shared memory object, hand buffers to each other
 * through the pool's channels, and get back the buffers of a producer
 * that is killed.
 *
 *   shared-producer-consumer [NAME]
 *
 * NAME is the shared memory object, "/asyncpool-example-PID" by default.
 *
 *   - The parent creates the pool with one channel per producer
 *     (asyncpool_shared_create(3), channels) and is the consumer: it
 *     takes the receiving end of each (asyncpool_channel_open(3)).
 *   - Producers, forked, each open the pool by name themselves
 *     (asyncpool_shared_open(3): a forked child must not use its
 *     parent's handle), take the sending end of their channel, lease a
 *     buffer with asyncpool_acquire_wait(3) (they sleep while the
 *     consumer holds every buffer), fill it and send it
 *     (asyncpool_channel_send(3)): the buffer is the channel's from
 *     then on, and the producer forgets it.
 *   - The consumer receives from each channel in turn
 *     (asyncpool_channel_recv(3)), sleeping in poll(2) on their wait
 *     fds (asyncpool_channel_wait_fd(3)) when all are empty, checks
 *     each buffer and releases it: it is free again for every process.
 *   - One producer leases a few buffers, sends two, and is killed with
 *     SIGKILL while it holds the others.  What it sent is still
 *     delivered; nothing releases what it held: asyncpool_reclaim(3)
 *     finds that its process is gone and returns them, after a
 *     quarantine.
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
#include <poll.h>
#include <sched.h>
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
#define SENT      2             /* of which it sends before it dies */
#define CAPACITY  16            /* entries per channel */
#define VICTIM    PRODUCERS     /* the killed producer's channel */

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

static void sleep_ms(long ms)
{
	struct timespec t = { .tv_sec = ms / 1000, .tv_nsec = ms % 1000 * 1000000 };

	nanosleep(&t, NULL);
}

/* The sending end of channel id, in this process. */
static struct asyncpool_channel *sender(struct asyncpool *pool, uint32_t id)
{
	struct asyncpool_channel *ch;
	int rc = asyncpool_channel_open(pool, id, ASYNCPOOL_CHANNEL_SEND, &ch);

	if (rc) {
		fprintf(stderr, "asyncpool_channel_open: %s\n", strerror(-rc));
		_exit(1);
	}
	return ch;
}

/* Send l, waiting while the channel is full (a send never blocks). */
static void send_lease(struct asyncpool_channel *ch, struct asyncpool_lease *l)
{
	int rc;

	while ((rc = asyncpool_channel_send(ch, l)) == -EAGAIN)
		sched_yield();
	if (rc) {
		fprintf(stderr, "asyncpool_channel_send: %s\n", strerror(-rc));
		_exit(1);
	}
}

static void producer(const char *name, uint32_t id)
{
	struct asyncpool_shared *sp = open_pool(name);
	struct asyncpool *pool = asyncpool_shared_pool(sp);
	struct asyncpool_channel *ch = sender(pool, id);

	for (uint32_t seq = 0; seq < ITEMS; seq++) {
		struct asyncpool_lease l;
		/* Sleeps while every buffer is out, up to 10 s. */
		int rc = asyncpool_acquire_wait(pool, &l, 10LL * 1000 * 1000 * 1000);

		if (rc) {
			fprintf(stderr, "producer %u: asyncpool_acquire_wait: %s\n", id,
				strerror(-rc));
			_exit(1);
		}
		fill(asyncpool_span_ptr(l.span), id, seq);
		/* The buffer is the channel's now: l is spent. */
		send_lease(ch, &l);
	}
	asyncpool_channel_close(ch);
	asyncpool_shared_close(sp);
	_exit(0);
}

/* The producer that dies: it leases HELD buffers, sends SENT, says so, and waits. */
static void victim(const char *name, int ready)
{
	struct asyncpool *pool = asyncpool_shared_pool(open_pool(name));
	struct asyncpool_channel *ch = sender(pool, VICTIM);
	struct asyncpool_lease l[HELD];

	for (int i = 0; i < HELD; i++)
		if (asyncpool_acquire(pool, &l[i]))
			_exit(1);
	for (uint32_t i = 0; i < SENT; i++) {
		fill(asyncpool_span_ptr(l[i].span), VICTIM, i);
		send_lease(ch, &l[i]);
	}
	if (write(ready, "r", 1) != 1)
		_exit(1);
	alarm(30);                      /* never outlive a parent that died */
	pause();
	_exit(1);
}

/* Receive one item from ch: 1, or 0 if none is there; checked. */
static int consume(struct asyncpool_channel *ch, uint32_t *next, int *bad)
{
	struct asyncpool_lease l;
	const struct item *it;

	if (asyncpool_channel_recv(ch, &l))
		return 0;
	it = asyncpool_span_ptr(l.span);
	/* Each producer's items arrive in order, intact. */
	if (it->producer > PRODUCERS || it->seq != next[it->producer]++ || check(it))
		*bad = 1;
	asyncpool_lease_release(&l);
	return 1;
}

int main(int argc, char **argv)
{
	struct asyncpool_shared_options o;
	struct asyncpool_shared *sp;
	struct asyncpool *pool;
	char name[64];
	uint32_t next[PRODUCERS + 1] = { 0 };
	struct asyncpool_channel *in[PRODUCERS + 1];
	struct pollfd fds[PRODUCERS];
	struct timespec t0, t1;
	pid_t pid[PRODUCERS], dead;
	int ready[2], rc, status, bad = 0, reclaimed = 0, got;
	long items = 0;
	char c;

	if (argc > 1)
		snprintf(name, sizeof(name), "%s", argv[1]);
	else
		snprintf(name, sizeof(name), "/asyncpool-example-%ld", (long)getpid());

	/* The pool: BUFFERS buffers in the named object, mode 0600, and a
	 * channel per producer. */
	memset(&o, 0, sizeof(o));
	o.size = sizeof(o);
	o.buffer_size = SIZE;
	o.buffer_count = BUFFERS;
	o.name = name;
	o.channels = PRODUCERS + 1;
	o.channel_capacity = CAPACITY;
	rc = asyncpool_shared_create(&o, &sp);
	if (rc) {
		fprintf(stderr, "asyncpool_shared_create %s: %s\n", name, strerror(-rc));
		return 1;
	}
	pool = asyncpool_shared_pool(sp);
	if (pipe(ready))
		return 1;
	for (uint32_t i = 0; i <= PRODUCERS; i++) {
		rc = asyncpool_channel_open(pool, i, ASYNCPOOL_CHANNEL_RECV, &in[i]);
		if (rc) {
			fprintf(stderr, "asyncpool_channel_open: %s\n", strerror(-rc));
			return 1;
		}
	}

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
	printf("producer %ld holds %d buffers and sent %d: %zu of %zu free\n", (long)dead,
	       HELD - SENT, SENT, asyncpool_available(pool), asyncpool_capacity(pool));
	kill(dead, SIGKILL);
	waitpid(dead, &status, 0);
	printf("producer %ld killed (%s)\n", (long)dead,
	       WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL ? "SIGKILL" : "?");
	/* What it sent is still there for us. */
	for (got = 0; consume(in[VICTIM], next, &bad); got++)
		;
	printf("received %d items the dead producer had sent\n", got);
	if (got != SENT)
		bad = 1;

	/* The producers, and the parent consumes what they send. */
	fflush(stdout);
	for (uint32_t i = 0; i < PRODUCERS; i++) {
		pid[i] = fork();
		if (pid[i] == 0)
			producer(name, i);
		fds[i].fd = asyncpool_channel_wait_fd(in[i]);
		fds[i].events = POLLIN;
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (items < (long)PRODUCERS * ITEMS) {
		got = 0;
		for (uint32_t i = 0; i < PRODUCERS; i++)
			got += consume(in[i], next, &bad);
		items += got;
		if (got)
			continue;
		/* All empty: sleep until a producer sends (or 1 s). */
		if (poll(fds, PRODUCERS, 1000) == 0) {
			fprintf(stderr, "no item for 1 s\n");
			bad = 1;
			break;
		}
		for (uint32_t i = 0; i < PRODUCERS; i++) {
			uint64_t v;

			if (fds[i].revents && read(fds[i].fd, &v, sizeof(v)) < 0)
				bad = 1;
		}
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
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
		printf("%.0f items/s through the channels\n",
		       items / ((double)(t1.tv_sec - t0.tv_sec) +
				(double)(t1.tv_nsec - t0.tv_nsec) / 1e9));
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
	for (uint32_t i = 0; i <= PRODUCERS; i++)
		asyncpool_channel_close(in[i]);
	asyncpool_shared_close(sp);
	asyncpool_shm_unlink_named(name);       /* the pool ends with its last handle */
	return bad;
}
