#!/bin/bash
# xftpd --tls-required against clients that stall or cheat around TLS: AUTH TLS and then
# no handshake (the login deadline ends it; SIGTERM ends it at once), a data connection
# that never shakes hands (the data deadline), commands pipelined in the clear after AUTH
# TLS (dropped, never taken as said under TLS), garbage instead of a ClientHello.
source "$(dirname "$0")/../integration/xftpd_lib.sh"
make_store
cd "$work"
openssl req -x509 -newkey rsa:2048 -nodes -keyout key.pem -out cert.pem -days 2 \
	-subj /CN=localhost -addext subjectAltName=IP:127.0.0.1 2>/dev/null
port=16541
start_xftpd "$port" --tls-cert cert.pem --tls-key key.pem --tls-required --login-timeout 2 \
	--data-timeout 2
put_file f.bin 100000

python3 - "$port" "$user" "$pass" <<'PY' || fail "stalled handshakes"
import ftplib, socket, ssl, sys, time
port, user, password = int(sys.argv[1]), sys.argv[2], sys.argv[3]

def ctl():
    s = socket.create_connection(('127.0.0.1', port), timeout=10)
    f = s.makefile('rb')
    assert f.readline().startswith(b'220')
    return s, f

# AUTH TLS, then silence: the session ends by the login deadline (2 s), not never.
s, f = ctl()
s.sendall(b'AUTH TLS\r\n')
assert f.readline().startswith(b'234')
start = time.monotonic()
s.settimeout(10)
assert s.recv(100) == b'', 'the server sent something to a silent handshake'
took = time.monotonic() - start
assert took < 6, 'a silent handshake held the session %.1f s' % took
print('ok - a silent TLS handshake ends with the login deadline (%.1f s)' % took)

# Commands pipelined in the clear behind AUTH TLS are dropped: the USER below must not
# count as given once TLS is up (PASS answers 503, not 230).
s, f = ctl()
s.sendall(('AUTH TLS\r\nUSER %s\r\n' % user).encode())
assert f.readline().startswith(b'234')
ctx = ssl.create_default_context(cafile='cert.pem')
t = ctx.wrap_socket(s, server_hostname='127.0.0.1')
t.sendall(('PASS %s\r\n' % password).encode())
reply = t.recv(200)
assert reply.startswith(b'503'), reply
print('ok - a USER pipelined in the clear behind AUTH TLS is not taken: %r' % reply[:40])
t.close()

# Garbage instead of a ClientHello: refused, the session ends, the server lives.
s, f = ctl()
s.sendall(b'AUTH TLS\r\n')
assert f.readline().startswith(b'234')
s.sendall(b'GET / HTTP/1.0\r\n\r\n' * 10)
s.settimeout(10)
try:
    while s.recv(4096):
        pass
except ConnectionResetError:
    pass  # closed with the garbage unread
print('ok - garbage for a ClientHello ends the session')

# PROT P, then a data connection that never shakes hands: 426 after the data deadline.
class Resuming(ftplib.FTP_TLS):
    stall = False
    def ntransfercmd(self, cmd, rest=None):
        conn, size = ftplib.FTP.ntransfercmd(self, cmd, rest)
        if self.stall:
            return conn, size
        return self.context.wrap_socket(conn, server_hostname=self.host,
                                        session=self.sock.session), size
ftp = Resuming(context=ctx)
ftp.connect('127.0.0.1', port, timeout=20)
ftp.login(user, password)
ftp.prot_p()
ftp.stall = True
ftp.voidcmd('TYPE I')
start = time.monotonic()
conn = ftp.transfercmd('RETR f.bin')
reply = ftp.getline()
took = time.monotonic() - start
assert reply.startswith('426'), reply
assert took < 8, 'a data handshake never begun held the transfer %.1f s' % took
conn.close()
ftp.stall = False
got = []
ftp.retrbinary('RETR f.bin', got.append)
assert sum(map(len, got)) == 100000
print('ok - a stalled data handshake ends with --data-timeout (%.1f s), the session serves on' % took)
ftp.quit()
PY
pass "stalled and cheating TLS clients"

# SIGTERM during a handshake that never comes: the listener and the session end at once.
python3 - "$port" <<'PY' &
import socket, sys, time
s = socket.create_connection(('127.0.0.1', int(sys.argv[1])))
s.recv(100)
s.sendall(b'AUTH TLS\r\n')
time.sleep(30)
PY
sleep 0.5
start=$(date +%s%N)
kill -TERM "$xftpd_pid"
for _ in $(seq 50); do
	kill -0 "$xftpd_pid" 2>/dev/null || break
	sleep 0.1
done
! kill -0 "$xftpd_pid" 2>/dev/null || fail "xftpd outlived SIGTERM during a handshake by 5 s"
pass "SIGTERM during a TLS handshake: gone in $((($(date +%s%N) - start) / 1000000)) ms"
log_clean
