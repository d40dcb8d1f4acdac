#!/bin/sh
# bench/pipeline/run.sh [BUILD_DIR]: examples/pipeline over channels beside
# the same pipeline over Unix sockets (-u), same machine, same run,
# alternating: saturated throughput (one connection, MIB MiB each way) and
# paced round trips (RATE 64-byte messages a second, one in flight).
# ROUNDS (3), MIB (256), RATE (2000), MSGS (10000) from the environment.
# PIPE_CPUS / CLIENT_CPUS: taskset CPU lists for the pipeline's processes
# and for the client (default: unpinned); e.g. PIPE_CPUS=1 CLIENT_CPUS=0
# keeps the stages' hand-offs on one CPU (doc/performance.md, 1.12).
# Quote `uptime` beside the figures: the machine's other load moves them.
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$top}
rounds=${ROUNDS:-3} mib=${MIB:-256} rate=${RATE:-2000} msgs=${MSGS:-10000}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cc -O2 -Wall -Wextra -o "$tmp/client" "$top/bench/pipeline/client.c" -lpthread
export LD_LIBRARY_PATH="$build/lib/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
pipeline="$build/examples/pipeline"
[ -x "$build/examples/.libs/pipeline" ] && pipeline="$build/examples/.libs/pipeline"

one() { # MODE-ARGS -- CLIENT-ARGS: one pipeline, one client run
	args=$1
	shift
	: > "$tmp/out"
	# shellcheck disable=SC2086
	${PIPE_CPUS:+taskset -c "$PIPE_CPUS"} "$pipeline" -n 1 $args > "$tmp/out" 2> "$tmp/err" &
	p=$!
	i=0
	while ! grep -q '^listening' "$tmp/out" && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
	port=$(sed -n 's/^listening on 127\.0\.0\.1:\([0-9]*\)$/\1/p' "$tmp/out")
	${CLIENT_CPUS:+taskset -c "$CLIENT_CPUS"} "$tmp/client" "$port" "$@"
	wait "$p"
}
echo "# $(uname -r), $(nproc) CPUs; pipeline on CPUs ${PIPE_CPUS:-any}, client on ${CLIENT_CPUS:-any}; uptime: $(uptime)"
r=1
while [ "$r" -le "$rounds" ]; do
	printf 'round %d channels: ' "$r"; one "" sat "$mib"
	printf 'round %d unix:     ' "$r"; one "-u" sat "$mib"
	printf 'round %d channels: ' "$r"; one "" paced "$rate" "$msgs"
	printf 'round %d unix:     ' "$r"; one "-u" paced "$rate" "$msgs"
	r=$((r + 1))
done
echo "# uptime after: $(uptime)"
