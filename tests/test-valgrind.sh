#!/bin/sh
# valgrind memcheck on the single-threaded test programs: no invalid
# access, no uninitialised read, no leak.  (valgrind's thread checkers
# misread C11 atomics, so helgrind and drd are not gates.)
# The programs are ASYNCPOOL_VALGRIND_TESTS, set by Makefile.am.
set -u
top_builddir=${top_builddir:-.}
progs=${ASYNCPOOL_VALGRIND_TESTS:-}
if [ -n "${ASYNCPOOL_SANITIZER_CFLAGS:-}" ]; then
	echo "1..0 # SKIP built with sanitizers ($ASYNCPOOL_SANITIZER_CFLAGS): valgrind cannot run them"
	exit 0
fi
if ! command -v valgrind > /dev/null 2>&1; then
	echo "1..0 # SKIP valgrind is not installed"
	exit 0
fi
if [ -z "$progs" ]; then
	echo "1..0 # SKIP ASYNCPOOL_VALGRIND_TESTS names no program"
	exit 0
fi
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
set -- $progs
echo "1..$#"
n=0
for prog in "$@"; do
	n=$((n + 1))
	# libtool's wrapper scripts: run the real program under valgrind.
	if "$top_builddir/libtool" --mode=execute valgrind -q --error-exitcode=99 \
		--leak-check=full --show-leak-kinds=definite,indirect,possible \
		--errors-for-leak-kinds=definite,indirect,possible \
		"$top_builddir/$prog" > "$tmp/out" 2> "$tmp/err"; then
		echo "ok $n - $prog: memcheck clean ($(grep -c '^ok' "$tmp/out") TAP tests passed)"
	else
		echo "not ok $n - $prog: memcheck or the test failed"
		sed 's/^/# /' "$tmp/err" | head -60
		grep '^not ok' "$tmp/out" | sed 's/^/# /'
	fi
done
