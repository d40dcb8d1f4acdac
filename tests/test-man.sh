#!/bin/sh
# The manual: every symbol of the version script and every static inline
# function of the public headers has a man3 page whose NAME lists it, and
# every page is clean under man --warnings, lexgrog and mandoc -Tlint when
# read from an installed-like tree (so that .so pages resolve).
#
# The lists are read at run time from lib/libasyncpool.sym and
# include/asyncpool/*.h, so new functions need no change here.
set -u
srcdir="${top_srcdir:-.}"
sym="$srcdir/lib/libasyncpool.sym"
man="$srcdir/man"
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
# man-db drops privileges when run as root: let anyone read the tree.
chmod 755 "$tmp"
# man-db's seccomp sandbox fails in some containers and under fakeroot.
MAN_DISABLE_SECCOMP=1
LC_ALL=C.UTF-8
MANWIDTH=80
export MAN_DISABLE_SECCOMP LC_ALL MANWIDTH
unset MANPATH MANOPT PAGER MANPAGER 2> /dev/null || true

n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
not_ok() {
	n=$((n + 1)); echo "not ok $n - $1"
	[ -s "$tmp/out" ] && sed 's/^/# /' "$tmp/out"
	return 0
}
skip() { n=$((n + 1)); echo "ok $n # SKIP $1"; }

# The exported functions: the names listed in the version script's nodes.
sed -n 's/^[[:space:]]*\(asyncpool_[a-z0-9_]*\);.*/\1/p' "$sym" > "$tmp/exported"
# The static inline functions of the public headers with the public prefix
# (a definition may put its return type on the line before the name).
for h in "$srcdir"/include/asyncpool/*.h; do
	awk '/^static inline/ { buf = $0; want = 1 }
	     want && !/^static inline/ { buf = buf " " $0 }
	     want && buf ~ /\(/ {
		sub(/\(.*/, "", buf); n = split(buf, w, /[ \t*]+/)
		print w[n]; want = 0 }' "$h"
done | grep '^asyncpool_' > "$tmp/inline"
sort -u "$tmp/exported" "$tmp/inline" > "$tmp/names"

# The names a page's NAME section lists, following .so links.
resolve() { # page -> the file that has the text
	f=$1
	for i in 1 2 3 4; do
		target=$(sed -n '1s/^\.so[[:space:]]\{1,\}//p' "$f")
		[ -n "$target" ] || break
		f="$man/$target"
		[ -f "$f" ] || return 1
	done
	echo "$f"
}
names_of() {
	awk '/^\.SH/ { if (in_name) exit; if ($2 == "NAME") in_name = 1; next }
	     in_name { print }' "$1" | tr '\n' ' ' |
		sed 's/[[:space:]]\\-[[:space:]].*//; s/\\-/-/g' | tr ',' '\n' |
		sed 's/^[[:space:]]*//; s/[[:space:]]*$//'
}

# Copy the pages into a tree laid out as installed.
mkdir -p "$tmp/share/man"
for d in man1 man3 man7; do
	[ -d "$man/$d" ] && cp -R "$man/$d" "$tmp/share/man/"
done
pages=$(cd "$tmp/share/man" && ls man1/*.1 man3/*.3 man7/*.7 2> /dev/null)

have() { command -v "$1" > /dev/null 2>&1; }
count_names=$(wc -l < "$tmp/names")
count_pages=$(echo $pages | wc -w)
echo "1..$((3 + count_names * 3 + count_pages * 3))"

if [ "$(wc -l < "$tmp/exported")" -gt 0 ]; then
	ok "the version script lists $(wc -l < "$tmp/exported") functions"
else
	: > "$tmp/out"; not_ok "the version script lists no function"
fi
# man-pages(7): ERRORS names an error without a minus (.B EINVAL); the
# RETURN VALUE says the function returns its negative.
for p in "$man"/man3/*.3; do
	sed -n '/^\.SH ERRORS/,/^\.SH /p' "$p" | grep -n '^\.BR\{0,1\} \\-E' |
		sed "s|^|$(basename "$p"): ERRORS: |"
done > "$tmp/out"
if [ ! -s "$tmp/out" ]; then
	ok "man3: every ERRORS section names errors without a minus"
else
	not_ok "man3: every ERRORS section names errors without a minus"
fi
if [ "$(wc -l < "$tmp/inline")" -gt 0 ]; then
	ok "the headers define $(wc -l < "$tmp/inline") static inline functions"
else
	: > "$tmp/out"; not_ok "no static inline function found in the headers"
fi

while read -r name; do
	page="$man/man3/$name.3"
	if [ ! -f "$page" ]; then
		echo "no file man/man3/$name.3" > "$tmp/out"
		not_ok "$name has a man3 page"
		not_ok "$name is in the NAME section of its page"
		not_ok "man 3 $name finds it in the installed tree"
		continue
	fi
	ok "$name has a man3 page"
	if ! real=$(resolve "$page"); then
		echo "man/man3/$name.3 is a .so link to a missing page" > "$tmp/out"
		not_ok "$name is in the NAME section of its page"
	elif names_of "$real" | grep -qx "$name"; then
		ok "$name is in the NAME section of $(basename "$real")"
	else
		names_of "$real" > "$tmp/out"
		not_ok "$name is in the NAME section of $(basename "$real")"
	fi
	# as a user would look it up once installed
	if ! have man; then
		skip "man 3 $name: man(1) of man-db is not installed"
	elif man --warnings -M "$tmp/share/man" 3 "$name" 2> "$tmp/out" > "$tmp/render" &&
	     [ ! -s "$tmp/out" ] && grep -q "$name" "$tmp/render"; then
		ok "man 3 $name finds it in the installed tree"
	else
		not_ok "man 3 $name finds it in the installed tree"
	fi
done < "$tmp/names"

cd "$tmp/share/man" || exit 1
for p in $pages; do
	# man --warnings: groff's warnings, with .so resolved in the tree
	if have man; then
		if man --warnings -l "$p" 2> "$tmp/out" > "$tmp/render" &&
		   [ ! -s "$tmp/out" ] && [ -s "$tmp/render" ]; then
			ok "$p: man --warnings is clean"
		else
			not_ok "$p: man --warnings is clean"
		fi
	else
		skip "$p: man --warnings: man(1) of man-db is not installed"
	fi
	# lexgrog: whatis can parse the NAME section
	if have lexgrog; then
		if lexgrog "$p" > "$tmp/out" 2>&1 && ! grep -q 'parse failed' "$tmp/out"; then
			ok "$p: lexgrog parses its NAME"
		else
			not_ok "$p: lexgrog parses its NAME"
		fi
	else
		skip "$p: lexgrog: man-db is not installed"
	fi
	# mandoc -Tlint: everything down to style messages, except the one
	# it prints for every .so page (it prefers symlinks; man-db, Debian's
	# dh_installman and this package use .so).
	if have mandoc; then
		mandoc -Tlint "$p" 2>&1 |
			grep -v "^mandoc: $p:1:2: WARNING: \.so is fragile, better use ln(1): so man[0-9]/[a-z0-9_.-]*$" > "$tmp/out"
		if [ ! -s "$tmp/out" ]; then
			ok "$p: mandoc -Tlint is clean"
		else
			not_ok "$p: mandoc -Tlint is clean"
		fi
	else
		skip "$p: mandoc -Tlint: mandoc is not installed"
	fi
done
