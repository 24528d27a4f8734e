#!/bin/bash
# A resume point names only bytes the disk keeps: xftpd writes an upload's (its .len file)
# and xftp a download's (the user.xftp.whole attribute) at most once a second, each time
# after an fdatasync of the partial, and once more, synced first, when the transfer is cut
# and the partial kept for REST or --resume; one that cannot be written (or, for xftp, a
# file system that keeps no attributes) costs a sync a second, not one per piece. strace
# follows every thread of the writer.
source "$(dirname "$0")/xftpd_lib.sh"
command -v strace >/dev/null || fail "strace is not installed (packages.txt)"
make_store
put_file paced.bin $((12 << 20))
port=16491
start_xftpd "$port"

# checks TRACE PARTIAL MARK: no write of a resume point in TRACE (strace -f -y) while a
# write to the partial (a line matching PARTIAL) is not yet followed by its fdatasync; MARK
# matches a resume point's write. Prints how many points there were.
checks() {
	python3 - "$@" <<'PY'
import re, sys
trace, partial, mark = sys.argv[1], re.compile(sys.argv[2]), re.compile(sys.argv[3])
dirty, marks = False, 0
for line in open(trace):
    call = re.sub(r'^\d+ +', '', line)
    if call.startswith('fdatasync(') and partial.search(call):
        dirty = False
    elif re.match(r'(pwrite64|write|pwritev|pwritev2)\(', call) and partial.search(call):
        dirty = True
    elif mark.search(call):
        assert not dirty, 'a resume point written before its bytes were synced: ' + call
        marks += 1
print(marks)
PY
}

# xftpd: a MODE S upload paced to 2 MB/s for 3 s, then cut (the data connection closed
# before the end): points during it, and one at the cut.
python3 - "$port" "$DS_SRC/tests/integration" "$user" "$pass" "$xftpd_pid" "$work" <<'PY' ||
import os, sys
sys.path.insert(0, sys.argv[2])
from xftpd_raw import Ctl, traced
port, user, password, server, work = int(sys.argv[1]), sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6]

def login_plain():
    c = Ctl(port)
    c.login(user, password)
    return c

c, tracer = traced(server, login_plain, ['-f', '-qq', '-y', '-o', work + '/server.trace', '-e',
                                         'trace=fdatasync,pwrite64,write,pwritev,pwritev2'])
c.expect(200, 'TYPE I')
code = c.pasv_put('STOR whole.bin', os.urandom(6 << 20), pace=0.03)
assert code == 226, code
c.expect(200, 'ALLO %d' % (64 << 20))  # so that a close before it is a cut
conns = c.data('STOR cut.bin')
payload = os.urandom(64 << 10)
import time
end = time.time() + 3
while time.time() < end:
    conns[0].sendall(payload)
    time.sleep(0.03)
conns[0].close()
code = c.reply()[0]
assert code == 451, code
c.expect(221, 'QUIT')
tracer.terminate()
tracer.wait()
PY
	fail "the traced uploads"
n=$(checks "$work/server.trace" '\.xftpd-part\.[0-9a-f.]*>' '\.xftpd-part\.[0-9a-f.]*\.len>') ||
	fail "xftpd: $n"
[ "$n" -ge 2 ] || fail "xftpd wrote $n resume points in two uploads of 3 s"
pass "xftpd writes an upload's resume point only after its bytes are synced ($n points)"

# xftp: a get paced to 4 MB/s, cut by SIGINT after 2 s: points during it, one at the cut.
xftp=$DS_BIN/xftp
strace -f -qq -y -o "$work/client.trace" -e trace=fdatasync,pwrite64,write,fsetxattr \
	"$xftp" -q -R 32M get "ftp://$user:$pass@127.0.0.1:$port/paced.bin" "$work/paced.bin" \
	>/dev/null 2>&1 &
tracer=$!
sleep 2.5
kill -INT "$(pgrep -P $tracer)" # xftp, strace's child
wait $tracer 2>/dev/null || true
[ ! -e "$work/paced.bin" ] || fail "a cut download took its final name"
whole=$(whole_mark "$work/.paced.bin.xftp-part") || fail "the cut download keeps no resume point"
[ "$whole" -gt 0 ] || fail "the cut download's resume point is $whole"
n=$(checks "$work/client.trace" '\.paced\.bin\.xftp-part>' 'fsetxattr\(.*"user\.xftp\.whole"') ||
	fail "xftp: $n"
[ "$n" -ge 2 ] || fail "xftp wrote $n resume points in a get of 2.5 s"
pass "xftp records a download's resume point only after its bytes are synced ($n points, $whole bytes whole)"

# xftpd: a resume point that cannot be written (here a directory at its name) still waits a
# second for the next sync, not the next piece: an upload paced for 2.5 s in 64 KiB pieces
# (-b 64K) syncs its partial a few times, not once a piece.
kill "$xftpd_pid"
wait "$xftpd_pid" || true
start_xftpd "$port" -b 64K
python3 - "$port" "$DS_SRC/tests/integration" "$user" "$pass" "$xftpd_pid" "$work" <<'PY' ||
import glob, os, sys, time
sys.path.insert(0, sys.argv[2])
import xftpd_raw
port, server, work = int(sys.argv[1]), sys.argv[5], sys.argv[6]


