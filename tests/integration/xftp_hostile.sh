#!/bin/bash
# xftp against a hostile server (xftp_hostile_server.py): a reply that never ends is cut at
# its bound, a PASV naming a third host is not followed, a listing cannot drive the
# terminal, names with .. or / in a listing write nothing outside the destination and are
# named as not copied, a download whose HASH differs leaves nothing to resume and names the
# digest as it came, a download cut by a reset or a stall keeps every byte that came, and
# MODE E blocks that lie about where they go or how long they are write nothing past the file.
. "$(dirname "$0")/xftp_lib.sh"
server=$DS_SRC/tests/integration/xftp_hostile_server.py

# hostile PORT HOW [ARG]: the server in the background, listening.
hostile() {
	python3 "$server" "$@" &
	hostile_pid=$!
	wait_listening "$1"
}

hostile 2210 endless
expect_error "endless reply" "reply over" "$xftp" -q ls ftp://u:p@127.0.0.1:2210/
wait "$hostile_pid" || true

hostile 2211 tricks
"$xftp" -q ls ftp://u:p@127.0.0.1:2211/ >"$work/listing" || fail "ls through a PASV naming a third host"
grep -q 'name$' "$work/listing" || fail "ls printed no listing: $(od -c "$work/listing" | head)"
! LC_ALL=C grep -q '[[:cntrl:]]' <(tr -d '\n' <"$work/listing") ||
	fail "ls passed the server's control bytes on: $(od -c "$work/listing" | head)"
pass "ls: connects back to the server whatever PASV names; control bytes shown as '?'"
wait "$hostile_pid" || true

mkdir -p "$work/dest/deep"
hostile 2212 tricks
status=0
"$xftp" -q -r get ftp://u:p@127.0.0.1:2212/d "$work/dest/deep/d" 2>"$work/err" || status=$?
[ "$status" = 1 ] || fail "get -r from the tricks server exited $status, not 1: $(cat "$work/err")"
[ "$(cat "$work/dest/deep/d/ok")" = hello ] || fail "get -r did not fetch the plain name"
[ "$(find "$work" -name '*evil*' | wc -l)" -eq 0 ] ||
	fail "a listed name wrote outside the destination: $(find "$work" -name '*evil*')"
for name in d/../evil d/a/../../evil2 d//abs-evil; do
	grep -qxF "xftp: failed: $name: a name with '/' in it: not copied" "$work/err" ||
		fail "get -r did not name $name as not copied: $(cat "$work/err")"
done
pass "get -r: listed names with .. or / write nothing outside the destination, each named"
wait "$hostile_pid" || true

# A download whose HASH differs keeps nothing: its partial, resumable as whole, would let a
# --resume without --verify commit the same bytes under the name.
hostile 2213 lying-hash
expect_error "a HASH that differs" "SHA-256 differs" "$xftp" -q --verify get \
	ftp://u:p@127.0.0.1:2213/f "$work/lied"
[ ! -e "$work/lied" ] || fail "a download whose HASH differs took its name"
[ -z "$(find "$work" -name '*lied*')" ] ||
	fail "a download whose HASH differs left a partial: $(find "$work" -name '*lied*')"
pass "get --verify: a HASH that differs leaves neither the file nor a partial to resume"
wait "$hostile_pid" || true

# A digest longer than any is shown as it came, up to a bound that says what it left out.
hostile 2217 lying-hash 66
expect_error "a HASH of 66 digits" "SHA-256 differs: server 0{66}, here [0-9a-f]{64} " "$xftp" -q \
	--verify get ftp://u:p@127.0.0.1:2217/f "$work/lied66"
wait "$hostile_pid" || true
hostile 2218 lying-hash 300
expect_error "a HASH of 300 digits" "SHA-256 differs: server 0{96}\.\.\. \(300 digits\), here [0-9a-f]{64} " \
	"$xftp" -q --verify get ftp://u:p@127.0.0.1:2218/f "$work/lied300"
wait "$hostile_pid" || true

# A download cut by a reset keeps every byte that came: the last piece, short of a whole
# buffer, is written too, so that --resume continues after it.
python3 -c 'import sys; sys.stdout.buffer.write(bytes(i % 251 for i in range(200000)))' \
	>"$work/cut.want"
hostile 2214 cut
kept='\(.*/\.[a-z]*\.xftp-part keeps 100000 bytes: --resume continues\)$'
expect_error "a download cut by a reset" "^xftp: f: data receive: Connection reset by peer $kept" \
	"$xftp" -q get ftp://u:p@127.0.0.1:2214/f "$work/cut"
