#!/usr/bin/env bash
# raw blast/sink against iperf3 TCP on the same veth pair between two network namespaces
# (MTU 65000): blast -x raw -l 64000 with its default options (one stream, credit flow
# control) against iperf3 -l 1M, run after run in alternation; two streams of each as
# well, for information. Prints the receive-side medians, spreads (min-max), raw's
# losses and the raw/iperf3 ratios; the Bar compares one stream with one stream.
# Needs root.   DS_BIN=build/bin bench/raw-vs-iperf3.sh [RUNS] [SECONDS]
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bin=${DS_BIN:?DS_BIN must name the folder of the built tools}
runs=${1:-5}
seconds=${2:-3}
command -v iperf3 >/dev/null || { echo "bench: iperf3 is not installed" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "bench: needs root for network namespaces" >&2; exit 1; }
ns_s=dsbenchs$$ ns_b=dsbenchb$$ if_s=dbs$$ if_b=dbb$$
work=$(mktemp -d)
cleanup() {
	for ns in "$ns_s" "$ns_b"; do
		for pid in $(ip netns pids "$ns" 2>/dev/null); do kill "$pid" 2>/dev/null || true; done
		ip netns del "$ns" 2>/dev/null || true
	done
	rm -rf "$work"
}
trap cleanup EXIT
ip netns add "$ns_s"
ip netns add "$ns_b"
ip link add "$if_b" netns "$ns_b" type veth peer name "$if_s" netns "$ns_s"
ip -n "$ns_s" link set "$if_s" mtu 65000 up
ip -n "$ns_b" link set "$if_b" mtu 65000 up
ip -n "$ns_s" addr add 10.67.0.2/24 dev "$if_s"
ip -n "$ns_b" addr add 10.67.0.1/24 dev "$if_b"
mac=$(ip -n "$ns_s" -o link show "$if_s" | sed -n 's/.*link\/ether \([0-9a-f:]*\).*/\1/p')

ip netns exec "$ns_s" "$bin/sink" -x raw -d "$if_s" --json >"$work/sink.json" 2>"$work/sink.err" &
sink_pid=$!
ip netns exec "$ns_s" iperf3 -s -p 5201 >/dev/null 2>&1 &
bench_wait_packet_socket "$sink_pid" "$ns_s"
bench_wait_listening 5201 "$ns_s"
results=$work/results.tsv

raw_run() { # raw_run STREAMS (1: blast's defaults, no -q)
	local before streams=()
	[ "$1" -gt 1 ] && streams=(-q "$1")
	before=$(wc -l <"$work/sink.json")
	ip netns exec "$ns_b" "$bin/blast" -x raw -d "$if_b" -l 64000 -w "$seconds" "${streams[@]}" \
		--json "$mac" >"$work/blast.json" 2>"$work/blast.err" ||
		{ cat "$work/blast.err" >&2; exit 1; }
	for _ in $(seq 50); do [ "$(wc -l <"$work/sink.json")" -gt "$before" ] && break; sleep 0.1; done
	tail -1 "$work/sink.json" | jq -r --arg n "raw -q $1" '[$n, .MB_per_s, .errors.lost] | @tsv' >>"$results"
}

iperf_run() { # iperf_run STREAMS
	ip netns exec "$ns_b" iperf3 -c 10.67.0.2 -p 5201 -l 1M -t "$seconds" -P "$1" -J \
		>"$work/iperf.json" || { echo "bench: iperf3 failed" >&2; exit 1; }
	jq -r --arg n "iperf3 -P $1" '[$n, .end.sum_received.bits_per_second / 8e6, 0] | @tsv' \
		"$work/iperf.json" >>"$results"
}

for ((r = 1; r <= runs; r++)); do
	for streams in 1 2; do
		raw_run "$streams"
		iperf_run "$streams"
	done
done

printf 'raw blast/sink vs iperf3 TCP on a veth pair, MTU 65000, %s runs of %s s each, alternating\n' "$runs" "$seconds"
printf 'raw: -l 64000, credit flow control; iperf3: -l 1M. Receive side, MB/s = 10^6 bytes/s.\n\n'
printf '%-13s %9s %9s %9s %8s\n' what median min max lost
stats() { # stats NAME -> median min max lostsum
	local lost
	lost=$(awk -F'\t' -v n="$1" '$1 == n { l += $3 } END { print l + 0 }' "$results")
	awk -F'\t' -v n="$1" '$1 == n { print $2 }' "$results" | sort -g |
		awk -v lost="$lost" '{ v[++k] = $1 }
			END { m = (k % 2) ? v[(k + 1) / 2] : (v[k / 2] + v[k / 2 + 1]) / 2
			      printf "%.0f %.0f %.0f %d\n", m, v[1], v[k], lost }'
}
declare -A med lost_of
for what in "raw -q 1" "iperf3 -P 1" "raw -q 2" "iperf3 -P 2"; do
	read -r m lo hi lost < <(stats "$what")
	printf '%-13s %9s %9s %9s %8s\n' "$what" "$m" "$lo" "$hi" "$lost"
	med[$what]=$m
	lost_of[$what]=$lost
done
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
printf '\nratio raw/iperf3, two streams each: %s\n' "$(ratio "${med[raw -q 2]}" "${med[iperf3 -P 2]}")"
printf 'ratio raw/iperf3, one stream each:  %s, %s lost   (the Bar: >= 1.3 with zero loss)\n' \
	"$(ratio "${med[raw -q 1]}" "${med[iperf3 -P 1]}")" "${lost_of[raw -q 1]}"
