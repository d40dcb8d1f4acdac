#!/bin/sh
# asyncpool inspect's cosmetics (issue 21, item 9).  A named pool of 16
# buffers; a holder in another PID namespace (unshare --pid: it is PID 1
# there, and its record says 1) must be shown as "pid unknown" (JSON
# "pid":null with "pid_recorded":1), never as this namespace's PID 1; a
# holder in this namespace keeps its PID.  With every buffer leased the
# head is "empty" (JSON "head_index":null, "head_empty":true), never
# index 4294967295.  The namespace cases skip where unshare is refused.
set -u
tool="${top_builddir:-.}/tools/asyncpool"
peer="${top_builddir:-.}/tests/shared-peer"
name="/${ASYNCPOOL_TEST_SHM_PREFIX:-asyncpool-test-}$$-toolinspect"
tmp=$(mktemp -d) || exit 1
here= there=
cleanup() {
	exec 3>&- 4>&-
	[ -n "$here" ] && kill -KILL "$here" 2> /dev/null
	[ -n "$there" ] && kill -KILL "$there" 2> /dev/null
	rm -f "/dev/shm$name"
	rm -rf "$tmp"
}
trap cleanup EXIT
. "${top_srcdir:-.}/tests/tap.sh"
run() {
	"$@" > "$tmp/out" 2> "$tmp/err" < /dev/null
	rc=$?
}
line() {
	test "$(grep -c -- "$1" "$tmp/out")" -eq 1
}
has() {
	grep -q -- "$1" "$tmp/out"
}
# Start COMMAND... holding buffers, stdin on descriptor FD; wait until ready.
start() { # FD COMMAND... -> $pid, $said (the PID it printed)
	fd=$1
	shift
	mkfifo "$tmp/in$fd"
	"$@" < "$tmp/in$fd" > "$tmp/ready$fd" 2> "$tmp/err$fd" &
	pid=$!
	eval "exec $fd> \"\$tmp/in$fd\""
	i=0
	while ! grep -q '^ready' "$tmp/ready$fd" && [ $i -lt 2000 ] && kill -0 $pid 2> /dev/null; do
		sleep 0.01
		i=$((i + 1))
	done
	said=$(sed -n 's/^ready //p' "$tmp/ready$fd")
	test -n "$said"
}

echo "1..12"
"$peer" - create "$name" 16
tap_ok "a named pool of 16 buffers" test $? -eq 0

run "$tool" inspect "$name"
tap_ok "a free pool: the head is an index" line '^head: *index 0, tag 0$'

start 3 "$peer" - hold "$name" 8 0
tap_ok "a holder in this PID namespace leases 8" test $? -eq 0
here=$pid
if unshare --pid --fork true 2> /dev/null; then
	start 4 unshare --pid --fork "$peer" - hold "$name" 8 0
	ok=$?
	there=$pid
	tap_ok "a holder in another PID namespace leases 8 (it says it is PID $said)" \
		test $ok -eq 0 -a "$said" = 1
	run "$tool" inspect "$name"
	tap_ok "inspect: exit 0" test $rc -eq 0
	tap_ok "the other namespace's holder: pid unknown, not pid 1" \
		sh -c "grep -q '^attachment: .* pid unknown alive leased 8 cached 0\$' '$tmp/out' &&
		       ! grep -q ' pid 1 ' '$tmp/out'"
	tap_ok "this namespace's holder: its PID" \
		line "^attachment: .* pid $here alive leased 8 cached 0\$"
	tap_ok "every buffer leased: the head is empty" line '^head: *empty, tag [0-9]*$'
	tap_ok "never index 4294967295" sh -c "! grep -q 4294967295 '$tmp/out'"
	run "$tool" inspect --json "$name"
	tap_ok "--json: the other namespace's holder has pid null, pid_recorded 1" \
		has '"pid":null,"pid_recorded":1,"state":"alive","leased":8'
	tap_ok "--json: this namespace's holder has its pid" \
		has "\"pid\":$here,\"pid_recorded\":$here,\"state\":\"alive\""
	tap_ok "--json: head_index null, head_empty true" \
		sh -c "grep -q '\"head_empty\":true' '$tmp/out' && grep -q '\"head_index\":null' '$tmp/out' &&
		       ! grep -q 4294967295 '$tmp/out'"
else
	for i in 4 5 6 7 8 9 10 11 12; do
		echo "ok $i # SKIP unshare --pid is refused here"
	done
fi
