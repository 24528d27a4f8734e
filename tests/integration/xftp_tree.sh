#!/bin/bash
# xftp with trees: several files at once (-j), modification times kept both ways,
# --update that moves only what changed, a copy that goes on past a file it cannot read,
# globs and several sources.
. "$(dirname "$0")/xftp_lib.sh"
command -v jq >/dev/null || fail "jq is not installed"

root=$work/xs
start_xftpd 2130 "$root"
url=ftp://bob:secret@127.0.0.1:2130
cd "$work"

# times DIR: "path mtime" of every file below DIR, sorted.
times() {
	(cd "$1" && find . -type f -printf '%p %T@\n' | sed 's/\.[0-9]*$//' | sort)
}
# stamps DIR: "path inode ctime" of every file: a file rewritten or replaced changes them.
stamps() {
	(cd "$1" && find . -type f -printf '%p %i %C@\n' | sort)
}

# The tree: 200 files in four directories, one of them larger than a block (-b 1M), with
# times of their own in the past.
for d in a b c d; do
	mkdir -p "$root/tree/$d"
	for i in $(seq 1 50); do
		make_file "$root/tree/$d/f$i" $((i * 997))
		touch -d "2024-0$((RANDOM % 9 + 1))-1$((RANDOM % 9)) 12:34:5$((RANDOM % 10))" "$root/tree/$d/f$i"
	done
done
make_file "$root/tree/a/f1" $((3 * 1048576 + 5))
touch -d '2023-05-06 07:08:09' "$root/tree/a/f1"
chown -R nobody "$root"

"$xftp" --json -b 1M -r get $url/tree "$work/got" >"$work/json"
diff -r "$root/tree" "$work/got" >/dev/null || fail "-r get: the copy differs"
jq -e '.files == 200 and .failed == 0' "$work/json" >/dev/null || fail "-r get: $(cat "$work/json")"
pass "-r get of 200 files in 4 directories gives the same tree"
[ "$(times "$root/tree")" = "$(times "$work/got")" ] || fail "-r get: times differ: $(diff <(times "$root/tree") <(times "$work/got") | head -4)"
pass "-r get keeps every file's modification time"
[ -z "$(find "$work/got" -name '.*xftp-part')" ] || fail "-r get left partial files"

# Files whose names cannot be taken (a directory there): they fail, each named and none
# counted as copied, and every other file of their batch, synced with them, still takes
# its name.
mkdir -p "$work/blocked/b/f7" "$work/blocked/d/f30" && touch "$work/blocked/b/f7/keep"
status=0
"$xftp" -q -b 1M -r get $url/tree "$work/blocked" 2>"$work/err" || status=$?
[ "$status" -ne 0 ] && grep -q 'b/f7: Is a directory' "$work/err" &&
	grep -q 'd/f30: Is a directory' "$work/err" && grep -q '2 failed, 198 of 200 files copied' "$work/err" ||
	fail "names taken by directories: status $status: $(cat "$work/err")"
named=$(find "$work/blocked" -type f ! -name '.*' ! -path '*/f7/keep' | wc -l)
partials=$(find "$work/blocked" -name '.*xftp-part' | wc -l)
[ "$named" -eq 198 ] && [ "$partials" -eq 2 ] || fail "names taken by directories: $named files named, $partials left partial"
pass "names taken by directories fail those files only, each named: the other 198 of their batch take theirs"
# The same in a batch flushed mid-run (1024 files), in a worker's thread.
mkdir -p "$root/many"
for i in $(seq 1 1100); do echo "$i" >"$root/many/f$i"; done
chown -R nobody "$root/many"
mkdir -p "$work/many/f3" "$work/many/f500" "$work/many/f1099"
status=0
"$xftp" -q -r get $url/many "$work/many" 2>"$work/err" || status=$?
[ "$status" -ne 0 ] && grep -q '3 failed, 1097 of 1100 files copied' "$work/err" &&
	[ "$(grep -c ': Is a directory' "$work/err")" -eq 3 ] ||
	fail "names taken in a batch flushed mid-run: status $status: $(cat "$work/err")"
