#!/bin/sh
# The asyncpool tool: one exit status rule for every subcommand (0 done,
# 1 failed, 2 usage error; tools/tool.h and asyncpool(1)), the help, the
# bench cases: their names, in order, in the JSON, the help and the
# manual; and what demo --dry reports.
set -u
tool="${top_builddir:-.}/tools/asyncpool"
man1="${top_srcdir:-.}/man/man1/asyncpool.1"
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
n=0
check() { # DESCRIPTION WANT-STATUS COMMAND...
	desc=$1 want=$2; shift 2
	n=$((n + 1))
	"$@" > "$tmp/out" 2> "$tmp/err" < /dev/null
	got=$?
	if [ "$got" -eq "$want" ]; then
		echo "ok $n - $desc: exit $want"
	else
		echo "not ok $n - $desc: exit $got, want $want"
		sed 's/^/# /' "$tmp/out" "$tmp/err"
	fi
}
is() { # DESCRIPTION CONDITION...
	desc=$1; shift
	n=$((n + 1))
	if "$@"; then echo "ok $n - $desc"; else echo "not ok $n - $desc"; fi
}

cases="pool pool-cached token token-cached
inline-pair inline-no-window inline-split-leave inline-no-owner-hint inline-no-released
inline-no-recheck inline-bare inline-two-arrays inline-bulk32 inline-bulk32-two-arrays inline-lease-bulk32 inline-lease-bulk32-floor inline-shared-pair pool-threads pool-cached-threads
default-1t default-cached-1t default-2t default-cached-2t default-8t default-cached-8t
handoff handoff-cached
handoff-shuffled handoff-shuffled-cached
handoff-token handoff-token-cached handoff-token-shared handoff-token-shared-cached
bulk32 bulk32-cached tokens32 tokens32-cached
tokens32-2t tokens32-cached-2t tokens32-2t-shuffled tokens32-cached-2t-shuffled shared-2proc shared-2proc-cached
shared-1t shared-cached-1t shared-token-1t shared-token-cached-1t cas-floor-cached-1t shared-2t shared-cached-2t shared-2p shared-cached-2p
wake-threads wake-2proc many-senders-1 many-senders-2 many-senders-4
many-senders-floor-1 many-senders-floor-2 many-senders-floor-4
chan-latency chan-2proc-1 chan-2proc-32 chan-back-2proc-1 chan-back-2proc-32 chan-wake-2proc
chan-floor-line chan-floor-futex
chan-floor-ring-1 chan-floor-ring-32 chan-floor-slots-1 chan-floor-slots-32
chan-floor-words-1 chan-floor-words-32 chan-floor-back-1 chan-floor-back-32
reclaim-latency contend-spin contend-wait contend-baseline handoff-2proc-spin handoff-2proc-wait wrap wrap-cached
wrap-shared wrap-shared-cached xdp-rxdrop xdp-fwd xdp-rxdrop-2q mutex-baseline
mutex-baseline-threads cas2-baseline handoff-queue-baseline"
echo "1..38"

check "asyncpool without a command" 2 "$tool"
check "asyncpool with an unknown command" 2 "$tool" frobnicate
check "asyncpool --help" 0 "$tool" --help
is "--help says that demo runs on io_uring by default" grep -q 'demo .*io_uring' "$tmp/out"
check "asyncpool --version" 0 "$tool" --version
check "demo with an unknown option" 2 "$tool" demo --frobnicate
check "demo --threads 0" 2 "$tool" demo --threads 0
check "bench --ops x" 2 "$tool" bench --ops x
check "bench with an argument that names no case" 2 "$tool" bench extra
check "inspect without an argument" 2 "$tool" inspect
check "inspect a name that does not exist" 1 "$tool" inspect "/asyncpool-test-no-such-$$"
check "inspect a directory" 1 "$tool" inspect /
check "bench --help" 0 "$tool" bench --help
# The inline-* variants exist only where the inline paths are built (GNU C on Linux).
grep -q '^  inline-pair ' "$tmp/out" || cases=$(echo $cases | tr ' ' '\n' | grep -v '^inline-')
echo $cases | tr ' ' '\n' > "$tmp/cases"
sed -n 's/^  \([a-z0-9-]\{1,\}\) .*/\1/p' "$tmp/out" > "$tmp/help"
is "bench --help lists every case, in order" cmp -s "$tmp/cases" "$tmp/help"
missing=
for c in $cases; do
	grep -q "^\.B $(echo "$c" | sed 's/-/\\\\-/g')\$" "$man1" || missing="$missing $c"
