#!/bin/bash
# Guest half of bench/stripe-vs-md.sh (boot.sh --disks 4 --disk-bps B): stripe put and get
# with data checksums on over the four ext4 disks, against the kernel's md RAID-0 (no
# checksums) on the same four disks, ext4 on the array, dd O_DIRECT with fsync. Each
# writes SIZE MiB from tmpfs and reads it back to /dev/null. ORDER says who goes first.
# Appends "tool<TAB>op<TAB>MB/s" lines to $DS_VM_WORK/results.tsv. DS_BENCH_STRIPE_B, if set,
# names a second stripe binary measured in the same boot (tool "stripeB"), for A/B runs.
#   stripe-vs-md.guest.sh SIZE_MIB ORDER(stripe-first|md-first)
set -euo pipefail
. "$DS_SRC/tests/vm/guest-lib.sh"
mib=$1 order=$2
stripe=$DS_BIN/stripe
out=$DS_VM_WORK/results.tsv
IFS=, read -ra dirs <<<"$DS_VM_DISKS"
[ "${#dirs[@]}" = 4 ] || ds_vm_die "needs 4 disks, got $DS_VM_DISKS"
devs=()
for d in "${dirs[@]}"; do devs+=("$(findmnt -n -o SOURCE "$d")"); done
head -c $((mib << 20)) /dev/urandom >"$TMPDIR/src"

# fresh_ext4: an ext4 on each disk, mounted where it was.
fresh_ext4() {
	local d
	for d in "${!dirs[@]}"; do
		mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0 "${devs[$d]}"
		mount -o noatime "${devs[$d]}" "${dirs[$d]}"
	done
}

rate() { awk -v b="$1" -v a="$2" -v c="$3" 'BEGIN { printf "%.1f", b / (c - a) / 1e6 }'; }
now() { date +%s.%N; }

# run_stripe [BINARY LABEL]: put and get with the stripe under test (or another build).
run_stripe() {
	local bin=${1:-$stripe} label=${2:-stripe} j
	# stderr to a file: on the console (a terminal) stripe would draw its progress line
	"$bin" put --json "$TMPDIR/src" "$DS_VM_DISKS" f >"$TMPDIR/put.json" 2>"$TMPDIR/put.err"
	"$bin" get --json "$DS_VM_DISKS" f /dev/null >"$TMPDIR/get.json" 2>"$TMPDIR/get.err"
	for j in put get; do
		jq -e '.MB_per_s > 0 and (.interrupted | not)' "$TMPDIR/$j.json" >/dev/null ||
			ds_vm_die "$label $j: $(cat "$TMPDIR/$j.json" "$TMPDIR/$j.err")"
		printf '%s\t%s\t%s\n' "$label" "$j" "$(jq .MB_per_s "$TMPDIR/$j.json")" >>"$out"
	done
	"$stripe" verify --data "$DS_VM_DISKS" f >/dev/null || ds_vm_die "stripe verify --data failed"
	"$stripe" rm "$DS_VM_DISKS" f >/dev/null
}

run_md() {
	local d t0 t1 t2 bytes=$((mib << 20))
	for d in "${dirs[@]}"; do umount "$d"; done
	ds_vm_modprobe raid0
	mdadm --create /dev/md0 --run --force --level=0 --chunk=1024 --raid-devices=4 "${devs[@]}" \
		>/dev/null 2>&1 || ds_vm_die "mdadm --create failed"
	mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0 /dev/md0
	mkdir -p /run/dsvm/md
	mount -o noatime /dev/md0 /run/dsvm/md
	t0=$(now)
	dd if="$TMPDIR/src" of=/run/dsvm/md/f bs=4M oflag=direct conv=fsync status=none
	t1=$(now)
	dd if=/run/dsvm/md/f of=/dev/null bs=4M iflag=direct status=none
	t2=$(now)
	printf 'md\tput\t%s\nmd\tget\t%s\n' "$(rate "$bytes" "$t0" "$t1")" "$(rate "$bytes" "$t1" "$t2")" >>"$out"
	umount /run/dsvm/md
	mdadm --stop /dev/md0 >/dev/null 2>&1
	for d in "${devs[@]}"; do mdadm --zero-superblock "$d" >/dev/null 2>&1 || true; done
	fresh_ext4
}

# The disk images start sparse: the first write to each block costs the host an
# allocation. Whoever wrote first would pay it; write every block once before timing.
for d in "${dirs[@]}"; do umount "$d"; done
for d in "${devs[@]}"; do dd if=/dev/zero of="$d" bs=4M oflag=direct status=none 2>/dev/null & done
wait
fresh_ext4

# DS_BENCH_STRIPE_B names another stripe binary to measure beside (label stripeB).
other=${DS_BENCH_STRIPE_B:-}
if [ "$order" = md-first ]; then
	run_md
	run_stripe
	[ -z "$other" ] || run_stripe "$other" stripeB
else
	[ -z "$other" ] || run_stripe "$other" stripeB
	run_stripe
	run_md
fi
echo "ok: stripe and md, $mib MiB, $order"
