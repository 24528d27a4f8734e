# xftpd for administrators: settings from a config file (-c) that the command line
# overrides; SIGHUP reloads it and the users file without dropping a transfer; users
# with roots of their own, and read-only ones.
source "$(dirname "$0")/xftpd_lib.sh"
make_store
chmod 711 "$work" # sessions open users' own roots as the unprivileged user
put_file f.bin 1048576

# --- The config file ------------------------------------------------------------------
# Passive ranges below the ephemeral ports (32768-60999), as in xftpd_admin.sh.
ro=()
[ "$(id -u)" -ne 0 ] || ro=("run-as = nobody")
cat >"$work/xftpd.conf" <<CONF
# a comment, then a blank line

port = 16521   # a comment after a value
root = $work/root
users = $work/users
anonymous = no
fxp = yes
pasv-ports = 30300-30309
${ro[@]:+${ro[0]}}
CONF
"$xftpd" -c "$work/xftpd.conf" 2>>"$work/xftpd.log" &
conf_pid=$!
wait_listening 16521
ftplib 16521 <<'PY' || fail "a session of xftpd -c"
data = io.BytesIO()
ftp.retrbinary('RETR f.bin', data.write)
assert data.getvalue() == open(work + '/root/f.bin', 'rb').read()
port = int(ftp.sendcmd('EPSV').split('|||')[1].split('|')[0])
assert 30300 <= port <= 30309, port
PY
pass "xftpd -c FILE listens on the file's port, serves its root and users, its passive range"

"$xftpd" -c "$work/xftpd.conf" -p 16522 --pasv-ports 30310-30311 2>>"$work/xftpd.log" &
wait_listening 16522
ftplib 16522 <<'PY' || fail "the command line over the config file"
port = int(ftp.sendcmd('EPSV').split('|||')[1].split('|')[0])
assert port in (30310, 30311), port
PY
pass "options on the command line override the file's"

# Each mistake: exit 2, one line naming the file and the line.
bad() {
	local what=$1 line=$2 pattern=$3
	shift 3
	printf '# bad\nroot = %s\n%s\n' "$work/root" "$line" >"$work/bad.conf"
	local status=0
	timeout 20 "$xftpd" -c "$work/bad.conf" -p 16529 --anonymous "$@" >/dev/null 2>"$work/err" ||
		status=$?
	[ "$status" -eq 2 ] || fail "$what: exit $status, not 2: $(cat "$work/err")"
	grep -q "bad.conf line 3.*$pattern" "$work/err" ||
		fail "$what: the error names no file and line: $(cat "$work/err")"
	[ "$(wc -l <"$work/err")" -eq 1 ] || fail "$what: more than one line: $(cat "$work/err")"
	pass "$what: $(cat "$work/err")"
}
bad "an unknown key" "prot = 21" "unknown key 'prot'"
bad "a bad value" "port = 70000" "port: '70000' is not a port"
bad "a bad range" "pasv-ports = 5-4" "pasv-ports"
bad "a flag neither yes nor no" "fxp = maybe" "fxp: 'maybe' is not yes or no"
bad "a key given twice" "root = /tmp" "root given twice"
bad "not key = value" "anonymous" "expected"
bad "a missing value" "users =" "users needs a value"
bad "a command-line-only key" "add-user = x" "unknown key 'add-user'"
expect_error "a missing config file" "nothing.conf" "$xftpd" -c "$work/nothing.conf"

# The example installed as /etc/xftpd.conf parses as it is, its paths overridden...
"$xftpd" -c "$DS_SRC/docs/xftpd.conf.example" -p 16523 --root "$work/root" \
	--users "$work/users" --xferlog "$work/example-xfer.log" "${run_as[@]}" \
	2>>"$work/xftpd.log" &
wait_listening 16523
pass "docs/xftpd.conf.example is read cleanly"
# ...and so does every setting it shows commented out (the first of each key): xftpd gets
# past all of them to binding the example's address, which is not this machine's.
grep -E '^#[a-z-]+ = ' "$DS_SRC/docs/xftpd.conf.example" | sed 's/^#//' |
	awk -F' = ' '!seen[$1]++' >"$work/all.conf"
[ "$(wc -l <"$work/all.conf")" -ge 20 ] || fail "the example shows few settings: $(cat "$work/all.conf")"
status=0
timeout 20 "$xftpd" -c "$work/all.conf" -p 16524 --root "$work/root" --users "$work/users" \
	--xferlog "$work/all-xfer.log" "${run_as[@]}" 2>"$work/err" || status=$?
