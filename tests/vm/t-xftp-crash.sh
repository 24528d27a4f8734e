#!/bin/bash
# xftpd's uploads across a crash of the machine: while xftp -r put streams a tree into
# xftpd's store on an ext4 disk (or btrfs or XFS, made in a file on it and mounted through a
# loop device that writes straight to it), the guest kernel is stopped dead (sysrq b: no sync, no
# unmount, the page cache lost). A second boot on the same disk image then finds every file
# under its final name whole, byte for byte the source's, and the files of every directory
# sync paid before the crash there (docs/xftp.md: a name is made only over data on the
# disk). On the host it boots the VM twice on one disk image and runs itself in each:
#   DS_BIN=build/bin t-xftp-crash.sh VM-CACHE WORKDIR [ext4|btrfs|xfs]   (host)
#   t-xftp-crash.sh write | check                                         (guest, through boot.sh)
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

if [ -z "${DS_VM_WORK:-}" ]; then
	cache=${1:?usage: $0 VM-CACHE WORKDIR}
	work=${2:?usage: $0 VM-CACHE WORKDIR [ext4|btrfs|xfs]}
	fs=${3:-ext4}
	case $fs in
	ext4) ;;
	btrfs | xfs) command -v "mkfs.$fs" >/dev/null || { echo "FAIL: mkfs.$fs not found" >&2; exit 1; } ;;
	*) echo "FAIL: no file system '$fs' (ext4, btrfs, xfs)" >&2; exit 1 ;;
	esac
	rm -rf "$work"
	mkdir -p "$work"
	boot=("$here/boot.sh" --cache "$cache" --disks 1 --disk-dir "$work/disks" --mem 2G
		--timeout 300 --env "DS_CRASH_FS=$fs")
	status=0
	"${boot[@]}" --workdir "$work/write" "$0" write || status=$?
	[ -f "$work/write/crashing" ] ||
		{ echo "FAIL: the first boot ended before its crash (boot.sh exit $status)" >&2; exit 1; }
	# No exit status from a kernel stopped dead: boot.sh says so with 125.
	[ "$status" = 125 ] || { echo "FAIL: boot.sh exit $status after the crash, not 125" >&2; exit 1; }
	echo "crashed with $(cat "$work/write/crashing") files under their final names"
	"${boot[@]}" --workdir "$work/check" "$0" check
	rm -rf "$work/disks" # 1 GiB sparse; the guests' logs stay
	exit 0
fi

# shellcheck source-path=SCRIPTDIR source=guest-lib.sh
. "$here/guest-lib.sh"
base=${DS_VM_DISKS%%,*}
[ -n "$base" ] || ds_vm_die "needs a disk (boot.sh --disks 1)"
src=$base/src
disk=$base # where the store lives
fs=${DS_CRASH_FS:-ext4}
if [ "$fs" != ext4 ]; then
	# A file of written blocks, so that the loop device's direct writes need no metadata of
	# the ext4 under it: what the guest wrote before the crash is on the image.
	image=$base/$fs.img
	if [ "${1:-}" = write ]; then
		dd if=/dev/zero of="$image" bs=1M count=600 oflag=direct status=none
		sync
	fi
	ds_vm_modprobe loop 2>/dev/null || true
	ds_vm_modprobe "$fs" 2>/dev/null || true
	loop=$(losetup --direct-io=on -f --show "$image") || ds_vm_die "no loop device"
	if [ "${1:-}" = write ]; then
		"mkfs.$fs" -q -f "$loop" >/dev/null || ds_vm_die "mkfs.$fs failed"
	fi
	disk=/run/xftp-crash
	mkdir -p "$disk"
	mount "$loop" "$disk" || ds_vm_die "cannot mount $fs"
fi
dirs=4 per_dir=100 # files of 64 KiB (through the page cache), and two of 3 MiB (O_DIRECT)
final_names() {    # the uploads under their final names (".xftpd-" names are partials)
	{ find "$disk/s/dst" -type f ! -name '.xftpd-*' 2>/dev/null || true; } | sort
}

case ${1:-} in
write)
	store=$(ds_vm_store_roots "$disk") || ds_vm_die "the store's root"
	for ((d = 0; d < dirs; d++)); do
		mkdir -p "$src/d$d"
		head -c $((per_dir * 65536)) /dev/urandom | split -b 64K -d -a 3 - "$src/d$d/f"
		head -c $((2 * 3145728)) /dev/urandom | split -b 3M -d -a 1 - "$src/d$d/big"
	done
	sync # the source outlives the crash
	printf 'pw\n' | "$DS_BIN/xftpd" --add-user "$TMPDIR/users" t >/dev/null
	"$DS_BIN/xftpd" -p 2121 --listen 127.0.0.1 --root "$store" --users "$TMPDIR/users" \
		--run-as nobody 2>"$DS_VM_WORK/xftpd.log" &
	ds_vm_wait_tcp 2121 || ds_vm_die "xftpd did not listen"
	"$DS_BIN/xftp" -q -r put "$src" ftp://t:pw@127.0.0.1:2121/dst 2>"$DS_VM_WORK/xftp.err" &
	put=$!
	# The crash comes with uploads under way: well into the tree, and long before its end.
	want=$((dirs * per_dir / 2))
	shopt -s nullglob # a glob, not find: the watch must be quick (a partial's dot hides it)
	while kill -0 "$put" 2>/dev/null; do
		in=("$disk"/s/dst/d*/*)
		n=${#in[@]}
		if [ "$n" -ge "$want" ]; then
			echo "$n" >"$DS_VM_WORK/crashing"
			echo 1 >/proc/sys/kernel/sysrq
			echo b >/proc/sysrq-trigger
		fi
		sleep 0.02
	done
	ds_vm_die "the put ended before $want files were in: $(cat "$DS_VM_WORK/xftp.err")"
	;;
check)
	final_names >"$TMPDIR/names"
	n=$(wc -l <"$TMPDIR/names")
	while IFS= read -r f; do
		rel=${f#"$disk/s/dst/"}
		cmp -s "$f" "$src/$rel" ||
			ds_vm_die "$rel: under its final name after the crash, but not whole: $(stat -c %s "$f") bytes, $(stat -c %s "$src/$rel") sent"
	done <"$TMPDIR/names"
	# A session syncs its directory before its first upload into another one and within
	# 0.5 s of a run's first rename: of the half of the tree in at the crash, all but the
	# last half second's (about 50-75 files here) outlive it, so the check has work.
	[ "$n" -ge $((per_dir / 2)) ] || ds_vm_die "only $n files outlived the crash: no directory sync came before it"
	partials=$(find "$disk/s/dst" -type f -name '.xftpd-*' | wc -l)
	echo "PASS: $n files under their final names after the crash, each whole ($partials partials kept)"
	;;
*) ds_vm_die "usage: $0 write | check (in the VM), or $0 VM-CACHE WORKDIR (on the host)" ;;
esac
