#!/bin/bash
# Guest script: xftp -x verbs through xftpd over soft-RoCE (rxe0 on a dummy netdev, both
# ends on 198.18.0.1, the control connection too). FEAT must offer RPSV and RPRT; put and
# get of a file of MIB MiB (and an odd tail) over one verbs stream and two must come back
# whole (cmp), with --json saying "link":"verbs"; blocks larger than a message, paced
# sends and receives; a copy between two xftpd (cp), a
# resumed get, --verify (HASH), a tree both ways (-r, four files at once), a striped store
# (with --disks), a SIGINT (also to a sender out of credit) and a SIGTERM to the server
# must hold too, and hostile or absent peers must get 425s. Against xftpd --no-rdma, xftp -x verbs must exit 1 with one line
# and leave no file on either side. Figures: bench/xftp-verbs.sh.
#   boot.sh --mem 3G --disks 2 t-xftp-verbs.sh [MIB]
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=guest-lib.sh
. "$here/guest-lib.sh"
mib=${1:-256}
bin=${DS_BIN:?DS_BIN must name the folder of the built tools}
command -v jq >/dev/null || ds_vm_die "jq is not installed"
ds_vm_rxe_up || ds_vm_die "soft-RoCE set-up"
ip=$DS_RXE_IP

cd "$TMPDIR"
mkdir -p root plain second
chown nobody root plain second
printf 'pw\n' | "$bin/xftpd" --add-user users t >/dev/null
timeout 900 "$bin/xftpd" -p 2121 --listen "$ip" --root root --users users --run-as nobody \
	--data-timeout 8 2>xftpd.log &
verbs_pid=$!
timeout 900 "$bin/xftpd" -p 2122 --listen "$ip" --root plain --users users --run-as nobody \
	--no-rdma 2>plain.log &
plain_pid=$!
timeout 900 "$bin/xftpd" -p 2124 --listen "$ip" --root second --users users --run-as nobody \
	2>second.log &
second_pid=$!
trap 'kill $verbs_pid $plain_pid $second_pid 2>/dev/null || true' EXIT
ds_vm_wait_tcp 2121 || ds_vm_die "xftpd did not listen"
ds_vm_wait_tcp 2122 || ds_vm_die "xftpd --no-rdma did not listen"
ds_vm_wait_tcp 2124 || ds_vm_die "the second xftpd did not listen"
url=ftp://t:pw@$ip:2121
bytes=$((mib * 1048576 + 12345))
head -c "$bytes" /dev/urandom >src

feat=$(printf 'FEAT\r\nQUIT\r\n' | timeout 10 nc -q 5 "$ip" 2121 | tr -d '\r')
for line in ' RPSV' ' RPRT'; do
	grep -qx "$line" <<<"$feat" || ds_vm_die "FEAT does not offer$line: $feat"
done
echo "ok: FEAT offers RPSV and RPRT on rxe0's address"

# check NAME JSON: the summary says verbs, ok, and every byte.
check() {
	jq -e ".ok and .link == \"verbs\" and .bytes == $bytes" "$2" >/dev/null ||
		ds_vm_die "$1: --json says $(cat "$2"); server: $(tail -3 xftpd.log)"
}
rate() { jq -r '.MB_per_s | floor' "$1"; }

for streams in 1 2; do
	timeout 300 "$bin/xftp" -x verbs --json -P "$streams" put src "$url/f$streams" >put.json ||
		ds_vm_die "put over $streams verbs stream(s): $(cat put.json) $(tail -3 xftpd.log)"
	check "put -P $streams" put.json
	cmp src "root/f$streams" || ds_vm_die "put over $streams stream(s): the bytes differ"
	timeout 300 "$bin/xftp" -x verbs --json -P "$streams" get "$url/f$streams" back >get.json ||
		ds_vm_die "get over $streams verbs stream(s): $(cat get.json) $(tail -3 xftpd.log)"
	check "get -P $streams" get.json
	cmp src back || ds_vm_die "get over $streams stream(s): the bytes differ"
	echo "ok: put and get of $bytes bytes over $streams verbs stream(s), whole:" \
		"put $(rate put.json) MB/s, get $(rate get.json) MB/s"
	rm -f back
	[ "$streams" = 2 ] || rm -f "root/f$streams"
