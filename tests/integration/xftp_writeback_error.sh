#!/bin/bash
# A writeback error is told once: when the sync before a resume point (xftpd's .len file,
# xftp's user.xftp.whole) is the one told, the transfer fails, and neither the point nor the
# commit's own sync passes over the lost pages. The disk is ext4 in a file on a small tmpfs
# (a loop device): the tmpfs filled, writeback fails (ENOSPC), then room is made again, so
# every later sync succeeds. Pieces under 1 MiB (-b 256K, and a get smaller than its block)
# go through the page cache, where such an error waits for a sync to be told. A tree's
# batch, synced with syncfs, is told an error once for the whole file system: after one, no
# file of the tree takes its name.
source "$(dirname "$0")/xftpd_lib.sh"
[ "$(id -u)" -eq 0 ] || fail "needs root (a loop device and mounts)"
make_store
put_file source.bin $((16 << 20))

# loop_disk NAME INODES: $work/NAME, ext4 in a file on the 48 MiB tmpfs $work/backing-NAME.
loop_disk() {
	mkdir "$work/backing-$1" "$work/$1"
	mount -t tmpfs -o size=48m tmpfs "$work/backing-$1" || fail "cannot mount a tmpfs"
	truncate -s 256M "$work/backing-$1/ext4.img"
	# No journal, every bitmap written: only data blocks are left for the filled tmpfs to
	# refuse (a journal's or a bitmap's write refused would make the file system read-only).
	mkfs.ext4 -q -F -b 4096 -N "$2" -O ^has_journal,^metadata_csum,^uninit_bg \
		-E lazy_itable_init=0,nodiscard "$work/backing-$1/ext4.img" || fail "mkfs.ext4"
	mount -o loop "$work/backing-$1/ext4.img" "$work/$1" || fail "cannot mount the loop disk $1"
}
loop_disk disk 64
mkdir "$work/disk/root" "$work/disk/get"
chown nobody "$work/disk/root"
sync -f "$work/disk"
port=16493
"$xftpd" -p "$port" --root "$work/disk/root" --users "$work/users" "${run_as[@]}" -b 256K \
	2>>"$work/xftpd.log" &
xftpd_pid=$!
wait_listening "$port"
"$xftpd" -p $((port + 1)) --root "$work/root" --users "$work/users" "${run_as[@]}" \
	2>>"$work/xftpd.log" &
wait_listening $((port + 1))

# fill_but MIB [DISK]: the tmpfs under the loop disk DISK (disk) keeps only MIB MiB free.
fill_but() {
	local free_kib backing=$work/backing-${2:-disk}
	free_kib=$(df --output=avail -k "$backing" | tail -1)
	head -c $(((free_kib - $1 * 1024) * 1024)) /dev/zero >"$backing/filler"
}

# room_when_full [DISK]: in the background, until the tmpfs fills, then the filler goes.
# $roomer exits 1 when the tmpfs never filled (10 s): the case never met its error.
room_when_full() {
	local backing=$work/backing-${1:-disk}
	(
		filled=1
		for _ in $(seq 500); do
			[ "$(stat -f -c %a "$backing")" -gt 64 ] || { filled=0 && break; }
			sleep 0.02
		done
		rm -f "$backing/filler"
		exit "$filled"
	) &
	roomer=$!
}

# xftpd: a MODE S upload of 16 MiB paced to 4 MB/s (32 Mbit/s); its first resume point, a second in,
# syncs 4 MB into a tmpfs with 2 MiB left.
fill_but 2
room_when_full
status=0
"$DS_BIN/xftp" -q -R 32M put "$work/root/source.bin" \
	"ftp://$user:$pass@127.0.0.1:$port/up.bin" >/dev/null 2>"$work/put.err" || status=$?
wait "$roomer" || fail "the upload never filled the disk"
[ "$status" -ne 0 ] || fail "xftpd took an upload whose writeback failed"
[ ! -e "$work/disk/root/up.bin" ] || fail "an upload whose writeback failed took its name"
[ -z "$(ls -A "$work/disk/root")" ] || fail "a failed upload left: $(ls -A "$work/disk/root"): $(cat "$work/put.err")"
grep -q '452 Insufficient storage space' "$work/put.err" ||
	fail "xftp does not pass on xftpd's reason: $(cat "$work/put.err")"
# It ended at that point, a second in, not after the 4 s the whole file takes.
bytes=$(sed -n 's|.* STOR /up.bin \([0-9]*\) bytes .*|\1|p' "$work/xftpd.log")
if [ -z "$bytes" ] || [ "$bytes" -ge $((12 << 20)) ]; then
	fail "xftpd took ${bytes:-all} bytes of an upload whose sync had failed"
fi
pass "xftpd ends an upload whose resume point's sync failed ($bytes bytes; $(head -c 120 "$work/put.err"))"

