# xftpd against clients that hold what it gives them: a STAT reply never read, many
# sessions from one IPv6 /64, and many sessions asking for 16 streams each and never
# reading them. Each must cost the server a bounded time or a bounded amount of memory
# (xftpd(8): --idle, --max-per-host, --max-mem), and the server must serve again after.
source "$(dirname "$0")/../integration/xftpd_lib.sh"
make_store
raw_dir=$DS_SRC/tests/integration
idle_s=2

# sessions_of PID: how many session processes the listener PID has running (an ended
# one is a zombie until the listener's next wakeup reaps it).
sessions_of() {
	ps --ppid "$1" -o stat= | grep -vc '^Z' || true
}

# stop_xftpd: SIGTERM, and the listener must be gone within 8 s (its sessions too).
stop_xftpd() {
	kill -TERM "$xftpd_pid"
	for _ in $(seq 80); do
		kill -0 "$xftpd_pid" 2>/dev/null || break
		sleep 0.1
	done
	! kill -0 "$xftpd_pid" 2>/dev/null || fail "xftpd outlived SIGTERM by 8 s"
	wait "$xftpd_pid" 2>/dev/null || true
}

# --- A STAT reply never read: 8 sessions at --max-sessions 8, anonymous. Before, each
# held its session forever in a send with no deadline, and the server answered everyone
# else 421.
mkdir -p "$work/root/big"
python3 - "$work/root/big" <<'PY'
import os, sys
# about 8 MB of listing: more than a loopback socket's buffers on both sides hold
for i in range(30000):
    open(os.path.join(sys.argv[1], 'f%05d_' % i + 'x' * 200), 'w').close()
PY
port=16531
start_xftpd "$port" --anonymous --max-sessions 8 --idle "$idle_s"
python3 - "$port" "$raw_dir" "$idle_s" "$xftpd_pid" <<'PY' || fail "STAT never read"
import os, socket, sys, time
sys.path.insert(0, sys.argv[2])
from xftpd_raw import Ctl
port, idle, listener = int(sys.argv[1]), float(sys.argv[3]), int(sys.argv[4])

def sessions():
    """Session processes running (an ended one is a zombie until the next accept)."""
    return len(os.popen("ps --ppid %d -o stat= | grep -v '^Z'" % listener).read().split())

holders = []
for _ in range(8):
    c = Ctl(port)
    c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    c.expect(331, 'USER anonymous')
    c.expect(230, 'PASS ')  # anonymous: no password
    c.send('STAT /big')
    holders.append(c)
sent = time.time()
# The server fills what it can and waits: the session must end by --idle + 3 s.
while sessions() > 0 and time.time() - sent < idle + 3:
    time.sleep(0.1)
left = sessions()
assert left == 0, '%d of 8 sessions still held %.1f s after a STAT never read (--idle %g)' % (
    left, time.time() - sent, idle)
print('ok 8 sessions ended %.1f s after a STAT reply never read (--idle %g)'
      % (time.time() - sent, idle))
# and the server serves again: a new session is greeted, not 421
c = Ctl(port)
c.expect(331, 'USER anonymous')
c.expect(230, 'PASS ')
c.expect(221, 'QUIT')
print('ok a new session is served after them')
for h in holders:
    h.sock.close()
PY
pass "a STAT never read holds a session no longer than --idle"

# The same stuck STAT ends on SIGTERM, long before a 300 s --idle.
python3 - "$port" "$raw_dir" <<'PY' &
import socket, sys, time
sys.path.insert(0, sys.argv[2])
from xftpd_raw import Ctl
c = Ctl(int(sys.argv[1]))
c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
c.expect(331, 'USER anonymous')
c.expect(230, 'PASS ')
c.send('STAT /big')
time.sleep(30)
PY
holder=$!
for _ in $(seq 50); do
	[ "$(sessions_of "$xftpd_pid")" -gt 0 ] && break
	sleep 0.1
