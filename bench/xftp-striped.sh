#!/usr/bin/env bash
# The 1994 paper's point in the slow-disk VM (tests/vm): xftp put and get of a file through
# xftpd over loopback in the guest, with a store striped over four disks throttled to
# 50 MB/s each, against a store on one of those disks. Each put is timed until durable
# (a final sync), caches are dropped before each get, every get is compared with the
# source, the two stores alternate. Prints medians, min-max, the guest's CPU busy and the
# striped/one-disk ratios, by xftp's own clock (STOR or RETR to the end of the transfer,
# after the writer's fsync: what ftp has always reported) and by the whole command (with the
# process start and the login). The guest half is xftp-striped.guest.sh.
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
printf 'get. MB/s = 10^6 B/s by xftp'"'"'s own clock, from its STOR or RETR to the transfer'"'"'s end\n'
printf 'after the writer'"'"'s fsync (the figure ftp reports); whole = the whole command to a final\n'
printf 'sync, with the process start and the login (a yescrypt check, 0.4 s of emulated CPU);\n'
printf 'cpu = guest CPU busy over the command, %% of both vCPUs, and system = its kernel part\n'
printf '(system, irq, softirq); medians. Host load average %s before, %s after:\n' "$load0" \
	"$(cut -d' ' -f1-3 /proc/loadavg)"
printf 'TCG runs on the host'"'"'s cores, so its load moves every figure. An xftp ls (process\n'
printf 'start, login, LIST, no data) took %s s in the guest (median of 3).\n\n' "$(cat "$work/vm/login.txt")"
printf '%-5s %8s %15s %8s %15s %6s %7s\n' case MB/s '(min-max)' whole '(min-max)' cpu system
awk -F'\t' '
	function median(a, k,   i, j, t) {
		for (i = 2; i <= k; i++) for (j = i; j > 1 && a[j - 1] > a[j]; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
		return (k % 2) ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2
	}
	# ratio DIR BY WHAT: striped/one-disk of the medians and paired by run, by column BY.
	function ratio(d, by, what,   r, k, run, x) {
		if (med[d "1", by] <= 0) return
		delete r; k = 0
		for (run = 1; (d "1", run) in runs; run++)
			if (((d "4", run) in runs) && val[d "1", run, by] > 0) r[++k] = val[d "4", run, by] / val[d "1", run, by]
		x = med[d "4", by] / med[d "1", by]
		printf "%s: striped/one-disk %.2fx (medians); paired by run %.2fx (%.2f-%.2f)%s\n", d, x,
		       median(r, k), r[1], r[k], what
		if (med[d "0", by] > 0)
			printf "%s: no disk/one-disk %.2fx: the most striping could give in this guest\n",
			       d, med[d "0", by] / med[d "1", by]
	}
	{ n[$1]++; runs[$1, $5] = 1; val[$1, $5, 6] = $6; val[$1, $5, 2] = $2
	  v[$1, n[$1]] = $6; w[$1, n[$1]] = $2; c[$1, n[$1]] = $3; s[$1, n[$1]] = $4 }
	END {
		split("put4 put1 put0 get4 get1 get0", cases, " ")
		for (i = 1; i <= 6; i++) {
			k = cases[i]; m = n[k]
			if (!m) continue
			delete a; delete b; delete e; delete f
			for (j = 1; j <= m; j++) { a[j] = v[k, j]; f[j] = w[k, j]; b[j] = c[k, j]; e[j] = s[k, j] }
			med[k, 6] = median(a, m); med[k, 2] = median(f, m)
			printf "%-5s %8.1f %7.1f-%-7.1f %8.1f %7.1f-%-7.1f %5.0f%% %6.0f%%\n", k, med[k, 6], a[1], a[m],
			       med[k, 2], f[1], f[m], median(b, m), median(e, m)
		}
		print "\nBy xftp'"'"'s clock (Bar: >= 3.5x):"
		ratio("put", 6, "")
		ratio("get", 6, "")
		print "\nBy the whole command:"
		ratio("put", 2, "")
		ratio("get", 2, "")
	}' "$results"