[ "$(find "$work/many" -type f ! -name '.*' | wc -l)" -eq 1097 ] || fail "names taken in a batch flushed mid-run: not 1097 files named"
pass "names taken in a batch flushed mid-run: each of the 3 named, the other 1097 take theirs"

before=$(stamps "$work/got")
"$xftp" --json -r --update get $url/tree "$work/got" >"$work/json"
jq -e '.files == 0 and .skipped == 200 and .bytes == 0' "$work/json" >/dev/null ||
	fail "--update get of an unchanged tree: $(cat "$work/json")"
[ "$before" = "$(stamps "$work/got")" ] || fail "--update get rewrote files"
pass "--update get of an unchanged tree moves and rewrites nothing"

# One file changed on the server, its size kept: only it comes again.
make_file "$root/tree/c/f7" $((7 * 997))
chown nobody "$root/tree/c/f7"
"$xftp" --json -r -u get $url/tree "$work/got" >"$work/json"
jq -e '.files == 1 and .skipped == 199' "$work/json" >/dev/null || fail "--update after a change: $(cat "$work/json")"
diff -r "$root/tree" "$work/got" >/dev/null || fail "--update after a change: the copy differs"
pass "--update get fetches only the file that changed on the server"

# Up: the local tree to a new directory, times kept there; again with --update: nothing.
"$xftp" --json -r put "$work/got" $url/up >"$work/json"
jq -e '.files == 200 and .failed == 0' "$work/json" >/dev/null || fail "-r put: $(cat "$work/json")"
diff -r "$work/got" "$root/up" >/dev/null || fail "-r put: the server's copy differs"
[ "$(times "$work/got")" = "$(times "$root/up")" ] || fail "-r put: times differ: $(diff <(times "$work/got") <(times "$root/up") | head -4)"
pass "-r put gives the same tree with the same modification times (MFMT)"
before=$(stamps "$root/up")
"$xftp" --json -r --update put "$work/got" $url/up >"$work/json"
jq -e '.files == 0 and .skipped == 200' "$work/json" >/dev/null || fail "--update put: $(cat "$work/json")"
[ "$before" = "$(stamps "$root/up")" ] || fail "--update put rewrote files on the server"
pass "--update put of an unchanged tree rewrites nothing"

# A file the server cannot read: the other 199 come, the one is named, status 1.
chmod 000 "$root/tree/b/f9"
rm -rf "$work/got2"
status=0
"$xftp" -q -j 3 -r get $url/tree "$work/got2" 2>"$work/err" || status=$?
[ "$status" -eq 1 ] || fail "get with an unreadable file: status $status: $(cat "$work/err")"
[ "$(find "$work/got2" -type f | wc -l)" -eq 199 ] || fail "get with an unreadable file: $(find "$work/got2" -type f | wc -l) files"
grep -q 'b/f9' "$work/err" || fail "get did not name the unreadable file: $(cat "$work/err")"
[ "$(wc -l <"$work/err")" -eq 1 ] || fail "get: more than one error line: $(cat "$work/err")"
pass "get goes on past a file the server cannot read: $(cat "$work/err")"
chmod 644 "$root/tree/b/f9"

# The same for put, as a user who cannot read one local file.
cp -a "$work/got" "$work/mine"
chown -R nobody "$work/mine"
chmod 000 "$work/mine/d/f3"
chown root "$work/mine/d/f3"
status=0
HOME=$work setpriv --reuid=nobody --regid=nogroup --clear-groups \
	"$xftp" -q -r put "$work/mine" $url/up2 2>"$work/err" || status=$?
