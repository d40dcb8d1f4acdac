#!/bin/sh
# asyncpool inspect and asyncpool reclaim on a real shared pool (issue
# 11).  Two processes (tests/shared-peer hold) open a named pool of 32
# buffers: one stays alive with 2 leased and 1 cached, the other holds 5
# leased and 3 cached and is SIGKILLed.  inspect (text and --json) must
# show exactly that attachment as dead with exactly those counts; the
# first reclaim (default quarantine) brings back the 3 cached and says
# the 5 leased wait; `reclaim --quarantine 0` brings back the 5; once the
# live one has released and left, every buffer is free and nothing is
# attached.  Then bad input: exact exit status and message.
set -u
tool="${top_builddir:-.}/tools/asyncpool"
peer="${top_builddir:-.}/tests/shared-peer"
name="/${ASYNCPOOL_TEST_SHM_PREFIX:-asyncpool-test-}$$-toolreclaim"
tmp=$(mktemp -d) || exit 1
live= victim=
cleanup() {
	exec 3>&- 4>&-
	[ -n "$live" ] && kill -KILL "$live" 2> /dev/null
	[ -n "$victim" ] && kill -KILL "$victim" 2> /dev/null
	rm -f "/dev/shm$name"
	rm -rf "$tmp"
}
trap cleanup EXIT
. "${top_srcdir:-.}/tests/tap.sh"
run() { # COMMAND...: its output in out and err, its status in $rc
	"$@" > "$tmp/out" 2> "$tmp/err" < /dev/null
	rc=$?
}
line() { # PATTERN: out has exactly one line that matches it
	test "$(grep -c -- "$1" "$tmp/out")" -eq 1
}
# The field of the JSON object that has "pid":PID, or of the top level.
json_of() { # PID|- FIELD
	if [ "$1" = - ]; then
		sed 's/"attachments":.*//' "$tmp/out"
	else
		tr '{' '\n' < "$tmp/out" | grep "^\"slot\":[0-9]*,\"pid\":$1,"
	fi | sed -n "s/.*\"$2\":\([^,}]*\).*/\1/p"
}
# Start a holder of L leased and C cached buffers with its stdin on
# descriptor FD of this shell, and wait until it holds them.  The wait
# is bounded by a failure bound, not a measure: a holder is ready in
# milliseconds, so one not ready after $ready_s s (60, or the tests'
# watchdog bound $ASYNCPOOL_TEST_WATCHDOG) never will be.
ready_s=${ASYNCPOOL_TEST_WATCHDOG:-60}
start_holder() { # FD L C -> $pid
	mkfifo "$tmp/in$1"
	"$peer" - hold "$name" "$2" "$3" < "$tmp/in$1" > "$tmp/ready$1" &
	pid=$!
	eval "exec $1> \"\$tmp/in$1\""
	i=0
	while ! grep -q '^ready' "$tmp/ready$1" && [ $i -lt $((ready_s * 100)) ]; do
		sleep 0.01
		i=$((i + 1))
	done
	grep -q "^ready $pid\$" "$tmp/ready$1"
}

echo "1..34"
"$peer" - create "$name" 32
tap_ok "a named pool of 32 buffers" test $? -eq 0
start_holder 3 2 1
tap_ok "a live process holds 2 leased and 1 cached" test $? -eq 0
live=$pid
start_holder 4 5 3
tap_ok "another holds 5 leased and 3 cached" test $? -eq 0
victim=$pid
{ kill -KILL "$victim"; wait "$victim"; } 2> /dev/null
victim_was=$victim
victim=
cp "/dev/shm$name" "$tmp/before"

run "$tool" inspect "$name"
tap_ok "inspect: exit 0, consistent (a dead process's buffers are not lost)" \
	test $rc -eq 0 -a "$(tail -n 1 "$tmp/out")" = "freelist:        consistent"
tap_ok "inspect: two attachments" line '^attachments: *2$'
tap_ok "inspect: the killed one is dead with 5 leased and 3 cached" \
	line "^attachment: *slot [0-9]* pid $victim_was dead leased 5 cached 3\$"
tap_ok "inspect: the other is alive with 2 leased and 1 cached" \
	line "^attachment: *slot [0-9]* pid $live alive leased 2 cached 1\$"
tap_ok "inspect: only one attachment is dead" line ' dead '
tap_ok "inspect: 7 leased, 4 cached, 21 available (on the freelist)" \
	sh -c "grep -q '^leased: *7\$' '$tmp/out' && grep -q '^cached: *4 ' '$tmp/out' &&
	       grep -q '^available: *21 (on the freelist)\$' '$tmp/out'"

run "$tool" inspect --json "$name"
tap_ok "inspect --json: exit 0, one line" test $rc -eq 0 -a "$(wc -l < "$tmp/out")" -eq 1
tap_ok "inspect --json: consistent" test "$(json_of - verdict)" = '"consistent"'
tap_ok "inspect --json: 7 leased, 4 cached, 21 available, 32 capacity" \
	test "$(json_of - leased) $(json_of - cached) $(json_of - available) $(json_of - capacity)" = \
	"7 4 21 32"
