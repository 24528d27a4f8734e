#!/bin/bash
# Guest half of bench/xftp-striped.sh, run by tests/vm/boot.sh --disks 4 --disk-bps B: two
# xftpd on loopback, one over a striped store of a directory on each of the four throttled
# disks, one over a directory on disk 0 alone. xftp puts a file of MIB MiB (from tmpfs) to
# each and gets it back (to tmpfs), run after run, the order of the stores alternating.
# A third xftpd stripes over four tmpfs directories: no disk in the path, so its figures
# (put0, get0) are what the guest's emulated CPU allows xftp at all.
# A put is timed to durable (xftp, then sync); the page cache is dropped before a get.
# Every get is compared with the source. One line per transfer goes to
# $DS_VM_WORK/results.tsv: case (put4, put1, put0, get4, get1, get0), MB/s (10^6 B/s) over the
# whole command to its final sync, the guest's CPU busy over it and the kernel's part of it
# (% of all vCPUs, from /proc/stat), the run, and MB/s by xftp's own clock: from its STOR or
# RETR to the transfer's end, after the fsync of the side that wrote (the ftp figure; the
# whole command adds the process start and a login whose yescrypt check costs 0.4 s of
# emulated CPU, the same for every store).
# XFTP_OPTS (e.g. "-P 4 -b 8M") go to every xftp; XFTPD_OPTS to both servers.
#   boot.sh --disks 4 --disk-bps 50000000 bench/xftp-striped.guest.sh RUNS MIB
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=../tests/vm/guest-lib.sh
. "$here/../tests/vm/guest-lib.sh"
[ -n "${DS_VM_WORK:-}" ] || ds_vm_die "run me inside the VM: tests/vm/boot.sh --disks 4 $0 RUNS MIB"
bin=${DS_BIN:?DS_BIN must name the folder of the built tools}
runs=${1:?usage: $0 RUNS MIB}
mib=${2:?usage: $0 RUNS MIB}
[[ $runs =~ ^[1-9][0-9]*$ ]] || ds_vm_die "RUNS '$runs' is not a count"
[[ $mib =~ ^[1-9][0-9]*$ ]] || ds_vm_die "MIB '$mib' is not a count of MiB"
IFS=, read -ra disks <<<"${DS_VM_DISKS:-}"
[ "${#disks[@]}" -eq 4 ] || ds_vm_die "needs four disks (boot.sh --disks 4), got '${DS_VM_DISKS:-}'"
read -ra xftp_opts <<<"${XFTP_OPTS:-}"
read -ra xftpd_opts <<<"${XFTPD_OPTS:-}"

results=$DS_VM_WORK/results.tsv
: >"$results"
logs=$DS_VM_WORK/logs
mkdir -p "$logs"
limit=$((120 + mib)) # every transfer's time limit: a stuck one fails the bench, never hangs it

# The stores: s/ on each disk (striped), one/ on disk 0; xftpd serves as nobody.
striped=""
for d in "${disks[@]}"; do
	mkdir -p "$d/s"
	striped=${striped:+$striped,}$d/s
done
mkdir -p "${disks[0]}/one" "$TMPDIR"/m{0,1,2,3}
chown nobody "${disks[@]/%//s}" "${disks[0]}/one" "$TMPDIR"/m{0,1,2,3}
echo bench | "$bin/xftpd" --add-user "$TMPDIR/users" bench >/dev/null
serve() { # serve PORT ROOT
	timeout $((runs * 4 * limit + 300)) "$bin/xftpd" -p "$1" --listen 127.0.0.1 --root "$2" \
		--users "$TMPDIR/users" --run-as nobody "${xftpd_opts[@]}" >"$logs/xftpd.$1" 2>&1 &
}
serve 2121 "$striped"
serve 2122 "${disks[0]}/one"
serve 2123 "$TMPDIR/m0,$TMPDIR/m1,$TMPDIR/m2,$TMPDIR/m3"
trap 'kill $(jobs -p) 2>/dev/null || true' EXIT
ds_vm_wait_tcp 2121 || ds_vm_die "xftpd on the striped store did not listen"
ds_vm_wait_tcp 2122 || ds_vm_die "xftpd on one disk did not listen"
ds_vm_wait_tcp 2123 || ds_vm_die "xftpd on tmpfs did not listen"

# The constant in every whole command: a process start, a login and a LIST, and no data.
for i in 1 2 3; do
	t0=$(date +%s.%N)
	"$bin/xftp" ls "ftp://bench:bench@127.0.0.1:2123/" >/dev/null || ds_vm_die "xftp ls"
	echo "$t0 $(date +%s.%N)"
done | awk '{ print $2 - $1 }' | sort -n | sed -n 2p >"$DS_VM_WORK/login.txt"

src=$TMPDIR/src
back=$TMPDIR/back
head -c $((mib << 20)) /dev/urandom >"$src"

# cpu: the guest's busy, system (with irq and softirq) and all jiffies so far.
cpu() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8, $4 + $7 + $8, $2 + $3 + $4 + $5 + $6 + $7 + $8 }' /proc/stat; }
# xfer CASE CMD...: times CMD to a final sync, then records MB/s by that clock and by xftp's
# own, and the CPU busy meanwhile.
xfer() {
	local name=$1 t0 t1 c0 c1
	shift
	sync
	t0=$(date +%s.%N) c0=$(cpu)
	timeout "$limit" "$@" >"$logs/$name.$run" 2>"$logs/$name.$run.err" || {
		cat "$logs/$name.$run.err" "$logs/$name.$run" "$logs"/xftpd.* >&2
		ds_vm_die "$name, run $run: $*"
	}
	sync
	t1=$(date +%s.%N) c1=$(cpu)
	local own
	own=$(jq -rs 'last | .seconds // empty' "$logs/$name.$run")
	[ -n "$own" ] || ds_vm_die "$name, run $run: no seconds in xftp's --json summary"
	awk -v n="$name" -v r="$run" -v b=$((mib << 20)) -v a="$t0" -v z="$t1" -v c0="$c0" -v c1="$c1" \
		-v own="$own" '
		BEGIN { split(c0, p, " "); split(c1, q, " ")
			printf "%s\t%.1f\t%.0f\t%.0f\t%d\t%.1f\n", n, b / (z - a) / 1e6, 100 * (q[1] - p[1]) / (q[3] - p[3]),
			       100 * (q[2] - p[2]) / (q[3] - p[3]), r, b / own / 1e6 }' |
		tee -a "$results" |
		awk -F'\t' '{ printf "run %s: %-5s %7.1f MB/s (whole command %5.1f)  cpu %3s%% (system %s%%)\n", $5, $1, $6, $2, $3, $4 }'
}

# round WIDTH PORT: put the file, drop the caches, get it back, compare, remove it.
round() {
	local url="ftp://bench:bench@127.0.0.1:$2/f"
	xfer "put$1" "$bin/xftp" -q --json "${xftp_opts[@]}" put "$src" "$url"
	echo 3 >/proc/sys/vm/drop_caches
	xfer "get$1" "$bin/xftp" -q --json "${xftp_opts[@]}" get "$url" "$back"
	cmp "$src" "$back" || ds_vm_die "get$1, run $run: the bytes differ from the put's"
	rm -f "$back"
	curl -sS -Q "DELE f" "ftp://bench:bench@127.0.0.1:$2/" >/dev/null || ds_vm_die "DELE f on $2"
}

for ((run = 1; run <= runs; run++)); do
	if ((run % 2)); then
		round 4 2121
		round 1 2122
		round 0 2123
	else
		round 0 2123
		round 1 2122
		round 4 2121
	fi
done
echo "bench: done"
