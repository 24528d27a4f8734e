#!/bin/bash
# xftp against hostile servers (xftp_client_server.py): a copy never points a server at
# a host the other one named; a reply dripped a byte at a time is bounded by --timeout as a
# whole; a download never takes more than the size announced, nor (no size known) the
# disk; nested listings are bounded together; server text never reaches the terminal raw;
# no password is printed; fd 0 is never written; a netrc others can reach is refused;
# downloads get the umask's mode; --resume of a file changed since starts over; a size
# beyond the free space is refused first; -r writes through no local link; a MODE E block
# sent over and over ends the transfer (xftp and xftpd); a directory's URL without -r
# writes nothing; the word on a partial is true; names near NAME_MAX download.
. "$DS_SRC/tests/integration/xftp_lib.sh"
server=$DS_SRC/tests/hostile/xftp_client_server.py

# hostile PORT HOW [LOG]: the server in the background, listening.
hostile() {
	python3 "$server" "$@" &
	wait_listening "$1"
}

# no_control FILE WHAT: FILE has no control byte but newlines.
no_control() {
	! LC_ALL=C grep -q '[[:cntrl:]]' <(tr -d '\n' <"$1") ||
		fail "$2: control bytes passed on: $(od -c "$1" | head -5)"
}

# cp: the destination's PASV names 127.0.0.9; the source must be sent to 127.0.0.1.
hostile 2240 record "$work/ports"
hostile 2241 bounce
"$xftp" -q cp ftp://u:p@127.0.0.1:2240/f ftp://u:p@127.0.0.1:2241/f </dev/null 2>"$work/err" ||
	true
grep -q . "$work/ports" || fail "cp sent the source no PORT: $(cat "$work/err")"
grep -q '^PORT 127,0,0,1,' "$work/ports" && ! grep -q '127,0,0,9' "$work/ports" ||
	fail "cp pointed the source elsewhere than the destination: $(cat "$work/ports")"
pass "cp: the source is pointed at the destination's control address, not PASV's host"

# A greeting dripped a byte every 0.5 s: --timeout 5 bounds the whole reply.
hostile 2242 drip
start=$(date +%s)
expect_error "dripped greeting, --timeout 5" "no reply within" \
	"$xftp" -q --timeout 5 ls ftp://u:p@127.0.0.1:2242/
took=$(($(date +%s) - start))
[ "$took" -le 10 ] || fail "--timeout 5 held for $took s"
pass "a dripped reply ended after $took s"

# SIZE refused, MLST says 1000 bytes, RETR sends 64 MiB: an error, nothing committed.
hostile 2243 nosize
mkdir "$work/g1"
expect_error "more than announced" "more than the 1000 bytes it announced" \
	"$xftp" -q get ftp://u:p@127.0.0.1:2243/f "$work/g1/f"
[ ! -e "$work/g1/f" ] || fail "a download over its announced size took its name"
pass "a download over the size MLST announced fails and is not committed"

# No size at all, 64 MiB sent, into a 32 MiB file system: refused before the disk is full.
hostile 2244 blind
mkdir "$work/small"
unshare -m bash -c '
	mount -t tmpfs -o size=32m tmpfs "$1" || exit 3
	timeout 20 "$2" -q get ftp://u:p@127.0.0.1:2244/f "$1/f" 2>"$3"; echo "status $?" >>"$3"
	df -k --output=avail "$1" | tail -1 >"$4"' _ "$work/small" "$xftp" "$work/err" "$work/avail"
grep -q 'named no size and sent more than' "$work/err" ||
	fail "a download of no known size: $(cat "$work/err")"
grep -q 'status 1$' "$work/err" || fail "not status 1: $(cat "$work/err")"
[ "$(cat "$work/avail")" -gt 1024 ] || fail "the file system was filled: $(cat "$work/avail") KiB left"
pass "no size known: stopped with $(cat "$work/avail") KiB free: $(head -1 "$work/err")"

# 64 levels of 4 MiB listings: refused past 128 MiB held together, the client stays small.
hostile 2245 deep
/usr/bin/time -f '%M' -o "$work/rss" timeout 60 "$xftp" -q -r get ftp://u:p@127.0.0.1:2245/d \
	"$work/tree" 2>"$work/err" </dev/null && fail "get -r of an endless tree succeeded"
grep -q 'listings of nested directories over 128 MiB' "$work/err" ||
	fail "get -r of deep listings: $(cat "$work/err")"
rss=$(tail -1 "$work/rss")
[ "$rss" -lt $((400 * 1024)) ] || fail "get -r grew to $rss KiB"
pass "nested listings bounded together ($rss KiB peak): $(head -1 "$work/err")"

