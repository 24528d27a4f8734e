# Shared by the xftp scripts: a private network namespace (fixed loopback ports collide
# with nothing), vsftpd started on loopback with a configuration written here, and files
# of random bytes.
if [ -z "${XFTP_NETNS:-}" ]; then
	exec unshare -n env XFTP_NETNS=1 bash "$0" "$@"
fi
. "$DS_SRC/tests/integration/lib.sh"
# shellcheck source=../../bench/lib.sh
. "$DS_SRC/bench/lib.sh"
ip link set lo up
xftp=$DS_BIN/xftp
chmod 755 "$work"

# make_file PATH BYTES: random bytes.
make_file() {
	head -c "$2" /dev/urandom >"$1"
}

# same PATH PATH NAME: identical bytes, or fail.
same() {
	cmp -s "$1" "$2" || fail "$3: $1 and $2 differ"
	pass "$3"
}

# start_vsftpd PORT [RATE]: anonymous vsftpd on 127.0.0.1:PORT serving $work/vs/root,
# uploads allowed in pub/; RATE (bytes/s) slows transfers so they can be cut midway.
# Sets vs_root and vs_pid.
start_vsftpd() {
	local port=$1 rate=${2:-0}
	vs_root=$work/vs/root
	mkdir -p "$vs_root/pub" "$work/vs/empty"
	chmod 755 "$work/vs" "$vs_root"
	chown ftp "$vs_root/pub"
	bench_vsftpd_conf "$vs_root" "$port" "$rate" >"$work/vs/vsftpd.conf"
	vsftpd "$work/vs/vsftpd.conf" &
	vs_pid=$!
	wait_listening "$port"
}

# wait_size PATH BYTES: until PATH holds at least BYTES (at most 20 s).
wait_size() {
	for _ in $(seq 200); do
		[ -f "$1" ] && [ "$(stat -c %s "$1")" -ge "$2" ] && return 0
		sleep 0.1
	done
	fail "$1 never reached $2 bytes"
}

# start_xftpd PORT ROOT: xftpd on 127.0.0.1:PORT serving ROOT to bob (password secret).
# Sets xs_pid.
start_xftpd() {
	local port=$1 root=$2
	mkdir -p "$root"
	chown nobody "$root"
	[ -f "$work/users" ] || echo secret | "$DS_BIN/xftpd" --add-user "$work/users" bob >/dev/null
	"$DS_BIN/xftpd" -p "$port" --listen 127.0.0.1 --root "$root" --users "$work/users" \
		>>"$work/xftpd.$port.log" 2>&1 &
	xs_pid=$!
	wait_listening "$port"
}

# slow_loopback RATE: loopback shaped to RATE (tc's units, e.g. 200mbit) so that
# transfers can be cut midway; slow_loopback off restores it.
slow_loopback() {
	tc qdisc del dev lo root 2>/dev/null || true
	[ "$1" = off ] || tc qdisc add dev lo root tbf rate "$1" burst 256kb latency 100ms
}

# wait_whole PART BYTES: until xftp's partial download PART is whole up to BYTES (its
# user.xftp.whole mark; the file's size alone says nothing with MODE E), at most 60 s: a
# loaded machine (an ASan build beside others) can be slow to start the transfer.
wait_whole() {
	local last
	if ! last=$(
		python3 - "$1" "$2" <<'PY'
import errno, os, sys, time
part, want = sys.argv[1], int(sys.argv[2])
last, gone = 'never there', False  # what it held when last seen, and whether it went since
for _ in range(600):
    try:
        size = os.stat(part).st_size
    except OSError as e:
        if e.errno == errno.ENOENT:
            gone = last != 'never there'
        else:
            last = str(e)
        time.sleep(0.1)
        continue
    gone = False
    try:
        whole = int(os.getxattr(part, 'user.xftp.whole'))
        last = '%d bytes, whole to %d' % (size, whole)
        if whole >= want:
            sys.exit(0)
    except (OSError, ValueError) as e:
        last = '%d bytes, no whole mark (%s)' % (size, e)
    time.sleep(0.1)
print(last + (', then gone (finished or removed)' if gone else ''))
sys.exit(1)
PY
	); then
		fail "$1 never became whole up to $2 bytes (last seen: $last)"
	fi
}

# reset_server_end LO HI BYTES: once a data connection on one of xftpd's passive ports
# (--pasv-ports LO-HI) has moved BYTES, resets xftpd's end of it alone and prints that
# socket: ss -K aborts it (xftpd's next send or receive fails) and the kernel sends the
# client's end an RST (its next read or write says so), as a middlebox's reset towards
# the server would. At most 20 s.
reset_server_end() {
	local lo=$1 hi=$2 bytes=$3 ports ends mine theirs
	ports="( sport >= :$lo and sport <= :$hi )"
	for _ in $(seq 400); do
		# ss -i: the socket's line, then its counters on an indented line of their own.
		ends=$(ss -Htni state established "$ports" | awk -v bytes="$bytes" '
			/^[^ \t]/ { ends = $3 " " $4; next }
			{
				for (i = 1; i <= NF; i++)
					if ($i ~ /^bytes_(acked|received):/ && substr($i, index($i, ":") + 1) + 0 >= bytes) {
						print ends
						exit
					}
			}')
		if [ -n "$ends" ]; then
			read -r mine theirs <<<"$ends"
			ss -K -Htn state established "( src $mine and dst $theirs )"
			return 0
		fi
		sleep 0.05
	done
	fail "no data connection on xftpd's ports $lo-$hi moved $bytes bytes"
}
