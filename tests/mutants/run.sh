#!/bin/bash
# SPDX-License-Identifier: MIT
#
# make check-mutants: prove that the tests catch each invariant broken.
#
# Each tests/mutants/NAME.mutant is one small change to one file of lib/
# (or of include/asyncpool/, whose inline code the programs compile):
# its exact original text (found exactly once in the file, or the mutant
# is STALE), its replacement, and the tests that must catch it.  For each
# mutant this script, in one configured scratch copy of the tree:
#   applies it, rebuilds only the library, its test-hook build and the
#   catching tests (make reuses every object file the change does not
#   touch), runs the catching tests one by one, then reverts the file.
# A mutant is caught when a catching test fails: a "not ok" that is not
# a TODO (an expected failure is no failure), a "Bail out!" (its
# watchdog, tests/tap.h) or a non-zero exit; and fails again when run a
# second time: a catch that does not repeat (a race that one run wins
# and the next loses) is no catch, the next test is tried, and a mutant
# no test catches twice survives ("caught once only by").  Tests that
# draw random choices name a fixed seed (tests/testutil.h, test_seed()),
# so that a second run draws the same ones.  A test killed by the outer
# time limit is NOT caught: a hang that only that limit ends would hang
# make check.  A catch proves something only if the test passes without
# the mutant, and names a test that exists, so, once per run, before
# any mutant:
#   every test a mutant names must exist (a script tests/NAME.sh, or a
#   program make knows how to build): a mutant that names a missing
#   one is an error, never a catch;
#   the baseline: every named test is run on the unmutated scratch
#   tree, and must pass; one that fails (or hangs) there fails the run
#   ("Bail out!"), as it could catch nothing.
# A mutant with "sanitizer: thread" in its header (a barrier that only
# ThreadSanitizer sees broken on x86: a release or acquire made relaxed)
# is applied, built and run in a second scratch tree, configured with
# --enable-sanitizers=thread (TSAN_OPTIONS halt_on_error=1, exitcode=66:
# a race report is a failure), and its tests' baseline runs there; the
# tests see ASYNCPOOL_MUTANT_SANITIZER=thread.  No other value is known
# (malformed).
# The script prints one TAP line per mutant, then "N passed, N failed"
# (caught; survived, stale, naming a missing test, or not building),
# and exits 1 if any mutant failed.
# tests/test-mutants-runner.sh runs it on a fake tree to show that these
# rules hold.
#
# The tree is listed by git (a checkout), or by the .dist-files that
# make dist writes into a release tarball: make check-mutants runs from
# either, and from nothing else ("cannot list the tree").
#
# Usage: run.sh [NAME...]        (default: every mutant)
# Environment:
#   ASYNCPOOL_MUTANTS=ci         only the mutants marked "ci: yes"
#   ASYNCPOOL_MUTANTS_SCRATCH    the scratch tree (default: mutants-scratch
#                                in the build directory; kept between runs)
#   ASYNCPOOL_MUTANTS_SCRATCH_TSAN  the ThreadSanitizer one (default:
#                                tsan-tree in the scratch tree)
#   ASYNCPOOL_TEST_WATCHDOG      the tests' watchdog, seconds (default 60)
#   ASYNCPOOL_MUTANT_TIMEOUT     the outer limit per test, seconds (default
#                                twice the watchdog)
#   ASYNCPOOL_MUTANTS_JOBS       make -j, and the baseline's tests run at
#                                once (default 2)
set -u
LC_ALL=C
# The whole script is one compound command, parsed before it runs: an
# edit of this file during a run does not change the run.
{
export LC_ALL

srcdir=$(cd "${top_srcdir:-$(dirname "$0")/../..}" && pwd)
builddir=$(pwd)
scratch=${ASYNCPOOL_MUTANTS_SCRATCH:-$builddir/mutants-scratch}
tsan_tree=${ASYNCPOOL_MUTANTS_SCRATCH_TSAN:-$scratch/tsan-tree}
jobs=${ASYNCPOOL_MUTANTS_JOBS:-2}
export ASYNCPOOL_TEST_WATCHDOG=${ASYNCPOOL_TEST_WATCHDOG:-60}
limit=${ASYNCPOOL_MUTANT_TIMEOUT:-$((2 * ASYNCPOOL_TEST_WATCHDOG))}
export ASYNCPOOL_TEST_SHM_PREFIX="asyncpool-mutant-$$-"
export top_srcdir=. top_builddir=.
# (as Makefile.am's sanitizer builds: a report stops the test, exit 66)
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1:exitcode=66}
tsan_mode=

