#!/bin/sh
# The public headers are self-contained and clean C99, C11 and C++.
set -u
inc="${top_srcdir:-.}/include"
CC=${CC:-cc}
CXX=${CXX:-c++}
n=0
fail=0
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
check() {
	n=$((n + 1))
	desc=$1; shift
	if "$@" > "$tmp/out" 2>&1; then
		echo "ok $n - $desc"
	else
		echo "not ok $n - $desc"
		sed 's/^/# /' "$tmp/out"
	fi
}
headers="asyncpool.h"
for h in "$inc"/asyncpool/*.h; do headers="$headers asyncpool/$(basename "$h")"; done
count=$(( $(echo $headers | wc -w) * 2 + 3 ))
echo "1..$count"
for h in $headers; do
	printf '#include <%s>\n' "$h" > "$tmp/one.c"
	check "$h alone: C99 -pedantic" $CC -std=c99 -pedantic -Wall -Wextra -Werror -fsyntax-only -I"$inc" "$tmp/one.c"
	check "$h alone: C++ -pedantic" $CXX -x c++ -std=c++11 -pedantic -Wall -Wextra -Werror -fsyntax-only -I"$inc" "$tmp/one.c"
done
printf '#include <asyncpool.h>\n' > "$tmp/all.c"
check "asyncpool.h: C11 -Wconversion" $CC -std=c11 -pedantic -Wall -Wextra -Wconversion -Wsign-conversion -Werror -fsyntax-only -I"$inc" "$tmp/all.c"
check "asyncpool.h: C++17" $CXX -x c++ -std=c++17 -pedantic -Wall -Wextra -Werror -fsyntax-only -I"$inc" "$tmp/all.c"
printf '#include <asyncpool.h>\n#include <liburing.h>\n' > "$tmp/uring.c"
if printf '#include <liburing.h>\n' | $CC -E -x c - > /dev/null 2>&1; then
	check "asyncpool.h beside liburing.h" $CC -std=gnu11 -Wall -Werror -fsyntax-only -I"$inc" "$tmp/uring.c"
else
	n=$((n + 1)); echo "ok $n # SKIP liburing.h is not installed"
fi
