# Sourced by test-example-echo.sh and test-example-file.sh: an example
# that listens on loopback and is tested against Debian's socat.
#
# example_setup PROG: skip without socat or without $bin/PROG; sets bin
#   (EXAMPLES_BIN, or examples/ of the build tree), tmp (removed at
#   exit, with the program $pid killed) and loads tests/tap.sh.
# example_listen PROG OUT: wait for $pid to print "listening on
#   127.0.0.1:PORT" into OUT (empty it before starting $pid: a stale
#   line would be read first) and set port; if it exits first, skip the
#   test (status 77: no io_uring; 125: tests/no-uring could not install
#   its seccomp filter) or fail it.
example_setup() {
	bin="${EXAMPLES_BIN:-${top_builddir:-.}/examples}"
	if ! command -v socat > /dev/null 2>&1; then
		echo "1..0 # SKIP socat is not installed (Debian package socat)"
		exit 0
	fi
	if [ ! -x "$bin/$1" ]; then
		echo "1..0 # SKIP $bin/$1 is not built (no liburing)"
		exit 0
	fi
	tmp=$(mktemp -d) || exit 1
	pid=
	trap example_cleanup EXIT
	. "${top_srcdir:-.}/tests/tap.sh"
}

example_cleanup() {
	[ -n "$pid" ] && kill -KILL "$pid" 2> /dev/null
	rm -rf "$tmp"
}

example_listen() {
	port=
	i=0
	while [ $i -lt 100 ] && [ -z "$port" ] && kill -0 "$pid" 2> /dev/null; do
		port=$(sed -n 's/^listening on 127\.0\.0\.1:\([0-9][0-9]*\)$/\1/p' "$2")
		[ -n "$port" ] || sleep 0.1
		i=$((i + 1))
	done
	[ -n "$port" ] && return 0
	wait "$pid"
	rc=$?
	pid=
	if [ "$rc" -eq 77 ]; then
		echo "1..0 # SKIP io_uring is not available: $(cat "$tmp/err")"
		exit 0
	fi
	if [ "$rc" -eq 125 ]; then      # tests/no-uring: no seccomp filter here
		echo "1..0 # SKIP $(cat "$tmp/err")"
		exit 0
	fi
	echo "1..1"
	echo "not ok 1 - $1 listens (exit status $rc)"
	sed 's/^/# /' "$2" "$tmp/err"
	exit 1
}
