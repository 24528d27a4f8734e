#!/bin/bash
# Guest script for boot.sh --disks 4 --disk-bps B: striped put/get across the throttled
# disks read back exact, and striping keeps every disk busy at once.
# Rates are measured with data checksums on, as stripe runs by default.
#   (no argument)  CI: small files; striped sequential rates must be >= 2x one disk's (a
#                  serial engine cannot pass; the best of three runs, because a TCG guest's
#                  CPU slows with the host's load and 24 MiB moves in a fraction of a second)
#   --bench        the issue's Bar: 256 MiB files; striped >= 3.6x one disk, and a one-disk
#                  stripe >= 0.95x dd O_DIRECT 1 MiB on that disk, write and read
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=guest-lib.sh
. "$here/guest-lib.sh"
[ -n "${DS_VM_DISKS:-}" ] || ds_vm_die "no disks: boot with --disks 4 $0"
stripe=$DS_BIN/stripe
mode=${1:-ci}
IFS=, read -ra dirs <<<"$DS_VM_DISKS"
[ "${#dirs[@]}" -ge 2 ] || ds_vm_die "needs at least 2 disks, got $DS_VM_DISKS"

# Exact round trips over all disks and over one, sizes around the unit edges.
for size in 0 1 1048575 1048577 $((9 * 1048576 + 12345)); do
	head -c "$size" /dev/urandom >"$TMPDIR/src"
	"$stripe" put "$TMPDIR/src" "$DS_VM_DISKS" f >/dev/null 2>&1
	"$stripe" get "$DS_VM_DISKS" f "$TMPDIR/back" >/dev/null 2>&1
	cmp "$TMPDIR/src" "$TMPDIR/back" || ds_vm_die "size $size over $DS_VM_DISKS differs"
	"$stripe" verify --data "$DS_VM_DISKS" f >/dev/null || ds_vm_die "verify --data, size $size"
	"$stripe" rm "$DS_VM_DISKS" f
done
echo "ok: put/get/verify exact over ${#dirs[@]} disks"

# Slow disks, big units: SIGTERM mid-put and SIGINT mid-get end stripe within 2 s with the
# report marked interrupted, no segment, the old file whole, no temporary member left.
head -c $((48 << 20)) /dev/urandom >"$TMPDIR/old"
head -c $((400 << 20)) /dev/urandom >"$TMPDIR/new"
"$stripe" put -u 8M "$TMPDIR/old" "$DS_VM_DISKS" sig >/dev/null
# stop_mid_run SIGNAL EXPECTED CMD...: starts CMD, signals it once data flows, checks.
stop_mid_run() {
	local sig=$1 want=$2 pid status=0 t0 t1
	shift 2
	"$@" >"$TMPDIR/sig.json" 2>"$TMPDIR/sig.err" &
	pid=$!
	for _ in $(seq 400); do
		[ -e "/dev/shm/dragstrip.$pid" ] && break
		sleep 0.05
	done
	sleep 0.5 # into the transfer: 400 MiB take at least 2 s on four 50 MB/s disks
	t0=$(date +%s%N)
	kill -"$sig" "$pid"
	wait "$pid" || status=$?
	t1=$(date +%s%N)
	[ "$status" = "$want" ] || ds_vm_die "SIG$sig mid-run: exit $status: $(cat "$TMPDIR/sig.err")"
	[ $(((t1 - t0) / 1000000)) -lt 2000 ] || ds_vm_die "SIG$sig mid-run: exit took $(((t1 - t0) / 1000000)) ms"
	[ ! -e "/dev/shm/dragstrip.$pid" ] || ds_vm_die "SIG$sig mid-run: segment left"
	jq -e '.interrupted == true' "$TMPDIR/sig.json" >/dev/null || ds_vm_die "SIG$sig: report $(cat "$TMPDIR/sig.json")"
	echo "ok: SIG$sig mid-run on slow disks: exit $status after $(((t1 - t0) / 1000000)) ms"
}
stop_mid_run TERM 143 "$stripe" put --json -f -u 8M "$TMPDIR/new" "$DS_VM_DISKS" sig
"$stripe" get "$DS_VM_DISKS" sig "$TMPDIR/back" >/dev/null 2>&1
cmp -s "$TMPDIR/back" "$TMPDIR/old" || ds_vm_die "the old file is not whole after an interrupted put -f"
for d in "${dirs[@]}"; do
	! ls -A "$d" | grep -q '^\.dstmp\.' || ds_vm_die "temporary member left in $d"
