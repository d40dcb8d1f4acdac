#!/bin/sh
# The files of tools/ call one way (issue 35): the command's main calls
# the subcommands, a subcommand calls its parts and the shared helpers
# (options.c, pools.c, bench_stats.c, names.c, net.c, pattern.c,
# vm_pin.c), and no helper calls back up.  No two files use each
# other's symbols, and no longer circle (a -> b -> c -> a) either.
#
# Read with nm(1) from the objects of tools/asyncpool (tools/asyncpool-
# NAME.o; skipped without them): "a uses b" means that a's object has
# one of b's global symbols undefined, so a static inline function of
# tools/tool.h counts for the file that calls it.
set -u
LC_ALL=C
export LC_ALL
NM=${NM:-nm}
dir="${top_builddir:-.}/tools"
set -- "$dir"/asyncpool-*.o
if [ ! -f "$1" ]; then
	echo "1..0 # SKIP no objects of tools/asyncpool in $dir (not built)"
	exit 0
fi
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
: > "$tmp/def"
: > "$tmp/undef"
for o; do
	f=${o##*/asyncpool-}
	f=${f%.o}
	$NM -g --defined-only "$o" | awk -v f="$f" 'NF == 3 { print f, $3 }' >> "$tmp/def"
	$NM -u "$o" | awk -v f="$f" 'NF { print f, $NF }' >> "$tmp/undef"
done
# "user owner sym sym ..." for each file that uses another's symbols.
awk 'NR == FNR { def[$2] = $1; next }
     ($2 in def) && def[$2] != $1 { k = $1 " " def[$2]; s[k] = s[k] " " $2 }
     END { for (k in s) print k s[k] }' "$tmp/def" "$tmp/undef" | sort > "$tmp/edges"

echo "1..3"
if [ -s "$tmp/edges" ]; then
	echo "ok 1 - nm read $# objects of tools/: $(wc -l < "$tmp/edges") uses of a file by another"
else
	echo "not ok 1 - nm found no file of tools/ using another's symbol ($NM on $dir)"
fi

# Pairs: a uses b and b uses a.
awk '{ e[$1 " " $2] = $0 }
     END { for (k in e) { split(k, p, " ")
		if (p[1] < p[2] && ((p[2] " " p[1]) in e)) print e[k] "\n" e[p[2] " " p[1]] } }' \
	"$tmp/edges" > "$tmp/pairs"
if [ -s "$tmp/pairs" ]; then
	echo "not ok 2 - files of tools/ use each other's symbols: $(($(wc -l < "$tmp/pairs") / 2)) pairs"
	sed 's/^\([^ ]*\) \([^ ]*\) /# \1 uses \2'\''s: /' "$tmp/pairs"
else
	echo "ok 2 - no two files of tools/ use each other's symbols"
fi

# Longer circles: tsort(1) finds one.
cut -d' ' -f1,2 "$tmp/edges" > "$tmp/dag"
if tsort < "$tmp/dag" > "$tmp/order" 2> "$tmp/loop"; then
	echo "ok 3 - no circle through the files of tools/"
	echo "# one order, the callers first: $(tr '\n' ' ' < "$tmp/order")"
else
	echo "not ok 3 - a circle through the files of tools/"
	sed 's/^/# /' "$tmp/loop"
fi
