#!/bin/bash
# FTPS (RFC 4217) between xftpd --tls-required and curl, lftp, Python's FTP_TLS and xftp:
# every byte of control and data is TLS (a capture on lo shows neither the password nor
# the file), data connections resume the control's session, certificates are checked.
. "$(dirname "$0")/xftpd_lib.sh"
command -v curl >/dev/null || fail "curl is not installed"
command -v lftp >/dev/null || fail "lftp is not installed"
xftp=$DS_BIN/xftp
make_store
cd "$work"

# A CA and a server certificate it signed (for 127.0.0.1 and localhost, not ::1), and a
# self-signed one.
make_ca_and_server
openssl req -x509 -newkey rsa:2048 -nodes -keyout self.key -out self.pem -days 2 \
	-subj /CN=localhost -addext subjectAltName=IP:127.0.0.1 2>/dev/null
chmod 600 srv.key # root's alone: read before the privileges drop

port=2131
start_xftpd $port --tls-cert srv.pem --tls-key srv.key --tls-required
url="ftp://$user:${pass// /%20}@127.0.0.1:$port"
put_file big.bin $((24 * 1048576 + 777))
head -c $((9 * 1048576 + 5)) /dev/urandom >up.bin

# --- curl ---
curl -sS --ssl-reqd --cacert ca.pem -o curl.bin "$url/big.bin" || fail "curl get"
same "$work/root/big.bin" curl.bin "curl --ssl-reqd get"
curl -sS --ssl-reqd --cacert ca.pem -T up.bin "$url/curl-up.bin" || fail "curl put"
same up.bin "$work/root/curl-up.bin" "curl --ssl-reqd put"
curl -sS --ssl-reqd --cacert ca.pem --tls-max 1.2 -o curl12.bin "$url/big.bin" ||
	fail "curl get with TLS 1.2"
same "$work/root/big.bin" curl12.bin "curl get with TLS 1.2"
status=0
curl -sS --ssl-reqd --cacert ca.pem --tls-max 1.1 -o /dev/null "$url/big.bin" 2>/dev/null ||
	status=$?
[ "$status" -ne 0 ] || fail "TLS 1.1 was accepted"
pass "TLS 1.1 refused (curl exit $status)"
status=0
curl -sS "$url/big.bin" -o /dev/null 2>curl.err || status=$?
[ "$status" -ne 0 ] && grep -q 530 curl.err || fail "curl in the clear logged in: $(cat curl.err)"
pass "a login in the clear is refused: $(head -1 curl.err)"

# --- lftp (it resumes the control connection's session on data connections) ---
timeout 60 lftp -c "set ftp:ssl-force true; set ftp:ssl-protect-data true;
	set ssl:ca-file $work/ca.pem; set net:max-retries 1;
	open -u $user,'$pass' ftp://127.0.0.1:$port; get big.bin -o lftp.bin;
	put up.bin -o lftp-up.bin" || fail "lftp"
same "$work/root/big.bin" lftp.bin "lftp get (ftp:ssl-force, ftp:ssl-protect-data)"
same up.bin "$work/root/lftp-up.bin" "lftp put"

# --- Python's FTP_TLS, prot_p. ftplib wraps data connections without the control's
# session, which a server that requires resumption refuses (as vsftpd's
# require_ssl_reuse does); a client that passes the session is served. ---
python3 - "$port" "$user" "$pass" <<'PY' || fail "FTP_TLS"
import ftplib, io, ssl, sys
port, user, password = int(sys.argv[1]), sys.argv[2], sys.argv[3]
ctx = ssl.create_default_context(cafile='ca.pem')

class Resuming(ftplib.FTP_TLS):
    def ntransfercmd(self, cmd, rest=None):
        conn, size = ftplib.FTP.ntransfercmd(self, cmd, rest)
        if self._prot_p:
            conn = self.context.wrap_socket(conn, server_hostname=self.host,
                                            session=self.sock.session)
        return conn, size

ftp = Resuming(context=ctx)
ftp.connect('127.0.0.1', port, timeout=20)
feat = ftp.sendcmd('FEAT')
assert 'AUTH TLS' in feat and 'PBSZ' in feat and 'PROT' in feat, feat
ftp.login(user, password)
try:
    ftp.retrbinary('RETR big.bin', io.BytesIO().write)
    sys.exit('a transfer without PROT P was served')
