/* SPDX-License-Identifier: MIT */
/* asyncpool: demo, benchmark and inspect libasyncpool: the commands. */
#include "config.h"

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
	      "          acquire, fill, verify and release buffers of a memory pool;\n"
	      "          --xdp: AF_XDP frames as leases on a veth pair in a netns)\n"
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