# Replies with escapes and the password quoted back: one clean line, no password.
hostile 2246 rude
expect_error "rude reply" "refused" "$xftp" -q ls ftp://u:s3cretpw@127.0.0.1:2246/
no_control "$work/err" "an error line"
! grep -q s3cretpw "$work/err" || fail "the password was printed: $(cat "$work/err")"
pass "a refused login: no control byte, no password on stderr"
# A short password quoted back all over a full error line: "***" is longer than "ab".
expect_error "short password quoted" "refused" "$xftp" -q ls ftp://u:ab@127.0.0.1:2246/
! grep -q -w ab "$work/err" || fail "the password was printed: $(cat "$work/err")"
! grep -q Sanitizer "$work/err" || fail "hiding a short password overran: $(cat "$work/err")"
pass "a short password quoted back over a full line is hidden within the line"
expect_error "bad URL" "not an ftp:// URL" "$xftp" ls ftp://u:s3cretpw@127.0.0.1:99999/
! grep -q s3cretpw "$work/err" || fail "the password was printed: $(cat "$work/err")"
pass "a bad URL is shown without its password"

# A user without a password and no terminal: one line, fd 0 never written.
hostile 2247 plain
: >"$work/stdin"
status=0
setsid -w "$xftp" -q ls ftp://alice@127.0.0.1:2247/ <>"$work/stdin" >"$work/out" 2>"$work/err" ||
	status=$?
[ "$status" -eq 1 ] || fail "no password, no tty: status $status: $(cat "$work/err")"
[ ! -s "$work/stdin" ] || fail "xftp wrote to fd 0: $(cat "$work/stdin")"
grep -q 'no password for alice@127.0.0.1' "$work/err" && [ "$(wc -l <"$work/err")" -eq 1 ] ||
	fail "no password, no tty: $(cat "$work/err")"
pass "no password, no tty: $(cat "$work/err")"

# A netrc with a password that others can read is refused, as ftp(1) does.
mkdir -p "$work/home"
echo 'machine 127.0.0.1 login bob password pw' >"$work/home/.netrc"
chmod 644 "$work/home/.netrc"
expect_error "netrc 644" "chmod go=" env HOME="$work/home" "$xftp" -q ls ftp://127.0.0.1:2247/
chmod 600 "$work/home/.netrc"
HOME="$work/home" "$xftp" -q ls ftp://127.0.0.1:2247/ </dev/null >/dev/null ||
	fail "a netrc of mode 600 is used"
pass "the same netrc at 600 is used"

