#!/usr/bin/env bash
# A tree of small files (default 2,000 files of 64 KiB of random data in 20 directories)
# copied disk to disk over loopback: xftp -r get against lftp mirror --parallel=4 and
# wget -r from the same xftpd; xftp -r put to xftpd against lftp mirror -R --parallel=4 to
# vsftpd and to xftpd; and, when xftp has --update, a second get into a complete copy.
# A file per data connection leaves a TIME_WAIT socket per file, which slows the next run
# on the same stack: every run gets a network namespace of its own, with its own servers
# (started before the clock). Caches are dropped before each run and the time ends when
# the copy is durable (the client, then sync); each copy is compared with the source.
# Cases alternate, the order reversed every other round; the table gives medians,
# min-max and the ratios the tree copy's bar asks for.
#   DS_BIN=build/bin bench/xftp-tree.sh [DIR] [ROUNDS] [FILES]
# Needs root (caches, network namespaces) and holds /tmp/ds-bench.lock. DS_TREE_CASES
# limits the cases (a regular expression on their names); DS_TREE_DIRS (default 20) and
# DS_TREE_SIZE (default 64K) shape the tree. DS_BIN_B=DIR adds a second build's xftp and
# xftpd: its get, its put and lftp's put into its xftpd (cases ending in -b) run in every
# round beside the first build's, with the ratios of their medians, B/A. DS_TREE_FS=ext4
# (or xfs) runs it all on a file system of that kind made with its defaults (ext4: with a
# journal) in an image in DIR, through a loop device that writes straight to the image:
# xftpd makes uploads durable per run on those, per file on a file system without ordered
# journal commits (docs/xftp.md), which DIR's may be.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# One run, inside a network namespace of its own (the script calls itself through
# unshare -n): SERVERS (x: xftpd, v: vsftpd) started, caches dropped, CMD, sync; prints
# the seconds from CMD's start to the end of the sync. On any exit, every process left in
# the namespace (the servers and their sessions) is ended.
if [ -n "${DS_TREE_RUN:-}" ]; then
	work=$DS_TREE_WORK servers=$1 cmd=$2
	# shellcheck disable=SC2317 # called by the EXIT trap
	sweep() {
		local pid i
		for ((i = 0; i < 50; i++)); do
			pgrep --ns $$ --nslist net >"$work/pids" || true
			grep -qvx $$ "$work/pids" || break
			while read -r pid; do
				[ "$pid" = $$ ] || kill "$pid" 2>/dev/null || true
			done <"$work/pids"
			sleep 0.1
		done
	}
	# A Ctrl-C arrives as TERM, from the script that started the run. Each trap sweeps by
	# itself: a trap that bash runs in the middle of the EXIT trap's sweep sweeps again.
	trap sweep EXIT
	trap 'sweep; exit 143' TERM
	ip link set lo up
	# x: the first build's xftpd, b: the second's (DS_BIN_B), on the same port and store.
	if [[ $servers == *[xb]* ]]; then
		bin=$DS_BIN
		[[ $servers != *b* ]] || bin=$DS_BIN_B
		"$bin/xftpd" -p 2122 --listen 127.0.0.1 --root "$work/xs/root" --users "$work/xs/users" \
			--run-as nobody >>"$work/xs/log" 2>&1 </dev/null &
		bench_wait_listening 2122
	fi
	if [[ $servers == *v* ]]; then
		vsftpd "$work/vs/vsftpd.conf" >>"$work/vs/log" 2>&1 </dev/null &
		bench_wait_listening 2121
	fi
	sync
	echo 3 >/proc/sys/vm/drop_caches
	start=$(date +%s.%N)
	# In the background: the TERM trap then runs at once, not once the client has ended.
	bash -c "$cmd" >/dev/null 2>"$work/err" </dev/null &
	wait $! || {
		{ echo "bench: '$cmd' failed:"; tail -n 3 "$work/err"; } >&2
		exit 1
	}
	sync
	end=$(date +%s.%N)
	awk -v s="$start" -v e="$end" 'BEGIN { printf "%.6f\n", e - s }'
	exit 0
