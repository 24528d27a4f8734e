#!/usr/bin/env bash
# bench/compare with 1-second runs and a small file: the table has a row for every peer
# installed here with medians and a ratio, Markdown and JSON agree, what cannot run is
# listed with a reason, and bad options exit 2.
set -euo pipefail
# shellcheck source=lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_test_private_net "$@"
bench_test_start 17501

"$src/bench/compare" -r 1 -w 1 -s 8M -d "$work" --only ttcp,blast,stripe,xftp -o "$work/out" \
	>"$work/stdout" 2>"$work/stderr" || { cat "$work/stdout" "$work/stderr" >&2; fail "compare exited $?"; }
out=$work/out
peers=("iperf3 -l 1M" "dd oflag=direct bs=1M" "dd iflag=direct bs=1M")
command -v nuttcp >/dev/null && peers+=("nuttcp -l1048576")
command -v NPtcp >/dev/null && peers+=("NPtcp 1 MiB ping-pong")
[ "$(id -u)" = 0 ] && command -v trafgen >/dev/null && peers+=("trafgen 64000-byte frames")
for peer in "${peers[@]}"; do
	grep -Eq "^\| .* \| $peer +\| [0-9]+ +\| [0-9]+-[0-9]+ +\| [0-9]+\.[0-9]{2} +\|$" "$work/stdout" ||
		fail "no table row for $peer: $(cat "$work/stdout")"
	jq -e --arg p "$peer" 'any(.rows[]; .peer == $p and .ours_median > 0 and .peer_median > 0
		and (.ratio - .ours_median / .peer_median | fabs) < 1e-9)' "$out/compare.json" >/dev/null ||
		fail "compare.json has no row for $peer"
done
[ "$(id -u)" != 0 ] || jq -e 'any(.rows[]; .ours == "blast -x raw -l 64000" and .peer == "iperf3 -l 1M")' \
	"$out/compare.json" >/dev/null || fail "no raw blast against iperf3 on the veth pair"
cmp -s <(sed -n '/^| what/,/^$/p' "$work/stdout") <(sed -n '/^| what/,/^$/p' "$out/compare.md") ||
	fail "the printed table and compare.md differ"
[ -f "$src/bench/xftp-copy.sh" ] ||
	jq -e 'any(.not_run[]; (.what | startswith("xftp")) and (.reason | test("not available in this build")))' \
		"$out/compare.json" >/dev/null || fail "xftp's absence is not listed with its reason"
jq -e 'any(.not_run[]; .what | test("perftest"))' "$out/compare.json" >/dev/null ||
	fail "perftest's absence is not listed"
[ "$(head -1 "$out/runs.csv")" = "group,tool,run,MB_per_s" ] || fail "runs.csv header"
[ -z "$(ls "$work" | grep '^compare\.')" ] || fail "the disk runs left their directory behind"
echo "PASS: compare prints and writes its table"

for args in "-w 0.5" "-r x" "--only ttcp,frob" "-s 0" "-d /nonexistent" "--bogus"; do
	set +e
	# shellcheck disable=SC2086
	"$src/bench/compare" $args -o "$work/bad" >"$work/bad.out" 2>&1
	status=$?
	set -e
	[ "$status" = 2 ] || fail "compare $args exited $status, not 2"
	[ "$(wc -l <"$work/bad.out")" = 1 ] || fail "compare $args: not one line: $(cat "$work/bad.out")"
done
echo "PASS: bad options exit 2 with one line"