[ "$status" -eq 1 ] || fail "put with an unreadable file: status $status: $(cat "$work/err")"
[ "$(find "$root/up2" -type f | wc -l)" -eq 199 ] || fail "put with an unreadable file: $(find "$root/up2" -type f | wc -l) files"
grep -q 'd/f3' "$work/err" || fail "put did not name the unreadable file: $(cat "$work/err")"
pass "put goes on past a file it cannot read: $(cat "$work/err")"

# Links and FIFOs in a tree are named as not copied, never left out without a word.
mkdir -p "$work/odd"
make_file "$work/odd/plain" 1000
ln -s plain "$work/odd/link"
mkfifo "$work/odd/fifo"
status=0
"$xftp" -q -r put "$work/odd" $url/odd 2>"$work/err" || status=$?
[ "$status" -eq 1 ] && cmp -s "$work/odd/plain" "$root/odd/plain" && [ ! -e "$root/odd/link" ] &&
	grep -q 'odd/link: a symbolic link: not copied' "$work/err" &&
	grep -q 'odd/fifo: not a regular file: not copied' "$work/err" ||
	fail "put of a tree with a link and a FIFO: status $status: $(cat "$work/err")"
pass "put names a tree's link and FIFO as not copied, exit 1: $(tr '\n' ' ' <"$work/err")"

# Globs in the last part, and several sources into one directory.
mkdir "$work/some"
"$xftp" --json get "$url/tree/a/f1?" "$work/some" >"$work/json"
jq -e '.files == 10' "$work/json" >/dev/null || fail "a glob: $(cat "$work/json")"
[ "$(ls "$work/some" | sort | tr '\n' ' ')" = "f10 f11 f12 f13 f14 f15 f16 f17 f18 f19 " ] ||
	fail "a glob fetched: $(ls "$work/some")"
pass "a glob in the last part fetches just the names it matches"
mkdir "$work/two"
"$xftp" -q get $url/tree/a/f2 $url/tree/b/f3 "$work/two"
cmp -s "$root/tree/a/f2" "$work/two/f2" && cmp -s "$root/tree/b/f3" "$work/two/f3" ||
	fail "two sources: $(ls "$work/two")"
pass "several sources go into one directory"
expect_error "several sources, DEST no directory" "not a directory" \
	"$xftp" -q get $url/tree/a/f2 $url/tree/b/f3 "$work/two/f2"
expect_error "a glob that matches nothing" "nothing on the server matches" \
	"$xftp" -q get "$url/tree/a/*.h5" "$work/some"
"$xftp" -q put "$work/two/f2" "$work/two/f3" $url/pair
cmp -s "$root/pair/f2" "$work/two/f2" && cmp -s "$root/pair/f3" "$work/two/f3" ||
	fail "put of two sources: $(ls "$root/pair")"
pass "put of several sources into one remote directory"
# Names that would meet: a file on the server named as x's partial, and two sources of
# one name. The other file is never harmed; what cannot be copied is named.
mkdir -p "$root/meet/a" "$root/meet/b"
printf 'the real x\n' >"$root/meet/x"
printf 'not x at all, and longer\n' >"$root/meet/.x.xftp-part"
make_file "$root/meet/a/f" 3000000
make_file "$root/meet/b/f" 3500000
chown -R nobody "$root/meet"
status=0
"$xftp" -q -j 1 -r get $url/meet "$work/meet" 2>"$work/err" || status=$?
[ "$status" -eq 1 ] && cmp -s "$root/meet/x" "$work/meet/x" && grep -q 'partial downloads' "$work/err" ||
	fail "a partial's name on the server: status $status, x: $(cat "$work/meet/x"): $(cat "$work/err")"
pass "a server's file named as a partial is not copied and x stays whole: $(cat "$work/err")"
mkdir "$work/one"
status=0
"$xftp" -q -j 2 -b 1M get $url/meet/a/f $url/meet/b/f "$work/one" 2>"$work/err" || status=$?
[ "$status" -eq 1 ] && cmp -s "$root/meet/a/f" "$work/one/f" &&
	grep -q 'same destination as another source: not copied (1 of 2 files copied)$' "$work/err" ||
	fail "two sources of one name: status $status: $(cat "$work/err")"
