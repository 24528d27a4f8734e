# SIGINT, SIGTERM (and SIGHUP) to ttcp, blast and sink, idle and mid-run (and long durations): each ends within 2 s with
# its report so far (marked interrupted), status 130 or 143, and no live-counter segment;
# a second signal ends a tool at once even while it waits out its first.
source "$(dirname "$0")/lib.sh"
ttcp=$DS_BIN/ttcp
blast=$DS_BIN/blast
sink=$DS_BIN/sink

# wait_for_text FILE PATTERN: until FILE holds PATTERN (at most 10 s).
wait_for_text() {
	for _ in $(seq 100); do
		grep -q -e "$2" "$1" 2>/dev/null && return 0
		sleep 0.1
	done
	fail "no '$2' in $1: $(cat "$1")"
}

# stop_and_check NAME PID SIGNAL: signals PID, which must exit within 2 s with 128 + the
# signal's number and leave no /dev/shm segment. Sets took_ms.
stop_and_check() {
	local name=$1 pid=$2 sig=$3 want status=0 t0
	want=$((128 + $(kill -l "$sig")))
	t0=$(date +%s%N)
	kill -"$sig" "$pid"
	for _ in $(seq 40); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.05
	done
	kill -0 "$pid" 2>/dev/null && { kill -9 "$pid"; fail "$name: still running 2 s after SIG$sig"; }
	wait "$pid" || status=$?
	took_ms=$((($(date +%s%N) - t0) / 1000000))
	[ "$status" -eq "$want" ] || fail "$name: exit status $status after SIG$sig, not $want"
	[ ! -e "/dev/shm/dragstrip.$pid" ] || fail "$name: left /dev/shm/dragstrip.$pid"
}

# Durations past 24.8 days (whose milliseconds no longer fit an int) are as good as
# forever: no run paced with 30 ms gaps is cut short, no timeout wraps to a few seconds.
"$sink" -p 16629 --once --json --idle 2200000 >"$work/s.out" 2>"$work/s.err" &
pid=$!
wait_listening 16629
"$blast" -p 16629 -n 20 -l 4K -R 1M --timeout 2200000 127.0.0.1 >"$work/b.out" 2>"$work/b.err" ||
	fail "blast --timeout 2200000: $(cat "$work/b.err")"
wait $pid || fail "sink --idle 2200000: $(cat "$work/s.err")"
[ "$(jq -r '[.messages, .aborted] | join(" ")' "$work/s.out")" = "20 false" ] ||
	fail "sink --idle 2200000 reported: $(cat "$work/s.out")"
pass "sink --idle 2200000 and blast --timeout 2200000 run as with short ones"

# ttcp -r waiting for a connection
"$ttcp" -r -s -p 16620 >"$work/r.out" 2>"$work/r.err" &
pid=$!
wait_listening 16620
stop_and_check "ttcp -r idle" $pid TERM
pass "ttcp -r waiting for a connection: SIGTERM ends it in $took_ms ms (143)"

# A hang-up (terminal or ssh gone) stops a tool as SIGTERM does; under nohup it is ignored.
"$ttcp" -r -s -p 16620 >"$work/r.out" 2>"$work/r.err" &
pid=$!
wait_listening 16620
stop_and_check "ttcp -r idle" $pid HUP
pass "ttcp -r waiting for a connection: SIGHUP ends it in $took_ms ms (129)"
nohup "$ttcp" -r -s -p 16620 >"$work/r.out" 2>"$work/r.err" &
pid=$!
wait_listening 16620
kill -HUP $pid
sleep 0.3
kill -0 $pid 2>/dev/null || fail "ttcp -r under nohup ended on SIGHUP"
stop_and_check "ttcp -r under nohup" $pid TERM
pass "ttcp -r under nohup: SIGHUP ignored, SIGTERM ends it (143)"

# ttcp -r mid-run: the classic report of what came, on stdout as with -s
"$ttcp" -r -s -p 16621 >"$work/r.out" 2>"$work/r.err" &
pid=$!
wait_listening 16621
"$ttcp" -t -s -w 30 -i 0.2 -p 16621 127.0.0.1 >"$work/t.out" 2>"$work/t.err" &
tpid=$!
wait_for_text "$work/t.out" "KB/sec"
stop_and_check "ttcp -r mid-run" $pid INT
wait $tpid 2>/dev/null || true
[ "$(classic_bytes "$work/r.out")" -gt 0 ] || fail "ttcp -r reported nothing: $(cat "$work/r.out")"
pass "ttcp -r mid-run: SIGINT ends it in $took_ms ms (130) with its report"

# ttcp -t mid-run, and its JSON marked interrupted
"$ttcp" -r -s -p 16622 >"$work/r.out" 2>"$work/r.err" &
rpid=$!
wait_listening 16622
"$ttcp" -t -s -w 30 -i 0.2 --json -p 16622 127.0.0.1 >"$work/t.out" 2>"$work/t.err" &
pid=$!
wait_for_text "$work/t.out" "MB_per_s"
stop_and_check "ttcp -t mid-run" $pid TERM
wait $rpid || fail "the receiver of an interrupted ttcp -t: $(cat "$work/r.err")"
[ "$(tail -1 "$work/t.out" | jq .interrupted)" = true ] || fail "ttcp -t JSON: $(tail -1 "$work/t.out")"
pass "ttcp -t mid-run: SIGTERM ends it in $took_ms ms (143), JSON marked interrupted"

