#!/bin/bash
# The verbs data channel where it is not offered (xftpd --no-rdma; the host has no RDMA
# device, tests/vm runs the channel itself): FEAT names neither RPSV nor RPRT, both
# commands are refused with their own codes, and xftp -x verbs exits 1 with one line and
# leaves no file on either side. -x takes tcp or verbs only; --json names the link.
source "$(dirname "$0")/xftpd_lib.sh"
command -v jq >/dev/null || fail "jq is not installed"
make_store
put_file f.bin 300000
port=16471
start_xftpd "$port" --no-rdma
url="ftp://$user:$(printf '%s' "$pass" | sed 's/ /%20/g')@127.0.0.1:$port"
xftp=$DS_BIN/xftp

python3 - "$port" "$DS_SRC/tests/integration" "$user" "$pass" <<'PY' || fail "RPSV and RPRT refused"
import sys
sys.path.insert(0, sys.argv[2])
from xftpd_raw import Ctl
c = Ctl(int(sys.argv[1]))
feat = c.expect(211, 'FEAT')
assert ' RPSV' not in feat and ' RPRT' not in feat, feat
c.login(sys.argv[3], sys.argv[4])
c.expect(502, 'RPSV')
c.expect(502, 'RPRT 50000')
c.expect(501, 'RPRT 0')
c.expect(501, 'RPRT 70000')
c.expect(504, 'RPRT 80')
c.expect(501, 'RPRT 5,6')
c.expect(501, 'RPRT 0000050000')
c.expect(501, 'RPRT -5')
c.expect(501, 'RPRT')
c.expect(501, 'RPRT |9|127.0.0.1|50000|')
c.expect(504, 'RPRT |1|127.0.0.1|80|')
c.expect(504, 'RPRT |1|192.0.2.7|50000|')  # a third host, and no --fxp
c.expect(502, 'RPRT |1|127.0.0.1|50000|')  # the client's own host: refused only for --no-rdma
c.expect(501, 'RPSV 1')
c.expect(221, 'QUIT')
PY
pass "--no-rdma: FEAT names neither RPSV nor RPRT; RPSV 502, RPRT 502, bad ports and addresses 501, a third host or port below 1024 504"

cd "$work" || fail "cd $work"
expect_error "get -x verbs" 'offers no verbs data channel \(no RPRT in FEAT\)' \
	"$xftp" -q -x verbs get "$url/f.bin" got
for f in got .got.xftp-part; do
	[ ! -e "$f" ] || fail "get -x verbs left $f"
done
pass "get -x verbs left no file"
head -c 100000 /dev/urandom >up.bin
expect_error "put -x verbs" 'offers no verbs data channel \(no RPSV in FEAT\)' \
	"$xftp" -q -x verbs put up.bin "$url/up.bin"
left=$(find "$work/root" -mindepth 1 ! -name f.bin)
[ -z "$left" ] || fail "put -x verbs left $left"
pass "put -x verbs left no file on the server"
expect_error "cp -x verbs" 'offers no verbs data channel \(no RPRT in FEAT\): -x verbs cannot cp' \
	"$xftp" -q -x verbs cp "$url/f.bin" "$url/f2.bin"
status=0
"$xftp" -x udp get "$url/f.bin" got 2>"$work/err" || status=$?
[ "$status" = 2 ] || fail "-x udp: exit $status, $(cat "$work/err")"
grep -q "'udp' is not a data channel (tcp, verbs)" "$work/err" || fail "-x udp: $(cat "$work/err")"
pass "-x udp: exit 2, $(cat "$work/err")"
"$xftp" --json -x tcp get "$url/f.bin" got >"$work/json"
cmp -s got "$work/root/f.bin" || fail "get -x tcp: the bytes differ"
jq -e '.ok and .link == "tcp"' "$work/json" >/dev/null || fail "get -x tcp: $(cat "$work/json")"
pass "get -x tcp: the file, and --json says \"link\":\"tcp\""
log_clean
