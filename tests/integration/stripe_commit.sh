# The commit point: a put killed (SIGKILL, by strace fault injection) at each fsync and
# each rename of its commit leaves the old file or the new one complete, never neither;
# `put -f` never loses both; leftovers are swept by fsck and by the next put. An rm killed
# after removing member 0 leaves a file ls calls damaged, and rm again removes the rest.
source "$DS_SRC/tests/integration/lib.sh"
stripe=$DS_BIN/stripe
command -v strace >/dev/null || fail "strace is not installed (packages.txt)"
mkdir -p "$work"/d{0..3}
D=$work/d0,$work/d1,$work/d2,$work/d3
head -c 3000000 /dev/urandom >"$work/old"
head -c 2000000 /dev/urandom >"$work/new"

# killed_put SYSCALL N: put -f new over old, SIGKILLed as it makes its Nth SYSCALL.
# Prints "killed" or "completed".
killed_put() {
	local status=0
	strace -f -qq -o /dev/null -e trace="$1" -e inject="$1":signal=KILL:when="$2" \
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

renames=rename,renameat,renameat2 # glibc picks one by the flags
for call in fsync $renames; do
	seen_old=0 seen_new=0
	for ((n = 1; n <= 40; n++)); do
		rm -rf "$work"/d?/* "$work"/d?/.dstmp.* 2>/dev/null || true
		"$stripe" put -u 64K "$work/old" "$D" f >/dev/null
		outcome=$(killed_put "$call" "$n")
		got=$(which_file "$call #$n")
		[ "$got" = old ] && seen_old=$((seen_old + 1))
		[ "$got" = new ] && seen_new=$((seen_new + 1))
		"$stripe" ls "$D" >"$work/ls" || fail "$call #$n: ls says damaged: $(cat "$work/ls")"
		"$stripe" fsck "$D" >"$work/fsck" || fail "$call #$n: fsck: $(cat "$work/fsck")"
		[ -z "$(ls -A "$work"/d? | grep '^\.dstmp\.' || true)" ] || fail "$call #$n: fsck left temporaries"
		[ "$(which_file "$call #$n after fsck")" = "$got" ] || fail "$call #$n: fsck changed the file"
		"$stripe" put -f "$work/new" "$D" f >/dev/null || fail "$call #$n: the next put failed"
		[ "$(which_file "$call #$n next put")" = new ] || fail "$call #$n: next put"
		[ "$outcome" = completed ] && break
	done
	[ "$outcome" = completed ] || fail "$call: the put never completed within 40 injections"
	[ "$seen_old" -gt 0 ] && [ "$seen_new" -gt 1 ] ||
		fail "$call: kills gave old $seen_old times, new $seen_new times: the commit is not in between"
	pass "put killed at each of $((n - 1)) calls of $call: old file $seen_old times, new file $((seen_new - 1)) times, never neither"
done

# A commit cut short after member 0: the other members are found under their temporary
# names, and the next put of that name (not only fsck) puts them in place.
rm -rf "$work"/d?/* "$work"/d?/.dstmp.* 2>/dev/null || true
"$stripe" put -u 64K "$work/old" "$D" f >/dev/null
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

echo "all $checks checks passed"
