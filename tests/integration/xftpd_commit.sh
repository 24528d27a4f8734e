# When a committed upload is made durable, name and data (its directory's fsync): its data
# is written out before its rename; a run of uploads into one directory pays one sync, not
# one per file; the sync comes before any reply that shows a name (SIZE), before QUIT's
# 221, when the client falls quiet, and when the client goes without QUIT. strace follows
# the session's main thread: its write-outs, renames, fsyncs and replies, in the order it
# makes them. A sync that fails ends the session with 421 at the next command, and xftp,
# which takes QUIT's 221 for its uploads' durability, fails.
source "$(dirname "$0")/xftpd_lib.sh"
command -v strace >/dev/null || fail "strace is not installed (packages.txt)"
make_store
# Which call writes an upload out depends on the file system: a ramfs (none of those xftpd
# trusts) has it fsynced, a tmpfs (one of them) has it written out only, whatever the file
# system of $work; the failed syncs are checked on the tmpfs, where only the directory's
# fsync can fail. Mounting needs root, as CI is.
mkdir "$work/root/ram" "$work/root/tmp"
if [ "$(id -u)" -eq 0 ]; then
	mount -t ramfs ramfs "$work/root/ram" || fail "cannot mount a ramfs"
	mount -t tmpfs tmpfs "$work/root/tmp" || fail "cannot mount a tmpfs"
	chown nobody "$work/root/ram" "$work/root/tmp"
else
	echo "# not root: the call per file system and the failed syncs go unchecked"
fi
port=16481
start_xftpd "$port"

python3 - "$port" "$DS_SRC/tests/integration" "$user" "$pass" "$xftpd_pid" "$work" <<'PY' ||
import os, re, sys, time
sys.path.insert(0, sys.argv[2])
from xftpd_raw import Ctl, traced
port, user, password, server, work = int(sys.argv[1]), sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6]
root = os.path.realpath(work + '/root')

def login_plain():
    c = Ctl(port)
    c.login(user, password)
    return c

def traced_login(trace):
    """A session whose main thread strace follows: (its Ctl, the tracer)."""
    return traced(server, login_plain, ['-qq', '-y', '-s', '40', '-o', trace, '-e',
                                  'trace=sync_file_range,renameat,fsync,sendmsg'])

def events(trace):
    """The traced calls in order: ('write_out', dir) for a partial's sync_file_range or
    fsync (the file system says which), ('rename', dir), ('sync', dir) for a directory's
    fsync, ('reply', text)."""
    out = []
    for line in open(trace):
        m = re.match(r'(?:sync_file_range|fsync)\(\d+<([^>]*)/\.xftpd-part\.', line)
        if m:
            out.append(('write_out', m.group(1)))
        m = re.match(r'renameat\(\d+<([^>]*)>', line)
        if m:
            out.append(('rename', m.group(1)))
        m = re.match(r'fsync\(\d+<([^>]*)>', line)
        if m and '.xftpd-part.' not in m.group(1):
            out.append(('sync', m.group(1)))
        m = re.match(r'sendmsg\(.*iov_base="([^"]*)', line)
        if m:
            out.append(('reply', m.group(1)))
    return out

def between(evs, first, last):
    """The events after the first one matching first and before the next matching last."""
    start = next(i for i, e in enumerate(evs) if first(e))
    end = next(i for i, e in enumerate(evs) if i > start and last(e))
    return evs[start + 1:end]

def put(c, path, data=b'x' * 70000):
    assert c.pasv_put('STOR ' + path, data) == 226, path

trace = work + '/trace'
c, tracer = traced_login(trace)
for d in ('run', 'quiet', 'quit'):
    c.expect(257, 'MKD ' + d)
c.expect(200, 'TYPE I')
for i in range(10):  # as lftp sends a tree: PASV, STOR, MFMT
    put(c, 'run/f%d' % i)
    c.expect(213, 'MFMT 20210304050607 run/f%d' % i)
assert c.expect(213, 'SIZE run/f9') == '213 70000'
put(c, 'quiet/a')
time.sleep(0.5)
c.expect(200, 'NOOP')
put(c, 'quit/a')
c.expect(221, 'QUIT')
c.closed()
time.sleep(0.3)
tracer.terminate()
tracer.wait()
evs = events(trace)

