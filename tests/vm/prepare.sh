#!/bin/bash
# prepare.sh [CACHE_DIR]: one-time set-up of the test VM (see README.md).
#
# Installs the Debian packages the VM harness needs, downloads the kernel that
# linux-image-amd64 depends on today, unpacks it and builds a small busybox
# initramfs around tests/vm/init. Everything lands in CACHE_DIR (default
# $DS_VM_CACHE, else /var/tmp/dragstrip-vm). A second run with the same kernel
# and the same init reuses the cache and takes well under a second.
#
# Result: CACHE_DIR/current.env, read by boot.sh.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
prog=prepare.sh

die() {
	echo "$prog: $*" >&2
	exit 1
}

# Modules the initramfs loads at boot (dependencies are added automatically).
# crc32_generic: rdma_rxe needs the crc32 shash and fails "rdma link add" without it.
MODULES="crc32_generic virtio_pci virtio_net virtio_blk 9pnet_virtio 9p ext4 rdma_rxe rdma_ucm dummy veth"

# Debian packages used by prepare.sh, boot.sh and the guest helpers.
PACKAGES="qemu-system-x86 busybox-static kmod e2fsprogs iproute2 util-linux coreutils gzip
	rdma-core ibverbs-utils ibverbs-providers rdmacm-utils perftest mdadm btrfs-progs xfsprogs"