done
sleep 0.5 # the session is in its STAT
started=$(date +%s%N)
stop_xftpd
elapsed_ms=$((($(date +%s%N) - started) / 1000000))
[ "$elapsed_ms" -lt 3000 ] || fail "a session stuck in STAT held SIGTERM ${elapsed_ms} ms"
pass "a session stuck in a STAT reply ends on SIGTERM (${elapsed_ms} ms)"
kill "$holder" 2>/dev/null || true
wait "$holder" 2>/dev/null || true
rm -rf "$work/root/big"

# --- --max-per-host counts an IPv6 /64 as one address, as the login ban does. Needs
# addresses of our own: only in the test's own network namespace (root).
if [ -n "${XFTPD_NETNS:-}" ]; then
	for n in 10 11 12; do
		ip addr add "fd00:d5::$n/128" dev lo
	done
	port=16532
	start_xftpd "$port" --max-per-host 2
	python3 - "$port" "$raw_dir" <<'PY' || fail "--max-per-host and IPv6"
import socket, sys
sys.path.insert(0, sys.argv[2])
port = int(sys.argv[1])

def greeting(source):
    s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    s.settimeout(10)
    s.bind((source, 0))
    s.connect(('fd00:d5::1', port))
    return s, s.makefile('rb').readline().decode().strip()

held = []
for n in (10, 11):
    s, text = greeting('fd00:d5::%d' % n)
    assert text.startswith('220'), text
    held.append(s)
s, text = greeting('fd00:d5::12')
assert text.startswith('421 Too many sessions from your address'), \
    'a third session from one /64 with --max-per-host 2: %r' % text
print('ok a third address of one /64 is refused: %s' % text)
PY
	pass "--max-per-host counts an IPv6 /64 once"
	stop_xftpd
fi

# --- Memory across sessions: 20 sessions ask MODE E with 16 streams each and read none.
# Under --max-mem 256M the server's resident memory stays within 512 MB and the sessions
# beyond the budget get a clear 451; then the budget comes back.
truncate -s 2G "$work/root/huge" # sparse: costs no disk
printf 'a small file for after\n%.0s' $(seq 2000) >"$work/root/small"
[ "$(id -u)" -ne 0 ] || chown nobody "$work/root/huge" "$work/root/small"
port=16533
mem_opts=()
if "$xftpd" --help | grep -q -- --max-mem; then
	mem_opts=(--max-mem 256M)
fi
sanitized=0
! grep -qa __asan_init "$xftpd" || sanitized=1
start_xftpd "$port" --idle 60 --max-per-host 32 "${mem_opts[@]}"
python3 - "$port" "$raw_dir" "$user" "$pass" "$xftpd_pid" "$sanitized" "$work/root/small" <<'PY' || fail "memory across sessions"
import os, socket, sys, time
sys.path.insert(0, sys.argv[2])
from xftpd_raw import Ctl
port, user, password = int(sys.argv[1]), sys.argv[3], sys.argv[4]
listener, sanitized, small = int(sys.argv[5]), sys.argv[6] == '1', sys.argv[7]
BOUND = 512 * 10**6  # MB as dragstrip counts them

def rss():
    """Resident bytes of the listener and its sessions together (VmRSS)."""
    total = 0
    pids = [listener] + [int(p) for p in os.popen('pgrep -P %d' % listener).read().split()]
    for pid in pids:
        try:
            for line in open('/proc/%d/status' % pid):
                if line.startswith('VmRSS:'):
                    total += int(line.split()[1]) * 1024
        except OSError:
            pass
    return total

def session():
    c = Ctl(port)
    c.login(user, password)
    c.expect(200, 'TYPE I')
    c.expect(200, 'MODE E')
    c.expect(200, 'OPTS RETR Parallelism=16')
    return c

ctls = [session() for _ in range(20)]
before = rss()
held, refused = [], []
for c in ctls:
    got = c.data('RETR huge', streams=16)
    if isinstance(got, int):
        refused.append(got)
    else:
        held.append(got)
