# blast and sink with -i: a report for every interval of the run, the one that ends with
# the run included (`blast -i 1 -w 2` used to print only the first), and the intervals
# carry the run's bytes.
source "$(dirname "$0")/lib.sh"
blast=$DS_BIN/blast
sink=$DS_BIN/sink

"$sink" -p 16811 --once -i 1 >"$work/sink.out" 2>/dev/null &
sink_pid=$!
wait_listening 16811
"$blast" -i 1 -w 2 -R 400M -p 16811 127.0.0.1 >"$work/blast.out" || fail "blast -i 1 -w 2"
wait "$sink_pid" || fail "sink --once -i 1"
for side in blast sink; do
	lines=$(grep -c '^\[' "$work/$side.out" || true)
	[ "$lines" = 2 ] || fail "$side -i 1 over 2 s printed $lines interval lines: $(cat "$work/$side.out")"
	last_end=$(sed -nE 's/^\[ *[0-9.]+- *([0-9.]+) s\].*/\1/p' "$work/$side.out" | tail -1)
	[ "$(echo "$last_end >= 1.9" | bc)" = 1 ] || fail "$side: the last interval ends at $last_end s"
done
pass "blast -i 1 -w 2 and its sink: two interval lines each, the last ending at $last_end s"

"$sink" -p 16812 --once >/dev/null 2>&1 &
sink_pid=$!
wait_listening 16812
"$blast" --json -i 0.5 -w 2 -R 400M -p 16812 127.0.0.1 >"$work/blast.json" || fail "blast --json -i 0.5"
wait "$sink_pid" || fail "sink --once"
jq -se '(map(select(has("interval"))) | length) == 4' "$work/blast.json" >/dev/null ||
	fail "--json -i 0.5 -w 2: $(jq -sc 'map(.interval)' "$work/blast.json")"
# A tail shorter than a tenth of an interval is left to the final figures alone.
jq -se '(map(select(has("interval")) | .bytes) | add) as $sum |
	(map(select(has("interval") | not))[0].bytes) as $total | $sum <= $total and $sum >= 0.95 * $total' \
	"$work/blast.json" >/dev/null || fail "the intervals' bytes do not add up to the run's: $(cat "$work/blast.json")"
pass "blast --json -i 0.5 -w 2: four interval objects, their bytes the final object's (but a short tail)"
echo "$checks passed, 0 failed"
