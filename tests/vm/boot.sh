#!/bin/bash
# boot.sh [options] SCRIPT [ARGS...]: run SCRIPT inside the dragstrip test VM.
#
# The VM is Debian's kernel under qemu TCG with the host's / shared read-only,
# so SCRIPT, the build tree and every host tool keep their host paths. The
# guest console streams to stdout; boot.sh exits with SCRIPT's exit status,
# 124 on timeout, 125 when the VM itself failed. See README.md.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
prog=boot.sh

usage() {
	cat <<'EOF'
usage: boot.sh [options] SCRIPT [ARGS...]
  --disks N          attach N throttled virtio disks, ext4, mounted in the guest;
                     their mount points are in $DS_VM_DISKS (comma-separated)
  --disk-bps BYTES   per-disk throttle, bytes/s (qemu throttling.bps-total)
  --disk-size SIZE   size of each disk image (default 1G; sparse)
  --disk-dir DIR     keep the disk images in DIR: made there if missing, used as they are
                     if not (a second boot finds the first one's files, after a crash too)
  --mem M            guest memory (default 2G)
  --smp N            guest CPUs (default 2)
  --cpu MODEL        qemu -cpu (default max); max,-erms,-fsrm makes the guest kernel copy
                     with rep movsq, which TCG runs about 4x faster than rep movsb
  --timeout SEC      wall-clock limit; qemu is killed and boot.sh exits 124 (default 600)
  --cache DIR        the cache prepare.sh filled (default $DS_VM_CACHE, else /var/tmp/dragstrip-vm)
  --workdir DIR      host dir shared writable as $DS_VM_WORK, kept afterwards
                     (default: a fresh temporary dir, removed afterwards)
  --env NAME=VALUE   set a variable in the guest (DS_*, ASAN/UBSAN/LSAN_OPTIONS pass on their own)
  --net-listen PORT  add eth0, joined to another VM over 127.0.0.1:PORT (this one listens)
  --net-connect PORT add eth0, joined to the VM listening on 127.0.0.1:PORT
  --mac MAC          MAC of eth0 (default 52:54:00:d5:00:01 listening, :02 connecting)
EOF
}

die() {
	echo "$prog: $*" >&2
	exit 125
}

is_uint() { [[ $1 =~ ^[0-9]+$ ]]; }

disks=0 disk_bps="" disk_size=1G disk_dir="" mem=2G smp=2 cpu=max timeout=600
cache=${DS_VM_CACHE:-/var/tmp/dragstrip-vm}
workdir="" net="" mac=""
extra_env=()
while [ $# -gt 0 ]; do
	case $1 in
	--disks) disks=${2-} ;;
	--disk-bps) disk_bps=${2-} ;;
	--disk-size) disk_size=${2-} ;;
	--disk-dir) disk_dir=${2-} ;;
	--mem) mem=${2-} ;;
	--smp) smp=${2-} ;;
	--cpu) cpu=${2-} ;;
	--timeout) timeout=${2-} ;;
	--cache) cache=${2-} ;;
	--workdir) workdir=${2-} ;;
	--env) extra_env+=("${2-}") ;;
	--net-listen) net="listen=127.0.0.1:${2-}" ;;
	--net-connect) net="connect=127.0.0.1:${2-}" ;;
	--mac) mac=${2-} ;;
	-h | --help)
		usage
		exit 0
		;;
	--)
		shift
		break
		;;
	-*)
		usage >&2
		die "unknown option $1"
		;;
	*) break ;;
	esac
	[ $# -ge 2 ] || die "$1 needs a value"
	shift 2
done
[ $# -ge 1 ] || {
	usage >&2
	die "no SCRIPT given"
}

if ! is_uint "$disks" || [ "$disks" -gt 26 ]; then die "--disks wants 0..26, not '$disks'"; fi
[ -z "$disk_bps" ] || is_uint "$disk_bps" || die "--disk-bps wants bytes per second, not '$disk_bps'"
[[ $disk_size =~ ^[0-9]+[KMGT]?$ ]] || die "--disk-size wants a size such as 512M or 2G, not '$disk_size'"
[[ $mem =~ ^[0-9]+[MG]?$ ]] || die "--mem wants a size such as 2G, not '$mem'"
if ! is_uint "$smp" || [ "$smp" -lt 1 ]; then die "--smp wants a CPU count, not '$smp'"; fi
[[ $cpu =~ ^[a-z][a-z0-9_.-]*(,[+-]?[a-z0-9_.=-]+)*$ ]] || die "--cpu wants a qemu CPU model such as max,-erms, not '$cpu'"
if ! is_uint "$timeout" || [ "$timeout" -lt 1 ]; then die "--timeout wants seconds, not '$timeout'"; fi
for e in "${extra_env[@]}"; do
	[[ $e =~ ^[A-Za-z_][A-Za-z0-9_]*= ]] || die "--env wants NAME=VALUE, not '$e'"
done

script=$(readlink -f -- "$1") || die "SCRIPT $1 not found"
shift
[ -f "$script" ] || die "SCRIPT $script is not a file"
case $script in /run/* | /dev/* | /proc/* | /sys/*)
	die "SCRIPT $script is under a directory the guest replaces; put it elsewhere" ;;
esac

# --- the VM image from prepare.sh -------------------------------------------
qemu=$(command -v qemu-system-x86_64) ||
	die "qemu-system-x86_64 not found: run tests/vm/prepare.sh (apt-get install qemu-system-x86)"
[ -f "$cache/current.env" ] || die "no VM in $cache: run tests/vm/prepare.sh $cache first"
DSVM_KV="" DSVM_KERNEL="" DSVM_INITRD="" DSVM_MODULES="" DSVM_INIT_SUM=""
# shellcheck source=/dev/null
. "$cache/current.env"
if [ ! -f "$DSVM_KERNEL" ] || [ ! -f "$DSVM_INITRD" ]; then
	die "the VM in $cache is incomplete: rerun tests/vm/prepare.sh $cache"
fi
sum=$(cat "$here/init" "$here/prepare.sh" | sha256sum | cut -c1-16)
[ "$sum" = "$DSVM_INIT_SUM" ] ||
	die "the initramfs in $cache predates changes to tests/vm/init or prepare.sh: rerun tests/vm/prepare.sh $cache"

# --- scratch space ------------------------------------------------------------
tmpbase=${DS_VM_TMP:-/var/tmp}
tmpdirs=()
qemu_pid=""
# shellcheck disable=SC2317 # called by the EXIT trap
cleanup() {
	if [ -n "$qemu_pid" ]; then kill "$qemu_pid" 2>/dev/null || true; fi
	if [ ${#tmpdirs[@]} -gt 0 ]; then rm -rf "${tmpdirs[@]}"; fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if [ -n "$workdir" ]; then
	mkdir -p "$workdir" || die "cannot create --workdir $workdir"
	workdir=$(cd "$workdir" && pwd)
else
	workdir=$(mktemp -d "$tmpbase/dsvm-work.XXXXXX") || die "cannot create a work dir in $tmpbase"
	tmpdirs+=("$workdir")
fi
rm -rf "$workdir/.dsvm"
mkdir -p "$workdir/.dsvm"

drives=()
if [ "$disks" -gt 0 ]; then
	if [ -n "$disk_dir" ]; then
		mkdir -p "$disk_dir" || die "cannot create --disk-dir $disk_dir"
		diskdir=$disk_dir
	else
		diskdir=$(mktemp -d "$tmpbase/dsvm-disks.XXXXXX") || die "cannot create a disk dir in $tmpbase"
		tmpdirs+=("$diskdir")
	fi
	command -v mkfs.ext4 >/dev/null || die "mkfs.ext4 not found: apt-get install e2fsprogs"
	# cache=none opens the images with O_DIRECT, which some file systems (tmpfs
	# on older kernels) refuse; qemu's throttling works either way.
	cachemode=none
	if ! dd if=/dev/zero of="$diskdir/probe" bs=4096 count=1 oflag=direct status=none 2>/dev/null; then
		cachemode=writeback
		echo "$prog: $tmpbase does not do O_DIRECT; disks use cache=writeback (set DS_VM_TMP to change)" >&2
	fi
	rm -f "$diskdir/probe"
	for ((i = 0; i < disks; i++)); do
		img=$diskdir/disk$i.img
		if [ ! -f "$img" ]; then
			truncate -s "$disk_size" "$img.new" || die "cannot create $img"
			# Inode tables and journal written now, so that the guest's lazy init
			# does not eat the throttled bandwidth during a test.
			mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0 "$img.new" ||
				die "mkfs.ext4 $img failed"
			mv "$img.new" "$img"
		fi
		d="file=$img,if=virtio,format=raw,cache=$cachemode,aio=threads"
		[ -z "$disk_bps" ] || d="$d,throttling.bps-total=$disk_bps"
		drives+=(-drive "$d")
	done
fi

# --- the job --------------------------------------------------------------------
squote() { printf "'%s'" "${1//\'/\'\\\'\'}"; }
printf 'DSVM_MODULES=%s\n' "$(squote "$DSVM_MODULES")" >"$workdir/.dsvm/boot.conf"
{
	echo "# written by boot.sh; run by /bin/bash inside the VM"
	while IFS= read -r name; do
		case $name in
		DS_VM_WORK | DS_VM_DISKS | DS_VM_KERNEL | DS_VM_KROOT) ;;
		DS_* | ASAN_OPTIONS | UBSAN_OPTIONS | LSAN_OPTIONS) printf 'export %s=%q\n' "$name" "${!name}" ;;
		esac
	done < <(compgen -e)
	printf 'export DS_VM_DISK_COUNT=%q DS_VM_DISK_BPS=%q\n' "$disks" "$disk_bps"
	printf 'export DS_VM_KROOT=%q\n' "${DSVM_MODULES%/lib/modules/*}"
	for e in "${extra_env[@]}"; do
		printf 'export %s=%q\n' "${e%%=*}" "${e#*=}"
	done
	# shellcheck disable=SC2016 # expanded in the guest
	echo 'cd "$DS_VM_WORK" || exit 125'
	if [ -x "$script" ]; then printf 'exec %q' "$script"; else printf 'exec /bin/bash %q' "$script"; fi
	[ $# -eq 0 ] || printf ' %q' "$@"
	echo
} >"$workdir/.dsvm/job.sh"

# --- qemu -----------------------------------------------------------------------
nic=(-nic none)
if [ -n "$net" ]; then
	if [ -z "$mac" ]; then
		case $net in listen=*) mac=52:54:00:d5:00:01 ;; *) mac=52:54:00:d5:00:02 ;; esac
	fi
	nic=(-netdev "socket,id=n0,$net" -device "virtio-net-pci,netdev=n0,mac=$mac")
fi

# TCG only: this host's KVM (PVM) aborts or runs the kernel 100x slower.
cmd=("$qemu" -accel tcg -cpu "$cpu" -m "$mem" -smp "$smp"
	-nodefaults -no-user-config -display none -monitor none -serial stdio -no-reboot
	"${nic[@]}"
	-kernel "$DSVM_KERNEL" -initrd "$DSVM_INITRD"
	-append "console=ttyS0 quiet loglevel=4 panic=-1 oops=panic"
	-virtfs "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap"
	-virtfs "local,path=$workdir,mount_tag=work,security_model=none,multidevs=remap"
	"${drives[@]}")

echo "$prog: kernel $DSVM_KV, $smp CPU, $mem, $disks disk(s)${disk_bps:+ at $disk_bps B/s}, timeout ${timeout}s: $script $*"
start=$SECONDS
# In the background, so that the traps above can stop it while we wait.
timeout -k 10 "$timeout" "${cmd[@]}" </dev/null &
qemu_pid=$!
qemu_status=0
wait "$qemu_pid" || qemu_status=$?
qemu_pid=""
elapsed=$((SECONDS - start))

if [ -f "$workdir/.dsvm/fatal" ]; then
	die "the VM failed before SCRIPT ran: $(cat "$workdir/.dsvm/fatal")"
fi
if [ -f "$workdir/.dsvm/rc" ]; then
	rc=$(cat "$workdir/.dsvm/rc")
	echo "$prog: SCRIPT exited $rc after ${elapsed}s"
	exit "$rc"
fi
if [ "$qemu_status" = 124 ]; then
	echo "$prog: timed out after ${elapsed}s (--timeout $timeout); qemu killed" >&2
	exit 124
fi
die "the VM stopped without SCRIPT's exit status after ${elapsed}s (qemu status $qemu_status; kernel panic?)"