peak = 0
for _ in range(20):  # the pipelines fill their buffers: take the largest of 2 s
    peak = max(peak, rss())
    time.sleep(0.1)
print('ok %d sessions hold 16 unread streams, %d refused; resident %.0f MB (before %.0f MB)'
      % (len(held), len(refused), peak / 1e6, before / 1e6))
if sanitized:  # ASan's own memory is not the server's: count what the transfers added
    assert peak - before <= BOUND - (128 << 20), 'transfers added %.0f MB' % ((peak - before) / 1e6)
else:
    assert peak <= BOUND, 'xftpd resident %.0f MB with 20 x 16 unread streams (bound %.0f MB)' % (
        peak / 1e6, BOUND / 1e6)
assert held, 'no session got its transfer'
assert refused and all(code == 451 for code in refused), refused
for conns in held:
    for s in conns:
        s.close()
for c in ctls:
    c.sock.close()

# Those sessions end; the budget is whole again: a 16-stream RETR and a plain one work.
deadline = time.time() + 15
while os.popen('pgrep -P %d' % listener).read().split() and time.time() < deadline:
    time.sleep(0.1)
want = open(small, 'rb').read()
c = session()
conns = c.data('RETR small', streams=16)
assert not isinstance(conns, int), 'RETR after the sessions ended: %r' % conns
for s in conns:
    s.settimeout(20)
    while s.recv(1 << 16):
        pass
c.expect(226)
c.expect(200, 'MODE S')
code, got = c.pasv_get('RETR small')
assert code == 226 and got == want, (code, len(got))
print('ok after them, a 16-stream RETR and a plain one are served')
PY
pass "20 sessions x 16 unread streams stay within 512 MB; the rest get 451"

