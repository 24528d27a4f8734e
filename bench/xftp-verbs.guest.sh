#!/bin/bash
# Guest half of bench/xftp-verbs.sh, run by tests/vm/boot.sh: on one soft-RoCE device
# (rxe0 on a dummy netdev, both ends on 198.18.0.1) it alternates blast -x verbs at 4 MiB
# messages (the channel's ceiling) with xftp -x verbs put and get of a file of MIB MiB
# through xftpd between tmpfs stores, and xftp over TCP to the same address, RUNS times.
# One line per case and run goes to $DS_VM_WORK/results.tsv: case, MB/s (10^6 B/s), run
# number, resends (completer_retry_err: ACK timeouts) since the case before, and the guest's
# CPU seconds per GB moved (all CPUs, not idle: soft-RoCE's transport is the kernel's and
# shows here, in neither process; from before the case's set-up, xftp's login or the
# sink's start, to its end).
# blast sends for 5 s and the sink's figure counts (first to last arrival); xftp's is its
# own, from the data channel's set-up to the server's 226 (and the file's sync). Every put
# and get makes a new file: the get's copy and the store's are removed after the get, so no
# transfer pays for freeing the last run's 256 MB (0.17 s in this guest), which blast never
# does. With DS_BIN_B naming a second build, its xftp and xftpd (a server of their own) put
# and get over verbs in every run too, beside the first build's: cases put-verbs-b and
# get-verbs-b, for a change measured side by side in one boot.
#   boot.sh --mem 3G bench/xftp-verbs.guest.sh RUNS MIB
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=../tests/vm/guest-lib.sh
. "$here/../tests/vm/guest-lib.sh"
ds_vm_bench_rxe "$0 RUNS MIB"
bin=${DS_BIN:?DS_BIN must name the folder of the built tools}
runs=${1:?usage: $0 RUNS MIB}
mib=${2:?usage: $0 RUNS MIB}
ip=$DS_RXE_IP
limit=$((60 + mib)) # every transfer's time limit: a lost one fails the bench, never hangs it

cd "$TMPDIR"
mkdir -p root
chown nobody root
printf 'pw\n' | "$bin/xftpd" --add-user users t >/dev/null
timeout $((runs * 6 * limit)) "$bin/xftpd" -p 2121 --listen "$ip" --root root --users users \
	--run-as nobody 2>"$logs/xftpd.log" &
xftpd_pid=$!
bin_b=${DS_BIN_B:-}
xftpd_b_pid=
if [ -n "$bin_b" ]; then
	mkdir -p root-b
	chown nobody root-b
	timeout $((runs * 8 * limit)) "$bin_b/xftpd" -p 2122 --listen "$ip" --root root-b \
		--users users --run-as nobody 2>"$logs/xftpd-b.log" &
	xftpd_b_pid=$!
fi
sink_pid= # the blast run's sink, while it runs
trap 'kill "$xftpd_pid" $xftpd_b_pid $sink_pid 2>/dev/null || true' EXIT
ds_vm_wait_tcp 2121 || ds_vm_die "xftpd did not listen"
[ -z "$bin_b" ] || ds_vm_wait_tcp 2122 || ds_vm_die "the second build's xftpd did not listen"
url=ftp://t:pw@$ip:2121
head -c $((mib * 1048576)) /dev/urandom >src

# Packets soft-RoCE sent again after an ACK timeout (67 ms each): a case's figure pays for
# them, so each row counts its own, from the port's counter before and after.
retry_counter=/sys/class/infiniband/rxe0/ports/1/hw_counters/completer_retry_err
resends_before=$(cat "$retry_counter")

busy_ticks() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 }' /proc/stat; } # not idle, iowait nor steal
hz=$(getconf CLK_TCK)

# record CASE MB_PER_S BYTES TICKS: the figure, the case's resends, and its CPU seconds per
# GB from the busy TICKS it took for BYTES.
record() {
	local now cpu
	now=$(cat "$retry_counter")
	cpu=$(awk -v t="$4" -v b="$3" -v hz="$hz" 'BEGIN { printf "%.1f", t / hz / (b / 1e9) }')
	printf '%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$run" "$((now - resends_before))" "$cpu" >>"$results"
	printf 'run %s/%s: %-12s %8.1f MB/s  %3s resends  %5s CPU s/GB\n' "$run" "$runs" "$1" "$2" \
		"$((now - resends_before))" "$cpu"
	resends_before=$now
}

# A sink of its own for each blast, so that none polls for a connection while xftp runs
# (under TCG an idle sink took 2.5% of the guest's samples). --idle 10: on soft-RoCE in
# this guest, under load, a blast's first message has come 3 s late.
blast_run() {
	local name=$logs/blast-$run ticks
	ticks=$(busy_ticks)
	timeout "$limit" "$bin/sink" -x verbs -B "$ip" -p 5050 --idle 10 --once --json \
		>"$name.sink.json" 2>"$name.sink.err" &
	sink_pid=$!
	ds_vm_wait_rdma_cm 5050 || ds_vm_die "sink did not listen: $(cat "$name.sink.err")"
	timeout "$limit" "$bin/blast" -x verbs -p 5050 -l 4M -w 5 --json "$ip" \
		>"$name.json" 2>"$name.err" || ds_vm_die "blast: $(cat "$name.err" "$name.sink.err")"
	wait "$sink_pid" || ds_vm_die "sink: $(cat "$name.sink.err")"
	ticks=$(($(busy_ticks) - ticks))
	sink_pid=
	record blast "$(jq -r '.sink.MB_per_s' "$name.json")" "$(jq -r '.sink.bytes' "$name.json")" \
		"$ticks"
}

# xftp_run LINK OP: one put (src to the store) or get (back again), its own figure.
# xftp_run LINK OP [b]: with b, the second build against its own xftpd.
xftp_run() {
	local link=$1 op=$2 b=${3:-} name=$logs/xftp-$1-$2${3:+-b}-$run args xbin=$bin at=$url store=root
	local ticks
	[ -z "$b" ] || xbin=$bin_b at=ftp://t:pw@$ip:2122 store=root-b
	if [ "$op" = put ]; then args=(put src "$at/f"); else args=(get "$at/f" back); fi
	ticks=$(busy_ticks)
	timeout "$limit" "$xbin/xftp" -x "$link" --json "${args[@]}" >"$name.json" 2>"$name.err" ||
		ds_vm_die "xftp -x $link $op${b:+ (second build)}: $(cat "$name.err")"
	ticks=$(($(busy_ticks) - ticks))
	[ "$op" = put ] || { cmp -s src back || ds_vm_die "xftp -x $link get: the bytes differ"; }
	[ "$op" = put ] || rm -f back "$store/f"
	record "$op-$link${b:+-b}" "$(jq -r '.MB_per_s' "$name.json")" $((mib * 1048576)) "$ticks"
}

# The verbs put and get of each build, the first build first in odd runs.
verbs_runs() {
	local builds=(a b) which
	((run % 2)) || builds=(b a)
	for which in "${builds[@]}"; do
		[ "$which" = a ] || [ -n "$bin_b" ] || continue
		xftp_run verbs put "${which/a/}"
		xftp_run verbs get "${which/a/}"
	done
}

for ((run = 1; run <= runs; run++)); do
	# Who goes first alternates, so drift in the host's load favours neither.
	if ((run % 2)); then
		blast_run
		verbs_runs
		xftp_run tcp put
		xftp_run tcp get
	else
		xftp_run tcp put
		xftp_run tcp get
		verbs_runs
		blast_run
	fi
done
echo "bench: done"