done
is "asyncpool(1) names every case${missing:+ (missing:$missing)}" test -z "$missing"
case ${ASYNCPOOL_SANITIZER_CFLAGS:-} in
*thread*)
	# fork after threads, and memory shared with another process, are
	# outside what ThreadSanitizer models
	for i in 1 2 3; do n=$((n + 1)); echo "ok $n # SKIP bench under ThreadSanitizer"; done
	;;
*)
check "bench --json, tiny" 0 "$tool" bench --json --threads 2 --ops 256 --reps 1 --buffers 64
tr '{' '\n' < "$tmp/out" | sed -n 's/^"name":"\([^"]*\)".*/\1/p' > "$tmp/json"
# shared-2proc may be refused by the machine, xdp-* need root, a netns
# and XDP; every other case is there
grep -v '^shared-2proc\|^xdp-' "$tmp/cases" > "$tmp/local"
grep -v '^shared-2proc\|^xdp-' "$tmp/json" > "$tmp/json-local"
is "bench --json has every case, in order" cmp -s "$tmp/local" "$tmp/json-local"
is "bench --json: one object with the keys of asyncpool(1)" \
	grep -q '^{"library":"libasyncpool","version":"[^"]*","repetitions":1,"ops_per_thread":256,"cpus":[0-9]*,"results":\[{"name":"pool","threads":1,"ns_per_op":[0-9.]*,"mops_per_s":[0-9.]*,"ns_per_op_min":[0-9.]*,"ns_per_op_max":[0-9.]*,"mops_per_s_min":[0-9.]*,"mops_per_s_max":[0-9.]*},' "$tmp/out"
	;;
esac
check "bench --sweep --help" 0 "$tool" bench --sweep --help
check "bench --sweep with a case" 2 "$tool" bench --sweep pool
# operands pick cases by name or pattern, in the order of the table
check "bench two patterns, tiny" 0 "$tool" bench --json --ops 64 --reps 1 'default-*' pool
tr '{' '\n' < "$tmp/out" | sed -n 's/^"name":"\([^"]*\)".*/\1/p' | tr '\n' ' ' > "$tmp/picked"
is "bench 'default-*' pool: those seven cases, in order" \
	test "$(cat "$tmp/picked")" = "pool default-1t default-cached-1t default-2t default-cached-2t default-8t default-cached-8t "
# the channel cases and their floors, two processes each: every one runs,
# the ping-pong rows give their 99.9th percentile and round trips
check "bench 'chan-*', tiny" 0 "$tool" bench --json --ops 400 --reps 2 'chan-*'
tr '{' '\n' < "$tmp/out" | grep -c '^"name":"chan-[a-z0-9-]*","threads":2,.*"mops_per_s_max":[0-9.]*\(,"p999_ns":[0-9.]*,"round_trips":[0-9.]*\)\{0,1\}}' > "$tmp/nchan"
is "bench 'chan-*': sixteen rows, four with p999_ns" \
	sh -c 'test "$(cat "$1")" = 16 && test "$(grep -o "\"p999_ns\"" "$2" | wc -l)" = 4' sh "$tmp/nchan" "$tmp/out"
# demo --xdp (root, a netns, a veth, XDP): every frame received and checked,
# 64 sent back out and completed, all back; SKIPPED with the reason elsewhere
check "demo --xdp" 0 "$tool" demo --xdp --ops 500
if [ "$(tail -n 1 "$tmp/out")" = SKIPPED ]; then
	n=$((n + 1)); echo "ok $n # SKIP demo --xdp: $(tail -n 1 "$tmp/err")"
