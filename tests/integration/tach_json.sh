# tach --once --json and tach -i SEC --json, held against what blast and sink report
# themselves: the same tool, role, link and peer; over the same interval the same rate
# within 10% (blast's cumulative bytes, from its -i reports, interpolated at tach's look
# times); at the end, exactly the bytes and messages the tools counted, its streams
# summing to them; and stripe's disks adding up to its put. As root it runs in network
# and mount namespaces of its own (lo and /dev/shm its own).
if [ "$(id -u)" = 0 ] && [ -z "${TACH_TEST_NETNS:-}" ]; then
	exec env TACH_TEST_NETNS=1 unshare -n -m bash -c \
		'ip link set lo up && mount -t tmpfs -o mode=1777 tmpfs /dev/shm && exec bash "$@"' - "$0" "$@"
fi
source "$(dirname "$0")/lib.sh"
port=16721
tach=$DS_BIN/tach

# Bad input first: one line, exit 2.
expect_error "tach: a stray argument" "unexpected argument 'x'" "$tach" x
expect_error "tach: --json alone" "--json is for --once or -i" "$tach" --json
expect_error "tach: --once with -i" "exclusive" "$tach" --once -i 1
expect_error "tach: -n without -i" "-n counts the looks of -i" "$tach" --once -n 3
expect_error "tach: a delay too short" "-d: 0.01 s is out of range" "$tach" --once -d 0.01
expect_error "tach: a bad interval" "-i: 'often' is not a duration" "$tach" -i often
expect_error "tach: no terminal" "needs a terminal" "$tach"

# A reader that goes away (`tach -i 1 | head`) ends tach quietly with status 0, as it ends
# other tools; a stdout that cannot be written is still an error.
for mode in "" --json; do
	# shellcheck disable=SC2086
	{
		timeout 10 "$tach" -i 0.1 $mode 2>"$work/pipe.err"
		echo $? >"$work/pipe.status"
	} | head -n 1 >/dev/null
	[ "$(cat "$work/pipe.status")" = 0 ] && [ ! -s "$work/pipe.err" ] ||
		fail "tach -i 0.1 $mode | head -n 1: status $(cat "$work/pipe.status"), said: $(cat "$work/pipe.err")"
done
pass "tach -i 0.1 | head -n 1, text and JSON: status 0, nothing on stderr"
status=0
"$tach" --once >/dev/full 2>"$work/full.err" || status=$?
[ "$status" = 1 ] && grep -q "writing to stdout failed" "$work/full.err" ||
	fail "tach --once >/dev/full: status $status, said: $(cat "$work/full.err")"
pass "tach --once >/dev/full: $(cat "$work/full.err"), status 1"

"$DS_BIN/sink" -p $port --once --json >"$work/sink.json" 2>"$work/sink.err" &
sink_pid=$!
wait_listening $port
"$tach" --once --json -d 0.2 >"$work/once.json" || fail "tach --once --json failed"
jq -e --arg pid "$sink_pid" '.sessions[$pid] | .tool == "sink" and .role == "recv" and
	.link == "tcp" and .state == "running" and .bytes == 0' "$work/once.json" >/dev/null ||
	fail "tach --once --json does not show the waiting sink: $(cat "$work/once.json")"
pass "tach --once --json: the waiting sink"

# blast flat out, two streams, reporting every 0.2 s; tach looks every second meanwhile.
"$tach" -i 1 -n 7 --json >"$work/tach.json" 2>"$work/tach.err" &
tach_pid=$!
"$DS_BIN/blast" -p $port -l 1M -q 2 -w 4 -i 0.2 --json 127.0.0.1 >"$work/blast.json" \
	2>"$work/blast.err" &
blast_pid=$!
wait "$blast_pid" || fail "blast failed: $(cat "$work/blast.err")"
wait "$sink_pid" || fail "sink failed: $(cat "$work/sink.err")"
wait "$tach_pid" || fail "tach -i failed: $(cat "$work/tach.err")"
[ "$(wc -l <"$work/tach.json")" -eq 7 ] || fail "tach -i 1 -n 7 printed $(wc -l <"$work/tach.json") lines"
pass "tach -i 1 -n 7 --json: seven lines"

# The session as tach saw it, look by look: seconds since its start, bytes, rate.
jq -c --arg pid "$blast_pid" '.sessions[$pid] | select(.) |
	[.seconds, .bytes, .MB_per_s, .state, .tool, .role, .link, .peer]' "$work/tach.json" \
	>"$work/looks"
[ "$(wc -l <"$work/looks")" -ge 3 ] || fail "tach saw blast in fewer than 3 looks: $(cat "$work/looks")"
jq -e 'select(.[4] != "blast" or .[5] != "send" or .[6] != "tcp" or .[7] != "127.0.0.1")' \
	"$work/looks" >/dev/null && fail "tool, role, link or peer differ from blast's: $(head -1 "$work/looks")"
pass "tach names blast as blast names itself"

# blast's own cumulative bytes at the end of each of its intervals.
jq -r 'select(.interval) | "\(.interval.end) \(.bytes)"' "$work/blast.json" |
	awk '{ sum += $2; print $1, sum }' >"$work/cumulative"
