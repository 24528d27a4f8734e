#!/usr/bin/env bash
# A one-directory stripe against dd O_DIRECT 1 MiB on the same disk: sequential write
# (dd if=/dev/zero oflag=direct; stripe bench's write, fsync and commit included) and
# read (dd iflag=direct; stripe bench's read with data checksums checked). Runs
# alternate; the table gives medians, min-max and stripe/dd ratios (the Bar: >= 0.9).
#   DS_BIN=build/bin bench/stripe-vs-dd.sh [DIR] [RUNS] [SIZE_MIB]
set -euo pipefail
bin=${DS_BIN:?DS_BIN must name the folder of the built tools}
dir=${1:-/var/tmp}
runs=${2:-3}
mib=${3:-1024}
command -v jq >/dev/null || { echo "bench: jq is not installed" >&2; exit 1; }
work=$(mktemp -d "$dir/stripe-vs-dd.XXXXXX")
trap 'rm -rf "$work"' EXIT
results=$work/results.tsv

dd_rate() { # dd's own "N bytes ... copied, S s" line, as MB/s
	awk '/copied/ { for (i = 1; i <= NF; i++) if ($i == "s,") { print $1 / $(i - 1) / 1e6; exit } }'
}
for ((run = 1; run <= runs; run++)); do
	dd if=/dev/zero of="$work/dd" bs=1M count="$mib" oflag=direct 2>&1 | dd_rate |
		sed 's/^/dd\twrite\t/' >>"$results"
	dd if="$work/dd" of=/dev/null bs=1M iflag=direct 2>&1 | dd_rate |
		sed 's/^/dd\tread\t/' >>"$results"
	rm -f "$work/dd"
	"$bin/stripe" bench --json -s "${mib}M" "$work" 2>/dev/null |
		jq -r '"stripe\twrite\t\(.disk0.write_MB_per_s)\nstripe\tread\t\(.disk0.read_MB_per_s)"' >>"$results"
done

median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
spread() { sort -g | awk 'NR == 1 { lo = $1 } { hi = $1 } END { printf "%.0f-%.0f", lo, hi }'; }
pick() { awk -F'\t' -v t="$1" -v d="$2" '$1 == t && $2 == d { print $3 }' "$results"; }
printf "stripe (one directory, %s) vs dd O_DIRECT 1M, %d MiB, %d runs, MB/s = 10^6 B/s\n" "$dir" "$mib" "$runs"
printf "%-6s %14s %12s %14s %12s %8s\n" dir "stripe median" "(min-max)" "dd median" "(min-max)" ratio
for d in write read; do
	s=$(pick stripe $d | median)
	t=$(pick dd $d | median)
	printf "%-6s %14.0f %12s %14.0f %12s %8.3f\n" "$d" "$s" "$(pick stripe $d | spread)" "$t" \
		"$(pick dd $d | spread)" "$(awk -v a="$s" -v b="$t" 'BEGIN { print a / b }')"
done
