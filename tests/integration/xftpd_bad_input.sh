# xftpd refuses bad options with one line and exit 2, and survives malformed, oversized
# and hostile commands; its limits (failed logins, login and idle deadlines, sessions) hold.
source "$(dirname "$0")/xftpd_lib.sh"
make_store
put_file f.bin 100000

# expect_error ... from lib.sh counts only lines not starting with "ttcp-": fine here.
expect_error "no options" "--root is required" "$xftpd"
expect_error "no users" "--users FILE is required" "$xftpd" --root "$work/root"
expect_error "port 0" "-p: '0' is not a port" "$xftpd" -p 0 --root "$work/root" --anonymous
expect_error "block too small" "-b: '1K' is out of range" "$xftpd" -b 1K --root "$work/root" --anonymous
expect_error "bad idle" "--idle: 'soon' is not a duration" "$xftpd" --idle soon --root "$work/root" --anonymous
expect_error "bad count" "--max-sessions: '0' is not a count" "$xftpd" --max-sessions 0 --root "$work/root" --anonymous
expect_error "bad host fails" "--max-host-fails: 'x' is not a count" "$xftpd" --max-host-fails x --root "$work/root" --anonymous
expect_error "bad ban time" "--ban-time: '0' is not a duration" "$xftpd" --ban-time 0 --root "$work/root" --anonymous
expect_error "unknown option" "unknown option '--frobnicate'" "$xftpd" --frobnicate
expect_error "missing root" "--root $work/none" "$xftpd" -p 16499 --root "$work/none" --anonymous
expect_error "one directory twice in a striped root" "$work/root and $work/root/ are the same directory" \
	"$xftpd" -p 16499 --root "$work/root,$work/root/" --anonymous
expect_error "missing users file" "users file $work/nousers" "$xftpd" -p 16499 --root "$work/root" --users "$work/nousers"
printf 'bob:plaintext\n' >"$work/badusers"
expect_error "bad users line" "line 1: the hash of bob" "$xftpd" -p 16499 --root "$work/root" --users "$work/badusers"
expect_error "bad user name" "'b:ad' is not a user name" sh -c "echo pw | '$xftpd' --add-user '$work/u2' 'b:ad'"
expect_error "empty password" "empty password" sh -c "echo | '$xftpd' --add-user '$work/u2' carol"
if [ "$(id -u)" -eq 0 ]; then
	mkdir "$work/rootowned"
	expect_error "root refused" "refusing to serve as root" "$xftpd" -p 16499 --root "$work/rootowned" --anonymous
	expect_error "unknown --run-as" "--run-as nosuchuser: no such user" "$xftpd" -p 16499 --root "$work/root" --anonymous --run-as nosuchuser
fi

# --add-user keeps other lines and comments, and replaces a user's hash in place.
printf '# staff\n' >"$work/u3"
printf 'one\n' | "$xftpd" --add-user "$work/u3" bob
printf 'two\n' | "$xftpd" --add-user "$work/u3" carol
printf 'three\n' | "$xftpd" --add-user "$work/u3" bob
[ "$(sed -n 1p "$work/u3")" = "# staff" ] && [ "$(cut -d: -f1 "$work/u3" | tr '\n' ' ')" = "# staff bob carol " ] ||
	fail "--add-user rewrote the file wrongly: $(cat "$work/u3")"
grep -q '^bob:\$y\$' "$work/u3" || fail "--add-user did not write a yescrypt hash"
pass "--add-user adds and replaces users, keeping comments"
# Hashes from the usual tools work as they are.
printf 'dave:%s\n' "$(openssl passwd -6 'sha pass')" >>"$work/u3"
printf 'erin:%s\n' "$(echo 'yes pass' | mkpasswd -s -m yescrypt)" >>"$work/u3"

