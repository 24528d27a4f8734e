# Memory stays within the budget whatever a header or -u asks: a unit larger than the
# file is trimmed, a crafted header asking for 1 GiB units and a 64 GiB file is read
# within -m (and within the default budget), and -m below what depth buffers need is
# a usage error of one line. Peak memory is the kernel's count (max RSS, /usr/bin/time).
source "$DS_SRC/tests/integration/lib.sh"
stripe=$DS_BIN/stripe
[ -x /usr/bin/time ] || fail "/usr/bin/time is not installed (packages.txt: time)"
mkdir -p "$work"/d{0..3}
D=$work/d0,$work/d1,$work/d2,$work/d3

# peak_kib CMD...: runs CMD (its status ignored) and prints its peak RSS in KiB.
peak_kib() {
	/usr/bin/time -f %M -o "$work/rss" "$@" >/dev/null 2>&1 || true
	tail -1 "$work/rss"
}

head -c 4096 /dev/urandom >"$work/small"
t0=$(date +%s%N)
"$stripe" put -u 1G "$work/small" "$D" small >/dev/null
[ $((($(date +%s%N) - t0) / 1000000)) -lt 5000 ] || fail "put -u 1G of 4 KiB took over 5 s"
"$stripe" stat "$D" small | grep -q '^unit      4K$' || fail "unit not trimmed: $("$stripe" stat "$D" small)"
"$stripe" get "$D" small - 2>/dev/null | cmp -s - "$work/small" || fail "trimmed file differs"
pass "put -u 1G of a 4 KiB file: unit trimmed to 4K, quick"

head -c 3000000 /dev/urandom >"$work/mid"
cat "$work/mid" | "$stripe" put -m 8M -u 1G - "$D" piped >/dev/null
"$stripe" stat "$D" piped | grep -q '^unit      1G$' || fail "a piped put keeps its unit"
kib=$(peak_kib sh -c "cat '$work/mid' | '$stripe' put -f -m 8M -u 1G - '$D' piped")
[ "$kib" -lt $((40 * 1024)) ] || fail "put -m 8M -u 1G peaked at $kib KiB"
for budget in "" "-m 64K"; do
	# shellcheck disable=SC2086 # $budget is an option or nothing
	kib=$(peak_kib "$stripe" get $budget "$D" piped "$work/back")
	cmp -s "$work/back" "$work/mid" || fail "get $budget of a 1G-unit file differs"
	[ "$kib" -lt $((40 * 1024)) ] || fail "get $budget of 3 MB with 1G units peaked at $kib KiB"
done
pass "1G units from a pipe: put within -m 8M, get within 40 MiB with or without -m"

# A crafted set: four sparse members of 16 GiB each, headers asking for 1 GiB units.
python3 - "$work" <<'PY'
import os, struct, sys
def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 & -(crc & 1))
    return crc ^ 0xFFFFFFFF
unit, size, set_id = 1 << 30, 64 << 30, os.urandom(16)
for i in range(4):
    head = b"DSSTRIPE" + struct.pack("<IIIIQQ", 1, 4096, 4, i, unit, size) + set_id + struct.pack("<II", 0, 0)
    block = head + struct.pack("<I", crc32c(head))
    with open(f"{sys.argv[1]}/d{i}/crafted", "wb") as f:
        f.write(block + bytes(4096 - len(block)))
        f.truncate(4096 + size // 4)
PY
"$stripe" verify "$D" crafted >/dev/null || fail "the crafted set does not open"
kib=$(peak_kib timeout -s INT 2 "$stripe" get -m 16M "$D" crafted /dev/null)
[ "$kib" -lt $((48 * 1024)) ] || fail "get -m 16M of the crafted set peaked at $kib KiB"
kib_default=$(peak_kib timeout -s INT 2 "$stripe" verify --data "$D" crafted)
[ "$kib_default" -lt $(((256 + 48) * 1024)) ] || fail "verify --data of the crafted set peaked at $kib_default KiB"
pass "crafted header, 1G units and a 64 GiB file: get -m 16M peaked at $kib KiB, verify (default budget) at $kib_default KiB"

expect_error "-m below the minimum" "-m: '1K' is out of range \\(64K to 1T\\)" "$stripe" get -m 1K "$D" small "$work/x"
expect_error "-m where it does not apply" "rm: option -m does not apply" "$stripe" rm -m 1M "$D" small

echo "all $checks checks passed"
