#!/bin/bash
# SPDX-License-Identifier: MIT
#
# make check-mutants cannot pass by accident (issue 36, item 6): run
# tests/mutants/run.sh on a fake tree (a Makefile that copies files, a
# few script and "program" tests, a handful of mutants) and check that
#   - a failing test catches its mutant, a passing one lets it survive;
#   - a mutant that names a test that does not exist (a script, or a
#     program make cannot build) is an error, even when another of its
#     tests fails;
#   - a "not ok ... # TODO" (an expected failure) is not a catch;
#   - a catching test is run twice, and a catch that does not repeat
#     (a test that fails once and then passes) is none: the mutant
#     survives, "caught once only by" the test;
#   - a named test that fails on the unmutated tree fails the run before
#     any mutant (the baseline);
# that the runner works in its scratch copy, never in the tree; that a
# file edited since the last run is rebuilt, even when its time is older
# than what the scratch copy built from it before; and that a tree that
# is no git checkout is listed by its .dist-files (a release tarball's,
# Makefile.am's dist-hook), or the run bails out: "cannot list the tree";
# and that a mutant marked "sanitizer: thread" is run in the second,
# ThreadSanitizer tree (its tests see ASYNCPOOL_MUTANT_SANITIZER=thread),
# the same change unmarked in the first, and an unknown sanitizer is
# malformed.
set -u
srcdir=$(cd "${top_srcdir:-.}" && pwd)
runner=$srcdir/tests/mutants/run.sh
for tool in git perl timeout setsid make; do
	if ! command -v "$tool" > /dev/null 2>&1; then
		echo "1..0 # SKIP $tool is not installed (the runner needs it)"
		exit 0
	fi
done
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT

# The fake tree: lib/fake.c is "the library"; make copies it.
fake=$tmp/tree
mkdir -p "$fake/lib" "$fake/tests/mutants" "$tmp/build"
cat > "$fake/lib/fake.c" <<'EOF'
int value = GOOD;
int other = 1;
int unchecked = 1;
int todo = 0;
int fragile = 0;
int flaky = 0;
int racy = 0;
EOF
printf '%s\n' \
	'all: lib/libasyncpool.la tests/libasyncpool-testhooks.la' \
	'check:' \
	'lib/libasyncpool.la: lib/fake.c' \
	'	cp lib/fake.c $@' \
	'tests/libasyncpool-testhooks.la: lib/fake.c' \
	'	cp lib/fake.c $@' \
	'tests/prog: tests/prog.in lib/libasyncpool.la' \
	'	cp tests/prog.in $@ && chmod +x $@' > "$fake/Makefile"
: > "$fake/config.status"               # configured: no bootstrap, no configure
# A script test: value must be GOOD.
cat > "$fake/tests/pass.sh" <<'EOF'
echo 1..1
if grep -q 'value = GOOD' lib/fake.c; then echo "ok 1 - value"; else echo "not ok 1 - value"; fi
EOF
# A program test, built by make: other must be 1 in the built library.
cat > "$fake/tests/prog.in" <<'EOF'
#!/bin/sh
echo 1..1
if grep -q 'other = 1' lib/libasyncpool.la; then echo "ok 1 - other"; else echo "not ok 1 - other"; fi
EOF
# A test whose only failure is an expected one.
cat > "$fake/tests/todo.sh" <<'EOF'
echo 1..2
echo "ok 1 - something else"
if grep -q 'todo = 0' lib/fake.c; then echo "ok 2 - todo"
else echo "not ok 2 - todo # TODO not fixed yet"; fi
EOF
# A test that fails once on the mutated tree, then passes: its runs are
# counted in the scratch tree (the first is the baseline's, unmutated).
cat > "$fake/tests/flaky.sh" <<'EOF'
n=$(($(cat .flaky-runs 2> /dev/null || echo 0) + 1))
echo $n > .flaky-runs
echo 1..1
if grep -q 'flaky = 0' lib/fake.c || [ $n -ne 2 ]; then echo "ok 1 - flaky"; else echo "not ok 1 - flaky"; fi
EOF
# A test that fails only in the ThreadSanitizer tree, as a race report
# would fail it.
cat > "$fake/tests/tsan.sh" <<'EOF'
echo 1..1
if grep -q 'racy = 0' lib/fake.c || [ "${ASYNCPOOL_MUTANT_SANITIZER:-}" != thread ]; then
	echo "ok 1 - racy"
else
	echo "not ok 1 - racy"
