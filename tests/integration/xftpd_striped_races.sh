# Commits into a striped store (--root d0,d1,d2) are one act per name: two uploads of one
# name at once leave one of them whole; a RETR racing overwrites gets a whole old or new
# file, never an error; RNTO finishes a commit a kill cut short, and a kill during RNTO
# leaves the old or the new name whole. XFTPD_RACE_READS sets how many RETRs race (300 by
# default).
source "$(dirname "$0")/xftpd_lib.sh"
make_store
dirs="$work/d0,$work/d1,$work/d2"
for d in d0 d1 d2; do
	mkdir "$work/$d"
	[ "$(id -u)" -ne 0 ] || chown nobody "$work/$d"
done
port=16481
"$xftpd" -p "$port" --root "$dirs" --users "$work/users" "${run_as[@]}" 2>>"$work/xftpd.log" &
wait_listening "$port"
stripe=$DS_BIN/stripe

# Two uploads of one name, released together, 30 rounds: each round leaves exactly one of
# the two, whole (RETR, SIZE), and a set that stripe verify and fsck find sound.
python3 - "$port" "$user" "$pass" "$stripe" "$dirs" <<'PY' || fail "concurrent uploads of one name"
import ftplib, io, subprocess, sys, threading
port, user, password, stripe, dirs = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]

def session():
    ftp = ftplib.FTP()
    ftp.connect('127.0.0.1', port, timeout=30)
    ftp.login(user, password)
    ftp.voidcmd('TYPE I')
    return ftp

ftps = [session(), session()]
reader = session()
for rnd in range(30):
    # Different sizes too, so a mix of the two sets also shows in the lengths.
    bodies = [bytes([65 + rnd % 26]) * (2500000 + 4096 * rnd), bytes([97 + rnd % 26]) * (2300000 + 777 * rnd)]
    gate = threading.Barrier(2)
    replies = [None, None]
    def put(i):
        gate.wait()
        try:
            replies[i] = ftps[i].storbinary('STOR same.bin', io.BytesIO(bodies[i]), blocksize=1 << 20)
        except ftplib.all_errors as e:
            replies[i] = 'error: %s' % e
    threads = [threading.Thread(target=put, args=(i,)) for i in range(2)]
    for t in threads: t.start()
    for t in threads: t.join()
    for i in range(2):
        assert replies[i].startswith('226'), 'round %d upload %d: %s' % (rnd, i, replies[i])
    got = io.BytesIO()
    reader.retrbinary('RETR same.bin', got.write)
    got = got.getvalue()
    assert got in bodies, 'round %d: RETR gave %d bytes, neither upload' % (rnd, len(got))
    assert reader.size('same.bin') == len(got), 'round %d: SIZE disagrees' % rnd
    v = subprocess.run([stripe, 'verify', '--data', dirs, 'same.bin'], capture_output=True, text=True)
    assert v.returncode == 0, 'round %d: stripe verify: %s' % (rnd, v.stderr.strip())
print('30 rounds, each one upload whole')
PY
"$stripe" fsck "$dirs" >"$work/fsck" 2>&1 || fail "stripe fsck: $(cat "$work/fsck")"
pass "30 rounds of two uploads of one name at once: one of them whole each time (RETR, SIZE, verify, fsck)"

# Overwrites of one name, back to back from two sessions (STOR over it, and RNFR/RNTO of
# a new file onto it), while a third reads it: every RETR is a whole old or new file.
reads=${XFTPD_RACE_READS:-300}
python3 - "$port" "$user" "$pass" "$reads" <<'PY' || fail "RETR racing overwrites"
import ftplib, io, sys, threading
port, user, password, reads = int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4])

def session():
    ftp = ftplib.FTP()
    ftp.connect('127.0.0.1', port, timeout=30)
    ftp.login(user, password)
    ftp.voidcmd('TYPE I')
    return ftp

