/* SPDX-License-Identifier: MIT */
/* asyncpool: demo, benchmark and inspect libasyncpool. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <asyncpool.h>
#include "tool.h"

static void usage(FILE *f)
{
	fputs("Usage: asyncpool COMMAND [OPTIONS]\n"
	      "\n"
	      "Commands:\n"
	      "  demo    zero-copy TCP loopback over io_uring with leased buffers\n"
	      "          (--memory, or where io_uring is refused: threads acquire,\n"
	      "          fill, verify and release buffers of a memory pool)\n"
	      "  bench   measure acquire+release against a mutex baseline\n"
	      "  inspect print and check a shared pool and its attachments:\n"
	      "          inspect [--json] NAME|FD-PATH\n"
	      "  reclaim give back what dead processes held in a shared pool:\n"
	      "          reclaim [--quarantine MS] NAME|FD-PATH\n"
	      "\n"
	      "Options:\n"
	      "  -h, --help     show this help\n"
	      "  -V, --version  show the version\n"
	      "\n"
	      "See asyncpool(1).\n", f);
}

int tool_memory_pool(struct asyncpool_proactor **p, struct asyncpool **pool,
		     size_t size, uint32_t count, uint32_t cache, bool populate)
{
	struct asyncpool_slab_options o;
	struct asyncpool_options po;
	struct asyncpool_slab *s;
	struct asyncpool_region *r;
	int rc;

	memset(&o, 0, sizeof(o));
	o.size = sizeof(o);
	o.buffer_size = size;
	o.buffer_count = count;
	o.numa_node = -1;
	o.flags = populate ? ASYNCPOOL_SLAB_POPULATE : 0;
	memset(&po, 0, sizeof(po));
	po.size = sizeof(po);
	po.cache_size = cache;
	rc = asyncpool_proactor_create_memory(p);
	if (rc)
		return rc;
	rc = asyncpool_slab_create(&o, &s);
	if (rc)
		goto fail_p;
	rc = asyncpool_proactor_register_slab(*p, s, ASYNCPOOL_ACCESS_READ, &r);
	asyncpool_slab_unref(s);
	if (rc)
		goto fail_p;
	rc = asyncpool_create_opts(r, &po, pool);
	asyncpool_region_unref(r);
	if (rc)
		goto fail_p;
	return 0;
fail_p:
	asyncpool_proactor_destroy(*p);
	*p = NULL;
	return rc;
}

void tool_memory_pool_free(struct asyncpool_proactor *p, struct asyncpool *pool)
{
	asyncpool_destroy(pool);
	asyncpool_proactor_destroy(p);
}

unsigned long tool_range(const char *opt, const char *arg, unsigned long min, unsigned long max)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = arg ? strtoul(arg, &end, 10) : 0;
	if (!arg || !arg[0] || errno || *end || v < min || v > max || arg[0] == '-') {
		fprintf(stderr, "asyncpool: %s takes a number from %lu to %lu\n", opt, min, max);
		exit(TOOL_EXIT_USAGE);
	}
	return v;
}

unsigned long tool_number(const char *opt, const char *arg, unsigned long max)
{
	return tool_range(opt, arg, 1, max);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return TOOL_EXIT_USAGE;
	}
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
		usage(stdout);
		return TOOL_EXIT_OK;
	}
	if (!strcmp(argv[1], "-V") || !strcmp(argv[1], "--version")) {
		printf("asyncpool %s (libasyncpool %s)\n", PACKAGE_VERSION, asyncpool_version());
		return TOOL_EXIT_OK;
	}
	if (!strcmp(argv[1], "demo"))
		return cmd_demo(argc - 1, argv + 1);
	if (!strcmp(argv[1], "bench"))
		return cmd_bench(argc - 1, argv + 1);
	if (!strcmp(argv[1], "inspect"))
		return cmd_inspect(argc - 1, argv + 1);
	if (!strcmp(argv[1], "reclaim"))
		return cmd_reclaim(argc - 1, argv + 1);
	fprintf(stderr, "asyncpool: unknown command '%s'\n", argv[1]);
	usage(stderr);
	return TOOL_EXIT_USAGE;
}
