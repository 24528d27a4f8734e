# xftpd's extensions (docs/xftp.md) seen from a raw client: MODE E over parallel streams
# both ways, HASH (SHA-256, CRC-32C) of files and ranges, RANG, ALLO, server-to-server
# copies; and anonymous sessions, read-only. As root: the server does not run as root.
source "$(dirname "$0")/xftpd_lib.sh"
make_store
put_file f.bin 9000001
port=16451
start_xftpd "$port" --anonymous -b 1M
if [ "$(id -u)" -eq 0 ]; then
	[ "$(awk '/^Uid:/ {print $2}' "/proc/$xftpd_pid/status")" = "$(id -u nobody)" ] ||
		fail "xftpd still runs as root"
	pass "started as root, xftpd serves as the store's user"
fi
python3 - "$port" "$DS_SRC/tests/integration" "$user" "$pass" "$work/root" <<'PY' || fail "extensions"
import hashlib, sys, threading
sys.path.insert(0, sys.argv[2])
from xftpd_raw import Ctl
port, root = int(sys.argv[1]), sys.argv[5]
data = open(root + '/f.bin', 'rb').read()

def crc32c(buf):
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    crc = 0xFFFFFFFF
    for b in buf:
        crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF

def blocks_recv(conns):
    """Reads MODE E blocks from every connection: {offset: bytes}, and the EOF count."""
    pieces, eof = {}, []
    def reader(s):
        buf = b''
        def need(n):
            nonlocal buf
            while len(buf) < n:
                chunk = s.recv(1 << 20)
                if not chunk:
                    raise EOFError
                buf += chunk
            out, buf = buf[:n], buf[n:]
            return out
        while True:
            head = need(17)
            desc, count, offset = head[0], int.from_bytes(head[1:9], 'big'), int.from_bytes(head[9:17], 'big')
            if desc & 0x40:
                eof.append(offset)
            elif count:
                pieces[offset] = need(count)
            if desc & 0x08:
                return
    threads = [threading.Thread(target=reader, args=(s,)) for s in conns]
    for t in threads: t.start()
    for t in threads: t.join()
    return pieces, eof

c = Ctl(port)
c.login(sys.argv[3], sys.argv[4])
feat = c.expect(211, 'FEAT')
for line in (' MODE E', ' PARALLEL', ' HASH SHA-256*;CRC32C', ' RANG STREAM', ' PSIZ', ' REST STREAM', ' MLST '):
    assert line in feat, (line, feat)

# HASH of the whole file, and of a range; CRC32C selected by OPTS.
sha = hashlib.sha256(data).hexdigest()
assert c.expect(213, 'HASH f.bin') == '213 SHA-256 0-%d %s f.bin' % (len(data), sha)
c.expect(350, 'RANG 100 5000')
assert c.expect(213, 'HASH f.bin') == '213 SHA-256 100-5000 %s f.bin' % hashlib.sha256(data[100:5000]).hexdigest()
c.expect(200, 'OPTS HASH CRC32C')
assert ' HASH SHA-256;CRC32C*' in c.expect(211, 'FEAT')
assert c.expect(213, 'HASH f.bin') == '213 CRC32C 0-%d %08x f.bin' % (len(data), crc32c(data))
c.expect(200, 'OPTS HASH SHA-256')
c.expect(550, 'HASH nothing')

# The session publishes live counters for tach: tool xftpd, the client as peer, bytes moved.
def live_segment():
    import glob, struct
    me = '127.0.0.1:%d' % c.sock.getsockname()[1]
    for path in glob.glob('/dev/shm/dragstrip.*'):
        seg = open(path, 'rb').read(160)
        if seg[16:21] == b'xftpd' and seg[64:128].split(b'\0')[0].decode() == me:
            return struct.unpack_from('<Q', seg, 152)[0]
    raise AssertionError('no live segment for this session')
before = live_segment()

# RANG then RETR: exactly that range.
c.expect(350, 'RANG 1000 2000')
code, got = c.pasv_get('RETR f.bin')
assert code == 226 and got == data[1000:2000], (code, len(got))

# MODE E, 4 streams, RETR: every byte once, the EOF naming 4 connections.
c.expect(200, 'TYPE I')
c.expect(200, 'MODE E')
c.expect(200, 'OPTS RETR Parallelism=4,4,4;')
pieces, eof = blocks_recv(c.data('RETR f.bin', 4))
c.expect(226)
assert eof == [4], eof
got = b''.join(pieces[o] for o in sorted(pieces))
assert got == data, 'MODE E RETR differs'
assert live_segment() >= before + len(data), 'live bytes did not count the RETR'
print('ok MODE E RETR over 4 streams')

# MODE E STOR over 3 streams, blocks out of order, then HASH agrees.
c.expect(200, 'OPTS RETR Parallelism=3')
assert c.modee_put('STOR e.bin', data, 3) == 226
assert open(root + '/e.bin', 'rb').read() == data, 'MODE E STOR differs'
print('ok MODE E STOR over 3 streams, blocks out of order')

# A MODE E upload whose connection closes before EOD is kept aside, not committed.
c.expect(200, 'OPTS RETR Parallelism=1')
conns = c.data('STOR cut.bin')
conns[0].sendall(bytes([0]) + (10).to_bytes(8, 'big') + (0).to_bytes(8, 'big') + b'0123456789')
for s in conns:
    s.close()
code, text = c.reply()
assert code in (426, 451), text
c.expect(550, 'SIZE cut.bin')
assert c.expect(213, 'PSIZ cut.bin') == '213 10'
c.expect(200, 'MODE S')
c.expect(221, 'QUIT')

