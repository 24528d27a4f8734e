# SIGINT and SIGTERM end stripe within 2 s, idle or mid-run: the partial report marked
# interrupted (text and JSON), exit 130/143, no /dev/shm/dragstrip.<pid> segment, nothing
# under NAME and no temporary member left; a second signal ends it at once.
source "$DS_SRC/tests/integration/lib.sh"
stripe=$DS_BIN/stripe
mkdir -p "$work"/d{0..3}
D=$work/d0,$work/d1,$work/d2,$work/d3

# wait_for DESCRIPTION COMMAND...: until COMMAND succeeds (at most 10 s).
wait_for() {
	local what=$1
	shift
	for _ in $(seq 200); do
		"$@" && return 0
		sleep 0.05
	done
	fail "timed out waiting for $what"
}
segment_of() { [ -e "/dev/shm/dragstrip.$1" ]; }
writing() { find "$work/d0" -name '.dstmp.*' -size +1M | grep -q .; }

# stop PID SIGNAL: sends it, waits, checks the time to exit and the segment; sets status.
stop() {
	local pid=$1 sig=$2 t0 t1
	status=0
	t0=$(date +%s%N)
	kill -"$sig" "$pid"
	wait "$pid" || status=$?
	t1=$(date +%s%N)
	[ $(((t1 - t0) / 1000000)) -lt 2000 ] || fail "SIG$sig: exit took $(((t1 - t0) / 1000000)) ms"
	[ ! -e "/dev/shm/dragstrip.$pid" ] || fail "SIG$sig: /dev/shm/dragstrip.$pid left behind"
}
nothing_left() {
	[ -z "$(ls -A "$work"/d? | grep -E "^(\\.dstmp\\..*)?$1\$" || true)" ] || fail "$2: members of $1 left: $(ls -A "$work"/d?)"
}

# Idle: put waiting on a FIFO that never delivers.
mkfifo "$work/in"
exec 7<>"$work/in"
"$stripe" put - "$D" idle <"$work/in" >"$work/out" 2>"$work/err" &
pid=$!
wait_for "put's segment" segment_of "$pid"
stop "$pid" TERM
[ "$status" = 143 ] || fail "idle put, SIGTERM: exit $status"
grep -q "^interrupted by signal 15: put idle did not complete" "$work/out" || fail "idle put report: $(cat "$work/out" "$work/err")"
grep -q "^stripe-put: 0 bytes" "$work/out" || fail "idle put: no partial report: $(cat "$work/out")"
nothing_left idle "idle put"
pass "idle put: SIGTERM, exit 143, report marked interrupted, nothing left"

# Mid-run: put fed without end, stopped once data reaches the disks.
(head -c 20G /dev/zero >"$work/in") 2>/dev/null &
feeder=$!
"$stripe" put --json -u 64K - "$D" busy <"$work/in" >"$work/out" 2>"$work/err" &
pid=$!
wait_for "put to write" writing
stop "$pid" INT
kill "$feeder" 2>/dev/null || true
wait "$feeder" 2>/dev/null || true
[ "$status" = 130 ] || fail "busy put, SIGINT: exit $status: $(cat "$work/err")"
jq -e '.interrupted == true and .bytes > 1000000 and .role == "put"' "$work/out" >/dev/null ||
	fail "busy put JSON: $(cat "$work/out" "$work/err")"
nothing_left busy "busy put"
pass "put mid-run: SIGINT, exit 130, JSON interrupted with $(jq .bytes "$work/out") bytes, nothing left"

# get: idle (a FIFO with no reader) and mid-run (stdout into a pipe nobody reads).
head -c 50000000 /dev/urandom >"$work/src"
"$stripe" put -u 64K "$work/src" "$D" f >/dev/null
mkfifo "$work/out.fifo"
"$stripe" get "$D" f "$work/out.fifo" >"$work/out" 2>"$work/err" &
pid=$!
wait_for "get's segment" segment_of "$pid"
stop "$pid" INT
[ "$status" = 130 ] || fail "idle get, SIGINT: exit $status: $(cat "$work/err")"
grep -q "^interrupted by signal 2: get f did not complete" "$work/out" || fail "idle get report: $(cat "$work/out" "$work/err")"
[ -p "$work/out.fifo" ] || fail "idle get: the FIFO is gone"
pass "idle get (FIFO without a reader): SIGINT, exit 130, report, FIFO kept"

("$stripe" get --json "$D" f - 2>"$work/err" | sleep 60) &
wait_for "get to block on its pipe" pgrep -f "stripe get --json $D f -" >/dev/null
pid=$(pgrep -f "stripe get --json $D f -")
wait_for "get's segment" segment_of "$pid"
sleep 0.2 # let it fill the pipe and block in write()
t0=$(date +%s%N)
kill -TERM "$pid"
while kill -0 "$pid" 2>/dev/null; do
	[ $((($(date +%s%N) - t0) / 1000000)) -lt 2000 ] || fail "get blocked on a pipe: no exit 2 s after SIGTERM"
	sleep 0.02
done
[ ! -e "/dev/shm/dragstrip.$pid" ] || fail "blocked get left its segment"
grep -q '"interrupted":true' "$work/err" || fail "blocked get: no interrupted report: $(cat "$work/err")"
pass "get blocked on a full pipe: SIGTERM ends it, report on stderr"

# A second signal while the first is being handled ends the process at once: get blocks
# writing data to a pipe nobody reads; SIGTERM stops it, and its report then blocks on a
# stderr pipe that is full; SIGINT must end it there (exit 130, not the first's 143).
mkfifo "$work/err.fifo"
exec 9<>"$work/err.fifo"
python3 -c '
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_NONBLOCK)
try:
    while True:
        os.write(fd, b"x" * 4096)
except BlockingIOError:
    pass' "$work/err.fifo"
mkfifo "$work/data.fifo"
exec 6<>"$work/data.fifo" # a reader that never reads
"$stripe" get --json "$D" f - >"$work/data.fifo" 2>"$work/err.fifo" &
pid=$!
wait_for "get's segment" segment_of "$pid"
sleep 0.3 # the data pipe fills and get blocks in write()
kill -TERM "$pid"
sleep 0.3
kill -0 "$pid" 2>/dev/null || fail "get exited on the first signal despite a full stderr"
stop "$pid" INT
[ "$status" = 130 ] || fail "second signal: exit $status, expected 130 (128 + SIGINT)"
pass "second signal ends a run stuck in its clean-up at once: exit 130, segment removed"

echo "all $checks checks passed"