pass "two sources of one name: the first copied whole, the second named: $(cat "$work/err")"
# The same for a put: the one not copied still counts among the files asked for.
mkdir -p "$work/meet-up/a" "$work/meet-up/b"
make_file "$work/meet-up/a/f" 3000
make_file "$work/meet-up/b/f" 4000
expect_error "put of two sources of one name" \
	"b/f: the same destination as another source: not copied \(1 of 2 files copied\)$" \
	"$xftp" -q put "$work/meet-up/a/f" "$work/meet-up/b/f" $url/pair/
cmp -s "$root/pair/f" "$work/meet-up/a/f" || fail "put of two sources of one name: the first not copied whole"

# Under TLS, a tree of small and large files both ways: small files over a kept connection
# leave the session resumable for the large ones' new connections.
(cd "$work" && make_ca_and_server)
"$DS_BIN/xftpd" -p 2131 --listen 127.0.0.1 --root "$root" --users "$work/users" \
	--tls-cert "$work/srv.pem" --tls-key "$work/srv.key" --tls-required >>"$work/xftpd.tls.log" 2>&1 &
wait_listening 2131
mkdir -p "$root/mixed"
for i in 1 2 3; do make_file "$root/mixed/s$i" 1000; done
make_file "$root/mixed/big" 20000000
make_file "$root/mixed/s4" 1000
chown -R nobody "$root/mixed"
"$xftp" -q -j 1 -b 1M --cacert "$work/ca.pem" -r get \
	ftp://bob:secret@127.0.0.1:2131/mixed "$work/mixed" ||
	fail "a TLS tree of small and large files: $(cat "$work/xftpd.tls.log" | tail -3)"
diff -r "$root/mixed" "$work/mixed" >/dev/null || fail "a TLS tree get: the copy differs"
"$xftp" -q -j 1 -b 1M --cacert "$work/ca.pem" -r put "$work/mixed" ftp://bob:secret@127.0.0.1:2131/mixed2 ||
	fail "a TLS tree put of small and large files"
diff -r "$work/mixed" "$root/mixed2" >/dev/null || fail "a TLS tree put: the copy differs"
pass "TLS: small and large files of one tree, both ways, whole"

# A kept data connection lost (a firewall's idle timer): between files the server answers
# 425 and xftp asks for a new one; in the middle of a file, the file is sent once more.
# Either way the whole tree comes.
slow_loopback 40mbit
rm -rf "$work/lost"
"$xftp" -q -j 1 -r get $url/tree "$work/lost" 2>"$work/err" &
getter=$!
sleep 0.5
ss -K -tn state established '( sport != :2130 and dport != :2130 )' >"$work/killed" 2>&1 || true
status=0
wait $getter || status=$?
slow_loopback off
[ "$status" -eq 0 ] || fail "a lost kept connection: status $status: $(head -5 "$work/err")"
diff -r "$root/tree" "$work/lost" >/dev/null || fail "a lost kept connection: the copy differs"
pass "a kept connection cut mid-tree: the whole tree comes ($(tail -n +2 "$work/killed" | grep -c . || true) socket ends cut)"

# Only xftpd's end of a data connection reset mid-file (a middlebox's RST towards the
# server): xftp's end gets the RST (ECONNRESET or EPIPE) and xftpd answers 426, its view
# of the same cut and no failure of its own, so the tree sends that file once more, both
# ways, and comes whole. (Were the 426 to take the place of the cut, the tree would fail:
# "RETR: 426 Transfer failed: ... Broken pipe. (2 of 3 files copied)".) Socket buffers of
# one 256K block each side and xftp paced to 32 Mbit/s keep xftpd about a MB ahead of an
# 8 MB file: its end is reset with over a second of the file still to send.
"$DS_BIN/xftpd" -p 2134 --listen 127.0.0.1 --root "$root" --users "$work/users" -b 256K \
	--pasv-ports 2140-2149 >>"$work/xftpd.2134.log" 2>&1 &
