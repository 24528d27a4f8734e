# shellcheck shell=bash
# Helpers the bench scripts share; sourced, not run.

# bench_wait_listening PORT [NETNS]: waits up to 5 s for a TCP or UDP socket bound to PORT
# (in NETNS if given), so a run never races its receiver's start.
bench_wait_listening() {
	local ss=(ss) i
	[ -n "${2:-}" ] && ss=(ip netns exec "$2" ss)
	for ((i = 0; i < 50; i++)); do
		"${ss[@]}" -H -ltun "sport = :$1" | grep -q . && return 0
		sleep 0.1
	done
	echo "bench: nothing listens on port $1" >&2
	exit 1
}

# bench_wait_packet_socket PID [NETNS]: waits up to 5 s for process PID (a raw sink) to
# bind a packet socket to EtherType 0x88B5 (34997), its last step once filter and ring are set.
bench_wait_packet_socket() {
	local ss=(ss) i
	[ -n "${2:-}" ] && ss=(ip netns exec "$2" ss)
	for ((i = 0; i < 50; i++)); do
		"${ss[@]}" -H -0 -p | grep -q "^p_raw.*\[34997\]:.*pid=$1," && return 0
		sleep 0.1
	done
	echo "bench: process $1 opened no packet socket" >&2
	exit 1
}