port=16421
start_xftpd "$port" --users "$work/u3" --max-fails 2 --login-timeout 2 --idle 2 --max-sessions 3
python3 - "$port" "$DS_SRC/tests/integration" <<'PY' || fail "protocol checks"
import sys, time
sys.path.insert(0, sys.argv[2])
from xftpd_raw import Ctl
port = int(sys.argv[1])

c = Ctl(port)
c.expect(530, 'LIST')
c.expect(530, 'RETR f.bin')
c.expect(500, 'X' * 5000)                    # over-long, then still usable
c.expect(200, 'NOOP')
c.expect(500, b'RETR a\x00b\r\n')
c.expect(500, b'\x01\x02\x03\r\n')
c.expect(500, 'FROBNICATE')
c.expect(500, 'XYZW')
c.expect(502, 'ACCT x')
c.expect(500, b'\xff\xff\xff\r\n')
c.expect(200, b'NO\xff\xfb\x01OP\r\n')       # a Telnet option inside is removed
c.expect(331, 'USER dave')
c.expect(230, 'PASS sha pass')
c.expect(501, 'RETR')
c.expect(501, 'RETR a\x01b')
c.expect(504, 'TYPE X')
c.expect(504, 'MODE B')
c.expect(504, 'STRU R')
c.expect(501, 'REST -1')
too_large = '501 Number too large: the largest is 999999999999999999.'
for offset in ('9223372036854775807', '18446744073709551616', '9' * 40):  # 2^63-1, 2^64
    got = c.expect(501, 'REST ' + offset)
    assert got == too_large, 'REST %s: %r' % (offset, got)
got = c.expect(501, 'REST abc')
assert got == '501 Expected a decimal number.', 'REST abc: %r' % got
c.expect(501, 'REST 12abc')
c.expect(501, 'RANG 10 5')
c.expect(501, 'PORT 1,2,3')
c.expect(501, 'PORT 300,0,0,1,4,1')
c.expect(504, 'PORT 127,0,0,1,0,21')         # bounce protection: no port below 1024
c.expect(504, 'PORT 127,0,0,2,40,1')         # a third host only with --fxp
c.expect(501, 'EPRT |1|not-an-address|5000|')
c.expect(522, 'EPRT |3|x|5000|')
c.expect(501, 'OPTS RETR Parallelism=17;')
c.expect(501, 'OPTS HASH MD5')
c.expect(503, 'RNTO x')
c.expect(530, 'USER again')
c.sock.sendall(b'NOOP\r\n' * 50)             # pipelined commands each get a reply
for _ in range(50):
    c.expect(200)
c.sock.sendall(b'A' * (1 << 20))             # a megabyte without a line end
c.expect(500)
c.expect(200, '\r\nNOOP')
c.expect(221, 'QUIT')
print('ok malformed and oversized commands')

c = Ctl(port)
c.login('erin', 'yes pass')
c.expect(221, 'QUIT')
print('ok yescrypt hash from mkpasswd')

c = Ctl(port)
c.expect(331, 'USER bob')
c.expect(530, 'PASS wrong')
c.expect(331, 'USER bob')
c.expect(421, 'PASS wrong again')
assert c.closed(), 'session open after too many failed logins'
print('ok --max-fails ends the session')

c = Ctl(port)
c.expect(331, 'USER anonymous')
c.expect(530, 'PASS guest@')
print('ok no anonymous unless asked')

c = Ctl(port)
assert 'No login in time' in c.reply()[1]
assert c.closed()
print('ok --login-timeout')

c = Ctl(port)
c.login('carol', 'two')
t = time.time()
code, text = c.reply()
assert code == 421 and 'Idle' in text and time.time() - t < 10, text
print('ok --idle')

assert c.closed()
# Ended sessions leave the table once their process is reaped: retry until 3 fit.
for attempt in range(100):
    try:
        held = [Ctl(port) for _ in range(3)]
        break
    except (AssertionError, EOFError):
        time.sleep(0.1)