tap_ok "inspect --json: the killed one dead, 5 leased, 3 cached" \
	test "$(json_of "$victim_was" state) $(json_of "$victim_was" leased) $(json_of "$victim_was" cached)" = \
	'"dead" 5 3'
tap_ok "inspect --json: the other alive, 2 leased, 1 cached" \
	test "$(json_of "$live" state) $(json_of "$live" leased) $(json_of "$live" cached)" = \
	'"alive" 2 1'
tap_ok "inspect --json: two attachments" test "$(tr '{' '\n' < "$tmp/out" | grep -c '^"slot"')" -eq 2
tap_ok "inspect wrote nothing, did not attach (the object is byte for byte the same)" \
	cmp -s "$tmp/before" "/dev/shm$name"

# The default quarantine keeps the leased ones out: only the cached come back.
run "$tool" reclaim "$name"
tap_ok "reclaim: exit 0" test $rc -eq 0
tap_ok "reclaim: the 3 cached came back" line '^reclaimed: *3 buffers$'
tap_ok "reclaim: the 5 leased wait for the quarantine" \
	line '^quarantine: *5 leased buffers of dead processes, back with a reclaim in [1-9][0-9]* ms$'
run "$tool" inspect "$name"
tap_ok "inspect: the dead one holds 5 leased, 0 cached, found dead" \
	line "^attachment: *slot [0-9]* pid $victim_was dead leased 5 cached 0 found dead [0-9]* ms ago\$"
run "$tool" reclaim --quarantine 0 "/dev/shm$name"
tap_ok "reclaim --quarantine 0 FD-PATH: exit 0, the 5 leased came back" \
	test $rc -eq 0 -a "$(cat "$tmp/out")" = "reclaimed:       5 buffers"
run "$tool" inspect --json "$name"
tap_ok "inspect --json: only the live attachment left, 2 leased, 1 cached" \
	test "$(tr '{' '\n' < "$tmp/out" | grep -c '^"slot"') $(json_of - leased) $(json_of - cached)" = \
	"1 2 1"

# The live one releases and leaves: everything is free.
exec 3>&-
wait "$live"
tap_ok "the live process released and left (exit 0)" test $? -eq 0
live=
run "$tool" inspect "$name"
tap_ok "inspect: consistent, 32 available, 0 leased, 0 cached, no attachment" \
	sh -c "test $rc -eq 0 && grep -q '^available: *32 (on the freelist)\$' '$tmp/out' &&
	       grep -q '^leased: *0\$' '$tmp/out' && grep -q '^cached: *0 ' '$tmp/out' &&
	       grep -q '^attachments: *0\$' '$tmp/out' && ! grep -q '^attachment:' '$tmp/out' &&
	       grep -q '^freelist: *consistent\$' '$tmp/out'"
run "$tool" inspect --json "$name"
tap_ok "inspect --json: the same" \
	test "$rc $(json_of - verdict) $(json_of - available) $(json_of - free) $(json_of - leased) $(json_of - cached)" = \
	'0 "consistent" 32 32 0 0'
tap_ok "inspect --json: attachments []" grep -q '"attachments":\[\]}$' "$tmp/out"
run "$tool" reclaim "$name"
tap_ok "reclaim of a clean pool: 0 buffers, exit 0" \
	test $rc -eq 0 -a "$(cat "$tmp/out")" = "reclaimed:       0 buffers"

# Bad input.
run "$tool" reclaim "$name-missing"
tap_ok "reclaim a missing name: exit 1" test $rc -eq 1
tap_ok "  says so" test "$(cat "$tmp/err")" = \
	"asyncpool: $name-missing: cannot open the pool: No such file or directory"
yes 'not a pool' | head -c 4096 > "$tmp/text"
run "$tool" reclaim "$tmp/text"
tap_ok "reclaim a file that is no pool: exit 1" test $rc -eq 1
tap_ok "  says EPROTO" test "$(cat "$tmp/err")" = \
	"asyncpool: $tmp/text: cannot open the pool: EPROTO (no pool magic)"
run "$tool" inspect --json "$tmp/text"
tap_ok "inspect --json a file that is no pool: exit 1, invalid, EPROTO" \
	test "$rc $(json_of - verdict) $(json_of - error)" = '1 "invalid" "EPROTO (no pool magic)"'
run "$tool" reclaim
tap_ok "reclaim without a pool: exit 2" test $rc -eq 2
run "$tool" reclaim --quarantine soon "$name"
tap_ok "reclaim --quarantine soon: exit 2, says the range" \
	test "$rc $(cat "$tmp/err")" = "2 asyncpool: --quarantine takes a number from 0 to 4294967295"
