#!/bin/sh
# examples/xdp-forward: frames sent into one veth pair come out of
# another, their Ethernet addresses rewritten, forwarded by the example
# through one pool's UMEM with no copy; zero-copy asked and refused on
# veth (copy mode, the reason printed); at the end every frame is back
# (the program's own check).  In a network namespace of its own
# (unshare -n: the kernel deletes it and its veths when the last process
# in it exits); SKIPs without root, a netns, veth or XDP.  Under
# timeout(1).  EXAMPLES_BIN as in test-example-echo.sh.
set -u
bin="${EXAMPLES_BIN:-${top_builddir:-.}/examples}"
peer="${XDP_PEER:-${top_builddir:-.}/tests/xdp-peer}"
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
. "${top_srcdir:-.}/tests/tap.sh"

if [ "$(id -u)" != 0 ]; then
	echo "1..0 # SKIP not root (a netns, veths and XDP need it)"
	exit 0
fi
if ! unshare -n true 2>/dev/null; then
	echo "1..0 # SKIP no network namespace (unshare -n)"
	exit 0
fi
export bin peer tmp
timeout 120 unshare -n sh -c '
	set -e
	ip link set lo up
	ip link add va type veth peer name vb
	ip link add vc type veth peer name vd
	for i in va vb vc vd; do ip link set $i up; done
	set +e
	"$peer" count vd 1000 3000 > "$tmp/count" &
	cpid=$!
	"$bin/xdp-forward" vb vc "$(ip -br link show dev vd | awk "{print \$3}")" 0 2000 > "$tmp/out" 2> "$tmp/err" &
	fpid=$!
	i=0
	while ! grep -q "^ready$" "$tmp/out" 2>/dev/null; do
		kill -0 $fpid 2>/dev/null || break
		i=$((i + 1)); [ $i -lt 300 ] || break
		sleep 0.1
	done
	"$peer" send va "$(ip -br link show dev vb | awk "{print \$3}")" 1000
	wait $fpid; echo $? > "$tmp/rc"
	wait $cpid
' 
if grep -q '^xdp-forward: asyncpool_x\|^xdp-forward: the pool as a UMEM' "$tmp/err" 2>/dev/null; then
	echo "1..0 # SKIP no AF_XDP socket with an XDP program here: $(grep '^xdp-forward:' "$tmp/err" | head -1)"
	exit 0
fi
echo "1..6"
tap_ok "xdp-forward exits 0" test "$(cat "$tmp/rc" 2>/dev/null)" = 0
tap_ok "zero-copy asked on veth: refused, copy mode, the reason printed" \
	grep -qx 'vb queue 0: copy mode (zero-copy refused: Operation not supported)' "$tmp/out"
tap_ok "the second socket on the same UMEM: copy mode" grep -q '^vc queue 0: copy mode' "$tmp/out"
tap_ok "every frame of 1000 arrived at vd, whole, rewritten" grep -qx 'got 1000 of 1000' "$tmp/count"
tap_ok "it forwarded at least as many" awk '/^forwarded [0-9]+ frames$/ { exit !($2 >= 1000) } END { if (NR == 0) exit 1 }' "$tmp/out"
tap_ok "every frame back: 4096 of 4096" grep -qx 'every frame back: 4096 of 4096 free' "$tmp/out"
sed 's/^/# /' "$tmp/out" "$tmp/count"
