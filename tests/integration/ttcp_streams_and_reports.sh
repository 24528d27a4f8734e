# Parallel streams, durations, interval lines and the JSON report.
source "$(dirname "$0")/lib.sh"
ttcp=$DS_BIN/ttcp

"$ttcp" -r -s -l 64K -p 16601 --json >"$work/r.json" 2>"$work/r.err" &
receiver=$!
wait_listening 16601
"$ttcp" -t -s -l 64K -n 500 -P 4 -p 16601 --json 127.0.0.1 >"$work/t.json" 2>"$work/t.err" ||
	fail "ttcp -P 4: $(cat "$work/t.err")"
wait "$receiver" || fail "receiver: $(cat "$work/r.err")"
expected=$((4 * 500 * 65536))
[ "$(jq .bytes "$work/t.json")" = "$expected" ] || fail "-P 4 sent $(jq .bytes "$work/t.json")"
[ "$(jq .bytes "$work/r.json")" = "$expected" ] || fail "-P 4 received $(jq .bytes "$work/r.json")"
[ "$(jq .streams "$work/r.json")" = 4 ] || fail "the receiver saw $(jq .streams "$work/r.json") streams"
pass "-P 4: $expected bytes sent and received over 4 streams"

for key in tool role link msg_size messages bytes seconds MB_per_s Gbit_per_s cpu_user_s \
	cpu_sys_s errors; do
	jq -e "has(\"$key\")" "$work/t.json" >/dev/null || fail "JSON lacks $key"
done
[ "$(jq -r '[.tool, .role, .link, .msg_size] | join(" ")' "$work/t.json")" = "ttcp send tcp 65536" ] ||
	fail "JSON identity fields: $(cat "$work/t.json")"
pass "the JSON report has every common field"

"$ttcp" -r -s -p 16602 --json -i 0.5 >"$work/r.json" 2>"$work/r.err" &
receiver=$!
wait_listening 16602
start=$(date +%s.%N)
"$ttcp" -t -s -l 128K -w 2 -i 0.5 -p 16602 127.0.0.1 >"$work/t.out" 2>"$work/t.err" ||
	fail "ttcp -w 2: $(cat "$work/t.err")"
wait "$receiver" || fail "receiver: $(cat "$work/r.err")"
elapsed=$(echo "$(date +%s.%N) - $start" | bc)
[ "$(echo "$elapsed >= 1.9 && $elapsed < 4" | bc)" = 1 ] || fail "-w 2 took $elapsed s"
intervals=$(grep -c '^\[' "$work/t.out" || true)
[ "$intervals" -ge 3 ] || fail "-i 0.5 over 2 s printed $intervals interval lines"
json_intervals=$(jq -s 'map(select(has("interval"))) | length' "$work/r.json")
[ "$json_intervals" -ge 3 ] || fail "--json -i 0.5 printed $json_intervals interval objects"
[ "$(jq -s 'map(select(has("interval") | not)) | length' "$work/r.json")" = 1 ] ||
	fail "--json must end with exactly one final object"
pass "-w 2 ran ${elapsed}s with $intervals interval lines; JSON lines end in one final object"
units=$(sed -nE -e 's/^\[.* ([A-Za-z]+\/sec)$/\1/p' -e 's/^ttcp-t: .* = [0-9.]+ ([A-Za-z]+\/sec) \+\+\+$/\1/p' "$work/t.out" | sort -u)
[ "$units" = KB/sec ] || fail "interval and closing lines disagree on the unit: $(cat "$work/t.out")"
pass "interval lines and the closing line both in KB/sec, classic's unit"
echo "$checks passed, 0 failed"