die() { echo "Bail out! $*"; exit 1; }
command -v perl > /dev/null || die "check-mutants needs perl"
command -v timeout > /dev/null && command -v setsid > /dev/null ||
	die "check-mutants needs timeout(1) and setsid(1)"

# prepare_tree DIR [CONFIGURE-ARGS]: DIR made a configured, built copy
# of the tree (the scratch tree, or the ThreadSanitizer one); the shell
# is left in DIR.
prepare_tree() {
	local tree=$1 conf=${2:-}
	# The scratch tree: this tree's tracked and new files, copied with their
	# times (so that make rebuilds only what changed since the last run),
	# configured once.
	mkdir -p "$tree" || die "cannot make $tree"
	rm -rf "$tree/tests/mutants"
	# A run killed while a mutant was applied left its file mutated: the copy
	# below restores it, with its old time, so mark it to be rebuilt.
	for o in "$tree"/lib/*.mutant-orig "$tree"/include/asyncpool/*.mutant-orig; do
		[ -e "$o" ] || continue
		echo "${o#"$tree"/}" | sed 's/\.mutant-orig$//' >> "$tree/.mutant-dirty"
		rm -f "$o"
	done
	if [ -e "$srcdir/.git" ]; then
		command -v git > /dev/null || die "check-mutants lists a git checkout with git"
		git -C "$srcdir" ls-files -co --exclude-standard -z > "$tree/.mutant-files" ||
			die "cannot list the tree"
	elif [ -f "$srcdir/.dist-files" ]; then
		# a release tarball: what make dist put there (Makefile.am, dist-hook)
		tr '\n' '\0' < "$srcdir/.dist-files" > "$tree/.mutant-files" ||
			die "cannot list the tree"
	else
		die "cannot list the tree: neither a git checkout nor a release tarball (.dist-files)"
	fi
	# What the scratch tree is built from: a checksum per file.  A file whose
	# text differs from what the last build saw may still be older than its
	# objects (edited during a run, whose reverts touched the copy since):
	# make it newer, so that make rebuilds it.  No record: everything.
	(cd "$srcdir" && xargs -0 cksum < "$tree/.mutant-files") > "$tree/.mutant-sums.new" ||
		die "cannot read the tree"
	(cd "$srcdir" && tar --null -T "$tree/.mutant-files" -c) | tar -x -C "$tree" ||
		die "cannot copy the tree to $tree"
	cd "$tree" || die "cd $tree"
	if [ -f .mutant-sums ]; then
		awk 'NR == FNR { built[$0] = 1; next } !($0 in built) { print $3 }' \
			.mutant-sums .mutant-sums.new
	else
		awk '{ print $3 }' .mutant-sums.new
	fi | xargs -r touch
	# Files a run reverted but did not rebuild (it was interrupted): the copy
	# above gave them their old times back, so make them newer than their
	# objects.
	if [ -f .mutant-dirty ]; then
		xargs -r touch < .mutant-dirty
		rm -f .mutant-dirty
	fi
	if [ ! -f config.status ]; then
		echo "# configuring the scratch tree $tree${conf:+ ($conf)}"
		# (a tarball has its configure; a checkout makes it)
		{ { [ -x configure ] || ./bootstrap; } && ./configure -q $conf; } > mutants-configure.log 2>&1 ||
			die "configure failed: $tree/mutants-configure.log"
	fi
	echo "# building the scratch tree${conf:+ ($conf)}"
	make -j"$jobs" > mutants-build.log 2>&1 &&
		make -j"$jobs" check TESTS= >> mutants-build.log 2>&1 ||
		die "the unmutated tree does not build: $tree/mutants-build.log"
	mv -f .mutant-sums.new .mutant-sums
}
prepare_tree "$scratch"
mdir=$scratch/tests/mutants

# The mutants to run, read from the copy (edits to them during a run
# do not change it).
names=()
if [ $# -gt 0 ]; then
	names=("$@")
else
	for f in "$mdir"/*.mutant; do
		n=$(basename "$f" .mutant)
		if [ "${ASYNCPOOL_MUTANTS:-all}" = ci ] &&
		   ! grep -qx 'ci: *yes' "$f"; then
			continue
		fi
		names+=("$n")
	done
fi
[ ${#names[@]} -gt 0 ] || die "no mutants in $mdir"

# field NAME FILE: the value of "NAME: value" in the header of FILE.
field() {
	sed -n "/^--- original/q; s/^$1: *//p" "$2" | head -n 1
}

