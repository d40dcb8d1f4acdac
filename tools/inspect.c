/* SPDX-License-Identifier: MIT */
/*
 * asyncpool inspect NAME|FD-PATH: print the header and check the
 * freelist of a shared pool, read-only.  The memory belongs to other
 * processes and may be corrupt or changing: it is mapped PROT_READ and
 * MAP_PRIVATE (never written), every field is checked before it is
 * used, every walk is bounded, and a SIGBUS from a file that shrinks
 * under us is caught.
 *
 * Exit status: 0 consistent, 1 inconsistent, 2 usage error or cannot
 * open.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <asyncpool.h>
#include "tool.h"
#include "../lib/pool_check.h"

static sigjmp_buf bus_jump;

static void on_sigbus(int sig)
{
	(void)sig;
	siglongjmp(bus_jump, 1);
}

static void inspect_usage(FILE *f)
{
	fputs("Usage: asyncpool inspect NAME|FD-PATH\n"
	      "\n"
	      "Print the header of a shared pool and check its freelist, read-only.\n"
	      "NAME is a POSIX shared memory name (\"/name\"); FD-PATH is a file,\n"
	      "e.g. /dev/shm/name or /proc/PID/fd/N for a memfd.\n"
	      "\n"
	      "Exit status: 0 consistent; 1 cannot open or read it, invalid or\n"
	      "inconsistent; 2 usage error.\n", f);
}

static bool is_shm_name(const char *s)
{
	return s[0] == '/' && s[1] && !strchr(s + 1, '/');
}

static const char *err_name(int rc)
{
	switch (rc) {
	case -EPROTO: return "EPROTO (no pool magic)";
	case -EPROTONOSUPPORT: return "EPROTONOSUPPORT (unknown layout version)";
	case -EBADMSG: return "EBADMSG (inconsistent header)";
	case -EUCLEAN: return "EUCLEAN (inconsistent freelist)";
	default: return strerror(-rc);
	}
}

static int report(const char *what, const unsigned char *mem, size_t size)
{
	const struct ap_pool_header *raw = (const void *)mem;
	struct ap_pool_header h;
	struct ap_audit a;
	unsigned char *seen;
	uint64_t head, off, total;
	int rc;

	printf("object:          %s\n", what);
	printf("size:            %zu bytes\n", size);
	if (size < sizeof(h)) {
		printf("header:          too small for a header (%zu < %zu bytes)\n",
		       size, sizeof(h));
		return TOOL_EXIT_FAILURE;
	}
	memcpy(&h, mem, sizeof(h));
	printf("magic:           0x%08" PRIx32 "%s\n", (uint32_t)atomic_load(&h.magic),
	       atomic_load(&h.magic) == AP_POOL_MAGIC ? " (APOL)" : "");
	/* Not a pool: the rest of the header would be noise. */
	if (atomic_load(&h.magic) != AP_POOL_MAGIC) {
		printf("header:          INVALID: %s\n", err_name(-EPROTO));
		return 1;
	}
	/* A pool: print what is there before judging it. */
	printf("version:         %" PRIu32 "\n", h.version);
	printf("header_size:     %" PRIu32 "\n", h.header_size);
	printf("flags:           0x%" PRIx32 "%s\n", h.flags,
	       h.flags == AP_POOL_F_SHARED ? " (shared)" : "");
	printf("storage_size:    %" PRIu64 "\n", h.storage_size);
	printf("buffer_size:     %" PRIu64 "\n", h.buffer_size);
	printf("buffer_count:    %" PRIu32 "\n", h.buffer_count);
	printf("attach_slots:    %" PRIu32 "\n", h.attach_slots);
	printf("head_offset:     %" PRIu64 "\n", h.head_offset);
	printf("counters_offset: %" PRIu64 "\n", h.counters_offset);
	printf("next_offset:     %" PRIu64 "\n", h.next_offset);
	printf("depth_offset:    %" PRIu64 "\n", h.depth_offset);
	printf("attach_offset:   %" PRIu64 "\n", h.attach_offset);

	rc = ap_header_check(raw, size, true, &h);
	if (rc) {
		printf("header:          INVALID: %s\n", err_name(rc));
		return TOOL_EXIT_FAILURE;
	}
	printf("header:          valid (layout v%" PRIu32 ")\n", h.version);
	if (ap_bundle_geometry(h.buffer_count, h.buffer_size, &off, &total) && total <= size)
		printf("buffers:         at offset %" PRIu64 " (%" PRIu64 " bytes)\n",
		       off, h.buffer_size * h.buffer_count);
	else
		printf("buffers:         not in this object (the pool layout only)\n");
	{
		const struct ap_pool_counters *c = (const void *)(mem + AP_OFF_COUNTERS);

		printf("bad_releases:    %" PRIu64 "\n",
		       atomic_load_explicit((_Atomic uint64_t *)&c->bad_releases, memory_order_relaxed));
		printf("corruptions:     %" PRIu64 "\n",
		       atomic_load_explicit((_Atomic uint64_t *)&c->corruptions, memory_order_relaxed));
		printf("empty:           %" PRIu64 "\n",
		       atomic_load_explicit((_Atomic uint64_t *)&c->empty, memory_order_relaxed));
	}
	seen = calloc(h.buffer_count / 8 + 1, 1);
	if (!seen) {
		fprintf(stderr, "asyncpool: out of memory\n");
		return TOOL_EXIT_FAILURE;
	}
	head = atomic_load_explicit((_Atomic uint64_t *)(mem + AP_OFF_HEAD), memory_order_acquire);
	rc = ap_freelist_audit(head, (const _Atomic uint64_t *)(mem + AP_OFF_NEXT),
			       h.buffer_count, seen, &a);
	free(seen);
	printf("head:            index %" PRIu32 "%s, tag %" PRIu32 "\n", a.head_index,
	       a.head_index == AP_FL_END ? " (empty)" : "", a.head_tag);
	{
		const struct ap_pool_head *hl = (const void *)(mem + AP_OFF_HEAD);
		uint32_t w = atomic_load_explicit((_Atomic uint32_t *)&hl->wait, memory_order_relaxed);

		printf("waiters:         %s (wait word 0x%08" PRIx32 ")\n",
		       w & AP_WAIT_WAITERS ? "announced" : "none", w);
		printf("flush requests:  %" PRIu32 "\n",
		       atomic_load_explicit((_Atomic uint32_t *)&hl->flush, memory_order_relaxed));
	}
	printf("capacity:        %" PRIu32 "\n", h.buffer_count);
	/*
	 * As asyncpool_available() in a process that caches none: the
	 * freelist.  Cached buffers are available only to the process
	 * whose threads cache them (man asyncpool_available).
	 */
	printf("available:       %" PRIu32 " (on the freelist)\n", a.free);
	printf("leased:          %" PRIu32 "\n", a.leased);
	printf("cached:          %" PRIu32 " (in thread caches: available to their process only)\n",
	       a.cached);
	if (a.lost)
		printf("lost:            %" PRIu32 "\n", a.lost);
	if (rc) {
		if (a.problem_index != AP_FL_END)
			printf("freelist:        INCONSISTENT: %s (at buffer %" PRIu32 ")\n",
			       a.problem, a.problem_index);
		else
			printf("freelist:        INCONSISTENT: %s\n", a.problem);
		return TOOL_EXIT_FAILURE;
	}
	printf("freelist:        consistent\n");
	return TOOL_EXIT_OK;
}

