#!/bin/bash
# A download whose file the server cannot read is the server's own failure, answered
# `451 Local error` and naming the read, whether the file goes by sendfile (MODE S) or is
# read into buffers (MODE E); a data connection that breaks under sendfile is still a cut,
# 426. strace makes the session's reads or sendfiles fail.
source "$(dirname "$0")/xftpd_lib.sh"
command -v strace >/dev/null || fail "strace is not installed (packages.txt)"
make_store
put_file f.bin $((1 << 20))
port=16497
start_xftpd "$port"

python3 - "$port" "$DS_SRC/tests/integration" "$user" "$pass" "$xftpd_pid" <<'PY' ||
import sys
sys.path.insert(0, sys.argv[2])
from xftpd_raw import Ctl, traced
port, user, password, server = int(sys.argv[1]), sys.argv[3], sys.argv[4], int(sys.argv[5])


def login():
    c = Ctl(port)
    c.login(user, password)
    return c


cases = (('S', 'sendfile', 'EIO', '451 Local error: read at 0: Input/output error'),
         ('S', 'sendfile', 'EOVERFLOW', '451 Local error: read at 0: Value too large'),
         ('S', 'sendfile', 'ECONNRESET', '426 Transfer failed: sending the file at byte 0'),
         ('E', 'pread64', 'EIO', '451 Local error: read at 0: Input/output error'))
for mode, call, errname, want in cases:
    c, tracer = traced(server, login, ['-f', '-qq', '-o', '/dev/null', '-e', 'trace=' + call,
                                       '-e', 'inject=%s:error=%s' % (call, errname)])
    c.expect(200, 'TYPE I')
    c.expect(200, 'MODE ' + mode)
    conns = c.data('RETR f.bin')
    assert not isinstance(conns, int), 'RETR f.bin: %s' % conns
    while conns[0].recv(1 << 20):
        pass
    conns[0].close()
    code, text = c.reply()
    assert text.startswith(want), 'MODE %s, %s failing with %s: %r' % (mode, call, errname, text)
    c.expect(200, 'NOOP')
    c.expect(221, 'QUIT')
    tracer.terminate()
    tracer.wait()
    print('ok MODE %s, %s failing with %s: %s' % (mode, call, errname, text))
PY
	fail "downloads whose reads fail"
pass "a download the disk fails is 451 Local error by sendfile or buffers; a broken connection 426"
log_clean
