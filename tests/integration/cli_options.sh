# Every tool reads options as GNU tools do: anywhere among the operands (permuted), and
# `--` ends them, so an operand may start with '-'.
source "$(dirname "$0")/lib.sh"
bin=$DS_BIN

# stripe: the subcommand first, then its options anywhere.
mkdir -p "$work/d0" "$work/d1"
D=$work/d0,$work/d1
head -c 300000 /dev/urandom >"$work/big.img"
"$bin/stripe" put -f "$work/big.img" "$D" --json >"$work/put.json" || fail "put SRC DIRS --json"
jq -e '.role == "put" and .bytes == 300000' "$work/put.json" >/dev/null ||
	fail "put SRC DIRS --json printed: $(cat "$work/put.json")"
[ ! -e "$work/d0/--json" ] || fail "--json after the operands was stored as a file"
"$bin/stripe" ls "$D" -a --json | jq -se 'map(.name) == ["big.img"]' >/dev/null ||
	fail "ls DIRS -a --json: $("$bin/stripe" ls "$D")"
pass "stripe put SRC DIRS --json: --json is an option; ls DIRS -a --json too"
"$bin/stripe" put -- "$work/big.img" "$D" -dash >/dev/null || fail "put -- SRC DIRS -dash"
"$bin/stripe" get "$D" -- -dash "$work/back" >/dev/null || fail "get DIRS -- -dash DEST"
cmp -s "$work/big.img" "$work/back" || fail "the file named -dash reads back different"
"$bin/stripe" rm "$D" -- -dash || fail "rm DIRS -- -dash"
pass "stripe: -- ends the options, so a name may start with '-'"
expect_error "stripe: an option after the operands is checked" "-u: 'lots' is not a size" \
	"$bin/stripe" put "$work/big.img" "$D" x -u lots
expect_error "stripe: an option after -- is an operand" "wrong number of arguments" \
	"$bin/stripe" ls "$D" -- --json

# ttcp, blast and sink: options after the host, and -- before an operand.
"$bin/ttcp" -r -s -p 16801 >"$work/r.out" 2>/dev/null &
receiver=$!
wait_listening 16801
"$bin/ttcp" 127.0.0.1 -t -s -n 20 -p 16801 >"$work/t.out" 2>/dev/null || fail "ttcp HOST -t -s"
wait "$receiver" || fail "the receiver of ttcp HOST -t -s"
[ "$(classic_bytes "$work/t.out")" = 163840 ] || fail "ttcp HOST -t -s -n 20: $(cat "$work/t.out")"
pass "ttcp HOST -t -s -n 20: the options after the host are read"
expect_error "ttcp: -- ends the options" "-r takes no host .'-s' is extra." "$bin/ttcp" -r -- -s

"$bin/sink" -p 16802 --once --json >"$work/sink.json" 2>/dev/null &
sink=$!
wait_listening 16802
"$bin/blast" 127.0.0.1 -p 16802 -n 50 -l 4K --json >"$work/blast.json" ||
	fail "blast HOST -p -n -l --json"
wait "$sink" || fail "sink --once"
jq -e '.messages == 50 and .msg_size == 4096' "$work/blast.json" >/dev/null ||
	fail "blast HOST ... --json: $(cat "$work/blast.json")"
pass "blast HOST -p -n -l --json: the options after the host are read"
expect_error "blast: -- ends the options" "expected one DEST" "$bin/blast" -- -w 5
expect_error "sink: -- ends the options" "unexpected argument '--once'" "$bin/sink" -- --once

# tach, xftp and xftpd.
expect_error "tach: -- ends the options" "unexpected argument '--once'" "$bin/tach" -- --once
expect_error "xftp: an option after the operands is read" "--timeout: 'never' is not a duration" \
	"$bin/xftp" get ftp://127.0.0.1:1/f --timeout never
expect_error "xftp get: an empty DEST is refused before any connection" \
	"^xftp get: an empty DEST names no file or directory$" "$bin/xftp" get ftp://127.0.0.1:1/f ""
expect_error "xftp: --tls and --no-tls together" "^xftp: --tls and --no-tls contradict each other$" \
	"$bin/xftp" --tls --no-tls get ftp://127.0.0.1:1/f
expect_error "xftp: -- ends the options" "'-x' is not a command" "$bin/xftp" -- -x
# -P and -j are counts, worded as xftpd words its counts.
expect_error "xftp: -P takes a count" "^xftp: -P: 'abc' is not a count from 1 to 16$" \
	"$bin/xftp" -P abc get ftp://127.0.0.1:1/f
expect_error "xftp: -P takes no size suffix" "^xftp: -P: '1K' is not a count from 1 to 16$" \
	"$bin/xftp" -P 1K get ftp://127.0.0.1:1/f
expect_error "xftp: -P takes no sign" "^xftp: -P: '[+]2' is not a count from 1 to 16$" \
	"$bin/xftp" -P +2 get ftp://127.0.0.1:1/f
expect_error "xftp: -P takes no leading blank" "^xftp: -P: ' 2' is not a count from 1 to 16$" \
	"$bin/xftp" -P ' 2' get ftp://127.0.0.1:1/f
expect_error "xftp: -j takes a count" "^xftp: -j: '0' is not a count from 1 to " \
	"$bin/xftp" -j 0 get ftp://127.0.0.1:1/f
expect_error "xftpd: an option after an operand is read" "-p: 'nonsense' is not a port" \
	"$bin/xftpd" extra -p nonsense
expect_error "xftpd: -- ends the options" "unexpected argument '-p'" "$bin/xftpd" -- -p 2121
echo "$checks passed, 0 failed"
