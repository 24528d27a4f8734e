#!/usr/bin/env bash
# The demo: what this machine moves over loopback, measured by dragstrip's own tools.
# DS_BIN points at the built tools (./dragstrip demo sets it).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bin=${DS_BIN:?DS_BIN must name the folder of the built tools}
seconds=${DS_DEMO_SECONDS:-2}
port=${DS_DEMO_PORT:-15001}
work=$(mktemp -d)
# Waits for the receivers to be gone, so that a run right after finds their ports free.
trap 'kill $(jobs -p) 2>/dev/null || true; wait; rm -rf "$work"' EXIT

# print_row NAME LEN: the table row from the receiver's and sender's --json results.
print_row() {
	local mb gbit cpu_per_gb
	read -r mb gbit cpu_per_gb < <(jq -r --slurpfile t "$work/t.json" \
		'[.MB_per_s, .Gbit_per_s,
		  ($t[0].cpu_user_s + $t[0].cpu_sys_s + .cpu_user_s + .cpu_sys_s) / (.bytes / 1e9)]
		 | @tsv' "$work/r.json")
	printf '%-10s %-7s %8.0f MB/s %7.2f Gbit/s %8.3f CPU s/GB\n' "$1" "$2" \
		"$mb" "$gbit" "$cpu_per_gb"
}

# run_pair NAME LEN RECEIVER... -- SENDER...: one receiver and one sender, then the row.
run_pair() {
	local name=$1 len=$2 receiver_cmd=()
	shift 2
	while [ "$1" != -- ]; do
		receiver_cmd+=("$1")
		shift
	done
	shift
	"${receiver_cmd[@]}" >"$work/r.json" 2>"$work/r.err" &
	local receiver=$!
	bench_wait_listening "$port"
	"$@" >"$work/t.json" 2>"$work/t.err" || { cat "$work/t.err" >&2; return 1; }
	wait "$receiver" || { cat "$work/r.err" >&2; return 1; }
	print_row "$name" "$len"
	port=$((port + 1))
}

printf 'dragstrip demo: loopback on %s, %s s per run (receiver-side figures)\n\n' \
	"$(hostname)" "$seconds"
printf '%-10s %-7s %13s %14s %17s\n' tool size throughput "" "CPU, both ends"
for len in 8K 64K 1M; do
	run_pair "ttcp tcp" "$len" "$bin/ttcp" -r -s -l "$len" -p "$port" --json -- \
		"$bin/ttcp" -t -s -l "$len" -p "$port" -w "$seconds" --json 127.0.0.1
done
for link_len in "tcp 64K" "tcp 1M" "udp 64K"; do
	read -r link len <<<"$link_len"
	run_pair "blast $link" "$len" "$bin/sink" -x "$link" -p "$port" --once --json -- \
		"$bin/blast" -x "$link" -l "$len" -p "$port" -w "$seconds" --json 127.0.0.1
done

# xftp_row NAME BLOCK CMD...: one xftp copy through the xftpd on $port; the row from its
# --json summary (CPU of both ends is not measured here: "-").
xftp_row() {
	local name=$1 block=$2 mb
	shift 2
	"$@" --json >"$work/x.json" 2>"$work/x.err" || { cat "$work/x.err" >&2; return 1; }
	mb=$(jq -r .MB_per_s "$work/x.json")
	printf '%-10s %-7s %8.0f MB/s %7.2f Gbit/s %8s CPU s/GB\n' "$name" "$block" "$mb" \
		"$(awk -v m="$mb" 'BEGIN { print m * 8 / 1000 }')" -
}
# A file to xftpd and back, disk to disk: served as its owner, so not as root.
mkdir -p "$work/xftpd"
head -c $((256 << 20)) /dev/urandom >"$work/xftp.src"
chmod 755 "$work"
[ "$(id -u)" -ne 0 ] || chown nobody "$work/xftpd"
echo demo | "$bin/xftpd" --add-user "$work/xftpd.users" demo >/dev/null
"$bin/xftpd" -p "$port" --listen 127.0.0.1 --root "$work/xftpd" --users "$work/xftpd.users" \
	>"$work/xftpd.log" 2>&1 &
bench_wait_listening "$port"
xftp_row "xftp put" 4M "$bin/xftp" -q put "$work/xftp.src" "ftp://demo:demo@127.0.0.1:$port/f"
xftp_row "xftp get" 4M "$bin/xftp" -q get "ftp://demo:demo@127.0.0.1:$port/f" "$work/xftp.dst"
cmp -s "$work/xftp.src" "$work/xftp.dst" || { echo "demo: xftp's copy differs" >&2; exit 1; }