wait_listening 2134
mkdir -p "$root/reset/a"
make_file "$root/reset/a/big" 8000000
make_file "$root/reset/s1" 1000
make_file "$root/reset/s2" 2000
chown -R nobody "$root/reset"
reset_url=ftp://bob:secret@127.0.0.1:2134
for dir in get put; do
	if [ $dir = get ]; then
		from=$reset_url/reset to=$work/reset copy=$work/reset verb=RETR path=/reset/a/big
	else
		from=$work/reset to=$reset_url/reset-up copy=$root/reset-up verb=STOR path=/reset-up/a/big
	fi
	status=0
	"$xftp" --json -q -j 1 -b 256K -R 32M -r $dir "$from" "$to" >"$work/json" 2>"$work/err" &
	copier=$!
	reset_server_end 2140 2149 262144 >"$work/killed"
	wait $copier || status=$?
	[ "$status" -eq 0 ] || fail "xftpd's end of a data connection reset ($dir): status $status: $(cat "$work/err")"
	jq -e '.files == 3 and .failed == 0' "$work/json" >/dev/null ||
		fail "xftpd's end reset ($dir): $(cat "$work/json")"
	diff -r "$root/reset" "$copy" >/dev/null || fail "xftpd's end reset ($dir): the copy differs"
	# xftpd's log: the file cut once, at the reset, then sent whole once more.
	cut=$(grep -c " $verb $path [0-9]* bytes .* \(cut\|kept partial\|partial discarded\)\$" "$work/xftpd.2134.log" || true)
	whole=$(grep -c " $verb $path 8000000 bytes .* ok\$" "$work/xftpd.2134.log" || true)
	[ "$cut" -eq 1 ] || fail "xftpd's end reset ($dir): $path cut $cut times (reset: $(cat "$work/killed"))"
	[ "$whole" -eq 1 ] || fail "xftpd's end reset ($dir): $path whole $whole times: $(cat "$work/xftpd.2134.log")"
	pass "$dir: only xftpd's end of a data connection reset mid-file ($(awk '{ print $3 }' "$work/killed")): the file sent again, the whole tree comes"
done

# Ctrl-C in the middle of a tree: status 130, every file under its name whole, and
# --update brings the rest.
slow_loopback 40mbit
rm -rf "$work/cut"
"$xftp" -q -r get $url/tree "$work/cut" 2>"$work/err" &
cutter=$!
sleep 1
kill -INT $cutter
status=0
wait $cutter || status=$?
slow_loopback off
[ "$status" -eq 130 ] || fail "a stopped tree get: status $status: $(cat "$work/err")"
grep -q 'stopped: [0-9]* of 200 files copied' "$work/err" || fail "a stopped tree get said: $(cat "$work/err")"
(cd "$work/cut" && find . -type f ! -name '.*' | while read -r f; do
	cmp -s "$f" "$root/tree/$f" || echo "$f"
done) >"$work/bad"
[ ! -s "$work/bad" ] || fail "a stopped tree get left files not whole: $(cat "$work/bad")"
"$xftp" -q -r --update get $url/tree "$work/cut"
diff -r "$root/tree" "$work/cut" >/dev/null || fail "--update after a stop: the copy differs"
pass "Ctrl-C mid-tree: status 130, $(cat "$work/err"); what has its name is whole; --update ends the copy"
# A listing that outlasts the server's idle time (--idle 2): the workers, logged in as it
# began, were dropped meanwhile (421), and log in again for their first file. The session
# that lists is held in turns, as a slow listing would be; the workers sit idle throughout.
mkdir -p "$work/xi/wide"
for i in $(seq 1 1000); do # listed in about a second: held before it ends
	mkdir "$work/xi/wide/d$i"
	echo "$i" >"$work/xi/wide/d$i/f"
