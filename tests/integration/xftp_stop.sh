#!/bin/bash
# xftp stops at once on SIGTERM and SIGINT, MODE S (sendfile and recv over one stream) as
# MODE E: over a 400 Mbit/s loopback a file of 300 MB takes about 6 s, and `timeout 2`
# must end a get or a put within 3.5 s, with status 143 (130 for SIGINT), one line on
# stderr, and the partial download kept for --resume.
. "$(dirname "$0")/xftp_lib.sh"

shm=$(mktemp -d /dev/shm/xftp-stop.XXXXXX)
trap 'rm -rf "$shm"; cleanup' EXIT
root=$shm/root
mkdir -p "$root" "$shm/here"
make_file "$root/big" $((300 << 20))
make_file "$shm/up" $((300 << 20))
start_xftpd 2230 "$root"
slow_loopback 400mbit

# stopped NAME STATUS SIGNAL CMD...: CMD under timeout -s SIGNAL 2 ends within 3.5 s with
# STATUS and one stderr line saying it stopped.
stopped() {
	local name=$1 want=$2 sig=$3 status=0
	shift 3
	local t0 t1
	t0=$(date +%s%N)
	# --foreground: timeout signals xftp alone. Without it, it signals xftp and then its
	# own process group, xftp again: a second signal that finds the first handled is the
	# one that exits at once, with no line (lib/stop.h).
	timeout --foreground --preserve-status -s "$sig" 2 "$@" >"$work/out" 2>"$work/err" </dev/null || status=$?
	t1=$(date +%s%N)
	local ms=$(((t1 - t0) / 1000000))
	[ "$status" -eq "$want" ] || fail "$name: status $status, not $want: $(cat "$work/err")"
	[ "$ms" -le 3500 ] || fail "$name: took $ms ms after a stop at 2 s"
	[ "$(wc -l <"$work/err")" -eq 1 ] || fail "$name: not one line: $(cat "$work/err")"
	grep -q 'stopped' "$work/err" || fail "$name: $(cat "$work/err")"
	pass "$name: $ms ms, status $status: $(cat "$work/err")"
}

cd "$shm/here"
stopped "get, one stream, SIGTERM" 143 TERM "$xftp" -q get ftp://bob:secret@127.0.0.1:2230/big
part=$shm/here/.big.xftp-part
[ -f "$part" ] && [ ! -e big ] || fail "the partial was not kept as $part"
kept=$(stat -c %s "$part")
[ "$kept" -gt 0 ] && [ "$kept" -lt $((300 << 20)) ] || fail "the partial holds $kept bytes"
pass "the partial keeps $kept bytes"
slow_loopback off
"$xftp" -q --resume get ftp://bob:secret@127.0.0.1:2230/big || fail "--resume after the stop"
same big "$root/big" "--resume completes the stopped get"
rm -f big
slow_loopback 400mbit

stopped "get, one stream, SIGINT" 130 INT "$xftp" -q get ftp://bob:secret@127.0.0.1:2230/big
rm -f .big.xftp-part
stopped "get, -P 4 (MODE E)" 143 TERM "$xftp" -q -P 4 get \
	ftp://bob:secret@127.0.0.1:2230/big
stopped "put, one stream (sendfile), SIGTERM" 143 TERM "$xftp" -q put "$shm/up" \
	ftp://bob:secret@127.0.0.1:2230/up
stopped "put, one stream, --no-sendfile" 143 TERM "$xftp" -q --no-sendfile put "$shm/up" \
	ftp://bob:secret@127.0.0.1:2230/up2
slow_loopback off
