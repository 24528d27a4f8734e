# Every fault is a clear error and never wrong data: a member missing, truncated, swapped
# with another file's, a corrupted header or data, a disk full, a read-only directory,
# an interrupted put; and a failed put leaves nothing under the final name.
# Needs root: the full disk and the read-only directory are mounts in a private namespace.
if [ -z "${DS_STRIPE_UNSHARED:-}" ]; then
	[ "$(id -u)" = 0 ] || { echo "FAIL: needs root (tmpfs and ramfs mounts)" >&2; exit 1; }
	DS_STRIPE_UNSHARED=1 exec unshare --mount --propagation private bash "$0" "$@"
fi
source "$DS_SRC/tests/integration/lib.sh"
stripe=$DS_BIN/stripe
unmount_all() {
	local m
	for m in small ro ram; do
		umount "$work/$m" 2>/dev/null || true
	done
	cleanup
}
trap unmount_all EXIT
mkdir -p "$work"/d{0..3}
D=$work/d0,$work/d1,$work/d2
head -c 2500000 /dev/urandom >"$work/src"

fresh() {
	"$stripe" rm "$D" f >/dev/null 2>&1 || true
	"$stripe" rm "$D" g >/dev/null 2>&1 || true
	"$stripe" put -u 64K "$work/src" "$D" f >/dev/null
	"$stripe" put -u 64K "$work/src" "$D" g >/dev/null
}
# get_fails NAME PATTERN: get must fail naming the fault and leave no DEST behind.
get_fails() {
	expect_error "$1" "$2" "$stripe" get "$D" f "$work/dest"
	[ ! -e "$work/dest" ] || fail "$1: get left $work/dest behind"
}

fresh
rm "$work/d1/f"
get_fails "member missing" "member 1 of 3: .*/d1/f: No such file"

fresh
truncate -s 100000 "$work/d2/f"
get_fails "member truncated" "member 2 .*truncated"

fresh
cp "$work/d1/g" "$work/d1/f"
get_fails "member swapped with another file's" "member 1 .*another striped file"

fresh
printf 'Z' | dd of="$work/d0/f" bs=1 seek=20 conv=notrunc status=none
get_fails "header corrupted" "member 0 .*bad header: header checksum mismatch"

fresh
printf '\x00\x01\x02' | dd of="$work/d2/f" bs=1 seek=$((4096 + 70000)) conv=notrunc status=none
get_fails "data corrupted" "member 2 .*data checksum mismatch"
expect_error "verify --data finds it" "member 2 .*data checksum mismatch" "$stripe" verify --data "$D" f
"$stripe" verify "$D" f >/dev/null || fail "verify without --data reads headers only"

# A failed get leaves an existing DEST exactly as it was (content, mode, inode), a
# symlink to it too, and never removes a device or a FIFO.
printf 'keep me\n' >"$work/dest"
chmod 640 "$work/dest"
ln -s dest "$work/dest.link"
before=$(stat -c '%i %a %s %Y' "$work/dest")
expect_error "failed get over an existing file" "member 2 .*data checksum mismatch" "$stripe" get "$D" f "$work/dest"
expect_error "failed get through a symlink" "member 2 .*data checksum mismatch" "$stripe" get "$D" f "$work/dest.link"
[ "$(stat -c '%i %a %s %Y' "$work/dest")" = "$before" ] && [ "$(cat "$work/dest")" = "keep me" ] ||
	fail "a failed get changed the existing DEST"
[ -L "$work/dest.link" ] || fail "a failed get replaced the symlink"
[ -z "$(ls -A "$work" | grep '\.stripe-' || true)" ] || fail "a failed get left its temporary file"
expect_error "failed get to /dev/null" "member 2 .*data checksum mismatch" "$stripe" get "$D" f /dev/null
[ -c /dev/null ] || fail "/dev/null is gone"
mkfifo "$work/pipe"
cat "$work/pipe" >/dev/null &
expect_error "failed get to a FIFO" "member 2 .*data checksum mismatch" "$stripe" get "$D" f "$work/pipe"
[ -p "$work/pipe" ] || fail "the FIFO is gone"
pass "failed get: existing file, symlink, /dev/null and FIFO all as they were"