else:
    raise AssertionError('three sessions never fit under --max-sessions 3')
import socket
extra = socket.create_connection(('127.0.0.1', port), timeout=10)
text = extra.makefile('rb').readline().decode()
assert text.startswith('421') and 'Too many sessions' in text, text
print('ok --max-sessions')
PY
pass "malformed and oversized commands, hashes, failed logins, deadlines, session limit"
kill "$xftpd_pid"
wait "$xftpd_pid" || fail "xftpd did not end cleanly on SIGTERM"
grep -q "xftpd: stopped" "$work/xftpd.log" || fail "no 'stopped' line"
pass "SIGTERM ends xftpd with status 0"

# A SIGTERM that comes while the port opens (listen() held back 3 s) is a stop too,
# not the signal's default action.
"${strace_cmd[@]}" -qq -o /dev/null \
	-e trace=listen -e inject=listen:delay_exit=3000000 \
	"$xftpd" -p 16423 --root "$work/root" --users "$work/users" "${run_as[@]}" \
	2>>"$work/xftpd.log" &
tracer=$!
# Its socket listens from the start of the hold: xftpd is then past exec and its handlers.
# Sooner, pgrep may find one of strace's short-lived ptrace probes, or the tracee before exec.
wait_listening 16423
server=$(pgrep -P "$tracer") || fail "xftpd under strace has no process"
kill -TERM "$server" || fail "xftpd ended before the SIGTERM: $(tail -3 "$work/xftpd.log")"
for _ in $(seq 100); do
	kill -0 "$tracer" 2>/dev/null || break
	sleep 0.1
done
if kill -0 "$tracer" 2>/dev/null; then
	kill -KILL "$server" "$tracer" 2>/dev/null || true
	fail "xftpd still ran 10 s after a SIGTERM as its port opened"
fi
status=0
wait "$tracer" || status=$?
[ "$status" -eq 0 ] || fail "a SIGTERM as the port opened ended xftpd with status $status"
pass "a SIGTERM as the port opens stops xftpd with status 0"

# A client that pipelines commands and never reads a reply: its session still ends at the
# login deadline, and SIGTERM still ends xftpd within 2 s while such a session is open.
start_xftpd 16424 --users "$work/u3" --login-timeout 2
python3 - "$xftpd_pid" <<'PY' || fail "a client that never reads held its session or a stop"
import os, signal, socket, sys, time
pid = int(sys.argv[1])
children = '/proc/%d/task/%d/children' % (pid, pid)
def flood():
    c = socket.socket()
    c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    c.connect(('127.0.0.1', 16424))
    c.setblocking(False)
    line = b'FEAT\r\n' * 512
    deadline = time.time() + 10
    while time.time() < deadline:  # until neither side's buffers take more
        try:
            c.send(line)
        except BlockingIOError:
            time.sleep(0.2)
            try:
                c.send(line)
            except BlockingIOError:
                return c
    raise AssertionError('the control connection never filled')
def running(p):
    try:
        return open('/proc/%s/stat' % p).read().rsplit(')', 1)[1].split()[0] != 'Z'
    except (FileNotFoundError, ProcessLookupError):  # gone, or going as we read
        return False
def sessions():  # session processes still running (an ended one waits to be reaped)
    return [p for p in open(children).read().split() if running(p)]
held = flood()
t = time.time()
while sessions() and time.time() - t < 15:
    time.sleep(0.1)
assert not sessions(), 'a non-reading session outlived --login-timeout 2 by 15 s'
print('ok a non-reading session ends at its login deadline, in %.1f s' % (time.time() - t))
held.close()
held = flood()
t = time.time()
os.kill(pid, signal.SIGTERM)
while running(pid) and time.time() - t < 10:
    time.sleep(0.02)
