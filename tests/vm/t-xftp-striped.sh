#!/bin/bash
# Guest script for boot.sh --disks 4: xftp put and get through xftpd over loopback, the
# store striped over a directory on each throttled disk. Every file comes back with the
# same bytes (cmp, and xftp --verify asks xftpd for HASH), lands as a stripe set that
# stripe verifies, and has a member on every disk. One stream and four (MODE E). A
# one-stream upload writes in order, so its members carry data checksums (verify --data);
# MODE E blocks land out of order, and stripe keeps no data checksum for such a file.
# Sizes only, no rates: bench/xftp-striped.sh measures those.
#   boot.sh --disks 4 --disk-bps 50000000 t-xftp-striped.sh [MIB]
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=guest-lib.sh
. "$here/guest-lib.sh"
mib=${1:-40}
IFS=, read -ra disks <<<"${DS_VM_DISKS:-}"
[ "${#disks[@]}" -eq 4 ] || ds_vm_die "needs four disks (boot.sh --disks 4), got '${DS_VM_DISKS:-}'"
bin=${DS_BIN:?DS_BIN must name the folder of the built tools}

store=$(ds_vm_store_roots "${disks[@]}") || ds_vm_die "the striped store's roots"
printf 'pw\n' | "$bin/xftpd" --add-user "$TMPDIR/users" t >/dev/null
timeout 280 "$bin/xftpd" -p 2121 --listen 127.0.0.1 --root "$store" --users "$TMPDIR/users" \
	--run-as nobody 2>"$TMPDIR/xftpd.log" &
trap 'kill $! 2>/dev/null || true' EXIT
ds_vm_wait_tcp 2121 || ds_vm_die "xftpd did not listen"
url=ftp://t:pw@127.0.0.1:2121

# An odd size, so that the last stripe unit is partial.
head -c $((mib * 1048576 + 12345)) /dev/urandom >"$TMPDIR/src"
for streams in 1 4; do
	name=f$streams
	timeout 120 "$bin/xftp" -q -P "$streams" --verify put "$TMPDIR/src" "$url/$name" ||
		ds_vm_die "put over $streams stream(s): $(tail -3 "$TMPDIR/xftpd.log")"
	check=(--data)
	[ "$streams" = 1 ] || check=()
	"$bin/stripe" verify "${check[@]}" "$store" "$name" >/dev/null ||
		ds_vm_die "$name: stripe verify ${check[*]} fails on the striped store"
	for d in "${disks[@]}"; do
		[ -s "$d/s/$name" ] || ds_vm_die "$name: no member on $d"
	done
	sync
	echo 3 >/proc/sys/vm/drop_caches
	timeout 120 "$bin/xftp" -q -P "$streams" --verify get "$url/$name" "$TMPDIR/back" ||
		ds_vm_die "get over $streams stream(s): $(tail -3 "$TMPDIR/xftpd.log")"
	cmp "$TMPDIR/src" "$TMPDIR/back" || ds_vm_die "$name: the bytes got back differ from the put's"
	rm -f "$TMPDIR/back"
	echo "ok: $((mib * 1048576 + 12345)) bytes put and got back over $streams stream(s), striped over 4 disks"
done
grep -c ' ok$' "$TMPDIR/xftpd.log" | grep -qx 4 || ds_vm_die "xftpd logged not 4 good transfers: $(cat "$TMPDIR/xftpd.log")"
echo "PASS: xftp through xftpd on a striped store over throttled disks"