fi

if [ -z "${DS_TREE_LOCKED:-}" ]; then
	exec flock /tmp/ds-bench.lock env DS_TREE_LOCKED=1 bash "$0" "$@"
fi
bin=${DS_BIN:?DS_BIN must name the folder of the built tools}
bin=$(cd "$bin" && pwd)
bin_b=${DS_BIN_B:-}
if [ -n "$bin_b" ]; then
	bin_b=$(cd "$bin_b" && pwd)
	for tool in xftp xftpd; do
		[ -x "$bin_b/$tool" ] || { echo "bench: no $tool in DS_BIN_B=$bin_b" >&2; exit 1; }
	done
fi
dir=${1:-/var/tmp}
rounds=${2:-5}
files=${3:-2000}
dirs=${DS_TREE_DIRS:-20}
only=${DS_TREE_CASES:-.}
size=$(bench_bytes "${DS_TREE_SIZE:-64K}") || { echo "bench: DS_TREE_SIZE: a size such as 64K" >&2; exit 2; }
for n in "$rounds" "$files" "$dirs"; do
	[[ $n =~ ^[1-9][0-9]{0,6}$ ]] || { echo "bench: '$n': expected a whole number from 1" >&2; exit 2; }
done
((dirs <= files)) || dirs=$files
[ "$(id -u)" = 0 ] || { echo "bench: needs root (caches, network namespaces)" >&2; exit 1; }
for tool in vsftpd lftp wget pgrep unshare split; do
	command -v "$tool" >/dev/null || { echo "bench: $tool is not installed (packages.txt)" >&2; exit 1; }
done
getent passwd ftp >/dev/null || { echo "bench: no ftp user (the vsftpd package makes it)" >&2; exit 1; }
getent passwd nobody >/dev/null || { echo "bench: no user nobody to serve xftpd as" >&2; exit 1; }

fs=${DS_TREE_FS:-}
case $fs in
"" | ext4 | xfs) ;;
*) echo "bench: DS_TREE_FS '$fs': ext4 or xfs" >&2; exit 2 ;;
esac
[ -z "$fs" ] || command -v "mkfs.$fs" >/dev/null || { echo "bench: no mkfs.$fs" >&2; exit 1; }
work=$(mktemp -d "$dir/xftp-tree.XXXXXX")
# A run sweeps its own namespace when it ends, also when stopped: on the way out, the run
# under way is stopped and waited for, then the work folder goes (with DS_TREE_FS, the file
# system mounted on it and its image first). As in a run, every trap cleans up by itself.
run_pid=
loop=
# shellcheck disable=SC2317 # called by the traps
leave() {
	[ -z "$run_pid" ] || { kill -TERM "$run_pid" 2>/dev/null || true; wait "$run_pid" || true; }
	run_pid=
	if [ -n "$loop" ]; then
		umount "$work" 2>/dev/null || true
		losetup -d "$loop" 2>/dev/null || true
		loop=
	fi
	rm -rf "$work" "$work.img"
}
trap leave EXIT
trap 'leave; exit 130' INT
trap 'leave; exit 143' TERM
if [ -n "$fs" ]; then
	# Room for the tree four times over (source, a server's copy, a client's copy, spare).
	truncate -s $((4 * files * size + (1 << 30))) "$work.img"
	"mkfs.$fs" -q "$work.img" >/dev/null || { echo "bench: mkfs.$fs failed" >&2; exit 1; }
	loop=$(losetup --direct-io=on -f --show "$work.img") || { echo "bench: no loop device" >&2; exit 1; }
	mount "$loop" "$work" || { echo "bench: cannot mount the $fs image" >&2; exit 1; }
fi
chmod 755 "$work"
results=$work/results.tsv
src=$work/local/src
dst=$work/local/dst
mkdir -p "$src" "$work/vs/root/pub" "$work/vs/empty" "$work/xs/root"