took = time.time() - t
assert took < 2, 'SIGTERM took %.2f s with a non-reading session open' % took
print('ok SIGTERM ends xftpd in %.2f s beside a non-reading session' % took)
PY
wait "$xftpd_pid" || fail "xftpd did not end cleanly on SIGTERM beside a non-reading client"
pass "a client that never reads replies holds neither its session nor a SIGTERM"

# The example users file of docs/ loads, and its users log in with the passwords it names.
"$xftpd" -p 16422 --root "$work/root" --users "$DS_SRC/docs/xftpd.users.example" "${run_as[@]}" \
	2>>"$work/xftpd.log" &
wait_listening 16422
for login in alice:example-alice bob:example-bob; do
	curl -sS "ftp://${login/:/:}@127.0.0.1:16422/" >/dev/null || fail "example user ${login%%:*} cannot log in"
done
pass "docs/xftpd.users.example: yescrypt and SHA-512 users log in"


# --listen ADDR: that address only.
"$xftpd" -p 16423 --listen 127.0.0.1 --max-per-host 1 --root "$work/root" --users "$work/users" \
	"${run_as[@]}" 2>>"$work/xftpd.log" &
perhost_pid=$!
wait_listening 16423
ss -Hltn "sport = :16423" | grep -q '127.0.0.1:16423' || fail "--listen 127.0.0.1: $(ss -Hltn "sport = :16423")"
! curl -sS -g "ftp://$user:x@[::1]:16423/" 2>/dev/null || fail "--listen 127.0.0.1 answered on ::1"
pass "--listen ADDR listens on that address only"
python3 - "$DS_SRC/tests/integration" "$perhost_pid" <<'PY' || fail "--max-per-host"
import socket, sys, time
sys.path.insert(0, sys.argv[1])
from xftpd_raw import Ctl
held = Ctl(16423)
extra = socket.create_connection(('127.0.0.1', 16423), timeout=10)
text = extra.makefile('rb').readline().decode()
assert text.startswith('421') and 'from your address' in text, text
# Once the session's process has ended, the next client gets in at the first try.
held.expect(221, 'QUIT')
assert held.closed()
def running(pid):
    try:
        return open('/proc/%s/stat' % pid).read().rsplit(')', 1)[1].split()[0] != 'Z'
    except FileNotFoundError:
        return False
children = '/proc/%s/task/%s/children' % (sys.argv[2], sys.argv[2])
for _ in range(200):
    if not any(running(pid) for pid in open(children).read().split()):
        break
    time.sleep(0.05)
else:
    raise AssertionError('the session process never ended')
Ctl(16423)
PY
pass "--max-per-host refuses a second session from one address, and frees its place when it ends"

# A session that cannot start the thread that watches a transfer (threads refused: strace
# makes every clone3 fail) answers a listing, a download and a hash 451 and stays usable.
if command -v strace >/dev/null; then
	start_xftpd 16425
	python3 - 16425 "$DS_SRC/tests/integration" "$xftpd_pid" "$user" "$pass" <<'PY' ||
import sys
sys.path.insert(0, sys.argv[2])
from xftpd_raw import Ctl, traced
port, server, user, password = int(sys.argv[1]), int(sys.argv[3]), sys.argv[4], sys.argv[5]

def login():
    c = Ctl(port)
    c.login(user, password)
    return c

c, tracer = traced(server, login, ['-f', '-qq', '-o', '/dev/null', '-e', 'trace=clone3',
                                   '-e', 'inject=clone3:error=EAGAIN'])
for verb in ('LIST', 'NLST', 'MLSD', 'RETR f.bin', 'HASH f.bin'):
    c.expect(227, 'PASV')
    c.expect(451, verb)
c.expect(200, 'NOOP')
c.expect(221, 'QUIT')
tracer.wait()
PY
		fail "a session without its watcher thread left a command unanswered"
	kill "$xftpd_pid"
	wait "$xftpd_pid" || true
	pass "without a thread to watch it, a listing, a download and a hash are answered 451"
fi

log_clean
