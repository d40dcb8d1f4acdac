#!/bin/sh
# The freelist protocol, model-checked: spin explores every interleaving.
#  tests/model/freelist.pml  3 processes x 2 acquire+release operations on
#      3 buffers; with the ABA tag it must hold, tagless spin must find a
#      buffer leased twice.
#  tests/model/chains.pml    the chain pop/push of the cache work mixed
#      with single pops/pushes: 2 processes x 2 rounds on 4 buffers; the
#      tagless variant must find a buffer popped by two owners; the
#      chain pop that returns -ENOBUFS without re-reading the head (the
#      code before issue 14) must be caught returning it while buffers
#      are free.
#  tests/model/states.pml    a shared pool's per-buffer states: a buffer
#      released by its owner and by a peer process at once, 2 more
#      processes of traffic, 3 buffers: exactly one release refused, no
#      buffer linked twice.  Racing with a release by plain check
#      (a thread cache's, release_run's) spin finds the double link.
#  tests/model/wait.pml      the wait word (lib/wait_word.h): a thread
#      waiter, a waiter in another process and one that times out (or a
#      ring waiter), 3 releases: no waiter left asleep; a releaser that
#      reads the word before linking in loses a wake-up.
#  tests/model/bypass.pml    taking another thread's cache (pool_bypass.c):
#      no buffer owned twice; a flusher that does not wait for busy
#      takes a buffer the owner is taking.
#  tests/model/lend.pml      a local pool's caches lend (buffer_state.h):
#      a lent buffer released by token and, racing, by index (or by
#      index twice): exactly one release wins, no buffer claimed out of
#      a cache; a release by index that trusts a CACHED word, or looks
#      through the caches without stopping them, claims a cached one.
#  tests/model/crash.pml     (also) -DATTACH: the reclaim of an open
#      that has no attachment record, crashing at every step, loses no
#      buffer; claiming with holder 0, or without a new generation, does;
#      and a second reclaim that overlaps it (the reclaimer word taken
#      over from a live claimant) links a buffer twice.
#  tests/model/owner.pml     the ownership protocol of a local pool's
#      caches (HACKING.md, "Ownership"): copies of one lease released by
#      the owner in its window and by another thread through the
#      owner's inbox, or by two other threads, with a flush anywhere;
#      owners exiting with lent buffers and undelivered batches; a
#      waiter during delivery: every lease accepted exactly once, no
#      buffer in two places, nothing strands in a dead owner's inbox,
#      no waiter asleep for ever.  Mutants: an owner's drain without
#      the check accepts twice; a drain that trusts the reserved tail
#      reads an unwritten slot; a SEND without the orphan re-check
#      strands a token, one without the wake leaves the waiter asleep;
#      and the four places where the first text of the protocol failed (the
#      model's FIX 1-4: the owner's check before its window, exit's
#      SEND taking the lock again, a waiter that does not take the
#      batches, the orphan CAS not counting out[]).
#  tests/model/channel.pml   channels (issues 33, 52): a sender, a
#      receiver and a first reclaimer that may die before and after
#      every step, a next receiver, a reclaimer at the end; with a copy
#      of the sender's lease released during the send, or a peer forging
#      a ring entry, a redelivery entry or a from[] record.  No buffer
#      with two holders, none lost, every item sent consumed exactly
#      once (with CHANNEL_DROP: no buffer lost).  Mutants: the reclaim
#      without the sender's step, the step matched by index alone, a
#      redelivery CAS before its slot, a dead reclaimer's redelivery not
#      published, no drain with CHANNEL_DROP lose a buffer; a publish
#      before the word's CAS, a dead receiver's held buffer to the
#      freelist, from[] after the receive's CAS, a dead receiver's ring
#      drained lose an item; a receiver that trusts the token, a send
#      without its CAS give a buffer two holders.
# Every search is exhaustive (-DSAFETY; -DCOLLAPSE is lossless state
# compression, not a partial search).
set -u
models="${top_srcdir:-.}/tests/model"
CC=${CC:-cc}
if ! command -v spin > /dev/null 2>&1; then
	echo "1..0 # SKIP spin is not installed (Debian package spin)"
	exit 0
