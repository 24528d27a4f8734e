# stripe put/get/ls/stat/verify/rm end to end: random files read back bit-exact over
# several widths and units, stdin and stdout, --json, and bad command lines.
source "$DS_SRC/tests/integration/lib.sh"
stripe=$DS_BIN/stripe
mkdir -p "$work"/d{0..15}
dirs() { local n=$1 list="" i; for ((i = 0; i < n; i++)); do list+="${list:+,}$work/d$i"; done; echo "$list"; }

for case in "1 1M 0" "1 4K 1" "3 64K 300001" "4 1M 5000000" "16 4K 200000" "2 8K 8192"; do
	read -r width unit size <<<"$case"
	head -c "$size" /dev/urandom >"$work/src"
	D=$(dirs "$width")
	"$stripe" put -u "$unit" "$work/src" "$D" f >/dev/null
	"$stripe" get "$D" f "$work/back" >/dev/null
	cmp "$work/src" "$work/back" || fail "width $width unit $unit size $size: data differs"
	"$stripe" verify --data "$D" f >/dev/null
	"$stripe" rm "$D" f
	pass "width $width unit $unit size $size read back exact"
done

D=$(dirs 3)
head -c 3000000 /dev/urandom >"$work/src"
cat "$work/src" | "$stripe" put - "$D" piped >/dev/null
"$stripe" get "$D" piped - 2>/dev/null | cmp - "$work/src" || fail "stdin to stdout differs"
pass "stdin in, stdout out"

"$stripe" put "$work/src" "$D" >/dev/null # NAME defaults to SRC's base name
"$stripe" ls "$D" >"$work/ls"
grep -Eq '^piped +3000000 +width 3 unit 1M' "$work/ls" || fail "ls: $(cat "$work/ls")"
grep -Eq '^src +3000000' "$work/ls" || fail "ls lacks src: $(cat "$work/ls")"
pass "ls lists both files"

"$stripe" ls --json "$D" | jq -se 'map(select(.name=="piped"))[0] | .state=="ok" and .size==3000000 and .width==3 and .data_checksums' >/dev/null ||
	fail "ls --json"
"$stripe" stat --json "$D" piped | jq -e '.unit==1048576 and (.set_id|length)==32' >/dev/null || fail "stat --json"
"$stripe" stat "$D" piped | grep -q "member 2 .*/d2/piped" || fail "stat lists members"
"$stripe" put --json "$work/src" "$D" j |
	jq -e '.tool=="stripe" and .role=="put" and .link=="disk" and .bytes==3000000 and .width==3' >/dev/null ||
	fail "put --json"
"$stripe" get --json "$D" j - 2>"$work/report" >/dev/null
jq -e '.role=="get" and .bytes==3000000' "$work/report" >/dev/null || fail "get --json to stderr when data goes to stdout"
"$stripe" verify --json --data "$D" j | jq -e '.ok and .data_checked' >/dev/null || fail "verify --json"
pass "--json results"

"$stripe" put --no-checksum "$work/src" "$D" nosum >/dev/null
"$stripe" stat "$D" nosum | grep -q '^checksums no' || fail "--no-checksum stores none"
"$stripe" get "$D" nosum - 2>/dev/null | cmp - "$work/src" || fail "--no-checksum data differs"
expect_error "verify --data without checksums" "member 0 .*carries no data checksum" "$stripe" verify --data "$D" nosum
"$stripe" bench --no-checksum -s 2M "$(dirs 2)" | grep -q "striped / mean" || fail "bench --no-checksum"

# Checksums written by any CRC-32C implementation are accepted by every other.
impls="table slice8"
grep -qw sse4_2 /proc/cpuinfo && impls+=" sse42"
for put_impl in $impls; do
	DS_CRC32C=$put_impl "$stripe" put -f "$work/src" "$D" crc >/dev/null
	for check_impl in $impls; do
		DS_CRC32C=$check_impl "$stripe" verify --data "$D" crc >/dev/null ||
			fail "checksums by $put_impl rejected by $check_impl"
	done
	DS_CRC32C=$put_impl "$stripe" bench --json -s 2M "$(dirs 2)" |
		jq -e --arg i "$put_impl" '.crc32c==$i and .checksums' >/dev/null ||
		fail "bench does not report crc32c $put_impl"