[ "$status" -eq 1 ] && grep -q '192.0.2.10' "$work/err" ||
	fail "the example's commented settings: exit $status: $(cat "$work/err")"
pass "every setting the example shows parses (xftpd stops only at binding 192.0.2.10)"
kill "$conf_pid"
wait "$conf_pid" || true

# --- SIGHUP: a reload -----------------------------------------------------------------
# carol is in the users file at the start; after the reload bob is and carol is not.
printf 'carol pass\n' | "$xftpd" --add-user "$work/users" carol || fail "--add-user carol"
head -c 200000000 /dev/urandom >"$work/root/big.bin"
[ "$(id -u)" -ne 0 ] || chown nobody "$work/root/big.bin"
start_xftpd 16531 --xferlog "$work/xfer.log"
hup_pid=$xftpd_pid
login() { # login PORT NAME PASSWORD: prints the reply to PASS
	python3 - "$DS_SRC/tests/integration" "$@" <<'PY'
import sys
sys.path.insert(0, sys.argv[1])
from xftpd_raw import Ctl
c = Ctl(int(sys.argv[2]))
c.expect(331, 'USER ' + sys.argv[3])
c.send('PASS ' + sys.argv[4])
print(c.reply()[0])
PY
}
[ "$(login 16531 carol 'carol pass')" = 230 ] || fail "carol logs in before the reload"

# A 200 MB download that stops reading once 20 MB are in, until the reload is done.
python3 - "$work" <<'PY' &
import ftplib, os, sys, time
work = sys.argv[1]
ftp = ftplib.FTP()
ftp.connect('127.0.0.1', 16531, timeout=60)
ftp.login('alice', 's3cret pass')
got = [0]
out = open(work + '/big.got', 'wb')
def take(block):
    out.write(block)
    got[0] += len(block)
    if got[0] >= 20000000 and not os.path.exists(work + '/go'):
        open(work + '/holding', 'w').close()
        for _ in range(600):
            if os.path.exists(work + '/go'):
                break
            time.sleep(0.1)
ftp.retrbinary('RETR big.bin', take, blocksize=1 << 20)
out.close()
ftp.quit()
PY
get_pid=$!
for _ in $(seq 300); do [ -e "$work/holding" ] && break; sleep 0.1; done
[ -e "$work/holding" ] || fail "the download never got 20 MB"

printf 'bob pass\n' | "$xftpd" --add-user "$work/users" bob || fail "--add-user bob"
grep -v '^carol:' "$work/users" >"$work/users.new" && mv "$work/users.new" "$work/users"
# As logrotate's `create` does: the new file owned and moded as the old one.
mv "$work/xfer.log" "$work/xfer.log.1"
touch "$work/xfer.log"
chown --reference="$work/xfer.log.1" "$work/xfer.log"
chmod --reference="$work/xfer.log.1" "$work/xfer.log"
# As systemd's `kill` does by default: the listener and every session get the HUP.
kill -HUP "$hup_pid" $(pgrep -P "$hup_pid")
for _ in $(seq 100); do grep -q 'reloaded' "$work/xftpd.log" && break; sleep 0.1; done
grep -q 'reloaded' "$work/xftpd.log" || fail "no reload logged: $(tail -3 "$work/xftpd.log")"
grep -q "xftpd: reloaded users file $work/users\$" "$work/xftpd.log" ||
	fail "the reload without -c does not name the users file: $(grep reloaded "$work/xftpd.log")"
touch "$work/go"
wait "$get_pid" || fail "the download across the reload failed"
same "$work/big.got" "$work/root/big.bin" "a 200 MB download running across SIGHUP completes whole"
rm -f "$work/big.got"
kill -0 "$hup_pid" || fail "the listener is gone"
[ "$(ss -Hltnp 'sport = :16531' | grep -o 'pid=[0-9]*' | sort -u)" = "pid=$hup_pid" ] ||
	fail "port 16531 is not the same listener's: $(ss -Hltnp 'sport = :16531')"
pass "the same listener (pid $hup_pid) holds the port after SIGHUP"
[ "$(login 16531 bob 'bob pass')" = 230 ] || fail "bob, added, does not log in"
pass "a user added to the users file logs in after SIGHUP"
[ "$(login 16531 carol 'carol pass')" = 530 ] || fail "carol, removed, is not refused"
pass "a user removed from the users file is refused after SIGHUP"
ftplib 16531 <<'PY' || fail "a get after the reload"
ftp.retrbinary('RETR f.bin', io.BytesIO().write)
PY
for _ in $(seq 50); do [ -s "$work/xfer.log" ] && break; sleep 0.1; done
[ "$(id -u)" -ne 0 ] || [ "$(stat -c %U "$work/xfer.log.1")" = nobody ] ||
	fail "the transfer log is not given to the user xftpd serves as"
