#!/usr/bin/env bash
# bench/xftpd-sessions.sh: what xftpd's process per session costs. Measures, on loopback,
# the time from connect to the 220 banner (accept, fork, the session's set-up), the time
# of a login (one yescrypt hash), and short sessions per second (connect, login, SIZE,
# QUIT) from 1 and 8 clients at once; also a session process's resident memory.
# Usage: DS_BIN=build/bin bench/xftpd-sessions.sh [SESSIONS]   (run it as root or not)
set -euo pipefail
bin=${DS_BIN:-build/bin}
sessions=${1:-200}
port=${DS_BENCH_PORT:-16491}
work=$(mktemp -d)
trap 'kill $pid 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT
mkdir "$work/root"
head -c 1000 /dev/urandom >"$work/root/f"
echo bench | "$bin/xftpd" --add-user "$work/users" bench
as=()
[ "$(id -u)" -ne 0 ] || as=(--allow-root)
"$bin/xftpd" -p "$port" --root "$work/root" --users "$work/users" --max-sessions 64 \
	--max-per-host 64 "${as[@]}" 2>/dev/null &
pid=$!
for _ in $(seq 50); do ss -Hltn "sport = :$port" | grep -q . && break; sleep 0.1; done
python3 - "$port" "$sessions" "$pid" <<'PY'
import socket, statistics, sys, threading, time, subprocess
port, n, server = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]

def session(timings, login=True):
    t0 = time.perf_counter()
    s = socket.create_connection(('127.0.0.1', port))
    f = s.makefile('rb')
    assert f.readline().startswith(b'220')
    t1 = time.perf_counter()
    if login:
        s.sendall(b'USER bench\r\n'); f.readline()
        s.sendall(b'PASS bench\r\n'); assert f.readline().startswith(b'230')
        t2 = time.perf_counter()
        s.sendall(b'SIZE f\r\n'); f.readline()
    s.sendall(b'QUIT\r\n'); f.readline()
    s.close()
    timings.append((t1 - t0, (t2 - t1) if login else 0))

def run(clients, count, login=True):
    timings = []
    def worker():
        for _ in range(count // clients):
            session(timings, login)
    threads = [threading.Thread(target=worker) for _ in range(clients)]
    t = time.perf_counter()
    for th in threads: th.start()
    for th in threads: th.join()
    return timings, time.perf_counter() - t

def ms(values):
    values = sorted(values)
    return '%.2f ms median, %.2f-%.2f' % (1000 * statistics.median(values), 1000 * values[0], 1000 * values[-1])

t, _ = run(1, n, login=False)
print('connect to 220 banner (accept, fork, set-up): %s' % ms([a for a, _ in t]))
t, wall = run(1, n)
print('login (USER, PASS: one yescrypt):             %s' % ms([b for _, b in t]))
print('sessions/s, 1 client (connect, login, SIZE, QUIT): %.0f' % (n / wall))
t, wall = run(8, n)
print('sessions/s, 8 clients:                              %.0f' % (n / wall))
# A live session's memory.
s = socket.create_connection(('127.0.0.1', port)); s.recv(100)
time.sleep(0.2)
child = subprocess.run(['pgrep', '-P', server], capture_output=True, text=True).stdout.split()[0]
rss = [l for l in open('/proc/%s/status' % child) if l.startswith(('VmRSS', 'Pss'))]
print('an idle session process: %s' % rss[0].strip())
s.close()
PY