fi
EOF
# A test that fails without any mutant.
cat > "$fake/tests/broken.sh" <<'EOF'
echo 1..1
echo "not ok 1 - always"
EOF

# mutant NAME TESTS ORIGINAL REPLACEMENT
mutant() {
	printf '%s\n' "invariant: the self-test's $1" "file: lib/fake.c" "tests: $2" "ci: no" \
		'--- original' "$3" '--- replacement' "$4" '--- end' > "$fake/tests/mutants/$1.mutant"
}
mutant caught "tests/pass.sh" "int value = GOOD;" "int value = BAD;"
mutant caught-prog "tests/prog" "int other = 1;" "int other = 2;"
mutant survives "tests/pass.sh" "int unchecked = 1;" "int unchecked = 2;"
mutant missing-script "tests/pass.sh tests/no-such-test.sh" "int value = GOOD;" "int value = BAD;"
mutant missing-prog "tests/no-such-prog tests/pass.sh" "int value = GOOD;" "int value = BAD;"
mutant todo-only "tests/todo.sh" "int todo = 0;" "int todo = 1;"
mutant fails-anyway "tests/pass.sh tests/broken.sh" "int fragile = 0;" "int fragile = 1;"
mutant flaky-once "tests/flaky.sh" "int flaky = 0;" "int flaky = 1;"
mutant racy-plain "tests/tsan.sh" "int racy = 0;" "int racy = 1;"
mutant racy-tsan "tests/tsan.sh" "int racy = 0;" "int racy = 1;"
sed -i 's/^ci: no$/ci: no\nsanitizer: thread/' "$fake/tests/mutants/racy-tsan.mutant"
mutant racy-asan "tests/tsan.sh" "int racy = 0;" "int racy = 1;"
sed -i 's/^ci: no$/ci: no\nsanitizer: address/' "$fake/tests/mutants/racy-asan.mutant"
git -C "$fake" init -q || { echo "Bail out! git init"; exit 1; }
sum=$(cksum < "$fake/lib/fake.c")

echo "1..24"
t=0
ok() {
	t=$((t + 1))
	if [ "$1" = 0 ]; then echo "ok $t - $2"; else echo "not ok $t - $2"; fi
}
# has FILE REGEX: the runner's output has a line matching REGEX.
has() {
	grep -qE "$2" "$1"
	echo $?
}

run() { # LOG NAME...
	local log=$1
	shift
	(cd "$tmp/build" && top_srcdir=$fake ASYNCPOOL_MUTANTS_SCRATCH=$tmp/scratch \
	 ASYNCPOOL_TEST_WATCHDOG=20 ASYNCPOOL_MUTANT_TIMEOUT=30 ASYNCPOOL_MUTANTS_JOBS=2 \
	 "${BASH:-bash}" "$runner" "$@") > "$log" 2>&1
}

run "$tmp/one.log" caught caught-prog survives missing-script missing-prog todo-only
rc=$?
sed 's/^/# /' "$tmp/one.log"
ok $((rc != 1)) "a run with failed mutants exits 1 (got $rc)"
ok "$(has "$tmp/one.log" '^# baseline: all 3 pass')" \
	"the baseline ran the 3 tests the valid mutants name, unmutated, and they passed"
ok "$(has "$tmp/one.log" '^ok [0-9]+ - caught: caught by tests/pass.sh, twice ')" \
	"a failing script test catches its mutant"
ok "$(has "$tmp/one.log" '^ok [0-9]+ - caught-prog: caught by tests/prog, twice ')" \
	"a failing program test (rebuilt by make) catches its mutant"
ok "$(has "$tmp/one.log" '^not ok [0-9]+ - survives: survived')" \
	"a mutant no test notices survives"
ok "$(has "$tmp/one.log" '^not ok [0-9]+ - missing-script: names tests that do not exist: tests/no-such-test.sh$')" \
	"a missing script named on tests: is an error, though the other test would fail"
ok "$(has "$tmp/one.log" '^not ok [0-9]+ - missing-prog: names tests that do not exist: tests/no-such-prog$')" \
	"a program make has no rule for is an error, though the other test would fail"
ok "$(has "$tmp/one.log" '^not ok [0-9]+ - todo-only: survived')" \
	"a TODO failure, an expected one, is not a catch"
ok "$(has "$tmp/one.log" '^2 passed, 4 failed$')" "2 passed, 4 failed"