# text SECTION FILE: the lines of the section, exactly.
text() {
	awk -v want="$1" '
		/^--- (original|replacement|end)$/ { sect = substr($0, 5); next }
		sect == want { print }' "$2"
}

# reports_failure LOG: whether the TAP of LOG reports a failure: a
# "Bail out!", or a "not ok" without a TODO directive ("not ok 3 - x #
# TODO why" is an expected failure: it proves nothing).
reports_failure() {
	grep -q '^Bail out!' "$1" && return 0
	grep '^not ok' "$1" | grep -qviE '#[[:space:]]*todo([^[:alnum:]]|$)'
}

# missing_test T: whether T names no test of the tree: a script that is
# not there, or a program that make has no rule for.
missing_test() {
	case $1 in
	*.sh) [ ! -f "$1" ] ;;
	*) ! make -n "$1" > /dev/null 2>&1 ;;
	esac
}

# ap_tsan_env: in the ThreadSanitizer tree, what its tests see (the
# stress sizes scaled down, as Makefile.am's sanitizer builds do).
ap_tsan_env() {
	if [ -n "$tsan_mode" ]; then
		export ASYNCPOOL_MUTANT_SANITIZER=thread
		export ASYNCPOOL_STRESS_ITERATIONS=${ASYNCPOOL_STRESS_ITERATIONS:-20000}
	fi
}

# run_test T LOG: 0 if test T failed (caught), 1 if it passed, 2 if only
# the outer limit stopped it.  A test that has reported a failure is
# stopped there: the rest of its run cannot undo it, and a mutant often
# turns the rest into a long spin.  Its shm objects are named with the
# prefix of this run and T, and removed after it.
run_test() {
	local t=$1 log=$2 rc pid reported= prefix
	prefix="$ASYNCPOOL_TEST_SHM_PREFIX$(basename "$t")-"
	# its own session, so that its children go with it
	case $t in
	*.sh) (ap_tsan_env; ASYNCPOOL_TEST_SHM_PREFIX=$prefix \
	       exec setsid timeout -k 5 "$limit" "${BASH:-bash}" "$t") > "$log" 2>&1 & ;;
	*) (ap_tsan_env; ASYNCPOOL_TEST_SHM_PREFIX=$prefix \
	    exec setsid timeout -k 5 "$limit" "./$t") > "$log" 2>&1 & ;;
	esac
	pid=$!
	while kill -0 "$pid" 2> /dev/null; do
		if reports_failure "$log"; then
			reported=1
			kill -TERM -- "-$pid" 2> /dev/null
			break
		fi
		sleep 0.2
	done
	wait "$pid" 2> /dev/null       # (not "Segmentation fault" here: rc says it)
	rc=$?
	# A test that survived SIGTERM (a handler that waits for a spinning
	# thread) must not run on: one did for 20 minutes, at 120% CPU.
	kill -KILL -- "-$pid" 2> /dev/null
	rm -f /dev/shm/"$prefix"* 2> /dev/null
	[ -n "$reported" ] && return 0
	if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
		return 2
	fi
	if [ $rc -ne 0 ] || reports_failure "$log"; then
		return 0
	fi
	return 1
}

cleanup() {
	if [ -n "${cur_file:-}" ] && [ -f "$cur_file.mutant-orig" ]; then
		mv -f "$cur_file.mutant-orig" "$cur_file"
		touch "$cur_file"
		echo "$cur_file" >> .mutant-dirty
	fi
}
trap 'cleanup; exit 130' INT TERM HUP