[ $# -le 1 ] || die "usage: prepare.sh [CACHE_DIR]"
cache=${1:-${DS_VM_CACHE:-/var/tmp/dragstrip-vm}}

[ "$(id -u)" = 0 ] || die "must run as root (it installs Debian packages)"
[ "$(uname -m)" = x86_64 ] || die "needs an x86_64 host, not $(uname -m)"
command -v apt-get >/dev/null || die "needs a Debian host with apt-get"

mkdir -p "$cache" 2>/dev/null || die "cannot create the cache dir $cache"
cache=$(cd "$cache" && pwd)

# One prepare at a time per cache (ctest may run several build trees at once).
exec 9>"$cache/.lock"
flock 9

# --- packages ---------------------------------------------------------------
missing=""
for p in $PACKAGES; do
	st=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
	[ "$st" = "install ok installed" ] || missing="$missing $p"
done
if [ -n "$missing" ]; then
	echo "$prog: installing$missing"
	# shellcheck disable=SC2086 # the package list is split on purpose
	{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing; } \
		>"$cache/apt.log" 2>&1 || die "apt-get install$missing failed (see $cache/apt.log)"
fi

# --- which kernel -----------------------------------------------------------
kernel_package() {
	apt-cache depends linux-image-amd64 2>/dev/null |
		awk '$1 == "Depends:" && $2 ~ /^linux-image-[0-9]/ { print $2; exit }'
}
kpkg=$(kernel_package)
if [ -z "$kpkg" ]; then
	# apt-cache knows nothing yet on a machine whose lists were never fetched.
	apt-get update -qq >"$cache/apt.log" 2>&1 || die "apt-get update failed (see $cache/apt.log)"
	kpkg=$(kernel_package)
fi
[ -n "$kpkg" ] || die "apt-cache depends linux-image-amd64 names no linux-image-<abi> package"
kv=${kpkg#linux-image-}

init_sum=$(cat "$here/init" "$here/prepare.sh" | sha256sum | cut -c1-16)
stamp="$kv $init_sum $MODULES"
if [ -f "$cache/current.env" ] && [ -f "$cache/stamp" ] && [ "$(cat "$cache/stamp")" = "$stamp" ] &&
	[ -f "$cache/$kv/initrd.cpio.gz" ]; then
	echo "$prog: cache $cache is ready (kernel $kv)"
	exit 0
fi

# --- kernel -----------------------------------------------------------------
kdir=$cache/$kv
kroot=$kdir/kroot
if [ ! -f "$kroot/.unpacked" ]; then
	echo "$prog: fetching $kpkg"
	rm -rf "$kdir"
	mkdir -p "$kdir/dl"
	# apt-get download writes to the current directory; as root it warns that
	# the _apt sandbox cannot be used, which is harmless.
	(cd "$kdir/dl" && apt-get download -qq "$kpkg") >"$kdir/download.log" 2>&1 ||
		die "apt-get download $kpkg failed (see $kdir/download.log)"
	debs=("$kdir/dl/${kpkg}"_*.deb)
	deb=${debs[0]}
	[ -f "$deb" ] || die "apt-get download $kpkg produced no .deb in $kdir/dl"
	dpkg -x "$deb" "$kroot" || die "dpkg -x $deb failed"
	rm -rf "$kdir/dl"
	[ -f "$kroot/boot/vmlinuz-$kv" ] || die "$kpkg has no boot/vmlinuz-$kv"
	[ -d "$kroot/lib/modules/$kv" ] || die "$kpkg has no lib/modules/$kv"
	depmod -b "$kroot" "$kv" || die "depmod -b $kroot $kv failed"
	touch "$kroot/.unpacked"
fi

# --- initramfs --------------------------------------------------------------
echo "$prog: building initramfs for $kv"
out=$kdir/initrd
moddir=lib/modules/$kv
rm -rf "$out"
mkdir -p "$out"/{bin,sbin,proc,sys,dev,host,work,"$moddir"}

busybox=$(command -v busybox || true)
[ -n "$busybox" ] || die "busybox not found (apt-get install busybox-static)"
if ldd "$busybox" >/dev/null 2>&1; then
	die "$busybox is dynamically linked: apt-get install busybox-static"
fi
cp "$busybox" "$out/bin/busybox"
for applet in $("$busybox" --list); do
	# A link named busybox would point busybox at itself.
	[ "$applet" = busybox ] || ln -s busybox "$out/bin/$applet"
done
# The kernel's request_module runs /sbin/modprobe in init's root.
ln -sf ../bin/busybox "$out/sbin/modprobe"

kos=$(for m in $MODULES; do
	modprobe -d "$kroot" -S "$kv" --show-depends "$m" ||
		echo "MISSING $m"
done | awk '$1 == "insmod" { print $2 } $1 == "MISSING" { print "MISSING:" $2 }' | sort -u)
case $kos in *MISSING:*)
	die "kernel $kv lacks module(s): $(echo "$kos" | sed -n 's/^MISSING://p' | tr '\n' ' ')" ;;
esac
for ko in $kos; do
	rel=${ko#"$kroot/$moddir/"}
	mkdir -p "$out/$moddir/$(dirname "$rel")"
	cp "$ko" "$out/$moddir/$rel"
done
for f in modules.order modules.builtin modules.builtin.modinfo; do
	[ ! -f "$kroot/$moddir/$f" ] || cp "$kroot/$moddir/$f" "$out/$moddir/"
done
depmod -b "$out" "$kv" || die "depmod for the initramfs failed"
echo "$MODULES" >"$out/modules.list"
echo "$kv" >"$out/kernel-version"
install -m 755 "$here/init" "$out/init"

(cd "$out" && find . | "$busybox" cpio -o -H newc 2>/dev/null | gzip -1) >"$kdir/initrd.cpio.gz.tmp" ||
	die "cpio of the initramfs failed"
mv "$kdir/initrd.cpio.gz.tmp" "$kdir/initrd.cpio.gz"
rm -rf "$out"

cat >"$cache/current.env.tmp" <<EOF
# written by tests/vm/prepare.sh; read by tests/vm/boot.sh
DSVM_KV=$kv
DSVM_KERNEL=$kroot/boot/vmlinuz-$kv
DSVM_INITRD=$kdir/initrd.cpio.gz
DSVM_MODULES=$kroot/$moddir
DSVM_INIT_SUM=$init_sum
EOF
mv "$cache/current.env.tmp" "$cache/current.env"
echo "$stamp" >"$cache/stamp"
echo "$prog: cache $cache is ready (kernel $kv, initramfs $(du -k "$kdir/initrd.cpio.gz" | cut -f1) KiB)"
