# What an administrator relies on: passive ports from a range a firewall opens and the
# NAT address PASV names (--pasv-ports, --pasv-address); timestamped log lines that name
# every denial; and the wu-ftpd transfer log (--xferlog) that log analysers read.
source "$(dirname "$0")/xftpd_lib.sh"
make_store
put_file f.bin 1048576
put_file secret 1000
chmod 000 "$work/root/secret" # unreadable by the session: its RETR is a denial
head -c 300000 /dev/urandom >"$work/up.bin"

# The passive ranges lie below the kernel's ephemeral ports (32768-60999): an outgoing
# connection of a test running beside this one could hold a port of a range above.
# 198.51.100.7 (TEST-NET-2) is only ever named in replies: the client below never uses a
# PASV reply's address, and as root the test's network namespace has no route to it.
start_xftpd 16481 --pasv-ports 30100-30109 --pasv-address 198.51.100.7 \
	--xferlog "$work/xfer.log"
"$xftpd" -p 16482 --root "$work/root" --users "$work/users" "${run_as[@]}" \
	--pasv-ports 30200-30201 2>>"$work/xftpd.log" &
wait_listening 16482

python3 - "$DS_SRC/tests/integration" "$user" "$pass" "$work" <<'PY' || fail "passive ports"
import re, socket, sys
sys.path.insert(0, sys.argv[1])
from xftpd_raw import Ctl
user, password, work = sys.argv[2], sys.argv[3], sys.argv[4]

c = Ctl(16481)
c.login(user, password)
ports = []
for i in range(12):
    if i % 2 == 0:
        text = c.expect(227, 'PASV')
        h1, h2, h3, h4, p1, p2 = map(int, re.search(r'\((\d+(?:,\d+){5})\)', text).group(1).split(','))
        assert (h1, h2, h3, h4) == (198, 51, 100, 7), text
        ports.append(p1 * 256 + p2)
    else:
        text = c.expect(229, 'EPSV')
        ports.append(int(re.search(r'\(\|\|\|(\d+)\|\)', text).group(1)))
assert all(30100 <= p <= 30109 for p in ports), ports
print('ports', ports)

# A transfer through a port of the range, reached at the control connection's host.
text = c.expect(229, 'EPSV')
port = int(re.search(r'\|\|\|(\d+)\|', text).group(1))
assert 30100 <= port <= 30109, port
data = socket.create_connection(('127.0.0.1', port), timeout=20)
c.expect(150, 'RETR f.bin')
got = b''
while True:
    chunk = data.recv(1 << 20)
    if not chunk:
        break
    got += chunk
c.expect(226)
assert got == open(work + '/root/f.bin', 'rb').read(), len(got)

# Two ports: two sessions take them, a third is told 425 until one is given back.
a, b, third = Ctl(16482), Ctl(16482), Ctl(16482)
for x in (a, b, third):
    x.login(user, password)
pa = a.expect(229, 'EPSV')
pb = b.expect(229, 'EPSV')
assert pa != pb, (pa, pb)
third.send('EPSV')
code, text = third.reply()
assert code == 425, text
a.sock.close()  # its session ends and gives its port back
import time
for _ in range(50):
    third.send('EPSV')
    code, text = third.reply()
    if code == 229:
        break
    time.sleep(0.1)
assert code == 229, text
port = int(re.search(r'\|\|\|(\d+)\|', text).group(1))
assert port in (30200, 30201), text

# The range serves transfer after transfer: a port a transfer left in TIME_WAIT is free.
b.sock.close()
for i in range(6):
    for _ in range(50):
        third.send('EPSV')
        code, text = third.reply()
        if code == 229:
            break
        time.sleep(0.1)  # b's session is still ending
    assert code == 229, 'transfer %d: %s' % (i, text)
    port = int(re.search(r'\|\|\|(\d+)\|', text).group(1))
    data = socket.create_connection(('127.0.0.1', port), timeout=20)
    third.expect(150, 'RETR f.bin')
    while data.recv(1 << 20):
        pass
    data.close()
    third.expect(226)
PY
pass "twelve PASV and EPSV replies in 30100-30109, PASV naming 198.51.100.7; a transfer through one"
pass "all passive ports taken: 425, a freed one is used again; two ports serve six transfers in a row"

# A get, a put, and a denied RETR.
ftplib 16481 <<'PY' || fail "transfers"
ftp.sendcmd('TYPE I')
ftp.set_pasv(True)
# Python's ftplib connects to the control connection's host, never to PASV's address.
assert not getattr(ftp, 'trust_server_pasv_ipv4_address', False)
got = io.BytesIO()
ftp.retrbinary('RETR f.bin', got.write)
assert len(got.getvalue()) == 1048576
with open(work + '/up.bin', 'rb') as f:
    ftp.storbinary('STOR up.bin', f)
# An upload that ends short of what ALLO announced is kept for REST: incomplete (i).
ftp.sendcmd('ALLO 500000')
try:
    with open(work + '/up.bin', 'rb') as f:
        ftp.storbinary('STOR part.bin', f)
    raise AssertionError('a short upload was complete')
except ftplib.error_temp as e:
    assert str(e).startswith('451'), e
# Names that would drive a terminal or break a line in a viewer: raw and UTF-8 C1 CSI,
# U+2028, and a space that would split an xferlog field.
ftp.encoding = 'latin-1'
for name in ('raw\x9b2J', 'utf\xc2\x9b2J', 'sep\xe2\x80\xa8fake line', 'two words'):
    ftp.storbinary('STOR ' + name, io.BytesIO(b'hi'))
ftp.encoding = 'utf-8'
try:
    ftp.retrbinary('RETR secret', lambda b: None)
    raise AssertionError('RETR secret succeeded')
