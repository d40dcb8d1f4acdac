#!/bin/sh
# SPDX-License-Identifier: MIT
# make peers compiles the comparison with DPDK twice (issue 53), each
# binary compiling DPDK's inline code and this library's with the same
# flags, and the order of those flags is the measurement: the last
# -march wins, and DPDK's pkg-config flags (Debian: -march=corei7) let
# gcc move rte_mempool's cache->len through an XMM register.
#   bench-native     DPDK's pkg-config flags, then -march=native
#                    -mtune=native last;
#   bench-pkgconfig  DPDK's pkg-config flags last, nothing after them.
# This runs `make peers-build` of this build tree with a fake pkg-config
# (no DPDK needed) and a fake compiler that records its arguments, and
# reads the two commands.
set -u
builddir=${top_builddir:-.}
. "${top_srcdir:-.}/tests/tap.sh"
if ! make --version 2> /dev/null | grep -q 'GNU Make'; then
	echo "1..0 # SKIP no GNU make"
	exit 0
fi
if [ ! -f "$builddir/Makefile" ] || [ ! -f "$builddir/lib/libasyncpool.la" ]; then
	echo "1..0 # SKIP no configured and built tree at $builddir"
	exit 0
fi
# A Makefile that make would remake first (configure or Makefile.am
# newer) would be remade here with the fake compiler: not here.
if ! (cd "$builddir" && env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -q Makefile config.status) > /dev/null 2>&1; then
	echo "1..0 # SKIP the Makefile is out of date: run make first"
	exit 0
fi
echo "1..8"
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
# What Debian's libdpdk.pc says, in its order: -march=corei7 last.
cat > "$tmp/pkg-config" <<'EOS'
#!/bin/sh
case "$*" in
--exists*) exit 0 ;;
"--cflags libdpdk") echo "-I/fake-dpdk/include -include rte_config.h -march=corei7 -I/fake-dpdk/more" ;;
"--cflags ck") echo "-I/fake-ck/include" ;;
--libs*) echo "-lfake-dpdk -lfake-ck" ;;
*) exit 1 ;;
esac
EOS
# The compiler: one argument a line into $tmp/cc-NAME (NAME: the -o file's).
cat > "$tmp/cc" <<'EOS'
#!/bin/sh
out=
prev=
for a; do
	if [ "$prev" = "-o" ]; then out=$a; fi
	prev=$a
done
[ -n "$out" ] || exit 1
for a; do printf '%s\n' "$a"; done > "$FAKE_CC_LOG/cc-$(basename "$out")"
: > "$out"
EOS
chmod +x "$tmp/pkg-config" "$tmp/cc"
mkdir "$tmp/bin"
export FAKE_CC_LOG="$tmp"
(cd "$builddir" && env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make peers-build \
	PKG_CONFIG="$tmp/pkg-config" CC="$tmp/cc" PEERS_DIR="$tmp/bin") > "$tmp/out.log" 2>&1
rc=$?
cp "$tmp/out.log" "$tmp/err"
tap_ok "make peers-build runs (exit $rc) and compiles bench-native and bench-pkgconfig" \
	sh -c "[ $rc -eq 0 ] && [ -s '$tmp/cc-bench-native' ] && [ -s '$tmp/cc-bench-pkgconfig' ]"
rm -f "$tmp/err"
# last TOKEN-PREFIX FILE: the last argument of FILE that starts with it
last() { grep -- "^$1" "$2" | tail -n 1; }
# line ARG FILE: the number of the last line of FILE that is exactly ARG (0: none)
line() { grep -n -x -- "$1" "$2" | tail -n 1 | cut -d: -f1 | grep . || echo 0; }
n_=$tmp/cc-bench-native
p_=$tmp/cc-bench-pkgconfig
touch "$n_" "$p_"
tap_ok "bench-native: the last -march is -march=native" \
	test "$(last -march= "$n_")" = "-march=native"
tap_ok "bench-native: the last -mtune is -mtune=native" \
	test "$(last -mtune= "$n_")" = "-mtune=native"
tap_ok "bench-native: DPDK's pkg-config flags (-march=corei7) come before -march=native" \
	sh -c "a=\$(grep -n -x -- -march=corei7 '$n_' | tail -n 1 | cut -d: -f1); \
		b=\$(grep -n -x -- -I/fake-dpdk/more '$n_' | tail -n 1 | cut -d: -f1); \
		c=\$(grep -n -x -- -march=native '$n_' | tail -n 1 | cut -d: -f1); \
		[ -n \"\$a\" ] && [ -n \"\$b\" ] && [ -n \"\$c\" ] && [ \$a -lt \$c ] && [ \$b -lt \$c ]"
tap_ok "bench-pkgconfig: the last -march, -mtune or -mcpu is DPDK's pkg-config -march=corei7" \
	test "$(grep -E -- '^-m(arch|tune|cpu)=' "$p_" | tail -n 1)" = "-march=corei7"
tap_ok "bench-pkgconfig: no -march=native or -mtune=native at all" \
	sh -c "! grep -q -E -- '^-m(arch|tune)=native' '$p_'"
tap_ok "bench-pkgconfig: nothing but -D, -o, sources and link flags after DPDK's pkg-config flags" \
	sh -c "sed -n '/^-I\/fake-dpdk\/more\$/,\$p' '$p_' | sed 1d | grep -v -E -- '^(-D|-o\$|-L|-l|-Wl,|.*/bench[-a-z]*\$|.*\.c\$)' | grep -v -E -- '^-I.*-ck' > '$tmp/out'; \
		[ ! -s '$tmp/out' ] && grep -q -x -- -I/fake-dpdk/more '$p_'"
# The same compile but for what comes last: the two commands differ only
# by -march=native -mtune=native, what the binary says, and its name.
norm() { grep -v -x -E -- '-march=native|-mtune=native|-DPEERS_LAST=.*' "$1" | sed 's,/bench-[a-z]*$,/bench-X,'; }
norm "$n_" > "$tmp/n"
norm "$p_" > "$tmp/p"
tap_ok "the two commands are the same compile but for -march=native -mtune=native last" \
	sh -c "diff -u '$tmp/n' '$tmp/p' > '$tmp/out' && grep -q -x -- '-include' '$tmp/n' && grep -q -- '/include\$' '$tmp/n'"
