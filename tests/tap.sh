# TAP for the shell tests, sourced: tap_ok DESCRIPTION COMMAND... prints
# "ok N - DESCRIPTION" when the command succeeds, else "not ok" and, as
# comments, $tmp/out and $tmp/err (those that exist).
n=0
tap_ok() {
	desc=$1
	shift
	n=$((n + 1))
	if "$@"; then
		echo "ok $n - $desc"
	else
		echo "not ok $n - $desc"
		for f in "$tmp/out" "$tmp/err"; do
			if [ -f "$f" ]; then sed 's/^/# /' "$f"; fi
		done
	fi
}
