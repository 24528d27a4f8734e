#!/bin/bash
# Guest script for boot.sh: blast and sink over the verbs link on soft-RoCE (rxe0 on a
# dummy netdev, both ends on 198.18.0.1). One boot runs every case: each op (write, the
# default; send; read) with --verify, two QPs, completion events, messages small enough
# to go inline; then the errors a user meets (no sink, no RDMA route) must be one line
# and a non-zero exit, never a hang. Counts come from --json on both ends.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=guest-lib.sh
. "$here/guest-lib.sh"
[ -n "${DS_VM_WORK:-}" ] || ds_vm_die "run me inside the VM: tests/vm/boot.sh $0"
bin=${DS_BIN:?DS_BIN must name the folder of the built tools}
command -v jq >/dev/null || ds_vm_die "jq is not installed"

ds_vm_rxe_up d0 198.18.0.1/24 || ds_vm_die "soft-RoCE set-up"
ip=$DS_RXE_IP
logs=$TMPDIR
port=5050

show_logs() {
	local f
	for f in "$logs"/"$1".*; do
		echo "--- $f:"
		cat "$f"
	done
}

# check NAME FILE JQ: FILE's JSON satisfies JQ, or the case fails.
check() {
	jq -e "$3" "$2" >/dev/null || {
		show_logs "$1"
		ds_vm_die "$1: $2 does not satisfy $3"
	}
}

# run_case NAME COUNT SIZE STREAMS [SINK OPTS] -- [BLAST OPTS]: one run of sink --once
# and blast; both must exit 0 and agree on every message and byte, with no fault.
run_case() {
	local name=$1 count=$2 size=$3 streams=$4 bytes sink_pid st=0 sst=0
	shift 4
	local sink_opts=()
	while [ "$1" != -- ]; do
		sink_opts+=("$1")
		shift
	done
	shift
	bytes=$((count * $(numfmt --from=iec "$size")))
	port=$((port + 1))
	timeout 60 "$bin/sink" -x verbs -B "$ip" -p "$port" --once --json "${sink_opts[@]}" \
		>"$logs/$name.sink.json" 2>"$logs/$name.sink.err" &
	sink_pid=$!
	ds_vm_wait_rdma_cm "$port" || {
		kill "$sink_pid" 2>/dev/null || true
		show_logs "$name"
		ds_vm_die "$name: sink did not listen"
	}
	timeout 60 "$bin/blast" -x verbs -p "$port" -n "$count" -l "$size" -q "$streams" --json \
		"$@" "$ip" >"$logs/$name.blast.json" 2>"$logs/$name.blast.err" || st=$?
	wait "$sink_pid" || sst=$?
	if [ "$st" != 0 ] || [ "$sst" != 0 ]; then
		show_logs "$name"
		ds_vm_die "$name: blast exited $st, sink $sst"
	fi
	local faults='[.errors[]] | all(. == 0)'
	check "$name" "$logs/$name.blast.json" \
		".messages == $count and .bytes == $bytes and ($faults)
		 and .sink.messages == $count and .sink.bytes == $bytes and (.sink | $faults)"
	check "$name" "$logs/$name.sink.json" \
		".messages == $count and .bytes == $bytes and ($faults)
		 and .streams == $streams and .aborted == false"
	echo "ok: $name: $count x $size, $(jq -r '.Gbit_per_s * 1000 | floor' "$logs/$name.blast.json") Mbit/s"
}

run_case write 300 64K 1 -- -2 --verify
run_case send 300 64K 1 -- --op send --verify
run_case read 300 64K 1 -- --op read --verify
run_case two-qps 400 64K 2 -- --verify
run_case events 300 64K 1 --events -- --events --verify
run_case inline-write 3000 64 1 -- --verify
run_case inline-send 3000 64 1 -- --op send --verify
run_case read-odd-size 200 100000 1 -- --op read --verify

# Every option the link sets on its rdma_cm ids (the ACK timeout) must be one the kernel
# takes: a refused one shows only in the system call's answer, as the link works on
# without it. Both ends' writes to rdma_cm are traced; none may be refused as unknown.
options_case() {
	local sink_pid st=0
	port=$((port + 1))
	timeout 60 strace -f -qq -e trace=write -e status=failed -o "$logs/options.sink.strace" \
		"$bin/sink" -x verbs -B "$ip" -p "$port" --once --json >"$logs/options.sink.json" \
		2>"$logs/options.sink.err" &
	sink_pid=$!
	ds_vm_wait_rdma_cm "$port" || ds_vm_die "options: sink did not listen"
	timeout 60 strace -f -qq -e trace=write -e status=failed -o "$logs/options.blast.strace" \
		"$bin/blast" -x verbs -p "$port" -n 10 -l 64K "$ip" >"$logs/options.blast.out" \
		2>"$logs/options.blast.err" || st=$?
	wait "$sink_pid" || st=$((st + 1))
	[ "$st" = 0 ] || { show_logs options; ds_vm_die "options: blast or sink failed"; }
	if grep -E '= -1 (ENOSYS|EINVAL|ENOPROTOOPT)' "$logs"/options.*.strace; then
		ds_vm_die "options: the kernel refused an option the verbs link set (above)"
	fi
	echo "ok: options: every rdma_cm option taken on both ends"
}
options_case

# expect_error NAME PATTERN CMD...: CMD fails within its time limit with one line on
# stderr that matches PATTERN.
expect_error() {
	local name=$1 pattern=$2 st=0
	shift 2
	timeout 30 "$@" >"$logs/$name.out" 2>"$logs/$name.err" || st=$?
	if [ "$st" = 0 ] || [ "$st" = 124 ]; then
		ds_vm_die "$name: exit status $st, wanted a failure within the time limit"
	fi
	if [ "$(wc -l <"$logs/$name.err")" != 1 ] || ! grep -Eq "$pattern" "$logs/$name.err"; then
		cat "$logs/$name.err"
		ds_vm_die "$name: wanted one line matching '$pattern'"
	fi
	echo "ok: $name: $(cat "$logs/$name.err")"
}

expect_error no-sink '^blast: nobody is receiving on [0-9.]+ port 5999: Connection refused$' "$bin/blast" -x verbs -p 5999 -n 10 "$ip"
expect_error no-route 'rdma_resolve_addr' "$bin/blast" -x verbs --timeout 2 -n 10 203.0.113.1
echo "PASS: blast/sink over verbs"
