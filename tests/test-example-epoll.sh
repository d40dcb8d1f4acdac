#!/bin/sh
# examples/echo-server-epoll where io_uring is refused: under the seccomp
# filter of tests/no-uring (io_uring_setup, _enter and _register answer
# EPERM, as in a container of Docker's default profile), against a
# client nobody here wrote, Debian's socat.
#
# First with -z (MSG_ZEROCOPY kept, though the kernel copies over
# loopback) and a pool of 16 buffers: two socat clients at once, each
# sending about 50 MB (a random MB-sized chunk repeated, so that a
# reordered or lost buffer changes the checksum) and reading the echo
# back; the checksums must match, and the server must exit 0 after the
# two connections with every buffer back.  Then with the defaults (the
# socket falls back to copying once the kernel keeps copying): one
# client, 20 MB.  Everything runs under timeout(1): nothing can hang.
#
# EXAMPLES_BIN names the directory of the programs, NO_URING the filter
# program (the autopkgtest builds both from the installed package and
# the source); by default, those of the build tree.
set -u
. "${top_srcdir:-.}/tests/example-server.sh"
example_setup echo-server-epoll
no_uring="${NO_URING:-${top_builddir:-.}/tests/no-uring}"

head -c 1000003 /dev/urandom > "$tmp/chunk"
gen() { # COUNT: the chunk COUNT times
	k=0
	while [ $k -lt "$1" ]; do
		cat "$tmp/chunk"
		k=$((k + 1))
	done
}
client() { # COUNT OUT: send the chunk COUNT times, the echo's checksum in OUT
	gen "$1" | timeout 100 socat -b 65536 -t 30 -T 60 - "TCP:127.0.0.1:$port" |
		sha256sum > "$2"
}

timeout 120 "$no_uring" "$bin/echo-server-epoll" -z -b 16 -n 2 > "$tmp/server" 2> "$tmp/err" &
pid=$!
example_listen echo-server-epoll "$tmp/server"
echo "1..9"
cp "$tmp/server" "$tmp/out"
tap_ok "under the seccomp filter, echo-server-epoll listens on 127.0.0.1:$port" true
tap_ok "  it found io_uring refused with EPERM, and MSG_ZEROCOPY" \
	grep -q '^backend: MSG_ZEROCOPY sockets, never falling back to copying; io_uring refused (Operation not permitted)$' "$tmp/server"

client 50 "$tmp/a" &
a=$!
client 55 "$tmp/b"
wait "$a"
tap_ok "two socat clients at once: 50000150 and 55000165 bytes back intact" \
	test "$(cat "$tmp/a")" = "$(gen 50 | sha256sum)" -a "$(cat "$tmp/b")" = "$(gen 55 | sha256sum)"
wait "$pid"
rc=$?
pid=
cp "$tmp/server" "$tmp/out"
tap_ok "echo-server-epoll exits 0 after the two connections" test "$rc" -eq 0
tap_ok "  it echoed 105000315 bytes, in MSG_ZEROCOPY sends all complete" \
	grep -Eq '^served 2 connections: 105000315 bytes echoed; [1-9][0-9]* MSG_ZEROCOPY sends, all complete' "$tmp/server"
tap_ok "  every buffer back in the pool" grep -qx 'every buffer back: 16/16' "$tmp/server"
sed -n 's/^\(served\|short\)/# \1/p' "$tmp/server"

# Empty the file here, not only in the background job's redirection:
# example_listen must not read the first server's port from it before
# the job has truncated it.
: > "$tmp/server"
timeout 120 "$no_uring" "$bin/echo-server-epoll" -n 1 > "$tmp/server" 2> "$tmp/err" &
pid=$!
example_listen echo-server-epoll "$tmp/server"
client 20 "$tmp/a"
tap_ok "defaults: 20000060 bytes through socat and back intact" \
	test "$(cat "$tmp/a")" = "$(gen 20 | sha256sum)"
wait "$pid"
rc=$?
pid=
cp "$tmp/server" "$tmp/out"
tap_ok "  echo-server-epoll exits 0" test "$rc" -eq 0
tap_ok "  every buffer back in the pool" grep -qx 'every buffer back: 64/64' "$tmp/server"
sed -n 's/^\(served\|short\)/# \1/p' "$tmp/server"
