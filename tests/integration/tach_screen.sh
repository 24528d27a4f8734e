# tach on screen under tmux: a running blast/sink pair appears with the rate blast itself
# reports, Enter shows its streams, the screen follows a resize to 200x50 and back to
# 80x24 with no line too wide, and once blast ends it stays, dimmed, with its totals.
# As root it runs in network and mount namespaces of its own, so lo carries only this
# test's traffic and /dev/shm holds only its tools' segments.
if [ "$(id -u)" = 0 ] && [ -z "${TACH_TEST_NETNS:-}" ]; then
	exec env TACH_TEST_NETNS=1 unshare -n -m bash -c \
		'ip link set lo up && mount -t tmpfs -o mode=1777 tmpfs /dev/shm && exec bash "$@"' - "$0" "$@"
fi
source "$(dirname "$0")/lib.sh"
command -v tmux >/dev/null || fail "tmux is not installed (packages.txt)"
port=16711
sock=$work/tmux.sock
tm() { tmux -S "$sock" "$@"; }
screen() { tm capture-pane -p -t tach; }
trap 'tm kill-server 2>/dev/null || true; cleanup' EXIT

# until_screen SECONDS PATTERN: until the screen matches PATTERN (extended regex).
until_screen() {
	for _ in $(seq $(($1 * 10))); do
		screen | grep -Eq -e "$2" && return 0
		sleep 0.1
	done
	screen >&2
	fail "the screen never showed /$2/ in $1 s"
}

# widest: the widest line of the screen, in characters.
widest() {
	screen | python3 -c 'import sys; print(max((len(l.rstrip("\n")) for l in sys.stdin), default=0))'
}

# mbps TEXT: a rate as tach prints it ("250 MB/s", "1.20 GB/s") in MB/s.
mbps() {
	awk -v t="$1" 'BEGIN { split(t, p, " "); f["B/s"] = 1e-6; f["kB/s"] = 1e-3; f["MB/s"] = 1
		f["GB/s"] = 1e3; f["TB/s"] = 1e6; printf "%.3f\n", p[1] * f[p[2]] }'
}

tm -f /dev/null new-session -d -s tach -x 80 -y 24 "env LANG=C.UTF-8 $DS_BIN/tach"
until_screen 10 'no dragstrip tool is running|TOOL +ROLE'
pass "tach starts at 80x24"

"$DS_BIN/sink" -p $port --once --json >"$work/sink.json" 2>"$work/sink.err" &
wait_listening $port
# Paced to 2 Gbit/s (250 MB/s) over two streams, so every interval has the same rate.
"$DS_BIN/blast" -p $port -l 1M -q 2 -R 2G -w 8 -i 1 --json 127.0.0.1 >"$work/blast.json" \
	2>"$work/blast.err" &
