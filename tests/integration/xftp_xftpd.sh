#!/bin/bash
# xftp against xftpd: parallel streams (MODE E), HASH checked end to end, credentials from
# ~/.netrc, server-to-server copy, and resume after kill -9 of either side with one and
# with four streams.
. "$(dirname "$0")/xftp_lib.sh"
command -v jq >/dev/null || fail "jq is not installed"
command -v tc >/dev/null || fail "tc is not installed (iproute2)"

# kill_xftpd: kill -9 of the listener and of its session processes, as in a crash.
kill_xftpd() {
	kill -9 "$xs_pid" $(pgrep -P "$xs_pid") 2>/dev/null || true
	wait "$xs_pid" 2>/dev/null || true
}

root=$work/xs
start_xftpd 2122 "$root"
url=ftp://bob:secret@127.0.0.1:2122
cd "$work"

make_file "$root/a.bin" $((24 * 1048576 + 333))
chown nobody "$root/a.bin"
for p in 1 4; do
	"$xftp" --json -P $p -b 1M --verify get $url/a.bin "$work/a.$p" >"$work/json"
	same "$root/a.bin" "$work/a.$p" "get -P $p gives identical bytes"
	sum=$(sha256sum "$root/a.bin" | cut -d' ' -f1)
	jq -e ".streams == $p and .verified == 1 and .hash == \"$sum\"" "$work/json" >/dev/null ||
		fail "get -P $p: $(cat "$work/json")"
	pass "get -P $p used $p streams and its SHA-256 matched the server's HASH"
	"$xftp" --json -P $p -b 1M --verify put "$work/a.$p" $url/up.$p >"$work/json"
	same "$work/a.$p" "$root/up.$p" "put -P $p gives identical bytes"
	jq -e ".streams == $p and .verified == 1" "$work/json" >/dev/null || fail "put -P $p: $(cat "$work/json")"
done

# Credentials from a netrc file; one that others can read is refused, as ftp(1) does.
printf 'machine 127.0.0.1 login bob password secret\n' >"$work/netrc"
chmod 600 "$work/netrc"
"$xftp" -q --netrc "$work/netrc" get ftp://127.0.0.1:2122/a.bin "$work/n.bin" >/dev/null
same "$root/a.bin" "$work/n.bin" "credentials from the netrc file"
expect_error "a --netrc file that is not there is an error, not an anonymous login" \
	"^xftp: --netrc $work/nonetrc: No such file or directory" \
	"$xftp" -q --netrc "$work/nonetrc" get ftp://127.0.0.1:2122/a.bin "$work/n2.bin"
chmod 644 "$work/netrc"
expect_error "a netrc others can read is refused" 'group or others can reach it' \
	"$xftp" -q --netrc "$work/netrc" get ftp://127.0.0.1:2122/a.bin "$work/n2.bin"

# Server to server: the data goes from one xftpd to the other.
root2=$work/xs2
first=$xs_pid
start_xftpd 2123 "$root2"
for p in 1 4; do
	"$xftp" --json -P $p cp $url/a.bin ftp://bob:secret@127.0.0.1:2123/copy.$p >"$work/json"
	same "$root/a.bin" "$root2/copy.$p" "cp -P $p between two servers"
done
kill "$xs_pid"
wait "$xs_pid" 2>/dev/null || true
xs_pid=$first

# IPv6: EPSV to a server listening on ::1.
"$DS_BIN/xftpd" -p 2125 --listen ::1 --root "$root" --users "$work/users" >>"$work/xftpd6.log" 2>&1 &
v6=$!
wait_listening 2125
"$xftp" -q -P 2 get "ftp://bob:secret@[::1]:2125/a.bin" "$work/a6" >/dev/null
same "$root/a.bin" "$work/a6" "get -P 2 over IPv6"
"$xftp" -q put "$work/a6" "ftp://bob:secret@[::1]:2125/a6up" >/dev/null
same "$work/a6" "$root/a6up" "put over IPv6"
kill $v6
wait $v6 2>/dev/null || true

