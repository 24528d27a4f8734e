# Scripts written for classic ttcp keep working: against a peer that speaks and prints as
# classic did, our lines sit on the same streams, in the same order and shapes (with -v
# too), the byte counts agree both ways over TCP and UDP, a UDP receiver counts its calls,
# and `ttcp -r > file` streams bytes as they come and waits out a slow sender.
source "$(dirname "$0")/lib.sh"
ttcp=$DS_BIN/ttcp
classic="python3 $DS_SRC/tests/integration/classic_ttcp.py"

# kinds FILE: the shape of each classic line in FILE, one word a line; "other" for ours.
kinds() {
	sed -E \
		-e 's/^ttcp-[tr]: buflen=[0-9]+, nbuf=[0-9]+, align=[0-9]+\/[0-9]+, port=[0-9]+  (tcp|udp)(  -> .*)?$/banner/' \
		-e 's/^ttcp-[tr]: [0-9]+ bytes in [0-9]+\.[0-9]{2} real seconds = [0-9]+\.[0-9]{2} KB\/sec \+\+\+$/result/' \
		-e 's/^ttcp-[tr]: [0-9]+ bytes in [0-9]+\.[0-9]{2} CPU seconds = [0-9]+\.[0-9]{2} KB\/cpu sec$/cpu/' \
		-e 's/^ttcp-[tr]: [0-9]+ I\/O calls, msec\/call = [0-9]+\.[0-9]{2}, calls\/sec = [0-9]+\.[0-9]{2}$/calls/' \
		-e 's/^ttcp-[tr]: [0-9]+\.[0-9]user [0-9]+\.[0-9]sys [0-9]+:[0-9]{2}real [0-9]+% [0-9]+i\+[0-9]+d [0-9]+maxrss [0-9]+\+[0-9]+pf [0-9]+\+[0-9]+csw$/rusage/' \
		-e 's/^ttcp-[tr]: buffer address 0x[0-9a-f]+$/address/' \
		-e '/^(banner|result|cpu|calls|rusage|address)$/!s/.*/other/' "$1"
}
# same_shape OURS CLASSIC: our lines start with classic's, shape for shape; ours may add
# lines of their own after them.
same_shape() {
	kinds "$2" >"$work/k.classic"
	kinds "$1" | head -n "$(wc -l <"$work/k.classic")" >"$work/k.ours"
	grep -qx other "$work/k.classic" && fail "the classic peer printed an unknown line: $(cat "$2")"
	cmp -s "$work/k.ours" "$work/k.classic" ||
		fail "our lines differ in shape from classic's: ours $(paste -sd' ' "$work/k.ours")," \
			"classic $(paste -sd' ' "$work/k.classic"): $(cat "$1")"
}
plus_bytes() { awk '/\+\+\+/ { print $2 }' "$1"; }
io_calls() { sed -nE 's/^ttcp-[tr]: ([0-9]+) I\/O calls.*/\1/p' "$1"; }

# TCP, our transmitter into a classic receiver; results on stdout, progress on stderr.
$classic -r -s -v -p 16701 >"$work/cr.out" 2>"$work/cr.err" &
peer=$!
wait_listening 16701
"$ttcp" -t -s -v -l 8K -n 300 -p 16701 127.0.0.1 >"$work/t.out" 2>"$work/t.err" || fail "ttcp -t: $(cat "$work/t.err")"
wait "$peer" || fail "the classic receiver: $(cat "$work/cr.err")"
[ "$(plus_bytes "$work/cr.out")" = 2457600 ] || fail "classic counted $(plus_bytes "$work/cr.out")"
[ "$(plus_bytes "$work/t.out")" = 2457600 ] || fail "ttcp -t printed $(cat "$work/t.out")"
grep -q '+++' "$work/t.err" && fail "the result line went to stderr too"
grep -qx 'ttcp-t: connect' "$work/t.err" || fail "progress lines are not on stderr: $(cat "$work/t.err")"
pass "ttcp -t -s into classic -r -s: 2457600 bytes both sides, results on stdout"

# A classic transmitter into ours: `ttcp -r -s | grep +++` finds the line.
"$ttcp" -r -s -v -p 16702 2>"$work/r.err" | tee "$work/r.out" | grep '+++' >"$work/r.grep" &
receiver=$!
wait_listening 16702
$classic -t -s -v -l 8192 -n 300 -p 16702 127.0.0.1 >"$work/ct.out" 2>"$work/ct.err" || fail "classic -t"
wait "$receiver" || fail "ttcp -r -s: $(cat "$work/r.err")"
[ "$(plus_bytes "$work/r.grep")" = 2457600 ] || fail "ttcp -r -s | grep +++ gave '$(cat "$work/r.grep")'"
pass "classic -t -s into ttcp -r -s | grep +++: $(cat "$work/r.grep")"

# -v: classic's lines, in classic's order, on both sides; ours only after them.
same_shape "$work/t.out" "$work/ct.out"
same_shape "$work/r.out" "$work/cr.out"
grep -q 'CPU seconds per GB' "$work/r.out" || fail "our own -v line is missing: $(cat "$work/r.out")"
pass "-v lines match classic's shapes and order ($(kinds "$work/r.out" | paste -sd' '))"

