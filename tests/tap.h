/* SPDX-License-Identifier: MIT */
/*
 * A small TAP producer for the tests: plan, ok, skip, skip_all, diag,
 * bail_out.  Output goes to stdout for automake's tap-driver.sh.
 *
 * Hygiene: the file descriptors open when the program starts are noted
 * (a constructor calls tap_fd_baseline()), and done_testing() fails the
 * program if any other descriptor is still open at its end.
 *
 * Watchdog: the same constructor arms alarm() with TAP_WATCHDOG_SECONDS
 * (scaled by the stress size, see tap_watchdog_bound()).  When it fires
 * the program prints "Bail out! watchdog: N s" and exits 1, so that a
 * hang (a lost wake-up, an unbounded loop) fails the test instead of
 * stalling make check.  A generous failure bound, not a timed
 * assertion: nothing passes or fails on speed below it.
 * $ASYNCPOOL_TEST_WATCHDOG (seconds) overrides every bound (make
 * check-mutants sets it lower, so that a mutant's hang fails fast).  A
 * test that needs its own bound calls tap_watchdog(N), never alarm().
 */
#ifndef ASYNCPOOL_TAP_H
#define ASYNCPOOL_TAP_H

#include <dirent.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int tap_planned;
static int tap_run;
static int tap_failed;

static inline void tap_vline(const char *prefix, const char *fmt, va_list ap)
{
	fputs(prefix, stdout);
	vfprintf(stdout, fmt, ap);
	fputc('\n', stdout);
	fflush(stdout);
}

/* plan(N): N tests will follow. */
static inline void plan(int n)
{
	tap_planned = n;
	printf("1..%d\n", n);
	fflush(stdout);
}

/* The whole program has nothing to test on this machine. */
static inline __attribute__((noreturn, format(printf, 1, 2)))
void skip_all(const char *fmt, ...)
{
	va_list ap;

	fputs("1..0 # SKIP ", stdout);
	va_start(ap, fmt);
	vfprintf(stdout, fmt, ap);
	va_end(ap);
	fputc('\n', stdout);
	fflush(stdout);
	exit(0);
}

static inline __attribute__((format(printf, 1, 2)))
void diag(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	tap_vline("# ", fmt, ap);
	va_end(ap);
}

static inline __attribute__((noreturn, format(printf, 1, 2)))
void bail_out(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	tap_vline("Bail out! ", fmt, ap);
	va_end(ap);
	exit(1);
}

static inline __attribute__((format(printf, 2, 3)))
int ok_(int cond, const char *fmt, ...)
{
	va_list ap;

	tap_run++;
	if (!cond)
		tap_failed++;
	printf("%sok %d - ", cond ? "" : "not ", tap_run);
	va_start(ap, fmt);
	vfprintf(stdout, fmt, ap);
	va_end(ap);
	fputc('\n', stdout);
	fflush(stdout);
	return cond;
}

#define ok(cond, ...) ok_(!!(cond), __VA_ARGS__)

/* Compare two integers; on failure print both. */
#define is_int(got, want, ...) do {                                          \
	long long got_ = (long long)(got), want_ = (long long)(want);        \
	if (!ok(got_ == want_, __VA_ARGS__))                                 \
		diag("  got %lld, want %lld (%s)", got_, want_, #got);       \
} while (0)