done
chown -R nobody "$work/xi"
"$DS_BIN/xftpd" -p 2132 --listen 127.0.0.1 --root "$work/xi" --users "$work/users" --idle 2 \
	>>"$work/xftpd.2132.log" 2>&1 &
idle_pid=$!
wait_listening 2132
"$xftp" -q -r get ftp://bob:secret@127.0.0.1:2132/wide "$work/wide" 2>"$work/err" &
getter=$!
for _ in $(seq 500); do
	[ "$(pgrep -P $idle_pid | wc -l)" -ge 4 ] && break
	sleep 0.01
done
sessions=$(pgrep -P $idle_pid | wc -l)
switches() { awk '/^voluntary_ctxt_switches/ { print $2 }' "/proc/$1/status" 2>/dev/null || echo 0; }
# The session that lists is the busy one: the workers wait for their first file.
lister=$(for pid in $(pgrep -P $idle_pid); do echo "$(switches "$pid") $pid"; done | sort -n |
	tail -1 | cut -d' ' -f2)
# Turns of 1.2 s, each ended once the lister has served a few commands (its context
# switches): the lister is never idle 2 s, the workers are, until one is dropped.
for _ in 1 2 3 4 5; do
	[ "$(pgrep -P $idle_pid | wc -l)" -ge "$sessions" ] || break
	kill -STOP "$lister" 2>/dev/null || break # the listing may have ended
	sleep 1.2
	before=$(switches "$lister")
	kill -CONT "$lister"
	for _ in $(seq 500); do
		[ "$(switches "$lister")" -ge $((before + 4)) ] && break
		sleep 0.01
	done
done
status=0
wait $getter || status=$?
kill $idle_pid
[ "$status" -eq 0 ] || fail "a listing longer than the server's idle time: status $status: $(head -5 "$work/err")"
# Held past the idle time, the workers were dropped and logged in again: more logins than
# the sessions there were. Else the listing ended too soon, and nothing was shown.
logins=$(grep -c ' logged in' "$work/xftpd.2132.log")
[ "$logins" -gt "$sessions" ] ||
	fail "the workers were not dropped while the listing was held: $logins logins for $sessions sessions"
diff -r "$work/xi/wide" "$work/wide" >/dev/null || fail "a listing longer than the server's idle time: the copy differs"
pass "a listing longer than the server's idle time: the idle workers log in again, the whole tree comes"

# The same for a put whose local scan outlasts the server's idle time (each stat held back
# 0.1 s by strace, 40 files): the first connection, which made the remote directory and
# then waited for the scan, is logged in again too, not failed with its 421.
mkdir -p "$work/xp/long" "$work/xpr"
for i in $(seq 1 40); do echo "$i" >"$work/xp/long/f$i"; done
chown nobody "$work/xpr"
"$DS_BIN/xftpd" -p 2133 --listen 127.0.0.1 --root "$work/xpr" --users "$work/users" --idle 2 \
	>>"$work/xftpd.2133.log" 2>&1 &
idle_pid=$!
wait_listening 2133
status=0
"${strace_cmd[@]}" -f -qq -o /dev/null -e trace=newfstatat,statx,lstat,stat \
	-e inject=newfstatat,statx,lstat,stat:delay_enter=100000 \
	"$xftp" -q -r put "$work/xp/long" ftp://bob:secret@127.0.0.1:2133/long 2>"$work/err" ||
	status=$?
kill $idle_pid
[ "$status" -eq 0 ] || fail "a put whose scan outlasts the server's idle time: status $status: $(head -5 "$work/err")"
diff -r "$work/xp/long" "$work/xpr/long" >/dev/null || fail "a put whose scan outlasts the server's idle time: the copy differs"
pass "a put whose local scan outlasts the server's idle time: its connections log in again, the whole tree goes"
echo "xftp_tree: $checks checks passed"
