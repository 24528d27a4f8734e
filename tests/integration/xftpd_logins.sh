# Password guessing is limited per client address, across sessions: several sessions at
# once guessing from one address are stopped after --max-host-fails failures in all, new
# sessions from it get a 421 for --ban-time, and after that a right password works;
# sessions already open when the ban begins get a 421 at their next PASS.
source "$(dirname "$0")/xftpd_lib.sh"
make_store
port=16471
start_xftpd "$port" --max-fails 2 --max-host-fails 4 --ban-time 8

python3 - "$port" "$DS_SRC/tests/integration" "$user" "$pass" <<'PY' || fail "guessing across sessions"
import socket, sys, threading, time
sys.path.insert(0, sys.argv[2])
from xftpd_raw import Ctl
port, user, password = int(sys.argv[1]), sys.argv[3], sys.argv[4]

# Four guessers at once, each opening session after session, for 5.5 s. Every failure
# costs its session a second, so unthrottled they make about 4 x 6 = 24 guesses.
WINDOW = 5.5
lock = threading.Lock()
guesses, refusals = [], []
start = time.time()
def guesser(n):
    while time.time() - start < WINDOW:
        try:
            c = Ctl(port)
        except (AssertionError, EOFError, ConnectionError) as e:
            with lock:
                refusals.append(str(e))
            time.sleep(0.1)
            continue
        try:
            while time.time() - start < WINDOW:
                c.expect(331, 'USER ' + user)
                c.send('PASS wrong-%d' % n)
                code, text = c.reply()
                with lock:
                    guesses.append(code)
                if code == 421:
                    break
        except (EOFError, ConnectionError):
            pass
        c.sock.close()
threads = [threading.Thread(target=guesser, args=(n,)) for n in range(4)]
for t in threads: t.start()
for t in threads: t.join()
assert all(code in (530, 421) for code in guesses), guesses
# 4 before the ban, and the rest of --max-fails in each session already open when it
# came: 8 when the four sessions start together, 12 at the very most.
assert len(guesses) <= 12, 'from one address %d guesses in %.1f s: %s' % (len(guesses), WINDOW, guesses)
assert any('failed logins from your address' in r for r in refusals), refusals
print('ok %d guesses in %.1f s from four sessions at once; then refused: %s'
      % (len(guesses), WINDOW, refusals[0].split("'")[1] if "'" in refusals[0] else refusals[0]))

# Banned: even the right password is refused, with the time left; after it, it works.
s = socket.create_connection(('127.0.0.1', port), timeout=10)
text = s.makefile('rb').readline().decode()
assert text.startswith('421 Too many failed logins from your address; try again in'), text
for _ in range(100):
    try:
        c = Ctl(port)
        break
    except (AssertionError, EOFError, ConnectionError):
        time.sleep(0.2)
else:
    raise AssertionError('still refused 20 s after an 8 s ban')
waited = time.time() - start
c.login(user, password)
c.expect(221, 'QUIT')
assert waited >= 7.5, 'the 8 s ban ended after only %.1f s' % waited
print('ok the right password works once the ban is over (%.1f s after the first guess)' % waited)
PY
pass "failed logins counted per address across sessions; the ban ends"

# Sessions opened before a ban lose their remaining guesses when it begins: four open at
# once, each allowed 5, guess in turn; the 4th failure bans the address, and the next PASS
# in every one of them is a 421, not one of the 16 guesses the sessions still had.
kill "$xftpd_pid"
wait "$xftpd_pid" 2>/dev/null || true
port=16472
start_xftpd "$port" --max-fails 5 --max-host-fails 4 --ban-time 30
kill -USR1 "$xftpd_pid" # a stray one: the listener keeps it blocked, no session inherits it
python3 - "$port" "$DS_SRC/tests/integration" "$user" "$pass" <<'PY' || fail "open sessions told of a ban"
import sys
sys.path.insert(0, sys.argv[2])
from xftpd_raw import Ctl
port, user, password = int(sys.argv[1]), sys.argv[3], sys.argv[4]
c = Ctl(port)
c.login(user, password)
c.expect(221, 'QUIT')
print('ok a right password works after a stray SIGUSR1 to the listener')
alive = [Ctl(port) for _ in range(4)]
codes, refusals = [], []
while alive and len(codes) < 24:
    still = []
    for c in alive:
        c.expect(331, 'USER ' + user)
        c.send('PASS wrong')
        code, text = c.reply()
        codes.append(code)
        if code == 530:
            still.append(c)
        else:
            refusals.append(text)
    alive = still
assert codes.count(530) <= 5, 'guesses after the ban began: %s' % codes
assert len(refusals) == 4 and all('from your address' in r for r in refusals), refusals
print('ok %d guesses answered, then every open session got a 421: %s' % (codes.count(530), codes))
PY
pass "a ban ends the guessing in sessions already open from the address"
grep -q 'failed login' "$work/xftpd.log" || fail "no failed-login lines in the log"
log_clean