# The tree: FILES files of SIZE bytes, spread evenly over DIRS directories.
for ((d = 0; d < dirs; d++)); do
	n=$((files / dirs + (d < files % dirs)))
	sub=$(printf '%s/d%03d' "$src" "$d")
	mkdir "$sub"
	head -c $((n * size)) /dev/urandom | split -b "$size" -d -a 6 - "$sub/f"
done
# xftpd serves the same inodes the puts read.
cp -al "$src" "$work/xs/root/tree"
chown nobody "$work/xs/root"
chown ftp "$work/vs/root/pub"
bench_vsftpd_conf "$work/vs/root" 2121 0 >"$work/vs/vsftpd.conf"
echo bench | "$bin/xftpd" --add-user "$work/xs/users" bench >/dev/null

x=ftp://bench:bench@127.0.0.1:2122
v=ftp://127.0.0.1:2121
# Each case: NAME, its servers, where its copy lands (compared, then removed), an untimed
# command run first in a namespace of its own (or nothing), the timed command.
cases=(
	"xftp-get|x|$dst||$bin/xftp -q -r get $x/tree $dst"
	"lftp-get|x|$dst||lftp -c 'open $x; mirror --parallel=4 tree $dst'"
	"wget-get|x|$dst||wget -r -q -nH --cut-dirs=1 -P $dst $x/tree/"
	"xftp-put|x|$work/xs/root/dst||$bin/xftp -q -r put $src $x/dst"
	"lftp-put-vsftpd|v|$work/vs/root/pub/dst||lftp -c 'open $v; mirror -R --parallel=4 $src pub/dst'"
	"lftp-put-xftpd|x|$work/xs/root/dst||lftp -c 'open $x; mirror -R --parallel=4 $src dst'"
	"xftp-update-get|x|$dst|$bin/xftp -q -r get $x/tree $dst|$bin/xftp -q -r --update get $x/tree $dst"
)
notes=()
if ! "$bin/xftp" --help 2>&1 | grep -q -- --update; then
	notes+=("xftp-update-get skipped: xftp --help lists no --update")
	unset 'cases[${#cases[@]}-1]'
fi
if [ -n "$bin_b" ]; then
	cases+=(
		"xftp-get-b|b|$dst||$bin_b/xftp -q -r get $x/tree $dst"
		"xftp-put-b|b|$work/xs/root/dst||$bin_b/xftp -q -r put $src $x/dst"
		"lftp-put-xftpd-b|b|$work/xs/root/dst||lftp -c 'open $x; mirror -R --parallel=4 $src dst'"
	)
fi

# in_netns SERVERS CMD: CMD in a fresh network namespace with SERVERS; its seconds into
# $work/seconds. In the background, so that a signal here ends the wait at once.
in_netns() {
	DS_TREE_RUN=1 DS_TREE_WORK=$work DS_BIN=$bin DS_BIN_B=$bin_b unshare -n bash "$0" "$@" >"$work/seconds" &
	run_pid=$!
	wait "$run_pid" || return
	run_pid=
}

# failed WHAT: after a run's failure (its status in $?), a line, or the signal's status.
failed() {
	local status=$?
	((status <= 128)) || exit "$status"
	echo "bench: $1 failed" >&2
	exit 1
}

# check NAME COPY: COPY holds the tree, every file equal to the source's, nothing else.
check() {
	local name=$1 copy=$2 count
	count=$(find "$copy" -type f 2>/dev/null | wc -l)
	[ "$count" = "$files" ] || { echo "bench: $name: $count files in the copy, not $files" >&2; exit 1; }
	diff -rq "$src" "$copy" >"$work/diff" 2>&1 ||
		{ echo "bench: $name: the copy differs: $(head -n 3 "$work/diff")" >&2; exit 1; }
}

