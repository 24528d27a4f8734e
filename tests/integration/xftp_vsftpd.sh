#!/bin/bash
# xftp against vsftpd (standard commands only): get, put, ls, recursive copies, resume
# after kill -9 of either side, and what must be refused.
. "$(dirname "$0")/xftp_lib.sh"
command -v vsftpd >/dev/null || fail "vsftpd is not installed (packages.txt)"
getent passwd ftp >/dev/null || fail "no ftp user (the vsftpd package makes it)"

port=2121
start_vsftpd $port
url=ftp://127.0.0.1:$port
cd "$work"

make_file "$vs_root/pub/a.bin" $((20 * 1048576 + 4097))
"$xftp" -q get $url/pub/a.bin "$work/a.bin" >/dev/null
same "$vs_root/pub/a.bin" "$work/a.bin" "get gives identical bytes"
[ ! -e "$work/.a.bin.xftp-part" ] || fail "the partial name outlived the download"

"$xftp" --json get -P 4 -b 1M $url/pub/a.bin "$work/a2.bin" >"$work/json"
jq -e '.ok and .bytes == 20975617 and .streams == 1 and .block == 1048576' "$work/json" >/dev/null ||
	fail "-P 4 without PARALLEL in FEAT should use one stream: $(cat "$work/json")"
pass "-P falls back to MODE S where FEAT has no PARALLEL"

make_file "$work/up.bin" $((7 * 1048576 + 1))
"$xftp" -q put "$work/up.bin" $url/pub/ >/dev/null
same "$work/up.bin" "$vs_root/pub/up.bin" "put to a directory URL keeps the name"
"$xftp" -q put "$work/up.bin" $url/pub/renamed.bin >/dev/null
same "$work/up.bin" "$vs_root/pub/renamed.bin" "put to a file URL"

"$xftp" ls $url/pub/ >"$work/ls"
grep -q 'renamed.bin$' "$work/ls" && grep -q 'a.bin$' "$work/ls" || fail "ls: $(cat "$work/ls")"
pass "ls lists the directory"

mkdir -p "$work/tree/sub/deeper"
make_file "$work/tree/one" 1000
make_file "$work/tree/sub/two" 300000
make_file "$work/tree/sub/deeper/three" 5000000
: >"$work/tree/sub/empty"
"$xftp" -q -r put "$work/tree" $url/pub/tree >/dev/null
"$xftp" -q -r get $url/pub/tree "$work/back" >/dev/null
diff -r "$work/tree" "$work/back" >/dev/null || fail "-r round trip differs"
pass "-r put then -r get give the same tree"

# Never truncate a file xftp did not write.
echo "keep me" >"$work/.b.bin.xftp-part"
expect_error "a foreign partial file is left alone" 'did not write it' \
	"$xftp" -q get $url/pub/a.bin "$work/b.bin"
[ "$(cat "$work/.b.bin.xftp-part")" = "keep me" ] || fail "the foreign file was changed"
# --resume continues it, and with no HASH to check it by, says it is unchecked.
head -c 1000 "$work/a.bin" >"$work/.b.bin.xftp-part"
"$xftp" --resume get $url/pub/a.bin "$work/b.bin" 2>"$work/err" >/dev/null || fail "--resume of a foreign partial: $(cat "$work/err")"
cmp -s "$work/a.bin" "$work/b.bin" && grep -q 'continuing after 1000 bytes xftp did not write, unchecked' "$work/err" ||
	fail "--resume of a foreign partial on a server without HASH: $(cat "$work/err")"
pass "--resume of a foreign partial without HASH says it is unchecked: $(cat "$work/err")"
rm "$work/b.bin"

expect_error "a missing remote file" 'no such file' "$xftp" -q get $url/pub/nothing "$work/n"
[ ! -e "$work/n" ] || fail "a missing file made a local one"
expect_error "--verify needs HASH" 'no HASH' "$xftp" -q --verify get $url/pub/a.bin "$work/v"
[ ! -e "$work/v" ] || fail "an unverifiable download took its name"
expect_error "bad URL exits 2" 'not an ftp:// URL' "$xftp" get http://x/y
expect_error "-P 17 exits 2" '-P' "$xftp" -P 17 get $url/pub/a.bin
expect_error "unknown command exits 2" 'not a command' "$xftp" fetch $url/x
expect_error "a refused login" 'refused' "$xftp" get ftp://bob:pw@127.0.0.1:$port/pub/a.bin
status=0
"$xftp" get http://x/y 2>/dev/null || status=$?
[ $status -eq 2 ] || fail "bad URL: exit $status, not 2"

# Resume after kill -9: the transfers are slowed to 20 MB/s so they can be cut midway.
kill "$vs_pid"
wait "$vs_pid" 2>/dev/null || true
start_vsftpd $port 20000000
make_file "$vs_root/pub/big.bin" $((60 * 1048576 + 12345))

"$xftp" -q get $url/pub/big.bin "$work/big.bin" >/dev/null &
client=$!
# The part records where it is whole once a second, each point durable first.
wait_whole "$work/.big.bin.xftp-part" $((10 * 1048576))
kill -9 $client
wait $client 2>/dev/null || true
[ ! -e "$work/big.bin" ] || fail "a killed download left a file under its final name"
part=$(stat -c %s "$work/.big.bin.xftp-part")
"$xftp" --json --resume get $url/pub/big.bin "$work/big.bin" >"$work/json"
same "$vs_root/pub/big.bin" "$work/big.bin" "get resumed after kill -9 of the client"
jq -e ".resumed_bytes > 0 and .resumed_bytes <= $part" "$work/json" >/dev/null ||
	fail "the resume did not continue the part: $(cat "$work/json")"

rm -f "$work/big.bin"
"$xftp" -q get $url/pub/big.bin "$work/big.bin" >/dev/null 2>"$work/err" &
client=$!
wait_size "$work/.big.bin.xftp-part" $((10 * 1048576))
session=$(pgrep -P "$vs_pid" | head -n 1)
[ -n "$session" ] || fail "no vsftpd session process"
kill -9 "$session" $(pgrep -P "$session") 2>/dev/null || true
status=0
wait $client || status=$?
[ $status -eq 1 ] || fail "the client exited $status when the server died"
[ ! -e "$work/big.bin" ] || fail "a cut download left a file under its final name"
"$xftp" -q --resume get $url/pub/big.bin "$work/big.bin" >/dev/null
same "$vs_root/pub/big.bin" "$work/big.bin" "get resumed after kill -9 of the server"

"$xftp" -q put "$work/big.bin" $url/pub/big-up.bin >/dev/null &
client=$!
wait_size "$vs_root/pub/big-up.bin" $((10 * 1048576))
kill -9 $client
wait $client 2>/dev/null || true
"$xftp" -q --resume put "$work/big.bin" $url/pub/big-up.bin >/dev/null
same "$work/big.bin" "$vs_root/pub/big-up.bin" "put resumed after kill -9 of the client"
echo "all $checks checks passed"