fi
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
echo "1..122"
t=0

# verify NAME MODEL DEFINES: build pan in its own directory and run it.
# Compiling pan.c takes longer than most searches here: -O1 for the large
# searches, -O0 (opt=-O0) for the small ones.
opt=-O1
verify() {
	mkdir -p "$tmp/$1" && cp "$models/$2" "$tmp/$1/" &&
	(cd "$tmp/$1" && spin -a $3 "$2" > spin.out 2>&1 &&
	 $CC $opt -w -DSAFETY -DCOLLAPSE -DMEMLIM=2048 -o pan pan.c > cc.out 2>&1) ||
		{ sed 's/^/# /' "$tmp/$1"/*.out; return 1; }
	(cd "$tmp/$1" && ./pan -m100000 > pan.out 2>&1)
	return 0
}

states() {
	awk '/states, stored/ { print $1 }' "$1"
}

ok() {
	t=$((t + 1))
	echo "ok $t - $1"
}

not_ok() {
	t=$((t + 1))
	echo "not ok $t - $1"
}

# holds NAME MODEL DEFINES DESC: exhaustive, no assertion violated.
holds() {
	if verify "$1" "$2" "$3"; then
		ok "$4: spin -a and cc build the verifier"
		out="$tmp/$1/pan.out"
		if grep -q "errors: 0" "$out" && grep -q "Full statespace search" "$out" &&
		   ! grep -q "max search depth too small\|Search not completed\|out of memory" "$out"; then
			ok "$4: exhaustive search, no assertion violated ($(states "$out") states)"
		else
			not_ok "$4: exhaustive search, no assertion violated"
			sed 's/^/# /' "$out"
		fi
		sed -n 's/^\(State-vector.*\)/# \1/p; s/^ *\([0-9.e+]* states, stored\)/# \1/p;
			s/^ *\([0-9.]*\)\s*total actual memory usage/# \1 MB of memory/p;
			s/^\(pan: elapsed time.*\)/# \1/p' "$out"
	else
		not_ok "$4: spin -a and cc build the verifier"
		not_ok "$4: exhaustive search # no verifier"
	fi
}

# finds NAME MODEL DEFINES PATTERN LABEL WHAT: spin reports one error, a
# line of pan.out matching PATTERN (a grep regular expression).
finds() {
	if verify "$1" "$2" "$3"; then
		ok "$5: spin -a and cc build the verifier"
		out="$tmp/$1/pan.out"
		if grep -q "$4" "$out" && grep -q "errors: 1" "$out"; then
			ok "$5: $6 ($(states "$out") states to the counterexample)"
		else
			not_ok "$5: $6"
			sed 's/^/# /' "$out"
		fi
	else
		not_ok "$5: spin -a and cc build the verifier"
		not_ok "$5: $6 # no verifier"
	fi
}

# fails NAME MODEL DEFINES PATTERN LABEL WHAT: spin reports the assertion
# matching PATTERN, the counterexample.
fails() {
	finds "$1" "$2" "$3" "assertion violated $4" "$5" "$6"
}

# 1-4: lib/pool.c ap_fl_pop / ap_fl_push
holds fl freelist.pml "" "freelist, tagged"
opt=-O0
fails fl-tagless freelist.pml -DTAGLESS "(holders\[h_i\]==0)" \
	"freelist, tagless" "spin finds the double lease"

# 5-8: ap_fl_pop_chain / ap_fl_push_chain with the single operations
opt=-O1
holds chains chains.pml "" "chains, tagged"
fails chains-tagless chains.pml -DTAGLESS "(holders\[[a-z_]*\[*[0-9]*\]*\]==0)" \
	"chains, tagless" "spin finds a buffer popped by two owners"

# 9-10: -ENOBUFS only when the pool was empty: a walk that met a buffer
# claimed by a bulk release (END) must re-read the head (issue 14)
opt=-O0
fails chains-nobufs chains.pml -DNOBUFS_NO_RECHECK "low\[_pid\]" \
	"chains, no head re-read before -ENOBUFS" "spin finds a spurious -ENOBUFS"
opt=-O1

# 11-14: a racing double release through the claim CAS; a copied lease of
# a cached buffer released after the owner's release returned
holds st states.pml "" "states, double release by two processes"
holds st-cache-seq states.pml "-DOWNER_CACHE -DSEQUENTIAL" \
	"states, a cached buffer released again"

# 15-18: a release into a cache claims by CAS: a racing duplicate is
# refused; with a plain check and store (before issue 14) it is not
holds st-cache states.pml -DOWNER_CACHE "states, racing release into a cache"
fails st-cache-plain states.pml "-DOWNER_CACHE -DPLAIN_CACHE_CHECK" " !(onlist\[[a-z]*\])" \
	"states, racing release into a cache, plain check" "spin finds the double link"
# 19-22: release_run (bulk release, uncached) claims by CAS
holds st-bulk states.pml -DOWNER_BULK "states, racing release_run"
holds st-bulk-seq states.pml "-DOWNER_BULK -DSEQUENTIAL" \
	"states, release_run then a later release"

# deadlocks NAME MODEL DEFINES LABEL WHAT: spin finds an invalid end
# state (a process blocked for ever: a waiter asleep, not woken).
deadlocks() {
	finds "$1" "$2" "$3" "invalid end state" "$4" "$5"
}

# 23-28: waiting for a buffer: no lost wake-up
opt=-O1
holds wait wait.pml "" "wait, thread + process + timed-out waiter"
holds wait-ring wait.pml -DRING "wait, thread + process + ring waiter"
opt=-O0
deadlocks wait-first wait.pml -DCHECK_FIRST "wait, word read before the link" \
	"spin finds a waiter asleep with a buffer free"
# 29-32: a flusher takes another thread's cache
holds bypass bypass.pml "" "bypass, owner fast path against a flusher"
fails bypass-nowait bypass.pml -DNOWAIT "(where\[b\]==[0-9])" \
	"bypass, flusher not waiting for busy" "spin finds a buffer taken twice"

# 33-40: crash safety (issue 11): processes killed at every step, a
# reclaimer concurrent with the survivors and one at the end; no buffer
# lost or owned twice.  Exhaustive here with 2 processes x 2 operations
# (PROCS=3: 34M states, no error, about 4 minutes: run by hand).  Without
# the step record a pop that dies after its head CAS loses its buffer;
# with a plain store for the take, a reclaim and a live popper both own
# it; without the head re-check before the record, a reclaim takes a
# buffer from a live pusher.
holds crash crash.pml -DPROCS=2 "crash, 2 processes and a reclaimer"
opt=-O0
fails crash-nostep crash.pml "-DPROCS=2 -DNO_STEP" "(cnt==3)" \
	"crash, no step record" "spin finds a buffer lost to a dead pop"
fails crash-plaintake crash.pml "-DPROCS=2 -DPLAIN_TAKE" " !(onlist\[claimed\[i\]\])" \
	"crash, plain take" "spin finds a buffer linked twice"
fails crash-norecheck crash.pml "-DPROCS=2 -DNO_RECHECK" "(cnt<=3)" \
	"crash, no head re-check before the record" "spin finds a cycle in the list"
opt=-O1

# 41-48: a local pool's caches lend: a release by index asks the caches
# (ap_cache_lease_gen) under bypass; a double release, by token and by
# index, or by index twice, wins exactly once
opt=-O0
holds lend lend.pml "" "lend, release by token and by index"
holds lend-index lend.pml -DB_INDEX "lend, two releases by index"
fails lend-noscan lend.pml -DNO_SCAN "((where!=1)&&(where!=2))" \
	"lend, index release trusts a CACHED word" "spin finds a buffer claimed out of a cache"
fails lend-nobypass lend.pml -DNO_BYPASS "((where!=1)&&(where!=2))" \
	"lend, caches looked through without bypass" "spin finds a buffer claimed out of a cache"
opt=-O1

# 49-56: the reclaim of an open that has no attachment record yet
# (issue 21): it may crash at every step; what it claimed is claimed for
# the dead holder with the next generation, so the final reclaim gets
# it back.  Claimed with holder 0 (the code before) a crash loses it;
# claimed without a new generation, a live popper's take and the claim
# both succeed.
holds crash-attach crash.pml "-DPROCS=2 -DATTACH" "crash, the reclaim of an open crashes"
opt=-O0
fails crash-attach-holder0 crash.pml "-DPROCS=2 -DATTACH -DHOLDER0" "(cnt==3)" \
	"crash, an open's reclaim claims with holder 0" "spin finds a buffer lost"
fails crash-attach-samegen crash.pml "-DPROCS=2 -DATTACH -DSAMEGEN" " !(onlist\[claimed\[i\]\])" \
	"crash, an open's reclaim keeps the generation" "spin finds a buffer linked twice"
# A reclaim that takes the reclaimer word over from a live claimant (a
# bound on how long a claim may stand still, issue 36 item 4) overlaps
# that claimant's reclaim: both push what the first claimed.
fails crash-attach-takeover crash.pml "-DPROCS=2 -DATTACH -DTAKEOVER" " !(onlist\[claimed\[i\]\])" \
	"crash, a reclaim takes over from a live one" "spin finds a buffer linked twice"
opt=-O1

# 57-88: the ownership protocol (issue 22, tests/model/owner.pml).
# pan.c of this model takes 30 s to compile with -O1 and its searches
# are short: -O0 for all of them.
opt=-O0
holds owner owner.pml "" "owner, local against remote copy, a flush"
holds owner-remote owner.pml "-DREMOTE -DOWNER_EXIT" \
	"owner, remote against remote copy, the owner exits"
holds owner-remote-full owner.pml "-DREMOTE -DCAP=1" \
	"owner, remote against remote copy, an inbox of one slot (FULL)"
holds owner-exit owner.pml -DEXIT "owner, both owners exit with lent buffers and batches"
holds owner-exit-flush owner.pml "-DEXIT -DFLUSH -DOWNER_COPY" \
	"owner, both owners exit, a copy of the owner's, a flush"
holds owner-wait owner.pml -DWAIT "owner, a waiter while two copies are delivered"
holds owner-wait-idle owner.pml "-DWAIT -DIDLE" "owner, a waiter, the releaser idle"
holds owner-wait-exit owner.pml "-DWAIT -DOWNER_EXIT" "owner, a waiter, the lender exits"
fails owner-nocheck owner.pml -DNO_DRAIN_CHECK "(where\[b\]==2)" \
	"owner, drain without the check" "spin finds the racing copy accepted twice"
fails owner-order owner.pml "-DREMOTE -DOUT_OF_ORDER" "(tok!=0)" \
	"owner, the reserved tail taken as published" "spin finds a slot read before it was written"
fails owner-norecheck owner.pml "-DEXIT -DNO_ORPHAN_RECHECK" "(head\[j\]==tail\[j\])" \
	"owner, SEND without the orphan re-check" "spin finds a token stranded in a dead owner's inbox"
deadlocks owner-nowake owner.pml "-DWAIT -DIDLE -DNO_WAKE" \
	"owner, SEND without the wake" "spin finds a waiter asleep with a buffer in an inbox"
fails owner-early owner.pml -DCHECK_BEFORE_WINDOW "(where\[0\]==2)" \
	"owner, own release checked before its window" "spin finds a buffer freed by a flush and cached"
deadlocks owner-relock owner.pml "-DEXIT -DEXIT_RELOCK" \
	"owner, exit's SEND takes the lock again" "spin finds the exiting thread deadlocked"
deadlocks owner-nobatch owner.pml "-DWAIT -DIDLE -DNO_BATCH_TAKE" \
	"owner, a waiter that leaves the batches" "spin finds a waiter asleep, the buffer in a batch"
fails owner-orphanout owner.pml "-DEXIT -DNO_ORPHAN_OUT" "(out\[j\]==0)" \
	"owner, orphan CAS not counting out" "spin finds out[] left at 1"
opt=-O1

# 87-120: channels (issues 33, 52, tests/model/channel.pml): the protocol
# holds with deaths at every step, a racing copy of the sender's lease,
# or a forged entry; each broken step gives its counterexample.
opt=-O1
holds chan channel.pml "" "channel, sender, receiver and reclaimer die anywhere, items redelivered"
holds chan-copy channel.pml -DCOPY "channel, a copy of the sent lease released"
holds chan-forge channel.pml -DFORGE "channel, a peer forges an entry"
holds chan-forge-redo channel.pml "-DFORGE -DFORGE_REDO" \
	"channel, a peer forges a redelivery entry or a from[] record"
holds chan-drop channel.pml -DDROP "channel, CHANNEL_DROP: 1.4's rule, no buffer lost"
opt=-O0
lost="((kind\\[b\\]==0)&&onlist\\[b\\])"
item="( !(sent\\[q\\])||(consumed\\[q\\]==1))"
fails chan-nostep channel.pml -DNO_STEP "$lost" \
	"channel, reclaim without the sender's step" "spin finds a QUEUED word outside the ring, lost"
fails chan-pubfirst channel.pml -DPUBLISH_FIRST "$item" \
	"channel, publish before the word's CAS" "spin finds the entry refused, then the item lost"
fails chan-nodrain channel.pml "-DDROP -DNO_DRAIN" "$lost" \
	"channel, CHANNEL_DROP, a dead receiver's ring not drained" "spin finds its queue lost"
fails chan-byindex channel.pml -DBY_INDEX "$lost" \
	"channel, the step matched by index alone" "spin finds a buffer hidden by a taken entry, lost"
fails chan-trust channel.pml "-DFORGE -DTRUST_HINT" "(held\\[b\\]==6)" \
	"channel, a receiver that trusts the token" "spin finds the sender's lease taken"
fails chan-plainsend channel.pml "-DCOPY -DPLAIN_SEND" " !(onlist\\[b\\])" \
	"channel, a send without its CAS" "spin finds the buffer queued and on the freelist"
fails chan-plainrecv channel.pml "-DFORGE -DPLAIN_RECV" "(held\\[b\\]==6)" \
	"channel, the receive as a checked plain store (issue 53)" \
	"spin finds a forged entry taken while the reclaim gives the dead sender's word back"
fails chan-noredo channel.pml -DNO_REDO "$item" \
	"channel, a dead receiver's held buffer to the freelist" "spin finds the item lost"
fails chan-fromafter channel.pml -DFROM_AFTER "$item" \
	"channel, from[] written after the receive's CAS" "spin finds the item lost"
fails chan-redocasfirst channel.pml -DREDO_CAS_FIRST "$lost" \
	"channel, the redelivery's CAS before its slot" "spin finds a QUEUED word no slot names, lost"
fails chan-nofinish channel.pml -DNO_FINISH "$lost" \
	"channel, a dead reclaimer's redelivery not published" "spin finds it lost"
fails chan-draindead channel.pml -DDRAIN_DEAD "$item" \
	"channel, a dead receiver's ring drained (no CHANNEL_DROP)" "spin finds its queue lost"
opt=-O1