# run NAME SERVERS LANDS PREP CMD: the timed run, the copy checked and removed.
run() {
	local name=$1 servers=$2 lands=$3 prep=$4 cmd=$5 seconds
	rm -rf "$lands"
	if [ -n "$prep" ]; then
		in_netns "$servers" "$prep" || failed "$name: its first copy"
		check "$name (first copy)" "$lands"
	fi
	in_netns "$servers" "$cmd" || failed "$name"
	read -r seconds <"$work/seconds"
	check "$name" "$lands"
	rm -rf "$lands"
	printf '%s\t%s\n' "$name" "$seconds" >>"$results"
}

selected=()
for c in "${cases[@]}"; do
	[[ ${c%%|*} =~ $only ]] && selected+=("$c")
done
[ ${#selected[@]} -gt 0 ] || { echo "bench: no case matches '$only'" >&2; exit 2; }
: >"$results"
for ((round = 1; round <= rounds; round++)); do
	order=("${selected[@]}")
	if ((round % 2 == 0)); then # reversed: no case always follows the same one
		for ((i = 0; i < ${#selected[@]}; i++)); do order[i]=${selected[${#selected[@]} - 1 - i]}; done
	fi
	for c in "${order[@]}"; do
		IFS='|' read -r name servers lands prep cmd <<<"$c"
		run "$name" "$servers" "$lands" "$prep" "$cmd"
	done
done

med() { bench_median "$results" "$1" | cut -d' ' -f1; }
ratio() { # A B [WANT]: the ratio of the medians A/B, and whether it meets WANT (">= 1.5")
	local a b
	a=$(med "$1") b=$(med "$2")
	if [ -z "$(awk -F'\t' -v n="$1" '$1 == n' "$results")" ] ||
		[ -z "$(awk -F'\t' -v n="$2" '$1 == n' "$results")" ]; then
		printf '%-34s %6s%s\n' "$1 / $2" - "${3:+   want $3}"
		return
	fi
	awk -v a="$a" -v b="$b" -v n="$1 / $2" -v want="${3:-}" 'BEGIN {
		r = a / b; split(want, w, " ")
		if (want == "") { printf "%-34s %6.2f\n", n, r; exit }
		ok = (w[1] == ">=") ? r >= w[2] : r <= w[2]
		printf "%-34s %6.2f   want %s %s   %s\n", n, r, w[1], w[2], ok ? "met" : "NOT met" }'
}
bytes=$((files * size))
printf "\n%d files of %s in %d directories (%s) copied on loopback in %s; every run in a\n" \
	"$files" "$(bench_human "$size")" "$dirs" "$(bench_human "$bytes")" "$dir"
printf "fresh network namespace, caches dropped, timed to a final sync; %d rounds.\n" "$rounds"
[ -z "$fs" ] || printf "All of it on %s made with its defaults, in an image through a loop device.\n" "$fs"
printf "files/s and MB/s (10^6 B/s) from the median.\n\n"
printf "%-16s %9s %15s %9s %8s\n" case "median s" "(min-max)" files/s MB/s
for c in "${selected[@]}"; do
	name=${c%%|*}
	read -r m lo hi < <(bench_median "$results" "$name")
	printf "%-16s %9.3f %15s %9.0f %8.0f\n" "$name" "$m" "$(printf '%.3f-%.3f' "$lo" "$hi")" \
		"$(awk -v n="$files" -v s="$m" 'BEGIN { print n / s }')" \
		"$(awk -v b="$bytes" -v s="$m" 'BEGIN { print b / s / 1e6 }')"
done
printf "\nBar (ratios of median times):\n"
ratio lftp-get xftp-get ">= 1.5"
ratio wget-get xftp-get ">= 1.5"
ratio lftp-put-vsftpd xftp-put ">= 1.5"
ratio lftp-put-xftpd lftp-put-vsftpd "<= 1.25"
if [ -n "$bin_b" ]; then
	printf "\nThe second build (DS_BIN_B) against the first, ratios of median times:\n"
	for name in xftp-get xftp-put lftp-put-xftpd; do
		ratio "$name-b" "$name"
	done
fi
for note in "${notes[@]}"; do printf '\n%s\n' "$note"; done
