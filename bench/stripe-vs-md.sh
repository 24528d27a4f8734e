#!/usr/bin/env bash
# stripe against the kernel's md RAID-0 on the same four throttled disks of the test VM
# (tests/vm): stripe put and get with data checksums on (ext4 on each disk) and md RAID-0
# (ext4 on the array, dd O_DIRECT 4M, fsync), SIZE MiB from tmpfs and back to /dev/null.
# One VM boot per run, who goes first alternating. Prints medians, spreads (min-max) and
# stripe/md ratios; the Bar is >= 0.95 for put and get. MB/s = 10^6 bytes/s.
# Needs root, qemu and a VM cache (tests/vm/prepare.sh; DS_VM_CACHE names it). Run it
# under flock /tmp/ds-bench.lock on a shared machine.
# DS_BENCH_STRIPE_B=/path/to/another/stripe adds that build to each boot (an A/B of two
# stripe builds on the same disks; its rows are "stripeB").
#   DS_BIN=build/bin bench/stripe-vs-md.sh [BOOTS] [SIZE_MIB] [DISK_BPS]
set -euo pipefail
bin=${DS_BIN:?DS_BIN must name the folder of the built tools}
boots=${1:-3}
mib=${2:-256}
bps=${3:-50000000}
for v in "$boots" "$mib" "$bps"; do
	[[ $v =~ ^[1-9][0-9]*$ ]] || { echo "bench: '$v' is not a positive count" >&2; exit 1; }
done
[ -x "$bin/stripe" ] || { echo "bench: no stripe in DS_BIN=$bin" >&2; exit 1; }
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
. "$here/lib.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/vm"

lines=0
for ((boot = 1; boot <= boots; boot++)); do
	order=stripe-first
	((boot % 2 == 0)) && order=md-first
	DS_SRC=$(cd "$here/.." && pwd) DS_BIN=$(cd "$bin" && pwd) "$here/../tests/vm/boot.sh" --disks 4 --disk-bps "$bps" \
		--timeout $((400 + mib * 6)) --workdir "$work/vm" \
		"$here/stripe-vs-md.guest.sh" "$mib" "$order" >"$work/console.log" 2>&1 || {
		tail -30 "$work/console.log" >&2
		echo "bench: boot $boot failed (its console above)" >&2
		exit 1
	}
	echo "boot $boot ($order): $(awk -F'\t' -v from="$lines" 'NR > from { printf "%s %s %s  ", $1, $2, $3 }' "$work/vm/results.tsv")"
	lines=$(wc -l <"$work/vm/results.tsv")
done

results=$work/vm/results.tsv
printf '\nstripe (checksums on) vs md RAID-0, 4 disks at %s B/s each, %s MiB, %s boots\n' "$bps" "$mib" "$boots"
bench_ratio_table "$results" stripe md put get
if [ -n "${DS_BENCH_STRIPE_B:-}" ]; then
	printf '\nstripe against the build in DS_BENCH_STRIPE_B (%s)\n' "$DS_BENCH_STRIPE_B"
	bench_ratio_table "$results" stripe stripeB put get
fi
