# Uploads appear under their final name only when whole: after kill -9 of the client or
# of the server, after SIGTERM, after ABOR, after a short upload, on a full disk. A
# resumed upload (PSIZ, REST, STOR) ends with identical bytes.
source "$(dirname "$0")/xftpd_lib.sh"
make_store
head -c 24000000 /dev/urandom >"$work/big"
port=16441
touch "$work/since"
raw=$DS_SRC/tests/integration

# slow_upload NAME: uploads $work/big as NAME slowly, in the background ($uploader).
slow_upload() {
	python3 - "$port" "$raw" "$user" "$pass" "$1" "$work/big" <<'PY' >"$work/uploader.log" 2>&1 &
import sys
sys.path.insert(0, sys.argv[2])
from xftpd_raw import Ctl
c = Ctl(int(sys.argv[1]))
c.login(sys.argv[3], sys.argv[4])
c.pasv_put('STOR ' + sys.argv[5], open(sys.argv[6], 'rb').read(), pace=0.02)
PY
	uploader=$!
}

# part_name NAME [USER]: the partial of NAME that USER's uploads write, as the store names
# it (FNV-1a of the name, a dot, of the user); without USER, the stem all of them share.
part_name() {
	python3 -c '
import sys
def fnv(text):
    h = 0xcbf29ce484222325
    for b in text.encode() + b"\0":
        h = ((h ^ b) * 0x100000001b3) & 0xffffffffffffffff
    return "%016x" % h
print(".xftpd-part.%s.%s" % (fnv(sys.argv[1]), fnv(sys.argv[2]) if len(sys.argv) > 2 else ""))' "$@"
}

# await_partial NAME BYTES: until the resume point of a partial upload of NAME begun
# after the last call passes BYTES.
await_partial() {
	local mark f stem
	stem=$(part_name "$1")
	for _ in $(seq 300); do
		for f in "$work/root/$stem"*.len; do
			[ "$f" -nt "$work/since" ] || continue
			mark=$(cat "$f" 2>/dev/null || true)
			[ "$((10#${mark:-0}))" -ge "$2" ] && touch "$work/since" && return 0
		done
		sleep 0.05
	done
	fail "the partial upload of $1 never reached $2 bytes"
}

# resume NAME: PSIZ, then REST and STOR of the rest of $work/big; prints the offset.
resume() {
	python3 - "$port" "$raw" "$user" "$pass" "$1" "$work/big" <<'PY'
import sys
sys.path.insert(0, sys.argv[2])
from xftpd_raw import Ctl
c = Ctl(int(sys.argv[1]))
c.login(sys.argv[3], sys.argv[4])
c.expect(550, 'SIZE ' + sys.argv[5])           # nothing committed yet
offset = int(c.expect(213, 'PSIZ ' + sys.argv[5]).split()[1])
data = open(sys.argv[6], 'rb').read()
assert 0 < offset < len(data), offset
c.expect(350, 'REST %d' % offset)
assert c.pasv_put('STOR ' + sys.argv[5], data[offset:]) == 226
c.expect(550, 'PSIZ ' + sys.argv[5])           # the partial is gone once committed
print(offset)
PY
}

start_xftpd "$port"
slow_upload k1.bin
await_partial k1.bin 3000000
kill -9 "$uploader"
wait "$uploader" 2>/dev/null || true
[ ! -e "$work/root/k1.bin" ] || fail "a killed client's upload appeared under its name"
pass "kill -9 of the client: nothing under the final name"
offset=$(resume k1.bin) || fail "resume after the client's kill"
same "$work/big" "$work/root/k1.bin" "resumed from $offset after the client's kill -9: identical bytes"

slow_upload k2.bin
await_partial k2.bin 3000000
pkill -9 -P "$xftpd_pid"
kill -9 "$xftpd_pid"
wait "$xftpd_pid" 2>/dev/null || true
wait "$uploader" 2>/dev/null || true
[ ! -e "$work/root/k2.bin" ] || fail "a killed server's upload appeared under its name"
pass "kill -9 of the server: nothing under the final name"
start_xftpd "$port"
offset=$(resume k2.bin) || fail "resume after the server's kill"
same "$work/big" "$work/root/k2.bin" "resumed from $offset after the server's kill -9: identical bytes"

# An upload over a committed file leaves it whole until the new one is.
cp "$work/big" "$work/root/keep.bin"
slow_upload keep.bin
await_partial keep.bin 2000000
kill -9 "$uploader"
wait "$uploader" 2>/dev/null || true
same "$work/big" "$work/root/keep.bin" "an interrupted upload leaves the old file as it was"

