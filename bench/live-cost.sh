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
trap 'kill $(jobs -p) 2>/dev/null || true; wait; rm -rf "$work"' EXIT
# sink and blast each on a core of their own where there are two: whether the scheduler
# put them on one core or two moved a run by up to 30%, far more than what is measured.
pin_sink=() pin_blast=()
if [ "$(nproc)" -ge 2 ] && command -v taskset >/dev/null; then
	pin_sink=(taskset -c 1) pin_blast=(taskset -c 0)
fi
# run NAME [--no-stats]: a fresh sink for each run, so the two kinds differ in nothing
# but publishing (not in which long-lived process received them).
run() {
	local name=$1
	shift
	"${pin_sink[@]}" "$bin/sink" -p "$port" --once "$@" >/dev/null 2>"$work/sink.err" &
	local sink_pid=$!
	bench_wait_listening "$port"
	"${pin_blast[@]}" "$bin/blast" -p "$port" -l 1M -w "$seconds" --json "$@" 127.0.0.1 >"$work/blast.json" ||
		{ echo "bench: blast $* failed" >&2; exit 1; }
	wait "$sink_pid" || { echo "bench: sink $* failed: $(cat "$work/sink.err")" >&2; exit 1; }
	# receive rate, and blast's CPU seconds per GB (less swayed by a busy machine)
	jq -r --arg n "$name" '[$n, .sink.MB_per_s, (.cpu_user_s + .cpu_sys_s) / .bytes * 1e9] | @tsv' \
		"$work/blast.json" >>"$work/results.tsv"
}
for ((r = 1; r <= runs; r++)); do
	# Who goes first alternates, so that neither always runs on the other's leftovers.
	if ((r % 2)); then
		run stats
		run nostats --no-stats
	else
		run nostats --no-stats
		run stats
	fi
done
read -r stats stats_lo stats_hi < <(bench_median "$work/results.tsv" stats)
read -r nostats nostats_lo nostats_hi < <(bench_median "$work/results.tsv" nostats)
printf 'blast/sink tcp loopback, -l 1M, %s runs of %s s each, alternating (receive side)%s\n' "$runs" "$seconds" "${pin_sink[*]:+, sink and blast pinned to cores 1 and 0}"
printf '%-12s %8s MB/s  (%s-%s)\n' --no-stats "$nostats" "$nostats_lo" "$nostats_hi"
printf '%-12s %8s MB/s  (%s-%s)\n' published "$stats" "$stats_lo" "$stats_hi"
read -r cpu_stats cpu_stats_lo cpu_stats_hi < <(bench_median "$work/results.tsv" stats 3)
read -r cpu_nostats cpu_nostats_lo cpu_nostats_hi < <(bench_median "$work/results.tsv" nostats 3)
printf 'blast CPU s/GB: --no-stats %s (%s-%s), published %s (%s-%s)\n' "$cpu_nostats" \
	"$cpu_nostats_lo" "$cpu_nostats_hi" "$cpu_stats" "$cpu_stats_lo" "$cpu_stats_hi"
awk -v s="$stats" -v n="$nostats" 'BEGIN { printf "ratio of medians published/--no-stats %.3f (the Bar: >= 0.98)\n", s / n }'
# Each run beside its partner of the same round: slow drifts of a busy machine cancel.
awk -F'\t' '$1 == "stats" { s[++i] = $2 } $1 == "nostats" { n[++j] = $2 }
	END { for (k = 1; k <= i && k <= j; k++) print "pair\t" s[k] / n[k] }' "$work/results.tsv" >"$work/pairs.tsv"
read -r pair pair_lo pair_hi < <(bench_median "$work/pairs.tsv" pair)
printf 'median ratio within the %s pairs %s (%s-%s)\n' "$runs" "$pair" "$pair_lo" "$pair_hi"