# ttcp -t blocked in send() to a receiver that stopped reading
python3 -c '
import socket, sys, time
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 16628))
s.listen(1)
c, _ = s.accept()
time.sleep(60)' &
wait_listening 16628
"$ttcp" -t -s -n 1000000 --timeout 60 -p 16628 127.0.0.1 >"$work/t.out" 2>"$work/t.err" &
pid=$!
for _ in $(seq 100); do # blocked once the socket buffers are full
	[ "$(ss -H -tn state established "dport = :16628" | awk '{print $2}')" -gt 0 ] 2>/dev/null &&
		grep -q "^State:.*S (sleeping)" /proc/$pid/status && break
	sleep 0.1
done
stop_and_check "ttcp -t blocked" $pid TERM
[ "$(classic_bytes "$work/t.out")" -gt 0 ] || fail "ttcp -t blocked reported nothing: $(cat "$work/t.out")"
pass "ttcp -t blocked on a receiver that stopped reading: SIGTERM ends it in $took_ms ms (143)"

# sink idle
"$sink" -p 16623 >"$work/s.out" 2>"$work/s.err" &
pid=$!
wait_listening 16623
stop_and_check "sink idle" $pid INT
pass "sink idle: SIGINT ends it in $took_ms ms (130)"

# sink mid-run: the run reported, interrupted
"$sink" -p 16624 --json >"$work/s.out" 2>"$work/s.err" &
pid=$!
wait_listening 16624
"$blast" -p 16624 -w 30 -i 0.2 127.0.0.1 >"$work/b.out" 2>"$work/b.err" &
bpid=$!
wait_for_text "$work/b.out" "MB/s"
stop_and_check "sink mid-run" $pid TERM
wait $bpid 2>/dev/null || true
[ "$(jq .interrupted "$work/s.out")" = true ] || fail "sink's report: $(cat "$work/s.out")"
[ "$(jq .messages "$work/s.out")" -gt 0 ] || fail "sink reported nothing: $(cat "$work/s.out")"
pass "sink mid-run: SIGTERM ends it in $took_ms ms (143), the run reported interrupted"

# blast mid-run, and paced (-R): its report and the sink's counts of what it sent
"$sink" -p 16625 --json >"$work/s.out" 2>"$work/s.err" &
spid=$!
wait_listening 16625
for pace in "" "-R 100M"; do
	# shellcheck disable=SC2086
	"$blast" -p 16625 -w 30 -i 0.2 --json $pace 127.0.0.1 >"$work/b.out" 2>"$work/b.err" &
	pid=$!
	wait_for_text "$work/b.out" "MB_per_s"
	stop_and_check "blast mid-run ${pace:-flat out}" $pid INT
	last=$(tail -1 "$work/b.out")
	[ "$(jq .interrupted <<<"$last")" = true ] || fail "blast's report: $last"
	[ "$(jq .messages <<<"$last")" = "$(jq .sink.messages <<<"$last")" ] ||
		fail "blast sent and sink counted differ after the stop: $last"
	pass "blast mid-run ${pace:-flat out}: SIGINT ends it in $took_ms ms (130), report with the sink's counts"
done
stop_and_check "sink after blasts" $spid TERM

# A second signal while blast waits out its first: a mute peer acks the hello, takes the
# data, and never answers the END, which blast awaits for a second after a stop.
mute_peer() {
	python3 - "$@" <<'PY' &
import socket, struct, sys
def check(b):
    h = 2166136261
    for x in b[:28]:
        h = ((h ^ x) * 16777619) & 0xFFFFFFFF
    return h
def exact(c, n):
    b = b""
    while len(b) < n:
        b += c.recv(n - len(b)) or sys.exit(0)
    return b
srv = socket.socket()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", int(sys.argv[1])))
srv.listen(8)
c, _ = srv.accept()
exact(c, struct.unpack(">I", exact(c, 32)[24:28])[0])  # the hello
while sys.argv[2] == "silent" and c.recv(1 << 20):
    pass
ack = struct.pack(">IIIB", 0, 1 << 28, 0, 0)
h = struct.pack(">HBBIQIII", 0x4453, 1, 3, 0, 0, len(ack), 0, len(ack))
c.sendall(h + struct.pack(">I", check(h)) + ack)
while c.recv(1 << 20):
    pass
PY
}

# blast waiting for an answer to its hello that never comes
mute_peer 16627 silent
wait_listening 16627
"$blast" -p 16627 --timeout 60 127.0.0.1 >"$work/b.out" 2>"$work/b.err" &
pid=$!
for _ in $(seq 100); do # connected, and so awaiting the answer
	ss -H -tn state established "dport = :16627" | grep -q . && break
	sleep 0.1
done
stop_and_check "blast awaiting its hello's answer" $pid INT
pass "blast awaiting the answer to its hello: SIGINT ends it in $took_ms ms (130)"

mute_peer 16626 ack
wait_listening 16626
"$blast" -p 16626 -w 30 -i 0.2 127.0.0.1 >"$work/b.out" 2>"$work/b.err" &
pid=$!
wait_for_text "$work/b.out" "MB/s"
kill -INT $pid
sleep 0.1
kill -0 $pid 2>/dev/null || fail "blast ended before the second signal: $(cat "$work/b.err")"
stop_and_check "blast, a second signal" $pid TERM
[ "$took_ms" -lt 500 ] || fail "the second signal took $took_ms ms"
pass "blast awaiting a mute peer's counts: a second signal ends it at once ($took_ms ms, 143)"

echo "PASS signals ($checks checks)"