# xftp: a get of 16 MiB (under its 64 MiB block: through the page cache) paced the same.
fill_but 2
room_when_full
status=0
"$DS_BIN/xftp" -q -b 64M -R 32M get "ftp://$user:$pass@127.0.0.1:$((port + 1))/source.bin" \
	"$work/disk/get/got.bin" >/dev/null 2>"$work/get.err" || status=$?
wait "$roomer" || fail "the download never filled the disk"
[ "$status" -ne 0 ] || fail "xftp finished a download whose writeback failed"
[ ! -e "$work/disk/get/got.bin" ] || fail "a download whose writeback failed took its name"
grep -q 'fdatasync' "$work/get.err" || fail "xftp does not say why: $(cat "$work/get.err")"
# The one sync, of the whole 16 MiB, failed: no point past 0 is on the disk, so nothing is
# kept, and the line says so (it once claimed the 16 MiB the failed sync had not kept).
[ ! -e "$work/disk/get/.got.bin.xftp-part" ] || fail "a partial with no point past 0 was left"
grep -q 'fdatasync before the resume point 16777216: .* (nothing kept)$' "$work/get.err" ||
	fail "xftp claims bytes the disk may not keep: $(cat "$work/get.err")"
pass "xftp fails a download whose resume point's sync failed, and keeps nothing of it"

# xftp: a get stopped 2 s in (8 of its 16 MB come), onto a fresh loop disk (no block of its
# tmpfs written yet) with 1 MiB left under it. The file is one piece of its 64 MiB block,
# written at the stop, so the sync after the stop is its first, and it fails. Nothing is
# kept, and the line says why, not only that the user stopped it.
loop_disk disk3 64
sync -f "$work/disk3"
fill_but 1 disk3
room_when_full disk3
"$DS_BIN/xftp" -q -b 64M -R 32M get "ftp://$user:$pass@127.0.0.1:$((port + 1))/source.bin" \
	"$work/disk3/stopped.bin" >/dev/null 2>"$work/stop.err" &
getter=$!
sleep 2
kill -INT "$getter"
status=0
wait "$getter" || status=$?
wait "$roomer" || fail "the stopped download's sync never filled the disk: $(cat "$work/stop.err")"
[ "$status" -ne 0 ] || fail "a stopped download exited 0"
[ ! -e "$work/disk3/stopped.bin" ] || fail "a stopped download took its name"
[ ! -e "$work/disk3/.stopped.bin.xftp-part" ] ||
	fail "a partial with nothing on the disk was left: $(cat "$work/stop.err")"
grep -q '^xftp: stopped before any of .* (nothing kept; its last fdatasync failed: ' \
	"$work/stop.err" || fail "xftp does not say that its last sync failed: $(cat "$work/stop.err")"
pass "a stopped download whose last sync fails says so ($(head -c 160 "$work/stop.err"))"
kill "$xftpd_pid"
wait "$xftpd_pid" || fail "xftpd on the loop disk did not end cleanly"

# A tree's batch: the syncfs of one batch is told an error whose pages were another file's,
# one still waiting for its 226 (y, from xftp_batch_server.py), which then joins the next
# batch. That batch's syncfs is told nothing: y must not take its name all the same. The
# disk is full from the start; room comes back just before y's 226.
loop_disk disk2 4096
mkdir "$work/disk2/tree"
# The directory's blocks written first: the names to come need no room the disk lacks.
for i in $(seq 1100); do : >"$work/disk2/tree/.f$i.xftp-part"; done
rm -f "$work/disk2/tree/".*.xftp-part
sync -f "$work/disk2"
python3 "$DS_SRC/tests/integration/xftp_batch_server.py" $((port + 2)) "$work/backing-disk2/filler" &
wait_listening $((port + 2))
head -c $(($(df --output=avail -k "$work/backing-disk2" | tail -1) * 1024)) /dev/zero \
	>"$work/backing-disk2/filler" 2>/dev/null || true
status=0
"$DS_BIN/xftp" -q -j 2 -r get "ftp://u:p@127.0.0.1:$((port + 2))/t" "$work/disk2/tree" \
	2>"$work/tree.err" || status=$?
[ ! -e "$work/backing-disk2/filler" ] || fail "the server never sent y's 226: $(tail -3 "$work/tree.err")"
[ "$status" -ne 0 ] || fail "xftp finished a tree whose writeback failed"
umount "$work/disk2"
mount -o loop "$work/backing-disk2/ext4.img" "$work/disk2" || fail "cannot mount the second loop disk again"
if [ -e "$work/disk2/tree/y" ]; then
	python3 -c 'import random, sys; sys.exit(open(sys.argv[1], "rb").read() != random.Random(7).randbytes(1 << 20))' \
		"$work/disk2/tree/y" || fail "a file whose pages the disk lost took its name in a later batch"
fi
pass "after a batch's failed sync, no file of the tree takes its name ($(tail -1 "$work/tree.err"))"
log_clean