except ftplib.error_perm as e:
    assert str(e).startswith('521'), e
ftp.prot_p()
got = io.BytesIO()
ftp.retrbinary('RETR big.bin', got.write)
assert got.getvalue() == open('root/big.bin', 'rb').read(), 'FTP_TLS get differs'
ftp.storbinary('STOR py-up.bin', open('up.bin', 'rb'))
lines = []
ftp.retrlines('LIST', lines.append)
assert any(l.endswith('py-up.bin') for l in lines), lines
try:
    ftp.sendcmd('CCC')
    sys.exit('CCC accepted')
except ftplib.error_perm as e:
    assert str(e).startswith('534'), e
ftp.quit()

plain = ftplib.FTP_TLS(context=ctx)  # no session passed: refused
plain.connect('127.0.0.1', port, timeout=20)
plain.login(user, password)
plain.prot_p()
try:
    plain.retrbinary('RETR big.bin', io.BytesIO().write)
    sys.exit('a data connection that did not resume was served')
except (ftplib.error_temp, ftplib.error_perm, ssl.SSLError, OSError):
    pass
PY
same up.bin "$work/root/py-up.bin" "FTP_TLS prot_p get, put, LIST; 521 before PROT P; CCC 534"
pass "a data connection that does not resume the control's session is refused"

# capture_start FILE: every frame on lo into FILE (AF_PACKET, as tcpdump would) until
# capture_stop, which fails if the kernel dropped any (the check would mean nothing).
capture_start() {
	rm -f "$work/cap.stop" "$work/cap.ready"
	python3 - "$work/$1" "$work/cap.stop" "$work/cap.ready" <<'PY' &
import os, socket, struct, sys
sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
sock.setsockopt(socket.SOL_SOCKET, 33, 256 << 20)  # SO_RCVBUFFORCE: loopback is fast
sock.bind(('lo', 0))
sock.settimeout(0.2)
open(sys.argv[3], 'w').close()
with open(sys.argv[1], 'wb') as out:
    for _ in range(3000):  # 10 minutes at most
        if os.path.exists(sys.argv[2]):
            break
        try:
            out.write(sock.recv(1 << 18))
        except socket.timeout:
            pass
packets, drops = struct.unpack('II', sock.getsockopt(263, 6, 8))  # PACKET_STATISTICS
sys.exit('the capture dropped %d frames' % drops if drops else 0)
PY
	cap_pid=$!
	for _ in $(seq 50); do
		[ -e "$work/cap.ready" ] && return 0
		sleep 0.1
	done
	fail "the capture did not start"
}
capture_stop() {
	touch "$work/cap.stop"
	wait "$cap_pid" || fail "capture"
}

# --- xftp --tls -P 4, under a capture of lo ---
capture_start cap
"$xftp" --tls --json --cacert ca.pem -P 4 get "$url/big.bin" xftp.bin >get.json || fail "xftp get"
same "$work/root/big.bin" xftp.bin "xftp --tls -P 4 get"
jq -e '.ok and .tls and (.tls_version | test("^TLSv1\\.[23]$")) and (.tls_cipher | length > 0)
	and .streams == 4 and (.ktls | type == "boolean")
	and .tls_sealed_by == (if .ktls then "kernel" else "xftp" end)
	and .tls_opened_by == (if .tls_version == "TLSv1.3" then "xftp" else "openssl" end)' \
	get.json >/dev/null || fail "--json: $(cat get.json)"
pass "--json says $(jq -c '{tls_version, tls_cipher, ktls, tls_sealed_by, tls_opened_by}' get.json)"
"$xftp" --tls -q --cacert ca.pem -P 4 put up.bin "$url/xftp-up.bin" >/dev/null || fail "xftp put"
same up.bin "$work/root/xftp-up.bin" "xftp --tls -P 4 put"
"$xftp" --tls -q --cacert ca.pem put up.bin "$url/xftp-up1.bin" >/dev/null || fail "xftp put"
same up.bin "$work/root/xftp-up1.bin" "xftp --tls put in MODE S"
# A file cut short while it is sent (paced to 1 MB/s, cut at 1 MiB after 2 s): the bytes
# past its new end are not sent as zeros, xftp fails with one line and no SIGBUS, and the
# server keeps nothing under the name.
head -c $((16 * 1048576)) /dev/urandom >shrink.bin
(sleep 2 && truncate -s 1M shrink.bin) &
cutter=$!
expect_error "a file that shrinks while sent over TLS fails the put" "read at [0-9]+: Input/output error" \
	"$xftp" --tls --cacert ca.pem -R 8M put shrink.bin "$url/shrunk.bin"
