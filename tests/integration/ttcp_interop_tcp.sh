# TCP is a plain byte stream: other stream tools are ttcp's peers both ways.
source "$(dirname "$0")/lib.sh"
ttcp=$DS_BIN/ttcp
head -c 10000000 /dev/urandom >"$work/in"

# Our transmitter into socat and nc listening.
socat -u TCP-LISTEN:16201,reuseaddr OPEN:"$work/socat.out",creat,trunc &
wait_listening 16201
"$ttcp" -t -s -l 64K -n 100 -p 16201 127.0.0.1 >"$work/t.out" || fail "ttcp -t into socat"
wait $!
[ "$(stat -c %s "$work/socat.out")" = 6553600 ] || fail "socat got $(stat -c %s "$work/socat.out") bytes"
[ "$(classic_bytes "$work/t.out")" = 6553600 ] || fail "ttcp -t reported another count"
pass "ttcp -t -s into socat: 6553600 bytes both sides"

nc -l 127.0.0.1 16202 >"$work/nc.out" &
wait_listening 16202
"$ttcp" -t -p 16202 127.0.0.1 <"$work/in" 2>"$work/t.err" || fail "ttcp -t into nc"
wait $!
cmp -s "$work/in" "$work/nc.out" || fail "nc received something else"
pass "ttcp -t < file into nc -l: identical"

# socat and nc feeding our receiver.
"$ttcp" -r -p 16203 >"$work/r.out" 2>"$work/r.err" &
receiver=$!
wait_listening 16203
socat -u OPEN:"$work/in" TCP:127.0.0.1:16203 || fail "socat feeding ttcp -r"
wait "$receiver" || fail "ttcp -r: $(cat "$work/r.err")"
cmp -s "$work/in" "$work/r.out" || fail "ttcp -r wrote something else"
[ "$(classic_bytes "$work/r.err")" = 10000000 ] || fail "ttcp -r reported another count"
pass "socat into ttcp -r: identical, 10000000 bytes"

"$ttcp" -r -s -p 16204 >"$work/r.out" 2>"$work/r.err" &
receiver=$!
wait_listening 16204
nc -N 127.0.0.1 16204 <"$work/in" || fail "nc feeding ttcp -r -s"
wait "$receiver" || fail "ttcp -r -s: $(cat "$work/r.err")"
[ "$(classic_bytes "$work/r.out")" = 10000000 ] || fail "ttcp -r -s counted $(classic_bytes "$work/r.out")"
pass "nc into ttcp -r -s: 10000000 bytes counted"
echo "$checks passed, 0 failed"