# The partial itself is the upload's lock: a second upload of the same name by the same
# user waits for the first, then is refused (450) without touching its bytes.
slow_upload busy.bin
await_partial busy.bin 1000000
python3 - "$port" "$raw" "$user" "$pass" <<'PY' || fail "a second upload of a name in flight"
import sys
sys.path.insert(0, sys.argv[2])
from xftpd_raw import Ctl
c = Ctl(int(sys.argv[1]))
c.login(sys.argv[3], sys.argv[4])
code = c.pasv_put('STOR busy.bin', b'z' * 1000)
assert code == 450, code
PY
wait "$uploader" || fail "the first upload of busy.bin failed beside a second one"
same "$work/big" "$work/root/busy.bin" "a second upload of a name in flight is refused (450); the first ends whole"
# A one-block upload leaves nothing beside its file: no partial, no resume point.
python3 - "$port" "$raw" "$user" "$pass" <<'PY' || fail "small upload"
import sys
sys.path.insert(0, sys.argv[2])
from xftpd_raw import Ctl
c = Ctl(int(sys.argv[1]))
c.login(sys.argv[3], sys.argv[4])
c.expect(257, 'MKD clean')
assert c.pasv_put('STOR clean/small.bin', b's' * 4096) == 226
PY
left=$(ls -A "$work/root/clean")
[ "$left" = small.bin ] || fail "a one-block upload left: $left"
[ "$(stat -c %s "$work/root/clean/small.bin")" = 4096 ] || fail "small.bin is not whole"
pass "a committed one-block upload leaves no temporary file or resume point behind"

python3 - "$port" "$raw" "$user" "$pass" <<'PY' || fail "ALLO, ABOR"
import sys, socket
sys.path.insert(0, sys.argv[2])
from xftpd_raw import Ctl
c = Ctl(int(sys.argv[1]))
c.login(sys.argv[3], sys.argv[4])
c.expect(200, 'ALLO 1000000')
assert c.pasv_put('STOR short.bin', b'x' * 500000) == 451   # less than announced
c.expect(550, 'SIZE short.bin')
assert c.expect(213, 'PSIZ short.bin') == '213 500000'
c.expect(200, 'ALLO 100')                                   # MODE E refuses more than that
c.expect(200, 'MODE E')
block = bytes([0]) + (200).to_bytes(8, 'big') + (0).to_bytes(8, 'big') + b'y' * 200
assert c.pasv_put('STOR over.bin', block) == 552
c.expect(200, 'MODE S')
# ABOR in the middle of a RETR: 426 for the transfer, then 226.
text = c.expect(229, 'EPSV')
data = socket.create_connection(('127.0.0.1', int(text.split('|||')[1].split('|')[0])))
c.send('RETR k1.bin')
c.expect(150)
data.recv(65536)
c.send(b'\xff\xf4\xff\xf2ABOR\r\n')
c.expect(426)
c.expect(226)
data.close()
c.expect(200, 'NOOP')
# ABOR while the server waits for the data connection: 425, then 226.
c.expect(229, 'EPSV')
c.send('RETR k1.bin')
c.send('ABOR')
c.expect(425)
c.expect(226)
c.expect(200, 'NOOP')
# Two ABORs in one read (a cancel pressed twice): the first cuts the upload whose bytes
# never come (426, 226), the second gets its own 226.
data = c.data('STOR never.bin')
c.send(b'ABOR\r\nABOR\r\n')
c.sock.settimeout(5)
assert [c.reply()[0] for _ in range(3)] == [426, 226, 226]
data[0].close()
c.expect(200, 'NOOP')
PY
[ ! -e "$work/root/short.bin" ] && [ ! -e "$work/root/over.bin" ] ||
	fail "a short or overlong upload appeared under its name"
pass "ALLO: short uploads kept aside (451), overlong ones refused (552); ABOR gives 426 (or 425), 226, each ABOR its reply"

