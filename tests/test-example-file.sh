#!/bin/sh
# examples/file-sender against Debian's socat: a 32 MiB file of random
# bytes (an odd size, so the last buffer is partly filled) read into pool
# buffers by the kernel and sent from them must reach socat intact, and
# the sender must exit 0 (every buffer back, all torn down).  Under
# timeout(1).  EXAMPLES_BIN as in test-example-echo.sh.
set -u
bin="${EXAMPLES_BIN:-${top_builddir:-.}/examples}"
if ! command -v socat > /dev/null 2>&1; then
	echo "1..0 # SKIP socat is not installed (Debian package socat)"
	exit 0
fi
if [ ! -x "$bin/file-sender" ]; then
	echo "1..0 # SKIP $bin/file-sender is not built (no liburing)"
	exit 0
fi
tmp=$(mktemp -d) || exit 1
pid=
cleanup() {
	[ -n "$pid" ] && kill -KILL "$pid" 2> /dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
. "${top_srcdir:-.}/tests/tap.sh"

head -c 33554431 /dev/urandom > "$tmp/file"
timeout 60 "$bin/file-sender" "$tmp/file" > "$tmp/sender" 2> "$tmp/err" &
pid=$!
port=
i=0
while [ $i -lt 100 ] && [ -z "$port" ] && kill -0 "$pid" 2> /dev/null; do
	port=$(sed -n 's/^listening on 127\.0\.0\.1:\([0-9][0-9]*\)$/\1/p' "$tmp/sender")
	[ -n "$port" ] || sleep 0.1
	i=$((i + 1))
done
if [ -z "$port" ]; then
	wait "$pid"
	rc=$?
	pid=
	if [ "$rc" -eq 77 ]; then
		echo "1..0 # SKIP io_uring is not available: $(cat "$tmp/err")"
		exit 0
	fi
	echo "1..1"
	echo "not ok 1 - file-sender listens (exit status $rc)"
	sed 's/^/# /' "$tmp/sender" "$tmp/err"
	exit 1
fi
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