done

# Soft-RoCE runs a queue pair's transport in the thread that posts when its queue is idle,
# and in its softirq when a post finds work queued. At RoCE's MTU of 4096, as the bench
# runs, a sender that posted one block at a time carried it all in its system time: 5.4 s
# in a 4.3 s put of 256 MiB, against 1.1 s with the blocks ready posted together.
mtu=$(cat /sys/class/net/d0/mtu)
ip link set d0 mtu 9000
timeout 300 "$bin/xftp" -x verbs --json put src "$url/mtu" >put.json ||
	ds_vm_die "put at MTU 9000: $(cat put.json) $(tail -3 xftpd.log)"
check "put at MTU 9000" put.json
jq -e '.cpu_sys_s < .wall_seconds / 2' put.json >/dev/null ||
	ds_vm_die "put at MTU 9000: the sender spent $(jq .cpu_sys_s put.json) s in the kernel" \
		"in $(jq .wall_seconds put.json) s: it carries soft-RoCE's work (a block a post?)"
echo "ok: at RoCE MTU 4096 the sender spent $(jq .cpu_sys_s put.json) s in the kernel in" \
	"$(jq .wall_seconds put.json) s"
ip link set d0 mtu "$mtu"
rm -f root/mtu

# Server to server: the source's links go to where the destination's RPSV listens (RPRT
# with an address), two streams; against the --no-rdma server, exit 1 and no file.
timeout 300 "$bin/xftp" -x verbs --json -P 2 cp "$url/f2" "ftp://t:pw@$ip:2124/copy" >cp.json ||
	ds_vm_die "cp over verbs: $(cat cp.json) $(tail -3 xftpd.log second.log)"
jq -e ".ok and .link == \"verbs\" and .bytes == $bytes" cp.json >/dev/null ||
	ds_vm_die "cp over verbs: --json says $(cat cp.json)"
cmp src second/copy || ds_vm_die "cp over verbs: the bytes differ"
st=0
timeout 60 "$bin/xftp" -x verbs cp "$url/f2" "ftp://t:pw@$ip:2122/copy" 2>cp.err || st=$?
if [ "$st" != 1 ] || ! grep -q 'no RPSV in FEAT' cp.err || [ -e plain/copy ]; then
	ds_vm_die "cp over verbs to xftpd --no-rdma: exit $st, $(cat cp.err)"
fi
echo "ok: cp of $bytes bytes between two xftpd over two verbs streams, whole; refused by --no-rdma"
rm -f second/copy

# A verbs message is one MODE E block, its payload first: blocks larger than a message are
# cut into several (-b 16M), and a paced sender's pieces are framed by copy (-R).
head -c $((40 * 1048576 + 777)) /dev/urandom >framed
timeout 120 "$bin/xftp" -x verbs -q -b 16M put framed "$url/framed" ||
	ds_vm_die "put -b 16M over verbs: $(tail -3 xftpd.log)"
cmp framed root/framed || ds_vm_die "put -b 16M over verbs: the bytes differ"
timeout 120 "$bin/xftp" -x verbs -q -R 400M -P 2 get "$url/framed" framed.back ||
	ds_vm_die "get -R 400M -P 2 over verbs: $(tail -3 xftpd.log)"
cmp framed framed.back || ds_vm_die "get -R -P 2 over verbs: the bytes differ"
timeout 120 "$bin/xftp" -x verbs -q -R 400M put framed "$url/paced" ||
	ds_vm_die "put -R 400M over verbs: $(tail -3 xftpd.log)"
cmp framed root/paced || ds_vm_die "put -R over verbs: the bytes differ"
echo "ok: blocks of 16 MiB cut into messages, paced pieces framed, paced gets: all whole"
rm -f framed framed.back root/framed root/paced