else
	is "demo --xdp: 500 of 500 received, 0 wrong, 64 completed, every frame back, ok" \
		sh -c 'grep -q "^500 of 500 frames received as leases, every byte checked: 0 wrong" "$1" &&
		       grep -q "^64 sent, 64 completed" "$1" &&
		       grep -q "^socket closed: 1024 of 1024 frames in the pool" "$1" &&
		       grep -q "^completions reaped: .* leased   0 | tx   0  kernel   0  completion   0 " "$1" &&
		       test "$(tail -n 1 "$1")" = ok' sh "$tmp/out"
fi
# the AF_XDP cases (root, a netns, a veth, XDP): both rows, with their ratio
# against the frame stack and the pool's cost a frame; a skip says why
"$tool" bench --json --ops 100000 --reps 1 'xdp-*' > "$tmp/out" 2> "$tmp/err"
xrc=$?
if [ $xrc -eq 0 ] && grep -q 'xdp-[a-z]*: skipped: ' "$tmp/err"; then
	for i in 1 2 3; do n=$((n + 1)); echo "ok $n # SKIP bench 'xdp-*': $(grep -m1 -o 'skipped: .*' "$tmp/err")"; done
else
	n=$((n + 1))
	if [ $xrc -eq 0 ]; then echo "ok $n - bench 'xdp-*', tiny: exit 0"; else echo "not ok $n - bench 'xdp-*', tiny: exit $xrc"; sed 's/^/# /' "$tmp/err"; fi
	tr '{' '\n' < "$tmp/out" | grep -c '^"name":"xdp-\(rxdrop\|fwd\)","threads":1,.*"pool_vs_plain_pct":[0-9.]*,"pool_cost_ns":-\{0,1\}[0-9.]*}' > "$tmp/nxdp"
	is "bench 'xdp-*': two rows with pool_vs_plain_pct and pool_cost_ns" test "$(cat "$tmp/nxdp")" = 2
	is "bench 'xdp-*': xdp-rxdrop-2q, two threads, with vs_1t_pct and queue1_pct" \
		grep -q '{"name":"xdp-rxdrop-2q","threads":2,.*"vs_1t_pct":[0-9.]*,"queue1_pct":[0-9.]*}' "$tmp/out"
fi
sed -n '/^\.SH EXIT STATUS/,/^\.SH /p' "$man1" | grep '^\.B [0-9]$' | tr -d '\n' > "$tmp/status"
is "asyncpool(1) EXIT STATUS lists 0, 1 and 2" test "$(cat "$tmp/status")" = ".B 0.B 1.B 2"

# demo --dry: 8 streams through a recv ring of 8 buffers that runs dry;
# every -ENOBUFS end is re-armed and every byte arrives (4 MiB in all).
check "demo --dry" 0 "$tool" demo --dry --mib 4
if [ "$(tail -n 1 "$tmp/out")" = SKIPPED ]; then
	for i in 1 2 3 4 5 6 7; do
		n=$((n + 1)); echo "ok $n # SKIP demo --dry: $(cat "$tmp/err")"
	done
else
	out=$tmp/out
	dry=$(sed -n 's/^ring ran dry: \([0-9]*\) times (region stats: \1)$/\1/p' "$out")
	is "demo --dry: every stream complete" grep -qx 'streams: 8 of 8 complete' "$out"
	is "demo --dry: every byte, none wrong" \
		grep -qx 'bytes: 4194304 of 4194304 received, 0 bad' "$out"
	is "demo --dry: the ring ran dry (${dry:-?} times), as the region counted" \
		test "${dry:-0}" -gt 0
	is "demo --dry: one re-arm per -ENOBUFS end" \
		grep -qx "re-arms after -ENOBUFS: ${dry:-x}" "$out"
	is "demo --dry: no stream ended by -ENOBUFS without re-arm, none otherwise" \
		sh -c 'grep -qx "streams ended by -ENOBUFS without re-arm: 0" "$1" &&
		       grep -qx "re-arms after other ends: 0" "$1"' sh "$out"
	is "demo --dry: every buffer back in the ring" grep -qx 'ring: 8/8 buffers back' "$out"
	is "demo --dry: ok" test "$(tail -n 1 "$out")" = ok
fi