done
pass "CRC-32C implementations agree ($impls) and bench names the one used"
expect_error "unknown CRC-32C" "DS_CRC32C: 'fast' is not a CRC-32C implementation this CPU runs \\(try table, slice8" \
	env DS_CRC32C=fast "$stripe" ls "$D"

expect_error "put refuses to replace" "put: 'j' is taken \\(.*/d0/j exists\\): replace it with 'stripe put -f', or remove the whole set with 'stripe rm $D j'" \
	"$stripe" put "$work/src" "$D" j
"$stripe" put "$work/src" "$D" k >/dev/null
expect_error "mv refuses to replace" "mv: 'j' is taken \\(.*/d0/j exists\\): replace it with 'stripe mv -f', or remove the whole set with 'stripe rm $D j'" \
	"$stripe" mv "$D" k j
"$stripe" rm "$D" k
"$stripe" put -f "$work/src" "$D" j >/dev/null
pass "put -f replaces"

expect_error "no subcommand" "not a subcommand" "$stripe" frob
expect_error "bad unit" "-u: '5000' is not a multiple of 4K" "$stripe" put -u 5000 "$work/src" "$D"
expect_error "bad size" "-u: 'lots' is not a size" "$stripe" put -u lots "$work/src" "$D"
expect_error "empty dir entry" "entry 2 is empty" "$stripe" ls "$work/d0,,$work/d1"
expect_error "same dir twice" "same directory" "$stripe" put "$work/src" "$work/d0,$work/d0/../d0" x
expect_error "not a dir" "is not a directory" "$stripe" put "$work/src" "$work/src" x
expect_error "no such file" "no striped file 'nope'" "$stripe" get "$D" nope "$work/x"
expect_error "wrong width" "striped over 3 directories, 2 given" "$stripe" stat "$(dirs 2)" j
expect_error "option not for subcommand" "does not apply" "$stripe" get -u 4K "$D" j "$work/x"
expect_error "missing args" "wrong number of arguments" "$stripe" get "$D" j
expect_error "stdin needs a name" "needs a NAME" "$stripe" put - "$D"
expect_error "reserved name" "reserved" "$stripe" put "$work/src" "$D" .dstmp.x
expect_error "missing source" "nosuch" "$stripe" put "$work/nosuch" "$D" x
# exit_2 NAME CMD...: a usage error: exit status 2 and one line.
exit_2() {
	local name=$1 status=0
	shift
	"$@" >/dev/null 2>"$work/err" || status=$?
	[ "$status" = 2 ] || fail "$name: exit $status, expected 2: $(cat "$work/err")"
	[ "$(wc -l <"$work/err")" = 1 ] || fail "$name: more than one line: $(cat "$work/err")"
}
long=$(printf 'n%.0s' $(seq 201))
for bad in .. . "" "a/b" "$long" .dstmp.x; do
	exit_2 "put NAME '${bad:0:20}'" "$stripe" put "$work/src" "$D" "$bad"
	exit_2 "get NAME '${bad:0:20}'" "$stripe" get "$D" "$bad" "$work/x"
	exit_2 "rm NAME '${bad:0:20}'" "$stripe" rm "$D" "$bad"
done
exit_2 "unknown option" "$stripe" put -x "$work/src" "$D"
exit_2 "option without its value" "$stripe" put -u
exit_2 "get into a directory" "$stripe" get "$D" j "$work"
exit_2 "get into a member of the file" "$stripe" get "$D" j "$work/d1/j"
pass "bad names, options and destinations: exit 2, one line"

# A name that is not UTF-8 still gives valid JSON.
"$stripe" put "$work/src" "$D" "$(printf 'caf\xe9')" >/dev/null
"$stripe" ls --json "$D" | jq -se 'map(.name) | index("caf\ufffd") != null' >/dev/null || fail "ls --json of a Latin-1 name"
pass "ls --json writes a Latin-1 name as valid JSON"

"$stripe" --version | grep -q '^stripe (dragstrip)' || fail "--version"
"$stripe" --help | grep -q 'stripe bench' || fail "--help"
pass "help and version"

echo "all $checks checks passed"
