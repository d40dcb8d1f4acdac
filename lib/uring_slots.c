/* SPDX-License-Identifier: MIT */
/*
 * The fixed-buffer slots of the whole process: the map of the runs that
 * slabs take (the same run on every ring), and the anchor ring that
 * pins a run once for every ring to clone from (uring_slots.h).  Each
 * ring's own table and its use of a run are the proactor's
 * (proactor_uring.c, register_fixed()).
 */
#include "internal.h"

#ifdef HAVE_LIBURING
#include "uring_internal.h"
#include "uring_bitmap.h"
#include "uring_slots.h"

#include <sys/uio.h>

pthread_mutex_t ap_ur_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t g_slots[AP_UR_SLOTS / 64];      /* runs taken, process-wide */
static struct io_uring g_anchor;
static bool g_anchor_up;
static pid_t g_anchor_pid;
static uint32_t g_anchor_runs;
static uint64_t g_anchor_failures;              /* slots the anchor kept */

static pthread_once_t g_fork_once = PTHREAD_ONCE_INIT;

/* First fit: the lowest run of n free slots; false if there is none. */
static bool bits_find(const uint64_t *map, uint32_t n, uint32_t *first)
{
	uint32_t run = 0;

	for (uint32_t i = 0; i < AP_UR_SLOTS; i++) {
		if (bit_get(map, i)) {
			run = 0;
			continue;
		}
		if (++run == n) {
			*first = i + 1 - n;
			return true;
		}
	}
	return false;
}

/* A fork() while another thread registers must not leave ap_ur_lock held. */
static void fork_prepare(void)
{
	pthread_mutex_lock(&ap_ur_lock);
}

static void fork_release(void)
{
	pthread_mutex_unlock(&ap_ur_lock);
}

static void fork_handlers(void)
{
	pthread_atfork(fork_prepare, fork_release, fork_release);
}

void ap_ur_slots_init(void)
{
	pthread_once(&g_fork_once, fork_handlers);
}

/* The anchor ring of this process, with its sparse table (ap_ur_lock held). */
static int anchor_get(void)
{
	int rc;

	if (g_anchor_up && g_anchor_pid == getpid())
		return 0;
	if (g_anchor_up) {
		/* Inherited over fork: the parent's.  Closing our copy of the
		 * fd changes nothing for the parent. */
		io_uring_queue_exit(&g_anchor);
		g_anchor_up = false;
		g_anchor_runs = 0;
	}
	rc = io_uring_queue_init(1, &g_anchor, 0);
	if (rc)
		return rc;
	rc = io_uring_register_buffers_sparse(&g_anchor, AP_UR_SLOTS);
	if (rc) {
		io_uring_queue_exit(&g_anchor);
		return rc;
	}
	g_anchor_up = true;
	g_anchor_pid = getpid();
	return 0;
}

int ap_ur_slots_clear(struct io_uring *ring, uint32_t first, uint32_t n)
{
	static const struct iovec empty[64];

	while (n) {
		uint32_t k = n < 64 ? n : 64;
		int rc = io_uring_register_buffers_update_tag(ring, first, empty, NULL, k);

		if (rc <= 0)
			return rc ? rc : -EIO;
		first += (uint32_t)rc;
		n -= (uint32_t)rc;
	}
	return 0;
}

int ap_ur_slots_fill(struct io_uring *ring, uint32_t first, const struct iovec *iov, uint32_t n)
{
	uint32_t done = 0;
	int rc = 0;

	/*
	 * An update stops at the first buffer it cannot pin (RLIMIT_MEMLOCK)
	 * and reports how many it did; the next call then reports why.
	 */
	while (done < n) {
		rc = io_uring_register_buffers_update_tag(ring, first + done, iov + done,
							  NULL, n - done);
		if (rc <= 0) {
			rc = rc ? rc : -EIO;
			break;
		}
		done += (uint32_t)rc;
		rc = 0;
	}
	if (rc && done && ap_ur_slots_clear(ring, first, done))
		return -EUCLEAN;        /* half-registered: the caller keeps the slots */
	return rc;
}

void ap_ur_run_put(struct asyncpool_slab *slab)
{
	struct ur_run *run = slab->uring_run;

	if (!run || --run->users)
		return;
	slab->uring_run = NULL;
	if (run->anchored && run->pid == getpid() && g_anchor_up && g_anchor_pid == run->pid) {
		if (ap_ur_slots_clear(&g_anchor, run->first, run->n)) {
			/* The anchor still holds them: never hand them out again. */
			g_anchor_failures++;
			free(run);
			return;
		}
		if (--g_anchor_runs == 0) {
			io_uring_queue_exit(&g_anchor);
			g_anchor_up = false;
		}
	}
	bits_set(g_slots, run->first, run->n, false);
	free(run);
}

int ap_ur_run_get(bool anchor, struct asyncpool_slab *slab, const struct iovec *iov,
		  struct ur_run **out)
{
	struct ur_run *run = slab->uring_run;
	int rc;

	if (run) {
		*out = run;
		return 0;
	}
	run = calloc(1, sizeof(*run));
	if (!run)
		return -ENOMEM;
	if (!bits_find(g_slots, slab->buffer_count, &run->first)) {
		free(run);
		return -ENOBUFS;
	}
	run->n = slab->buffer_count;
	run->pid = getpid();
	if (anchor && anchor_get() == 0) {
		rc = ap_ur_slots_fill(&g_anchor, run->first, iov, run->n);
		if (rc == -EUCLEAN) {
			bits_set(g_slots, run->first, run->n, true);
			g_anchor_failures++;
			free(run);
			return -EINVAL;
		}
		if (rc) {
			if (g_anchor_runs == 0) {
				io_uring_queue_exit(&g_anchor);
				g_anchor_up = false;
			}
			free(run);
			return rc;
		}
		run->anchored = true;
		g_anchor_runs++;
	}
	bits_set(g_slots, run->first, run->n, true);
	slab->uring_run = run;
	*out = run;
	return 0;
}

int ap_ur_clone_run(struct io_uring *ring, const struct ur_run *run)
{
	struct ap_uring_clone_buffers cb;

	memset(&cb, 0, sizeof(cb));
	cb.src_fd = (uint32_t)g_anchor.ring_fd;
	cb.flags = IORING_REGISTER_DST_REPLACE;
	cb.src_off = run->first;
	cb.dst_off = run->first;
	cb.nr = run->n;
	return ap_uring_register(ring->ring_fd, AP_IORING_REGISTER_CLONE_BUFFERS, &cb, 1);
}

uint64_t ap_ur_anchor_failures(void)
{
	uint64_t n;

	pthread_mutex_lock(&ap_ur_lock);
	n = g_anchor_failures;
	pthread_mutex_unlock(&ap_ur_lock);
	return n;
}
#endif
