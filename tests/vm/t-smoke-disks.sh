#!/bin/bash
# Guest script for boot.sh --disks N [--disk-bps B]: the throttled virtio disks
# are mounted where $DS_VM_DISKS says, take O_DIRECT writes in parallel, and
# qemu's throttle caps each one.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=guest-lib.sh
. "$here/guest-lib.sh"
[ -n "${DS_VM_WORK:-}" ] || ds_vm_die "run me inside the VM: tests/vm/boot.sh --disks 2 $0"
[ -n "${DS_VM_DISKS:-}" ] || ds_vm_die "no disks: boot with --disks N"

IFS=, read -ra dirs <<<"$DS_VM_DISKS"
[ "${#dirs[@]}" = "$DS_VM_DISK_COUNT" ] ||
	ds_vm_die "DS_VM_DISKS names ${#dirs[@]} dirs, boot.sh attached $DS_VM_DISK_COUNT disks"
bps=${DS_VM_DISK_BPS:-}
# About 3 s of writing per disk at the throttle; 64 MiB when unthrottled.
mib=64
if [ -n "$bps" ]; then
	mib=$((bps * 3 / 1048576))
	[ "$mib" -ge 8 ] || mib=8
	[ "$mib" -le 256 ] || mib=256
fi

for d in "${dirs[@]}"; do
	[ "$(findmnt -n -o FSTYPE --target "$d")" = ext4 ] || ds_vm_die "$d is not an ext4 mount"
done

now() { date +%s.%N; }
for i in "${!dirs[@]}"; do
	(
		t0=$(now)
		dd if=/dev/zero of="${dirs[$i]}/smoke" bs=1M count="$mib" oflag=direct conv=fsync status=none
		t1=$(now)
		echo "$t0 $t1" >"$TMPDIR/disk$i.times"
	) &
done
wait

total=0
for i in "${!dirs[@]}"; do
	f=${dirs[$i]}/smoke
	[ -f "$f" ] || ds_vm_die "$f was not written"
	size=$(stat -c %s "$f")
	[ "$size" = $((mib * 1048576)) ] || ds_vm_die "$f has $size bytes, wanted $((mib * 1048576))"
	read -r t0 t1 <"$TMPDIR/disk$i.times"
	rate=$(awk -v b="$size" -v t0="$t0" -v t1="$t1" 'BEGIN { printf "%.1f", b / (t1 - t0) / 1e6 }')
	total=$(awk -v a="$total" -v b="$rate" 'BEGIN { print a + b }')
	echo "disk$i ${dirs[$i]}: $mib MiB O_DIRECT in $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }') s = $rate MB/s${bps:+ (throttle $(awk -v b="$bps" 'BEGIN { print b / 1e6 }') MB/s)}"
	if [ -n "$bps" ]; then
		awk -v r="$rate" -v b="$bps" 'BEGIN { exit !(r * 1e6 < 2 * b) }' ||
			ds_vm_die "disk$i wrote at $rate MB/s, more than twice its throttle of $bps B/s"
	fi
done
echo "all ${#dirs[@]} disks in parallel: $total MB/s"
echo "$DS_VM_DISKS $total MB/s" >"$DS_VM_WORK/smoke-disks.result"
echo "PASS: throttled disks"
