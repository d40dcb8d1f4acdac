/* SPDX-License-Identifier: MIT */
/*
 * Where io_uring is refused, the socket backend is chosen by itself.
 * Each case runs in a child under a seccomp filter that answers
 * io_uring_setup, io_uring_enter and io_uring_register with EPERM, as
 * Docker's default profile does (tests/seccomp-uring.c):
 * asyncpool_backend_probe() names MSG_ZEROCOPY, `asyncpool demo` sends
 * over it, and the backend's tests pass.  Then, as root where the sysctl
 * exists, the same under kernel.io_uring_disabled=2, restored after.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <asyncpool.h>
#include "seccomp-uring.h"
#include "tap.h"
#include "testutil.h"

/* In a child (under the filter if asked): the probe's answer, as an exit status. */
static int probe_child(bool filter, int want_uring_error)
{
	pid_t pid;
	int st;

	fflush(stdout);
	pid = fork_or_bail();
	if (pid == 0) {
		struct asyncpool_backend_info bi = { .size = sizeof(bi) };

		if (filter && seccomp_refuse_uring())
			_exit(100);
		if (asyncpool_backend_probe(&bi))
			_exit(101);
		if (bi.uring_error != want_uring_error || (bi.backends & ASYNCPOOL_BACKEND_URING))
			_exit(102);
		if (!(bi.backends & ASYNCPOOL_BACKEND_ZEROCOPY_TCP))
			_exit(bi.best == ASYNCPOOL_BACKEND_MEMORY ? 50 : 103);
		_exit(bi.best == ASYNCPOOL_BACKEND_ZEROCOPY_TCP ? 0 : 104);
	}
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
		return -1;
	return WEXITSTATUS(st);
}

/* Run a program of the build tree in a child; its exit status and output. */
static int run(bool filter, const char *rel, const char *const argv[], char *out, size_t outlen)
{
	const char *top = getenv("top_builddir");
	char path[4096];
	int pfd[2], st;
	size_t n = 0;
	ssize_t k;
	pid_t pid;

	snprintf(path, sizeof(path), "%s/%s", top ? top : "..", rel);
	if (pipe(pfd))
		bail_out("pipe");
	fflush(stdout);
	pid = fork_or_bail();
	if (pid == 0) {
		dup2(pfd[1], 1);
		close(pfd[0]);
		close(pfd[1]);
		if (filter && seccomp_refuse_uring())
			_exit(100);
		execv(path, (char *const *)argv);
		_exit(101);
	}
	close(pfd[1]);
	while (n + 1 < outlen && (k = read(pfd[0], out + n, outlen - 1 - n)) > 0)
		n += (size_t)k;
	out[n] = 0;
	/* Drain what did not fit. */
	while (read(pfd[0], path, sizeof(path)) > 0)
		;
	close(pfd[0]);
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
		return -1;
	return WEXITSTATUS(st);
}

static void check_demo(bool filter, const char *mib, const char *what, const char *also)
{
	static char out[16384];
	const char *argv[] = { "asyncpool", "demo", "--mib", mib, NULL };
	int rc = run(filter, "tools/asyncpool", argv, out, sizeof(out));

	is_int(rc, 0, "%s: asyncpool demo exits 0", what);
	ok(strstr(out, "io_uring is not usable here") != NULL, "%s: it says io_uring is not usable", what);
	ok(strstr(out, "MSG_ZEROCOPY socket backend") != NULL && strstr(out, "MSG_ZEROCOPY): ") &&
	   strstr(out, "GB/s"), "%s: it says it uses MSG_ZEROCOPY, with its GB/s", what);
	ok(strstr(out, "completions in") != NULL && strstr(out, "copied by the kernel"),
	   "%s: with the completions and copied completions counted", what);
	ok(strstr(out, "every lease back") != NULL && strstr(out, "\nok\n") != NULL,
	   "%s: every lease back, ok", what);
	if (also)
		ok(strstr(out, also) != NULL, "%s: it says %s", what, also);
	if (rc || !strstr(out, "\nok\n")) {
		diag("output: %s", out);
		return;
	}
	/* The figures, for the log: what it sent, how fast, what came back. */
	for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n"))
		if (strstr(line, "GB/s") || strstr(line, "completions") || strstr(line, "backend:"))
			diag("%s: %s", what, line);
}

