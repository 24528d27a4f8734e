#!/usr/bin/env bash
# blast/sink -x verbs against perftest on the same soft-RoCE device in one boot of the
# test VM (tests/vm): blast (default op, RDMA WRITEs) against ib_write_bw,
# blast --op send against ib_send_bw, at -l 64K and 1M, run after run in alternation.
# Prints medians, spreads (min-max) and blast/perftest ratios, receive side or
# equivalent, MB/s = 10^6 bytes/s. The guest half is verbs-vs-perftest.guest.sh.
# Needs root, qemu and a VM cache (tests/vm/prepare.sh; DS_VM_CACHE names it).
# DS_BENCH_OPS ("write send") and DS_BENCH_SIZES ("64K 1M") narrow the cases, so that more
# runs of one case fit in the time.
#   DS_BIN=build/bin bench/verbs-vs-perftest.sh [RUNS] [SECONDS]
set -euo pipefail
bin=${DS_BIN:?DS_BIN must name the folder of the built tools}
runs=${1:-5}
seconds=${2:-5}
[[ $runs =~ ^[1-9][0-9]*$ ]] || { echo "bench: RUNS '$runs' is not a count" >&2; exit 1; }
[[ $seconds =~ ^[1-9][0-9]*$ ]] || { echo "bench: SECONDS '$seconds' is not whole seconds" >&2; exit 1; }
[ -x "$bin/blast" ] || { echo "bench: no blast in DS_BIN=$bin" >&2; exit 1; }
export DS_BENCH_OPS=${DS_BENCH_OPS:-"write send"} DS_BENCH_SIZES=${DS_BENCH_SIZES:-"64K 1M"}
for op in $DS_BENCH_OPS; do
	[[ $op =~ ^(write|send)$ ]] || { echo "bench: DS_BENCH_OPS: '$op' is not write or send" >&2; exit 1; }
done
for size in $DS_BENCH_SIZES; do
	[[ $size =~ ^[1-9][0-9]*[KM]?$ ]] || { echo "bench: DS_BENCH_SIZES: '$size' is not a size like 64K" >&2; exit 1; }
done
read -ra ops <<<"$DS_BENCH_OPS"
read -ra sizes <<<"$DS_BENCH_SIZES"
cases=$((${#ops[@]} * ${#sizes[@]} * 2))
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Each run of each case and tool: the tool's SECONDS (perftest's plus 2 s of margins) and
# about 10 s of set-up under TCG.
DS_BIN=$(cd "$bin" && pwd) "$here/../tests/vm/boot.sh" --timeout $((120 + runs * cases * (seconds + 12))) \
	--workdir "$work/vm" "$here/verbs-vs-perftest.guest.sh" "$runs" "$seconds" \
	>"$work/console.log" 2>&1 || {
	tail -40 "$work/console.log" >&2
	echo "bench: the VM run failed (its console above)" >&2
	exit 1
}
grep '^run \|^link: ' "$work/console.log" || true
results=$work/vm/results.tsv

printf '\nverbs on soft-RoCE (rxe0, one device, qemu TCG), %s runs of %s s each, alternating\n' \
	"$runs" "$seconds"
printf 'blast: the sink'"'"'s figure; perftest: its report over its %s s sample. MB/s = 10^6 bytes/s.\n\n' \
	"$seconds"
printf '%-5s %-11s %5s %9s %9s %9s\n' op tool size median min max
# One line per case and tool: median, min, max; then the ratios of the medians.
sort -t$'\t' -k4,4g "$results" | awk -F'\t' -v ops="$DS_BENCH_OPS" -v sizes="$DS_BENCH_SIZES" '
	{ key = $1 " " $2 " " $3; v[key, ++n[key]] = $4 }
	function median(key, k) {
		k = n[key]
		return (k % 2) ? v[key, (k + 1) / 2] : (v[key, k / 2] + v[key, k / 2 + 1]) / 2
	}
	END {
		nops = split(ops, op, " "); nsizes = split(sizes, size, " ")
		for (i = 1; i <= nops; i++) for (j = 1; j <= nsizes; j++) {
			split("blast ib_" op[i] "_bw", tools, " ")
			for (t = 1; t <= 2; t++) {
				key = op[i] " " tools[t] " " size[j]
				if (n[key])
					printf "%-5s %-11s %5s %9.1f %9.1f %9.1f\n", op[i], tools[t],
					       size[j], median(key), v[key, 1], v[key, n[key]]
			}
		}
		print ""
		for (i = 1; i <= nops; i++) for (j = 1; j <= nsizes; j++) {
			mine = op[i] " blast " size[j]; peer = op[i] " ib_" op[i] "_bw " size[j]
			if (n[mine] && n[peer] && median(peer) > 0)
				printf "ratio blast/ib_%s_bw at %-3s %5.2f%s\n", op[i], size[j],
				       median(mine) / median(peer), op[i] == "write" ? "   (the Bar: >= 1.0)" : ""
		}
	}'
# The two runs of a pair go back to back and share the host's load of the moment, so the
# ratio within each pair is steadier than the ratio of medians: its median and range.
awk -F'\t' '
	{ key = $1 "\t" $3 "\t" $5; if ($2 == "blast") mine[key] = $4; else peer[key] = $4 }
	END { for (k in mine) if ((k in peer) && peer[k] > 0) print k "\t" mine[k] / peer[k] }' \
	"$results" | sort -t$'\t' -k1,1 -k2,2 -k4,4g | awk -F'\t' '
	{ key = $1 " " $2; if (!(key in n)) order[++keys] = key; r[key, ++n[key]] = $4 }
	END {
		for (i = 1; i <= keys; i++) {
			key = order[i]; k = n[key]; split(key, f, " ")
			m = (k % 2) ? r[key, (k + 1) / 2] : (r[key, k / 2] + r[key, k / 2 + 1]) / 2
			printf "paired ratio blast/ib_%s_bw at %-3s median %.2f (%.2f-%.2f, %d pairs)\n",
			       f[1], f[2], m, r[key, 1], r[key, k], k
		}
	}'