done
cp "$TMPDIR/old" "$TMPDIR/dest"
"$stripe" put -f -u 8M "$TMPDIR/new" "$DS_VM_DISKS" sig >/dev/null 2>&1
stop_mid_run INT 130 "$stripe" get --json "$DS_VM_DISKS" sig "$TMPDIR/dest"
cmp -s "$TMPDIR/dest" "$TMPDIR/old" || ds_vm_die "an interrupted get changed its existing DEST"
"$stripe" rm "$DS_VM_DISKS" sig >/dev/null
rm -f "$TMPDIR/old" "$TMPDIR/new" "$TMPDIR/dest" "$TMPDIR/back"

if [ "$mode" = --bench ]; then
	size=256M mib=256 min_speedup=3.6 tries=1
else
	size=24M mib=24 min_speedup=2 tries=3
fi
for ((try = 1; try <= tries; try++)); do
	"$stripe" bench --json -s "$size" "$DS_VM_DISKS" 2>/dev/null >"$TMPDIR/bench.json"
	cat "$TMPDIR/bench.json"
	w=$(jq .write_speedup "$TMPDIR/bench.json")
	r=$(jq .read_speedup "$TMPDIR/bench.json")
	awk -v w="$w" -v r="$r" -v m="$min_speedup" 'BEGIN { exit !(w >= m && r >= m) }' && break
done
crc=$(jq -r .crc32c "$TMPDIR/bench.json")
echo "striped over ${#dirs[@]} / one disk, checksums by $crc: write ${w}x read ${r}x (need >= ${min_speedup}x)"

# dd O_DIRECT 1 MiB on disk 0, against the one-disk stripe of the same size.
now() { date +%s.%N; }
t0=$(now)
dd if=/dev/zero of="${dirs[0]}/dd" bs=1M count="$mib" oflag=direct status=none
t1=$(now)
dd if="${dirs[0]}/dd" of=/dev/null bs=1M iflag=direct status=none
t2=$(now)
rm -f "${dirs[0]}/dd"
dd_w=$(awk -v m="$mib" -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", m * 1048576 / (b - a) / 1e6 }')
dd_r=$(awk -v m="$mib" -v a="$t1" -v b="$t2" 'BEGIN { printf "%.1f", m * 1048576 / (b - a) / 1e6 }')
s_w=$(jq .disk0.write_MB_per_s "$TMPDIR/bench.json")
s_r=$(jq .disk0.read_MB_per_s "$TMPDIR/bench.json")
vs_w=$(awk -v a="$s_w" -v b="$dd_w" 'BEGIN { printf "%.3f", a / b }')
vs_r=$(awk -v a="$s_r" -v b="$dd_r" 'BEGIN { printf "%.3f", a / b }')
echo "one-disk stripe / dd: write $s_w / $dd_w MB/s = $vs_w, read $s_r / $dd_r MB/s = $vs_r"
cat >"$DS_VM_WORK/stripe-disks.result" <<RESULT
mode=$mode disks=${#dirs[@]} bps=${DS_VM_DISK_BPS:-none} size=$size
striped_speedup write=$w read=$r crc32c=$crc
one_disk_vs_dd write=$vs_w read=$vs_r (stripe $s_w/$s_r MB/s, dd $dd_w/$dd_r MB/s)
RESULT

awk -v w="$w" -v r="$r" -v m="$min_speedup" 'BEGIN { exit !(w >= m && r >= m) }' ||
	ds_vm_die "striping over ${#dirs[@]} disks gave write ${w}x read ${r}x, need ${min_speedup}x"
if [ "$mode" = --bench ]; then
	awk -v w="$vs_w" -v r="$vs_r" 'BEGIN { exit !(w >= 0.95 && r >= 0.95) }' ||
		ds_vm_die "one-disk stripe is write ${vs_w}x read ${vs_r}x of dd, need 0.95x"
fi
echo "PASS: stripe over throttled disks"