run, quiet, quit = root + '/run', root + '/quiet', root + '/quit'
renames = [e for e in evs if e == ('rename', run)]
assert len(renames) == 10, evs
syncs = [e for e in between(evs, lambda e: e == ('rename', run),
                            lambda e: e[0] == 'reply' and e[1].startswith('213 70000'))
         if e == ('sync', run)]
# One expected; a loaded machine may pause the client past the quiet time now and then.
assert 1 <= len(syncs) <= 4, 'ten uploads into one directory, %d syncs of it' % len(syncs)
last = max(i for i, e in enumerate(evs) if e == ('rename', run))
size = next(i for i, e in enumerate(evs) if e[0] == 'reply' and e[1].startswith('213 70000'))
assert ('sync', run) in evs[last:size], 'SIZE answered before the names were synced: %s' % evs
print('ok ten uploads, %d sync(s) of their directory, the last before SIZE answers' % len(syncs))

steps = [e for e in evs if e in (('write_out', run), ('rename', run))]
assert steps == [('write_out', run), ('rename', run)] * 10, steps
print('ok each upload written out before its rename')

for fs, want in (('ram', 'fsync'), ('tmp', 'sync_file_range')):
    if not os.path.ismount(root + '/' + fs):
        continue
    trace = work + '/trace-' + fs
    c, tracer = traced_login(trace)
    c.expect(200, 'TYPE I')
    put(c, fs + '/a')
    c.expect(221, 'QUIT')
    c.closed()
    tracer.terminate()
    tracer.wait()
    calls = [line.split('(')[0] for line in open(trace) if '/%s/.xftpd-part.' % fs in line]
    assert calls == [want], 'on %sfs: %s' % (fs, calls)
    print('ok on a %sfs an upload is written out by %s alone' % (fs, want))

done = next(i for i, e in enumerate(evs) if e == ('rename', quiet))
noop = next(i for i, e in enumerate(evs) if i > done and e[0] == 'reply' and e[1].startswith('200 NOOP'))
assert ('sync', quiet) in evs[done:noop], 'a quiet client left its name unsynced: %s' % evs[done:]
print('ok a client quiet after its upload has the name synced before it speaks again')

done = next(i for i, e in enumerate(evs) if e == ('rename', quit))
bye = next(i for i, e in enumerate(evs) if e[0] == 'reply' and e[1].startswith('221'))
assert done < bye and ('sync', quit) in evs[done:bye], 'QUIT answered first: %s' % evs[done:]
print('ok QUIT answered once the name is synced')

# A client that goes without QUIT at once after its 226.
trace = work + '/trace2'
c, tracer = traced_login(trace)
c.expect(257, 'MKD gone')
c.expect(200, 'TYPE I')
put(c, 'gone/a')
c.sock.close()
time.sleep(0.5)
tracer.terminate()
tracer.wait()
evs = events(trace)
done = evs.index(('rename', root + '/gone'))
assert ('sync', root + '/gone') in evs[done:], 'a vanished client left its name unsynced: %s' % evs
print('ok a client gone without QUIT has its name synced as the session ends')

# An upload that replaces a big file: the old file's blocks are freed (its last reference
# dropped) after the 226, on a thread apart from the one that answers.
trace = work + '/trace-replace'
c, tracer = traced(server, login_plain, ['-f', '-qq', '-y', '-o', trace, '-e',
                                         'trace=renameat,sendmsg,close'])
c.expect(257, 'MKD rep')
c.expect(200, 'TYPE I')
big = 17 << 20  # over XFTP_RELEASE_APART, allocated even where the disk compresses
new = os.urandom(big)
put(c, 'rep/big', os.urandom(big))
put(c, 'rep/big', new)
c.expect(221, 'QUIT')
c.closed()
time.sleep(0.3)
tracer.terminate()
tracer.wait()
with open(root + '/rep/big', 'rb') as f:
    assert f.read() == new, 'the replacing upload is not what the name holds'
