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
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
. "$here/lib.sh"
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

printf "stripe (one directory, %s) vs dd O_DIRECT 1M, %d MiB, %d runs, MB/s = 10^6 B/s\n" "$dir" "$mib" "$runs"
bench_ratio_table "$results" stripe dd write read
