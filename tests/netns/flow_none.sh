# flow_none.sh LINK MTU: with --flow none blast runs free; a sink held stopped meanwhile
# loses messages, and every one is accounted for: received + lost = sent, and blast hears
# the same figures. tcp flow-controls itself, so there nothing may be lost.
source "$(dirname "$0")/lib.sh"
link=$1
net_up "$2"
sink_start "$link" sink
count=20000
blast_run "$link" blast -n $count -l 16K --flow none --timeout 10 -i 0.05 &
bpid=$!
# Stop the sink once data flows: stopped during the hello, it would only delay the run.
wait_for "$WORK/blast.out" 1 20
kill -STOP "$SINK_PID"
sleep 1
kill -CONT "$SINK_PID"
wait $bpid || fail "blast --flow none: $(cat "$WORK/blast.err")"
wait_for "$WORK/sink.out" 1 10
got=$(field "$WORK/sink.out" 1 .messages)
lost=$(field "$WORK/sink.out" 1 .errors.lost)
expect "received + lost" $((got + lost)) $count
expect "blast's view of lost" "$(field "$WORK/blast.out" '$' .sink.errors.lost)" "$lost"
expect "dup + corrupt + malformed" "$(field "$WORK/sink.out" 1 '.errors.dup + .errors.corrupt + .errors.malformed')" 0
if [ "$link" = tcp ]; then
	expect "tcp lost" "$lost" 0
else
	[ "$lost" -gt 0 ] || fail "a stopped sink lost nothing of $count messages run free"
fi
# credit flow on (the default) through the same stop: nothing lost
blast_run "$link" blast2 -n 5000 -l 16K --timeout 10 &
bpid=$!
sleep 0.1
kill -STOP "$SINK_PID"
sleep 0.5
kill -CONT "$SINK_PID"
wait $bpid || fail "blast with credits: $(cat "$WORK/blast2.err")"
wait_for "$WORK/sink.out" 2 10
if [ "$link" != udp ]; then
	expect "lost with credits" "$(field "$WORK/sink.out" 2 .errors.lost)" 0
	expect "received with credits" "$(field "$WORK/sink.out" 2 .messages)" 5000
fi
echo "PASS flow_none $link mtu $2 (lost $lost of $count run free)"
