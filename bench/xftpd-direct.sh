#!/usr/bin/env bash
# bench/xftpd-direct.sh: xftpd's plain store read with O_DIRECT (--direct-reads) against
# the page cache (the default), for a file of SIZE MiB copied disk to disk on loopback by
# xftp get and curl get, and xftp put (written with O_DIRECT either way: a check on the
# noise), caches dropped before each run, timed until the data is durable (a final sync).
# A and B alternate; medians, spreads and the ratio B/A.
# Usage (as root, for drop_caches): DS_BIN=build/bin bench/xftpd-direct.sh [DIR] [ROUNDS] [MiB]
set -euo pipefail
bin=${DS_BIN:-build/bin}
dir=${1:-/var/tmp}
rounds=${2:-3}
mib=${3:-1024}
port=${DS_BENCH_PORT:-16492}
work=$(mktemp -d "$dir/xftpd-direct.XXXXXX")
trap 'kill $(jobs -p) 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT
mkdir "$work/root" "$work/local"
head -c $((mib << 20)) /dev/urandom >"$work/root/src"
echo bench | "$bin/xftpd" --add-user "$work/users" bench
url="ftp://bench:bench@127.0.0.1:$port"

start_server() { # start_server [--direct-reads]
	"$bin/xftpd" -p "$port" --root "$work/root" --users "$work/users" --allow-root "$@" 2>/dev/null &
	server=$!
	for _ in $(seq 50); do ss -Hltn "sport = :$port" | grep -q . && return; sleep 0.1; done
	echo "xftpd did not start" >&2
	exit 1
}

# timed CMD...: MB/s of CMD followed by sync, caches dropped first.
timed() {
	sync
	echo 3 >/proc/sys/vm/drop_caches
	local t0 t1
	t0=$(date +%s.%N)
	"$@" >/dev/null 2>&1
	sync
	t1=$(date +%s.%N)
	echo "$mib * 1.048576 / ($t1 - $t0)" | bc -l
}

declare -A results
for round in $(seq "$rounds"); do
	for mode in page direct; do
		if [ "$mode" = direct ]; then start_server --direct-reads; else start_server; fi
		rm -f "$work/local/g" "$work/root/p"
		results[$mode-xftp-get]+="$(timed "$bin/xftp" -q get "$url/src" "$work/local/g") "
		results[$mode-xftp-put]+="$(timed "$bin/xftp" -q put "$work/local/g" "$url/p") "
		rm -f "$work/local/c"
		results[$mode-curl-get]+="$(timed curl -sS "$url/src" -o "$work/local/c") "
		kill "$server"
		wait "$server" || true
	done
	echo "round $round done" >&2
done
printf '%-14s %10s %16s %10s %16s %8s\n' case page "(min-max)" direct "(min-max)" direct/page
for case in xftp-get xftp-put curl-get; do
	python3 - "$case" "${results[page-$case]}" "${results[direct-$case]}" <<'PY'
import statistics, sys
a = [float(x) for x in sys.argv[2].split()]
b = [float(x) for x in sys.argv[3].split()]
print('%-14s %10.0f %16s %10.0f %16s %8.2f' % (sys.argv[1], statistics.median(a),
      '%.0f-%.0f' % (min(a), max(a)), statistics.median(b), '%.0f-%.0f' % (min(b), max(b)),
      statistics.median(b) / statistics.median(a)))
PY
done