blast_pid=$!
until_screen 10 '^.blast +send +tcp +127\.0\.0\.1 +[0-9.]+ [kMG]B/s'
# NOW must settle on what blast reports, within 10%, once a look covers a whole second of
# steady sending (a look that began before blast did covers less).
for _ in $(seq 100); do
	row=$(screen | grep -E '^.blast +send' || true)
	tach_rate=$(mbps "$(echo "$row" | awk '{ print $5, $6 }')")
	tool_rate=$(jq -s '[.[] | select(.interval) | .MB_per_s] | sort |
		if length > 0 then .[length / 2 | floor] else 0 end' "$work/blast.json")
	awk -v a="$tach_rate" -v b="$tool_rate" 'BEGIN { exit !(b > 0 && a / b > 0.9 && a / b < 1.1) }' &&
		break
	sleep 0.1
done
awk -v a="$tach_rate" -v b="$tool_rate" 'BEGIN { exit !(b > 0 && a / b > 0.9 && a / b < 1.1) }' ||
	fail "tach shows blast at $tach_rate MB/s, blast reports $tool_rate MB/s: $row"
pass "blast at $tach_rate MB/s on screen, $tool_rate MB/s by its own report"
screen | grep -Eq '^.sink +recv +tcp' || fail "sink is not on the screen"
screen | grep -Eq '^ lo +[0-9.]+ [kMG]B/s' || fail "lo is not among the NICs"
pass "sink and lo are on the screen"

# pick TOOL: moves the selection ('>') to TOOL's row. Other tools running on the machine
# may be listed too, so nothing is assumed about the order.
pick() {
	local at want
	for _ in $(seq 40); do
		at=$(screen | grep -nE '^>' | head -1 | cut -d: -f1)
		want=$(screen | grep -nE "^.$1 " | head -1 | cut -d: -f1)
		[ -n "$want" ] || fail "$1 is not on the screen: $(screen)"
		[ "$at" = "$want" ] && return 0
		if [ -n "$at" ] && [ "$at" -gt "$want" ]; then
			tm send-keys -t tach Up
		else
			tm send-keys -t tach Down
		fi
		sleep 0.1
	done
	fail "could not select $1: $(screen)"
}

# Sorted by tool name the rows hold still; Enter opens blast, Esc comes back.
tm send-keys -t tach s s
until_screen 5 'sort tool'
pick blast
tm send-keys -t tach Enter
until_screen 5 '^ stream +0 .*[0-9.]+ [kMG]B/s'
until_screen 5 '^ stream +1 '
pass "Enter shows the session's two streams"
tm send-keys -t tach Escape
until_screen 5 'TOOL +ROLE'
tm send-keys -t tach u
until_screen 5 '^.blast +send .*[0-9.]+ [kMG]b/s'
tm send-keys -t tach u
pass "Esc goes back; u switches to bits per second and back"

tm resize-window -t tach -x 200 -y 50
until_screen 5 'LAST MINUTE'
[ "$(widest)" -le 200 ] || fail "a line is wider than 200 columns at 200x50"
screen | grep -Eq '^.blast +send +tcp +127\.0\.0\.1 +[0-9.]+ [kMG]B/s' || fail "the peer is not whole at 200x50"
pass "200x50: the whole peer and a wider sparkline, no line past the edge"
tm resize-window -t tach -x 80 -y 24
for _ in $(seq 20); do [ "$(widest)" -le 80 ] && break; sleep 0.1; done
[ "$(widest)" -le 80 ] || fail "a line is wider than 80 columns after the resize back"
[ "$(screen | wc -l)" -le 24 ] || fail "more than 24 lines at 80x24"
pass "80x24 again after the resize"

wait "$blast_pid" || fail "blast failed: $(cat "$work/blast.err")"
until_screen 5 '^.blast +send +tcp +127\.0\.0\.1 +ended'
bytes=$(jq -s 'map(select(.interval | not)) | .[0].bytes' "$work/blast.json")
total=$(awk -v b="$bytes" 'BEGIN { v = b; u = "B"; split("kB MB GB TB", n, " ")
	for (i = 1; v >= 999.5 && i <= 4; i++) { v /= 1000; u = n[i] }
	printf(v < 9.995 ? "%.2f %s" : v < 99.95 ? "%.1f %s" : "%.0f %s", v, u) }')
screen | grep -E '^.blast +send' | grep -qF "$total" ||
	fail "the ended blast does not show its total $total: $(screen | grep -E '^.blast')"
# Dimmed (SGR 2) once the selection moves off it to sink.
pick sink
dimmed() { tm capture-pane -p -e -t tach | grep -E 'blast +send' | grep -q $'\e\\[[0-9;]*2m'; }
for _ in $(seq 30); do dimmed && break; sleep 0.1; done
dimmed ||
	fail "the ended blast is not dimmed: $(tm capture-pane -p -e -t tach | grep -E 'blast +send' | od -c | head -3)"
pass "blast ended: it stays on screen with its total $total"

tm send-keys -t tach q
for _ in $(seq 30); do tm has-session -t tach 2>/dev/null || break; sleep 0.1; done
tm has-session -t tach 2>/dev/null && fail "tach did not quit on q"
pass "q quits"
