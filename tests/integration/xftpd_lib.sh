# Shared by the xftpd_ scripts: a store with a user, and xftpd started on a loopback port.
# As root (CI) each script runs in network and mount namespaces of its own, so its fixed ports never
# meet another test's; its loopback also gets a ULA address, without which lftp holds IPv6
# for "not configured" and will not reach [::1].
if [ "$(id -u)" -eq 0 ] && [ -z "${XFTPD_NETNS:-}" ] && unshare -n -m true 2>/dev/null; then
	XFTPD_NETNS=1 exec unshare -n -m bash -c \
		'ip link set lo up; ip addr add fd00:d5::1/128 dev lo; exec bash "$0" "$@"' "$0" "$@"
fi
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
xftpd=$DS_BIN/xftpd
user=alice pass='s3cret pass'

# make_store: $work/root, owned by the user xftpd serves as, and $work/users with alice.
make_store() {
	mkdir -p "$work/root"
	printf '%s\n' "$pass" | "$xftpd" --add-user "$work/users" "$user" ||
		fail "--add-user failed"
	run_as=()
	if [ "$(id -u)" -eq 0 ]; then
		# As root the server drops to the store's owner; nobody serves in the tests.
		chown nobody "$work/root"
		run_as=(--run-as nobody)
	fi
}

# start_xftpd PORT [options...]: runs xftpd in the background (pid in $xftpd_pid, stderr
# in $work/xftpd.log) and waits until it listens.
start_xftpd() {
	local port=$1
	shift
	"$xftpd" -p "$port" --root "$work/root" --users "$work/users" "${run_as[@]}" "$@" \
		2>>"$work/xftpd.log" &
	xftpd_pid=$!
	wait_listening "$port"
}

# put_file NAME BYTES: a file of random bytes in the store, owned like an upload.
put_file() {
	head -c "$2" /dev/urandom >"$work/root/$1"
	[ "$(id -u)" -ne 0 ] || chown nobody "$work/root/$1"
}

# same FILE FILE WHAT: the two files hold the same bytes.
same() {
	cmp -s "$1" "$2" || fail "$3: $1 and $2 differ"
	pass "$3"
}

# ftplib PORT [HOST]: runs the Python on stdin with ftp, a logged-in ftplib.FTP.
ftplib() {
	local port=$1 host=${2:-127.0.0.1}
	python3 -c "
import ftplib, io, socket, sys, os
ftp = ftplib.FTP()
ftp.connect('$host', $port, timeout=20)
ftp.login('$user', '$pass')
work = '$work'
exec(sys.stdin.read())
"
}

# log_clean: the servers' log shows no sanitizer report (a session process that hit one
# exits without the test noticing otherwise).
log_clean() {
	! grep -E -A5 'Sanitizer|runtime error:' "$work/xftpd.log" >&2 ||
		fail "a sanitizer report in xftpd's log"
	pass "no sanitizer report from any session"
}