total_start=$(date +%s)
# Every test named must exist; the tests of the mutants that name only
# existing ones make the baseline.
declare -A absent=()
baseline=() baseline_tsan=()
for n in "${names[@]}"; do
	[ -f "$mdir/$n.mutant" ] || continue
	for t in $(field tests "$mdir/$n.mutant"); do
		if missing_test "$t"; then
			absent[$n]="${absent[$n]:-}${absent[$n]:+ }$t"
		fi
	done
	[ -n "${absent[$n]:-}" ] && continue
	case $(field sanitizer "$mdir/$n.mutant") in
	'')
		for t in $(field tests "$mdir/$n.mutant"); do
			case " ${baseline[*]} " in *" $t "*) ;; *) baseline+=("$t") ;; esac
		done ;;
	thread)
		for t in $(field tests "$mdir/$n.mutant"); do
			case " ${baseline_tsan[*]} " in *" $t "*) ;; *) baseline_tsan+=("$t") ;; esac
		done ;;
	esac
done

# run_baseline LABEL T...: each named test, unmutated, must pass, in the
# tree the shell is in.  $jobs at once.
run_baseline() {
	local label=$1 start bad b running t
	shift
	local -a bl=("$@")
	echo "# baseline$label: ${#bl[@]} tests on the unmutated tree"
	start=$(date +%s)
	# shellcheck disable=SC2046
	make -j"$jobs" $(for t in "${bl[@]}"; do case $t in *.sh) ;; *) echo "$t" ;; esac; done) \
		> mutants-baseline.build.log 2>&1 ||
		die "baseline: the named tests do not build: $PWD/mutants-baseline.build.log"
	rm -f mutants-baseline.*.verdict
	running=0
	for t in "${bl[@]}"; do
		if [ "$running" -ge "$jobs" ]; then
			wait -n
			running=$((running - 1))
		fi
		b=mutants-baseline.$(basename "$t")
		( run_test "$t" "$b.log" 2> /dev/null; echo $? > "$b.verdict" ) &
		running=$((running + 1))
	done
	wait
	bad=0
	for t in "${bl[@]}"; do
		b=mutants-baseline.$(basename "$t")
		case $(cat "$b.verdict" 2> /dev/null) in
		1) ;;
		2) echo "# baseline$label: $t hangs without any mutant ($PWD/$b.log)"; bad=$((bad + 1)) ;;
		*) echo "# baseline$label: $t fails without any mutant ($PWD/$b.log)"; bad=$((bad + 1)) ;;
		esac
	done
	[ "$bad" -eq 0 ] ||
		die "baseline: $bad of ${#bl[@]} named tests fail on the unmutated tree: they cannot prove anything"
	echo "# baseline$label: all ${#bl[@]} pass ($(( $(date +%s) - start )) s)"
}
[ ${#baseline[@]} -eq 0 ] || run_baseline "" "${baseline[@]}"
# The ThreadSanitizer tree, only if a mutant needs it.
if [ ${#baseline_tsan[@]} -gt 0 ]; then
	prepare_tree "$tsan_tree" --enable-sanitizers=thread
	tsan_mode=1
	run_baseline " (thread)" "${baseline_tsan[@]}"
	tsan_mode=
	cd "$scratch" || die "cd $scratch"
fi

echo "1..${#names[@]}"
num=0 pass=0 fail=0
for n in "${names[@]}"; do
	num=$((num + 1))
	m=$mdir/$n.mutant
	start=$(date +%s)
	if [ ! -f "$m" ]; then
		echo "not ok $num - $n: no such mutant"; fail=$((fail + 1)); continue
	fi
	file=$(field file "$m")
	tests=$(field tests "$m")
	what=$(field invariant "$m")
	san=$(field sanitizer "$m")
	# a mutant that only ThreadSanitizer sees: in its tree
	if [ "$san" = thread ]; then
		cd "$tsan_tree" || die "cd $tsan_tree"
		tsan_mode=1
	else
		cd "$scratch" || die "cd $scratch"
		tsan_mode=
	fi
	text original "$m" > .mutant-original
	text replacement "$m" > .mutant-replacement
	if [ -z "$file" ] || [ -z "$tests" ] || [ ! -s .mutant-original ] ||
	   { [ -n "$san" ] && [ "$san" != thread ]; }; then
		echo "not ok $num - $n: malformed (file:, tests:, sanitizer: thread or none, --- original, --- replacement)"
		fail=$((fail + 1)); continue
	fi
	if [ -n "${absent[$n]:-}" ]; then
		echo "not ok $num - $n: names tests that do not exist:${absent[$n]:+ }${absent[$n]}"
		fail=$((fail + 1)); continue
	fi
	found=$(perl -0777 -e '
		open(F, "<", $ARGV[0]) or die; $o = <F>; close F;
		open(F, "<", $ARGV[1]) or die; $s = <F>; close F;
		$n = 0; $p = 0;
		while (($p = index($s, $o, $p)) >= 0) { $n++; $p++; }
		print $n;' .mutant-original "$file" 2> /dev/null)
	if [ "$found" != 1 ]; then
		echo "not ok $num - $n: STALE: its original text is in $file ${found:-0} times, not once"
		fail=$((fail + 1)); continue
	fi
	cur_file=$file
	cp -p "$file" "$file.mutant-orig"
	perl -0777 -i -e '
		open(F, "<", shift) or die; $o = <F>; close F;
		open(F, "<", shift) or die; $r = <F>; close F;
		$s = <>; $p = index($s, $o); substr($s, $p, length($o)) = $r; print $s;' \
		.mutant-original .mutant-replacement "$file"
	touch "$file"
	verdict= by=
	# (a mutant of the tool rebuilds it: the scripts that run it name no program)
	# shellcheck disable=SC2086
	if ! make -j"$jobs" lib/libasyncpool.la tests/libasyncpool-testhooks.la \
	     $(case $file in tools/*) echo "tools/asyncpool" ;; esac) \
	     $(for t in $tests; do case $t in *.sh) ;; *) echo "$t" ;; esac; done) \
	     > "mutants-$n.build.log" 2>&1; then
		verdict="does not build (mutants-scratch/mutants-$n.build.log)"
	else
		hung= once=
		for t in $tests; do
			# (its stderr: no shell message for a crashed test)
			run_test "$t" "mutants-$n.$(basename "$t").log" 2> /dev/null
			case $? in
			0)
				# again: a catch must repeat
				run_test "$t" "mutants-$n.$(basename "$t").again.log" 2> /dev/null
				case $? in
				0) by=$t; break ;;
				2) hung="$hung $t" ;;
				*) once="$once $t" ;;
				esac ;;
			2) hung="$hung $t" ;;
			esac
		done
		[ -n "$by" ] || verdict="survived${once:+ (caught once only by:$once)}${hung:+ (killed by the outer limit, no watchdog:$hung)}"
	fi
	mv -f "$file.mutant-orig" "$file"
	touch "$file"
	echo "$file" >> .mutant-dirty
	cur_file=
	secs=$(($(date +%s) - start))
	[ -n "$by" ] && [ -n "$tsan_mode" ] && by="$by under ThreadSanitizer"
	if [ -n "$by" ]; then
		echo "ok $num - $n: caught by $by, twice (${secs} s): $what"
		pass=$((pass + 1))
	else
		echo "not ok $num - $n: $verdict (${secs} s): $what"
		fail=$((fail + 1))
	fi
done

# Leave the scratch tree built as the sources are: the library and every
# program, since a mutant of include/asyncpool/ was compiled into its
# tests too, and the next run's copy gives the reverted header its old
# time back (older than those tests: make would keep them mutated).
cd "$scratch" || die "cd $scratch"
echo "# rebuilding the scratch tree unmutated"
if make -j"$jobs" > /dev/null 2>&1 && make -j"$jobs" check TESTS= > /dev/null 2>&1; then
	rm -f .mutant-dirty
fi
if [ ${#baseline_tsan[@]} -gt 0 ] && cd "$tsan_tree"; then
	echo "# rebuilding the ThreadSanitizer tree unmutated"
	if make -j"$jobs" > /dev/null 2>&1 && make -j"$jobs" check TESTS= > /dev/null 2>&1; then
		rm -f .mutant-dirty
	fi
fi
echo "# $((  $(date +%s) - total_start )) s for ${#names[@]} mutants"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
exit
}