/* n tests cannot run here: report them as skipped with the reason. */
static inline __attribute__((format(printf, 2, 3)))
void skip(int n, const char *fmt, ...)
{
	char why[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	while (n-- > 0) {
		tap_run++;
		printf("ok %d # SKIP %s\n", tap_run, why);
	}
	fflush(stdout);
}

/* The sanitizer this program was built with, or NULL. */
static inline const char *tap_sanitizer(void)
{
#if defined(__SANITIZE_ADDRESS__)
	return "AddressSanitizer";
#elif defined(__SANITIZE_THREAD__)
	return "ThreadSanitizer";
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
	return "AddressSanitizer";
#elif __has_feature(thread_sanitizer)
	return "ThreadSanitizer";
#endif
#endif
	return NULL;
}

/* Seconds a test program may run before its watchdog fails it. */
#ifndef TAP_WATCHDOG_SECONDS
#define TAP_WATCHDOG_SECONDS 300
#endif
/* The stress size at which the bounds hold as written; larger sizes
 * (make check-long) scale them up in proportion. */
#define TAP_WATCHDOG_STRESS 100000ul

static unsigned tap_watchdog_armed;

/* The bound for a test that asks for seconds: $ASYNCPOOL_TEST_WATCHDOG if
 * set, else seconds times the stress size over TAP_WATCHDOG_STRESS (at
 * least once). */
static inline unsigned tap_watchdog_bound(unsigned seconds)
{
	const char *o = getenv("ASYNCPOOL_TEST_WATCHDOG");
	const char *s = getenv("ASYNCPOOL_STRESS_ITERATIONS");
	unsigned long scale = 1;

	if (o && *o && strtoul(o, NULL, 10) > 0)
		return (unsigned)strtoul(o, NULL, 10);
	if (s && *s && strtoul(s, NULL, 10) > TAP_WATCHDOG_STRESS)
		scale = (strtoul(s, NULL, 10) + TAP_WATCHDOG_STRESS - 1) / TAP_WATCHDOG_STRESS;
	if (scale > 1000)
		scale = 1000;
	return (unsigned)(seconds * scale);
}

static void tap_watchdog_fired(int sig)
{
	static const char head[] = "\nBail out! watchdog: ";
	char num[16], *p = num + sizeof(num);
	unsigned v = tap_watchdog_armed;

	(void)sig;
	/* async-signal-safe: write(2) only, the number by hand */
	*--p = '\n';
	*--p = 's';
	*--p = ' ';
	do
		*--p = (char)('0' + v % 10);
	while ((v /= 10) && p > num);
	if (write(STDOUT_FILENO, head, sizeof(head) - 1) >= 0 &&
	    write(STDOUT_FILENO, p, (size_t)(num + sizeof(num) - p)) >= 0)
		_exit(1);
	_exit(1);
}

/* (Re)arm the watchdog for seconds from now (scaled as above); 0 re-arms
 * the default bound.  A forked child does not inherit it: its parent's
 * watchdog covers the wait for it. */
static inline void tap_watchdog(unsigned seconds)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = tap_watchdog_fired;
	/* It never returns; SA_RESTART so that it does not count as a
	 * handler that interrupts the library's waits (pool_wait.c). */
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGALRM, &sa, NULL);
	tap_watchdog_armed = tap_watchdog_bound(seconds ? seconds : TAP_WATCHDOG_SECONDS);
	alarm(tap_watchdog_armed);
}

/* Run fn(arg) in a child process: true if it returned (the child exits
 * 0), false if it crashed or exited otherwise.  For "X is harmless":
 * a check that fails when X is not, without ending the program. */
static inline int tap_survives(void (*fn)(void *), void *arg)
{
	int status;
	pid_t pid;

	fflush(stdout);
	pid = fork();
	if (pid < 0)
		return 0;
	if (pid == 0) {
		alarm(0);
		fn(arg);
		_exit(0);
	}
	while (waitpid(pid, &status, 0) < 0)
		;
	return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/* The descriptors open at the baseline (valgrind keeps its own high up). */
#define TAP_FD_MAX 256
static int tap_fd_base[TAP_FD_MAX];
static int tap_fd_nbase;
static int tap_fd_ready;

/* Call fn(fd) for each open descriptor but the directory's own. */
static inline int tap_fd_each(void (*fn)(int fd, void *ctx), void *ctx)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;

	if (!d)
		return -1;
	while ((e = readdir(d))) {
		int fd;

		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		fd = atoi(e->d_name);
		if (fd != dirfd(d))
			fn(fd, ctx);
	}
	closedir(d);
	return 0;
}

static inline void tap_fd_mark(int fd, void *ctx)
{
	(void)ctx;
	if (tap_fd_nbase < TAP_FD_MAX)
		tap_fd_base[tap_fd_nbase++] = fd;
}

/* Note the descriptors open now: they are not leaks.  A constructor runs
 * it before main(); a test may call it again after opening on purpose a
 * descriptor it keeps to the end. */
static inline void tap_fd_baseline(void)
{
	tap_fd_nbase = 0;
	tap_fd_ready = tap_fd_each(tap_fd_mark, NULL) == 0;
}

static void tap_fd_baseline_ctor(void) __attribute__((constructor, unused));
static void tap_fd_baseline_ctor(void)
{
	tap_fd_baseline();
	tap_watchdog(0);
}

static inline void tap_fd_report(int fd, void *ctx)
{
	char path[64], target[256];
	ssize_t n;

	for (int i = 0; i < tap_fd_nbase; i++)
		if (tap_fd_base[i] == fd)
			return;
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	n = readlink(path, target, sizeof(target) - 1);
	target[n > 0 ? n : 0] = '\0';
	diag("file descriptor %d leaked: %s", fd, target);
	(*(int *)ctx)++;
}

/* The number of descriptors open now that were not at the baseline. */
static inline int tap_check_fds(void)
{
	int leaked = 0;

	if (tap_fd_ready)
		tap_fd_each(tap_fd_report, &leaked);
	return leaked;
}

/* The exit status: 0 only if every planned test ran and passed, and no
 * file descriptor leaked. */
static inline int done_testing(void)
{
	int leaked = tap_check_fds();

	if (tap_planned && tap_run != tap_planned)
		diag("planned %d tests but ran %d", tap_planned, tap_run);
	if (!tap_planned)
		printf("1..%d\n", tap_run);
	if (leaked)
		diag("%d file descriptor(s) leaked: failing", leaked);
	fflush(stdout);
	return (tap_failed || leaked || (tap_planned && tap_run != tap_planned)) ? 1 : 0;
}

#endif /* ASYNCPOOL_TAP_H */
