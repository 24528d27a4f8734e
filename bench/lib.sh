# shellcheck shell=bash
# Helpers the bench scripts share; sourced, not run.

# bench_lock SCRIPT ARGS...: unless this run (or the bench that started it) holds it
# already, runs SCRIPT again under flock /tmp/ds-bench.lock: no two benches share the cores.
bench_lock() {
	[ -z "${DS_BENCH_LOCKED:-}" ] || return 0
	exec env DS_BENCH_LOCKED=1 flock /tmp/ds-bench.lock bash "$@"
}

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

# bench_host_mark: the host's CPU ticks so far, for bench_host_others: busy (user, nice,
# system, irq, softirq), steal, and those of this shell's children it has waited for
# (a VM's qemu, once boot.sh has ended); then the time.
bench_host_mark() {
	# %.0f: a long-running host's counts pass 2^31, which awk's print would round
	printf '%s %s %s\n' \
		"$(awk '/^cpu / { printf "%.0f %.0f", $2 + $3 + $4 + $7 + $8, $9 }' /proc/stat)" \
		"$(awk '{ printf "%.0f", $16 + $17 }' "/proc/$$/stat")" "$(date +%s.%N)"
}

# bench_host_others BEFORE AFTER: between two bench_host_mark lines, the CPU that others
# took from the host on average, in cores: its processes not of this bench, and its
# hypervisor (steal). A VM bench's ratios move with it.
bench_host_others() {
	awk -v hz="$(getconf CLK_TCK)" -v cores="$(getconf _NPROCESSORS_ONLN)" -v a="$1" -v b="$2" 'BEGIN {
		split(a, x, " "); split(b, y, " "); s = y[4] - x[4]
		if (s <= 0) s = 1
		others = (y[1] - x[1]) - (y[3] - x[3]) # sampled ticks less measured times: roughly
		printf "%.2f of %d cores to other processes, %.2f to the hypervisor (steal)\n",
			(others > 0 ? others : 0) / hz / s, cores, (y[2] - x[2]) / hz / s }'
}

# bench_median FILE NAME [COLUMN]: median, lowest and highest of COLUMN (default 2) over the
# tab-separated rows of FILE whose first field is NAME.
bench_median() {
	awk -F'\t' -v n="$2" -v c="${3:-2}" '$1 == n { print $c }' "$1" | sort -g |
		awk '{ v[++k] = $1 } END { m = (k % 2) ? v[(k + 1) / 2] : (v[k / 2] + v[k / 2 + 1]) / 2
			printf "%.6g %.6g %.6g\n", m, v[1], v[k] }'
}

# bench_vsftpd_conf ROOT PORT RATE: on stdout, a vsftpd.conf for anonymous FTP on
# 127.0.0.1:PORT serving ROOT (uploads, overwrites and mkdir in directories the ftp user
# owns), at most RATE bytes/s a transfer (0: no limit). ROOT/../empty must exist.
bench_vsftpd_conf() {
	cat <<CONF
listen=YES
listen_address=127.0.0.1
listen_port=$2
background=NO
anonymous_enable=YES
local_enable=NO
anon_root=$1
ftp_username=ftp
write_enable=YES
anon_upload_enable=YES
anon_mkdir_write_enable=YES
anon_other_write_enable=YES
anon_umask=022
anon_max_rate=$3
no_anon_password=YES
seccomp_sandbox=NO
secure_chroot_dir=$1/../empty
xferlog_enable=NO
CONF
}

# bench_ratio_table RESULTS A B OP...: RESULTS holds "tool<TAB>op<TAB>figure" lines; for each
# OP one row: A's median and spread (min-max), B's, and the ratio of the medians A/B.
bench_ratio_table() {
	local results=$1 a=$2 b=$3 op ma mb
	shift 3
	_bench_pick() { awk -F'\t' -v t="$1" -v o="$2" '$1 == t && $2 == o { print $3 }' "$results"; }
	_bench_median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
	_bench_spread() { sort -g | awk 'NR == 1 { lo = $1 } { hi = $1 } END { printf "%.0f-%.0f", lo, hi }'; }
	printf '%-6s %14s %12s %14s %12s %8s\n' op "$a median" "(min-max)" "$b median" "(min-max)" ratio
	for op in "$@"; do
		ma=$(_bench_pick "$a" "$op" | _bench_median)
		mb=$(_bench_pick "$b" "$op" | _bench_median)
		printf '%-6s %14.1f %12s %14.1f %12s %8.3f\n' "$op" "$ma" "$(_bench_pick "$a" "$op" | _bench_spread)" \
			"$mb" "$(_bench_pick "$b" "$op" | _bench_spread)" "$(awk -v x="$ma" -v y="$mb" 'BEGIN { print x / y }')"
	done
}

