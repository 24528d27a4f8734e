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