compared=$(python3 - "$work/looks" "$work/cumulative" <<'PY'
import json, sys
looks = [json.loads(l) for l in open(sys.argv[1])]
points = [tuple(map(float, l.split())) for l in open(sys.argv[2])]
def at(t):  # blast's bytes at t s, between its reports
    prev = (0.0, 0.0)
    for p in points:
        if p[0] >= t:
            return prev[1] + (p[1] - prev[1]) * (t - prev[0]) / (p[0] - prev[0])
        prev = p
    return None
done = 0
for a, b in zip(looks, looks[1:]):
    if b[3] != "running" or a[0] <= 0:
        continue  # the look before blast began, and the one that saw it end
    tool = at(b[0]) and (at(b[0]) - at(a[0])) / (b[0] - a[0]) / 1e6
    if tool is None:
        continue
    if not 0.9 < b[2] / tool < 1.1:
        sys.exit(f"at {b[0]:.2f} s tach says {b[2]:.0f} MB/s, blast's own reports {tool:.0f}")
    print(f"{b[0]:.2f}s:{b[2]:.0f}/{tool:.0f}", end=" ")
    done += 1
if done < 2:
    sys.exit(f"only {done} looks fell inside blast's run")
PY
) || fail "$compared"
pass "tach's rate / blast's, over the same intervals (MB/s): $compared"

# The last look, after both ended: their exact final counts, from the mappings tach kept.
last=$(tail -1 "$work/tach.json")
blast_bytes=$(jq -s 'map(select(.interval | not)) | .[0].bytes' "$work/blast.json")
blast_msgs=$(jq -s 'map(select(.interval | not)) | .[0].messages' "$work/blast.json")
sink_bytes=$(jq -s 'map(select(.interval | not)) | .[0].bytes' "$work/sink.json")
echo "$last" | jq -e --arg pid "$blast_pid" --argjson b "$blast_bytes" --argjson m "$blast_msgs" \
	'.sessions[$pid] | .state == "ended" and .bytes == $b and .messages == $m and
	 ([.streams[] | .bytes] | add) == $b and (.streams | length) == 2' >/dev/null ||
	fail "blast's last look is not its report ($blast_bytes bytes, $blast_msgs messages): $(echo "$last" | jq -c --arg pid "$blast_pid" '.sessions[$pid] | del(.streams)')"
echo "$last" | jq -e --arg pid "$sink_pid" --argjson b "$sink_bytes" \
	'.sessions[$pid] | .state == "ended" and .bytes == $b' >/dev/null ||
	fail "sink's last look is not its report ($sink_bytes bytes)"
echo "$last" | jq -e '.nics.lo.rx_bytes >= '"$blast_bytes" >/dev/null ||
	fail "lo carried less than blast sent: $(echo "$last" | jq -c .nics)"
pass "ended: blast $blast_bytes bytes in $blast_msgs messages over 2 streams, sink $sink_bytes, as they reported"

# stripe publishes each disk: a put over three directories, watched until it has ended.
mkdir -p "$work/d0" "$work/d1" "$work/d2"
head -c 48M /dev/urandom >"$work/src"
"$tach" -i 0.1 --json >"$work/stripe-looks.json" 2>"$work/tach.err" &
tach_pid=$!
# tach is looking before the put starts
for _ in $(seq 100); do
	[ -s "$work/stripe-looks.json" ] && break
	sleep 0.05
done
# Through a pipe that pauses half way: a put from a fast disk can end within one look.
{ head -c 24M "$work/src"; sleep 0.5; tail -c +$(((24 << 20) + 1)) "$work/src"; } |
	"$DS_BIN/stripe" put - "$work/d0,$work/d1,$work/d2" big >/dev/null ||
	fail "stripe put failed"
for _ in $(seq 50); do
	tail -1 "$work/stripe-looks.json" | jq -e '.sessions[] | select(.tool == "stripe" and .state == "ended")' \
		>/dev/null 2>&1 && break
	sleep 0.1
done
kill -INT "$tach_pid"
wait "$tach_pid" || fail "tach -i did not end cleanly on SIGINT"
tail -1 "$work/stripe-looks.json" | jq -e '.sessions[] | select(.tool == "stripe") |
	.role == "put" and .state == "ended" and .bytes == 50331648 and
	([.streams[] | select(.kind == "disk") | .bytes] | length == 3 and add == 50331648)' \
	>/dev/null || fail "stripe's disks do not add up: $(tail -1 "$work/stripe-looks.json" | jq -c '.sessions')"
pass "stripe put: three disks, 48 MiB between them, as tach saw it end; tach -i stops on SIGINT"

# xftp and xftpd publish a slot per data connection: `xftp get -P 4` from an xftpd, the
# loopback slowed so tach looks several times while it runs.
mkdir -p "$work/xs"
echo secret | "$DS_BIN/xftpd" --add-user "$work/users" bob >/dev/null
run_as=()
if [ "$(id -u)" = 0 ]; then
	chown nobody "$work/xs"
	run_as=(--run-as nobody)