int cmd_inspect(int argc, char **argv)
{
	struct sigaction sa, old;
	struct stat st;
	void *mem;
	int fd, rc;

	if (argc == 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
		inspect_usage(stdout);
		return TOOL_EXIT_OK;
	}
	if (argc != 2 || !argv[1][0]) {
		inspect_usage(stderr);
		return TOOL_EXIT_USAGE;
	}
	if (is_shm_name(argv[1]))
		fd = shm_open(argv[1], O_RDONLY | O_CLOEXEC, 0);
	else
		fd = open(argv[1], O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0) {
		fprintf(stderr, "asyncpool: %s: %s\n", argv[1], strerror(errno));
		return TOOL_EXIT_FAILURE;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		fprintf(stderr, "asyncpool: %s: not a shared memory object or file\n", argv[1]);
		close(fd);
		return TOOL_EXIT_FAILURE;
	}
	if (st.st_size == 0 || (uintmax_t)st.st_size > SIZE_MAX) {
		printf("object:          %s\nsize:            %jd bytes\n"
		       "header:          INVALID: no header in an empty object\n",
		       argv[1], (intmax_t)st.st_size);
		close(fd);
		return TOOL_EXIT_FAILURE;
	}
	mem = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (mem == MAP_FAILED) {
		fprintf(stderr, "asyncpool: %s: mmap: %s\n", argv[1], strerror(errno));
		return TOOL_EXIT_FAILURE;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_sigbus;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGBUS, &sa, &old);
	if (sigsetjmp(bus_jump, 1) == 0) {
		rc = report(argv[1], mem, (size_t)st.st_size);
	} else {
		fflush(stdout);
		printf("\nobject:          SIGBUS: the object shrank while it was read\n");
		rc = TOOL_EXIT_FAILURE;
	}
	sigaction(SIGBUS, &old, NULL);
	munmap(mem, (size_t)st.st_size);
	return rc;
}
