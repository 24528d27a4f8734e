# Data connections and third hosts: a passive port takes its connection only from the
# client's own address, and PORT/EPRT name only that address, unless --fxp allows
# server-to-server copies (never for anonymous). Loopback gives three hosts: the clients
# come from 127.0.0.1, the servers listen on 127.0.0.2 and 127.0.0.3, and a third host
# binds 127.0.0.3 before it connects.
source "$(dirname "$0")/xftpd_lib.sh"
make_store
put_file f.bin 3000001
mkdir "$work/root2"
[ "$(id -u)" -ne 0 ] || chown nobody "$work/root2"

# A server without --fxp, and two with it.
start_xftpd 16461 --listen 127.0.0.2 --anonymous --data-timeout 2
"$xftpd" -p 16462 --listen 127.0.0.2 --root "$work/root" --users "$work/users" "${run_as[@]}" \
	--anonymous --fxp 2>>"$work/xftpd.log" &
wait_listening 16462
"$xftpd" -p 16463 --listen 127.0.0.3 --root "$work/root2" --users "$work/users" "${run_as[@]}" \
	--fxp 2>>"$work/xftpd.log" &
wait_listening 16463
"$xftpd" -p 16464 --listen 127.0.0.3 --root "$work/root2" --users "$work/users" "${run_as[@]}" \
	2>>"$work/xftpd.log" &
wait_listening 16464

python3 - "$DS_SRC/tests/integration" "$user" "$pass" "$work/root/f.bin" <<'PY' || fail "third hosts"
import socket, sys, threading, time
sys.path.insert(0, sys.argv[1])
from xftpd_raw import Ctl
user, password = sys.argv[2], sys.argv[3]
data = open(sys.argv[4], 'rb').read()

def third_host(port):
    """A connection to 127.0.0.2:port from 127.0.0.3, a host that is not the client."""
    s = socket.socket()
    s.bind(('127.0.0.3', 0))
    s.settimeout(20)
    s.connect(('127.0.0.2', port))
    return s

def epsv(c):
    text = c.expect(229, 'EPSV')
    return int(text.split('|||')[1].split('|')[0])

def read_all(s):
    got = b''
    try:
        while True:
            chunk = s.recv(1 << 20)
            if not chunk:
                return got
            got += chunk
    except ConnectionResetError:
        return got

def race(c, what):
    """A third host connects to the passive port before the client: the data goes to the
    client, the third host gets none."""
    port = epsv(c)
    intruder = third_host(port)
    c.send('RETR f.bin')
    mine = socket.create_connection(('127.0.0.2', port), timeout=20)
    c.expect(150)
    assert read_all(mine) == data, what + ': the client did not get the file'
    c.expect(226)
    assert read_all(intruder) == b'', what + ': the third host got data'

# Without --fxp: a password user's passive port refuses the third host.
c = Ctl(16461, host='127.0.0.2')
c.login(user, password)
c.expect(200, 'TYPE I')
race(c, 'password user')
print('ok a passive port gives the data to the client, not to a third host that came first')

# A third host alone gets nothing, however often it tries, and the wait keeps its deadline.
port = epsv(c)
stop = threading.Event()
def knock():
    while not stop.is_set():
        try:
            third_host(port).close()
        except OSError:
            pass
        time.sleep(0.3)
knocker = threading.Thread(target=knock)
knocker.start()
start = time.time()
c.send('RETR f.bin')
code, text = c.reply()
took = time.time() - start
stop.set()
knocker.join()
assert code == 425, text
assert took < 4.5, 'the third host stretched the 2 s deadline to %.1f s' % took
print('ok a third host alone: 425 after the data deadline (%.1f s)' % took)

c.expect(504, 'PORT 127,0,0,3,40,1')
c.expect(504, 'EPRT |1|127.0.0.3|10241|')
c.expect(200, 'PORT 127,0,0,1,40,1')
c.expect(221, 'QUIT')
print('ok PORT and EPRT to a third host refused without --fxp')

# With --fxp: a password user may name a third host; anonymous still may not, and an
# anonymous passive port still refuses one.
c = Ctl(16462, host='127.0.0.2')
c.login(user, password)
c.expect(200, 'PORT 127,0,0,3,40,1')
c.expect(200, 'EPRT |1|127.0.0.3|10241|')
c.expect(221, 'QUIT')
a = Ctl(16462, host='127.0.0.2')
a.login('anonymous', 'guest@example.org')
a.expect(504, 'PORT 127,0,0,3,40,1')
a.expect(504, 'EPRT |1|127.0.0.3|10241|')
a.expect(200, 'TYPE I')
race(a, 'anonymous with --fxp')
a.expect(221, 'QUIT')
print('ok --fxp allows third hosts to password users only')
PY
pass "passive ports and PORT/EPRT refuse third hosts; --fxp allows them to password users"
grep -q 'refused 1 data connection from another host (first 127.0.0.3:' "$work/xftpd.log" ||
	fail "no log line for the refused data connection: $(cat "$work/xftpd.log")"
pass "a refused data connection is logged, once per transfer"

# Server-to-server copy between two hosts: works when both allow it, fails clearly when not.
xftp=$DS_BIN/xftp
login="$user:${pass// /%20}"
"$xftp" -q cp "ftp://$login@127.0.0.2:16462/f.bin" "ftp://$login@127.0.0.3:16463/copy.bin" ||
	fail "xftp cp between two --fxp servers failed"
same "$work/root/f.bin" "$work/root2/copy.bin" "xftp cp between two servers on different hosts, both --fxp"
status=0
timeout 60 "$xftp" -q cp "ftp://$login@127.0.0.2:16461/f.bin" "ftp://$login@127.0.0.3:16464/refused.bin" \
	2>"$work/cp.err" || status=$?
[ "$status" -ne 0 ] && [ "$status" -ne 124 ] || fail "xftp cp without --fxp: status $status"
grep -q '504' "$work/cp.err" || fail "xftp cp without --fxp: $(cat "$work/cp.err")"
[ ! -e "$work/root2/refused.bin" ] || fail "a refused copy left refused.bin"
pass "xftp cp between servers without --fxp is refused: $(head -1 "$work/cp.err")"
log_clean
