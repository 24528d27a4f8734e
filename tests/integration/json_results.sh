#!/bin/bash
# One result schema for every tool: the --json objects of ttcp (both ends, TCP and UDP),
# blast and sink, stripe put, get and bench, xftp get, put and ls (against xftpd on loopback),
# final and interval objects alike, each checked against docs/result.schema.json.
. "$(dirname "$0")/xftp_lib.sh"
command -v jq >/dev/null || fail "jq is not installed"
python3 -c 'import jsonschema' 2>/dev/null || fail "python3 has no jsonschema (python3-jsonschema)"
schema=$DS_SRC/docs/result.schema.json
ttcp=$DS_BIN/ttcp blast=$DS_BIN/blast sink=$DS_BIN/sink stripe=$DS_BIN/stripe
version=$("$ttcp" --version | awk '{print $NF}')
t0=$(date +%s)

# check NAME FILE [result_check.py options]: FILE's objects all follow the schema.
check() {
	local name=$1 file=$2
	shift 2
	python3 "$DS_SRC/tests/integration/result_check.py" "$schema" "$file" "$@" 2>"$work/problems" ||
		fail "$name: $(cat "$work/problems")"
	jq -se --arg v "$version" 'all(.version == $v)' "$file" >/dev/null ||
		fail "$name: a version other than $version: $(cat "$file")"
	pass "$name: $(wc -l <"$file") objects follow the schema"
}

python3 "$DS_SRC/tests/integration/result_check.py" "$schema" --self-test ||
	fail "the check takes objects it must refuse"
pass "the check refuses a missing or wrongly typed core member"

# ttcp, TCP: both ends with interval objects, the peer as host:port on both.
"$ttcp" -r -s -p 5001 -i 0.2 --json >"$work/ttcp-r.json" 2>"$work/ttcp-r.err" &
pid=$!
wait_listening 5001
"$ttcp" -t -s -l 64K -w 1 -R 1G -i 0.2 --json -p 5001 127.0.0.1 >"$work/ttcp-t.json" \
	2>"$work/ttcp-t.err" || fail "ttcp -t: $(cat "$work/ttcp-t.err")"
wait $pid || fail "ttcp -r: $(cat "$work/ttcp-r.err")"
check "ttcp -t -i" "$work/ttcp-t.json" --intervals 2
check "ttcp -r -i" "$work/ttcp-r.json" --intervals 2
jq -se '.[-1].peer == "127.0.0.1:5001"' "$work/ttcp-t.json" >/dev/null ||
	fail "the transmitter's peer: $(tail -1 "$work/ttcp-t.json")"
jq -se '.[-1].peer | test("^127\\.0\\.0\\.1:[0-9]+$")' "$work/ttcp-r.json" >/dev/null ||
	fail "the receiver's peer: $(tail -1 "$work/ttcp-r.json")"
pass "ttcp names its peer as host:port on both ends"
# The run began during this script, and the final object's start is the run's.
jq -se --argjson t0 "$t0" --argjson t1 "$(date +%s)" \
	'.[-1].start | sub("\\.[0-9]+Z$"; "Z") | fromdate | . >= $t0 and . <= $t1' \
	"$work/ttcp-t.json" >/dev/null || fail "start is not this run's: $(tail -1 "$work/ttcp-t.json")"
jq -se '(map(.start) | unique | length) == 1' "$work/ttcp-t.json" >/dev/null ||
	fail "interval and final objects disagree on start: $(cat "$work/ttcp-t.json")"
pass "start is the run's, in UTC, on every object of it"

# ttcp, UDP, both ends.
"$ttcp" -r -u -s -p 5002 --json >"$work/udp-r.json" 2>"$work/udp-r.err" &
pid=$!
wait_listening 5002 udp
"$ttcp" -t -u -s -l 8K -n 200 --json -p 5002 127.0.0.1 >"$work/udp-t.json" 2>"$work/udp-t.err" ||
	fail "ttcp -t -u: $(cat "$work/udp-t.err")"
wait $pid || fail "ttcp -r -u: $(cat "$work/udp-r.err")"
check "ttcp -t -u" "$work/udp-t.json"
check "ttcp -r -u" "$work/udp-r.json"
jq -e '.peer == "127.0.0.1:5002"' "$work/udp-t.json" >/dev/null &&
	jq -e '.peer | test("^127\\.0\\.0\\.1:[0-9]+$")' "$work/udp-r.json" >/dev/null ||
	fail "UDP peers: $(cat "$work/udp-t.json" "$work/udp-r.json")"
