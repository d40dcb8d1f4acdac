#!/bin/sh
# examples/echo-server against a client nobody here wrote: Debian's socat
# sends about 100 MB (a random MB-sized chunk 105 times, so that a
# reordered or lost buffer changes the checksum) to the server on
# loopback and reads the echo back; the checksums must match, and the
# server must exit 0 after the connection (every send buffer back, pool,
# regions, proactors and rings torn down).  Everything runs under
# timeout(1): nothing here can hang.
#
# EXAMPLES_BIN names the directory of the programs (the autopkgtest
# builds them from the installed package); by default, examples/ of the
# build tree.
set -u
. "${top_srcdir:-.}/tests/example-server.sh"
example_setup echo-server

timeout 120 "$bin/echo-server" -t 2 -n 1 > "$tmp/server" 2> "$tmp/err" &
pid=$!
example_listen echo-server "$tmp/server"
echo "1..4"
echo "ok 1 - echo-server listens on 127.0.0.1:$port"
n=1

head -c 1000003 /dev/urandom > "$tmp/chunk"
gen() {
	k=0
	while [ $k -lt 105 ]; do
		cat "$tmp/chunk"
		k=$((k + 1))
	done
}
want=$(gen | sha256sum)
got=$(gen | timeout 100 socat -b 65536 -t 30 -T 60 - "TCP:127.0.0.1:$port" | sha256sum)
tap_ok "105000315 bytes through socat and back, checksum $(echo "$want" | cut -c1-16)..." \
	test "$got" = "$want"
wait "$pid"
rc=$?
pid=
cp "$tmp/server" "$tmp/out"
tap_ok "echo-server exits 0 after the connection: every buffer back, all torn down" \
	test "$rc" -eq 0
tap_ok "echo-server echoed 105000315 bytes" \
	grep -q '^served 1 connections: 105000315 bytes echoed' "$tmp/server"
sed -n 's/^served/# served/p' "$tmp/server"
