# Shared by the integration scripts: fail loudly, clean up, and wait for listeners.
set -euo pipefail
: "${DS_BIN:?DS_BIN must name the folder of the built tools}"
: "${DS_SRC:?DS_SRC must name the source tree}"

work=$(mktemp -d)
# Background helpers may have children of their own (socat's SYSTEM: commands) that would
# keep ctest's output pipe open: end whole trees.
kill_tree() {
	local child
	for child in $(pgrep -P "$1"); do
		kill_tree "$child"
	done
	kill "$1" 2>/dev/null || true
}
cleanup() {
	local pid
	for pid in $(jobs -p); do
		kill_tree "$pid"
	done
	wait 2>/dev/null
	# What a script mounted in $work (in a mount namespace of its own) goes first.
	awk -v w="$work/" 'index($2, w) == 1 { print $2 }' /proc/self/mounts | sort -r |
		while read -r mount; do umount -l "$mount"; done
	rm -rf "$work"
}
trap cleanup EXIT

# strace for a traced run of a tool: LeakSanitizer cannot look at a process under ptrace,
# so a sanitized build's traced runs are not asked for leaks (the others are). One exec to
# strace, so a run in the background has strace's pid, the tool its child:
#   "${strace_cmd[@]}" -f -qq -o /dev/null -e inject=... TOOL ARGS...
strace_cmd=(env "ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" strace)

checks=0
fail() {
	echo "FAIL: $*" >&2
	exit 1
}
pass() {
	checks=$((checks + 1))
	echo "ok $checks - $*"
}

# wait_listening PORT [tcp|udp]: until something listens there (at most 5 s).
wait_listening() {
	local port=$1 proto=${2:-tcp} flag=-ltn
	[ "$proto" = udp ] && flag=-lun
	for _ in $(seq 50); do
		ss -H "$flag" "sport = :$port" | grep -q . && return 0
		sleep 0.1
	done
	fail "nothing listens on $proto port $port"
}

# expect_error NAME PATTERN CMD...: CMD must exit non-zero (not by a signal) within 20 s,
# printing exactly one stderr line that matches PATTERN.
expect_error() {
	local name=$1 pattern=$2 status=0
	shift 2
	timeout 20 "$@" >"$work/out" 2>"$work/err" </dev/null || status=$?
	[ "$status" -ne 0 ] || fail "$name: exited 0"
	[ "$status" -ne 124 ] || fail "$name: hung (killed after 20 s)"
	[ "$status" -lt 128 ] || fail "$name: died of signal $((status - 128))"
	grep -Eq -e "$pattern" "$work/err" || fail "$name: stderr lacks /$pattern/: $(cat "$work/err")"
	local lines
	lines=$(grep -cv '^ttcp-[tr]: ' "$work/err" || true)
	[ "$lines" -eq 1 ] || fail "$name: expected one error line, got: $(cat "$work/err")"
	pass "$name: $(grep -v '^ttcp-[tr]: ' "$work/err")"
}

# whole_mark PART: the user.xftp.whole mark of xftp's partial download PART, the bytes
# from its start that are all written and synced; fails when it has none.
whole_mark() {
	python3 -c 'import os, sys; print(int(os.getxattr(sys.argv[1], "user.xftp.whole")))' "$1"
}

# classic_bytes FILE: the byte count of a classic 'N bytes in S real seconds' line.
classic_bytes() {
	sed -n 's/^ttcp-[tr]: \([0-9]*\) bytes in .*/\1/p' "$1"
}

# make_ca_and_server: in the current directory, a test CA (ca.pem, ca.key) and a server
# certificate it signed for localhost and 127.0.0.1 (srv.pem, srv.key), valid two days.
make_ca_and_server() {
	openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 2 \
		-subj /CN=xftp-test-ca 2>/dev/null
	openssl req -newkey rsa:2048 -nodes -keyout srv.key -out srv.csr -subj /CN=localhost 2>/dev/null
	printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' >srv.ext
	openssl x509 -req -in srv.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out srv.pem -days 2 \
		-extfile srv.ext 2>/dev/null
}

# timed OUT CMD...: runs CMD, which must succeed, with stdout in OUT; sets ms to the time
# it took.
timed() {
	local out=$1 t0 t1
	shift
	t0=$(date +%s%N)
	"$@" >"$out" || fail "$*: exit $?"
	t1=$(date +%s%N)
	ms=$(((t1 - t0) / 1000000))
}

# paced_json NAME OUT TOOL ROLE LINK BYTES MIN_MS MAX_MBS: what a run with -i, -R and --json
# printed (OUT) and how long it took (ms, from timed): JSON lines only, at least two
# interval objects with the reporter's fields before one final object counting BYTES, no
# interval but the first (which may hold a read-ahead) above MAX_MBS MB/s, and at least
# MIN_MS ms.
paced_json() {
	local name=$1 out=$2 tool=$3 role=$4 link=$5 bytes=$6 min_ms=$7 max_mbs=$8 n
	jq -e . "$out" >/dev/null || fail "$name: not JSON lines: $(cat "$out")"
	n=$(jq -s '[.[:-1][] | select(.interval)] | length' "$out")
	[ "$n" -ge 2 ] || fail "$name: $n interval objects before the final one: $(cat "$out")"
	jq -se --arg tool "$tool" --arg role "$role" --arg link "$link" '.[:-1] | all(
		.tool == $tool and .role == $role and .link == $link and
		(.interval | .end > .start) and .bytes >= 0 and .messages >= 0 and
		.MB_per_s >= 0 and .Gbit_per_s >= 0)' "$out" >/dev/null ||
		fail "$name: an interval object lacks a field: $(cat "$out")"
	# A last interval much shorter than the others holds the schedule's carry-over (up to
	# 100 ms of the rate) and a last message or two in a few ms: its rate says nothing of
	# the pace, so only intervals at least half as long as the longest are judged.
	jq -se ".[1:-1] as \$iv | (\$iv | map(.seconds) | max) as \$full |
		\$iv | all(.seconds < \$full / 2 or .MB_per_s <= $max_mbs)" "$out" >/dev/null ||
		fail "$name: an interval beat $max_mbs MB/s: $(cat "$out")"
	jq -se ".[-1] | (.interval | not) and .bytes == $bytes" "$out" >/dev/null ||
		fail "$name: the final object: $(tail -n1 "$out")"
	[ "$ms" -ge "$min_ms" ] || fail "$name: took $ms ms, under $min_ms"
	pass "$name: $ms ms, $n interval objects, then the final one"
}
