# The commit point: a put killed (SIGKILL, by strace fault injection) at each fsync and
# each rename of its commit leaves the old file or the new one complete, never neither;
# `put -f` never loses both; leftovers are swept by fsck and by the next put. An rm killed
# after removing member 0 leaves a file ls calls damaged, and rm again removes the rest.
source "$DS_SRC/tests/integration/lib.sh"
stripe=$DS_BIN/stripe
command -v strace >/dev/null || fail "strace is not installed (packages.txt)"
# LeakSanitizer cannot run under a tracer (it ptraces the process itself at exit).
export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0
mkdir -p "$work"/d{0..3}
D=$work/d0,$work/d1,$work/d2,$work/d3
head -c 3000000 /dev/urandom >"$work/old"
head -c 2000000 /dev/urandom >"$work/new"

# killed_put SYSCALL N [FOLLOW]: put -f new over old, SIGKILLed as one of its threads
# makes its Nth SYSCALL (strace counts per thread; FOLLOW "no" watches the main thread
# only). Prints "killed" or "completed".
killed_put() {
	local status=0 follow=-f
	[ "${3:-}" = no ] && follow=
	strace $follow -qq -o /dev/null -e trace="$1" -e inject="$1":signal=KILL:when="$2" \
		"$stripe" put -f -u 64K "$work/new" "$D" f >/dev/null 2>&1 || status=$?
	case $status in
	0) echo completed ;;
	137) echo killed ;;
	*) fail "put under strace ($1 #$2) exited $status" ;;
	esac
}

# which_file: get must succeed and give the old or the new file whole.
which_file() {
	"$stripe" get "$D" f "$work/back" >/dev/null 2>"$work/get.err" ||
		fail "$1: get failed: $(cat "$work/get.err")"
	if cmp -s "$work/back" "$work/old"; then
		echo old
	elif cmp -s "$work/back" "$work/new"; then
		echo new
	else
		fail "$1: get gave neither the old nor the new file"
	fi
}