fresh
"$stripe" get "$D" f "$work/dest.link" >/dev/null
cmp -s "$work/dest" "$work/src" || fail "get through a symlink did not write its target"
[ -L "$work/dest.link" ] && [ "$(stat -c %a "$work/dest")" = 640 ] || fail "get replaced the link or lost the mode"
cat "$work/pipe" >"$work/from-pipe" &
"$stripe" get "$D" f "$work/pipe" >/dev/null
wait
cmp -s "$work/from-pipe" "$work/src" || fail "get to a FIFO: the reader got other bytes"
pass "get writes a symlink's target (mode kept) and into a FIFO in place"
fresh
truncate -s 5000 "$work/d1/g"
status=0
"$stripe" ls "$D" >"$work/ls" || status=$?
grep -Eq '^g +DAMAGED: member 1 .*truncated' "$work/ls" || fail "ls: $(cat "$work/ls")"
[ "$status" = 1 ] || fail "ls of a damaged file should exit 1"
pass "ls marks the damaged file and exits 1"

# no_leftovers NAME DIR...: neither the name nor a temporary member in any DIR.
no_leftovers() {
	local name=$1 dir
	shift
	for dir in "$@"; do
		[ ! -e "$dir/$name" ] || fail "$dir/$name exists after a failed put"
		! ls -A "$dir" | grep -q '^\.dstmp\.' || fail "temporary member left in $dir"
	done
}

mkdir -p "$work/small"
mount -t tmpfs -o size=1M tmpfs "$work/small"
expect_error "disk full" "member 1 .*No space left on device" \
	"$stripe" put "$work/src" "$work/d3,$work/small" full
no_leftovers full "$work/d3" "$work/small"
pass "a put that fills the disk leaves nothing behind"

mkdir -p "$work/ro"
mount -t tmpfs -o size=4M tmpfs "$work/ro"
"$stripe" put "$work/src" "$work/d3,$work/ro" before >/dev/null
mount -o remount,ro "$work/ro"
expect_error "read-only directory" "member 1: create .*Read-only file system" \
	"$stripe" put "$work/src" "$work/d3,$work/ro" nope
no_leftovers nope "$work/d3" "$work/ro"
"$stripe" get "$work/d3,$work/ro" before "$work/back" >/dev/null
cmp "$work/src" "$work/back" || fail "get from a read-only directory differs"
pass "get still reads from a read-only directory"

# An interrupted put (SIGINT while it waits on stdin) removes its temporary members.
mkfifo "$work/fifo"
"$stripe" put - "$D" cut <"$work/fifo" >"$work/cut.out" 2>"$work/cut.err" &
put_pid=$!
exec 7>"$work/fifo"
head -c 3000000 /dev/urandom >&7
sleep 0.5
kill -INT "$put_pid"
status=0
wait "$put_pid" || status=$?
exec 7>&-
[ "$status" = 130 ] || fail "interrupted put exited $status (expected 130)"
grep -q "interrupted" "$work/cut.out" || fail "interrupted put: $(cat "$work/cut.out")"
no_leftovers cut "$work/d0" "$work/d1" "$work/d2"
pass "an interrupted put leaves nothing behind"

# ramfs refuses O_DIRECT: the stripe falls back to buffered I/O and says so once.
mkdir -p "$work/ram"
mount -t ramfs ramfs "$work/ram"
"$stripe" bench -s 1M -u 64K "$work/ram,$work/d3" >"$work/bench" 2>"$work/bench.err"
[ "$(grep -c 'refuses O_DIRECT' "$work/bench.err")" = 1 ] || fail "fallback note: $(cat "$work/bench.err")"
grep -q "striped / mean single disk" "$work/bench" || fail "bench output: $(cat "$work/bench")"
"$stripe" put "$work/src" "$work/ram,$work/d3" r 2>"$work/put.err" >/dev/null
grep -q "$work/ram refuses O_DIRECT" "$work/put.err" || fail "put fallback note"
"$stripe" get "$work/ram,$work/d3" r - 2>/dev/null | cmp - "$work/src" || fail "buffered member data differs"
pass "O_DIRECT refused: buffered, said once, data exact"

echo "all $checks checks passed"
