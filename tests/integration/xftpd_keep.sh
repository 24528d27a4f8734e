#!/bin/bash
# MODE E KEEP (docs/xftp.md) from a raw client: without the OPTS every EOD says close; with
# it, RETR and STOR after the first go over the same connection (125), their bytes whole;
# bytes or a close on a kept connection between transfers end it (425, and 226 for an ABOR
# sent with the command), and PASV drops it; a kept download the kernel cannot take whole
# still ends on an ABOR or a hang-up.
source "$(dirname "$0")/xftpd_lib.sh"
make_store
put_file a.bin 70001
put_file b.bin 1234567
port=16461
start_xftpd "$port" -b 1M
python3 - "$port" "$DS_SRC/tests/integration" "$user" "$pass" "$work/root" "$xftpd_pid" <<'PY' || fail "MODE E KEEP"
import os, signal, socket, sys, time
sys.path.insert(0, sys.argv[2])
from xftpd_raw import Ctl
port, user, password, root, server = int(sys.argv[1]), sys.argv[3], sys.argv[4], sys.argv[5], int(sys.argv[6])
files = {n: open(root + '/' + n, 'rb').read() for n in ('a.bin', 'b.bin')}

def recv_exact(conn, n):
    got = b''
    while len(got) < n:
        chunk = conn.recv(n - len(got))
        assert chunk, 'the connection closed %d bytes into %d' % (len(got), n)
        got += chunk
    return got

def receive(conn):
    """A MODE E file over one connection: (bytes, the EOD's descriptor)."""
    out = bytearray()
    while True:
        head = recv_exact(conn, 17)
        desc, count, off = head[0], int.from_bytes(head[1:9], 'big'), int.from_bytes(head[9:], 'big')
        if desc & 0x08:
            assert count == 0, head
            return bytes(out), desc
        data = recv_exact(conn, count)
        out[off:off + count] = data

def gone(conn):
    """Whether the server closed conn (a close over unread bytes is a reset)."""
    try:
        return conn.recv(1) == b''
    except ConnectionResetError:
        return True

def send(conn, payload):
    conn.sendall(bytes([0]) + len(payload).to_bytes(8, 'big') + (0).to_bytes(8, 'big') + payload)
    conn.sendall(bytes([0x48]) + (0).to_bytes(8, 'big') + (1).to_bytes(8, 'big'))  # EOD|EOF

c = Ctl(port)
c.login(user, password)
text = c.expect(211, 'FEAT')
assert ' MODE E KEEP' in text, text
for cmd in ('TYPE I', 'MODE E', 'OPTS RETR Parallelism=1'):
    c.expect(200, cmd)
[conn] = c.data('RETR a.bin')
got, desc = receive(conn)
assert got == files['a.bin'] and desc & 0x04, 'without OPTS MODE E KEEP: desc %#x' % desc
c.expect(226)
conn.close()
print('ok without the OPTS, the EOD says close')

c.expect(200, 'OPTS MODE E KEEP')
[conn] = c.data('RETR a.bin')
got, desc = receive(conn)
assert got == files['a.bin'] and not desc & 0x04, 'desc %#x' % desc
c.expect(226)
for name in ('b.bin', 'a.bin'):
    c.expect(125, 'RETR ' + name)
    got, desc = receive(conn)
    assert got == files[name] and not desc & 0x04, (name, len(got), desc)
    c.expect(226)
c.expect(125, 'STOR up.bin')
send(conn, files['b.bin'])
c.expect(226)
assert open(root + '/up.bin', 'rb').read() == files['b.bin']
c.expect(125, 'RETR up.bin')
got, _ = receive(conn)
assert got == files['b.bin']
c.expect(226)
print('ok with it, RETR, STOR, RETR go over the one kept connection, bytes whole')

c.expect(550, 'RETR missing.bin')
c.expect(125, 'RETR a.bin')
assert receive(conn)[0] == files['a.bin']
c.expect(226)
print('ok a refused RETR leaves the kept connection for the next')

conn.sendall(b'junk')
c.expect(425, 'RETR a.bin')
assert gone(conn), 'the kept connection stayed open after junk'
print('ok bytes on a kept connection between transfers end it: 425')

[conn] = c.data('RETR a.bin')
assert receive(conn)[0] == files['a.bin']
c.expect(226)
conn.close()
c.expect(425, 'RETR a.bin')
print('ok a kept connection the client closed: 425')

[conn] = c.data('RETR a.bin')
assert receive(conn)[0] == files['a.bin']
c.expect(226)
[fresh] = c.data('RETR b.bin')
assert receive(fresh)[0] == files['b.bin']
c.expect(226)
assert gone(conn), 'PASV left the old kept connection open'
print('ok EPSV drops the kept connection and the transfer takes the new one')
c.expect(200, 'MODE S')
c.expect(425, 'RETR a.bin')
print('ok MODE S drops it too')

# A block or less over a kept connection runs with no thread reading the control
# connection (transfer.c): an ABOR right behind it cuts it where the session glances
# at the control connection, else it is answered after its 226; the session goes on.
c.expect(200, 'MODE E')
[conn] = c.data('RETR a.bin')
assert receive(conn)[0] == files['a.bin']
c.expect(226)
c.expect(125, 'RETR a.bin')
c.send('ABOR')
code = c.reply()[0]
if code == 226:  # the block went before the ABOR was seen: 226 for each, the file whole
    assert receive(conn)[0] == files['a.bin']
    c.expect(226)
