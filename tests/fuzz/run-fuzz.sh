#!/usr/bin/env bash
# run-fuzz.sh TARGET CORPUS [SECONDS]: a short libFuzzer run seeded from CORPUS. New inputs
# go to a scratch folder, so the committed corpus changes only when someone means it to.
set -euo pipefail
target=$1 corpus=$2 seconds=${3:-${DS_FUZZ_SECONDS:-20}}
[ -d "$corpus" ] || { echo "run-fuzz: no seed corpus at $corpus" >&2; exit 1; }
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
"$target" -max_total_time="$seconds" -timeout=5 -rss_limit_mb=2048 -print_final_stats=1 \
	"$scratch" "$corpus"