# ALLO reserves no disk: a client that announces 1 GiB and sends 1000 bytes holds no more
# disk than that, kept for REST or committed.
python3 - "$port" "$raw" "$user" "$pass" <<'PY' || fail "ALLO reservation"
import sys
sys.path.insert(0, sys.argv[2])
from xftpd_raw import Ctl
c = Ctl(int(sys.argv[1]))
c.login(sys.argv[3], sys.argv[4])
c.expect(200, 'ALLO 1073741824')
assert c.pasv_put('STOR alloc-short.bin', b'a' * 1000) == 451
c.expect(200, 'MODE E')
c.expect(200, 'ALLO 1073741824')
assert c.modee_put('STOR alloc-e.bin', b'e' * 1000, 1) == 226
c.expect(200, 'MODE S')
PY
for f in "$work/root"/.xftpd-part.* "$work/root/alloc-e.bin"; do
	held=$(($(stat -c %b "$f") * $(stat -c %B "$f") - $(stat -c %s "$f")))
	[ "$held" -le 1048576 ] || fail "$f holds $held bytes of disk past its data after ALLO 1 GiB"
done
pass "ALLO: an upload shorter than announced holds no disk past its data"

# What a local user puts at a partial's name is not the server's to write: a FIFO, a
# directory, a second link to someone's file. PSIZ and STOR refuse it at once (550).
fifo=$work/root/$(part_name fifo.bin "$user")
mkfifo -m 666 "$fifo"
mkdir "$work/root/$(part_name dir.bin "$user")"
echo "not the server's" >"$work/victim"
[ "$(id -u)" -ne 0 ] || chown nobody "$work/victim"
ln "$work/victim" "$work/root/$(part_name linked.bin "$user")"
python3 - "$port" "$raw" "$user" "$pass" <<'PY' || fail "a FIFO, a directory or a link at a partial's name"
import sys
sys.path.insert(0, sys.argv[2])
from xftpd_raw import Ctl
c = Ctl(int(sys.argv[1]), timeout=10)
c.login(sys.argv[3], sys.argv[4])
for name in ('fifo.bin', 'dir.bin', 'linked.bin'):
    c.expect(550, 'PSIZ ' + name)
    assert c.data('STOR ' + name) == 550, name
PY
[ -p "$fifo" ] && [ "$(cat "$work/victim")" = "not the server's" ] &&
	[ ! -e "$work/root/linked.bin" ] || fail "an upload wrote what a local user put at its partial's name"
pass "a FIFO, a directory or a second link at a partial's name: PSIZ and STOR answer 550, nothing written"

# A commit or DELE frees a partial's name only once its resume point is gone: an upload
# of the same name begun the moment the name is free keeps a resume point of its own.
# strace holds each unlinkat of the committing or deleting session 1.5 s, so the second
# upload writes its resume point inside that gap; it is then resumed to identical bytes.
command -v strace >/dev/null || fail "strace is not installed (packages.txt)"
python3 - "$port" "$raw" "$user" "$pass" "$xftpd_pid" "$work/root" "$(part_name del.bin "$user")" <<'PY' ||
import os, sys, threading, time
sys.path.insert(0, sys.argv[2])
from xftpd_raw import Ctl, traced
port, server, root, partial = int(sys.argv[1]), sys.argv[5], sys.argv[6], sys.argv[7]

def login():
    c = Ctl(port)
    c.login(sys.argv[3], sys.argv[4])
    return c

def traced_login():
    """A session whose every unlinkat strace holds 1.5 s: (its Ctl, the tracer)."""
    return traced(server, login, ['-f', '-qq', '-o', '/dev/null', '-e', 'trace=unlinkat', '-e',
                                  'inject=unlinkat:delay_enter=1500000'])

def in_background(fn):
    replies = []
    thread = threading.Thread(target=lambda: replies.append(fn()))
    thread.start()
    return thread, replies

def await_path(path, present):
    for _ in range(1000):
        if os.path.exists(path) == present:
            return
        time.sleep(0.01)
    raise AssertionError('%s never %s' % (path, 'came' if present else 'went'))

def resume(c, name, data):
    at = int(c.expect(213, 'PSIZ ' + name).split()[1])
    assert 0 < at < len(data), at
    c.expect(350, 'REST %d' % at)
    assert c.pasv_put('STOR ' + name, data[at:]) == 226
    assert open(root + '/' + name, 'rb').read() == data, name + ' is not the bytes sent'

# A second upload that ends short (451, kept for REST) while the first commits.
first, tracer = traced_login()
thread, replies = in_background(lambda: first.pasv_put('STOR race.bin', os.urandom(9000000)))
await_path(root + '/race.bin', True)
second = login()
data = os.urandom(12000000)
second.expect(200, 'ALLO %d' % len(data))
assert second.pasv_put('STOR race.bin', data[:9000000]) == 451
thread.join()
tracer.terminate()
tracer.wait()
assert replies == [226], replies
resume(second, 'race.bin', data)