static void check_tests(const char *what)
{
	static char out[65536];
	const char *tests[] = { "tests/test-zerocopy", "tests/test-zerocopy-ranges" };

	for (unsigned i = 0; i < 2; i++) {
		const char *argv[] = { tests[i], NULL };
		int rc = run(true, tests[i], argv, out, sizeof(out));

		ok(rc == 0 && !strstr(out, "not ok") && strstr(out, "1.."), "%s: %s passes", what,
		   tests[i]);
		if (rc || strstr(out, "not ok"))
			diag("output: %s", out);
	}
}

static const char *sysctl = "/proc/sys/kernel/io_uring_disabled";
static char saved[16];

static int write_sysctl(const char *v)
{
	int fd = open(sysctl, O_WRONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = write(fd, v, strlen(v));
	close(fd);
	return n == (ssize_t)strlen(v) ? 0 : -EIO;
}

/* A guard that outlives a hang: the sysctl goes back before we die. */
static void restore_on_alarm(int sig)
{
	(void)sig;
	write_sysctl(saved);
	_exit(99);
}

int main(void)
{
	struct asyncpool_backend_info bi = { .size = sizeof(bi) };
	int rc, fd, lock;
	ssize_t n;

	alarm(240);
	if (asyncpool_backend_probe(&bi))
		bail_out("probe");

	rc = probe_child(true, -EPERM);
	if (rc == 100)
		skip_all("no seccomp filter here (refused, or an architecture the filter does not know)");
	if (rc == 50)
		skip_all("no MSG_ZEROCOPY on TCP here: the memory backend is all there is");
	is_int(rc, 0, "seccomp: the probe sees io_uring_setup refused with EPERM and picks MSG_ZEROCOPY");
	check_demo(true, "32", "seccomp", NULL);
	check_tests("seccomp");

	fd = open(sysctl, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || geteuid() != 0) {
		if (fd >= 0)
			close(fd);
		skip(8, fd < 0 ? "no kernel.io_uring_disabled (Linux 6.6)" : "not root");
		return done_testing();
	}
	/*
	 * Two runs at once on one machine (two build trees' make check)
	 * must not both save and restore: the second would save the first's
	 * 2 and leave io_uring off.  One at a time, through a lock file.
	 */
	lock = open("/tmp/asyncpool-io_uring_disabled.lock",
		    O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (lock < 0 || flock(lock, LOCK_EX))
		bail_out("lock for %s", sysctl);
	n = read(fd, saved, sizeof(saved) - 1);
	close(fd);
	if (n <= 0)
		bail_out("read %s", sysctl);
	saved[n] = 0;
	signal(SIGALRM, restore_on_alarm);
	/*
	 * The sysctl is the whole machine's: other tests' rings fail while
	 * it is 2, so it stays 2 for one probe and one short demo only
	 * (Makefile.am runs this test after the io_uring tests).
	 */
	if (write_sysctl("2")) {
		skip(8, "kernel.io_uring_disabled is read-only here");
		return done_testing();
	}
	rc = probe_child(false, -EPERM);
	check_demo(false, "8", "io_uring_disabled=2", "kernel.io_uring_disabled=2");
	is_int(write_sysctl(saved), 0, "kernel.io_uring_disabled restored to %.*s", (int)strcspn(saved, "\n"),
	       saved);
	is_int(rc, 0, "io_uring_disabled=2: the probe sees EPERM and picks MSG_ZEROCOPY");
	close(lock);
	return done_testing();
}
