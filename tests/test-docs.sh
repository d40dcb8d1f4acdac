#!/bin/sh
# The documentation keeps the shape issue 56 gave it:
# - README.md is an introduction: at most 170 lines, no section per
#   release ("What 1.4 adds", "## 1.9"), no instruction counts, and its
#   Quick start is the two commands .ci/run runs;
# - NEWS, at the top of the tree, has an entry for the package's version,
#   and every Debian binary package installs it (debian/PKG.docs);
# - every installed man page's footer names the package's version, not
#   the release of its last edit: the pages are installed into a
#   temporary DESTDIR by `make install-data` (which runs the rewrite of
#   man/Makefile.inc) and their .TH lines read back; and every source
#   page has a footer that rewrite recognises.
set -u
srcdir="${top_srcdir:-.}"
builddir="${top_builddir:-.}"
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT

n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
not_ok() {
	n=$((n + 1)); echo "not ok $n - $1"
	[ -s "$tmp/out" ] && sed 's/^/# /' "$tmp/out"
	return 0
}
check() { # DESC: ok if $tmp/out is empty
	if [ -s "$tmp/out" ]; then not_ok "$1"; else ok "$1"; fi
}

version=$(sed -n 's/^#define PACKAGE_VERSION "\(.*\)"$/\1/p' "$builddir/config.h" 2> /dev/null)
echo "1..9"

# README: an introduction, not a release history.
readme="$srcdir/README.md"
lines=$(wc -l < "$readme")
if [ "$lines" -le 170 ]; then : > "$tmp/out"; else
	echo "README.md has $lines lines (at most 170: history goes to NEWS)" > "$tmp/out"; fi
check "README.md is at most 170 lines ($lines)"
# A heading that names a release (What 1.4 adds, Changes in 1.9, ## 1.10.0).
grep -nE '^#+ .*(\<[0-9]+\.[0-9]+(\.[0-9]+)?\>|[Ww]hat .* (adds|changes|offers)|[Nn]ew in|[Rr]elease)' \
	"$readme" > "$tmp/out"
check "README.md has no section per release"
grep -niE '[0-9] instructions|instructions (a|per) ' "$readme" > "$tmp/out"
check "README.md quotes no instruction count"
awk '/^## Quick start/ { q = 1 } q && /^```sh/ { c = 1; next }
	c && /^```/ { exit } c { print }' "$readme" > "$tmp/quick"
if [ "$(wc -l < "$tmp/quick")" -eq 2 ]; then : > "$tmp/out"; else
	{ echo "the first sh block after ## Quick start is not two lines:"; cat "$tmp/quick"; } > "$tmp/out"; fi
check "README.md's Quick start is two commands (.ci/run runs them)"

# NEWS: an entry for this version, installed by every binary package.
if [ -z "$version" ]; then
	echo "no PACKAGE_VERSION in $builddir/config.h" > "$tmp/out"
elif grep -qE "^(libasyncpool )?$(echo "$version" | sed 's/\./\\./g')\>" "$srcdir/NEWS" 2> /dev/null; then
	: > "$tmp/out"
else
	echo "NEWS has no entry that starts a line with $version" > "$tmp/out"
fi
check "NEWS has an entry for $version"
: > "$tmp/out"
if [ -f "$srcdir/debian/control" ]; then
	for p in $(sed -n 's/^Package: *//p' "$srcdir/debian/control"); do
		grep -qx 'NEWS' "$srcdir/debian/$p.docs" 2> /dev/null ||
			echo "debian/$p.docs does not list NEWS" >> "$tmp/out"
	done
fi
check "every Debian binary package installs NEWS"

# The source pages: each .TH footer has the form the install rewrites.
: > "$tmp/out"
for p in "$srcdir"/man/man[137]/*.[137]; do
	th=$(grep -m1 '^\.TH ' "$p") || continue
	echo "$th" | grep -qE '"libasyncpool [0-9]+\.[0-9]+\.[0-9]+" "libasyncpool Manual"$' ||
		echo "${p#$srcdir/}: $th" >> "$tmp/out"
done
check "every source page's footer reads \"libasyncpool X.Y.Z\""

# The installed pages: each footer names this version.
if (cd "$builddir" && env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL \
	${MAKE:-make} install-data DESTDIR="$tmp/root") > "$tmp/install.log" 2>&1; then
	: > "$tmp/out"
	ok "make install-data into a temporary DESTDIR"
else
	cp "$tmp/install.log" "$tmp/out"
	not_ok "make install-data into a temporary DESTDIR"
fi
: > "$tmp/out"
count=0
for p in $(find "$tmp/root" -path '*/man/man[137]/*' -type f | LC_ALL=C sort); do
	th=$(grep -m1 '^\.TH ' "$p") || continue
	count=$((count + 1))
	echo "$th" | grep -qF "\"libasyncpool $version\" \"libasyncpool Manual\"" ||
		echo "${p#$tmp/root}: $th" >> "$tmp/out"
done
[ "$count" -gt 0 ] || echo "no page with a .TH line was installed" >> "$tmp/out"
check "every installed page ($count) says \"libasyncpool $version\" in its footer"