fresh() {
	rm -rf "$work"/d?/* "$work"/d?/.dstmp.* 2>/dev/null || true
	"$stripe" put -u 64K "$work/old" "$D" f >/dev/null
}
# after_kill WHAT: ls, fsck and the next put all cope with what the kill left.
after_kill() {
	local got
	got=$(which_file "$1")
	"$stripe" ls "$D" >"$work/ls" || fail "$1: ls says damaged: $(cat "$work/ls")"
	"$stripe" fsck "$D" >"$work/fsck" || fail "$1: fsck: $(cat "$work/fsck")"
	[ -z "$(ls -A "$work"/d? | grep '^\.dstmp\.' || true)" ] || fail "$1: fsck left temporaries"
	[ "$(which_file "$1 after fsck")" = "$got" ] || fail "$1: fsck changed the file"
	"$stripe" put -f "$work/new" "$D" f >/dev/null || fail "$1: the next put failed"
	[ "$(which_file "$1 next put")" = new ] || fail "$1: next put"
	echo "$got"
}

# fsync: each member's worker syncs its member, then the directory entry (all disks at
# once, before the commit); the main thread syncs member 0's directory after the rename.
for n in 1 2; do
	fresh
	[ "$(killed_put fsync "$n")" = killed ] || fail "put not killed at a worker's fsync #$n"
	[ "$(after_kill "worker fsync #$n")" = old ] || fail "killed at a worker's fsync #$n: not the old file"
done
fresh
[ "$(killed_put fsync 3)" = completed ] || fail "a worker makes more than two fsyncs"
[ "$(after_kill "no fsync killed")" = new ] || fail "completed put: not the new file"
fresh
[ "$(killed_put fsync 1 no)" = killed ] || fail "put not killed at the main thread's fsync"
[ "$(after_kill "commit fsync")" = new ] || fail "killed after the commit rename: not the new file"
pass "put killed at a member's fsync, its directory's fsync (old file) and after the commit (new file)"

renames=rename,renameat,renameat2 # glibc picks one by the flags
seen_old=0 seen_new=0
for ((n = 1; n <= 40; n++)); do
	fresh
	outcome=$(killed_put $renames "$n")
	got=$(after_kill "rename #$n")
	[ "$got" = old ] && seen_old=$((seen_old + 1))
	[ "$got" = new ] && seen_new=$((seen_new + 1))
	[ "$outcome" = completed ] && break
done
[ "$outcome" = completed ] || fail "the put never completed within 40 injected renames"
[ "$seen_old" = 1 ] && [ "$seen_new" -gt 1 ] ||
	fail "kills at renames gave old $seen_old times, new $seen_new times: member 0's rename is not the commit"
pass "put killed at each of its $((n - 1)) renames: old file before member 0's, new file after, never neither"

# A commit cut short after member 0: the other members are found under their temporary
# names, and the next put of that name (not only fsck) puts them in place.
fresh
[ "$(killed_put $renames 2)" = killed ] || fail "put was not killed at its second rename"
ls -A "$work/d3" | grep -q '^\.dstmp\.' || fail "no temporary member after a commit cut short"
[ "$(which_file "commit cut short")" = new ] || fail "commit cut short: not the new file"
"$stripe" put "$work/old" "$D" g >/dev/null
"$stripe" put -f "$work/old" "$D" f >/dev/null
[ -z "$(ls -A "$work"/d? | grep '^\.dstmp\.' || true)" ] || fail "the next put left temporaries"
pass "a commit cut short reads as the new file; the next put sweeps it"

# Uncommitted leftovers: ls shows them as partial; a running put's are left alone.
"$stripe" rm "$D" g >/dev/null
strace -f -qq -o /dev/null -e trace=$renames -e inject=$renames:signal=KILL:when=1 \
	"$stripe" put -u 64K "$work/new" "$D" g >/dev/null 2>&1 || true
"$stripe" ls "$D" >"$work/ls" || true
grep -Eq '^g +partial: uncommitted: left by a put cut short' "$work/ls" || fail "ls: $(cat "$work/ls")"
"$stripe" ls --json "$D" | jq -se 'map(select(.name=="g"))[0].state=="partial"' >/dev/null || fail "ls --json partial"
"$stripe" fsck "$D" | grep -q "^removed (uncommitted): .*/\.dstmp\..*\.g$" || fail "fsck does not say what it removed"
"$stripe" ls "$D" | grep -q '^g ' && fail "fsck left g behind"
pass "ls shows an uncommitted put as partial; fsck removes it"

mkfifo "$work/in"
"$stripe" put - "$D" running <"$work/in" >/dev/null 2>&1 &
running=$!
exec 9>"$work/in"
head -c 100000 /dev/urandom >&9
for _ in $(seq 100); do ls -A "$work/d0" | grep -q '^\.dstmp\..*\.running$' && break; sleep 0.05; done
"$stripe" ls "$D" | grep -Eq '^running +partial: uncommitted: a put is writing it' || fail "ls of a running put"
"$stripe" fsck "$D" >/dev/null
ls -A "$work/d0" | grep -q '^\.dstmp\..*\.running$' || fail "fsck removed a running put's members"
exec 9>&-
wait "$running" || fail "the running put failed after fsck"
"$stripe" verify "$D" running >/dev/null || fail "the running put's file"
pass "fsck leaves a running put alone"

# rm: member 0 goes first and is the commit of the removal.
"$stripe" put "$work/old" "$D" r >/dev/null
strace -f -qq -o /dev/null -e trace=unlink,unlinkat -e inject=unlink,unlinkat:signal=KILL:when=2 \
	"$stripe" rm "$D" r >/dev/null 2>&1 && fail "rm was not killed"
[ ! -e "$work/d0/r" ] || fail "rm cut short: member 0 still there"
status=0
"$stripe" ls "$D" >"$work/ls" || status=$?
[ "$status" = 1 ] || fail "ls of an rm cut short exited $status"
grep -Eq '^r +DAMAGED: member 0 of 4: .*/d0/r: No such file' "$work/ls" || fail "ls: $(cat "$work/ls")"
"$stripe" rm "$D" r >/dev/null
[ -z "$(ls -A "$work"/d? | grep '^r$' || true)" ] || fail "rm again left members"
pass "rm cut short: damaged in ls, removed by rm again"

# mv: member 0's rename is the commit point too. Killed at a link (before it) the file
# keeps its old name; killed at a rename after member 0's, or at an unlink, it has the new.
for case in link:1:m1 link:3:m1 $renames:1:m1 $renames:2:m2 unlink:1:m2; do
	IFS=: read -r calls n want <<<"$case"
	rm -rf "$work"/d?/* "$work"/d?/.dstmp.* 2>/dev/null || true
	"$stripe" put -u 64K "$work/old" "$D" m1 >/dev/null
	strace -f -qq -o /dev/null -e trace="$calls" -e inject="$calls":signal=KILL:when="$n" \
		"$stripe" mv "$D" m1 m2 >/dev/null 2>&1 && fail "mv not killed at $calls #$n"
	"$stripe" get "$D" "$want" - 2>/dev/null | cmp -s - "$work/old" ||
		fail "mv killed at $calls #$n: $want is not the whole file"
	"$stripe" fsck "$D" >/dev/null 2>&1 || true
	"$stripe" get "$D" "$want" - 2>/dev/null | cmp -s - "$work/old" || fail "mv killed at $calls #$n: fsck broke $want"
done
"$stripe" mv "$D" m2 m3
"$stripe" get "$D" m3 - 2>/dev/null | cmp -s - "$work/old" || fail "mv: m3 differs"
"$stripe" ls "$D" | grep -q '^m2 ' && fail "mv: m2 still listed"
pass "mv killed at a link, at member 0's rename, after it and at an unlink: old or new name whole"

echo "all $checks checks passed"
