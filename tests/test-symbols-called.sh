#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Every public call is made by a test (issue 54, kind 2): each function
# of the version script (lib/libasyncpool.sym) is called, as NAME( , by
# some C test of tests/ (a comment or a string that names it is not a
# call; a script calls the library only through the programs, whose
# calls are C), so that breaking one that no test runs fails something.
# One line per symbol.  The data symbol asyncpool_inline_tc is read by
# the public header's inline code, which each test compiles: it counts
# when that code reads it.
set -u
srcdir=${top_srcdir:-.}
sym=$srcdir/lib/libasyncpool.sym
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
awk '/^\t[a-z_0-9]+;/ { gsub(/[\t;]/, ""); print }' "$sym" | sort -u > "$tmp/symbols"
n=$(wc -l < "$tmp/symbols")
if [ "$n" -eq 0 ]; then
	echo "1..1"
	echo "not ok 1 - the version script lists nothing"
	exit 0
fi
# The tests' text without C comments and string literals (a name in a
# diag() or a comment calls nothing); the scripts as they are.
for f in "$srcdir"/tests/*.c "$srcdir"/tests/*.h "$srcdir"/tests/compat/*.c; do
	[ -f "$f" ] || continue
	perl -0777 -pe 's{/\*.*?\*/}{ }gs; s{//[^\n]*}{}g; s{"(?:[^"\\\n]|\\.)*"}{""}g' "$f"
done > "$tmp/c"
echo "1..$n"
i=0
while read -r s; do
	i=$((i + 1))
	if grep -qE "(^|[^a-z_0-9])$s[[:space:]]*\\(" "$tmp/c" ||
	   { [ "$s" = asyncpool_inline_tc ] &&
	     grep -qE "= $s;" "$srcdir"/include/asyncpool/inline.h; }; then
		echo "ok $i - $s is called by a test"
	else
		echo "not ok $i - $s is called by no test of tests/"
	fi
done < "$tmp/symbols"
