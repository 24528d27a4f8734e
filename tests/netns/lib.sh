# Shared by the tests/netns scripts: two network namespaces joined by a veth pair, sink
# in one ("s", 10.66.0.2) and blast in the other ("b", 10.66.0.1). Names carry the
# script's pid so tests never meet; everything is torn down on exit, however it exits.
set -euo pipefail

: "${DS_BIN:?DS_BIN must point at the built tools}"
BLAST=$DS_BIN/blast
SINK=$DS_BIN/sink
NS_S=dss$$
NS_B=dsb$$
IF_S=dss$$v
IF_B=dsb$$v
ADDR_S=10.66.0.2
PORT=5151
WORK=$(mktemp -d)
SINK_PID=

fail() {
	echo "FAIL: $*" >&2
	for f in "$WORK"/*.out "$WORK"/*.err; do
		[ -s "$f" ] && { echo "--- $f" >&2; tail -5 "$f" >&2; }
	done
	exit 1
}

cleanup() {
	[ -n "$SINK_PID" ] && kill -9 "$SINK_PID" 2>/dev/null || true
	# processes still inside the namespaces go with them
	for ns in "$NS_S" "$NS_B"; do
		for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$pid" 2>/dev/null || true; done
		ip netns del "$ns" 2>/dev/null || true
	done
	rm -rf "$WORK"
}
trap cleanup EXIT

# net_up MTU: the namespaces, the veth pair with MTU on both ends, addresses.
net_up() {
	[ "$(id -u)" = 0 ] || { echo "SKIP: needs root for network namespaces"; exit 0; }
	ip netns add "$NS_S"
	ip netns add "$NS_B"
	ip link add "$IF_B" netns "$NS_B" type veth peer name "$IF_S" netns "$NS_S"
	ip -n "$NS_S" link set "$IF_S" mtu "$1" up
	ip -n "$NS_B" link set "$IF_B" mtu "$1" up
	ip -n "$NS_S" link set lo up
	ip -n "$NS_B" link set lo up
	ip -n "$NS_S" addr add "$ADDR_S/24" dev "$IF_S"
	ip -n "$NS_B" addr add 10.66.0.1/24 dev "$IF_B"
	SINK_MAC=$(ip -n "$NS_S" -o link show "$IF_S" | sed -n 's/.*link\/ether \([0-9a-f:]*\).*/\1/p')
}

# dest LINK: what blast names as the sink for that link.
dest() {
	if [ "$1" = raw ]; then echo "$SINK_MAC"; else echo "$ADDR_S"; fi
}

# link_args LINK SIDE: -x, and -d for raw, on side s or b.
link_args() {
	local ifname=$IF_S
	[ "$2" = b ] && ifname=$IF_B
	if [ "$1" = raw ]; then echo "-x raw -d $ifname"; else echo "-x $1 -p $PORT"; fi
}

# sink_start LINK NAME [ARGS...]: sink in its namespace, JSON reports to $WORK/NAME.out.
sink_start() {
	local link=$1 name=$2
	shift 2
	# shellcheck disable=SC2046
	ip netns exec "$NS_S" "$SINK" $(link_args "$link" s) --json "$@" \
		>"$WORK/$name.out" 2>"$WORK/$name.err" &
	SINK_PID=$!
	disown "$SINK_PID" # its end is ours to check, not the shell's to announce
	# Ready when its port listens (tcp, udp), or for raw when it has bound its packet
	# socket to EtherType 0x88B5 (34997), its last step once filter and ring are set.
	local i
	for ((i = 0; i < 50; i++)); do
		sleep 0.1
		kill -0 "$SINK_PID" 2>/dev/null || fail "sink did not start: $(cat "$WORK/$name.err")"
		if [ "$link" = raw ]; then
			ip netns exec "$NS_S" ss -H -0 -p | grep -q "^p_raw.*\[34997\]:.*pid=$SINK_PID," && return 0
		elif [ -n "$(ip netns exec "$NS_S" ss -Hltun "sport = :$PORT")" ]; then
			return 0
		fi
	done
	fail "sink did not listen within 5 s: $(cat "$WORK/$name.err")"
}

# sink_kill: kill -9 the sink and wait until it has let go of its port (the signal is
# asynchronous, and a dead process's sockets close a moment after it leaves the
# namespace; a new sink started at once could find the port still taken).
sink_kill() {
	local i
	kill -9 "$SINK_PID"
	for ((i = 0; i < 50; i++)); do
		if ! ip netns pids "$NS_S" | grep -qx "$SINK_PID" &&
			[ -z "$(ip netns exec "$NS_S" ss -Hltun "sport = :$PORT")" ]; then
			return 0
		fi
		sleep 0.1
	done
	fail "sink $SINK_PID or its port outlived kill -9 by 5 s"
}

# blast_run LINK NAME [ARGS...]: blast in its namespace; returns blast's status.
blast_run() {
	local link=$1 name=$2
	shift 2
	# shellcheck disable=SC2046
	timeout 60 ip netns exec "$NS_B" "$BLAST" $(link_args "$link" b) --json "$@" \
		"$(dest "$link")" >"$WORK/$name.out" 2>"$WORK/$name.err"
}

# wait_for FILE LINES SECONDS: until FILE has LINES lines.
wait_for() {
	local i
	for ((i = 0; i < $3 * 10; i++)); do
		[ -f "$1" ] && [ "$(wc -l <"$1")" -ge "$2" ] && return 0
		sleep 0.1
	done
	fail "waited $3 s for $2 line(s) in $1"
}

# field FILE LINE JQ: a field of the LINE-th JSON object in FILE (LINE $: the last).
field() {
	sed -n "$2p" "$1" | jq -r "$3"
}

expect() {
	[ "$2" = "$3" ] || fail "$1: expected $3, got $2"
}
