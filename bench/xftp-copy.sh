#!/usr/bin/env bash
# A file copied disk to disk over loopback by xftp (get and put, against xftpd and against
# vsftpd), curl and lftp against vsftpd, scp and rsync through sshd, and locally by cat and
# dd O_DIRECT; and the same FTP copies under TLS (xftpd --tls-required, vsftpd with TLS
# forced, the tls cases). Every run starts with caches dropped and ends when the copy is durable (a
# final sync); cases alternate, the order reversed every other round. One table gives
# medians, min-max and ratios; a second gives xftp at the 1994 paper's ftp buffer sizes.
#   DS_BIN=build/bin bench/xftp-copy.sh [DIR] [ROUNDS] [SIZE_MIB]
# Needs root (caches, a private network namespace, sshd) and holds /tmp/ds-bench.lock.
# DS_XFTP_CASES limits the cases (a regular expression on their names);
# DS_XFTP_BUFFERS the buffer table's sizes ("" skips it).
set -euo pipefail
if [ -z "${DS_XFTP_NETNS:-}" ]; then
	exec flock /tmp/ds-bench.lock unshare -n env DS_XFTP_NETNS=1 bash "$0" "$@"
fi
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bin=${DS_BIN:?DS_BIN must name the folder of the built tools}
bin=$(cd "$bin" && pwd)
dir=${1:-/var/tmp}
rounds=${2:-5}
mib=${3:-1024}
only=${DS_XFTP_CASES:-.}
buffers=${DS_XFTP_BUFFERS-16K 60K 960K 4M}
for tool in vsftpd curl lftp scp rsync sshd ssh-keygen jq; do
	command -v "$tool" >/dev/null || { echo "bench: $tool is not installed (packages.txt)" >&2; exit 1; }
done
getent passwd ftp >/dev/null || { echo "bench: no ftp user (the vsftpd package makes it)" >&2; exit 1; }
ip link set lo up
work=$(mktemp -d "$dir/xftp-copy.XXXXXX")
trap 'kill $(jobs -p) 2>/dev/null || true; wait; rm -rf "$work"' EXIT
chmod 755 "$work"
results=$work/results.tsv
src=$work/local/src
mkdir -p "$work/local" "$work/vs/root/pub" "$work/vs/empty" "$work/xs/root" "$work/ssh"

# The file, one inode in each server's tree: every reader reads the same blocks of the disk.
head -c $((mib << 20)) /dev/urandom >"$src"
ln "$src" "$work/vs/root/pub/src"
ln "$src" "$work/xs/root/src"
chown ftp "$work/vs/root/pub"
chown -R nobody "$work/xs/root"

bench_vsftpd_conf "$work/vs/root" 2121 0 >"$work/vs/vsftpd.conf"
vsftpd "$work/vs/vsftpd.conf" &
bench_wait_listening 2121

echo bench | "$bin/xftpd" --add-user "$work/xs/users" bench >/dev/null
# xftpd_on PORT BLOCK: an xftpd on loopback whose buffers are BLOCK bytes.
xftpd_on() {
	"$bin/xftpd" -p "$1" -b "$2" --listen 127.0.0.1 --root "$work/xs/root" \
		--users "$work/xs/users" >"$work/xs/log.$1" 2>&1 &
	bench_wait_listening "$1"
}
xftpd_on 2122 4M

# TLS: a CA, a certificate for 127.0.0.1 it signed; vsftpd with TLS forced on 2123 (as
# the issue's peers measured it), xftpd --tls-required on 2124.
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$work/ca.key" -out "$work/ca.pem" -days 2 \
	-subj /CN=bench-ca 2>/dev/null
openssl req -newkey rsa:2048 -nodes -keyout "$work/tls.key" -out "$work/tls.csr" -subj /CN=bench \
	2>/dev/null
printf 'subjectAltName=IP:127.0.0.1\n' >"$work/tls.ext"
openssl x509 -req -in "$work/tls.csr" -CA "$work/ca.pem" -CAkey "$work/ca.key" -CAcreateserial \
	-out "$work/tls.pem" -days 2 -extfile "$work/tls.ext" 2>/dev/null
