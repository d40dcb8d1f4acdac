#!/bin/sh
# examples/pipeline against socat: ingest (io_uring recv into the shared
# pool), a worker (a-z to A-Z in place), egress (SEND_ZC), two channels.
#   1. one connection: about 8 MB of text through socat and back, the
#      bytes exactly the input turned to upper case;
#   2. three connections at once, each right, egress with SEND_ZC (-z y:
#      to a client on this host it sends with a plain send by default);
#   3. the worker SIGKILLed mid-stream KILLS times (5; make check-long:
#      ASYNCPOOL_PIPELINE_KILLS) while it holds items (-d: it holds each
#      3 ms, so that most kills land on a held item) and restarted by the pipeline's parent: every byte arrives
#      exactly once and in order (the checksum), nothing duplicated, and
#      every buffer of the pool is back at the end (SEND_ZC too);
#   4. the same pipeline over Unix sockets (-u), the comparison of
#      bench/pipeline: right too.
# Everything under timeout(1).  EXAMPLES_BIN as in test-example-echo.sh.
set -u
. "${top_srcdir:-.}/tests/example-server.sh"
example_setup pipeline
kills=${ASYNCPOOL_PIPELINE_KILLS:-5}

# Text: upper-casing changes it, so a byte the worker skipped shows.
head -c 6000000 /dev/urandom | base64 > "$tmp/in"
tr a-z A-Z < "$tmp/in" > "$tmp/want"
want=$(sha256sum < "$tmp/want" | cut -c1-64)
size=$(wc -c < "$tmp/in")

# run ARGS...: start the pipeline, wait for its port (skips as the echo test)
run() {
	: > "$tmp/server"
	timeout 900 "$bin/pipeline" "$@" > "$tmp/server" 2> "$tmp/err" &
	pid=$!
	example_listen pipeline "$tmp/server"
}
through() { # the client: the input through the pipeline into $1
	timeout 200 socat -b 65536 -t 60 -T 120 - "TCP:127.0.0.1:$port" < "$tmp/in" > "$1"
}
same() { [ "$(sha256sum < "$1" | cut -c1-64)" = "$want" ]; }
finish() { # wait for the pipeline; its exit status in rc
	wait "$pid"
	rc=$?
	pid=
	cp "$tmp/server" "$tmp/out"
}

run -n 1
echo "1..17"
echo "ok 1 - pipeline listens on 127.0.0.1:$port"
n=1
through "$tmp/got"
tap_ok "$size bytes through socat and back, each a-z made A-Z, in order" same "$tmp/got"
finish
tap_ok "pipeline exits 0" test "$rc" -eq 0
tap_ok "every buffer back: 256 of 256" grep -qx 'every buffer back: 256 of 256 free' "$tmp/server"

run -n 3 -z y
clients=
for k in 1 2 3; do
	through "$tmp/got$k" &
	clients="$clients $!"
done
for c in $clients; do wait "$c"; done
for k in 1 2 3; do
	tap_ok "connection $k of 3 at once: every byte right" same "$tmp/got$k"
done
finish
tap_ok "pipeline -n 3 exits 0, every buffer back" \
	sh -c "test $rc -eq 0 && grep -qx 'every buffer back: 256 of 256 free' '$tmp/server'"

# The killed run's input: long enough for the kills (8 MB per 8 kills).
reps=$((kills / 8 + 1))
i=0
: > "$tmp/kin"
while [ $i -lt $reps ]; do cat "$tmp/in" >> "$tmp/kin"; i=$((i + 1)); done
tr a-z A-Z < "$tmp/kin" | sha256sum | cut -c1-64 > "$tmp/kwant"
ksame() { [ "$(sha256sum < "$1" | cut -c1-64)" = "$(cat "$tmp/kwant")" ]; }
run -n 1 -q 50 -d 3000 -z y
timeout 600 socat -b 65536 -t 60 -T 120 - "TCP:127.0.0.1:$port" < "$tmp/kin" > "$tmp/got" &
client=$!
k=0
while [ $k -lt "$kills" ] && kill -0 "$client" 2> /dev/null; do
	sleep 0.0$(( (k * 37) % 9 + 1))
	w=$(sed -n 's/.*worker pid \([0-9]*\)$/\1/p' "$tmp/server" | tail -n 1)
	[ -n "$w" ] && kill -KILL "$w" 2> /dev/null && k=$((k + 1))
	sleep 0.05
done
wait "$client"
finish
tap_ok "the worker SIGKILLed $k times mid-stream ($kills asked)" test "$k" -eq "$kills"
tap_ok "and restarted each time" \
	grep -q "^served 1 connections, $k worker restarts\$" "$tmp/server"
tap_ok "every byte arrives exactly once, in order, right ($(wc -c < "$tmp/kin") bytes)" \
	ksame "$tmp/got"
tap_ok "egress saw no duplicate" grep -q ' 0 duplicates$' "$tmp/server"
tap_ok "pipeline exits 0, every buffer back: 256 of 256" \
	sh -c "test $rc -eq 0 && grep -qx 'every buffer back: 256 of 256 free' '$tmp/server'"
tap_ok "what the dead workers held came back to channel 0, flagged redelivered" \
	grep -q '^channel 0: [1-9][0-9]* items redelivered after a worker died$' "$tmp/server"
sed -n 's/^\(egress:\|channel 0:\)/# killed run: \1/p' "$tmp/server"

run -u -n 1
through "$tmp/got"
tap_ok "over Unix sockets (-u): every byte right" same "$tmp/got"
finish
tap_ok "pipeline -u exits 0" test "$rc" -eq 0
tap_ok "pipeline -z x: refused, exit 1" sh -c '"$1/pipeline" -z x > /dev/null 2>&1; test $? -eq 1' sh "$bin"