# part_in DIR: waits (10 s at most) until an upload's partial in DIR holds bytes.
part_in() {
	for _ in $(seq 100); do
		[ -n "$(find "$1" -name '.xftpd-part*' -size +0 2>/dev/null)" ] && return 0
		sleep 0.1
	done
	return 1
}
# signal_and_time SIGNAL PID: sends it and waits for PID; sets st (its status) and ms
# (milliseconds from the signal to its end).
signal_and_time() {
	local t0
	kill "-$1" "$2"
	t0=$(date +%s%N)
	st=0
	wait "$2" || st=$?
	ms=$((($(date +%s%N) - t0) / 1000000))
}

# A stop: SIGINT to xftp in the middle of a verbs get ends it within a second or two
# (exit 130), and nothing takes the file's name. The file is at least 128 MiB, four times
# what a stream keeps in flight, so that the stop comes before the last block is out.
if [ "$mib" -ge 128 ]; then
	mv root/f2 root/stop.bin
else
	head -c $((128 * 1048576)) /dev/urandom >root/stop.bin
	rm root/f2
fi
chown nobody root/stop.bin
timeout 120 "$bin/xftp" -x verbs -q get "$url/stop.bin" stopped 2>stop.err &
get_pid=$!
for _ in $(seq 100); do
	[ "$(stat -c %s .stopped.xftp-part 2>/dev/null || echo 0)" -gt 0 ] && break
	sleep 0.1
done
signal_and_time INT "$get_pid"
[ "$st" = 130 ] || ds_vm_die "SIGINT during a verbs get: exit $st, $(cat stop.err)"
[ "$ms" -lt 3000 ] || ds_vm_die "SIGINT during a verbs get: $ms ms to stop"
[ ! -e stopped ] || ds_vm_die "a stopped get took the file's name"
echo "ok: SIGINT stopped a verbs get in $ms ms (exit 130)"
rm -f .stopped.xftp-part
cp root/stop.bin stop.bin

# The same for a put: the sender stops, says END, and the server keeps no file by that name.
timeout 120 "$bin/xftp" -x verbs -q put stop.bin "$url/stopped" 2>stop.err &
put_pid=$!
part_in root || true # a put done before the signal fails below, on its status
signal_and_time INT "$put_pid"
[ "$st" = 130 ] || ds_vm_die "SIGINT during a verbs put: exit $st, $(cat stop.err)"
[ "$ms" -lt 3000 ] || ds_vm_die "SIGINT during a verbs put: $ms ms to stop"
[ ! -e root/stopped ] || ds_vm_die "a stopped put took the file's name"
echo "ok: SIGINT stopped a verbs put in $ms ms (exit 130)"

# A put whose receiver stopped answering (its session frozen): the sender runs out of
# credit and waits; SIGINT still ends it at once, not at the link's 10 s stall limit.
server=$(pgrep -P "$verbs_pid")
sessions_gone() {
	for _ in $(seq 100); do
		[ -z "$(pgrep -P "$server")" ] && return 0
		sleep 0.1
	done
	return 1
}
sessions_gone || ds_vm_die "the stopped put's session did not end"
timeout 120 "$bin/xftp" -x verbs -q put stop.bin "$url/frozen" 2>stop.err &
put_pid=$!
session=
for _ in $(seq 100); do
	session=$(pgrep -P "$server" || true)
	[ -n "$session" ] && part_in root && break
	sleep 0.1
done
[ -n "$session" ] || ds_vm_die "no session for the frozen put"
kill -STOP "$session"
sleep 2 # the window (32 MiB) goes out, and no credit comes back
signal_and_time INT "$put_pid"
kill -CONT "$session"
[ "$st" = 130 ] || ds_vm_die "SIGINT to a sender out of credit: exit $st, $(cat stop.err)"
[ "$ms" -lt 3000 ] || ds_vm_die "SIGINT to a sender out of credit: $ms ms to stop"
echo "ok: SIGINT stopped a verbs put out of credit in $ms ms (exit 130)"
sessions_gone || ds_vm_die "the frozen put's session did not end once thawed"
[ ! -e root/frozen ] || ds_vm_die "a put stopped out of credit took the file's name"