# Directories through MLSD.
mkdir -p "$work/tree/sub/deeper"
make_file "$work/tree/one" 1000
make_file "$work/tree/sub/two" 3000000
make_file "$work/tree/sub/deeper/three" 5000
"$xftp" -q -r -P 2 put "$work/tree" $url/tree >/dev/null
"$xftp" -q -r -P 2 get $url/tree "$work/back" >/dev/null
diff -r "$work/tree" "$work/back" >/dev/null || fail "-r round trip through MLSD differs"
pass "-r -P 2 put then get through MLSD give the same tree"

# Resume after kill -9, the loopback slowed to about 25 MB/s.
make_file "$root/big.bin" $((48 * 1048576 + 4097))
chown nobody "$root/big.bin"
slow_loopback 200mbit
# A striped store of four directories: clients see ordinary files.
mkdir -p "$work/st/d0" "$work/st/d1" "$work/st/d2" "$work/st/d3"
chown -R nobody "$work/st"
"$DS_BIN/xftpd" -p 2126 --listen 127.0.0.1 --users "$work/users" \
	--root "$work/st/d0,$work/st/d1,$work/st/d2,$work/st/d3" >>"$work/xftpd-st.log" 2>&1 &
striped=$!
wait_listening 2126
for p in 1 4; do
	"$xftp" -q -P $p --verify put "$root/a.bin" ftp://bob:secret@127.0.0.1:2126/s.$p >/dev/null
	"$xftp" -q -P $p --verify get ftp://bob:secret@127.0.0.1:2126/s.$p "$work/s.$p" >/dev/null
	same "$root/a.bin" "$work/s.$p" "put and get -P $p through a striped store, HASH checked"
done
for d in d0 d1 d2 d3; do
	[ -n "$(ls -A "$work/st/$d")" ] || fail "the striped store left $d empty"
done
kill $striped
wait $striped 2>/dev/null || true

# SIGINT ends a transfer promptly, keeping the part and leaving the final name alone.
"$xftp" -q get $url/big.bin "$work/int.bin" >/dev/null 2>&1 &
client=$!
wait_size "$work/.int.bin.xftp-part" $((4 * 1048576))
start=$(date +%s%N)
kill -INT $client
status=0
wait $client || status=$?
elapsed_ms=$((($(date +%s%N) - start) / 1000000))
[ $status -eq 130 ] || fail "SIGINT: exit $status, not 130"
[ $elapsed_ms -lt 3000 ] || fail "SIGINT took $elapsed_ms ms to end the transfer"
[ -e "$work/.int.bin.xftp-part" ] && [ ! -e "$work/int.bin" ] || fail "SIGINT: part lost or final name taken"
pass "SIGINT ends a download in $elapsed_ms ms, the part kept"

# --resume of a partial xftp did not write: its bytes are checked by HASH as a whole
# file, so a foreign prefix fails (nothing takes the name), a true one completes.
printf 'not the server file' >"$work/.fp.bin.xftp-part"
cp "$work/.fp.bin.xftp-part" "$work/fp.theirs"
expect_error "--resume of a foreign partial with other bytes" 'held before xftp are not the server.s: it is left as it was' \
	"$xftp" -q --resume get $url/big.bin "$work/fp.bin"
[ ! -e "$work/fp.bin" ] && cmp -s "$work/fp.theirs" "$work/.fp.bin.xftp-part" ||
	fail "a foreign prefix took the name, or was not left as it was"
marks=$(python3 -c 'import os, sys; print(" ".join(a for a in os.listxattr(sys.argv[1]) if a.startswith("user.xftp")))' "$work/.fp.bin.xftp-part")
[ -z "$marks" ] || fail "the foreign partial kept xftp's marks: $marks"
# Cut once continued, it is still someone else's: checked again, never started over.
"$xftp" -q -R 20M --resume get $url/big.bin "$work/fp.bin" &
client=$!
wait_size "$work/.fp.bin.xftp-part" $((4 * 1048576))
kill -9 $client
wait $client 2>/dev/null || true
expect_error "a plain get over a continued foreign partial" 'did not write it' \
	"$xftp" -q get $url/big.bin "$work/fp.bin"
expect_error "its --resume is checked again" 'held before xftp are not the server.s: it is left as it was' \
	"$xftp" -q --resume get $url/big.bin "$work/fp.bin"
