# MFMT (draft-somers-ftp-mfxx) sets a file's modification time; MDTM, MLST and MLSD read
# it back in UTC, whatever the server's time zone, on a plain and on a striped store. It
# is refused for a read-only session (550), a malformed time (501), a missing file or a
# directory (550), a path that leaves the root or names the store's own files.
source "$(dirname "$0")/xftpd_lib.sh"
make_store
for d in d0 d1 d2; do
	mkdir "$work/$d"
	[ "$(id -u)" -ne 0 ] || chown nobody "$work/$d"
done
mkdir -p "$work/outside"
echo secret >"$work/outside/o.txt"
ln -s "$work/outside/o.txt" "$work/root/escape"
[ "$(id -u)" -ne 0 ] || chown -h nobody "$work/root/escape"
touch -d '2001-01-01 00:00:00 UTC' "$work/outside/o.txt"

# A zone far from UTC: a server that printed local time would show it.
TZ=XST+5 start_xftpd 16471 --anonymous
plain_port=16471
tr '\0' '\n' <"/proc/$xftpd_pid/environ" | grep -qx 'TZ=XST+5' || fail "xftpd runs without TZ=XST+5"
"$xftpd" -p 16472 --root "$work/d0,$work/d1,$work/d2" --users "$work/users" "${run_as[@]}" \
	2>>"$work/xftpd.log" &
wait_listening 16472

# mfmt PORT: MFMT and its refusals through a raw client, on the store behind PORT.
mfmt() {
	python3 - "$1" "$DS_SRC/tests/integration" "$user" "$pass" <<'PY'
import sys
sys.path.insert(0, sys.argv[2])
from xftpd_raw import Ctl
port = int(sys.argv[1])
c = Ctl(port)
c.login(sys.argv[3], sys.argv[4])
assert ' MFMT' in c.expect(211, 'FEAT').split('\n'), 'FEAT lists no MFMT'
c.expect(200, 'TYPE I')
assert c.pasv_put('STOR t.bin', b't' * 300000) == 226
c.expect(257, 'MKD sub')
assert c.pasv_put('STOR sub/u.bin', b'u' * 1000) == 226

# 2021-03-04 05:06:07 UTC is 1614834367; a fraction is taken and the reply echoes the time.
assert c.expect(213, 'MFMT 20210304050607 t.bin') == '213 Modify=20210304050607; t.bin'
assert c.expect(213, 'MDTM t.bin') == '213 20210304050607'
assert 'modify=20210304050607;' in c.expect(250, 'MLST t.bin')
assert c.expect(213, 'SIZE t.bin') == '213 300000'
assert c.expect(213, 'MFMT 19991231235959.5 sub/u.bin') == '213 Modify=19991231235959.5; sub/u.bin'
c.expect(250, 'CWD sub')
assert c.expect(213, 'MDTM u.bin') == '213 19991231235959'
c.expect(250, 'CWD /')
code, listing = c.pasv_get('MLSD')
assert code == 226, code
line = [l for l in listing.decode().split('\r\n') if l.endswith(' t.bin')]
assert line and 'modify=20210304050607;' in line[0] and 'size=300000;' in line[0], listing

for bad in ('MFMT 2021030405060 t.bin', 'MFMT 20210230120000 t.bin', 'MFMT 20210304050607',
            'MFMT 20210304050607x t.bin', 'MFMT 20211304050607 t.bin', 'MFMT t.bin'):
    c.expect(501, bad)
c.expect(550, 'MFMT 20210304050607 none.bin')
c.expect(550, 'MFMT 20210304050607 sub')
c.expect(550, 'MFMT 20210304050607 .xftpd-part.0')
assert c.expect(213, 'MDTM t.bin') == '213 20210304050607', 'a refusal changed the time'
c.expect(221, 'QUIT')
print('ok MFMT on port %d' % port)
PY
}

mfmt "$plain_port" || fail "MFMT on a plain store"
[ "$(stat -c %Y "$work/root/t.bin")" = 1614834367 ] || fail "t.bin's time on disk: $(stat -c %Y "$work/root/t.bin")"
[ "$(TZ=UTC stat -c %y "$work/root/sub/u.bin")" = "1999-12-31 23:59:59.500000000 +0000" ] ||
	fail "u.bin's time on disk: $(TZ=UTC stat -c %y "$work/root/sub/u.bin")"
pass "MFMT sets the time (fraction included) that MDTM, MLST and MLSD report in UTC, TZ=XST+5 notwithstanding"

mfmt 16472 || fail "MFMT on a striped store"
[ "$(stat -c %Y "$work/d0/t.bin")" = 1614834367 ] || fail "member 0's time: $(stat -c %Y "$work/d0/t.bin")"
"$DS_BIN/stripe" verify --data "$work/d0,$work/d1,$work/d2" t.bin >/dev/null 2>&1 ||
	fail "t.bin no longer verifies after MFMT"
pass "MFMT on a striped store sets member 0's time, which MDTM and MLSD read; SIZE unchanged"

python3 - "$plain_port" "$DS_SRC/tests/integration" "$user" "$pass" <<'PY' || fail "MFMT refusals"
import sys
sys.path.insert(0, sys.argv[2])
from xftpd_raw import Ctl
c = Ctl(int(sys.argv[1]))
c.login(sys.argv[3], sys.argv[4])
c.expect(550, 'MFMT 20210304050607 escape')        # a link that leads out of the root
c.expect(550, 'MFMT 20210304050607 ../../outside/o.txt')  # stops at the root: no such file
c.expect(221, 'QUIT')
a = Ctl(int(sys.argv[1]))
a.login('anonymous', 'guest@example.org')
a.expect(550, 'MFMT 20000101000000 t.bin')
assert a.expect(213, 'MDTM t.bin') == '213 20210304050607'
a.expect(221, 'QUIT')
PY
[ "$(stat -c %Y "$work/outside/o.txt")" = "$(date -d '2001-01-01 00:00:00 UTC' +%s)" ] ||
	fail "MFMT reached a file outside the root"
pass "MFMT refused: anonymous read-only, a link out of the root (its target untouched)"
log_clean
