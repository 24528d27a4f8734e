# What interrupted uploads leave is the store's to clean: on a plain store, RMD goes past
# partials no upload holds and DELE removes every partial of its name; on a striped store,
# members of an upload killed mid-STOR go when the directory is next listed or removed, or
# when the server starts. An upload still running keeps its files through all of that.
source "$(dirname "$0")/xftpd_lib.sh"
make_store
stripe=$DS_BIN/stripe

# upload PORT PATH MODE: a STOR of PATH that sends 300 KB, then per MODE: "kill" kill -9s
# its session (the server's child that this login started) and leaves; "hold" writes
# $work/held and sends the rest once $work/go exists (at most 30 s), then checks 226.
upload() {
	python3 - "$1" "$2" "$3" "$xftpd_pid" "$user" "$pass" "$work" <<'PY'
import ftplib, os, signal, subprocess, sys, time
port, path, mode, server, user, password, work = sys.argv[1:]
def children():
    out = subprocess.run(['pgrep', '-P', server], capture_output=True, text=True).stdout
    return set(out.split())
before = children()
ftp = ftplib.FTP()
ftp.connect('127.0.0.1', int(port), timeout=30)
ftp.login(user, password)
ftp.voidcmd('TYPE I')
mine = children() - before
assert len(mine) == 1, 'cannot tell this session from %s' % mine
data = ftp.transfercmd('STOR ' + path)
data.sendall(b'k' * 300000)
if mode == 'kill':
    time.sleep(0.5)  # the session has the bytes and its temporary files
    os.kill(int(mine.pop()), signal.SIGKILL)
    sys.exit(0)
open(work + '/held', 'w').close()
for _ in range(300):
    if os.path.exists(work + '/go'):
        break
    time.sleep(0.1)
data.sendall(b'k' * 300000)
data.close()
reply = ftp.voidresp()
assert reply.startswith('226'), reply
PY
}

# hold_upload PORT PATH: upload ... hold in the background, back once it has started.
hold_upload() {
	rm -f "$work/held" "$work/go"
	upload "$1" "$2" hold &
	held_pid=$!
	for _ in $(seq 100); do [ -e "$work/held" ] && break; sleep 0.1; done
	[ -e "$work/held" ] || fail "the held upload of $2 did not start"
	sleep 0.3
}
finish_upload() {
	touch "$work/go"
	wait "$held_pid" || fail "the upload of $1, held while others cleaned, failed"
}

# ftp_cmds PORT CMD...: sends each command, prints "CMD -> reply" lines.
ftp_cmds() {
	local port=$1
	shift
	python3 - "$port" "$user" "$pass" "$@" <<'PY'
import ftplib, sys
ftp = ftplib.FTP()
ftp.connect('127.0.0.1', int(sys.argv[1]), timeout=30)
ftp.login(sys.argv[2], sys.argv[3])
for cmd in sys.argv[4:]:
    try:
        if cmd.startswith('NLST'):
            reply = 'names: ' + ' '.join(ftp.nlst(*cmd.split()[1:]))
        elif cmd.startswith('LIST'):
            lines = []
            ftp.retrlines(cmd, lines.append)
            reply = 'lines: %d' % len(lines)
        else:
            reply = ftp.sendcmd(cmd)
    except ftplib.Error as e:
        reply = str(e)
    print('%s -> %s' % (cmd, reply))
PY
}

parts() { find "$1" -maxdepth 1 -name "$2" | wc -l; }

# The plain store.
port=16491
start_xftpd "$port"
ftp_cmds "$port" "MKD d" "MKD d2" >/dev/null
upload "$port" d/x.bin kill
[ "$(parts "$work/root/d" '.xftpd-part.*')" -ge 1 ] || fail "no partial after a killed upload"
ftp_cmds "$port" "NLST d" "RMD d" >"$work/out"
grep -q '^NLST d -> names: *$' "$work/out" || fail "NLST d: $(cat "$work/out")"
grep -q '^RMD d -> 250' "$work/out" || fail "RMD of a directory with only a leftover partial: $(cat "$work/out")"
[ ! -e "$work/root/d" ] || fail "d is still there"
pass "RMD removes a directory whose only entries are a killed upload's partial"

upload "$port" y.bin kill
[ "$(parts "$work/root" '.xftpd-part.*')" -ge 1 ] || fail "no partial of y.bin"
ftp_cmds "$port" "DELE y.bin" >"$work/out"
grep -q '^DELE y.bin -> 250' "$work/out" || fail "DELE of a partial's name: $(cat "$work/out")"
[ "$(parts "$work/root" '.xftpd-part.*')" -eq 0 ] || fail "partials of y.bin left: $(ls -a "$work/root")"
pass "DELE removes the leftover partial of its name"

# A resume point whose partial is gone (an older server's commit cut short) goes with
# DELE of its name, counting for nothing, and with RMD of its directory.
ftp_cmds "$port" "MKD d3" >/dev/null
upload "$port" d3/w.bin kill
upload "$port" w.bin kill
for p in "$work/root"/.xftpd-part.* "$work/root/d3"/.xftpd-part.*; do mv "$p" "$p.len"; done
ftp_cmds "$port" "DELE w.bin" "RMD d3" >"$work/out"
grep -q '^DELE w.bin -> 550' "$work/out" || fail "DELE of a name with only a resume point: $(cat "$work/out")"
grep -q '^RMD d3 -> 250' "$work/out" || fail "RMD of a directory with only a resume point: $(cat "$work/out")"
[ "$(parts "$work/root" '.xftpd-part.*')" -eq 0 ] && [ ! -e "$work/root/d3" ] ||
	fail "a resume point without its partial left: $(ls -a "$work/root")"
