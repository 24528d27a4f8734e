# No path a client sends leads out of xftpd's root: not "..", not an absolute path, not a
# symbolic link, not odd bytes; and the server's own partial files stay out of reach.
source "$(dirname "$0")/xftpd_lib.sh"
make_store
put_file f.bin 1000
mkdir -p "$work/outside"
echo "secret" >"$work/outside/secret"
echo "secret" >"$work/secret"
ln -s "$work/outside" "$work/root/dirlink"
ln -s "$work/secret" "$work/root/filelink"
ln -s /etc/passwd "$work/root/passwd"
ln -s f.bin "$work/root/inside"
mkdir "$work/root/sub"
ln -s ../f.bin "$work/root/sub/up"
mkfifo "$work/root/fifo"
[ "$(id -u)" -ne 0 ] || chown -R nobody "$work/root/sub"
before=$(find "$work" -path "$work/root" -prune -o ! -name xftpd.log -print | sort | md5sum)

port=16431
start_xftpd "$port"
python3 - "$port" "$DS_SRC/tests/integration" "$user" "$pass" <<'PY' || fail "path checks"
import sys
sys.path.insert(0, sys.argv[2])
from xftpd_raw import Ctl
c = Ctl(int(sys.argv[1]))
c.login(sys.argv[3], sys.argv[4])

for path in ['../secret', '../../../../../../etc/passwd', '/../secret', '/../../outside/secret',
             'sub/../../secret', 'dirlink/secret', 'filelink', 'passwd', './dirlink/../f.bin/x',
             '//../secret', 'sub/./../..//secret']:
    code, data = c.pasv_get('RETR ' + path)
    assert code == 550 and data == b'', (path, code, data)
for path in ['../evil', 'dirlink/evil', '/../../evil']:
    code = c.pasv_put('STOR ' + path, b'x')
    # ".." stops at the root, as at "/": these land inside (or are refused); never outside.
    assert code in (226, 550), (path, code)
c.expect(550, 'CWD dirlink')
c.expect(250, 'CWD ..')                          # at the root ".." stays at the root
assert c.expect(257, 'PWD').startswith('257 "/"')
c.expect(250, 'CWD /../../..')
assert c.expect(257, 'PWD').startswith('257 "/"')
c.expect(550, 'SIZE ../secret')
c.expect(550, 'SIZE filelink')
c.expect(550, 'MDTM passwd')
c.expect(550, 'DELE dirlink/secret')
c.expect(550, 'RNFR dirlink/secret')
c.expect(550, 'MKD dirlink/newdir')
c.expect(550, 'HASH filelink')
c.expect(550, 'MLST dirlink')
c.expect(501, 'RETR f\x01.bin')
c.expect(501, 'CWD a\x7fb')
# A FIFO in the store is no file to send, and opening it must not wait for a writer.
c.sock.settimeout(5)
assert c.data('RETR fifo') == 550
c.expect(550, 'HASH fifo')
c.sock.settimeout(20)
# REST over a link that leads out says nothing of its target's size: one answer for both.
for offset in (1, 1 << 40):
    c.expect(350, 'REST %d' % offset)
    assert c.data('STOR passwd') == 554, offset
c.expect(550, 'RETR .xftpd-part.0000000000000000')
c.expect(550, 'DELE sub/.xftpd-part.1234')
c.expect(550, 'PSIZ .xftpd-x')
c.expect(550, 'STOR .xftpd-part.1')
# Links that stay inside work.
code, data = c.pasv_get('RETR inside')
assert code == 226 and len(data) == 1000, code
code, data = c.pasv_get('RETR sub/up')
assert code == 226 and len(data) == 1000, code
# Names with spaces, quotes and bytes above 127 are names like any other.
for name in ['with space', 'quote"d', 'caf\xc3\xa9', ' lead', 'semi;colon']:
    assert c.pasv_put('STOR ' + name, b'abc') == 226, name
    code, data = c.pasv_get('RETR ' + name)
    assert code == 226 and data == b'abc', name
c.expect(257, 'MKD quote"d dir')
# A ".." inside a link meets renames elsewhere on the system: openat2 then asks for a
# retry (EAGAIN), which must not reach the client as 550.
import os, shutil, tempfile, threading
spinning = True
spin_dir = tempfile.mkdtemp()
def spin():
    open(spin_dir + '/a', 'w').close()
    while spinning:
        os.rename(spin_dir + '/a', spin_dir + '/b')
        os.rename(spin_dir + '/b', spin_dir + '/a')
spinner = threading.Thread(target=spin)
spinner.start()
try:
    for _ in range(1000):
        c.expect(213, 'SIZE sub/up')
finally:
    spinning = False
    spinner.join()
    shutil.rmtree(spin_dir)
# Listings never show links that lead out, nor the server's own files.
code, listing = c.pasv_get('LIST')
assert code == 226
for hidden in [b'dirlink', b'filelink', b'passwd', b'.xftpd']:
    assert hidden not in listing, (hidden, listing)
assert b'inside' in listing and b'f.bin' in listing
c.expect(221, 'QUIT')
PY
pass "escapes refused: .., absolute paths, symlinks out, control bytes, the server's own files"
pass "a FIFO in the store: RETR and HASH refuse it at once (550)"
pass "REST and STOR over a link out of the root: one answer whatever its target's size"
pass "a link with '..' resolves while renames race it"
after=$(find "$work" -path "$work/root" -prune -o ! -name xftpd.log -print | sort | md5sum)
[ "$before" = "$after" ] || fail "something changed outside the root"
[ "$(cat "$work/outside/secret")" = secret ] || fail "outside file changed"
pass "nothing outside the root changed"
[ -f "$work/root/evil" ] || fail "STOR ../evil did not land inside the root"
pass "'..' above the root stops at the root"

log_clean
