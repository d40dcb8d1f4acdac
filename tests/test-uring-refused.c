/* SPDX-License-Identifier: MIT */
/*
 * Where io_uring is refused (a seccomp filter, as in containers), the
 * uring calls answer -EPERM or -ENOSYS and the demo falls back to the
 * MSG_ZEROCOPY socket backend (the memory proactor where that is missing
 * too).  Each case runs in a child under its own filter.
 */
#include "config.h"

#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include <asyncpool.h>
#include "seccomp-uring.h"
#include "uring-util.h"

/* create_uring on a live ring once io_uring_register is refused with err. */
static int create_refused(int err)
{
	int pfd[2], rc = 1;
	pid_t pid;

	if (pipe(pfd))
		return -errno;
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		struct asyncpool_proactor *p = (void *)1;
		struct io_uring ring;

		close(pfd[0]);
		if (io_uring_queue_init(4, &ring, 0))
			rc = 1000;
		else if (seccomp_deny(__NR_io_uring_register, err))
			rc = 1001;
		else
			rc = asyncpool_proactor_create_uring(&ring, 0, &p);
		if (rc == -err && p != NULL)
			rc = 1002;
		_exit(write(pfd[1], &rc, sizeof(rc)) == sizeof(rc) ? 0 : 1);
	}
	close(pfd[1]);
	if (read(pfd[0], &rc, sizeof(rc)) != sizeof(rc))
		rc = 1003;
	close(pfd[0]);
	waitpid(pid, NULL, 0);
	return rc;
}

/* Run the demo with io_uring_setup refused; its exit status and output. */
static int demo_refused(int err, char *out, size_t outlen)
{
	const char *top = getenv("top_builddir");
	char tool[4096];
	int pfd[2], st;
	size_t n = 0;
	ssize_t k;
	pid_t pid;

	snprintf(tool, sizeof(tool), "%s/tools/asyncpool", top ? top : "..");
	if (pipe(pfd))
		return -1;
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		dup2(pfd[1], 1);
		close(pfd[0]);
		close(pfd[1]);
		if (seccomp_deny(__NR_io_uring_setup, err))
			_exit(100);
		execl(tool, tool, "demo", "--ops", "2000", "--mib", "8", (char *)NULL);
		_exit(101);
	}
	close(pfd[1]);
	while (n + 1 < outlen && (k = read(pfd[0], out + n, outlen - 1 - n)) > 0)
		n += (size_t)k;
	out[n] = 0;
	close(pfd[0]);
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
		return -1;
	return WEXITSTATUS(st);
}

int main(void)
{
	static char out[8192];
	struct io_uring ring;
	int rc;

	/* A guard against a hang, not a timed assertion. */
	tap_watchdog(120);
	ut_ring_init(&ring, 4);
	io_uring_queue_exit(&ring);

	is_int(create_refused(EPERM), -EPERM, "io_uring_register refused with EPERM: -EPERM");
	is_int(create_refused(ENOSYS), -ENOSYS, "io_uring_register refused with ENOSYS: -ENOSYS");

	for (int k = 0; k < 2; k++) {
		int err = k ? ENOSYS : EPERM;

		rc = demo_refused(err, out, sizeof(out));
		is_int(rc, 0, "demo with io_uring_setup refused (%s): exit 0", strerror(err));
		ok(strstr(out, "io_uring is not usable here") != NULL, "it says io_uring is not usable");
		ok((strstr(out, "MSG_ZEROCOPY socket backend") != NULL ||
		    strstr(out, "memory proactor") != NULL) && strstr(out, "\nok\n") != NULL,
		   "and runs the MSG_ZEROCOPY demo (or, without it, the memory demo)");
		if (rc)
			diag("output: %s", out);
	}
	return done_testing();
}