pass "a resume point without its partial goes with DELE (550: no file) and with RMD"

hold_upload "$port" d2/z.bin
ftp_cmds "$port" "RMD d2" "DELE d2/z.bin" >"$work/out"
grep -q '^RMD d2 -> 550' "$work/out" || fail "RMD under a running upload: $(cat "$work/out")"
grep -q '^DELE d2/z.bin -> 550' "$work/out" || fail "DELE under a running upload: $(cat "$work/out")"
finish_upload d2/z.bin
[ "$(stat -c %s "$work/root/d2/z.bin")" -eq 600000 ] || fail "z.bin is not whole"
pass "a running upload keeps its partial through RMD and DELE, then commits whole"
kill "$xftpd_pid"
wait "$xftpd_pid" 2>/dev/null || true

# The striped store.
dirs="$work/d0,$work/d1,$work/d2"
for d in d0 d1 d2; do
	mkdir "$work/$d"
	[ "$(id -u)" -ne 0 ] || chown nobody "$work/$d"
done
start_striped() {
	"$xftpd" -p "$port" --root "$dirs" --users "$work/users" "${run_as[@]}" 2>>"$work/xftpd.log" &
	xftpd_pid=$!
	wait_listening "$port"
}
# tmps DIR: temporary members in DIR ("." for the top) under the three roots.
tmps() { find "$work/d0/$1" "$work/d1/$1" "$work/d2/$1" -maxdepth 1 -name '.dstmp.*' | wc -l; }
port=16492
start_striped
ftp_cmds "$port" "MKD sub" "MKD gone" "MKD live" >/dev/null
upload "$port" s.bin kill
upload "$port" sub/t.bin kill
upload "$port" gone/u.bin kill
[ "$(tmps .)" -eq 3 ] && [ "$(tmps sub)" -eq 3 ] || fail "no temporary members after killed uploads: $(find "$work"/d? -name '.dstmp.*')"
ftp_cmds "$port" "LIST" >/dev/null
[ "$(tmps .)" -eq 0 ] || fail "a listing left the killed upload's members: $(ls -a "$work/d0")"
[ "$(tmps sub)" -eq 3 ] || fail "a listing of / swept sub"
pass "the next listing of a directory removes a killed upload's members"

upload "$port" s2.bin kill
[ "$(tmps .)" -eq 3 ] || fail "no temporary members of s2.bin: $(ls -a "$work/d0")"
ftp_cmds "$port" "DELE s2.bin" >"$work/out"
grep -q '^DELE s2.bin -> 250' "$work/out" || fail "DELE of a killed upload's name: $(cat "$work/out")"
[ "$(tmps .)" -eq 0 ] || fail "members of s2.bin left: $(ls -a "$work/d0")"
pass "DELE removes a killed upload's members of its name and answers 250, as on a plain store"

python3 - "$port" "$user" "$pass" <<'PY' || fail "an upload short of ALLO on a striped store"
import ftplib, io, sys
ftp = ftplib.FTP()
ftp.connect('127.0.0.1', int(sys.argv[1]), timeout=30)
ftp.login(sys.argv[2], sys.argv[3])
ftp.voidcmd('TYPE I')
ftp.voidcmd('ALLO 10')
try:
    reply = ftp.storbinary('STOR short.bin', io.BytesIO(b'y' * 5))
except ftplib.error_temp as e:
    reply = str(e)
assert reply.startswith('451') and 'discarded' in reply and 'REST' not in reply, reply
assert 'short.bin' not in ftp.nlst(), 'short.bin was kept'
print('ok', reply)
PY
pass "an upload short of its ALLO on a striped store says it is discarded"

ftp_cmds "$port" "RMD gone" >"$work/out"
grep -q '^RMD gone -> 250' "$work/out" || fail "RMD past a killed upload's members: $(cat "$work/out")"
pass "RMD removes a directory whose only entries are a killed upload's members"

hold_upload "$port" live/v.bin
ftp_cmds "$port" "LIST live" "RMD live" >"$work/out"
grep -q '^RMD live -> 550' "$work/out" || fail "RMD under a running upload: $(cat "$work/out")"
finish_upload live/v.bin
"$stripe" verify --data "$work/d0/live,$work/d1/live,$work/d2/live" v.bin >/dev/null ||
	fail "v.bin does not verify"
pass "a running upload keeps its members through LIST and RMD, then commits whole"

kill "$xftpd_pid"
wait "$xftpd_pid" 2>/dev/null || true
start_striped
[ "$(tmps sub)" -eq 0 ] || fail "restart left the killed upload's members in sub"
"$stripe" fsck "$work/d0/sub,$work/d1/sub,$work/d2/sub" >"$work/out" 2>&1 || fail "fsck: $(cat "$work/out")"
[ ! -s "$work/out" ] || fail "fsck found work after the restart: $(cat "$work/out")"
pass "a restart removes killed uploads' members anywhere in the tree"
log_clean