cmp -s "$work/fp.theirs" "$work/.fp.bin.xftp-part" || fail "the cut foreign partial was not given back as it was"
rm "$work/.fp.bin.xftp-part"
head -c 1000000 "$root/big.bin" >"$work/.fp.bin.xftp-part"
"$xftp" --json --resume get $url/big.bin "$work/fp.bin" >"$work/json"
same "$root/big.bin" "$work/fp.bin" "--resume of a foreign partial holding the file's first bytes"
jq -e '.resumed_bytes == 1000000 and .verified == 1' "$work/json" >/dev/null ||
	fail "--resume of a true foreign prefix: $(cat "$work/json")"
pass "--resume of a partial xftp did not write checks it with HASH: a wrong one fails, a true one completes"

for p in 1 4; do
	rm -f "$work/big.bin"
	# Paced (-R, 50 MB/s), so that the kill comes long before the last byte.
	"$xftp" -q -P $p -R 400M get $url/big.bin "$work/big.bin" >/dev/null &
	client=$!
	wait_whole "$work/.big.bin.xftp-part" $((8 * 1048576))
	kill -9 $client
	wait $client 2>/dev/null || true
	[ ! -e "$work/big.bin" ] || fail "a killed download took its final name"
	"$xftp" --json -P $p --resume get $url/big.bin "$work/big.bin" >"$work/json"
	same "$root/big.bin" "$work/big.bin" "get -P $p resumed after kill -9 of the client"
	jq -e '.resumed_bytes > 0' "$work/json" >/dev/null || fail "get -P $p did not resume: $(cat "$work/json")"

	rm -f "$work/big.bin"
	"$xftp" -q -P $p get $url/big.bin "$work/big.bin" >/dev/null 2>&1 &
	client=$!
	wait_whole "$work/.big.bin.xftp-part" $((8 * 1048576))
	kill_xftpd
	status=0
	wait $client || status=$?
	# Four connections' socket buffers on loopback can hold the rest of the file: a server
	# killed after sending it all leaves a whole download. Else: exit 1, no final name.
	if [ $status -eq 0 ]; then
		same "$root/big.bin" "$work/big.bin" "get -P $p whole: the server died after its last byte"
		rm "$work/big.bin"
	else
		[ $status -eq 1 ] || fail "get -P $p: exit $status when the server died"
		[ ! -e "$work/big.bin" ] || fail "a cut download took its final name"
	fi
	start_xftpd 2122 "$root"
	"$xftp" -q -P $p --resume get $url/big.bin "$work/big.bin" >/dev/null
	same "$root/big.bin" "$work/big.bin" "get -P $p resumed after kill -9 of the server"

	# Slower still, so the upload cannot end between two looks at its resume point.
	slow_loopback 80mbit
	"$xftp" -q -P $p put "$work/big.bin" $url/up-big.$p >/dev/null 2>&1 &
	client=$!
	# xftpd keeps the resume point of a partial upload in .xftpd-part.KEY.len
	whole=0
	for _ in $(seq 600); do
		mark=$(find "$root" -name '.xftpd-part.*.len' | head -n 1)
		[ -n "$mark" ] && whole=$((10#$(tr -dc 0-9 <"$mark" || true)0 / 10))
		[ "$whole" -ge $((8 * 1048576)) ] && break
		kill -0 $client 2>/dev/null || fail "put -P $p ended before 8 MiB of it was seen whole"
		sleep 0.1
	done
	[ "$whole" -ge $((8 * 1048576)) ] || fail "no partial upload grew to 8 MiB"
	kill_xftpd
	slow_loopback 200mbit
	wait $client 2>/dev/null || true
	[ ! -e "$root/up-big.$p" ] || fail "a cut upload took its final name"
	start_xftpd 2122 "$root"
	"$xftp" --json -q -P $p --resume put "$work/big.bin" $url/up-big.$p >"$work/json"
	same "$work/big.bin" "$root/up-big.$p" "put -P $p resumed after kill -9 of the server"
	jq -e '.resumed_bytes > 0' "$work/json" >/dev/null || fail "put -P $p did not resume: $(cat "$work/json")"
done
slow_loopback off
echo "all $checks checks passed"
