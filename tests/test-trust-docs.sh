#!/bin/sh
# The manual states the trust model of issue 14 (findings 2 and 9): what a
# sealed memfd and a named object each protect against, the errors of the
# checks that enforce it, the cached state in asyncpool_check(3), and
# examples that lead untrusted peers to a memfd.  The behaviour itself is
# tested by test-shm-trust, test-shm-reserve and test-inspect-magic.sh.
set -u
man="${top_srcdir:-.}/man"
echo "1..9"
n=0
has() { # DESC FILE PATTERN: FILE has a line matching the extended PATTERN
	n=$((n + 1))
	if grep -Eq "$3" "$man/$2"; then
		echo "ok $n - $1"
	else
		echo "not ok $n - $1 ($2: no /$3/)"
	fi
}
has "asyncpool-shared(7) has a section on who is trusted" man7/asyncpool-shared.7 '^\.SS Who is trusted'
has "  a memfd is for peers that are not trusted" man7/asyncpool-shared.7 'is for peers that are not trusted'
has "  a name is for peers trusted as oneself" man7/asyncpool-shared.7 'is for peers trusted as oneself'
has "asyncpool_shm_create(3): the opens' EPERM" man3/asyncpool_shm_create.3 'ASYNCPOOL_SHM_OPEN_OTHER_WRITERS :'
has "asyncpool_shm_create(3): ENOSPC at creation" man3/asyncpool_shm_create.3 '^\.B ENOSPC'
has "asyncpool_shm_create(3): the write seals" man3/asyncpool_shm_create.3 'F_SEAL_FUTURE_WRITE'
has "asyncpool_shared_create(3): E2BIG" man3/asyncpool_shared_create.3 '^\.B E2BIG'
has "asyncpool_shared_create(3): the example's creator makes a memfd" man3/asyncpool_shared_create.3 \
	'creator: an anonymous sealed memfd'
has "asyncpool_check(3) explains the cached state" man3/asyncpool_check.3 'marked cached'
