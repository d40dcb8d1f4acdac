/* SPDX-License-Identifier: MIT */
/*
 * The SA_RESTART rule of asyncpool_acquire_wait(3) asks which signals
 * have a handler (issue 52): from the SigCgt line of
 * /proc/thread-self/status, then sigaction(2) of those alone, or, when
 * /proc cannot say, sigaction(2) of every signal (the scan).  Both must
 * give the same answer, the rule's:
 *   - the parse of SigCgt, over made-up lines (bits, the digit order,
 *     lines cut by a read, not hex, missing): exact sets and -EINVAL;
 *   - the set read from /proc is exactly the signals whose handler
 *     sigaction(2) says is neither SIG_DFL nor SIG_IGN;
 *   - over 400 random configurations of handlers on six signals (none,
 *     ignored, with and without SA_RESTART, SA_SIGINFO, SA_RESETHAND,
 *     blocked or not, a fault signal among them), the /proc path, the
 *     forced fallback and the scan each give the answer the test
 *     computes, and the /proc path scans nothing.
 */
#include "config.h"

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "hooks.h"
#include "../lib/pool_wait.h"

/* The states a signal is put in. */
enum { ST_DFL, ST_IGN, ST_RESTART, ST_PLAIN, ST_INFO_RESTART, ST_INFO_PLAIN,
       ST_ONESHOT_RESTART, ST_ONESHOT_PLAIN, ST_N };

static void on_sig(int sig)
{
	(void)sig;
}

static void on_info(int sig, siginfo_t *si, void *uc)
{
	(void)sig; (void)si; (void)uc;
}

static void set_state(int sig, int st)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sigemptyset(&sa.sa_mask);
	switch (st) {
	case ST_DFL: sa.sa_handler = SIG_DFL; break;
	case ST_IGN: sa.sa_handler = SIG_IGN; break;
	case ST_RESTART: sa.sa_handler = on_sig; sa.sa_flags = SA_RESTART; break;
	case ST_PLAIN: sa.sa_handler = on_sig; break;
	case ST_INFO_RESTART: sa.sa_sigaction = on_info; sa.sa_flags = SA_SIGINFO | SA_RESTART; break;
	case ST_INFO_PLAIN: sa.sa_sigaction = on_info; sa.sa_flags = SA_SIGINFO; break;
	case ST_ONESHOT_RESTART: sa.sa_handler = on_sig; sa.sa_flags = SA_RESETHAND | SA_RESTART;
		break;
	case ST_ONESHOT_PLAIN: sa.sa_handler = on_sig; sa.sa_flags = SA_RESETHAND; break;
	}
	if (sigaction(sig, &sa, NULL))
		bail_out("sigaction(%d)", sig);
}

/* The signals with a handler, asked of sigaction(2) one by one. */
static void handled_set(sigset_t *s)
{
	sigemptyset(s);
	for (int sig = 1; sig < NSIG; sig++) {
		struct sigaction sa;

		if (sigaction(sig, NULL, &sa) == 0 && sa.sa_handler != SIG_DFL &&
		    sa.sa_handler != SIG_IGN)
			sigaddset(s, sig);
	}
}

static bool same_set(const sigset_t *a, const sigset_t *b, int *which)
{
	for (int sig = 1; sig < NSIG; sig++)
		if (sigismember(a, sig) != sigismember(b, sig)) {
			*which = sig;
			return false;
		}
	return true;
}

struct parse_case {
	const char *text;
	int rc;
	int sigs[6];            /* the set, 0-terminated */
	const char *what;
};

static const struct parse_case cases[] = {
	{ "Name:\tx\nSigIgn:\t0000000000000000\nSigCgt:\t0000000000000001\nCapInh:\t0\n", 0,
	  { 1 }, "signal 1: bit 0 of the last digit" },
	{ "SigCgt:\t0000000000000002\n", 0, { 2 }, "signal 2 on the first line" },
	{ "SigCgt:\t0000000000000010\n", 0, { 5 }, "signal 5: the next digit" },
	{ "SigCgt:\t8000000000000000\n", 0, { 64 }, "signal 64: the first digit's top bit" },
	{ "SigCgt:\t0000000280004a00\n", 0, { 10, 12, 15, 32, 34 },
	  "SIGUSR1, SIGUSR2, SIGTERM and two above 31" },
	{ "SigCgt:\t0000000000000A00\n", 0, { 10, 12 }, "capital hex" },
	{ "SigCgt: 0000000000000000\n", 0, { 0 }, "none caught, blank a space" },
	{ "SigCgt:\t1\n", 0, { 1 }, "one digit" },
	{ "XSigCgt:\t0000000000000001\nSigCgt:\t0000000000000200\n", 0, { 10 },
	  "the key at the start of a line only" },
	{ "SigIgn:\t0000000000000001\n", -EINVAL, { 0 }, "no line: -EINVAL" },
	{ "SigCgt:\t00000000000002", -EINVAL, { 0 }, "a line cut by the read: -EINVAL" },
	{ "SigCgt:\t0000000000000g00\n", -EINVAL, { 0 }, "not hex: -EINVAL" },
	{ "SigCgt:\t\n", -EINVAL, { 0 }, "no digits: -EINVAL" },
	{ "SigCgt:\t00000000000000000000000000000000000000000000000000000000000000001\n",
	  -EINVAL, { 0 }, "65 digits: -EINVAL" },
	{ "", -EINVAL, { 0 }, "empty: -EINVAL" },
};