# A second upload that runs while DELE removes the partial it will replace.
first = login()
first.expect(200, 'ALLO 4000000')
assert first.pasv_put('STOR del.bin', b'd' * 3000000) == 451
deleter, tracer = traced_login()
thread, replies = in_background(lambda: deleter.send('DELE del.bin') or deleter.reply()[0])
await_path(root + '/' + partial, False)
second = login()
second.expect(200, 'ALLO %d' % len(data))
conns = second.data('STOR del.bin')
conns[0].sendall(data[:9000000])
thread.join()
tracer.terminate()
tracer.wait()
conns[0].close()
second.expect(451)
resume(second, 'del.bin', data)
PY
	fail "an upload beside a commit or DELE of its name"
pass "an upload begun as another of its name commits keeps its resume point; resumed, identical bytes"
pass "an upload begun as DELE removes its name's partial keeps its resume point; resumed, identical bytes"

# A commit that cannot rename (a directory took the name meanwhile) keeps the upload for
# REST, resume point and all.
python3 - "$port" "$raw" "$user" "$pass" <<'PY' || fail "a commit whose rename fails"
import sys
sys.path.insert(0, sys.argv[2])
from xftpd_raw import Ctl
def login():
    c = Ctl(int(sys.argv[1]))
    c.login(sys.argv[3], sys.argv[4])
    return c
uploader, other = login(), login()
conns = uploader.data('STOR clash.bin')
conns[0].sendall(b'c' * 2500000)
other.expect(257, 'MKD clash.bin')
conns[0].sendall(b'c' * 2500000)
conns[0].close()
uploader.expect(451)
assert uploader.expect(213, 'PSIZ clash.bin') == '213 5000000'
PY
pass "a commit whose rename fails keeps the upload and its resume point for REST"

# A STOR that never got its data connection (425) leaves no partial behind.
python3 - "$port" "$raw" "$user" "$pass" <<'PY' || fail "STOR without a data connection"
import sys
sys.path.insert(0, sys.argv[2])
from xftpd_raw import Ctl
c = Ctl(int(sys.argv[1]))
c.login(sys.argv[3], sys.argv[4])
c.expect(257, 'MKD none')
c.expect(425, 'STOR none/nothing.bin')
PY
[ -z "$(ls -A "$work/root/none")" ] || fail "a STOR refused 425 left: $(ls -A "$work/root/none")"
pass "a STOR refused 425 leaves no partial behind"

# SIGTERM with an upload in flight: the server ends, the upload keeps its temporary name.
slow_upload t.bin
await_partial t.bin 1000000
kill "$xftpd_pid"
for _ in $(seq 100); do kill -0 "$xftpd_pid" 2>/dev/null || break; sleep 0.1; done
kill -0 "$xftpd_pid" 2>/dev/null && fail "xftpd still runs 10 s after SIGTERM"
wait "$xftpd_pid" || fail "xftpd exited non-zero on SIGTERM"
wait "$uploader" 2>/dev/null || true
[ ! -e "$work/root/t.bin" ] || fail "SIGTERM gave a partial upload its final name"
pass "SIGTERM cuts transfers in flight; no partial file takes a final name"

# A full disk: 452, and the partial is removed.
if [ "$(id -u)" -eq 0 ]; then
	mkdir "$work/small"
	mount -t tmpfs -o size=2m tmpfs "$work/small"
	trap 'umount -l "$work/small" 2>/dev/null || true; cleanup' EXIT # before the work dir goes
	chown nobody "$work/small"
	"$xftpd" -p 16442 --root "$work/small" --users "$work/users" "${run_as[@]}" 2>>"$work/xftpd.log" &
	small_pid=$!
	wait_listening 16442
	python3 - 16442 "$raw" "$user" "$pass" "$work/big" <<'PY' || fail "disk full"
import sys
sys.path.insert(0, sys.argv[2])
from xftpd_raw import Ctl
c = Ctl(int(sys.argv[1]))
c.login(sys.argv[3], sys.argv[4])
code = c.pasv_put('STOR full.bin', open(sys.argv[5], 'rb').read()[:5000000])
assert code == 452, code
c.expect(550, 'PSIZ full.bin')
PY
	[ -z "$(ls -A "$work/small")" ] || fail "disk full left files behind: $(ls -A "$work/small")"
	pass "disk full: 452, and the partial file is removed"
	kill "$small_pid"
	wait "$small_pid" || fail "xftpd on the small disk did not end cleanly"
	umount "$work/small"
	trap cleanup EXIT
fi

log_clean
