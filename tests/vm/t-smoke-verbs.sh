#!/bin/bash
# Guest script for boot.sh: soft-RoCE works in the test VM. ibv_rc_pingpong
# (RC QP, GIDs exchanged over TCP) and a short ib_write_bw over RDMA CM, both
# through rxe0 on a dummy netdev at 198.18.0.1.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=guest-lib.sh
. "$here/guest-lib.sh"
[ -n "${DS_VM_WORK:-}" ] || ds_vm_die "run me inside the VM: tests/vm/boot.sh $0"

ds_vm_rxe_up d0 198.18.0.1/24 || ds_vm_die "soft-RoCE set-up"
echo "rxe: $DS_RXE_DEV on $DS_RXE_NETDEV, $DS_RXE_IP, GID index $DS_RXE_GID_INDEX"
logs=$TMPDIR

# Run a server in the background and its client in the foreground, each with
# a time limit so that a stuck peer fails the test instead of hanging it.
# usage: pair NAME WAIT_CMD -- SERVER... -- CLIENT...
pair() {
	local name=$1 wait_cmd=$2 spid st=0 sst=0
	shift 3
	local server=()
	while [ "$1" != -- ]; do
		server+=("$1")
		shift
	done
	shift
	timeout 60 "${server[@]}" >"$logs/$name-server.log" 2>&1 &
	spid=$!
	if $wait_cmd; then
		timeout 60 "$@" >"$logs/$name-client.log" 2>&1 || st=$?
	else
		st="no server"
		kill "$spid" 2>/dev/null || true
	fi
	wait "$spid" || sst=$?
	[ "$st" != 0 ] || st=$sst
	if [ "$st" != 0 ]; then
		echo "--- $name server:"
		cat "$logs/$name-server.log"
		echo "--- $name client:"
		cat "$logs/$name-client.log" 2>/dev/null || true
		ds_vm_die "$name exited $st"
	fi
}

g=$DS_RXE_GID_INDEX
pair ibv_rc_pingpong "ds_vm_wait_tcp 18515" \
	-- ibv_rc_pingpong -d rxe0 -g "$g" -p 18515 \
	-- ibv_rc_pingpong -d rxe0 -g "$g" -p 18515 127.0.0.1
line=$(grep 'bytes in' "$logs/ibv_rc_pingpong-client.log") || ds_vm_die "ibv_rc_pingpong printed no result"
echo "ibv_rc_pingpong: $line"

bw=(ib_write_bw -d rxe0 -R -s 65536 -D 2 -F --report_gbits)
pair ib_write_bw "ds_vm_wait_rdma_cm 18515" -- "${bw[@]}" -- "${bw[@]}" "$DS_RXE_IP"
# The result line follows the "#bytes #iterations BW peak BW average MsgRate" header.
line=$(awk '/#bytes/ { getline; print; exit }' "$logs/ib_write_bw-client.log")
read -r bytes iters _ avg _ <<<"$line" || true
awk -v i="${iters:-0}" -v a="${avg:-0}" 'BEGIN { exit !(i > 0 && a > 0) }' ||
	ds_vm_die "ib_write_bw moved nothing: '$line'"
echo "ib_write_bw: ${bytes} B messages, ${iters} iterations in 2 s, ${avg} Gbit/s average (RDMA CM, rxe0)"
echo "PASS: soft-RoCE verbs"