except ftplib.error_perm as e:
    assert str(e).startswith('550'), e
ftp.quit()
PY
kill "$xftpd_pid"
wait "$xftpd_pid" || true

stamp='[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}[+-][0-9]{4}'
grep -Eq "^$stamp xftpd: $user 127\.0\.0\.1:[0-9]+ RETR denied: 550 secret: permission denied\.$" \
	"$work/xftpd.log" || fail "no timestamped line for the denied RETR: $(grep -i denied "$work/xftpd.log")"
pass "a denied RETR is logged with time, user and address"
grep -Eq "^$stamp xftpd: $user 127\.0\.0\.1:[0-9]+ logged in$" "$work/xftpd.log" ||
	fail "no timestamped login line"
untimed=$(grep -Ev "^$stamp xftpd: " "$work/xftpd.log" | head -3 || true)
[ -z "$untimed" ] || fail "log lines without a timestamp: $untimed"
pass "every line of the log begins with an ISO 8601 time ($(wc -l <"$work/xftpd.log") lines)"

# wu-ftpd xferlog: current-time transfer-time remote-host bytes filename b _ o|i r user ftp 0 * c|i
day='(Mon|Tue|Wed|Thu|Fri|Sat|Sun) (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) [ 1-3][0-9] [0-9]{2}:[0-9]{2}:[0-9]{2} [0-9]{4}'
cat "$work/xfer.log"
[ "$(grep -Ec "^$day [0-9]+ 127\.0\.0\.1 1048576 /f\.bin b _ o r $user ftp 0 \* c$" "$work/xfer.log")" -eq 2 ] ||
	fail "the two gets of f.bin are not in the xferlog as such"
grep -Eq "^$day [0-9]+ 127\.0\.0\.1 300000 /up\.bin b _ i r $user ftp 0 \* c$" "$work/xfer.log" ||
	fail "the put is not in the xferlog"
grep -Eq "^$day [0-9]+ 127\.0\.0\.1 300000 /part\.bin b _ i r $user ftp 0 \* i$" "$work/xfer.log" ||
	fail "the short upload is not in the xferlog as incomplete"
for name in 'raw_2J' 'utf_2J' 'sep_fake_line' 'two_words'; do
	grep -Eq "^$day [0-9]+ 127\.0\.0\.1 2 /$name b _ i r $user ftp 0 \* c$" "$work/xfer.log" ||
		fail "the upload of $name is not one clean xferlog line: $(cat -v "$work/xfer.log")"
done
[ "$(wc -l <"$work/xfer.log")" -eq 8 ] || fail "the xferlog has lines beyond the eight transfers"
pass "--xferlog: one wu-ftpd line per transfer, o for a get, i for a put, c or i for complete"
! LC_ALL=C grep -q -P '\x9b|\xe2\x80[\xa8\xa9]' "$work/xftpd.log" "$work/xfer.log" ||
	fail "a C1 control or a line separator reached a log: $(grep -a 2J "$work/xftpd.log" | cat -v)"
pass "C1 controls and line separators in names reach neither log"

# --syslog: the lines go to /dev/log, facility ftp, and none to stderr. As root, in a mount
# namespace of its own whose /dev is a fresh tmpfs, a socket of the test's is /dev/log.
if [ "$(id -u)" -eq 0 ]; then
	unshare -m bash -s "$xftpd" "$work" "$user" "$pass" <<'SH' || fail "--syslog"
set -euo pipefail
xftpd=$1 work=$2 user=$3 pass=$4
mkdir "$work/dev"
mount --rbind /dev "$work/dev"
mount -t tmpfs tmpfs /dev
for node in null zero random urandom; do
	touch "/dev/$node"
	mount --bind "$work/dev/$node" "/dev/$node"
done
mkdir /dev/shm
mount --bind "$work/dev/shm" /dev/shm
python3 -c '
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind("/dev/log")
open(sys.argv[1] + "/ready", "w").close()
with open(sys.argv[1] + "/syslog", "ab", 0) as f:
    while True:
        f.write(s.recv(65536).rstrip(b"\n") + b"\n")
' "$work" &
receiver=$!
for _ in $(seq 50); do [ -e "$work/ready" ] && break; sleep 0.1; done
"$xftpd" -p 16484 --root "$work/root" --users "$work/users" --run-as nobody --syslog \
	2>"$work/syslog.stderr" &
server=$!
for _ in $(seq 50); do ss -Hltn 'sport = :16484' | grep -q . && break; sleep 0.1; done
python3 -c "
import ftplib
f = ftplib.FTP(); f.connect('127.0.0.1', 16484, timeout=20); f.login('$user', '$pass'); f.quit()
"
kill "$server"
wait "$server" || true
kill "$receiver"
cat "$work/syslog"
# <94>: facility ftp (11) and priority info (6).
grep -Eq "^<94>.*xftpd\[[0-9]+\]: $user 127\.0\.0\.1:[0-9]+ logged in$" "$work/syslog"
grep -Eq "^<94>.*xftpd\[[0-9]+\]: stopped$" "$work/syslog"
[ ! -s "$work/syslog.stderr" ]
SH
	pass "--syslog: logins and the stop go to syslog with facility ftp, nothing to stderr"
fi

# Bad values are refused with one line and status 2.
for bad in 30109-30100 80-90 30100 30100-70000 x-y; do
	expect_error "--pasv-ports $bad" "pasv-ports" "$xftpd" -p 16483 --root "$work/root" \
		--anonymous --pasv-ports "$bad"
done
expect_error "--pasv-address ::1" "pasv-address" "$xftpd" -p 16483 --root "$work/root" \
	--anonymous --pasv-address ::1
pass "bad --pasv-ports and --pasv-address values refused"
log_clean