# Small files over all three members (unit 1 MiB: only 3 MiB would fill them; the set id
# in every member's header is what a reader checks either way).
bodies = [bytes([65 + k]) * (200000 + 1000 * k) for k in range(4)]
session().storbinary('STOR race.bin', io.BytesIO(bodies[0]))
done = threading.Event()
errors = []
def writer(first):
    ftp, k = session(), first
    while not done.is_set():
        try:
            # One writer stores over the name, the other renames a new file onto it.
            if first == 0:
                ftp.storbinary('STOR race.bin', io.BytesIO(bodies[k]))
            else:
                ftp.storbinary('STOR race.new', io.BytesIO(bodies[k]))
                ftp.rename('race.new', 'race.bin')
        except ftplib.all_errors as e:
            errors.append('STOR: %s' % e)
            return
        k = (k + 2) % 4
writers = [threading.Thread(target=writer, args=(i,)) for i in range(2)]
for t in writers: t.start()
reader, bad = session(), []
try:
    for n in range(reads):
        got = io.BytesIO()
        try:
            reader.retrbinary('RETR race.bin', got.write)
        except ftplib.error_perm as e:
            bad.append('RETR %d: %s' % (n, e))
            continue
        except ftplib.all_errors as e:
            bad.append('RETR %d: %s' % (n, e))
            reader = session()
            continue
        if got.getvalue() not in bodies:
            bad.append('RETR %d: %d bytes, no whole version' % (n, len(got.getvalue())))
finally:
    done.set()
    for t in writers: t.join()
assert not errors, errors
assert not bad, '%d of %d reads failed: %s' % (len(bad), reads, bad[:5])
print('%d reads, each whole' % reads)
PY
"$stripe" verify --data "$dirs" race.bin >/dev/null 2>&1 || fail "race.bin does not verify after the race"
pass "$reads RETRs racing overwrites (STOR, RNTO) from two sessions: each a whole version"

# A kill -9 between a commit's member 0 rename and the others' leaves the file committed,
# members 1 and 2 still under temporary names (made here by hand, as the kill leaves them).
# RNTO of that name, within its directory and into another, must carry the whole new file.
python3 - "$port" "$user" "$pass" "$stripe" "$work" <<'PY' || fail "RNTO of a file whose commit a kill cut short"
import ftplib, io, os, re, subprocess, sys
port, user, password, stripe, work = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
roots = ['%s/d%d' % (work, i) for i in range(3)]
ftp = ftplib.FTP()
ftp.connect('127.0.0.1', port, timeout=30)
ftp.login(user, password)
ftp.voidcmd('TYPE I')
ftp.mkd('other')
old, new = b'1' * 3000100, b'2' * 3000100
for target in ('moved.bin', 'other/moved.bin'):
    ftp.storbinary('STOR half.bin', io.BytesIO(old))
    ftp.storbinary('STOR half.new', io.BytesIO(new))
    st = subprocess.run([stripe, 'stat', ','.join(roots), 'half.new'], capture_output=True, text=True).stdout
    set_id = re.search(r'set id\s+([0-9a-f]+)', st).group(1)
    os.rename(roots[0] + '/half.new', roots[0] + '/half.bin')  # the commit point
    for r in roots[1:]:
        os.rename(r + '/half.new', '%s/.dstmp.%s.half.bin' % (r, set_id))
    got = io.BytesIO()
    ftp.retrbinary('RETR half.bin', got.write)
    assert got.getvalue() == new, 'the committed file does not read before RNTO'
    ftp.rename('half.bin', target)
    ftp.nlst(os.path.dirname(target) or '.')  # a listing sweeps leftovers
    got = io.BytesIO()
    ftp.retrbinary('RETR ' + target, got.write)
    assert got.getvalue() == new, 'RETR %s: %d bytes, not the committed file' % (target, len(got.getvalue()))
    dirs = ','.join(os.path.join(r, os.path.dirname(target)) for r in roots)
    v = subprocess.run([stripe, 'verify', '--data', dirs, os.path.basename(target)], capture_output=True, text=True)
    assert v.returncode == 0, 'stripe verify %s: %s' % (target, v.stderr.strip())
    left = [f for r in roots for f in os.listdir(r) if f.startswith('.dstmp.')]
    assert not left, 'temporary members left: %s' % left