# A session killed with -9 mid-transfer does not keep its share: with room for one
# 16-stream transfer, the next session gets it once the dead one is reaped.
if [ ${#mem_opts[@]} -gt 0 ]; then
	stop_xftpd
	start_xftpd "$port" --idle 60 --max-mem 64M
	python3 - "$port" "$raw_dir" "$user" "$pass" "$xftpd_pid" <<'PY' || fail "kill -9 and the budget"
import os, signal, sys, time
sys.path.insert(0, sys.argv[2])
from xftpd_raw import Ctl
port, user, password, listener = int(sys.argv[1]), sys.argv[3], sys.argv[4], int(sys.argv[5])

def session():
    c = Ctl(port)
    c.login(user, password)
    for cmd in ('TYPE I', 'MODE E', 'OPTS RETR Parallelism=16'):
        c.expect(200, cmd)
    return c

first = session()
conns = first.data('RETR huge', streams=16)
assert not isinstance(conns, int), conns
second = session()
code = second.data('RETR huge', streams=16)
assert code == 451, 'a second 64 MiB transfer within --max-mem 64M: %r' % code
print('ok the budget holds one 16-stream transfer; the second: 451')
killed = os.popen('pgrep -P %d' % listener).read().split()
for pid in killed:
    os.kill(int(pid), signal.SIGKILL)
# Until the listener has reaped them (it does at every wakeup, 10 a second): a session
# whose main thread is a zombie is not reaped before its other threads have gone.
for _ in range(100):
    if not any(os.path.exists('/proc/%s' % p) for p in killed):
        break
    time.sleep(0.1)
third = session()
conns = third.data('RETR huge', streams=16)
assert not isinstance(conns, int), 'after kill -9 of the holder: %r' % conns
print('ok after kill -9 of the holder, its share came back')
PY
	pass "a session killed with -9 gives its budget back when reaped"

	# The same with no new connection after the kill: the listener reaps the dead session
	# by itself within a second or two, and the session already waiting gets the share.
	python3 - "$port" "$raw_dir" "$user" "$pass" "$xftpd_pid" <<'PY' || fail "kill -9 and the budget, no new connection"
import os, signal, sys, time
sys.path.insert(0, sys.argv[2])
from xftpd_raw import Ctl
port, user, password, listener = int(sys.argv[1]), sys.argv[3], sys.argv[4], int(sys.argv[5])

def children():
    return set(os.popen('pgrep -P %d' % listener).read().split())

def zombies():
    out = []
    for p in children():
        try:
            if open('/proc/%s/stat' % p).read().split(') ')[1][0] == 'Z':
                out.append(p)
        except OSError:
            pass
    return out

def session():
    c = Ctl(port)
    c.login(user, password)
    for cmd in ('TYPE I', 'MODE E', 'OPTS RETR Parallelism=16'):
        c.expect(200, cmd)
    return c

time.sleep(1)  # the sessions of the case before are reaped
before = children()
first = session()
holder = children() - before
assert len(holder) == 1, 'cannot tell the holder from %s' % holder
conns = first.data('RETR huge', streams=16)
assert not isinstance(conns, int), conns
second = session()
assert second.data('RETR huge', streams=16) == 451, 'the budget held a second transfer'
killed = time.time()
os.kill(int(holder.pop()), signal.SIGKILL)
while time.time() - killed < 2 and (zombies() or len(children()) > 1):
    time.sleep(0.05)
assert not zombies(), 'the killed session is still a zombie %.1f s after its kill' % (time.time() - killed)
print('ok reaped %.2f s after the kill, with no new connection' % (time.time() - killed))
conns = second.data('RETR huge', streams=16)
assert not isinstance(conns, int), 'the waiting session after the kill: %r' % conns
print('ok the session already open got the share back')
PY
	pass "a session killed with -9 is reaped, and its budget back, without a new connection"
fi

# Replies that name the limit an upload met: a MODE E block far past what the file system
# takes, with no ALLO, is not "more than announced"; ALLO with more data names its size;
# an APPE that would start past what ALLO announced is refused before any data.
stop_xftpd
start_xftpd "$port"
put_file ten.bin 10
python3 - "$port" "$raw_dir" "$user" "$pass" <<'PY' || fail "replies to uploads past a limit"
import sys
sys.path.insert(0, sys.argv[2])
from xftpd_raw import Ctl
port, user, password = int(sys.argv[1]), sys.argv[3], sys.argv[4]
c = Ctl(port)
c.login(user, password)
c.expect(200, 'TYPE I')

def put_far(name):
    c.expect(200, 'MODE E')
    conns = c.data('STOR ' + name)
    assert not isinstance(conns, int), conns
    far = 1 << 62
    conns[0].sendall(bytes([0]) + (10).to_bytes(8, 'big') + far.to_bytes(8, 'big') + b'Z' * 10)
    conns[0].sendall(bytes([0x48]) + (0).to_bytes(8, 'big') + (1).to_bytes(8, 'big'))
    conns[0].close()
    got = c.reply()
    c.expect(200, 'MODE S')
    return got

code, text = put_far('far.bin')
assert code == 552 and 'announced' not in text and 'largest file' in text, text
print('ok a far block with no ALLO:', text)
c.expect(200, 'ALLO 10')
conns = c.data('STOR over.bin')
conns[0].sendall(b'x' * 20)
conns[0].close()
code, text = c.reply()
assert code == 552 and 'the 10 bytes announced' in text, text
print('ok ALLO 10 and 20 bytes:', text)
c.expect(200, 'ALLO 4')
conns = c.data('APPE ten.bin')
assert conns == 552, 'APPE onto 10 bytes after ALLO 4: %r' % conns
print('ok ALLO 4 and APPE onto 10 bytes: refused before any data')
code, got = c.pasv_get('RETR ten.bin')
assert code == 226 and len(got) == 10, (code, len(got))
PY
pass "uploads past a limit are answered with that limit: the file system's, ALLO's"
stop_xftpd
log_clean
echo "all $checks checks passed"