# bench_version: the project's version, from the top CMakeLists.txt.
bench_version() {
	sed -n 's/^project(dragstrip VERSION \([0-9.]*\).*/\1/p' "$(dirname "${BASH_SOURCE[0]}")/../CMakeLists.txt"
}

# bench_bytes SIZE: 64K, 1M, 2G (powers of 1024) or plain bytes, as bytes; fails otherwise.
bench_bytes() {
	local n unit
	[[ $1 =~ ^([1-9][0-9]{0,9})([KkMmGg]?)$ ]] || return 1
	n=${BASH_REMATCH[1]} unit=${BASH_REMATCH[2]}
	case $unit in
	K | k) n=$((n << 10)) ;;
	M | m) n=$((n << 20)) ;;
	G | g) n=$((n << 30)) ;;
	esac
	echo "$n"
}

# bench_sizes LIST: "64K,1M" (or spaces), or "FROM-TO" in powers of two, as bytes on one line.
bench_sizes() {
	local from to s out=()
	if [[ $1 =~ ^([^,-]+)-([^,-]+)$ ]]; then
		from=$(bench_bytes "${BASH_REMATCH[1]}") && to=$(bench_bytes "${BASH_REMATCH[2]}") || return 1
		[ "$from" -le "$to" ] || return 1
		for ((s = from; s <= to; s *= 2)); do out+=("$s"); done
	else
		for s in ${1//,/ }; do
			s=$(bench_bytes "$s") || return 1
			out+=("$s")
		done
	fi
	[ ${#out[@]} -gt 0 ] || return 1
	echo "${out[*]}"
}

# bench_human BYTES: 256, 64K, 2M, 1G where exact, else bytes.
bench_human() {
	local n=$1
	if ((n >= 1 << 30 && n % (1 << 30) == 0)); then echo "$((n >> 30))G"
	elif ((n >= 1 << 20 && n % (1 << 20) == 0)); then echo "$((n >> 20))M"
	elif ((n >= 1 << 10 && n % (1 << 10) == 0)); then echo "$((n >> 10))K"
	else echo "$n"; fi
}

# bench_opt_value OPT DEFAULT WORDS...: the word after OPT among WORDS, or DEFAULT.
bench_opt_value() {
	local opt=$1 value=$2
	shift 2
	while [ $# -gt 0 ]; do
		[ "$1" = "$opt" ] && [ $# -ge 2 ] && value=$2
		shift
	done
	echo "$value"
}

# bench_opt_pair OPT WORDS...: "OPT VALUE" when WORDS hold OPT VALUE, else nothing.
bench_opt_pair() {
	local value
	value=$(bench_opt_value "$1" "" "${@:2}")
	[ -z "$value" ] || echo "$1 $value"
}

# bench_veth_up: a veth pair between two new network namespaces, MTU 65000, addresses
# 10.67.0.2 (receiver) and 10.67.0.1 (sender). Sets BENCH_NS_RECV, BENCH_NS_SEND,
# BENCH_IF_RECV, BENCH_IF_SEND, BENCH_MAC_RECV; bench_veth_down removes it all. Needs root.
bench_veth_up() {
	BENCH_NS_RECV=dsbench-recv-$$ BENCH_NS_SEND=dsbench-send-$$ BENCH_IF_RECV=dsvr$$ BENCH_IF_SEND=dsvs$$
	ip netns add "$BENCH_NS_RECV"
	ip netns add "$BENCH_NS_SEND"
	ip link add "$BENCH_IF_SEND" netns "$BENCH_NS_SEND" type veth peer name "$BENCH_IF_RECV" \
		netns "$BENCH_NS_RECV"
	ip -n "$BENCH_NS_RECV" link set "$BENCH_IF_RECV" mtu 65000 up
	ip -n "$BENCH_NS_SEND" link set "$BENCH_IF_SEND" mtu 65000 up
	ip -n "$BENCH_NS_RECV" link set lo up
	ip -n "$BENCH_NS_SEND" link set lo up
	ip -n "$BENCH_NS_RECV" addr add 10.67.0.2/24 dev "$BENCH_IF_RECV"
	ip -n "$BENCH_NS_SEND" addr add 10.67.0.1/24 dev "$BENCH_IF_SEND"
	BENCH_MAC_RECV=$(ip -n "$BENCH_NS_RECV" -o link show "$BENCH_IF_RECV" |
		sed -n 's/.*link\/ether \([0-9a-f:]*\).*/\1/p')
}

bench_veth_down() {
	local ns pid
	for ns in "$BENCH_NS_RECV" "$BENCH_NS_SEND"; do
		for pid in $(ip netns pids "$ns" 2>/dev/null); do kill "$pid" 2>/dev/null || true; done
		ip netns del "$ns" 2>/dev/null || true
	done
}
