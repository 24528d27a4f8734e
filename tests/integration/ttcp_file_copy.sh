# ttcp -t host < file and ttcp -r > file move a file intact, over every path the
# receiver and transmitter offer.
source "$(dirname "$0")/lib.sh"
ttcp=$DS_BIN/ttcp
head -c 25000000 /dev/urandom >"$work/in"
port=16100

# copy NAME HOST [transmitter options] -- [receiver options]
copy() {
	local name=$1 host=$2 topts=() ropts=()
	shift 2
	while [ $# -gt 0 ] && [ "$1" != -- ]; do topts+=("$1"); shift; done
	[ $# -gt 0 ] && shift
	ropts=("$@")
	port=$((port + 1))
	"$ttcp" -r -p "$port" "${ropts[@]}" >"$work/out" 2>"$work/r.err" &
	local receiver=$!
	wait_listening "$port"
	"$ttcp" -t -p "$port" "${topts[@]}" "$host" <"$work/in" >"$work/t.out" 2>&1 ||
		fail "$name: transmitter: $(cat "$work/t.out")"
	wait "$receiver" || fail "$name: receiver: $(cat "$work/r.err")"
	cmp -s "$work/in" "$work/out" || fail "$name: the copy differs from the original"
	[ "$(classic_bytes "$work/t.out")" = 25000000 ] || fail "$name: transmitter count wrong"
	[ "$(classic_bytes "$work/r.err")" = 25000000 ] || fail "$name: receiver count wrong"
	pass "$name"
}

copy "defaults over IPv4" 127.0.0.1
copy "1M buffers" 127.0.0.1 -l 1M -- -l 1M
copy "IPv6" ::1
copy "a host name" localhost
copy "odd sizes, alignment and offset" 127.0.0.1 -l 12345 -A 64 -O 3 -- -l 777 -O 5 -T
copy "zero-copy sends" 127.0.0.1 -l 256K --zerocopy
grep -q 'zerocopy: [1-9][0-9]* sends released' "$work/t.out" ||
	fail "--zerocopy did not report its completions"
copy "splice receives" 127.0.0.1 -l 256K -- --splice -l 256K
echo "$checks passed, 0 failed"
