#!/bin/sh
# Every struct that a man page displays (struct asyncpool_lease in
# asyncpool_acquire(3) and asyncpool_lease_release(3), the option and
# stats structs in their pages, ...) is the struct that
# include/asyncpool/*.h declares: the same members, of the same types, in
# the same order.  Comments and spacing may differ; nothing else.
#
# The structs are read at run time from the headers and from every page
# that is not a .so link, so a new field or a new displayed struct needs
# no change here: a page left behind fails.
set -u
srcdir="${top_srcdir:-.}"
man="$srcdir/man"
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
LC_ALL=C
export LC_ALL

# roff -> the text a reader sees, closely enough for C declarations: the
# font macros' arguments (quoted or not) are joined as roff joins them
# (.B and .I with spaces, the alternating ones .BR .BI ... without), other
# requests are dropped, and the escapes used in code are undone.
roff_text() {
	awk '
	function args(s,    out, a, n, q, c, i) {
		n = 0; a = ""; q = 0; c = 0
		for (i = 1; i <= length(s); i++) {
			ch = substr(s, i, 1)
			if (ch == "\"") {
				if (q && substr(s, i + 1, 1) == "\"") { a = a "\""; i++; continue }
				q = !q; c = 1; continue
			}
			if (!q && (ch == " " || ch == "\t")) {
				if (c || a != "") { ARG[++n] = a; a = ""; c = 0 }
				continue
			}
			a = a ch; c = 1
		}
		if (c || a != "") ARG[++n] = a
		return n
	}
	/^\.\\"/ { next }
	/^[.\047]/ {
		m = $1; rest = $0; sub(/^[.\047][^ \t]*[ \t]*/, "", rest)
		if (m ~ /^\.(B|I|SM|SB)$/) {
			n = args(rest); line = ""
			for (i = 1; i <= n; i++) line = line (i > 1 ? " " : "") ARG[i]
			print line
		} else if (m ~ /^\.(BR|BI|IB|IR|RB|RI)$/) {
			n = args(rest); line = ""
			for (i = 1; i <= n; i++) line = line ARG[i]
			print line
		} else
			print ""
		next
	}
	{ print }' "$1" |
	sed 's/\\-/-/g; s/\\(dq/"/g; s/\\(mu/x/g; s/\\&//g; s/\\%//g;
	     s/\\f[BIRP]//g; s/\\ / /g; s/\\e/\\/g'
}

# C text on stdin -> one line per member of each struct asyncpool_* that
# it defines: "NAME<TAB>member", comments dropped, spacing normalised
# (one space between tokens, around every punctuation mark).
members() {
	awk '
	function norm(s) {
		gsub(/[\t ]+/, " ", s)
		gsub(/[*(),\[\]]/, " & ", s)
		gsub(/ +/, " ", s); sub(/^ /, "", s); sub(/ $/, "", s)
		return s
	}
	!inside && match($0, /^[ \t]*struct asyncpool_[a-z0-9_]+[ \t]*\{/) {
		name = $0; sub(/^[ \t]*struct /, "", name); sub(/[ \t]*\{.*/, "", name)
		inside = 1; body = ""; next
	}
	inside && /^[ \t]*\};/ {
		# drop the comments, then split the members at ;
		while ((i = index(body, "/*")) > 0) {
			j = index(substr(body, i + 2), "*/")
			if (j == 0) { body = substr(body, 1, i - 1); break }
			body = substr(body, 1, i - 1) " " substr(body, i + j + 3)
		}
		n = split(body, m, ";")
		for (k = 1; k <= n; k++) {
			s = norm(m[k])
			if (s != "") print name "\t" s
		}
		inside = 0; next
	}
	inside { body = body " " $0 }
	END { if (inside) print name "\tUNTERMINATED" }'
}

cat "$srcdir"/include/asyncpool/*.h | members > "$tmp/header"

# The pages that display a struct, and the structs each displays.
: > "$tmp/pairs"
for p in "$man"/man1/*.1 "$man"/man3/*.3 "$man"/man7/*.7; do
	[ -f "$p" ] || continue
	head -n 1 "$p" | grep -q '^\.so' && continue
	roff_text "$p" | members > "$tmp/page.$(basename "$p")"
	cut -f 1 "$tmp/page.$(basename "$p")" | uniq |
		sed "s|^|$(basename "$p") |" >> "$tmp/pairs"
done
# How many struct displays the pages hold, counted on the raw text: the
# parser must have found every one of them.
raw=$(cat "$man"/man1/*.1 "$man"/man3/*.3 "$man"/man7/*.7 |
	grep -c '^\(\.B "\{0,1\}\)\{0,1\}[[:space:]]*struct asyncpool_[a-z0-9_]* {')
found=$(wc -l < "$tmp/pairs")

echo "1..$((2 + found))"
n=0
if [ "$found" -gt 0 ] && [ "$found" -eq "$raw" ]; then
	n=$((n + 1)); echo "ok $n - the pages display $found structs, all parsed"
else
	n=$((n + 1)); echo "not ok $n - the pages display $raw structs, $found parsed"
fi
if grep -q '^asyncpool_lease	' "$tmp/header"; then
	n=$((n + 1)); echo "ok $n - the headers declare struct asyncpool_lease"
else
	n=$((n + 1)); echo "not ok $n - no struct asyncpool_lease read from the headers"
fi

while read -r page name; do
	n=$((n + 1))
	grep "^$name	" "$tmp/header" | cut -f 2 > "$tmp/want"
	grep "^$name	" "$tmp/page.$page" | cut -f 2 > "$tmp/got"
	if [ ! -s "$tmp/want" ]; then
		echo "not ok $n - $page: struct $name is in no header"
	elif cmp -s "$tmp/want" "$tmp/got"; then
		echo "ok $n - $page: struct $name is as the header declares it"
	else
		echo "not ok $n - $page: struct $name differs from the header"
		diff -u --label "the header" --label "$page" "$tmp/want" "$tmp/got" | sed "s/^/# /"
	fi
done < "$tmp/pairs"
