#!/usr/bin/env bash
# ttcp against iperf3 on loopback, side by side: the two alternate run by run at each
# write size, and the table gives medians, spreads (min-max), CPU seconds per GB (both
# ends, user+sys, measured the same way for both tools) and the ttcp/iperf3 ratios.
#   DS_BIN=build/bin bench/ttcp-vs-iperf3.sh [RUNS] [SECONDS]
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bin=${DS_BIN:?DS_BIN must name the folder of the built tools}
runs=${1:-3}
seconds=${2:-5}
sizes=${DS_BENCH_SIZES:-"64K 128K 1M"}
port=${DS_BENCH_PORT:-15201}
command -v iperf3 >/dev/null || { echo "bench: iperf3 is not installed" >&2; exit 1; }
work=$(mktemp -d)
# Waits for the receivers to be gone, so that a run right after finds their ports free.
trap 'kill $(jobs -p) 2>/dev/null || true; wait; rm -rf "$work"' EXIT
TIMEFORMAT='%U %S'
results=$work/results.tsv


# cpu FILE...: user+sys seconds summed over bash `time` lines.
cpu() { awk '{ s += $1 + $2 } END { print s }' "$@"; }

# run_ttcp SIZE MODE: one run; appends "tool mode size Gbit/s cpu_s_per_GB".
run_ttcp() {
	local size=$1 mode=$2 extra=()
	[ "$mode" = zerocopy ] && extra=(--zerocopy)
	{ time "$bin/ttcp" -r -s -l "$size" -p "$port" --json >"$work/r.json" 2>/dev/null; } 2>"$work/r.time" &
	local receiver=$!
	bench_wait_listening "$port"
	{ time "$bin/ttcp" -t -s -l "$size" -w "$seconds" -p "$port" "${extra[@]}" 127.0.0.1 \
		>/dev/null 2>&1; } 2>"$work/t.time"
	wait "$receiver"
	jq -r --arg mode "$mode" --arg size "$size" --argjson cpu "$(cpu "$work/r.time" "$work/t.time")" \
		'"ttcp\t\($mode)\t\($size)\t\(.Gbit_per_s)\t\($cpu / (.bytes / 1e9))"' "$work/r.json" >>"$results"
	port=$((port + 1))
}

run_iperf3() {
	local size=$1 mode=$2 extra=()
	[ "$mode" = zerocopy ] && extra=(-Z)
	{ time iperf3 -s -1 -p "$port" >/dev/null 2>&1; } 2>"$work/s.time" &
	local server=$!
	bench_wait_listening "$port"
	{ time iperf3 -c 127.0.0.1 -p "$port" -l "$size" -t "$seconds" "${extra[@]}" -J \
		>"$work/c.json"; } 2>"$work/c.time"
	wait "$server"
	jq -r --arg mode "$mode" --arg size "$size" --argjson cpu "$(cpu "$work/s.time" "$work/c.time")" \
		'.end.sum_received | "iperf3\t\($mode)\t\($size)\t\(.bits_per_second / 1e9)\t\($cpu / (.bytes / 1e9))"' \
		"$work/c.json" >>"$results"
	port=$((port + 1))
}

echo "ttcp vs iperf3 on loopback: $runs runs of $seconds s each, alternating; $(nproc) cores"
echo
for run in $(seq "$runs"); do
	for size in $sizes; do
		run_ttcp "$size" plain
		run_iperf3 "$size" plain
	done
	run_iperf3 1M zerocopy
	run_ttcp 1M zerocopy
	echo "  run $run of $runs done" >&2
done

python3 - "$results" <<'PY'
import statistics, sys
rows = [l.split("\t") for l in open(sys.argv[1]).read().splitlines()]
groups = {}
for tool, mode, size, gbit, cpu in rows:
    groups.setdefault((mode, size), {}).setdefault(tool, []).append((float(gbit), float(cpu)))
print(f"\n{'mode':9} {'size':5} {'tool':7} {'Gbit/s median':>13} {'spread':>15} {'CPU s/GB':>9} {'spread':>13}")
for (mode, size), tools in groups.items():
    med = {}
    for tool in ("ttcp", "iperf3"):
        g = [r[0] for r in tools[tool]]; c = [r[1] for r in tools[tool]]
        med[tool] = (statistics.median(g), statistics.median(c))
        print(f"{mode:9} {size:5} {tool:7} {med[tool][0]:13.2f} {min(g):7.2f}-{max(g):<7.2f} "
              f"{med[tool][1]:9.3f} {min(c):6.3f}-{max(c):<6.3f}")
    print(f"{mode:9} {size:5} {'ratio':7} {med['ttcp'][0] / med['iperf3'][0]:13.3f} "
          f"{'':15} {med['ttcp'][1] / med['iperf3'][1]:9.3f}   (ttcp / iperf3)")
PY