else:  # seen while it moved: cut, and the kept connection with it
    assert code == 426 and c.reply()[0] == 226, code
    conn.close()
    [conn] = c.data('RETR a.bin')
    assert receive(conn)[0] == files['a.bin']
    c.expect(226)
c.expect(200, 'NOOP')
print('ok an ABOR behind a small kept transfer: %s' % ('226, 226' if code == 226 else '426, 226'))

# Such an upload whose bytes never come: an ABOR cuts it within a slice of its wait (426,
# then 226), and nothing takes its name.
c.expect(200, 'ALLO 1000')
c.expect(125, 'STOR stalled.bin')
time.sleep(0.3)
t = time.time()
c.send('ABOR')
replies = c.reply(), c.reply()
assert [code for code, _ in replies] == [426, 226], replies
assert time.time() - t < 2, 'ABOR took %.1f s to cut a stalled kept upload' % (time.time() - t)
assert not os.path.exists(root + '/stalled.bin'), 'a cut upload took its name'
c.expect(200, 'NOOP')
print('ok an ABOR cuts a small kept upload whose bytes never come')

# An ABOR that comes with the RETR it cuts is taken before the transfer starts: when the
# kept connection turns out gone, it still gets its 226, after the 425.
[conn] = c.data('RETR a.bin')
assert receive(conn)[0] == files['a.bin']
c.expect(226)
conn.close()
time.sleep(0.2)
c.send(b'RETR a.bin\r\nABOR\r\n')
c.expect(425)
c.sock.settimeout(5)
c.expect(226)
c.sock.settimeout(20)
c.expect(200, 'NOOP')
print('ok an ABOR sent with a RETR whose kept connection is gone: 425, then 226')

# And on SIGTERM: the stop is the pipeline's own to see. Nothing takes the upload's name.
[conn] = c.data('RETR a.bin')
assert receive(conn)[0] == files['a.bin']
c.expect(226)
c.expect(200, 'ALLO 1000')
c.expect(125, 'STOR stalled.bin')
t = time.time()
os.kill(server, signal.SIGTERM)
code, text = c.reply()
assert code in (421, 426) and 'shutting down' in text, text
assert time.time() - t < 5, 'SIGTERM took %.1f s to end a stalled upload' % (time.time() - t)
assert not os.path.exists(root + '/stalled.bin'), 'a stalled upload took its name'
print('ok SIGTERM ends a small upload over a kept connection whose bytes never come')
PY
pass "MODE E KEEP: connections kept only when asked, checked before reuse, dropped by PASV; small kept transfers answer ABOR and end on SIGTERM"
wait "$xftpd_pid" || fail "xftpd did not end cleanly on SIGTERM during a kept upload"

# A block (16M here) that the kernel cannot take whole from the kept connection waits on
# the client reading it: the session glances at the control connection between the waits,
# and an ABOR from a client that stopped reading cuts it at once (426, then 226), as does a
# hang-up.
put_file block.bin $((16 << 20))
start_xftpd 16462 -b 16M
python3 - 16462 "$DS_SRC/tests/integration" "$user" "$pass" "$xftpd_pid" <<'PY' || fail "an unread kept download"
import socket, subprocess, sys, time
sys.path.insert(0, sys.argv[2])
from xftpd_raw import Ctl
port, user, password, server = int(sys.argv[1]), sys.argv[3], sys.argv[4], int(sys.argv[5])

def kept_session():
    c = Ctl(port)
    c.login(user, password)
    for cmd in ('TYPE I', 'MODE E', 'OPTS RETR Parallelism=1', 'OPTS MODE E KEEP'):
        c.expect(200, cmd)
    [conn] = c.data('RETR block.bin')
    # A fixed receive buffer: grown by the kernel's tuning (up to 32 MiB here), it could
    # take the next block whole, unread.
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 256 << 10)
    while True:  # read it all: the connection is kept for the next RETR
        head = b''
        while len(head) < 17:
            head += conn.recv(17 - len(head))
        left = int.from_bytes(head[1:9], 'big')
        if head[0] & 0x08:
            break
        while left:
            left -= len(conn.recv(min(left, 1 << 20)))
    c.expect(226)
    c.expect(125, 'RETR block.bin')
    time.sleep(0.5)  # the kernel's buffers full, the server waiting on this client
    return c, conn

c, conn = kept_session()
c.sock.settimeout(5)
c.send('ABOR')
replies = c.reply(), c.reply()
assert [code for code, _ in replies] == [426, 226], replies
print('ok an ABOR cuts a kept download of a block the client stopped reading')
c.sock.close()
conn.close()

c, conn = kept_session()
c.sock.close()
t = time.time()
while subprocess.run(['pgrep', '-P', str(server)], capture_output=True).stdout and time.time() - t < 5:
    time.sleep(0.1)
assert time.time() - t < 5, 'a session outlived its hang-up by 5 s, its download unread'
conn.close()
print('ok a hang-up ends a kept download the client stopped reading')
PY
pass "a kept download of a block the kernel cannot take whole: ended by ABOR or a hang-up"
kill "$xftpd_pid"
log_clean