# Anonymous: reads, never writes, never PORT to another host.
a = Ctl(port)
a.login('anonymous', 'guest@example.org')
code, got = a.pasv_get('RETR f.bin')
assert code == 226 and got == data
assert a.pasv_put('STOR x.bin', b'x') == 550
for cmd in ('DELE f.bin', 'MKD d', 'RMD d', 'RNFR f.bin', 'ALLO 10'):
    a.expect(550, cmd)
a.expect(504, 'PORT 127,0,0,2,40,1')
a.expect(504, 'EPRT |1|127.0.0.2|10241|')
a.expect(200, 'PORT 127,0,0,1,40,1')
a.expect(221, 'QUIT')
print('ok anonymous is read-only')
PY
pass "MODE E over parallel streams both ways, HASH and RANG, anonymous read-only"

# Server-to-server: a second xftpd, the data going from one to the other directly.
mkdir "$work/root2"
[ "$(id -u)" -ne 0 ] || chown nobody "$work/root2"
"$xftpd" -p 16452 --root "$work/root2" --users "$work/users" "${run_as[@]}" 2>>"$work/xftpd.log" &
wait_listening 16452
python3 - "$port" "$DS_SRC/tests/integration" "$user" "$pass" <<'PY' || fail "server-to-server"
import sys
sys.path.insert(0, sys.argv[2])
from xftpd_raw import Ctl
src, dst = Ctl(int(sys.argv[1])), Ctl(16452)
for c in (src, dst):
    c.login(sys.argv[3], sys.argv[4])
    c.expect(200, 'TYPE I')
    c.expect(200, 'MODE E')
    c.expect(200, 'OPTS RETR Parallelism=2;')
text = dst.expect(229, 'EPSV')
p = int(text.split('|||')[1].split('|')[0])
src.expect(200, 'EPRT |1|127.0.0.1|%d|' % p)
dst.send('STOR copy.bin')
src.send('RETR f.bin')
src.expect(150)
dst.expect(150)
src.expect(226)
dst.expect(226)
PY
same "$work/root/f.bin" "$work/root2/copy.bin" "server-to-server copy (EPSV on one, EPRT on the other, 2 streams)"

# HASH: a RANG out of the file is refused, a directory is refused, and a long hash ends
# on ABOR, on the client's hang-up and on SIGTERM. big.bin is sparse: hashing all of it
# would take minutes.
truncate -s 64G "$work/root/big.bin"
[ "$(id -u)" -ne 0 ] || chown nobody "$work/root/big.bin"
python3 - "$port" "$DS_SRC/tests/integration" "$user" "$pass" "$work/root" "$xftpd_pid" <<'PY' || fail "HASH limits"
import hashlib, os, signal, sys, time
sys.path.insert(0, sys.argv[2])
from xftpd_raw import Ctl
port, user, password, root, server = int(sys.argv[1]), sys.argv[3], sys.argv[4], sys.argv[5], int(sys.argv[6])
data = open(root + '/f.bin', 'rb').read()

def sessions():
    """The server's session processes still running."""
    def running(pid):
        try:
            return open('/proc/%s/stat' % pid).read().rsplit(')', 1)[1].split()[0] != 'Z'
        except FileNotFoundError:
            return False
    children = open('/proc/%d/task/%d/children' % (server, server)).read().split()
    return [pid for pid in children if running(pid)]

c = Ctl(port)
c.login(user, password)
size = len(data)
for start, end in ((size, size + 10), (size + 1, size + 100), (1 << 40, (1 << 40) + 1)):
    c.expect(350, 'RANG %d %d' % (start, end))
    text = c.expect(554, 'HASH f.bin')
    assert 'beyond the end' in text, text
# A range that starts inside and ends past the end: hashed to the end, the reply says so.
c.expect(350, 'RANG %d %d' % (size - 10, size + 1000))
assert c.expect(213, 'HASH f.bin') == '213 SHA-256 %d-%d %s f.bin' % (
    size - 10, size, hashlib.sha256(data[-10:]).hexdigest())
c.expect(257, 'MKD adir')
c.expect(553, 'HASH adir')
print('ok HASH refuses a RANG beyond the end (554) and a directory (553)')

# ABOR cuts a long hash: 426 for the HASH, 226 for the ABOR, and the session goes on.
c.send('HASH big.bin')
time.sleep(0.5)
t = time.time()
c.send('ABOR')
c.expect(426)
c.expect(226)
took = time.time() - t
assert took < 5, 'ABOR took %.1f s to end the hash' % took
c.expect(200, 'NOOP')
print('ok ABOR ends a HASH in %.2f s' % took)

# The client hanging up ends its session's hash.
before = len(sessions())
c.send('HASH big.bin')
time.sleep(0.5)
c.sock.close()
for _ in range(100):
    if len(sessions()) < before:
        break
    time.sleep(0.05)
else:
    raise AssertionError('the session still hashes after its client hung up')
print('ok a hang-up ends the hashing session')

# SIGTERM during a hash: the client hears why, and the server ends.
c = Ctl(port)
c.login(user, password)
c.send('HASH big.bin')
time.sleep(0.5)
os.kill(server, signal.SIGTERM)
code, text = c.reply()
assert code in (421, 426) and 'shutting down' in text, text
print('ok SIGTERM ends a HASH: ' + text)
PY
pass "HASH: RANG beyond the end refused, a long hash ends on ABOR, hang-up and SIGTERM"
wait "$xftpd_pid" || fail "xftpd did not end cleanly on SIGTERM during a HASH"
pass "xftpd ended with status 0 on SIGTERM during a HASH"

log_clean
