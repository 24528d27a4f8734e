# xftpd over a striped store (--root d0,d1,d2,d3): clients see ordinary files; each file is
# a stripe set that the stripe command verifies; directories exist under every root.
source "$(dirname "$0")/xftpd_lib.sh"
make_store
dirs="$work/d0,$work/d1,$work/d2,$work/d3"
for d in d0 d1 d2 d3; do
	mkdir "$work/$d"
	[ "$(id -u)" -ne 0 ] || chown nobody "$work/$d"
done
head -c 10000001 /dev/urandom >"$work/f.bin"
port=16461
"$xftpd" -p "$port" --root "$dirs" --users "$work/users" "${run_as[@]}" 2>>"$work/xftpd.log" &
wait_listening "$port"
url="ftp://$user:s3cret%20pass@127.0.0.1:$port"

curl -sS -T "$work/f.bin" "$url/f.bin" || fail "curl put to the striped store"
"$DS_BIN/stripe" verify --data "$dirs" f.bin >/dev/null 2>&1 || fail "stripe verify: $("$DS_BIN/stripe" verify --data "$dirs" f.bin 2>&1)"
pass "a put lands as a stripe set over four directories, checksums sound"
curl -sS "$url/f.bin" -o "$work/g.bin" && same "$work/f.bin" "$work/g.bin" "get from the striped store"
curl -sS "$url/" >"$work/list" || fail "LIST"
grep -q ' 10000001 .* f.bin$' "$work/list" || fail "LIST shows no f.bin of 10000001 bytes: $(cat "$work/list")"
pass "LIST shows the striped file's logical size"
curl -sS --ftp-create-dirs -T "$work/f.bin" "$url/sub/g.bin" || fail "mkdir and put in a subdirectory"
for d in d0 d1 d2 d3; do [ -f "$work/$d/sub/g.bin" ] || fail "no member in $d/sub"; done
pass "MKD makes the directory under every root"
curl -sS -Q "RNFR sub/g.bin" -Q "RNTO h.bin" "$url/" >/dev/null || fail "rename"
"$DS_BIN/stripe" verify --data "$dirs" h.bin >/dev/null 2>&1 || fail "renamed file does not verify"
curl -sS -Q "DELE h.bin" -Q "RMD sub" "$url/" >/dev/null || fail "delete"
for d in d0 d1 d2 d3; do [ ! -e "$work/$d/h.bin" ] && [ ! -e "$work/$d/sub" ] || fail "$d: left after DELE, RMD"; done
pass "RNFR/RNTO, DELE and RMD act on every member"
python3 - "$port" "$DS_SRC/tests/integration" "$user" "$pass" "$work/f.bin" <<'PY' || fail "MODE E, REST"
import hashlib, sys
sys.path.insert(0, sys.argv[2])
from xftpd_raw import Ctl
data = open(sys.argv[5], 'rb').read()
c = Ctl(int(sys.argv[1]))
c.login(sys.argv[3], sys.argv[4])
c.expect(350, 'REST 10')
assert c.pasv_put('STOR f.bin', b'x') == 504
c.expect(200, 'MODE E')
c.expect(200, 'OPTS RETR Parallelism=2;')
assert c.modee_put('STOR e.bin', data, 2) == 226
c.expect(200, 'MODE S')
assert c.expect(213, 'HASH e.bin').split()[3] == hashlib.sha256(data).hexdigest()
code, got = c.pasv_get('RETR e.bin')
assert code == 226 and got == data
PY
pass "MODE E upload out of order into the striped store; REST + STOR refused (504)"

log_clean
