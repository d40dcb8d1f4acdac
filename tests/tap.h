/* SPDX-License-Identifier: MIT */
/*
 * A small TAP producer for the tests: plan, ok, skip, skip_all, diag,
 * bail_out.  Output goes to stdout for automake's tap-driver.sh.
 */
#ifndef ASYNCPOOL_TAP_H
#define ASYNCPOOL_TAP_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* The exit status: 0 only if every planned test ran and passed. */
static inline int done_testing(void)
{
	if (tap_planned && tap_run != tap_planned)
		diag("planned %d tests but ran %d", tap_planned, tap_run);
	if (!tap_planned)
		printf("1..%d\n", tap_run);
	return (tap_failed || (tap_planned && tap_run != tap_planned)) ? 1 : 0;
}

#endif /* ASYNCPOOL_TAP_H */