mkdir -p "$work/vst/empty"
{
	bench_vsftpd_conf "$work/vs/root" 2123 0
	printf '%s\n' ssl_enable=YES allow_anon_ssl=YES force_anon_logins_ssl=YES \
		force_anon_data_ssl=YES ssl_ciphers=HIGH "rsa_cert_file=$work/tls.pem" \
		"rsa_private_key_file=$work/tls.key"
} | sed "s|^secure_chroot_dir=.*|secure_chroot_dir=$work/vst/empty|" >"$work/vst/vsftpd.conf"
vsftpd "$work/vst/vsftpd.conf" &
bench_wait_listening 2123
"$bin/xftpd" -p 2124 --listen 127.0.0.1 --root "$work/xs/root" --users "$work/xs/users" \
	--tls-cert "$work/tls.pem" --tls-key "$work/tls.key" --tls-required >"$work/xs/log.2124" 2>&1 &
bench_wait_listening 2124

ssh-keygen -q -t ed25519 -N '' -f "$work/ssh/host" && ssh-keygen -q -t ed25519 -N '' -f "$work/ssh/id"
cp "$work/ssh/id.pub" "$work/ssh/authorized_keys"
mkdir -p /run/sshd
/usr/sbin/sshd -D -p 2222 -o ListenAddress=127.0.0.1 -h "$work/ssh/host" \
	-o AuthorizedKeysFile="$work/ssh/authorized_keys" -o PermitRootLogin=prohibit-password \
	-o StrictModes=no -o PidFile=none &
bench_wait_listening 2222
ssh_opts="-i $work/ssh/id -p 2222 -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR"
scp_opts="-i $work/ssh/id -P 2222 -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR"

x=ftp://bench:bench@127.0.0.1:2122
v=ftp://127.0.0.1:2121
xt=ftp://bench:bench@127.0.0.1:2124
vt=ftp://127.0.0.1:2123
lftp_tls="set ftp:ssl-force true; set ftp:ssl-allow-anonymous true; set ftp:ssl-protect-data true; set ssl:ca-file $work/ca.pem"
dst=$work/local/dst
# Each case: NAME, where its copy lands (removed after the run), the command.
cases=(
	"xftp-get|$dst|$bin/xftp -q get $x/src $dst"
	"xftp-put|$work/xs/root/dst|$bin/xftp -q put $src $x/dst"
	"xftp-get-vsftpd|$dst|$bin/xftp -q get $v/pub/src $dst"
	"xftp-put-vsftpd|$work/vs/root/pub/dst|$bin/xftp -q put $src $v/pub/dst"
	"curl-get|$dst|curl -s -o $dst $v/pub/src"
	"curl-put|$work/vs/root/pub/dst|curl -s -T $src $v/pub/dst"
	"lftp-get|$dst|lftp -c 'open $v; get pub/src -o $dst'"
	"lftp-put|$work/vs/root/pub/dst|lftp -c 'open $v; put $src -o pub/dst'"
	"scp-get|$dst|scp $scp_opts root@127.0.0.1:$src $dst"
	"scp-put|$dst|scp $scp_opts $src root@127.0.0.1:$dst"
	"rsync-get|$dst|rsync -e 'ssh $ssh_opts' root@127.0.0.1:$src $dst"
	"rsync-put|$dst|rsync -e 'ssh $ssh_opts' $src root@127.0.0.1:$dst"
	"cat|$dst|cat $src >$dst"
	"dd-direct|$dst|dd if=$src of=$dst bs=4M iflag=direct oflag=direct status=none"
	"xftp-tls-get|$dst|$bin/xftp -q --tls --cacert $work/ca.pem get $xt/src $dst"
	"xftp-tls-put|$work/xs/root/dst|$bin/xftp -q --tls --cacert $work/ca.pem put $src $xt/dst"
	"xftp-tls-get-vsftpd|$dst|$bin/xftp -q --tls --cacert $work/ca.pem get $vt/pub/src $dst"
	"xftp-tls-put-vsftpd|$work/vs/root/pub/dst|$bin/xftp -q --tls --cacert $work/ca.pem put $src $vt/pub/dst"
	"curl-tls-get|$dst|curl -s --ssl-reqd --cacert $work/ca.pem -o $dst $vt/pub/src"
	"curl-tls-put|$work/vs/root/pub/dst|curl -s --ssl-reqd --cacert $work/ca.pem -T $src $vt/pub/dst"
	"lftp-tls-get|$dst|lftp -c '$lftp_tls; open $vt; get pub/src -o $dst'"
	"lftp-tls-put|$work/vs/root/pub/dst|lftp -c '$lftp_tls; open $vt; put $src -o pub/dst'"
)