grep -q ' /f.bin b _ o r alice ftp 0 \* c$' "$work/xfer.log" ||
	fail "the reopened xferlog lacks the get: $(cat "$work/xfer.log" 2>&1)"
grep -q 'big.bin b _ o r alice' "$work/xfer.log.1" || fail "the rotated xferlog lacks big.bin"
pass "SIGHUP reopens --xferlog (logrotate): new lines in the new file"

# A broken users file on reload: logged, the old users kept.
cp "$work/users" "$work/users.good"
echo 'broken line' >>"$work/users"
kill -HUP "$hup_pid"
for _ in $(seq 100); do grep -q 'old settings are kept' "$work/xftpd.log" && break; sleep 0.1; done
grep -q "users line [0-9]*: expected.*old settings are kept" "$work/xftpd.log" ||
	fail "a broken users file is not logged: $(tail -3 "$work/xftpd.log")"
[ "$(login 16531 bob 'bob pass')" = 230 ] || fail "the old users are not kept"
pass "a broken users file on SIGHUP is logged and the old users kept"
cp "$work/users.good" "$work/users"
kill "$hup_pid"
wait "$hup_pid" || true

# A reload of the config file: a broken one changes nothing; a changed port is ignored
# (the socket stays), a changed setting is taken.
cat >"$work/reload.conf" <<CONF
port = 16532
root = $work/root
users = $work/users
pasv-ports = 30320-30320
${ro[@]:+${ro[0]}}
CONF
"$xftpd" -c "$work/reload.conf" 2>>"$work/xftpd.log" &
conf_pid=$!
wait_listening 16532
echo 'idle = soon' >>"$work/reload.conf"
kill -HUP "$conf_pid"
for _ in $(seq 100); do grep -q 'bad settings' "$work/xftpd.log" && break; sleep 0.1; done
grep -q "reload.conf line 6: idle: 'soon'" "$work/xftpd.log" && grep -q 'bad settings' "$work/xftpd.log" ||
	fail "a broken config file is not logged: $(tail -3 "$work/xftpd.log")"
# The bad line is a log line like the others, stamped with the time.
grep -Eq "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}[+-][0-9]{4} xftpd: .*reload.conf line 6: idle: 'soon'" \
	"$work/xftpd.log" || fail "the bad line is not a stamped log line: $(grep 'line 6' "$work/xftpd.log")"
# A wrong --anon-root on reload is refused as at start.
sed -i '/^idle/d' "$work/reload.conf"
printf 'anonymous = yes\nanon-root = %s\n' "$work/nopub" >>"$work/reload.conf"
kill -HUP "$conf_pid"
for _ in $(seq 100); do grep -q 'reload: --anon-root' "$work/xftpd.log" && break; sleep 0.1; done
grep -q "reload: --anon-root $work/nopub: No such file.*old settings are kept" "$work/xftpd.log" ||
	fail "a missing --anon-root on reload is not refused: $(tail -3 "$work/xftpd.log")"
sed -i '/^anon/d' "$work/reload.conf"
sed -i -e '/^idle/d' -e 's/^port = 16532/port = 16533/' -e 's/30320-30320/30321-30321/' \
	"$work/reload.conf"
kill -HUP "$conf_pid"
for _ in $(seq 100); do grep -q 'port changed' "$work/xftpd.log" && break; sleep 0.1; done
grep -q 'reload: port changed: ignored until a restart' "$work/xftpd.log" ||
	fail "a changed port is not logged as ignored: $(tail -3 "$work/xftpd.log")"
ftplib 16532 <<'PY' || fail "the reloaded passive range"
port = int(ftp.sendcmd('EPSV').split('|||')[1].split('|')[0])
assert port == 30321, port
PY
grep -q "xftpd: reloaded config file $work/reload.conf and users file $work/users\$" "$work/xftpd.log" ||
	fail "the reload does not name both files: $(grep reloaded "$work/xftpd.log")"
pass "a config file reloaded: broken, logged and kept; port ignored (logged); pasv-ports taken"
# Settings a restart changes (root, listen) outlive the text of the file they came from.
for round in 1 2 3; do
	kill -HUP "$conf_pid" 2>/dev/null ||
		fail "the listener died of reload $round: $(tail -3 "$work/xftpd.log")"
	sleep 0.3
done
kill -0 "$conf_pid" 2>/dev/null || fail "the listener died of its reloads: $(tail -3 "$work/xftpd.log")"
ftplib 16532 <<'PY' || fail "served after three more reloads"
ftp.sendcmd('NOOP')
PY
pass "the listener reloads the config file again and again, and serves"
kill "$conf_pid"
wait "$conf_pid" || true

