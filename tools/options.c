/* SPDX-License-Identifier: MIT */
/*
 * The options of every subcommand of the asyncpool tool, in one table,
 * and their parser (tool_options(), tools/tool.h).
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <asyncpool.h>
#include "tool.h"

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
	{ "demo", "xdp", 'x', 0, 0 },
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