pass "ttcp over UDP names its peer as host:port on both ends"

# blast and sink: two repeats and their summary, intervals, the sink's figures nested.
"$sink" -x tcp -p 5050 -i 0.2 --json >"$work/sink.json" 2>"$work/sink.err" &
pid=$!
wait_listening 5050
"$blast" -x tcp -p 5050 -l 64K -w 0.6 -r 2 -R 1G -i 0.2 --json 127.0.0.1 >"$work/blast.json" \
	2>"$work/blast.err" || fail "blast: $(cat "$work/blast.err")"
for _ in $(seq 50); do
	[ "$(jq -s 'map(select(has("interval") | not)) | length' "$work/sink.json")" -ge 2 ] && break
	sleep 0.1
done
kill -TERM $pid
wait $pid || true
check "blast -r 2 -i" "$work/blast.json" --intervals 2 --finals 3
check "sink -i" "$work/sink.json" --intervals 2 --finals 2
jq -se 'map(select(has("interval") | not)) | map(.sink.bytes > 0 and .sink.Gbit_per_s > 0
	and (.sink.cpu_user_s + .sink.cpu_sys_s) > 0) | all' "$work/blast.json" >/dev/null ||
	fail "blast's sink object: $(cat "$work/blast.json")"
jq -se '.[-1].role == "summary"' "$work/blast.json" >/dev/null || fail "no summary last"
pass "blast's sink object has the sink's rates and CPU"

# stripe put and get (the get's report on stderr, its data on stdout).
mkdir -p "$work"/d0 "$work"/d1
make_file "$work/src" 3000000
"$stripe" put --json -i 0.1 -R 80M "$work/src" "$work/d0,$work/d1" f >"$work/put.json" ||
	fail "stripe put --json"
check "stripe put -i" "$work/put.json" --intervals 2
"$stripe" get --json "$work/d0,$work/d1" f - 2>"$work/get.json" | cmp -s - "$work/src" ||
	fail "stripe get: the data differs"
check "stripe get" "$work/get.json"
"$stripe" bench --json -s 1M "$work/d0,$work/d1" >"$work/bench.json" || fail "stripe bench --json"
check "stripe bench" "$work/bench.json"

# xftp get, put and ls against xftpd.
root=$work/xs
start_xftpd 2121 "$root"
url=ftp://bob:secret@127.0.0.1:2121
make_file "$root/a.bin" 5000000
mkdir "$root/sub"
chown nobody "$root/a.bin" "$root/sub"
"$xftp" --json -i 0.1 -R 80M get "$url/a.bin" "$work/a.bin" >"$work/xget.json" ||
	fail "xftp get"
same "$root/a.bin" "$work/a.bin" "xftp get"
check "xftp get -i" "$work/xget.json" --intervals 2
jq -se '.[-1] | .role == "get" and .link == "tcp" and .bytes == 5000000 and .ok' \
	"$work/xget.json" >/dev/null || fail "xftp get: $(cat "$work/xget.json")"
"$xftp" --json -P 2 put "$work/a.bin" "$url/b.bin" >"$work/xput.json" || fail "xftp put"
same "$work/a.bin" "$root/b.bin" "xftp put"
check "xftp put" "$work/xput.json"
! grep -q secret "$work/xget.json" "$work/xput.json" || fail "a password in the JSON"
pass "no password in the JSON"
# ls: one object, the listing inside it, whichever side of the command --json stands.
for form in "ls --json" "--json ls"; do
	# shellcheck disable=SC2086
	"$xftp" $form "$url/" >"$work/ls.json" || fail "xftp $form"
	check "xftp $form" "$work/ls.json"
	jq -e '.role == "ls" and ([.entries[] | select(.name == "a.bin" and .type == "file"
		and .size == 5000000)] | length) == 1 and ([.entries[] | select(.name == "sub"
		and .type == "dir")] | length) == 1' "$work/ls.json" >/dev/null ||
		fail "xftp $form: $(cat "$work/ls.json")"
	pass "xftp $form prints one object with the entries"
done
