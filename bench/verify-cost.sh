#!/usr/bin/env bash
# What --verify costs: blast/sink over tcp on loopback with 1 MiB messages, runs with and
# without --verify in alternation. Prints receive-side medians, spreads and the ratio
# (the Bar: --verify costs at most 10%, i.e. ratio >= 0.90).
#   DS_BIN=build/bin bench/verify-cost.sh [RUNS] [SECONDS]
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bin=${DS_BIN:?DS_BIN must name the folder of the built tools}
runs=${1:-5}
seconds=${2:-2}
port=${DS_BENCH_PORT:-15301}
work=$(mktemp -d)
# Waits for the receivers to be gone, so that a run right after finds their ports free.
trap 'kill $(jobs -p) 2>/dev/null || true; wait; rm -rf "$work"' EXIT
"$bin/sink" -p "$port" --json >"$work/sink.json" 2>"$work/sink.err" &
bench_wait_listening "$port"
run() { # run NAME [ARGS...]
	local name=$1
	shift
	"$bin/blast" -p "$port" -l 1M -w "$seconds" --json "$@" 127.0.0.1 >"$work/blast.json" ||
		{ echo "bench: blast $* failed" >&2; exit 1; }
	jq -r --arg n "$name" '[$n, .sink.MB_per_s, .sink.errors.corrupt] | @tsv' \
		"$work/blast.json" >>"$work/results.tsv"
}
for ((r = 1; r <= runs; r++)); do
	# Who goes first alternates, so that neither always runs on the other's leftovers.
	if ((r % 2)); then
		run plain
		run verify --verify
	else
		run verify --verify
		run plain
	fi
done
read -r plain plain_lo plain_hi < <(bench_median "$work/results.tsv" plain)
read -r verify verify_lo verify_hi < <(bench_median "$work/results.tsv" verify)
corrupt=$(awk -F'\t' '{ c += $3 } END { print c + 0 }' "$work/results.tsv")
printf 'blast/sink tcp loopback, -l 1M, %s runs of %s s each, alternating (receive side)\n' "$runs" "$seconds"
printf '%-10s %8s MB/s  (%s-%s)\n' plain "$plain" "$plain_lo" "$plain_hi"
printf '%-10s %8s MB/s  (%s-%s)  corrupt %s\n' --verify "$verify" "$verify_lo" "$verify_hi" "$corrupt"
awk -v v="$verify" -v p="$plain" 'BEGIN { printf "ratio verify/plain %.3f (the Bar: >= 0.90)\n", v / p }'
