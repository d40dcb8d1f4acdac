#!/bin/sh
# The shared object exports exactly the symbols of the version script,
# each one versioned in its node.
set -u
so="${top_builddir:-.}/lib/.libs/libasyncpool.so.1"
sym="${top_srcdir:-.}/lib/libasyncpool.sym"
NM=${NM:-nm}
if [ ! -f "$so" ]; then
	echo "1..0 # SKIP no shared object at $so (static build)"
	exit 0
fi
echo "1..4"
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
# what the script lists, by node
awk '/^[A-Z0-9_.]+ *\{/ { node=$1 } /^\t[a-z_0-9]+;/ { gsub(/[\t;]/, ""); print $0 "@@" node }' \
	"$sym" | sort > "$tmp/want"
$NM -D --defined-only "$so" | awk '$2 ~ /^[TDBRVW]$/ { print $3 }' | grep -v '^LIBASYNCPOOL' | sort > "$tmp/got"
if [ -s "$tmp/want" ]; then echo "ok 1 - the version script lists $(wc -l < "$tmp/want") symbols"; else echo "not ok 1 - the version script lists nothing"; fi
if diff -u "$tmp/want" "$tmp/got" > "$tmp/diff"; then
	echo "ok 2 - exported symbols and versions match the version script"
else
	echo "not ok 2 - exported symbols differ from the version script"
	sed 's/^/# /' "$tmp/diff"
fi
if grep -v '^asyncpool_' "$tmp/got" | sed 's/@.*//' | grep -q .; then
	echo "not ok 3 - a symbol without the asyncpool_ prefix is exported"
	grep -v '^asyncpool_' "$tmp/got" | sed 's/^/# /'
else
	echo "ok 3 - every exported symbol has the asyncpool_ prefix"
fi
if grep -v '@@LIBASYNCPOOL_' "$tmp/got" | grep -q .; then
	echo "not ok 4 - an unversioned symbol is exported"
else
	echo "ok 4 - every exported symbol is versioned"
fi
