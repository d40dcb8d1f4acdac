#!/bin/sh
# The files of lib/ call each other in layers, never in a circle
# (HACKING.md, "Who calls whom"): no two of them use each other's
# symbols, and no longer circle (a -> b -> c -> a) either.  A lower file
# tells an upper one what happened through a hook the upper one installs
# (a function pointer in struct asyncpool), or its caller acts on it.
#
# Read with nm(1) from the objects of the library (lib/.libs/
# libasyncpool_la-*.o; skipped without them, as in installed tests):
# "a uses b" means that a's object has one of b's symbols undefined, so
# a static inline function of a header counts for the file that calls
# it, which is what the layers are about.
#
# TODO: circles known and not yet broken, "a:b" each, an expected
# failure ("# TODO") while it is there; once it is gone its test passes
# as TODO, which make check counts as an error (XPASS): delete its entry
# then.  Empty since issue 22 (the last two went with the owner's
# inbox): a new circle fails.
todo=""
set -u
LC_ALL=C
export LC_ALL
NM=${NM:-nm}
# PIC objects in lib/.libs; a static-only build has them in lib/.
dir="${top_builddir:-.}/lib/.libs"
set -- "$dir"/libasyncpool_la-*.o
if [ ! -f "$1" ]; then
	dir="${top_builddir:-.}/lib"
	set -- "$dir"/libasyncpool_la-*.o
fi
if [ ! -f "$1" ]; then
	echo "1..0 # SKIP no objects of the library in $dir (installed tests, or not built)"
	exit 0
fi
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
: > "$tmp/def"
: > "$tmp/undef"
for o; do
	n=${o##*/libasyncpool_la-}
	n=${n%.o}
	$NM -g --defined-only "$o" | awk -v n="$n" 'NF == 3 { print n, $3 }' >> "$tmp/def"
	$NM -u "$o" | awk -v n="$n" 'NF { print n, $NF }' >> "$tmp/undef"
done
# Who uses whose symbol: "user owner symbol".
awk 'NR == FNR { def[$2] = $1; next }
     ($2 in def) && def[$2] != $1 { print $1, def[$2], $2 }' \
	"$tmp/def" "$tmp/undef" | sort -u > "$tmp/uses"
# The edges, with their symbols: "user owner sym sym ...".
awk '{ k = $1 " " $2; s[k] = s[k] " " $3 } END { for (k in s) print k s[k] }' \
	"$tmp/uses" | sort > "$tmp/edges"
# The pairs that use each other: "a b" with a < b.
awk '{ e[$1 " " $2] = 1 }
     END { for (k in e) { split(k, p, " ");
		if (p[1] < p[2] && ((p[2] " " p[1]) in e)) print p[1], p[2] } }' \
	"$tmp/edges" | sort > "$tmp/pairs"

is_todo() {
	for t in $todo; do
		[ "$t" = "$1:$2" ] || [ "$t" = "$2:$1" ] && return 0
	done
	return 1
}

# "# a uses b's: sym sym" for the edge a -> b.
uses() {
	awk -v a="$1" -v b="$2" '$1 == a && $2 == b {
		printf "# %s uses %s'\''s:", a, b
		for (i = 3; i <= NF; i++) printf " %s", $i
		printf "\n" }' "$tmp/edges"
}

nobj=$#
nfail=0
while read -r a b; do
	is_todo "$a" "$b" || nfail=$((nfail + 1))
done < "$tmp/pairs"
ntodo=0
for t in $todo; do ntodo=$((ntodo + 1)); done
echo "1..$((2 + ntodo + (nfail ? nfail : 1)))"
n=1
if [ -s "$tmp/uses" ]; then
	echo "ok $n - nm read $nobj objects of lib/: $(wc -l < "$tmp/edges") uses of a file by another"
else
	echo "not ok $n - nm found no file of lib/ using another's symbol ($NM on $dir)"
fi

for t in $todo; do
	n=$((n + 1))
	a=${t%%:*}
	b=${t#*:}
	if grep -qx "$a $b" "$tmp/pairs" || grep -qx "$b $a" "$tmp/pairs"; then
		echo "not ok $n - $a and $b use each other's symbols # TODO issue 22: the pool_cache rewrite"
		uses "$a" "$b"
		uses "$b" "$a"
	else
		echo "ok $n - $a and $b no longer use each other's symbols # TODO delete \"$t\" from the todo list of tests/test-layers.sh"
	fi
done

if [ "$nfail" -eq 0 ]; then
	n=$((n + 1))
	echo "ok $n - no other two files of lib/ use each other's symbols"
fi
while read -r a b; do
	is_todo "$a" "$b" && continue
	n=$((n + 1))
	echo "not ok $n - $a and $b use each other's symbols: a circle"
	uses "$a" "$b"
	uses "$b" "$a"
done < "$tmp/pairs"

# Longer circles: tsort(1) finds one in what is left without the pairs.
n=$((n + 1))
awk 'NR == FNR { p[$1 " " $2] = 1; next }
     !(($1 " " $2) in p) && !(($2 " " $1) in p) { print $1, $2 }' \
	"$tmp/pairs" "$tmp/edges" > "$tmp/dag"
if tsort < "$tmp/dag" > "$tmp/order" 2> "$tmp/loop"; then
	echo "ok $n - no circle of three files or more"
	# What the layers are today.
	echo "# one order of the layers, the top first (the pairs above left out): $(tr '\n' ' ' < "$tmp/order")"
else
	echo "not ok $n - a circle of three files or more"
	sed 's/^/# /' "$tmp/loop"
	# Its uses, edge by edge.
	sed -n 's/^tsort: \([a-z_0-9]*\)$/\1/p' "$tmp/loop" > "$tmp/members"
	awk 'NR == FNR { m[$1] = 1; next } ($1 in m) && ($2 in m) { print $1, $2 }' \
		"$tmp/members" "$tmp/dag" | while read -r a b; do uses "$a" "$b"; done
fi