print('RNTO carried the committed file, within and across directories')
PY
pass "RNTO of a file whose commit a kill -9 cut short carries the committed file (same and other directory)"

# kill -9 of a session in the middle of RNTO onto an existing name, 16 members wide, within
# the directory and into another: the kill lands before the commit (a link of the new name
# seen) or just after it (member 0 renamed), alternately. Either way one name reads whole,
# the other is whole or hidden, and the existing name is never left damaged.
wide=""
for i in $(seq 0 15); do
	mkdir "$work/w$i"
	[ "$(id -u)" -ne 0 ] || chown nobody "$work/w$i"
	wide="$wide${wide:+,}$work/w$i"
done
wport=16482
"$xftpd" -p "$wport" --root "$wide" --users "$work/users" "${run_as[@]}" 2>>"$work/xftpd.log" &
wide_pid=$!
wait_listening "$wport"
python3 - "$wport" "$user" "$pass" "$wide_pid" "$work" <<'PY' || fail "kill -9 during RNTO"
import ftplib, glob, io, os, signal, subprocess, sys, time
port, user, password, server, work = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
roots = ['%s/w%d' % (work, i) for i in range(16)]
def children():
    out = subprocess.run(['pgrep', '-P', server], capture_output=True, text=True).stdout
    return set(out.split())
def session():
    ftp = ftplib.FTP()
    ftp.connect('127.0.0.1', port, timeout=30)
    ftp.login(user, password)
    ftp.voidcmd('TYPE I')
    return ftp
def read(ftp, name):
    got = io.BytesIO()
    try:
        ftp.retrbinary('RETR ' + name, got.write)
    except ftplib.error_perm:
        return None
    return got.getvalue()
main = session()
main.mkd('sub')
a_body, b_body = bytes(range(256)) * 1200, b'b' * 250000
killed = {'before': 0, 'after': 0}
for rnd in range(20):
    b = 'b' if rnd < 10 else 'sub/b'
    main.storbinary('STOR a', io.BytesIO(a_body))
    main.storbinary('STOR ' + b, io.BytesIO(b_body))
    ino0 = os.stat(roots[0] + '/' + b).st_ino
    before = children()
    ftp = session()
    mine = children() - before
    assert len(mine) == 1, 'cannot tell this session from %s' % mine
    pid = int(mine.pop())
    ftp.sendcmd('RNFR a')
    ftp.sock.sendall(b'RNTO %s\r\n' % b.encode())
    deadline = time.time() + 10
    while time.time() < deadline:
        if rnd % 2 == 0 and any(glob.glob('%s/%s/.dstmp.*.b' % (r, os.path.dirname(b) or '.')) for r in roots[1:]):
            break
        if rnd % 2 == 1 and os.stat(roots[0] + '/' + b).st_ino != ino0:
            break
    os.kill(pid, signal.SIGKILL)
    ftp.sock.close()
    time.sleep(0.2)
    got_b, got_a = read(main, b), read(main, 'a')
    assert got_b in (a_body, b_body), 'round %d: RETR %s gave %s' % (rnd, b, None if got_b is None else len(got_b))
    if got_b == b_body:
        assert got_a == a_body, 'round %d: %s kept its old file and a is gone' % (rnd, b)
    killed['after' if got_b == a_body else 'before'] += 1
    names = [n for n in main.nlst() if n != 'sub'] + ['sub/' + os.path.basename(n) for n in main.nlst('sub')]
    for name in names:
        assert read(main, name) in (a_body, b_body), 'round %d: %s is listed but does not read whole' % (rnd, name)
    for name in ('a', b):
        try:
            main.delete(name)
        except ftplib.error_perm:
            pass
print('20 kills during RNTO, 10 into another directory (%d before the commit, %d after): one name whole each time' % (killed['before'], killed['after']))
PY
pass "kill -9 during RNTO onto an existing name, here or in another directory: the old or the new name whole, never damaged"
kill "$wide_pid"
wait "$wide_pid" 2>/dev/null || true
log_clean
