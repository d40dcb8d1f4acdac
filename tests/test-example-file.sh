#!/bin/sh
# examples/file-sender against Debian's socat: a 32 MiB file of random
# bytes (an odd size, so the last buffer is partly filled) read into pool
# buffers by the kernel and sent from them must reach socat intact, and
# the sender must exit 0 (every buffer back, all torn down).  Under
# timeout(1).  EXAMPLES_BIN as in test-example-echo.sh.
set -u
. "${top_srcdir:-.}/tests/example-server.sh"
example_setup file-sender

head -c 33554431 /dev/urandom > "$tmp/file"
timeout 60 "$bin/file-sender" "$tmp/file" > "$tmp/sender" 2> "$tmp/err" &
pid=$!
example_listen file-sender "$tmp/sender"
echo "1..3"
echo "ok 1 - file-sender listens on 127.0.0.1:$port"
n=1
want=$(sha256sum < "$tmp/file")
got=$(timeout 50 socat -u "TCP:127.0.0.1:$port" - | sha256sum)
tap_ok "33554431 bytes of the file reach socat, checksum $(echo "$want" | cut -c1-16)..." \
	test "$got" = "$want"
wait "$pid"
rc=$?
pid=
cp "$tmp/sender" "$tmp/out"
tap_ok "file-sender exits 0 after sending it all: every buffer back, all torn down" \
	sh -c "test $rc -eq 0 && grep -qx 'sent 33554431 bytes' '$tmp/sender'"