lines = [l for l in open(trace)]
renamed = [i for i, l in enumerate(lines) if 'renameat(' in l and '/rep>' in l]
assert len(renamed) == 2, 'two uploads, renames: %s' % lines
answered = next(i for i in range(renamed[1], len(lines)) if '"226 ' in lines[i])
freed = [i for i, l in enumerate(lines) if 'close(' in l and '/rep/big' in l and '(deleted)' in l]
assert freed, 'the replaced file was not held apart: %s' % lines[renamed[1]:]
assert freed[0] > answered, 'the replaced file was freed before the 226'
assert lines[freed[0]].split()[0] != lines[answered].split()[0], \
    'the replaced file was freed on the answering thread'
print('ok a replaced big file is freed after the 226, apart from the answering thread')

# The directory's sync fails (EIO): the 226 has gone, so the next command ends the session.
if os.path.ismount(root + '/tmp'):
    c, tracer = traced(server, login_plain, ['-qq', '-o', '/dev/null', '-e', 'trace=fsync',
                                             '-e', 'inject=fsync:error=EIO'])
    c.expect(257, 'MKD tmp/eio')
    c.expect(200, 'TYPE I')
    put(c, 'tmp/eio/a')
    text = c.expect(421, 'PWD')
    assert 'Syncing the last uploads failed' in text and 'Input/output error' in text, text
    assert c.closed(), 'the session went on after its failed sync'
    tracer.terminate()
    tracer.wait()
    print('ok a failed sync of the uploads is said with 421 and ends the session')

    # The upload's own write-out fails: 451, and no partial is left to resume, for its
    # pages may never have reached the disk and a second wait would not say so.
    c, tracer = traced(server, login_plain, ['-qq', '-o', '/dev/null', '-e', 'trace=sync_file_range',
                                             '-e', 'inject=sync_file_range:error=EIO'])
    c.expect(200, 'TYPE I')
    assert c.pasv_put('STOR tmp/lost', b'y' * 300000) == 451
    c.expect(550, 'PSIZ tmp/lost')
    left = [n for n in os.listdir(root + '/tmp') if n.startswith('.xftpd-')]
    assert not os.path.exists(root + '/tmp/lost') and not left, left
    c.expect(221, 'QUIT')
    tracer.terminate()
    tracer.wait()
    print('ok a failed write-out is 451 and leaves no partial to resume')
PY
	fail "the names of committed uploads"
pass "one directory sync for a run of uploads; names synced before SIZE, QUIT, a pause, a hang-up"

# xftp takes QUIT's 221 for its uploads' durability: against a server whose directory
# syncs all fail (strace injects EIO), a put and a tree put over two connections fail.
# Into the tmpfs, where only the directories' fsyncs are made (and fail).
if mountpoint -q "$work/root/tmp"; then
	port2=16482
	head -c 300000 /dev/urandom >"$work/src"
	mkdir -p "$work/tree/d"
	cp "$work/src" "$work/tree/a"
	cp "$work/src" "$work/tree/d/b"
	"${strace_cmd[@]}" -f -qq -o /dev/null -e trace=fsync -e inject=fsync:error=EIO "$xftpd" -p "$port2" \
		--root "$work/root" --users "$work/users" "${run_as[@]}" 2>>"$work/xftpd.log" &
	failing=$!
	wait_listening "$port2"
	url="ftp://$user:s3cret%20pass@127.0.0.1:$port2"
	for args in "put $work/src $url/tmp/eio-put" "-r -j 2 put $work/tree $url/tmp/eio-tree"; do
		# shellcheck disable=SC2086 # args holds words
		if "$DS_BIN/xftp" -q $args 2>"$work/err"; then
			fail "xftp $args: exit 0 though the server's syncs failed"
		fi
		grep -q "did not say the uploads are on disk: 421 Syncing" "$work/err" ||
			fail "xftp $args: $(cat "$work/err")"
	done
	# shellcheck disable=SC2046 # one pid, or none
	kill $(pgrep -P "$failing") # xftpd, strace's child; strace goes with it
	wait "$failing" 2>/dev/null || true
	pass "xftp fails a put whose server could not sync it, and says so"
fi
log_clean
