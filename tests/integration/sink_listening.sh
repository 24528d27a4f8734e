# sink says where it listens, once, on stderr (stdout stays the reports'), as ttcp's
# receiver does; --quiet keeps it silent.
source "$(dirname "$0")/lib.sh"
sink=$DS_BIN/sink
blast=$DS_BIN/blast

# run_pair NAME PORT SINK_ARGS... : a sink --once --json and a short blast into it.
run_pair() {
	local name=$1 port=$2 link=tcp
	shift 2
	[[ " $* " == *" -x udp "* ]] && link=udp
	"$sink" -p "$port" --once --json "$@" >"$work/$name.out" 2>"$work/$name.err" &
	local pid=$!
	wait_listening "$port" "$link"
	"$blast" -x "$link" -p "$port" -n 20 -l 4K 127.0.0.1 >/dev/null || fail "$name: blast"
	wait "$pid" || fail "$name: sink: $(cat "$work/$name.err")"
	jq -e '.messages == 20' "$work/$name.out" >/dev/null || fail "$name: stdout is not the report: $(cat "$work/$name.out")"
}

run_pair any 16821
[ "$(cat "$work/any.err")" = "sink: listening on tcp port 16821 (all addresses)" ] ||
	fail "sink's stderr: $(cat "$work/any.err")"
pass "sink: $(cat "$work/any.err"), the report alone on stdout"

run_pair bound 16822 -x udp -B 127.0.0.1
[ "$(cat "$work/bound.err")" = "sink: listening on udp 127.0.0.1 port 16822" ] ||
	fail "sink -B -x udp's stderr: $(cat "$work/bound.err")"
pass "sink -x udp -B 127.0.0.1: $(cat "$work/bound.err")"

run_pair quiet 16823 --quiet
[ ! -s "$work/quiet.err" ] || fail "sink --quiet said: $(cat "$work/quiet.err")"
pass "sink --quiet: nothing on stderr"

# A sink that cannot listen says why, and not that it listens.
socat TCP-LISTEN:16824,reuseaddr - >/dev/null &
wait_listening 16824
expect_error "sink: port in use" "16824" "$sink" -p 16824 --once
grep -q listening "$work/err" && fail "a sink that could not listen said it was listening"
pass "a sink whose port is taken does not claim to listen"
echo "$checks passed, 0 failed"
