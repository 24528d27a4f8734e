#!/bin/bash
# Guest half of bench/verbs-vs-perftest.sh, run by tests/vm/boot.sh: on one soft-RoCE
# device (rxe0 on a dummy netdev, both ends on 198.18.0.1) it alternates blast/sink -x
# verbs with ib_write_bw (default op: RDMA WRITEs, one WITH IMMEDIATE per batch) and blast
# --op send with ib_send_bw, at 64 KiB and 1 MiB (or DS_BENCH_SIZES, DS_BENCH_OPS), RUNS
# times SECONDS each. One line per run goes to
# $DS_VM_WORK/results.tsv: case, tool, size, MB/s (10^6 B/s) receive side or equivalent,
# and the run's number.
#   boot.sh bench/verbs-vs-perftest.guest.sh RUNS SECONDS
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=../tests/vm/guest-lib.sh
. "$here/../tests/vm/guest-lib.sh"
bin=${DS_BIN:?DS_BIN must name the folder of the built tools}
runs=${1:?usage: $0 RUNS SECONDS}
seconds=${2:?usage: $0 RUNS SECONDS}
command -v ib_write_bw >/dev/null || ds_vm_die "perftest (ib_write_bw, ib_send_bw) is not installed"
ds_vm_bench_rxe "$0 RUNS SECONDS"
ip=$DS_RXE_IP
limit=$((seconds + 60)) # every peer's time limit: a lost one fails the bench, never hangs it

# --idle 10: on soft-RoCE in this guest, under load, a blast's first message has come 3 s late.
timeout $((runs * 8 * limit)) "$bin/sink" -x verbs -B "$ip" -p 5050 --idle 10 --json \
	>"$logs/sink.json" 2>"$logs/sink.err" &
sink_pid=$!
trap 'kill "$sink_pid" 2>/dev/null || true' EXIT
ds_vm_wait_rdma_cm 5050 || ds_vm_die "sink did not listen"

record() { # record CASE TOOL SIZE MB_PER_S
	printf '%s\t%s\t%s\t%s\t%s\n' "$@" "$run" >>"$results"
	printf 'run %s/%s: %-5s %-11s %4s %8.1f MB/s\n' "$run" "$runs" "$1" "$2" "$3" "$4"
}

# blast_run OP SIZE: the sink's own figure (first to last arrival), from blast's JSON.
blast_run() {
	local op=$1 size=$2 name=$logs/blast-$1-$2-$run opts=()
	[ "$op" = write ] || opts=(--op "$op")
	timeout "$limit" "$bin/blast" -x verbs -p 5050 -l "$size" -w "$seconds" "${opts[@]}" \
		--json "$ip" >"$name.json" 2>"$name.err" || {
		cat "$name.err" "$logs/sink.err"
		ds_vm_die "blast --op $op -l $size failed"
	}
	record "$op" blast "$size" "$(jq -r '.sink.MB_per_s' "$name.json")"
}

# perftest_run OP SIZE: ib_OP_bw over TCP-exchanged GIDs. -D covers the sample window
# (SECONDS) plus a 1 s margin on each side that perftest leaves out of its figure. -Q 1
# signals every message, so that the count in the window is exact (its default of one
# signal per many 1 MiB messages counts nothing in a few seconds under TCG). The server's
# line is read: ib_send_bw's receiver measures itself, ib_write_bw's passive side prints
# the sender's count of writes the receiver acknowledged. Without --report_gbits the
# figure is MiB/s (2^20 B/s) with two decimals: MB/s = MiB/s * 1.048576.
port=18515
perftest_run() {
	local op=$1 size=$2 name=$logs/ib_$1_bw-$2-$run st=0 sst=0 spid line
	local cmd=("ib_${op}_bw" -d "$DS_RXE_DEV" -x "$DS_RXE_GID_INDEX" -s "$(numfmt --from=iec "$size")"
		-D $((seconds + 2)) -f 1 -Q 1 -F -p $((++port)))
	timeout "$limit" "${cmd[@]}" >"$name.server" 2>&1 &
	spid=$!
	ds_vm_wait_tcp "$port" || st=$?
	[ "$st" != 0 ] || timeout "$limit" "${cmd[@]}" 127.0.0.1 >"$name.client" 2>&1 || st=$?
	wait "$spid" || sst=$?
	if [ "$st" != 0 ] || [ "$sst" != 0 ]; then
		cat "$name.server" "$name.client" 2>/dev/null || true
		ds_vm_die "ib_${op}_bw -s $size: client $st, server $sst"
	fi
	# The result line follows the "#bytes #iterations BW peak BW average MsgRate" header.
	line=$(awk '/#bytes/ { getline; print; exit }' "$name.server")
	read -r _ _ _ avg _ <<<"$line" || true
	awk -v a="${avg:-x}" 'BEGIN { exit !(a + 0 > 0) }' || ds_vm_die "ib_${op}_bw gave no figure: '$line'"
	record "$op" "ib_${op}_bw" "$size" "$(awk -v a="$avg" 'BEGIN { print a * 1.048576 }')"
}

for ((run = 1; run <= runs; run++)); do
	for size in ${DS_BENCH_SIZES:-64K 1M}; do
		for op in ${DS_BENCH_OPS:-write send}; do
			# Who goes first alternates, so drift in the host's load favours neither.
			if ((run % 2)); then
				blast_run "$op" "$size"
				perftest_run "$op" "$size"
			else
				perftest_run "$op" "$size"
				blast_run "$op" "$size"
			fi
		done
	done
done
echo "bench: done"
