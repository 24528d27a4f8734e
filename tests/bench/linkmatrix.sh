#!/usr/bin/env bash
# linkmatrix under mpirun on loopback: 3 ranks give a complete 3 x 3 matrix (CSV, JSON,
# heat map); a rank whose port is taken makes its pairs fail, reported, and the run ends;
# bad options exit 2 with one line.
set -euo pipefail
# shellcheck source=lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_test_private_net "$@"
bench_test_start 17060
[ -x "$bin/linkmatrix" ] || { echo "SKIP: linkmatrix not built (DS_WITH_MPI=OFF)"; exit 77; }
# OpenMPI keeps some allocations until exit, which the sanitizer build would call leaks.
export ASAN_OPTIONS=${ASAN_OPTIONS:-}:detect_leaks=0
mpi=(timeout 120 mpirun --allow-run-as-root --oversubscribe -np 3)
cd "$work"

# A complete matrix.
"${mpi[@]}" "$bin/linkmatrix" -w 0.2 -l 64K -p 17060 -o "$work/ok" >"$work/ok.out" 2>"$work/ok.err" ||
	{ cat "$work/ok.out" "$work/ok.err" >&2; fail "linkmatrix -np 3 exited $?"; }
[ "$(head -1 "$work/ok.csv")" = 'from\to,0,1,2' ] || fail "CSV header: $(head -1 "$work/ok.csv")"
[ "$(wc -l <"$work/ok.csv")" = 4 ] || fail "CSV has $(wc -l <"$work/ok.csv") lines, not 4"
awk -F, 'NR > 1 { for (to = 0; to < 3; to++) { v = $(to + 2)
	if (to == NR - 2) { if (v != "") exit 1 } else if (!(v ~ /^[0-9]+\.[0-9]+$/ && v > 0)) exit 1 } }' \
	"$work/ok.csv" || fail "CSV cells are not rates with an empty diagonal: $(cat "$work/ok.csv")"
jq -e '.complete == true and .ranks == 3 and .failed == 0 and (.pairs | length) == 6
	and all(.pairs[]; .ok and .MB_per_s > 0) and (.matrix | length) == 3
	and .matrix[1][1] == null and .matrix[0][1] > 0 and .median_MB_per_s > 0' \
	"$work/ok.json" >/dev/null || fail "JSON is not a complete matrix: $(cat "$work/ok.json")"
check_png "$work/ok.png"
grep -q '^median [0-9.]* MB/s' "$work/ok.out" || fail "no median in the printed table"
echo "PASS: complete 3 x 3 matrix, CSV, JSON and heat map"

# Every pair at once.
"${mpi[@]}" "$bin/linkmatrix" --all-to-all -w 0.2 -l 64K -p 17060 -o "$work/a2a" >/dev/null 2>&1 ||
	fail "--all-to-all exited $?"
jq -e '.complete and .mode == "all-to-all" and all(.pairs[]; .MB_per_s > 0)' "$work/a2a.json" \
	>/dev/null || fail "--all-to-all matrix incomplete: $(cat "$work/a2a.json")"
echo "PASS: --all-to-all"

# Rank 1's port is taken: the pairs into rank 1 fail with the reason, the others run, and
# the whole run still ends (the 120 s timeout would say it hung).
python3 -c 'import socket, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", 17061)); s.listen(4); print("ready", flush=True); time.sleep(120)' >"$work/squat" &
for _ in $(seq 50); do grep -q ready "$work/squat" && break; sleep 0.1; done
set +e
"${mpi[@]}" "$bin/linkmatrix" -w 0.2 -l 64K -p 17060 --timeout 2 -o "$work/bad" >"$work/bad.out" 2>&1
status=$?
set -e
[ "$status" = 1 ] || { cat "$work/bad.out" >&2; fail "a failed pair should exit 1, not $status"; }
jq -e '.complete == false and .failed == 2
	and ([.pairs[] | select(.ok | not) | [.from, .to]] == [[0, 1], [2, 1]])
	and all(.pairs[] | select(.ok | not); .error | test("rank 1 cannot listen"))
	and all(.pairs[] | select(.to != 1); .ok and .MB_per_s > 0)' "$work/bad.json" >/dev/null ||
	fail "the refused pairs are not reported as such: $(cat "$work/bad.json")"
grep -q '^FAILED 0 -> 1: rank 1 cannot listen' "$work/bad.out" || fail "no FAILED line printed"
check_png "$work/bad.png"
echo "PASS: a refused link is reported, the rest measured"

# Bad options: one line, exit 2.
for args in "-w 0" "-l 3" "--slow 2" "-x carrier-pigeon" "--bogus"; do
	set +e
	# shellcheck disable=SC2086
	timeout 60 mpirun --allow-run-as-root --oversubscribe -np 2 "$bin/linkmatrix" $args \
		>"$work/opt.out" 2>&1
	status=$?
	set -e
	[ "$status" = 2 ] || fail "linkmatrix $args exited $status, not 2"
	grep -q '^linkmatrix: ' "$work/opt.out" || fail "linkmatrix $args: no error line"
done
echo "PASS: bad options exit 2"