run "$tmp/two.log" caught fails-anyway
rc=$?
sed 's/^/# /' "$tmp/two.log"
ok $((rc != 1)) "a run whose named test fails without any mutant exits 1 (got $rc)"
ok "$(has "$tmp/two.log" '^# baseline: tests/broken.sh fails without any mutant')" \
	"the baseline names the test that fails unmutated"
ok "$(has "$tmp/two.log" '^Bail out! baseline: 1 of 2 named tests fail')" "and bails out"
ok $((1 - $(has "$tmp/two.log" '^(ok|not ok) '))) "before any mutant ran"

[ "$(cksum < "$fake/lib/fake.c")" = "$sum" ]
ok $? "the tree itself was never mutated"

# An edit with an old time (as one made during a run, whose reverts
# touched the scratch copy since): the next run must build it.
# A new test needs the edit in the built library.
printf '%s\n' 'int edited = 1;' >> "$fake/lib/fake.c"
touch -d '2001-01-01' "$fake/lib/fake.c"
cat > "$fake/tests/edited.sh" <<'EOF'
echo 1..1
if grep -q 'edited = 1' lib/libasyncpool.la; then echo "ok 1 - edited"; else echo "not ok 1 - edited"; fi
EOF
mutant edit-seen "tests/edited.sh" "int edited = 1;" "int edited = 2;"
run "$tmp/three.log" edit-seen
sed 's/^/# /' "$tmp/three.log"
ok "$(has "$tmp/three.log" '^# baseline: all 1 pass')" \
	"an edit older than the scratch copy's build is built before the baseline"

# A catch that does not repeat is none.
run "$tmp/four.log" flaky-once
rc=$?
sed 's/^/# /' "$tmp/four.log"
ok $((rc != 1)) "a mutant caught only once fails the run (got $rc)"
ok "$(has "$tmp/four.log" '^not ok [0-9]+ - flaky-once: survived \(caught once only by: tests/flaky.sh\)')" \
	"a test that fails once and passes when run again does not catch its mutant"

# A release tarball: no .git, its .dist-files lists it.
tarball=$tmp/tarball
mkdir -p "$tarball"
(cd "$fake" && git ls-files -co --exclude-standard) > "$tmp/list"
(cd "$fake" && tar -cf - -T "$tmp/list") | tar -xf - -C "$tarball"
cp "$tmp/list" "$tarball/.dist-files"
run_in() { # SRCDIR LOG NAME...
	local src=$1 log=$2
	shift 2
	(cd "$tmp/build" && top_srcdir=$src ASYNCPOOL_MUTANTS_SCRATCH=$tmp/scratch-$(basename "$src") \
	 ASYNCPOOL_TEST_WATCHDOG=20 ASYNCPOOL_MUTANT_TIMEOUT=30 ASYNCPOOL_MUTANTS_JOBS=2 \
	 "${BASH:-bash}" "$runner" "$@") > "$log" 2>&1
}
run_in "$tarball" "$tmp/five.log" caught
rc=$?
sed 's/^/# /' "$tmp/five.log"
ok "$(has "$tmp/five.log" '^ok [0-9]+ - caught: caught by tests/pass.sh, twice ')" \
	"a release tarball (no git, its .dist-files) runs its mutants (rc $rc)"
rm -f "$tarball/.dist-files"
run_in "$tarball" "$tmp/six.log" caught
rc=$?
sed 's/^/# /' "$tmp/six.log"
ok $((rc != 1)) "a tree that is neither a checkout nor a tarball fails the run (got $rc)"
ok "$(has "$tmp/six.log" '^Bail out! cannot list the tree')" "and says it cannot list the tree"

# A mutant that only ThreadSanitizer sees: in its own tree.
run "$tmp/seven.log" racy-plain racy-tsan racy-asan
sed 's/^/# /' "$tmp/seven.log"
ok "$(has "$tmp/seven.log" '^# baseline \(thread\): all 1 pass')" \
	"the baseline of a sanitizer: thread mutant's tests runs in the ThreadSanitizer tree"
ok "$(has "$tmp/seven.log" '^ok [0-9]+ - racy-tsan: caught by tests/tsan.sh under ThreadSanitizer, twice ')" \
	"a sanitizer: thread mutant is built and caught in the ThreadSanitizer tree"
ok "$(has "$tmp/seven.log" '^not ok [0-9]+ - racy-plain: survived')" \
	"the same change unmarked is run in the plain tree, where it survives"
ok "$(has "$tmp/seven.log" '^not ok [0-9]+ - racy-asan: malformed')" \
	"a sanitizer other than thread is malformed"
