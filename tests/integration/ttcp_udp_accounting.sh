# Our UDP receiver counts what happened to numbered datagrams, and ends a run whose end
# sentinels never arrive.
source "$(dirname "$0")/lib.sh"
ttcp=$DS_BIN/ttcp
peer="python3 $DS_SRC/tests/integration/seq_udp_peer.py"

# receive PORT [ttcp options]: a JSON receiver in the background; its output in $work/r.*
receive() {
	local port=$1
	shift
	"$ttcp" -r -u -s -p "$port" --json "$@" >"$work/r.json" 2>"$work/r.err" &
	receiver=$!
	wait_listening "$port" udp
}
field() { jq -r "$1" "$work/r.json"; }

receive 16401
"$ttcp" -t -u -s -l 8K -n 2000 -R 500M -p 16401 127.0.0.1 2>"$work/t.err" || fail "ttcp -t -u"
wait "$receiver" || fail "receiver: $(cat "$work/r.err")"
[ "$(field .messages)" = 2000 ] || fail "our pair: $(field .messages) datagrams of 2000"
[ "$(field '.errors.lost + .errors.dup + .errors.reordered')" = 0 ] || fail "our pair: $(cat "$work/r.json")"
[ "$(field .sequenced)" = true ] || fail "our pair: datagrams not seen as sequenced"
pass "ttcp pair, 2000 paced datagrams: all counted, none lost"

# 0..9 with 3 and 7 missing, 5 twice, 8 before 6; the trailer says 12 were sent.
receive 16402
$peer sendseq 127.0.0.1 16402 0,1,2,4,5,5,8,6,9 --trailer 12
wait "$receiver" || fail "receiver: $(cat "$work/r.err")"
[ "$(field .errors.lost)" = 4 ] || fail "lost: $(field .errors.lost), expected 3, 7, 10, 11"
[ "$(field .errors.dup)" = 1 ] || fail "dup: $(field .errors.dup), expected 1"
[ "$(field .errors.reordered)" = 1 ] || fail "reordered: $(field .errors.reordered), expected 1"
grep -q '9 datagrams, 4 lost, 1 duplicated, 1 reordered (the sender sent 12)' "$work/r.err" ||
	fail "classic accounting line missing: $(cat "$work/r.err")"
pass "gaps, a duplicate, a late datagram and a lost tail counted exactly"

# Every end sentinel lost: the run still ends, after --timeout of silence.
receive 16403 --timeout 1
start=$(date +%s)
$peer sendseq 127.0.0.1 16403 0,1,2,3 --no-end
timeout 10 tail --pid="$receiver" -f /dev/null || fail "the receiver waited forever"
wait "$receiver" || fail "receiver: $(cat "$work/r.err")"
[ $(($(date +%s) - start)) -le 5 ] || fail "ended too late"
[ "$(field .messages)" = 4 ] || fail "silence: $(field .messages) datagrams of 4"
grep -q 'no end sentinel arrived' "$work/r.err" || fail "the silent end was not reported"
pass "lost end sentinels: the run ends after 1 s of silence with all 4 datagrams"
echo "$checks passed, 0 failed"
