#!/usr/bin/env bash
# The 1994 paper's point in the slow-disk VM (tests/vm): xftp put and get of a file through
# xftpd over loopback in the guest, with a store striped over four disks throttled to
# 50 MB/s each, against a store on one of those disks. Each put is timed until durable
# (a final sync), caches are dropped before each get, every get is compared with the
# source, the two stores alternate. Prints medians, min-max, the guest's CPU busy and the
# striped/one-disk ratios. The guest half is xftp-striped.guest.sh.
#   DS_BIN=build/bin bench/xftp-striped.sh [RUNS] [MIB]
# Defaults: 5 runs of 400 MiB. Needs root, qemu and a VM cache (tests/vm/prepare.sh;
# DS_VM_CACHE names it); holds /tmp/ds-bench.lock. XFTP_OPTS and XFTPD_OPTS pass options
# to xftp and xftpd ("-P 4", "-b 8M"); DS_VM_CPU the guest's qemu CPU model (default
# max,-erms,-fsrm: with ERMS the guest kernel copies with rep movsb, which TCG runs a byte
# at a time, and loopback TCP in the guest falls below one disk's 50 MB/s).
set -euo pipefail
if [ -z "${DS_XFTP_STRIPED_LOCKED:-}" ]; then
	exec env DS_XFTP_STRIPED_LOCKED=1 flock /tmp/ds-bench.lock bash "$0" "$@"
fi
bin=${DS_BIN:?DS_BIN must name the folder of the built tools}
runs=${1:-5}
mib=${2:-400}
[[ $runs =~ ^[1-9][0-9]*$ ]] || { echo "bench: RUNS '$runs' is not a count" >&2; exit 2; }
if ! [[ $mib =~ ^[1-9][0-9]*$ ]] || [ "$mib" -gt 800 ]; then
	echo "bench: MIB '$mib' is not a size in MiB from 1 to 800" >&2
	exit 2
fi
for tool in xftp xftpd; do
	[ -x "$bin/$tool" ] || { echo "bench: no $tool in DS_BIN=$bin" >&2; exit 1; }
done
cpu=${DS_VM_CPU:-max,-erms,-fsrm}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

load0=$(cut -d' ' -f1-3 /proc/loadavg)
# One disk moves the file in MIB/50 s each way; the guest's tmpfs holds three copies.
DS_BIN=$(cd "$bin" && pwd) "$here/../tests/vm/boot.sh" --disks 4 --disk-bps 50000000 \
	--disk-size 2G --mem 4G --smp 2 --cpu "$cpu" --timeout $((180 + runs * mib / 2)) \
	--env "XFTP_OPTS=${XFTP_OPTS:-}" --env "XFTPD_OPTS=${XFTPD_OPTS:-}" \
	--workdir "$work/vm" "$here/xftp-striped.guest.sh" "$runs" "$mib" >"$work/console.log" 2>&1 || {
	tail -40 "$work/console.log" >&2
	echo "bench: the VM run failed (its console above)" >&2
	exit 1
}
grep '^run ' "$work/console.log" || true
results=$work/vm/results.tsv

printf '\nxftp put/get of %s MiB through xftpd on loopback in the test VM (qemu TCG, -cpu %s,\n' "$mib" "$cpu"
printf '2 vCPUs), store striped over 4 disks (4) or on 1 disk (1), each disk throttled to 50 MB/s,\n'
printf 'or striped over 4 tmpfs directories (0: no disk, the ceiling the emulated CPU sets);\n'
printf 'xftp %s, xftpd %s. %s runs, alternating; put timed to durable, caches dropped before\n' \
	"${XFTP_OPTS:-(defaults)}" "${XFTPD_OPTS:-(defaults)}" "$runs"
printf 'get. MB/s = 10^6 B/s; cpu = guest CPU busy during the transfer, %% of both vCPUs,\n'
printf 'and system = its kernel part (system, irq, softirq); medians. Host load average %s\n' "$load0"
printf 'before, %s after: TCG runs on the host'"'"'s cores, so its load moves every figure.\n\n' \
	"$(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-5s %8s %15s %6s %7s\n' case median '(min-max)' cpu system
awk -F'\t' '
	function median(a, k,   i, j, t) {
		for (i = 2; i <= k; i++) for (j = i; j > 1 && a[j - 1] > a[j]; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
		return (k % 2) ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2
	}
	{ n[$1]++; v[$1, n[$1]] = $2; c[$1, n[$1]] = $3; s[$1, n[$1]] = $4; by_run[$1, $5] = $2 }
	END {
		split("put4 put1 put0 get4 get1 get0", cases, " ")
		for (i = 1; i <= 6; i++) {
			k = cases[i]; m = n[k]
			if (!m) continue
			delete a; delete b; delete e
			for (j = 1; j <= m; j++) { a[j] = v[k, j]; b[j] = c[k, j]; e[j] = s[k, j] }
			med[k] = median(a, m)
			printf "%-5s %8.1f %7.1f-%-7.1f %5.0f%% %6.0f%%\n", k, med[k], a[1], a[m], median(b, m), median(e, m)
		}
		print ""
		split("put get", dirs, " ")
		for (i = 1; i <= 2; i++) {
			d = dirs[i]
			if (med[d "1"] <= 0) continue
			delete r; k = 0
			for (run = 1; (d "1", run) in by_run; run++)
				if (((d "4", run) in by_run) && by_run[d "1", run] > 0) r[++k] = by_run[d "4", run] / by_run[d "1", run]
			printf "%s: striped/one-disk %.2fx (medians); paired by run %.2fx (%.2f-%.2f)   Bar: >= 3.5x\n",
			       d, med[d "4"] / med[d "1"], median(r, k), r[1], r[k]
			if (med[d "0"] > 0)
				printf "%s: no disk/one-disk %.2fx: the most striping could give in this guest\n",
				       d, med[d "0"] / med[d "1"]
		}
	}' "$results"