# SIGTERM to a server in the middle of a verbs put: it ends within seconds, the client
# fails, and no file takes the name.
mkdir -p term
chown nobody term
"$bin/xftpd" -p 2123 --listen "$ip" --root term --users users --run-as nobody 2>term.log &
term_pid=$!
ds_vm_wait_tcp 2123 || ds_vm_die "the third xftpd did not listen"
timeout 120 "$bin/xftp" -x verbs -q put stop.bin "ftp://t:pw@$ip:2123/t" 2>stop.err &
put_pid=$!
part_in term || true # as above
signal_and_time TERM "$term_pid"
[ "$ms" -lt 5000 ] || ds_vm_die "SIGTERM to xftpd mid verbs put: $ms ms to end"
wait "$put_pid" && ds_vm_die "a put cut by the server's SIGTERM exited 0"
[ ! -e term/t ] || ds_vm_die "a put cut by SIGTERM took the file's name"
echo "ok: SIGTERM ended xftpd in $ms ms in the middle of a verbs put (exit $st)"
rm -f stop.bin root/stop.bin

# --verify (HASH after the data) and a resumed get: the first 3 MiB are there already.
small=$((8 * 1048576 + 777))
head -c "$small" src >s8
cp s8 root/s8
chown nobody root/s8
head -c $((3 * 1048576)) s8 >.s8b.xftp-part
timeout 120 "$bin/xftp" -x verbs -q --resume --verify get "$url/s8" s8b ||
	ds_vm_die "resumed get with --verify: $(tail -3 xftpd.log)"
cmp s8 s8b || ds_vm_die "resumed get: the bytes differ"
echo "ok: a get resumed at 3 MiB and checked by HASH over verbs"

# A tree both ways, four files at once (-j 4): each file sets up its own links over its
# job's control connection, one after another on each.
mkdir -p tree/sub
for i in 1 2 3 4 5; do head -c $((i * 300000 + i)) src >"tree/t$i"; done
head -c $((5 * 1048576 + 3)) src >tree/sub/big
timeout 300 "$bin/xftp" -x verbs -q -r -j 4 put tree "$url/tree" ||
	ds_vm_die "tree put: $(tail -3 xftpd.log)"
diff -r tree root/tree || ds_vm_die "tree put: the trees differ"
timeout 300 "$bin/xftp" -x verbs -q -r -j 4 get "$url/tree" tree2 ||
	ds_vm_die "tree get: $(tail -3 xftpd.log)"
diff -r tree tree2 || ds_vm_die "tree get: the trees differ"
echo "ok: a tree of $(find tree -type f | wc -l) files put and got over verbs, four at once"

# A striped store (boot.sh --disks 2 or more: ext4 on each; the ctest registration asks for
# two): xftpd stripes every file over the disks, the verbs channel carries its blocks as
# it carries a plain file's.
IFS=, read -ra disks <<<"${DS_VM_DISKS:-}"
if [ "${#disks[@]}" -ge 2 ]; then
	store=$(ds_vm_store_roots "${disks[@]}") || ds_vm_die "the striped store's roots"
	timeout 300 "$bin/xftpd" -p 2123 --listen "$ip" --root "$store" --users users \
		--run-as nobody 2>striped.log &
	striped_pid=$!
	ds_vm_wait_tcp 2123 || ds_vm_die "xftpd on a striped store did not listen"
	surl=ftp://t:pw@$ip:2123
	head -c $((32 * 1048576 + 99)) src >s32
	timeout 120 "$bin/xftp" -x verbs -q -P 2 put s32 "$surl/s32" ||
		ds_vm_die "put to a striped store: $(tail -3 striped.log)"
	timeout 120 "$bin/xftp" -x verbs -q -P 2 get "$surl/s32" s32b ||
		ds_vm_die "get from a striped store: $(tail -3 striped.log)"
	cmp s32 s32b || ds_vm_die "striped store: the bytes differ"
	kill "$striped_pid"
	echo "ok: put and get over two verbs streams to a store striped over ${#disks[@]} disks"
