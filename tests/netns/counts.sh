# counts.sh LINK MTU: every message arrives once, checked, with exact counts on both
# sides; one run with messages that fit a frame and one with trains of frames (sent by two
# interleaved workers, -2, which must keep them in order). udp may
# lose datagrams even under credit flow (the kernel charges them more than their bytes),
# so for udp every message must be received or counted lost, and nothing else go wrong.
source "$(dirname "$0")/lib.sh"
link=$1
net_up "$2"

# check_run N WHAT COUNT: the sink's N-th report accounts for COUNT messages.
check_run() {
	local got lost
	got=$(field "$WORK/sink.out" "$1" .messages)
	lost=$(field "$WORK/sink.out" "$1" .errors.lost)
	if [ "$link" = udp ]; then
		expect "received + lost ($2)" $((got + lost)) "$3"
	else
		expect "sink messages ($2)" "$got" "$3"
		expect "lost ($2)" "$lost" 0
	fi
	expect "dup, reordered, corrupt, malformed ($2)" \
		"$(field "$WORK/sink.out" "$1" '.errors.dup + .errors.reordered + .errors.corrupt + .errors.malformed')" 0
	expect "sink bytes ($2)" "$(field "$WORK/sink.out" "$1" .bytes)" $((got * $(field "$WORK/sink.out" "$1" .msg_size)))
}
pcap=()
[ "$link" = raw ] && pcap=(--pcap "$WORK/trace.pcap")
sink_start "$link" sink "${pcap[@]}"
n=0
for len_workers in "1000 -1" "200K -2"; do
	read -r len workers <<<"$len_workers"
	count=300
	n=$((n + 1))
	blast_run "$link" blast$n -n $count -l $len "$workers" --verify ||
		fail "blast -l $len $workers: $(cat "$WORK/blast$n.err")"
	wait_for "$WORK/sink.out" $n 10
	check_run $n "-l $len" $count
	expect "blast's view of sink (-l $len)" "$(field "$WORK/blast$n.out" 1 .sink.messages)" \
		"$(field "$WORK/sink.out" $n .messages)"
	expect "aborted (-l $len)" "$(field "$WORK/sink.out" $n .aborted)" false
done
# -q 2: the streams of one run land in one report
n=$((n + 1))
blast_run "$link" blast$n -n 400 -l 4K -q 2 --verify || fail "blast -q 2: $(cat "$WORK/blast$n.err")"
wait_for "$WORK/sink.out" $n 10
check_run $n "-q 2" 400
expect "streams" "$(field "$WORK/sink.out" $n .streams)" 2
if [ "$link" = raw ]; then
	# --pcap: a stopped sink has written every frame it received, headers and all
	kill -TERM "$SINK_PID"
	for _ in $(seq 50); do kill -0 "$SINK_PID" 2>/dev/null || break; sleep 0.1; done
	kill -0 "$SINK_PID" 2>/dev/null && fail "sink did not stop on SIGTERM"
	magic=$(od -An -tx4 -N4 "$WORK/trace.pcap" | tr -d ' ')
	expect "pcap magic" "$magic" a1b2c3d4
	min=$((300 * 1000 + 300 * 200 * 1024 + 400 * 4096))
	size=$(stat -c %s "$WORK/trace.pcap")
	[ "$size" -gt $min ] || fail "trace.pcap holds $size bytes, less than the $min sent"
fi
echo "PASS counts $link mtu $2"