static void parse_cases(void)
{
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		sigset_t got, want;
		int rc, which = 0;

		sigemptyset(&want);
		for (int i = 0; cases[c].sigs[i]; i++)
			sigaddset(&want, cases[c].sigs[i]);
		rc = ap_sigcgt_parse(cases[c].text, strlen(cases[c].text), &got);
		ok(rc == cases[c].rc && (rc || same_set(&got, &want, &which)), "parse: %s",
		   cases[c].what);
		if (which)
			diag("the set differs at signal %d", which);
	}
}

#define NS 6
#define CONFIGS 400

int main(void)
{
	const int sigs[NS] = { SIGHUP, SIGUSR1, SIGUSR2, SIGRTMIN + 2, SIGRTMAX, SIGSEGV };
	uint64_t x = test_seed(0x5167c67);
	sigset_t caught, handled, old;
	int agree_proc = 0, agree_fallback = 0, agree_scan = 0, agree_set = 0, scans = 0;
	int plain = 0, which = 0, reported = 0;
	bool proc;

	plan((int)(sizeof(cases) / sizeof(cases[0])) + 6);
	parse_cases();

	proc = ap_sigcgt_read(&caught) == 0;
	if (proc) {
		handled_set(&handled);
		ok(same_set(&caught, &handled, &which),
		   "/proc/thread-self/status's SigCgt is the handlers sigaction(2) gives");
		if (which)
			diag("the sets differ at signal %d", which);
	} else {
		skip(1, "no /proc/thread-self/status to read SigCgt from");
	}

	pthread_sigmask(SIG_BLOCK, NULL, &old);
	for (int c = 0; c < CONFIGS; c++) {
		sigset_t mask = old;
		bool want = true, got;
		uint32_t before;
		int st[NS];

		for (int i = 0; i < NS; i++) {
			x = x * 6364136223846793005ull + 1442695040888963407ull;
			st[i] = (int)((x >> 33) % ST_N);
			set_state(sigs[i], st[i]);
			if ((x >> 20) & 1) {
				sigaddset(&mask, sigs[i]);
			} else {
				sigdelset(&mask, sigs[i]);
				if (sigs[i] != SIGSEGV && (st[i] == ST_PLAIN || st[i] == ST_INFO_PLAIN ||
							   st[i] == ST_ONESHOT_PLAIN))
					want = false;
			}
		}
		pthread_sigmask(SIG_SETMASK, &mask, NULL);
		plain += !want;

		if (proc && ap_sigcgt_read(&caught) == 0) {
			handled_set(&handled);
			agree_set += same_set(&caught, &handled, &which);
		}
		before = atomic_load(&ap_test_hook_handler_scans);
		got = ap_handlers_restart();
		agree_proc += got == want;
		scans += atomic_load(&ap_test_hook_handler_scans) != before;
		atomic_store(&ap_test_hook_no_sigcgt, true);
		before = atomic_load(&ap_test_hook_handler_scans);
		agree_fallback += ap_handlers_restart() == want &&
				  atomic_load(&ap_test_hook_handler_scans) == before + 1;
		atomic_store(&ap_test_hook_no_sigcgt, false);
		agree_scan += ap_handlers_restart_scan() == want;
		if (got != want && !reported++)
			diag("configuration %d: states %d %d %d %d %d %d: want %d, got %d", c,
			     st[0], st[1], st[2], st[3], st[4], st[5], want, got);
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	for (int i = 0; i < NS; i++)
		set_state(sigs[i], ST_DFL);

	diag("%d of %d configurations had a handler without SA_RESTART unblocked", plain, CONFIGS);
	ok(plain > CONFIGS / 8 && plain < CONFIGS - CONFIGS / 8,
	   "the configurations give both answers (%d of %d: false)", plain, CONFIGS);
	is_int(agree_proc, CONFIGS, "the /proc path gives the rule's answer in every configuration");
	is_int(agree_fallback, CONFIGS,
	       "the fallback (no /proc) scans and gives the same answer in every configuration");
	is_int(agree_scan, CONFIGS, "the scan gives the same answer in every configuration");
	if (proc)
		ok(scans == 0 && agree_set == CONFIGS,
		   "with /proc: no scan (%d), SigCgt the handlers in %d of %d", scans, agree_set,
		   CONFIGS);
	else
		skip(1, "no /proc/thread-self/status");
	return done_testing();
}