# UDP: classic sender into ours, which counts its calls; ours into a classic receiver.
"$ttcp" -r -u -s -v -p 16703 >"$work/ur.out" 2>"$work/ur.err" &
receiver=$!
wait_listening 16703 udp
$classic -t -u -s -v -l 1400 -n 300 -p 16703 127.0.0.1 >"$work/cut.out" 2>/dev/null || fail "classic -t -u"
wait "$receiver" || fail "ttcp -r -u: $(cat "$work/ur.err")"
[ "$(plus_bytes "$work/ur.out")" = 420000 ] || fail "ttcp -r -u counted $(plus_bytes "$work/ur.out") of 420000"
calls=$(io_calls "$work/ur.out")
[ "$calls" -ge 1 ] && [ "$calls" -le 305 ] || fail "ttcp -r -u made $calls I/O calls for 300 datagrams"
same_shape "$work/ur.out" "$work/cut.out"
grep -q 'no end sentinel' "$work/ur.out" && fail "the classic end sentinel was missed"
pass "classic -t -u into ttcp -r -u: 420000 bytes in $calls I/O calls"

$classic -r -u -s -p 16704 >"$work/cur.out" 2>/dev/null &
peer=$!
wait_listening 16704 udp
"$ttcp" -t -u -s -l 1000 -n 200 -R 50M -p 16704 127.0.0.1 >"$work/ut.out" 2>/dev/null || fail "ttcp -t -u"
wait "$peer" || fail "the classic UDP receiver"
[ "$(plus_bytes "$work/cur.out")" = 200000 ] || fail "classic -r -u counted $(plus_bytes "$work/cur.out")"
[ "$(io_calls "$work/ut.out")" = 200 ] || fail "ttcp -t -u: $(io_calls "$work/ut.out") calls for 200 datagrams"
pass "ttcp -t -u into classic -r -u: 200000 bytes, 200 calls"

# -n 0 sends nothing, as classic; a peer that connects and sends nothing is an error.
$classic -r -s -p 16705 >"$work/c0.out" 2>/dev/null &
peer=$!
wait_listening 16705
"$ttcp" -t -s -n 0 -p 16705 127.0.0.1 >"$work/t0.out" 2>/dev/null || fail "ttcp -t -n 0 failed"
wait "$peer" || fail "the classic receiver of -n 0"
[ "$(plus_bytes "$work/t0.out")" = 0 ] && [ "$(plus_bytes "$work/c0.out")" = 0 ] || fail "-n 0 moved bytes"
pass "ttcp -t -n 0: nothing sent, exit 0, as classic"

"$ttcp" -r -s -p 16706 >/dev/null 2>"$work/r0.err" &
receiver=$!
wait_listening 16706
$classic -t -s -n 0 -p 16706 127.0.0.1 >/dev/null 2>&1
status=0
wait "$receiver" || status=$?
[ "$status" = 1 ] || fail "a receiver given no data exited $status"
grep -q 'closed without sending data' "$work/r0.err" || fail "no reason given: $(cat "$work/r0.err")"
pass "a TCP peer that connects and sends nothing: exit 1, $(grep -v '^ttcp-r' "$work/r0.err")"

# ttcp -r > file: bytes reach the file as they arrive, and a 12 s pause ends nothing.
head -c 3000000 /dev/urandom >"$work/in"
"$ttcp" -r -l 1M -p 16707 >"$work/copy" 2>"$work/rc.err" &
receiver=$!
wait_listening 16707
{
	head -c 1000000 "$work/in"
	sleep 12
	tail -c +1000001 "$work/in"
} | "$ttcp" -t -l 1M -p 16707 127.0.0.1 >"$work/tc.out" 2>&1 &
sender=$!
for _ in $(seq 100); do
	[ "$(stat -c %s "$work/copy")" -ge 1000000 ] && break
	sleep 0.1
done
[ "$(stat -c %s "$work/copy")" = 1000000 ] || fail "the first 1000000 bytes did not reach the file at once"
pass "ttcp -r > file: the first 1000000 bytes are in the file while the sender pauses"
wait "$sender" || fail "the pausing sender: $(cat "$work/tc.out")"
wait "$receiver" || fail "ttcp -r after a 12 s pause: $(cat "$work/rc.err")"
cmp -s "$work/in" "$work/copy" || fail "the copy differs"
[ "$(plus_bytes "$work/rc.err")" = 3000000 ] || fail "results are not on stderr: $(cat "$work/rc.err")"
pass "ttcp -r > file waited out a 12 s pause: identical, results on stderr"

# An idle limit only when asked.
"$ttcp" -r -p 16708 --timeout 1 >/dev/null 2>"$work/rt.err" &
receiver=$!
wait_listening 16708
{
	echo start
	sleep 4
} | "$ttcp" -t -p 16708 127.0.0.1 >/dev/null 2>&1 &
status=0
wait "$receiver" || status=$?
[ "$status" = 1 ] && grep -q 'no data from .* for 1 s' "$work/rt.err" ||
	fail "--timeout 1 did not end a silent sender: $status $(cat "$work/rt.err")"
pass "--timeout 1 ends a silent sender: $(grep -v '^ttcp-r' "$work/rt.err")"
echo "$checks passed, 0 failed"
