#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Every counter a page names is read by a test (issue 54, kind 6): each
# field of the public stats structs (struct asyncpool_*stats in
# include/asyncpool/*.h, but size, which the caller sets, and reserved
# padding) is read, as
# .NAME or ->NAME outside comments and strings, by some C test of
# tests/ that names the struct too (its type or its call, the same
# word); a counter no test reads can count wrong and nothing fails.
# Reading is not asserting, but a test that reads a counter it does not
# check is rare, and the field list is what this script can see.  One
# line per field.
set -u
srcdir=${top_srcdir:-.}
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
# struct-name field, for each struct asyncpool_*stats { ... };
for h in "$srcdir"/include/asyncpool/*.h; do
	perl -0777 -ne '
		s{/\*.*?\*/}{ }gs;
		while (/struct (asyncpool_\w*stats) \{(.*?)\};/gs) {
			my ($s, $body) = ($1, $2);
			for my $decl (split /;/, $body) {
				next unless $decl =~ /(\w+)\s*(\[[^\]]*\])?\s*$/;
				print "$s $1\n" unless $1 eq "size" || $1 =~ /^reserved/;
			}
		}' "$h"
done > "$tmp/fields"
mkdir "$tmp/c"
for f in "$srcdir"/tests/*.c "$srcdir"/tests/*.h; do
	perl -0777 -pe 's{/\*.*?\*/}{ }gs; s{//[^\n]*}{}g; s{"(?:[^"\\\n]|\\.)*"}{""}g' "$f" \
		> "$tmp/c/$(basename "$f")"
done
n=$(wc -l < "$tmp/fields")
if [ "$n" -eq 0 ]; then
	echo "1..1"
	echo "not ok 1 - no stats struct found in include/asyncpool/"
	exit 0
fi
echo "1..$n"
i=0
while read -r s f; do
	i=$((i + 1))
	if grep -lE "(^|[^a-z_0-9])$s([^a-z_0-9]|$)" "$tmp"/c/* 2> /dev/null |
	   xargs -r grep -lE "(\\.|->)$f([^a-zA-Z_0-9]|$)" | grep -q .; then
		echo "ok $i - struct $s: $f is read by a test"
	else
		echo "not ok $i - struct $s: $f is read by no test of tests/"
	fi
done < "$tmp/fields"
