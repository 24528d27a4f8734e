# UDP keeps the classic sentinels: a classic receiver takes our sender's run, and our
# receiver takes a classic sender's run, with the same counts on both sides.
source "$(dirname "$0")/lib.sh"
ttcp=$DS_BIN/ttcp
peer="python3 $DS_SRC/tests/integration/classic_udp_peer.py"

$peer recv 16301 >"$work/classic.out" &
classic=$!
wait_listening 16301 udp
"$ttcp" -t -u -s -l 1000 -n 200 -R 50M -p 16301 127.0.0.1 2>"$work/t.err" || fail "ttcp -t -u"
wait "$classic" || fail "the classic receiver did not see the end sentinel"
read -r bytes datagrams <"$work/classic.out"
[ "$datagrams" = 200 ] && [ "$bytes" = 200000 ] ||
	fail "classic receiver counted $bytes bytes in $datagrams datagrams, not 200000 in 200"
[ "$(classic_bytes "$work/t.err")" = 200000 ] || fail "ttcp -t -u reported another count"
pass "ttcp -t -u into a classic receiver: 200000 bytes in 200 datagrams both sides"

"$ttcp" -r -u -s -p 16302 2>"$work/r.err" &
receiver=$!
wait_listening 16302 udp
$peer send 127.0.0.1 16302 300 1400
wait "$receiver" || fail "ttcp -r -u: $(cat "$work/r.err")"
[ "$(classic_bytes "$work/r.err")" = 420000 ] ||
	fail "ttcp -r -u counted $(classic_bytes "$work/r.err") bytes of a classic sender's 420000"
grep -q 'no end sentinel' "$work/r.err" && fail "the classic end sentinel was missed"
pass "a classic sender into ttcp -r -u: 420000 bytes"
echo "$checks passed, 0 failed"
