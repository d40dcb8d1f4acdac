#!/bin/sh
# No test leaves shared memory behind: after every other test has run
# (Makefile.am orders this one last), /dev/shm holds no object of this
# build's tests.  Tests name their objects with $ASYNCPOOL_TEST_SHM_PREFIX
# (asyncpool-test-<build dir checksum>-, set by Makefile.am).  Other
# asyncpool-test* objects may belong to another build running on the same
# machine: they fail the test only under CI, where nothing else runs.
set -u
prefix=${ASYNCPOOL_TEST_SHM_PREFIX:-asyncpool-test}
echo "1..1"
all=$(ls -A /dev/shm 2> /dev/null | grep '^asyncpool-test' || true)
ours=$(printf '%s\n' "$all" | grep "^$prefix" || true)
others=$(printf '%s\n' "$all" | grep -v "^$prefix" | grep . || true)
if [ -n "$others" ] && [ "${CI:-}" = true ]; then
	ours="$ours
$others"
	others=
fi
ours=$(printf '%s\n' "$ours" | grep . || true)
if [ -z "$ours" ]; then
	echo "ok 1 - no /dev/shm/$prefix* left by the tests"
else
	echo "not ok 1 - /dev/shm entries left by the tests"
	printf '%s\n' "$ours" | sed 's|^|# /dev/shm/|'
fi
if [ -n "$others" ]; then
	echo "# not this build's (another build on this machine?):"
	printf '%s\n' "$others" | sed 's|^|#   /dev/shm/|'
fi
