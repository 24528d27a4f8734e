#!/usr/bin/env bash
# bench/sweep on loopback with tiny sizes: well-formed CSV and JSON, valid PNG and SVG
# plots, NPtcp's curve with --against netpipe, the 1994 figures beside a figure of the
# hippi preset, and one-line errors with exit 2 for bad options.
set -euo pipefail
# shellcheck source=lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_test_private_net "$@"
bench_test_start 17401

series=("blast -x tcp" "blast -x udp -2" "ttcp -D")
command -v NPtcp >/dev/null && against=(--against netpipe) || against=()
"$src/bench/sweep" --sizes 256,4K -r 2 -w 0.2 -o "$work/out" "${against[@]}" "${series[@]}" \
	>"$work/stdout" 2>"$work/stderr" || { cat "$work/stdout" "$work/stderr" >&2; fail "sweep exited $?"; }
out=$work/out
[ "$(head -1 "$out/sweep.csv")" = "figure,series,source,size_bytes,runs,median_MB_per_s,min_MB_per_s,max_MB_per_s" ] ||
	fail "sweep.csv header: $(head -1 "$out/sweep.csv")"
for s in "${series[@]}"; do
	for size in 256 4096; do
		grep -q "^sweep,$s,measured,$size,2,[0-9.]*,[0-9.]*,[0-9.]*$" "$out/sweep.csv" ||
			fail "no row for '$s' at $size in sweep.csv"
	done
done
# median within min-max, all positive
awk -F, 'NR > 1 && !($7 > 0 && $7 <= $6 && $6 <= $8) { exit 1 }' "$out/sweep.csv" ||
	fail "a median outside its min-max: $(cat "$out/sweep.csv")"
[ "$(wc -l <"$out/runs.csv")" -ge $((1 + 3 * 2 * 2)) ] || fail "runs.csv has too few runs"
jq -e --argjson n "$(( ${#series[@]} + ${#against[@]} / 2 ))" '.figures | length == 1
	and (.[0].series | length) == $n
	and all(.[0].series[]; all(.points[]; .median > 0 and .min <= .median and .median <= .max))' \
	"$out/sweep.json" >/dev/null || fail "sweep.json is not the sweep: $(head -c 400 "$out/sweep.json")"
if [ ${#against[@]} -gt 0 ]; then
	grep -q '^sweep,NPtcp (NetPIPE),measured,' "$out/sweep.csv" || fail "no NPtcp curve"
fi
check_png "$out/sweep.png"
check_svg "$out/sweep.svg"
grep -q 'MB/s = 10^6 bytes/s' "$out/sweep.svg" || fail "the plot's y axis has no unit"
grep -q 'message size (bytes, log scale)' "$out/sweep.svg" || fail "the plot's x axis has no label"
grep -q "blast -x udp -2" "$out/sweep.svg" || fail "the plot has no legend entry for a series"
ls "$out" | grep -q 'tmp' && fail "a temporary file was left: $(ls "$out")"
echo "PASS: sweep writes CSV, JSON, PNG and SVG"

# The report of the hippi preset: today's runs beside the paper's figures.
printf 'blast\tblast -x tcp -2\t1024\t1\t900\nblast\tblast -x tcp -2\t1024\t2\t1100\nftp\tttcp copy -l 60K\t1048576\t1\t50\n' >"$work/runs.tsv"
python3 "$src/bench/sweep-report.py" --runs "$work/runs.tsv" --out "$work/hippi" --title test \
	--figures "blast ftp" --seconds 1 --host test --reference "$src/bench/hippi-1994.csv" \
	>"$work/hippi.out" || fail "the report with the 1994 figures failed"
grep -q '^blast,1994 HIPPI-PH blast -1 (one writer),1994,2097152,1,73.210,' "$work/hippi/sweep.csv" ||
	fail "the 1994 Table 1 figures are not in sweep.csv"
grep -q '^ftp,1994 ftp 960 KB striped,1994,1048576000,1,9.748,' "$work/hippi/sweep.csv" ||
	fail "the 1994 Table 6 figures are not in sweep.csv"
grep -Eq '^ +1K +1000\.0 +900-1100 +1\.36 +1\.36$' "$work/hippi.out" ||
	fail "the printed table does not put 1994 beside today: $(cat "$work/hippi.out")"
check_png "$work/hippi/blast.png"
check_png "$work/hippi/ftp.png"
echo "PASS: the 1994 figures beside today's"

bad() { # EXPECTED-TEXT ARGS...
	local want=$1 status
	shift
	set +e
	"$src/bench/sweep" -o "$work/bad" "$@" >"$work/bad.out" 2>&1
	status=$?
	set -e
	[ "$status" = 2 ] || fail "sweep $* exited $status, not 2"
	[ "$(wc -l <"$work/bad.out")" = 1 ] && grep -qF -- "$want" "$work/bad.out" ||
		fail "sweep $*: not one line naming '$want': $(cat "$work/bad.out")"
}
bad "--sizes" --sizes 2M-256
bad "--sizes" --sizes 12Q
bad "-r" -r 0
bad "-w" -w -1
bad "series 'netcat'" netcat
bad "--preset" --preset cray
bad "--against" --against iperf
bad "unknown option" --frobnicate
[ ! -e "$work/bad" ] || fail "a refused command line still made its output directory"
echo "PASS: bad options exit 2 with one line"