# run NAME LANDS CMD: caches dropped, the copy, a sync; the MB/s into the results.
run() {
	local name=$1 lands=$2 cmd=$3 start end
	sync
	echo 3 >/proc/sys/vm/drop_caches
	start=$(date +%s.%N)
	bash -c "$cmd" >/dev/null 2>"$work/err" || { echo "bench: $name failed: $(cat "$work/err")" >&2; exit 1; }
	sync
	end=$(date +%s.%N)
	[ "$(stat -c %s "$lands")" -eq $((mib << 20)) ] || { echo "bench: $name copied the wrong size" >&2; exit 1; }
	rm -f "$lands"
	awk -v n="$name" -v b=$((mib << 20)) -v s="$start" -v e="$end" \
		'BEGIN { printf "%s\t%.1f\n", n, b / (e - s) / 1e6 }' >>"$results"
}

selected=()
for c in "${cases[@]}"; do
	[[ ${c%%|*} =~ $only ]] && selected+=("$c")
done
for ((round = 1; round <= rounds; round++)); do
	order=("${selected[@]}")
	if ((round % 2 == 0)); then # reversed: no case always follows the same one
		for ((i = 0; i < ${#selected[@]}; i++)); do order[i]=${selected[${#selected[@]} - 1 - i]}; done
	fi
	for c in "${order[@]}"; do
		IFS='|' read -r name lands cmd <<<"$c"
		run "$name" "$lands" "$cmd"
	done
done

median() { sort -g | awk '{ v[NR] = $1 } END { if (NR) print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
spread() { sort -g | awk 'NR == 1 { lo = $1 } { hi = $1 } END { if (NR) printf "%.0f-%.0f", lo, hi }'; }
pick() { awk -F'\t' -v n="$1" '$1 == n { print $2 }' "$results"; }
med() { pick "$1" | median; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a != "" && b > 0) printf "%.2f", a / b; else printf "-" }'; }

local_best=$(printf '%s\n%s\n' "$(med cat)" "$(med dd-direct)" | sort -g | tail -n 1)
printf "\n%d MiB disk to disk on loopback in %s, caches dropped, timed to a final sync;\n" "$mib" "$dir"
printf "%d rounds, MB/s = 10^6 B/s. Ratios for a get against curl-get, lftp-get and the\n" "$rounds"
printf "better local copy (cat, dd O_DIRECT); for a put against curl-put, lftp-put.\n\n"
printf "TLS cases against curl-tls, lftp-tls (vsftpd, TLS forced) and, last, the same xftp\n"
printf "case in the clear.\n\n"
printf "%-20s %8s %12s %9s %9s %9s\n" case median "(min-max)" "/curl" "/lftp" "/local"
for c in "${selected[@]}"; do
	name=${c%%|*}
	m=$(med "$name")
	dirn=get
	[[ $name == *put* ]] && dirn=put
	tls= last=$local_best
	[[ $name == *-tls-* ]] && tls=tls- last=$(med "${name/-tls/}")
	printf "%-20s %8.0f %12s %9s %9s %9s\n" "$name" "$m" "$(pick "$name" | spread)" \
		"$(ratio "$m" "$(med curl-$tls$dirn)")" "$(ratio "$m" "$(med lftp-$tls$dirn)")" \
		"$(ratio "$m" "$last")"
done
printf "\nBar: xftp-get and xftp-put each >= 1.2 x curl and lftp, >= 0.9 x the local copy;\n"
printf "xftp-tls-get and -put >= 2.0 x curl-tls and lftp-tls, >= 0.75 x xftp in the clear.\n"

[ -n "$buffers" ] || exit 0
# The 1994 paper's ftp table: the same copy at its buffer sizes, client and server alike.
: >"$results"
port=2130
for size in $buffers; do
	server_size=$size # xftpd's -b starts at 64K: below it, only xftp's buffers shrink
	[ "$(numfmt --from=iec "$size")" -ge 65536 ] || server_size=64K
	xftpd_on $port "$server_size"
	for ((round = 1; round <= rounds; round++)); do
		run "get-$size" "$dst" "$bin/xftp -q -b $size get ftp://bench:bench@127.0.0.1:$port/src $dst"
		run "put-$size" "$work/xs/root/dst" "$bin/xftp -q -b $size put $src ftp://bench:bench@127.0.0.1:$port/dst"
	done
	port=$((port + 1))
done
printf "\nxftp at the 1994 paper's ftp buffer sizes (xftp -b, and xftpd -b but never below its\n"
printf "least, 64K), MB/s medians\n"
printf "%-8s %10s %12s %10s %12s\n" buffer get "(min-max)" put "(min-max)"
for size in $buffers; do
	printf "%-8s %10.0f %12s %10.0f %12s\n" "$size" "$(med "get-$size")" "$(pick "get-$size" | spread)" \
		"$(med "put-$size")" "$(pick "put-$size" | spread)"
done