else
	echo "note: no disks (boot.sh --disks 2): the striped store's case did not run"
fi

# A server that does not offer the channel: exit 1, one line, nothing left anywhere.
purl=ftp://t:pw@$ip:2122
cp src plain/f
chown nobody plain/f
st=0
timeout 60 "$bin/xftp" -x verbs -q get "$purl/f" nothing 2>get.err || st=$?
[ "$st" = 1 ] || ds_vm_die "get from xftpd --no-rdma exited $st, not 1: $(cat get.err)"
grep -q 'offers no verbs data channel' get.err || ds_vm_die "get: $(cat get.err)"
[ "$(wc -l <get.err)" = 1 ] || ds_vm_die "get: more than one line: $(cat get.err)"
for f in nothing .nothing.xftp-part; do
	[ ! -e "$f" ] || ds_vm_die "get left $f"
done
st=0
timeout 60 "$bin/xftp" -x verbs -q put src "$purl/g" 2>put.err || st=$?
[ "$st" = 1 ] || ds_vm_die "put to xftpd --no-rdma exited $st, not 1: $(cat put.err)"
grep -q 'offers no verbs data channel' put.err || ds_vm_die "put: $(cat put.err)"
left=$(find plain -mindepth 1 ! -name f)
[ -z "$left" ] || ds_vm_die "put left $left"
echo "ok: against xftpd --no-rdma, -x verbs exits 1 with '$(cat get.err)' and leaves no file"

# Hostile or absent peers: a hello that does not fit the transfer (one stream where two are
# due; messages above the limit; messages not framed as MODE E blocks) is refused before anything is registered, RPRT naming a
# port where nothing listens fails at once, a client that never connects is given up at
# --data-timeout; each is a 425, and the session goes on.
python3 - "$ip" "$DS_SRC/tests/integration" "$bin" <<'PY' || ds_vm_die "hostile peers: $(tail -5 xftpd.log)"
import subprocess, sys, time
sys.path.insert(0, sys.argv[2])
from xftpd_raw import Ctl
ip, bin = sys.argv[1], sys.argv[3]
c = Ctl(2121, host=ip, timeout=60)
c.login('t', 'pw')
for cmd in ('TYPE I', 'MODE E', 'OPTS RETR Parallelism=2;'):
    c.expect(200, cmd)

def blast_at(args, why):
    port = int(c.expect(229, 'RPSV').split('|||')[1].split('|')[0])
    c.expect(150, 'STOR hostile')
    r = subprocess.run([bin + '/blast', '-x', 'verbs', '-p', str(port), '-n', '4'] + args + [ip],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0, ('blast went through', args, r.stdout)
    code, text = c.reply()
    assert code == 425 and why in text, (args, text)
    print('ok: blast %s at RPSV: %s' % (' '.join(args), text))

blast_at(['-l', '64K', '-q', '1'], 'stream 0 of 1 where 2 streams')
blast_at(['-l', '8M', '-q', '2'], 'messages of 8388608 bytes')
blast_at(['-l', '64K', '-q', '2'], 'not framed as MODE E blocks')

c.expect(200, 'RPRT 40000')  # nothing listens there
start = time.time()
c.expect(150, 'RETR s8')
code, text = c.reply()
assert code == 425, text
print('ok: RPRT to a port nobody listens on: %s (%.1f s)' % (text, time.time() - start))

c.expect(229, 'RPSV')
start = time.time()
c.expect(150, 'STOR silent')
code, text = c.reply()
took = time.time() - start
assert code == 425 and 7 <= took <= 20, (text, took)
print('ok: a client that never connects: %s after %.1f s' % (text, took))
c.expect(221, 'QUIT')
PY

! grep -E -A5 'Sanitizer|runtime error:' xftpd.log plain.log >&2 ||
	ds_vm_die "a sanitizer report in xftpd's log"

echo "PASS: xftp over verbs"