# --- Users' own roots, read-only users, anonymous's root ------------------------------
mkdir -p "$work/alice" "$work/alice/sub" "$work/pub" "$work/root/dir"
echo "alice's" >"$work/alice/a.txt"
echo "public" >"$work/pub/p.txt"
ln -s "$work/root/f.bin" "$work/alice/link" # a way out, were symlinks followed
ln -s ../root "$work/alice/up"
[ "$(id -u)" -ne 0 ] || chown -R nobody "$work/alice" "$work/pub" "$work/root/dir"
printf '%s\n' "$pass" | "$xftpd" --add-user "$work/users2" alice --home "$work/alice" ||
	fail "--add-user --home"
printf 'reader pass\n' | "$xftpd" --add-user "$work/users2" reader --read-only ||
	fail "--add-user --read-only"
printf 'bob pass\n' | "$xftpd" --add-user "$work/users2" bob || fail "--add-user bob"
grep -q "^alice:[^:]*:$work/alice\$" "$work/users2" && grep -q '^reader:[^:]*::ro$' "$work/users2" &&
	grep -q '^bob:[^:]*$' "$work/users2" || fail "the users file: $(cat "$work/users2")"
pass "--add-user --home DIR and --read-only write name:hash:root and name:hash::ro"
printf '%s\n' "$pass" | "$xftpd" --add-user "$work/users2" alice || fail "--add-user alice again"
grep -q "^alice:[^:]*:$work/alice\$" "$work/users2" || fail "a new password lost alice's root"
pass "a new password for a user keeps the user's root"
expect_error "--home must be absolute" "absolute" "$xftpd" --add-user "$work/users2" x --home rel

mkdir -p "$work/s0" "$work/s1"
[ "$(id -u)" -ne 0 ] || chown nobody "$work/s0" "$work/s1"
printf 'sam pass\n' | "$xftpd" --add-user "$work/users2" sam --home "$work/s0,$work/s1" ||
	fail "--add-user --home with a striped root"
printf 'gone pass\n' | "$xftpd" --add-user "$work/users2" gone --home "$work/gone" ||
	fail "--add-user gone"
"$xftpd" -p 16541 --root "$work/root" --users "$work/users2" --anonymous \
	--anon-root "$work/pub" "${run_as[@]}" 2>>"$work/xftpd.log" &
wait_listening 16541
python3 - "$work" <<'PY' || fail "alice's own root"
import ftplib, io, sys
work = sys.argv[1]
ftp = ftplib.FTP()
ftp.connect('127.0.0.1', 16541, timeout=20)
ftp.login('alice', 's3cret pass')
names = sorted(ftp.nlst())
assert names == ['a.txt', 'sub'], names  # symlinks are not listed
got = io.BytesIO()
ftp.retrbinary('RETR a.txt', got.write)
assert got.getvalue() == b"alice's\n"
for path in ('f.bin', '/f.bin', '../root/f.bin', '/../root/f.bin', '../../root/f.bin',
             work + '/root/f.bin', 'link', 'up/f.bin'):
    try:
        ftp.retrbinary('RETR ' + path, io.BytesIO().write)
        raise SystemExit('RETR %s: served' % path)
    except ftplib.error_perm as e:
        assert str(e).startswith('550'), (path, e)
ftp.cwd('..')
assert ftp.pwd() == '/', ftp.pwd()
assert sorted(ftp.nlst()) == names
try:
    ftp.cwd('up')
    raise SystemExit('CWD up: a way out')
except ftplib.error_perm as e:
    assert str(e).startswith('550'), e
ftp.storbinary('STOR new.txt', io.BytesIO(b'new'))
ftp.quit()
PY
[ -f "$work/alice/new.txt" ] && [ ! -e "$work/root/new.txt" ] || fail "alice's upload landed elsewhere"
pass "alice sees and reaches only her root: not by name, .., an absolute path or a symlink; her uploads land there"

python3 - <<'PY' || fail "a user's striped root"
import ftplib, io, os
ftp = ftplib.FTP()
ftp.connect('127.0.0.1', 16541, timeout=20)
ftp.login('sam', 'sam pass')
data = os.urandom(3 << 20)
ftp.storbinary('STOR s.bin', io.BytesIO(data))
got = io.BytesIO()
ftp.retrbinary('RETR s.bin', got.write)
assert got.getvalue() == data
assert ftp.nlst() == ['s.bin'], ftp.nlst()
PY
[ -e "$work/s0/s.bin" ] && [ -e "$work/s1/s.bin" ] && [ ! -e "$work/root/s.bin" ] ||
	fail "sam's upload is not striped over his two directories"
