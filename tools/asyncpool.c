/* SPDX-License-Identifier: MIT */
/* asyncpool: demo, benchmark and inspect libasyncpool. */
#include "config.h"

#include <errno.h>
#include <getopt.h>
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
	      "  demo    zero-copy TCP loopback over io_uring (or MSG_ZEROCOPY) with leased buffers\n"
	      "          (--zerocopy, or where io_uring is refused: the same over\n"
	      "          MSG_ZEROCOPY sockets; --memory, or without either: threads\n"
	      "          acquire, fill, verify and release buffers of a memory pool)\n"
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
	rc = cache == TOOL_POOL_DEFAULT ? asyncpool_create(r, pool) :
					  asyncpool_create_opts(r, &po, pool);
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

/* The number of an option, or exit TOOL_EXIT_USAGE with a message. */
static unsigned long tool_range(const char *opt, const char *arg, unsigned long min, unsigned long max)
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

/*
 * The options of every command, in one table: a number from min to max,
 * or a flag (max 0).  -h, --help is every command's.
 */
static const struct {
	const char *command, *name;
	char key;
	unsigned long min, max;
} options[] = {
	{ "demo", "threads", 't', 1, 256 },
	{ "demo", "ops", 'n', 1, 1ul << 32 },
	{ "demo", "mib", 'm', 1, 1ul << 20 },
	{ "demo", "memory", 'M', 0, 0 },
	{ "demo", "rings", 'r', 1, 64 },
	{ "demo", "dry", 'd', 0, 0 },
	{ "demo", "zerocopy", 'z', 0, 0 },
	{ "bench", "json", 'j', 0, 0 },
	{ "bench", "threads", 't', 1, 64 },
	{ "bench", "ops", 'n', 1, 1ul << 40 },
	{ "bench", "reps", 'r', 1, 64 },
	{ "bench", "buffers", 'b', 1, ASYNCPOOL_MAX_BUFFERS },
	{ "bench", "sweep", 's', 0, 0 },
	{ "inspect", "json", 'j', 0, 0 },
	{ "reclaim", "quarantine", 'q', 0, UINT32_MAX },
};
#define N_OPTIONS (sizeof(options) / sizeof(options[0]))

int tool_options(int argc, char **argv, int operands, void (*help)(FILE *), struct tool_args *a)
{
	struct option lo[N_OPTIONS + 2];
	char shortopts[2 * N_OPTIONS + 2] = "h";
	size_t n = 0, k = 1;
	int c;

	memset(a, 0, sizeof(*a));
	for (size_t i = 0; i < N_OPTIONS; i++) {
		if (strcmp(options[i].command, argv[0]))
			continue;
		lo[n++] = (struct option){ options[i].name,
					   options[i].max ? required_argument : no_argument,
					   NULL, options[i].key };
		shortopts[k++] = options[i].key;
		if (options[i].max)
			shortopts[k++] = ':';
	}
	lo[n++] = (struct option){ "help", no_argument, NULL, 'h' };
	lo[n] = (struct option){ NULL, 0, NULL, 0 };
	shortopts[k] = 0;
	while ((c = getopt_long(argc, argv, shortopts, lo, NULL)) != -1) {
		if (c == 'h') {
			help(stdout);
			return TOOL_EXIT_OK;
		}
		for (size_t i = 0; i < N_OPTIONS; i++) {
			char opt[32];

			if (options[i].key != c || strcmp(options[i].command, argv[0]))
				continue;
			snprintf(opt, sizeof(opt), "--%s", options[i].name);
			a->value[(unsigned char)c] = options[i].max ?
				tool_range(opt, optarg, options[i].min, options[i].max) : 1;
			a->given[(unsigned char)c] = true;
			break;
		}
		if (!a->given[(unsigned char)c])
			return TOOL_EXIT_USAGE;         /* getopt said why */
	}
	a->first = optind;
	for (int i = optind; operands >= 0 && i < argc; i++)
		if (!argv[i][0])
			operands = -2;  /* an empty operand: wrong */
	if (operands != -1 && argc - optind != operands) {
		help(stderr);
		return TOOL_EXIT_USAGE;
	}
	return TOOL_GO;
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