fi
xfile_size=$((24 * 1048576 + 5))
head -c $xfile_size /dev/urandom >"$work/xs/x.bin"
start_xftpd() { # PORT [options...]: sets xs_pid
	local port=$1
	shift
	"$DS_BIN/xftpd" -p "$port" --listen 127.0.0.1 --root "$work/xs" --users "$work/users" \
		"${run_as[@]}" "$@" 2>>"$work/xftpd.log" &
	xs_pid=$!
	wait_listening "$port"
}
start_xftpd 16722
tc qdisc add dev lo root tbf rate 100mbit burst 256kb latency 100ms
"$tach" -i 0.1 --json >"$work/xftp-looks.json" 2>"$work/tach.err" &
tach_pid=$!
"$DS_BIN/xftp" -q --json -P 4 -b 1M get ftp://bob:secret@127.0.0.1:16722/x.bin "$work/x.get" \
	>"$work/xftp.json" &
xftp_pid=$!
wait "$xftp_pid" || fail "xftp get -P 4 failed: $(cat "$work/xftp.json")"
for _ in $(seq 50); do
	tail -1 "$work/xftp-looks.json" | jq -e --arg pid "$xftp_pid" '.sessions[$pid].state == "ended"' \
		>/dev/null 2>&1 && break
	sleep 0.1
done
kill -INT "$tach_pid"
wait "$tach_pid" || fail "tach -i did not end cleanly on SIGINT"
cmp -s "$work/xs/x.bin" "$work/x.get" || fail "xftp get -P 4 brought other bytes"
# While it ran: four stream slots, their sum within a block a stream of the session's
# (the totals and the slots are not read at one instant); [bytes, slots, sum, active].
running=$(jq -c --arg pid "$xftp_pid" '.sessions[$pid] | select(.state == "running" and .bytes > 0) |
	[.bytes, ([.streams[] | select(.kind == "stream")] | length, (map(.bytes) | add),
	 map(select(.ended | not)) | length)]' "$work/xftp-looks.json")
moving=$(echo "$running" | jq -s 'map(select(.[3] == 4)) | length')
[ "$moving" -ge 3 ] ||
	fail "tach saw xftp's 4 streams moving data in fewer than 3 looks: $running"
echo "$running" | jq -e 'select(.[1] != 4 or (.[0] - .[2] | fabs) > 4 * 1048576)' >/dev/null &&
	fail "a look at the running xftp without 4 slots adding up to its bytes: $running"
pass "xftp get -P 4 running: 4 stream slots adding up to the session, moving in $moving looks"
# At the end, exactly: the client's four slots and the server session's add up to the file.
last=$(tail -1 "$work/xftp-looks.json")
for who in "xftp:.pid == $xftp_pid" 'xftpd:.tool == "xftpd"'; do
	echo "$last" | jq -e --argjson size $xfile_size "[.sessions[] | select(${who#*:})] | length == 1 and
		(.[0] | .bytes == \$size and ([.streams[] | select(.kind == \"stream\")] |
		length == 4 and (map(.bytes) | add) == \$size))" >/dev/null ||
		fail "${who%%:*}'s last look does not have 4 streams adding up to $xfile_size bytes: $(echo "$last" | jq -c .sessions)"
done
pass "ended: xftp's and xftpd's 4 stream slots add up to the $xfile_size bytes of the file"
kill "$xs_pid"
wait "$xs_pid" 2>/dev/null || true

left=$(find /dev/shm -maxdepth 1 -name 'dragstrip.*')
[ -z "$left" ] || fail "segments left behind after xftp and xftpd ended: $left"
pass "xftp and xftpd removed their segments at exit"

# --no-stats on both: mid-transfer, no segment in /dev/shm, and the report as ever.
start_xftpd 16723 --no-stats
"$DS_BIN/xftp" --no-stats -q --json -P 2 -b 1M get ftp://bob:secret@127.0.0.1:16723/x.bin \
	"$work/y.get" >"$work/xftp.json" &
xftp_pid=$!
for _ in $(seq 100); do
	[ "$(stat -c %s "$work/.y.get.xftp-part" 2>/dev/null || echo 0)" -gt 0 ] && break
	sleep 0.05
done
[ -s "$work/.y.get.xftp-part" ] || fail "xftp --no-stats: no data arrived in 5 s"
segments=$(find /dev/shm -maxdepth 1 -name 'dragstrip.*')
[ -z "$segments" ] || fail "xftp and xftpd --no-stats published: $segments"
wait "$xftp_pid" || fail "xftp --no-stats get failed: $(cat "$work/xftp.json")"
jq -e --argjson size $xfile_size '.bytes == $size' "$work/xftp.json" >/dev/null ||
	fail "xftp --no-stats did not report the file: $(cat "$work/xftp.json")"
cmp -s "$work/xs/x.bin" "$work/y.get" || fail "xftp --no-stats get brought other bytes"
pass "xftp and xftpd --no-stats: no /dev/shm segment mid-transfer, the report as ever"
tc qdisc del dev lo root
kill "$xs_pid"
wait "$xs_pid" 2>/dev/null || true