pass "a user's root of two directories is a striped store of his own"

python3 - "$work" <<'PY' || fail "a read-only user"
import ftplib, io, sys
work = sys.argv[1]
ftp = ftplib.FTP()
ftp.connect('127.0.0.1', 16541, timeout=20)
ftp.login('reader', 'reader pass')
got = io.BytesIO()
ftp.retrbinary('RETR f.bin', got.write)
assert got.getvalue() == open(work + '/root/f.bin', 'rb').read()
for cmd in ('STOR x', 'APPE f.bin'):
    try:
        ftp.storbinary(cmd, io.BytesIO(b'x'))
        raise SystemExit(cmd + ': taken')
    except ftplib.error_perm as e:
        assert str(e).startswith('550'), (cmd, e)
for cmd in ('DELE f.bin', 'MKD d', 'RNFR f.bin', 'RMD dir', 'ALLO 10'):
    try:
        reply = ftp.sendcmd(cmd)
        raise SystemExit('%s: %s' % (cmd, reply))
    except ftplib.error_perm as e:
        assert str(e).startswith('550'), (cmd, e)
PY
[ -f "$work/root/f.bin" ] && [ -d "$work/root/dir" ] && [ ! -e "$work/root/x" ] ||
	fail "a read-only user changed the store"
pass "a read-only user reads; STOR, APPE, DELE, MKD, RNFR, RMD, ALLO each answer 550"

python3 - "$work" <<'PY' || fail "anonymous's root"
import ftplib, io, sys
ftp = ftplib.FTP()
ftp.connect('127.0.0.1', 16541, timeout=20)
ftp.login('anonymous', 'x@y')
assert ftp.nlst() == ['p.txt'], ftp.nlst()
try:
    ftp.storbinary('STOR y', io.BytesIO(b'y'))
    raise SystemExit('anonymous STOR taken')
except ftplib.error_perm as e:
    assert str(e).startswith('550'), e
ftp2 = ftplib.FTP()
ftp2.connect('127.0.0.1', 16541, timeout=20)
ftp2.login('bob', 'bob pass')
assert 'f.bin' in ftp2.nlst()
PY
pass "anonymous sees only --anon-root, read-only; a user without a root gets --root"
[ "$(login 16541 gone 'gone pass')" = 421 ] || fail "gone, whose root is missing, is not refused"
grep -q "gone .*: users file root $work/gone: No such file" "$work/xftpd.log" ||
	fail "a missing root from the users file is misnamed: $(grep 'gone ' "$work/xftpd.log")"
pass "a user's missing root is refused (421) and logged as the users file's"

"$xftpd" -p 16542 --root "$work/root" --anonymous --anon-root "$work/pub" --anon-write \
	"${run_as[@]}" 2>>"$work/xftpd.log" &
anon_pid=$!
wait_listening 16542
python3 - <<'PY' || fail "--anon-write"
import ftplib, io
ftp = ftplib.FTP()
ftp.connect('127.0.0.1', 16542, timeout=20)
ftp.login('anonymous', 'x@y')
ftp.storbinary('STOR up.txt', io.BytesIO(b'up'))
PY
[ -f "$work/pub/up.txt" ] || fail "the anonymous upload is not in --anon-root"
pass "--anon-write lets anonymous upload, into --anon-root"
kill -HUP "$anon_pid"
for _ in $(seq 100); do grep -q 'reloaded:' "$work/xftpd.log" && break; sleep 0.1; done
grep -q 'xftpd: reloaded: no config or users file to read$' "$work/xftpd.log" ||
	fail "a reload with no file to read is not said so: $(grep reloaded "$work/xftpd.log")"
pass "a reload with neither a config nor a users file says there was none to read"
expect_error "--anon-root without --anonymous" "go with --anonymous" \
	"$xftpd" -p 16543 --root "$work/root" --users "$work/users2" --anon-root "$work/pub"
# A wrong --anon-root stops the start, as a wrong --root does, not the first anonymous login.
expect_error "a missing --anon-root" "--anon-root $work/nopub: No such file" \
	"$xftpd" -p 16543 --root "$work/root" --anonymous --anon-root "$work/nopub" "${run_as[@]}"
expect_error "an --anon-root not a directory" "--anon-root $work/pub/p.txt: Not a directory" \
	"$xftpd" -p 16543 --root "$work/root" --anonymous --anon-root "$work/pub/p.txt" "${run_as[@]}"
log_clean
