#!/bin/sh
# examples/shared-producer-consumer: producers in other processes hand
# buffers of a named shared pool to the consumer through its channels,
# one producer is SIGKILLed holding 6 buffers after it sent 2 (which are
# still delivered), and at the end every buffer is back
# (the program's own checks, and what it prints).  Under timeout(1).
# EXAMPLES_BIN as in test-example-echo.sh.
set -u
bin="${EXAMPLES_BIN:-${top_builddir:-.}/examples}"
name="/${ASYNCPOOL_TEST_SHM_PREFIX:-asyncpool-test-}$$-example"
tmp=$(mktemp -d) || exit 1
cleanup() {
	rm -f "/dev/shm$name"
	rm -rf "$tmp"
}
trap cleanup EXIT
. "${top_srcdir:-.}/tests/tap.sh"

echo "1..7"
timeout 60 "$bin/shared-producer-consumer" "$name" > "$tmp/out" 2> "$tmp/err"
rc=$?
tap_ok "shared-producer-consumer exits 0" test "$rc" -eq 0
tap_ok "a producer holding 6 buffers is killed by SIGKILL" \
	grep -q '^producer [0-9]* killed (SIGKILL)$' "$tmp/out"
tap_ok "the 2 it sent before it died are delivered" \
	grep -qx 'received 2 items the dead producer had sent' "$tmp/out"
tap_ok "every item of the 2 live producers arrives intact, in order" \
	grep -q '^consumed 10000 items of 2 producers' "$tmp/out"
tap_ok "the reclaim brings back the dead producer's buffers" \
	grep -q '^asyncpool_reclaim returned [0-9]* buffers$' "$tmp/out"
tap_ok "every buffer back: 64 of 64" grep -qx 'every buffer back: 64 of 64 free' "$tmp/out"
tap_ok "the named object is gone" test ! -e "/dev/shm$name"
sed 's/^/# /' "$tmp/out"
