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
#   - a named test that fails on the unmutated tree fails the run before
#     any mutant (the baseline);
# that the runner works in its scratch copy, never in the tree; and
# that a file edited since the last run is rebuilt, even when its time
# is older than what the scratch copy built from it before.
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
git -C "$fake" init -q || { echo "Bail out! git init"; exit 1; }
sum=$(cksum < "$fake/lib/fake.c")

echo "1..15"
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
ok "$(has "$tmp/one.log" '^ok [0-9]+ - caught: caught by tests/pass.sh ')" \
	"a failing script test catches its mutant"
ok "$(has "$tmp/one.log" '^ok [0-9]+ - caught-prog: caught by tests/prog ')" \
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