def session():
    """A logged-in control connection in binary mode."""
    c = xftpd_raw.Ctl(port)
    c.login(sys.argv[3], sys.argv[4])
    c.expect(200, 'TYPE I')
    return c


c = session()
c.expect(200, 'ALLO %d' % (64 << 20))
before = set(glob.glob(work + '/root/.xftpd-part.*.len'))
assert c.pasv_put('STOR blocked.bin', os.urandom(1 << 16)) == 451  # cut: a point, to name
for _ in range(100):  # the point comes as the partial is kept
    marks = set(glob.glob(work + '/root/.xftpd-part.*.len')) - before
    if marks:
        break
    time.sleep(0.05)
[mark] = marks
os.unlink(mark)
os.mkdir(mark)
c.expect(221, 'QUIT')
c, tracer = xftpd_raw.traced(server, session,
                             ['-f', '-qq', '-o', work + '/blocked.trace', '-e', 'trace=fdatasync'])
code = c.pasv_put('STOR blocked.bin', os.urandom(5 << 20), pace=0.03)
assert code == 226, code
c.expect(221, 'QUIT')
tracer.terminate()
tracer.wait()
syncs = sum(1 for line in open(work + '/blocked.trace') if 'fdatasync(' in line)
assert syncs <= 6, '%d syncs of an upload of 2.5 s whose point cannot be written' % syncs
print(syncs)
PY
	fail "an upload whose resume point cannot be written"
pass "xftpd syncs an upload whose resume point cannot be written once a second, not per piece"

# xftpd, on a session where every fdatasync fails (EIO, as strace makes it):
# - an upload cut where its bytes cannot be made durable (the resume point at the cut
#   cannot follow a sync) is not kept, and its 451 says so rather than "kept for REST";
# - an upload whose resume point's sync fails ends there, a second in, with a 451 that
#   says why: the sender is not left to send the rest of a file that can be neither
#   committed nor kept. The session goes on.
python3 - "$port" "$DS_SRC/tests/integration" "$user" "$pass" "$xftpd_pid" <<'PY' ||
import os, sys, time
sys.path.insert(0, sys.argv[2])
import xftpd_raw
port, server = int(sys.argv[1]), sys.argv[5]


def session():
    c = xftpd_raw.Ctl(port)
    c.login(sys.argv[3], sys.argv[4])
    c.expect(200, 'TYPE I')
    return c


c, tracer = xftpd_raw.traced(server, session, ['-f', '-qq', '-o', '/dev/null', '-e',
                                               'trace=fdatasync', '-e',
                                               'inject=fdatasync:error=EIO'])
c.expect(200, 'ALLO %d' % (64 << 20))  # so that a close before it is a cut
conns = c.data('STOR unsynced.bin')
conns[0].sendall(os.urandom(1 << 20))
conns[0].close()
code, text = c.reply()
assert code == 451 and 'discarded' in text and 'REST' not in text, 'cut: ' + text
c.expect(550, 'PSIZ unsynced.bin')
print(text)

payload = os.urandom(8 << 20)  # 4 s at 64 KiB each 30 ms
conns = c.data('STOR failing.bin')
sent = 0
try:
    while sent < len(payload):
        conns[0].sendall(payload[sent:sent + 65536])
        sent += 65536
        time.sleep(0.03)
except (BrokenPipeError, ConnectionResetError):
    pass
conns[0].close()
code, text = c.reply()
assert code == 451 and 'fdatasync' in text and 'Input/output error' in text, text
assert sent < len(payload), 'the upload went on to its end after its sync failed: ' + text
c.expect(550, 'PSIZ failing.bin')
c.expect(200, 'NOOP')
c.expect(221, 'QUIT')
tracer.terminate()
tracer.wait()
print(text)
PY
	fail "uploads whose bytes cannot be synced"
pass "an upload cut whose bytes cannot be synced is discarded, and its 451 says so"
[ ! -e "$work/root/failing.bin" ] || fail "an upload whose sync failed took its name"
grep -q 'STOR /failing.bin .* partial discarded' "$work/xftpd.log" ||
	fail "xftpd's log does not say the failed upload's partial went: $(grep failing "$work/xftpd.log")"
pass "an upload whose resume point's sync fails ends at once with 451, nothing kept"

# xftp on a file system that keeps no attributes (every fsetxattr refused, as strace makes
# it): no point can be recorded, and the partial is still synced once a second, not after
# every block (64 KiB here: 3 s of them were over a hundred fdatasyncs).
"${strace_cmd[@]}" -f -qq -o "$work/bare.trace" -e trace=fdatasync,fsetxattr \
	-e inject=fsetxattr:error=EOPNOTSUPP \
	"$xftp" -q -b 64K -R 32M get "ftp://$user:$pass@127.0.0.1:$port/paced.bin" "$work/bare.bin" \
	>/dev/null 2>"$work/bare.err" || fail "a get where no attribute is kept: $(cat "$work/bare.err")"
cmp -s "$work/root/paced.bin" "$work/bare.bin" || fail "a get where no attribute is kept differs"
n=$(grep -c '^[0-9]* *fdatasync(' "$work/bare.trace" || true)
[ "$n" -le 6 ] || fail "a get of 3 s where no attribute is kept made $n fdatasyncs"
pass "where no attribute is kept, a download's partial is synced once a second ($n fdatasyncs in 3 s)"
log_clean
