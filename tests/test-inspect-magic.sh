#!/bin/sh
# asyncpool inspect on a file that is not a pool stops at the magic
# (issue 14, finding 9): it says EPROTO, exits 1, and prints none of the
# other header fields, which would be garbage.  A file with the magic
# but a bad header still gets every field printed, to diagnose it.
set -u
tool="${top_builddir:-.}/tools/asyncpool"
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
echo "1..8"
. "${top_srcdir:-.}/tests/tap.sh"

# 4 KiB of text: magic "not " (0x20746f6e)
yes 'not a pool, just text' | head -c 4096 > "$tmp/text"
"$tool" inspect "$tmp/text" > "$tmp/out" 2>&1
tap_ok "inspect of a text file exits 1" test $? -eq 1
tap_ok "  says EPROTO" grep -q 'INVALID: EPROTO' "$tmp/out"
tap_ok "  prints the magic" grep -q '^magic: *0x20746f6e$' "$tmp/out"
tap_ok "  and no other header field" \
	sh -c "! grep -Eq '^(version|header_size|flags|storage_size|buffer_size|buffer_count|attach_slots|[a-z_]*_offset|head|capacity):' '$tmp/out'"
tap_ok "  four lines: object, size, magic, header" test "$(wc -l < "$tmp/out")" -eq 4

# The magic "APOL" followed by zeros: a pool header that is wrong.
printf 'APOL' > "$tmp/bad"
head -c 4092 /dev/zero >> "$tmp/bad"
"$tool" inspect "$tmp/bad" > "$tmp/out" 2>&1
tap_ok "inspect of the magic and zeros exits 1" test $? -eq 1
tap_ok "  prints the header fields" grep -q '^version: *0$' "$tmp/out"
tap_ok "  and says why it is invalid" grep -q 'INVALID: EPROTONOSUPPORT' "$tmp/out"
