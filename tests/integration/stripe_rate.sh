#!/bin/bash
# stripe put and get take -i SEC (interval reports through lib's reporter, JSON lines with
# --json) and -R RATE (pacing): 30 MB at 160M (20 MB/s) take about 1.5 s, long enough for
# at least two reports every 0.5 s before the final object; a stop ends a paced wait at
# once; bad values, and the options where nothing moves, are refused.
source "$DS_SRC/tests/integration/lib.sh"
command -v jq >/dev/null || fail "jq is not installed"
stripe=$DS_BIN/stripe
size=30000000
mkdir -p "$work"/d{0..3}
D=$work/d0,$work/d1,$work/d2,$work/d3
head -c $size /dev/urandom >"$work/src"

timed "$work/out" "$stripe" put -i 0.5 -R 160M --json "$work/src" "$D" f
paced_json "put -i 0.5 -R 160M --json" "$work/out" stripe put disk $size 1200 30
timed "$work/out" "$stripe" get -i 0.5 -R 160M --json "$D" f "$work/back"
cmp -s "$work/src" "$work/back" || fail "a paced get gave other bytes"
paced_json "get -i 0.5 -R 160M --json" "$work/out" stripe get disk $size 1200 30

# Unpaced, -i alone reports too, in text lines before the summary.
timed "$work/out" "$stripe" put -f -i 0.01 "$work/src" "$D" f
n=$(grep -cE '^\[ *[0-9.]+- *[0-9.]+ s\] +[0-9]+ bytes ' "$work/out" || true)
[ "$n" -ge 1 ] || fail "put -i 0.01: no interval line: $(cat "$work/out")"
tail -n1 "$work/out" | grep -q '^stripe-put: ' || fail "put -i: the summary: $(cat "$work/out")"
pass "put -i 0.01: $n interval lines, then the summary"

# A stop ends a paced wait at once: at 8M the put would take half a minute.
"$stripe" put -f -R 8M "$work/src" "$D" slow >"$work/out" 2>&1 &
pid=$!
sleep 1
t0=$(date +%s%N)
kill -INT $pid
status=0
wait $pid || status=$?
ms=$((($(date +%s%N) - t0) / 1000000))
[ "$status" -eq 130 ] || fail "a stopped paced put: status $status: $(cat "$work/out")"
[ "$ms" -le 800 ] || fail "a stopped paced put took $ms ms to end"
! "$stripe" ls "$D" | grep -q slow || fail "the stopped put left 'slow' behind"
pass "SIGINT ends a paced put in $ms ms (status 130), nothing stored"

expect_error "-R fast" "-R: 'fast' is not a rate in bits/s" "$stripe" put -R fast "$work/src" "$D" x
expect_error "-R 0" "-R: '0' is not a rate in bits/s" "$stripe" get -R 0 "$D" f "$work/x"
expect_error "-i 0" "-i: '0' is not a duration" "$stripe" put -i 0 "$work/src" "$D" x
expect_error "-i with ls" "ls: option -i does not apply" "$stripe" ls -i 1 "$D"
expect_error "-R with rm" "rm: option -R does not apply" "$stripe" rm -R 1M "$D" f
echo "all $checks checks passed"