# Downloads are created with the umask, as cp does.
(umask 022 && "$xftp" -q get ftp://u:p@127.0.0.1:2247/f "$work/m022" </dev/null) ||
	fail "get from the plain server"
(umask 077 && "$xftp" -q get ftp://u:p@127.0.0.1:2247/f "$work/m077" </dev/null) ||
	fail "get from the plain server"
[ "$(stat -c %a "$work/m022")" = 644 ] && [ "$(stat -c %a "$work/m077")" = 600 ] ||
	fail "modes $(stat -c %a "$work/m022") and $(stat -c %a "$work/m077"), not 644 and 600"
[ "$(cat "$work/m022")" = hello ] || fail "the download's bytes"
pass "downloads take 0666 less the umask"

# The file changes on the server between a cut download and its --resume: the partial is
# started over, not joined to the new version.
hostile 2248 changing
mkdir "$work/rs"
expect_error "a cut download" "100 of 200 bytes came" \
	"$xftp" -q get ftp://u:p@127.0.0.1:2248/f "$work/rs/f"
"$xftp" --resume get ftp://u:p@127.0.0.1:2248/f "$work/rs/f" </dev/null >/dev/null 2>"$work/err" ||
	fail "--resume of a changed file: $(cat "$work/err")"
[ "$(cat "$work/rs/f")" = "$(printf '2%.0s' $(seq 200))" ] ||
	fail "--resume joined two versions: $(od -c "$work/rs/f" | head -3)"
grep -q 'changed on the server since .*starting over' "$work/err" ||
	fail "no word of starting over: $(cat "$work/err")"
pass "--resume of a file changed since: started over ($(head -1 "$work/err"))"

# A size of 1 TiB announced, into a 32 MiB file system: refused before the transfer.
hostile 2249 huge
mkdir "$work/small2"
unshare -m bash -c '
	mount -t tmpfs -o size=32m tmpfs "$1" || exit 3
	timeout 20 "$2" -q get ftp://u:p@127.0.0.1:2249/f "$1/f" 2>"$3"; echo "status $?" >>"$3"
	ls -A "$1" >"$4"; df -k --output=avail "$1" | tail -1 >>"$4"' _ "$work/small2" "$xftp" \
	"$work/err" "$work/left"
grep -q "needs $((1 << 40)) bytes, [0-9]* free" "$work/err" && grep -q 'status 1$' "$work/err" ||
	fail "1 TiB announced into 32 MiB: $(cat "$work/err")"
[ "$(wc -l <"$work/left")" -eq 1 ] && [ "$(cat "$work/left")" -gt 32000 ] ||
	fail "a refused download left: $(cat "$work/left")"
pass "more announced than free: refused, nothing left: $(head -1 "$work/err")"

# get -r into a destination where the server's directory "sub" is a link to elsewhere: the
# link is not followed. A partial file that is a link is not written through either.
hostile 2250 tree
mkdir -p "$work/tw/out" "$work/tw/out2/sub" "$work/victim"
echo precious >"$work/victim/keep"
echo precious >"$work/victim/keep2"
ln -s "$work/victim" "$work/tw/out/sub"
ln -s "$work/victim/keep2" "$work/tw/out2/sub/.keep.xftp-part"
expect_error "get -r through a link" "out/sub exists and is not a directory \(a symbolic link\)" \
	"$xftp" -q -r get ftp://u:p@127.0.0.1:2250/d "$work/tw/out"
[ "$(cat "$work/victim/keep")" = precious ] || fail "get -r wrote through a link"
expect_error "--resume into a linked partial" "xftp-part: Too many levels of symbolic links" \
	"$xftp" -q --resume -r get ftp://u:p@127.0.0.1:2250/d "$work/tw/out2"
[ "$(cat "$work/victim/keep2")" = precious ] || fail "--resume wrote through a linked partial"
pass "get -r writes through no link the destination holds"

# MODE E: SIZE 100, and the block [0,100) sent 20000 times: each block lies in the range,
# the bytes together do not.
hostile 2251 modee
mkdir "$work/me"
expect_error "a block sent over and over" "sent more than the 100 bytes" \
	"$xftp" -q -P 2 get ftp://u:p@127.0.0.1:2251/f "$work/me/f"
[ ! -e "$work/me/f" ] || fail "a download of repeated blocks took its name"
# xftpd receives with the same code: ALLO 100, then the block [0,100) 20000 times.
start_xftpd 2252 "$work/xs"
python3 - 2252 >"$work/reply" <<'PY' || fail "the repeated upload: $(cat "$work/reply")"
import socket, struct, sys
ctl = socket.create_connection(('127.0.0.1', int(sys.argv[1])), timeout=20)
f = ctl.makefile('rwb', buffering=0)
def cmd(line):
    if line:
        f.write(line.encode() + b'\r\n')
    while True:
        reply = f.readline().decode()
        if reply[3:4] == ' ':
            return reply
cmd('')
for line in ('USER bob', 'PASS secret', 'TYPE I', 'MODE E', 'ALLO 100'):
    cmd(line)
port = [int(x) for x in cmd('PASV').split('(')[1].split(')')[0].split(',')]
data = socket.create_connection(('127.0.0.1', port[4] * 256 + port[5]), timeout=20)
print(cmd('STOR f').strip())
try:
    data.sendall((struct.pack('>BQQ', 0, 100, 0) + b'Z' * 100) * 20000)
    data.sendall(struct.pack('>BQQ', 0x48, 0, 1))
except OSError:
    pass
data.close()
print(cmd('').strip())
PY
grep -q '^552 ' "$work/reply" && [ ! -e "$work/xs/f" ] ||
	fail "xftpd took a block sent 20000 times: $(cat "$work/reply")"
pass "a block sent over and over: $(tail -1 "$work/reply"), in xftp and xftpd"

# A URL that names a directory ("pub/", "pub/.", "..") without -r: refused, nothing written.
mkdir "$work/dw"
for path in pub/ pub/. pub/..; do
	expect_error "get $path" "names a directory: use -r" \
		env -C "$work/dw" "$xftp" -q get "ftp://u:p@127.0.0.1:2247/$path"
	[ -z "$(ls -A "$work/dw")" ] || fail "get $path left: $(ls -A "$work/dw")"
done
pass "get of a directory's URL without -r writes nothing"

# The first block already longer than the size announced: what the message says of the
# partial is true.
hostile 2253 overlong
mkdir "$work/kw"
expect_error "overlong first block" "sent more than the 50 bytes" \
	"$xftp" -q get ftp://u:p@127.0.0.1:2253/f "$work/kw/f"
if [ -e "$work/kw/.f.xftp-part" ]; then
	grep -q 'xftp-part kept' "$work/err" || fail "the partial is kept, unsaid: $(cat "$work/err")"
else
	! grep -q 'xftp-part kept' "$work/err" || fail "said kept, removed: $(cat "$work/err")"
fi
pass "the message says what became of the partial"

# A name of 250 bytes (".NAME.xftp-part" would pass NAME_MAX): downloaded all the same.
long=$(printf 'L%.0s' $(seq 250))
mkdir "$work/lw"
"$xftp" -q get "ftp://u:p@127.0.0.1:2247/$long" "$work/lw/" </dev/null >/dev/null 2>"$work/err" ||
	fail "a 250-byte name: $(cat "$work/err")"
[ "$(cat "$work/lw/$long")" = hello ] && [ "$(ls -A "$work/lw" | wc -l)" -eq 1 ] ||
	fail "a 250-byte name: $(ls -A "$work/lw")"
pass "a 250-byte name is downloaded under its name"

# Replies injected in clear behind AUTH TLS's 234 are never taken as TLS's.
hostile 2254 inject
expect_error "replies behind 234" "more after 234" "$xftp" -q --tls -k ls ftp://u:p@127.0.0.1:2254/
pass "replies injected behind AUTH TLS's 234 are refused, not read as TLS's"
