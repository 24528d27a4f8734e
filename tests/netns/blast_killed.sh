# blast_killed.sh LINK MTU: a blast killed mid-run. sink reports the run as aborted with
# what arrived (all of it checked), within its --idle time, says why on stderr, and serves
# the next blast.
source "$(dirname "$0")/lib.sh"
link=$1
net_up "$2"
# tcp sends records of 1 MiB, so the kill cuts one off while sink awaits it whole
len=16K
[ "$link" = tcp ] && len=1M
sink_start "$link" sink --idle 1
blast_run "$link" blast1 -w 30 -l "$len" --verify -i 0.2 &
bpid=$!
wait_for "$WORK/blast1.out" 1 20 # data flows
# blast is the only process in its namespace (`ip netns exec` exec()s it)
kill -9 "$(ip netns pids "$NS_B")"
wait $bpid 2>/dev/null || true
wait_for "$WORK/sink.out" 1 5
expect "aborted" "$(field "$WORK/sink.out" 1 .aborted)" true
got=$(field "$WORK/sink.out" 1 .messages)
[ "$got" -gt 0 ] || fail "the killed blast delivered nothing"
# blast sees only a closed link; sink says why it cut the stream
case $link in
raw) why="stream 0 cut: no data for 1.0 s (--idle)" ;; # nothing tells raw frames have ended
*) why="stream 0 cut: " ;; # tcp: the closed link; udp: the port gone (ICMP)
esac
grep -qF "$why" "$WORK/sink.err" || fail "sink did not say why it cut the stream: $(cat "$WORK/sink.err")"
expect "dup, corrupt, malformed" "$(field "$WORK/sink.out" 1 '.errors.dup + .errors.corrupt + .errors.malformed')" 0
blast_run "$link" blast2 -n 500 -l "$len" --verify || fail "next blast: $(cat "$WORK/blast2.err")"
wait_for "$WORK/sink.out" 2 10
expect "next run" "$(field "$WORK/sink.out" 2 .messages)" 500
expect "next run aborted" "$(field "$WORK/sink.out" 2 .aborted)" false
echo "PASS blast_killed $link mtu $2 ($got messages before the kill)"
