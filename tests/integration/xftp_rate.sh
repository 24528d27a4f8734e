#!/bin/bash
# xftp -R paces a whole job (every stream of -P, every file of a tree, get and put) and
# -i reports every SEC seconds through lib's reporter, JSON lines with --json. At 160M
# (20 MB/s) 60 MB take 3 s, so a paced job must take at least 2.5 s and print at least
# two interval objects before its final one; a stop ends a paced wait at once.
. "$(dirname "$0")/xftp_lib.sh"
command -v jq >/dev/null || fail "jq is not installed"

root=$work/xs
size=60000000
start_xftpd 2240 "$root"
url=ftp://bob:secret@127.0.0.1:2240
make_file "$root/big" $size
chown nobody "$root/big"
cd "$work"

timed "$work/out" "$xftp" -i 1 -R 160M --json get $url/big "$work/got"
same "$root/big" "$work/got" "a paced get gives identical bytes"
paced_json "get -i 1 -R 160M --json" "$work/out" xftp get tcp $size 2500 30

timed "$work/out" "$xftp" -i 1 -R 160M --json -P 2 get $url/big "$work/got2"
same "$root/big" "$work/got2" "a paced get over two streams gives identical bytes"
jq -se '.[-1].streams == 2' "$work/out" >/dev/null || fail "-P 2 used one stream: $(tail -n1 "$work/out")"
paced_json "get -P 2 -R 160M: both streams together keep to the rate" "$work/out" \
	xftp get tcp $size 2500 30

timed "$work/out" "$xftp" -i 1 -R 160M --json put "$work/got" $url/up
same "$work/got" "$root/up" "a paced put gives identical bytes"
paced_json "put -i 1 -R 160M --json" "$work/out" xftp put tcp $size 2500 30

# A tree: three files at once (-j 3), 20 MB each, paced together.
mkdir -p "$root/tree"
for f in a b c; do head -c $((size / 3)) "$root/big" >"$root/tree/$f"; done
chown -R nobody "$root/tree"
timed "$work/out" "$xftp" -q -R 160M -j 3 -r get $url/tree "$work/tree"
for f in a b c; do cmp -s "$root/tree/$f" "$work/tree/$f" || fail "tree: $f differs"; done
[ "$ms" -ge 2500 ] || fail "a paced tree took $ms ms, under 2.5 s at 160M"
pass "get -r -j 3 -R 160M: the files together keep to the rate ($ms ms)"

# Unpaced, the same get is far quicker: the pace, not the machine, made the 2.5 s.
timed "$work/out" "$xftp" -q get $url/big "$work/fast"
[ "$ms" -lt 2500 ] || fail "an unpaced get took $ms ms"
pass "unpaced, the get takes $ms ms"

# Text: one line per interval, then the summary.
timed "$work/out" "$xftp" -i 0.5 -R 400M get $url/big "$work/text"
n=$(grep -cE '^\[ *[0-9.]+- *[0-9.]+ s\] +[0-9]+ bytes +[0-9.]+ MB/s' "$work/out" || true)
[ "$n" -ge 2 ] || fail "text -i 0.5: $n interval lines: $(cat "$work/out")"
tail -n1 "$work/out" | grep -q '^xftp get: 1 file' || fail "text: the summary: $(cat "$work/out")"
pass "text -i 0.5: $n interval lines, then the summary"

# A stop ends a paced wait at once: at 8M the get would take a minute.
status=0
t0=$(date +%s%N)
timeout --foreground --preserve-status -s INT 1 "$xftp" -q -R 8M get $url/big "$work/slow" 2>"$work/err" || status=$?
ms=$((($(date +%s%N) - t0) / 1000000))
[ "$status" -eq 130 ] || fail "a stopped paced get: status $status: $(cat "$work/err")"
[ "$ms" -le 1800 ] || fail "a stopped paced get took $ms ms after a stop at 1 s"
grep -q stopped "$work/err" || fail "a stopped paced get: $(cat "$work/err")"
pass "SIGINT ends a paced get in $ms ms (status 130)"

expect_error "-R with no rate" "-R: 'fast' is not a rate in bits/s" \
	"$xftp" -R fast get $url/big "$work/x"
expect_error "-R 0" "-R: '0' is not a rate in bits/s" "$xftp" -R 0 get $url/big "$work/x"
expect_error "-R -5M" "-R: '-5M' is not a rate in bits/s" "$xftp" -R -5M get $url/big "$work/x"
expect_error "-i 0" "-i: '0' is not a duration" "$xftp" -i 0 get $url/big "$work/x"
expect_error "-i soon" "-i: 'soon' is not a duration" "$xftp" -i soon get $url/big "$work/x"
expect_error "-R with ls" "ls: -R applies to get and put" "$xftp" -R 1M ls $url/
expect_error "-i with cp" "cp: -i applies to get and put" "$xftp" -i 1 cp $url/big $url/copy
echo "all $checks checks passed"
