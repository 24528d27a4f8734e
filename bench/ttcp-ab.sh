#!/usr/bin/env bash
# Two builds of ttcp against each other on loopback, to show what a change did to its hot
# paths: A and B alternate run by run (who goes first alternates too) over -s at each
# write size and over the stdin-to-stdout copy; the table gives medians, spreads and B/A.
#   flock /tmp/ds-bench.lock bench/ttcp-ab.sh A_BIN_DIR B_BIN_DIR [RUNS] [SECONDS]
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
a=${1:?the folder of build A\'s tools}
b=${2:?the folder of build B\'s tools}
runs=${3:-5}
seconds=${4:-3}
sizes=${DS_BENCH_SIZES:-"64K 1M"}
port=${DS_BENCH_PORT:-15301}
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; wait; rm -rf "$work"' EXIT
results=$work/results.tsv

# run LABEL BIN MODE SIZE: one run; appends "mode size label Gbit/s".
run() {
	local label=$1 bin=$2 mode=$3 size=$4
	if [ "$mode" = sink ]; then
		"$bin/ttcp" -r -s -l "$size" -p "$port" --json >"$work/r.out" 2>/dev/null &
		bench_wait_listening "$port"
		"$bin/ttcp" -t -s -l "$size" -w "$seconds" -p "$port" 127.0.0.1 >/dev/null 2>&1
	else # the classic copy: a pipe into -t, -r into /dev/null (its JSON then on stderr)
		"$bin/ttcp" -r -l "$size" -p "$port" --json >/dev/null 2>"$work/r.out" </dev/null &
		bench_wait_listening "$port"
		timeout "$seconds" cat /dev/zero | "$bin/ttcp" -t -l "$size" -p "$port" 127.0.0.1 \
			>/dev/null 2>&1 || true
	fi
	wait
	grep '^{' "$work/r.out" | jq -r --arg l "$label" --arg m "$mode" --arg s "$size" \
		'"\($m)\t\($s)\t\($l)\t\(.Gbit_per_s)"' >>"$results"
	port=$((port + 1))
}

echo "ttcp A ($a) against B ($b): $runs runs of $seconds s, alternating; $(nproc) cores"
for r in $(seq "$runs"); do
	for mode in sink copy; do
		for size in $sizes; do
			if ((r % 2)); then
				run A "$a" "$mode" "$size"
				run B "$b" "$mode" "$size"
			else
				run B "$b" "$mode" "$size"
				run A "$a" "$mode" "$size"
			fi
		done
	done
	echo "  run $r of $runs done" >&2
done

python3 - "$results" <<'PY'
import statistics, sys
groups = {}
for line in open(sys.argv[1]).read().splitlines():
    mode, size, label, gbit = line.split("\t")
    groups.setdefault((mode, size), {}).setdefault(label, []).append(float(gbit))
print(f"\n{'mode':5} {'size':5} {'A Gbit/s':>9} {'spread':>13} {'B Gbit/s':>9} {'spread':>13} {'B/A':>6}")
for (mode, size), g in groups.items():
    ma, mb = statistics.median(g["A"]), statistics.median(g["B"])
    print(f"{mode:5} {size:5} {ma:9.2f} {min(g['A']):6.2f}-{max(g['A']):<6.2f} "
          f"{mb:9.2f} {min(g['B']):6.2f}-{max(g['B']):<6.2f} {mb / ma:6.3f}")
PY