wait "$hostile_pid" || true
[ ! -e "$work/cut" ] || fail "a cut download took its name"
[ "$(stat -c %s "$work/.cut.xftp-part" 2>/dev/null)" = 100000 ] ||
	fail "the cut download kept $(stat -c %s "$work/.cut.xftp-part" 2>&1) bytes, not the 100000 that came"
cmp -s -n 100000 "$work/.cut.xftp-part" "$work/cut.want" ||
	fail "the cut download's partial is not the bytes that came"
hostile 2215 cut
"$xftp" -q --resume get ftp://u:p@127.0.0.1:2215/f "$work/cut" || fail "--resume of the cut download"
wait "$hostile_pid" || true
cmp -s "$work/cut" "$work/cut.want" || fail "the resumed download is not the file"
pass "get cut by a reset: the 100000 bytes that came are kept, --resume fetches the rest"

# The same into a long path: the line names the partial whole and still ends with what
# --resume will do (it was cut at 255 bytes, in the partial's name).
deep=$work/$(printf 'd%.0s' {1..150})/$(printf 'e%.0s' {1..60})
mkdir -p "$deep"
hostile 2222 cut
expect_error "a download cut by a reset, into a long path" \
	"^xftp: f: data receive: Connection reset by peer \($deep/\.cut\.xftp-part keeps 100000 bytes: --resume continues\)$" \
	"$xftp" -q get ftp://u:p@127.0.0.1:2222/f "$deep/cut"
wait "$hostile_pid" || true

# A server that goes quiet mid-download is given --timeout for its data and then only a
# brief wait for its reply (FTP_BRIEF_MS), with no goodbye on a dialogue out of step:
# 3 + 2 s, where each wait took its own whole timeout (3 + 3 + 2 s). What came is kept.
hostile 2216 stall
start=$(date +%s%N)
expect_error "a server that stalls" "^xftp: f: no data moved for 3000 ms $kept" \
	"$xftp" -q -b 64K --timeout 3 get ftp://u:p@127.0.0.1:2216/f "$work/stall"
elapsed_ms=$((($(date +%s%N) - start) / 1000000))
kill "$hostile_pid" 2>/dev/null || true
wait "$hostile_pid" || true
[ "$elapsed_ms" -lt 7000 ] || fail "a stalled download with --timeout 3 took $elapsed_ms ms"
[ "$(stat -c %s "$work/.stall.xftp-part" 2>/dev/null)" = 100000 ] ||
	fail "the stalled download did not keep the 100000 bytes that came"
pass "get from a server that stalls: given up after $elapsed_ms ms with --timeout 3"

# MODE E blocks are checked against the file's size (SIZE): one past its end and one
# claiming more bytes than it has are refused before a byte is written, and the same block
# sent over and over is written until the count of bytes passes the size. Each ends the
# download with one line; nothing takes the name, no partial grows past the file (a block
# at 2^40 taken at its word would make a sparse partial of 1 TiB), and only what came
# whole is kept for --resume.
port=2219
for case in "far-block:the server sent more than the 200000 bytes it announced \(nothing kept\)" \
	"long-block:the server sent more than the 200000 bytes it announced \(nothing kept\)" \
	"repeat-block:the server sent more than the 200000 bytes it announced \(.*/\.repeat-block\.xftp-part kept\)"; do
	how=${case%%:*}
	hostile "$port" "$how"
	expect_error "MODE E $how" "^xftp: f: ${case#*:}" \
		"$xftp" -q -P 2 -b 64K get "ftp://u:p@127.0.0.1:$port/f" "$work/$how"
	wait "$hostile_pid" || true
	[ ! -e "$work/$how" ] || fail "MODE E $how: the download took its name"
	part=$work/.$how.xftp-part
	if [ "$how" != repeat-block ]; then
		[ ! -e "$part" ] || fail "MODE E $how: a partial of $(stat -c %s "$part") bytes, none whole, was left"
	else # what is kept is the one block that came whole: the file's first 64 KiB
		[ -e "$part" ] || fail "MODE E $how: the 64 KiB that came whole were not kept, though the line says so"
		if [ "$(stat -c %s "$part")" != 65536 ] || ! cmp -s -n 65536 "$part" "$work/cut.want"; then
			fail "MODE E $how: the partial of $(stat -c %s "$part") bytes is not the first 64 KiB that came"
		fi
		whole=$(whole_mark "$part" 2>/dev/null) || whole=none
		[ "$whole" = 65536 ] || fail "MODE E $how: the partial's resume point is $whole, not 65536"
	fi
	port=$((port + 1))
done
pass "get -P 2: MODE E blocks past the file, too long or sent twice end it; none written past the file"