wait "$cutter"
[ ! -e "$work/root/shrunk.bin" ] || fail "the server kept the shrunk upload as shrunk.bin"
"$xftp" --tls --cacert ca.pem ls "$url/" >ls.out || fail "xftp ls"
grep -q 'xftp-up.bin$' ls.out || fail "xftp ls: $(cat ls.out)"
pass "xftp --tls ls"
capture_stop
python3 - cap "$pass" "$work/root/big.bin" up.bin <<'PY' || fail "the capture shows secrets"
import sys
cap = open(sys.argv[1], 'rb').read()
assert len(cap) > 40 << 20, 'the capture saw %d bytes only' % len(cap)
assert sys.argv[2].encode() not in cap, 'the password is in the capture'
for name in sys.argv[3:]:
    data = open(name, 'rb').read()
    for at in (0, len(data) // 2, len(data) - 64):
        assert data[at:at + 32] not in cap, '%s bytes at %d are in the capture' % (name, at)
PY
pass "a capture of lo ($(stat -c %s cap) bytes) holds neither the password nor file bytes"

# The same capture of a session in the clear does show both: the check above means it.
plain_port=2132
start_xftpd $plain_port
capture_start cap2
"$xftp" -q get "ftp://$user:${pass// /%20}@127.0.0.1:$plain_port/big.bin" clear.bin >/dev/null ||
	fail "get in the clear"
capture_stop
grep -qaF "$pass" cap2 || fail "the capture missed a password sent in the clear"
pass "the same capture of a session in the clear shows the password"

# --- certificates ---
expect_error "a server's certificate from an unknown CA is refused" \
	"certificate: (self-signed|unable to get local issuer)" \
	"$xftp" --tls get "$url/big.bin" nope.bin
[ ! -e nope.bin ] || fail "a refused server left a file"
expect_error "a name the certificate does not hold (::1) is refused" "certificate" \
	"$xftp" --tls --cacert ca.pem get "ftp://$user:${pass// /%20}@[::1]:$port/big.bin" nope.bin
self_port=2133
start_xftpd $self_port --tls-cert self.pem --tls-key self.key
self_url="ftp://$user:${pass// /%20}@127.0.0.1:$self_port"
expect_error "a self-signed server is refused without --cacert or -k" "certificate" \
	"$xftp" get "$self_url/big.bin" nope.bin
"$xftp" -q -k get "$self_url/big.bin" k.bin >/dev/null || fail "-k"
same "$work/root/big.bin" k.bin "-k takes a self-signed server"
"$xftp" -q --cacert self.pem get "$self_url/big.bin" self.bin >/dev/null || fail "--cacert self"
same "$work/root/big.bin" self.bin "--cacert names the self-signed certificate"

# --- servers without TLS ---
logins=$(grep -c 'logged in' "$work/xftpd.log")
expect_error "--tls against a server without AUTH TLS exits 1, before USER" "offers no TLS" \
	"$xftp" --tls get "ftp://$user:${pass// /%20}@127.0.0.1:$plain_port/big.bin" nope.bin
[ "$(grep -c 'logged in' "$work/xftpd.log")" -eq "$logins" ] ||
	fail "--tls logged in to a server without TLS"
"$xftp" -q get "ftp://$user:${pass// /%20}@127.0.0.1:$plain_port/big.bin" auto.bin >/dev/null ||
	fail "TLS-when-offered against a server without TLS"
same "$work/root/big.bin" auto.bin "without --tls, a server without TLS is served in the clear"
expect_error "--no-tls against --tls-required: the login is refused" "530" \
	"$xftp" --no-tls get "$url/big.bin" nope.bin
log_clean
