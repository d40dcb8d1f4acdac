/* SPDX-License-Identifier: MIT */
/*
 * asyncpool reclaim [--quarantine MS] NAME|FD-PATH: attach to a shared
 * pool and give back to its freelist what dead processes held
 * (asyncpool_reclaim(3)), then say how many buffers came back and how
 * many leased ones still wait for the quarantine.
 *
 * The pool is opened with ASYNCPOOL_SHARED_OPEN_NO_RECLAIM: an open
 * reclaims by itself, and what it took back would be missing from the
 * count printed here.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <asyncpool.h>
#include "tool.h"
#include "../lib/pool_check.h"

static void reclaim_usage(FILE *f)
{
	fprintf(f, "Usage: asyncpool reclaim [--quarantine MS] NAME|FD-PATH\n"
	      "\n"
	      "Give back to a shared pool the buffers of processes that died: those in\n"
	      "their caches at once, those they had leased once the quarantine has\n"
	      "passed since their death was first seen (default %u ms).\n"
	      "NAME is a POSIX shared memory name (\"/name\"); FD-PATH is a file,\n"
	      "e.g. /dev/shm/name or /proc/PID/fd/N for a memfd.\n"
	      "\n"
	      "  -q, --quarantine MS  the quarantine of this reclaim (0: none)\n"
	      "\n"
	      "Exit status: 0 done; 1 cannot open the pool or reclaim; 2 usage error.\n",
		(unsigned)ASYNCPOOL_QUARANTINE_MS);
}

static int open_pool(const char *what, struct asyncpool_shared **sp)
{
	struct stat st;
	int fd, rc;

	if (tool_is_shm_name(what))
		return asyncpool_shared_open_named_flags(what, ASYNCPOOL_SHARED_OPEN_NO_RECLAIM, sp);
	fd = open(what, O_RDWR | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return -EINVAL;
	}
	/* A path the user named, as a name: its owner may truncate it. */
	rc = asyncpool_shared_open_fd_flags(fd, ASYNCPOOL_SHM_OPEN_UNSEALED |
					    ASYNCPOOL_SHARED_OPEN_NO_RECLAIM, sp);
	close(fd);
	return rc;
}

/*
 * The leased buffers of attachments found dead, which the quarantine
 * keeps out, and the most milliseconds one of them still has to wait.
 * Read from shared memory: an estimate, bounded like inspect's reads.
 */
static uint32_t waiting(struct asyncpool_shared *sp, uint32_t quarantine_ms, uint64_t *left_ms)
{
	const unsigned char *mem = asyncpool_shared_shm(sp)->base;
	struct ap_pool_header h;
	struct ap_audit *a;
	unsigned char *seen;
	uint64_t now = tool_now_ns();
	uint32_t n = 0;

	*left_ms = 0;
	if (ap_header_check(mem, asyncpool_shared_shm(sp)->size, true, &h))
		return 0;
	a = malloc(sizeof(*a));
	seen = calloc(h.buffer_count / 8 + 1, 1);
	if (a && seen) {
		(void)ap_freelist_audit(atomic_load((_Atomic uint64_t *)(mem + AP_OFF_HEAD)),
					(const _Atomic uint64_t *)(mem + AP_OFF_NEXT),
					(const _Atomic uint32_t *)(mem + h.link_offset),
					h.buffer_count, h.channel_count, seen, a);
		for (uint32_t s = 0; s < AP_ATTACH_SLOTS; s++) {
			const struct ap_attach *rec = (const void *)(mem + h.attach_offset +
								     (size_t)s * AP_ATTACH_SIZE);
			uint64_t since = atomic_load((_Atomic uint64_t *)&rec->dead_since);
			uint64_t q = (uint64_t)quarantine_ms * 1000000u, gone;

			if (AP_ATT_STATE(atomic_load((_Atomic uint64_t *)&rec->life)) != AP_ATT_DEAD ||
			    !a->held_leased[s + 1])
				continue;
			n += a->held_leased[s + 1];
			gone = since && since <= now ? now - since : 0;
			if (gone < q && (q - gone) / 1000000u + 1 > *left_ms)
				*left_ms = (q - gone) / 1000000u + 1;
		}
	}
	free(a);
	free(seen);
	return n;
}

int cmd_reclaim(int argc, char **argv)
{
	struct asyncpool_shared *sp;
	struct tool_args a;
	const char *what;
	uint32_t quarantine, wait_n;
	uint64_t left_ms;
	int rc;

	if ((rc = tool_options(argc, argv, 1, reclaim_usage, &a)) != TOOL_GO)
		return rc;
	what = argv[a.first];
	quarantine = a.given['q'] ? (uint32_t)a.value['q'] : ASYNCPOOL_QUARANTINE_MS;
	rc = open_pool(what, &sp);
	if (rc) {
		fprintf(stderr, "asyncpool: %s: cannot open the pool: %s\n", what,
			tool_pool_error(rc));
		return TOOL_EXIT_FAILURE;
	}
	rc = asyncpool_set_quarantine(asyncpool_shared_pool(sp), quarantine);
	if (!rc)
		rc = asyncpool_reclaim(asyncpool_shared_pool(sp));
	if (rc < 0) {
		fprintf(stderr, "asyncpool: %s: reclaim: %s\n", what, tool_pool_error(rc));
		asyncpool_shared_close(sp);
		return TOOL_EXIT_FAILURE;
	}
	printf("reclaimed:       %d buffers\n", rc);
	wait_n = waiting(sp, quarantine, &left_ms);
	if (wait_n)
		printf("quarantine:      %" PRIu32 " leased buffers of dead processes, back with a "
		       "reclaim in %" PRIu64 " ms\n", wait_n, left_ms);
	asyncpool_shared_close(sp);
	return TOOL_EXIT_OK;
}
