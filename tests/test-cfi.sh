#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Control-flow integrity around the header's inline release (issue 21,
# item 9): tests/cfi-lease.c built with clang -fsanitize=cfi-icall -flto
# -fvisibility=hidden against this tree's headers gives back pool leases
# and a lease of its own with every indirect call through the callee's
# own type; the same program with the 1.1 header's inline (a cast call)
# must die of SIGILL, which shows that CFI was on.  Skips where clang
# cannot build it, and in sanitizer builds (the library is instrumented).
set -u
src=${top_srcdir:-.}
bld=${top_builddir:-.}
lib="$bld/lib/.libs"
skip() { echo "1..0 # SKIP $1"; exit 0; }
command -v clang >/dev/null 2>&1 || skip "no clang"
[ -z "${ASYNCPOOL_SANITIZER_CFLAGS:-}" ] || skip "a sanitizer build"
[ -f "$lib/libasyncpool.so" ] || skip "no shared library at $lib"
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
build() {
	out=$1; shift
	clang -O1 -fsanitize=cfi-icall -flto -fvisibility=hidden "$@" \
		-I"$bld/include" -I"$src/include" -o "$out" "$src/tests/cfi-lease.c" \
		-L"$lib" -lasyncpool -Wl,-rpath,"$lib" 2>"$tmp/err"
}
build "$tmp/cfi" || { sed 's/^/# /' "$tmp/err"; skip "clang cannot build with -fsanitize=cfi-icall -flto"; }
build "$tmp/cfi-1.1" -DOLD_1_1_INLINE || skip "clang cannot build the 1.1 variant"
echo "1..2"
"$tmp/cfi" 2>"$tmp/run.err"
rc=$?
if [ $rc -eq 0 ]; then
	echo "ok 1 - cfi-icall: pool leases (cached and not) and our own lease released, every callback through its own type"
else
	echo "not ok 1 - cfi-icall: the 1.2 inline release exited $rc"
	sed 's/^/# /' "$tmp/run.err"
fi
{ "$tmp/cfi-1.1"; } 2>/dev/null
rc=$?
if [ $rc -eq 132 ]; then
	echo "ok 2 - cfi-icall: the 1.1 inline's cast call dies of SIGILL (the check is on)"
else
	echo "not ok 2 - cfi-icall: the 1.1 inline exited $rc, not SIGILL: is CFI on?"
fi
