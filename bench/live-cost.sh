#!/usr/bin/env bash
# What publishing live counters costs: blast/sink over tcp on loopback with 1 MiB
# messages, runs with counters published (the default) and with --no-stats on both sides,
# in alternation. Prints receive-side medians, spreads and the ratio (the Bar: publishing
# costs at most 2%, i.e. ratio >= 0.98).
#   flock /tmp/ds-bench.lock env DS_BIN=build/bin bench/live-cost.sh [RUNS] [SECONDS]
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bin=${DS_BIN:?DS_BIN must name the folder of the built tools}
runs=${1:-9}
seconds=${2:-2}
port=${DS_BENCH_PORT:-15311}
work=$(mktemp -d)
# Waits for the receivers to be gone, so that a run right after finds their ports free.
trap 'kill $(jobs -p) 2>/dev/null || true; wait; rm -rf "$work"' EXIT
# One sink that publishes, one that does not, each on its own port.
"$bin/sink" -p "$port" --json >"$work/sink-stats.json" 2>"$work/sink-stats.err" &
"$bin/sink" -p $((port + 1)) --no-stats --json >"$work/sink-nostats.json" 2>"$work/sink-nostats.err" &
bench_wait_listening "$port"
bench_wait_listening $((port + 1))
run() { # run NAME PORT [ARGS...]
	local name=$1 to=$2
	shift 2
	"$bin/blast" -p "$to" -l 1M -w "$seconds" --json "$@" 127.0.0.1 >"$work/blast.json" ||
		{ echo "bench: blast $* failed" >&2; exit 1; }
	jq -r --arg n "$name" '[$n, .sink.MB_per_s, .MB_per_s] | @tsv' "$work/blast.json" \
		>>"$work/results.tsv"
}
for ((r = 1; r <= runs; r++)); do
	# Who goes first alternates, so that neither always runs on the other's leftovers.
	if ((r % 2)); then
		run stats "$port"
		run nostats $((port + 1)) --no-stats
	else
		run nostats $((port + 1)) --no-stats
		run stats "$port"
	fi
done
median() {
	awk -F'\t' -v n="$1" '$1 == n { print $2 }' "$work/results.tsv" | sort -g |
		awk '{ v[++k] = $1 } END { m = (k % 2) ? v[(k + 1) / 2] : (v[k / 2] + v[k / 2 + 1]) / 2
			printf "%.0f %.0f %.0f\n", m, v[1], v[k] }'
}
read -r stats stats_lo stats_hi < <(median stats)
read -r nostats nostats_lo nostats_hi < <(median nostats)
printf 'blast/sink tcp loopback, -l 1M, %s runs of %s s each, alternating (receive side)\n' "$runs" "$seconds"
printf '%-12s %8s MB/s  (%s-%s)\n' --no-stats "$nostats" "$nostats_lo" "$nostats_hi"
printf '%-12s %8s MB/s  (%s-%s)\n' published "$stats" "$stats_lo" "$stats_hi"
awk -v s="$stats" -v n="$nostats" 'BEGIN { printf "ratio published/--no-stats %.3f (the Bar: >= 0.98)\n", s / n }'
