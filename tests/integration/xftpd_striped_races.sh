# Commits into a striped store (--root d0,d1,d2) are one act per name: two uploads of one
# name at once leave one of them whole; a RETR racing overwrites gets a whole old or new
# file, never an error. XFTPD_RACE_READS sets how many RETRs race (300 by default).
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
log_clean
