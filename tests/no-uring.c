/* SPDX-License-Identifier: MIT */
/*
 * no-uring PROGRAM [ARGUMENT...]: run PROGRAM where io_uring is refused,
 * under the seccomp filter of tests/seccomp-uring.c, as in a container
 * whose runtime refuses it.  Exit status: PROGRAM's; 125 when the filter
 * cannot be installed here (the tests skip), 127 when PROGRAM cannot be
 * run.  Also built on its own by the autopkgtest (debian/tests/examples).
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "seccomp-uring.h"

int main(int argc, char **argv)
{
	int rc;

	if (argc < 2) {
		fputs("usage: no-uring PROGRAM [ARGUMENT...]\n", stderr);
		return 127;
	}
	rc = seccomp_refuse_uring();
	if (rc) {
		fprintf(stderr, "no-uring: no seccomp filter here: %s\n", strerror(-rc));
		return 125;
	}
	execvp(argv[1], argv + 1);
	fprintf(stderr, "no-uring: %s: %m\n", argv[1]);
	return 127;
}
