# sink_restart.sh LINK MTU: a sink killed and restarted under a running blast. The blast
# ends with one line on stderr and a non-zero status, in bounded time; the new sink counts
# the old blast's frames as strays (never as a run) and serves the next blast in full.
source "$(dirname "$0")/lib.sh"
link=$1
net_up "$2"
sink_start "$link" sink1
blast_run "$link" blast1 -w 30 -l 16K --timeout 2 -i 0.2 &
bpid=$!
# Kill the sink only once data flows: a sink killed during the hello tests something else
# (blast would give up on the hello, or a quick new sink would answer it).
wait_for "$WORK/blast1.out" 1 20
sink_kill
sink_start "$link" sink2
start=$(date +%s)
if wait $bpid; then fail "blast went on as if nothing happened"; fi
elapsed=$(($(date +%s) - start))
[ $elapsed -le 10 ] || fail "blast took $elapsed s to notice"
expect "blast's stderr lines" "$(wc -l <"$WORK/blast1.err")" 1
grep -q '^blast: ' "$WORK/blast1.err" || fail "blast's error is not one line: $(cat "$WORK/blast1.err")"
blast_run "$link" blast2 -n 500 -l 16K --verify || fail "blast to the new sink: $(cat "$WORK/blast2.err")"
wait_for "$WORK/sink2.out" 1 10
expect "messages at the new sink" "$(field "$WORK/sink2.out" 1 .messages)" 500
expect "lost, dup, corrupt" "$(field "$WORK/sink2.out" 1 '.errors.lost + .errors.dup + .errors.corrupt')" 0
echo "PASS sink_restart $link mtu $2 ($(cat "$WORK/blast1.err"))"
