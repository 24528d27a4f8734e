# Commits are one act per name: two `stripe put -f` of one name at once always leave one
# of the two whole, and a get racing puts reads a whole old or new file. A put waiting for
# the commit lock that someone else keeps still stops on SIGTERM.
source "$DS_SRC/tests/integration/lib.sh"
stripe=$DS_BIN/stripe
mkdir -p "$work"/d{0..2}
D=$work/d0,$work/d1,$work/d2
head -c 300000 /dev/urandom >"$work/a"
head -c 250000 /dev/urandom >"$work/b"
"$stripe" put -u 64K "$work/a" "$D" f >/dev/null || fail "first put"

for round in $(seq 30); do
	"$stripe" put -f -u 64K "$work/a" "$D" f >/dev/null 2>"$work/err.a" &
	pid_a=$!
	"$stripe" put -f -u 64K "$work/b" "$D" f >/dev/null 2>"$work/err.b" || fail "round $round: put b: $(cat "$work/err.b")"
	wait "$pid_a" || fail "round $round: put a: $(cat "$work/err.a")"
	"$stripe" get "$D" f "$work/got" >/dev/null 2>"$work/err" || fail "round $round: get: $(cat "$work/err")"
	cmp -s "$work/got" "$work/a" || cmp -s "$work/got" "$work/b" || fail "round $round: neither put whole"
	"$stripe" verify --data "$D" f >/dev/null 2>"$work/err" || fail "round $round: verify: $(cat "$work/err")"
done
pass "30 rounds of two puts of one name at once: one of them whole each time"

# Puts back to back while gets read the name: each get whole.
(
	for _ in $(seq 150); do
		"$stripe" put -f -u 64K "$work/a" "$D" f >/dev/null 2>&1
		"$stripe" put -f -u 64K "$work/b" "$D" f >/dev/null 2>&1
	done
) &
writer=$!
gets=0
while kill -0 "$writer" 2>/dev/null && [ "$gets" -lt 300 ]; do
	rm -f "$work/got"
	"$stripe" get "$D" f "$work/got" >/dev/null 2>"$work/err" || fail "get $gets racing puts: $(cat "$work/err")"
	cmp -s "$work/got" "$work/a" || cmp -s "$work/got" "$work/b" || fail "get $gets racing puts: no whole version"
	gets=$((gets + 1))
done
wait "$writer" || true
[ "$gets" -ge 20 ] || fail "only $gets gets ran while the puts did"
pass "$gets gets racing puts: each a whole version"
"$stripe" fsck "$D" >"$work/out" 2>&1 || fail "fsck: $(cat "$work/out")"
"$stripe" verify --data "$D" f >/dev/null || fail "f does not verify at the end"
pass "fsck and verify clean after the races"

# The commit lock is member 0's directory, flocked: a put that waits for it ends on SIGTERM.
flock -x "$work/d0" sleep 30 >/dev/null 2>&1 &
holder=$!
sleep 0.3
start=$(date +%s%N)
status=0
timeout --preserve-status -s TERM 1 "$stripe" put -f -u 64K "$work/b" "$D" f >/dev/null 2>"$work/err" || status=$?
took=$((($(date +%s%N) - start) / 1000000))
kill_tree "$holder"
[ "$status" -eq 143 ] || fail "put waiting for the lock: exit $status, expected 143: $(cat "$work/err")"
[ "$took" -lt 3000 ] || fail "put waiting for the lock took $took ms to stop"
"$stripe" verify --data "$D" f >/dev/null || fail "f does not verify after the stopped put"
pass "a put waiting for the commit lock stops on SIGTERM ($took ms), the file whole"
