#!/bin/bash
# Two xftp runs into one place at once (a cron job that overlaps the last run, or two
# names that differ only in case on a file system that ignores case): a partial being
# written, or written and waiting for its name in a tree's batch, is the first run's
# alone. The second run fails that file with one line; the first one's copy stays whole.
. "$(dirname "$0")/xftp_lib.sh"
command -v flock >/dev/null || fail "flock is not installed (util-linux)"
command -v strace >/dev/null || fail "strace is not installed (packages.txt)"

# strace, for runs whose system calls are held back (lib.sh).
traced=("${strace_cmd[@]}")

root=$work/xs
start_xftpd 2137 "$root"
url=ftp://bob:secret@127.0.0.1:2137
mkdir -p "$root/tree" "$work/got"
make_file "$root/big" $((8 * 1048576))
make_file "$root/tree/a" 70000
make_file "$root/tree/z" $((6 * 1048576))
chown -R nobody "$root"

# A partial another process holds (flock, as xftp holds its own) is not taken over.
part="$work/got/.held.xftp-part"
: >"$part"
(
	exec 9<>"$part"
	flock -x 9
	exec sleep 30 # holds the lock until killed
) &
holder=$!
for _ in $(seq 50); do flock -n "$part" true || break; sleep 0.1; done
expect_error "a held partial" "another transfer is writing it" "$xftp" -q get "$url/big" "$work/got/held"
[ -f "$part" ] && [ ! -s "$part" ] && [ ! -e "$work/got/held" ] ||
	fail "a held partial was touched or a file took its name"
kill "$holder"
wait "$holder" 2>/dev/null || true

# A partial named (or removed) by the run that held it while a second run had it open,
# waiting on its lock (strace holds that flock() back 4 s), is no longer the partial: the
# second must not lock and write the named file, nor rename the partial a third run has
# begun meanwhile over it.
part="$work/got/.named.xftp-part"
cp "$root/tree/a" "$part" # the first run's copy, whole, about to take its name
(
	exec 9<>"$part"
	flock -x 9
	while [ ! -e "$work/named-go" ]; do sleep 0.05; done
	mv "$part" "$work/got/named" # named; the lock goes with this process
) &
holder=$!
"${traced[@]}" -f -qq -o /dev/null -e trace=flock -e inject=flock:delay_enter=4000000:when=1 \
	"$xftp" -q --resume get "$url/tree/a" "$work/got/named" >/dev/null 2>"$work/second.err" &
second=$!
for _ in $(seq 200); do
	ls -l /proc/"$(pgrep -P $second)"/fd 2>/dev/null | grep -q -- "$part" && break
	sleep 0.05
done
touch "$work/named-go"
wait "$holder"
echo "the third run's" >"$part"
(
	exec 9<>"$part"
	flock -x 9
	exec sleep 30
) &
third=$!
for _ in $(seq 50); do flock -n "$part" true || break; sleep 0.1; done
wait "$second" && fail "a second run over a partial named under it succeeded"
grep -q "another transfer is writing it" "$work/second.err" ||
	fail "a second run over a partial named under it: $(cat "$work/second.err")"
cmp -s "$root/tree/a" "$work/got/named" || fail "a partial's lock was taken after its name"
[ "$(cat "$part")" = "the third run's" ] || fail "a partial another run holds was taken"
kill "$third"
wait "$third" 2>/dev/null || true
pass "a partial named while a second run waited for its lock is not the second's"

# A partial a run has just created, taken by a second run before the first could lock and
# mark it (strace holds the first's flock() back 5 s, and the second's first look at the
# marks 8 s, the lock held): the first fails that file, and the second writes it rather
# than leave an empty file no later run would take without --resume.
part="$work/got/.taken.xftp-part"
"${traced[@]}" -f -qq -o /dev/null -e trace=flock -e inject=flock:delay_enter=5000000:when=1 \
	"$xftp" -q get "$url/tree/a" "$work/got/taken" >/dev/null 2>"$work/creator.err" &
creator=$!
for _ in $(seq 200); do [ -e "$part" ] && break; sleep 0.05; done
"${traced[@]}" -f -qq -o /dev/null -e trace=fgetxattr -e inject=fgetxattr:delay_enter=8000000:when=1 \
	"$xftp" -q get "$url/tree/a" "$work/got/taken" >/dev/null 2>"$work/taker.err" &
taker=$!
wait "$creator" && fail "a run whose new partial was taken before its lock succeeded"
grep -q "another transfer is writing it" "$work/creator.err" ||
	fail "a run whose new partial was taken: $(cat "$work/creator.err")"
wait "$taker" || fail "a run that took a partial just created failed: $(cat "$work/taker.err")"
[ ! -e "$part" ] || fail "a partial taken as it was created was left behind"
same "$root/tree/a" "$work/got/taken" "a partial taken as it was created is written whole"

# Every batch a tree has taken out to flush keeps its files' descriptors open while the
# flush before it runs (strace makes each syncfs() take 0.3 s): a tree of many small files
# with -j 4 under a limit of 48 descriptors never runs out of them.
mkdir -p "$root/many"
for i in $(seq 120); do echo "file $i" >"$root/many/f$i"; done
chown -R nobody "$root/many"
(
	ulimit -n 48
	"${traced[@]}" -f -qq -o /dev/null -e trace=syncfs -e inject=syncfs:delay_enter=300000 \
		"$xftp" -q -j 4 -r get "$url/many" "$work/got/many"
) 2>"$work/many.err" || fail "a tree of small files under a low limit: $(head -3 "$work/many.err")"
diff -r "$root/many" "$work/got/many" >/dev/null || fail "the tree of small files differs"
pass "a tree's batches waiting to be flushed hold no more descriptors than it may open"

# A second get of a file the first is still fetching: refused, the first comes whole.
"$xftp" -q -R 12M get "$url/big" "$work/got/big" &
first=$!
wait_size "$work/got/.big.xftp-part" 0
expect_error "a second get of a file being fetched" "another transfer is writing it" \
	"$xftp" -q get "$url/big" "$work/got/big"
wait "$first" || fail "the first get failed beside the second"
same "$root/big" "$work/got/big" "the first get's copy is whole beside a refused second"

# A tree's small file, written and waiting in its batch (its mode no longer the partial's
# 600) while a large one comes over the other connection: a single get of it meanwhile is
# refused, and the tree's copy takes its name whole.
"$xftp" -q -j 2 -R 12M -r get "$url/tree" "$work/got/tree" &
first=$!
waiting=$work/got/tree/.a.xftp-part
for _ in $(seq 100); do
	[ "$(stat -c %a "$waiting" 2>/dev/null)" = "$(printf '%o' $((0666 & ~0$(umask))))" ] && break
	sleep 0.1
done
[ -f "$waiting" ] && [ -f "$work/got/tree/.z.xftp-part" ] ||
	fail "the tree's small file is not waiting in its batch beside the large one"
expect_error "a get of a file waiting in a batch" "another transfer is writing it" \
	"$xftp" -q get "$url/tree/a" "$work/got/tree/a"
wait "$first" || fail "the tree get failed beside the single one"
diff -r "$root/tree" "$work/got/tree" >/dev/null || fail "the tree's copy differs"
pass "a file waiting for its name in a tree's batch is not taken over"
