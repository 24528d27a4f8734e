#!/bin/bash
# A download whose rename to its final name fails (as strace makes it) keeps its partial
# marked as xftp's: a plain run starts it over rather than refuse it as another program's
# file, and --resume continues it. A download that takes its name leaves no mark on it.
# Both ways to a name: a single get's own rename, and a tree's batch.
. "$(dirname "$0")/xftp_lib.sh"
command -v strace >/dev/null || fail "strace is not installed (packages.txt)"

# Every way glibc may rename is refused.
renames=rename,renameat,renameat2
no_rename=("${strace_cmd[@]}" -f -qq -o /dev/null -e "trace=$renames" -e "inject=$renames:error=EIO")

root=$work/xs
start_xftpd 2141 "$root"
url=ftp://bob:secret@127.0.0.1:2141
mkdir -p "$root/tree" "$work/got"
make_file "$root/big" $((3 * 1048576))
make_file "$root/tree/a" 70000
make_file "$root/tree/b" 5000
chown -R nobody "$root"

# marks FILE: the names of xftp's attributes on FILE, one a line.
marks() {
	python3 -c 'import os, sys; print("\n".join(a for a in os.listxattr(sys.argv[1]) if a.startswith("user.xftp.")))' "$1"
}

# kept_marked PARTIAL: the partial is there and carries both of xftp's marks.
kept_marked() {
	[ -f "$1" ] || fail "no partial $1 after a failed rename"
	[ "$(marks "$1" | sort | tr '\n' ' ')" = "user.xftp.origin user.xftp.whole " ] ||
		fail "$1 lost its marks after a failed rename: '$(marks "$1")'"
}

part=$work/got/.big.xftp-part
expect_error "a get whose rename fails" "rename .*: Input/output error" \
	"${no_rename[@]}" "$xftp" -q get "$url/big" "$work/got/big"
[ ! -e "$work/got/big" ] || fail "a get whose rename failed has its final name"
kept_marked "$part"
pass "a get whose rename fails keeps its partial marked"

"$xftp" -q get "$url/big" "$work/got/big" 2>"$work/plain.err" ||
	fail "a plain get refused the partial a failed rename left: $(cat "$work/plain.err")"
same "$root/big" "$work/got/big" "a plain get starts over the partial a failed rename left"
[ -z "$(marks "$work/got/big")" ] || fail "a downloaded file keeps marks: $(marks "$work/got/big")"
[ ! -e "$part" ] || fail "a downloaded file left its partial"
pass "a downloaded file carries no mark of xftp's"

rm "$work/got/big"
expect_error "a second get whose rename fails" "rename .*: Input/output error" \
	"${no_rename[@]}" "$xftp" -q get "$url/big" "$work/got/big"
kept_marked "$part"
"$xftp" --resume --json get "$url/big" "$work/got/big" >"$work/resume.json" 2>&1 ||
	fail "--resume of the partial a failed rename left: $(cat "$work/resume.json")"
same "$root/big" "$work/got/big" "--resume completes the partial a failed rename left"
resumed=$(python3 -c 'import json, sys; print(json.loads(open(sys.argv[1]).read().splitlines()[-1])["resumed_bytes"])' \
	"$work/resume.json") || fail "no JSON from --resume: $(cat "$work/resume.json")"
[ "$resumed" -eq $((3 * 1048576)) ] ||
	fail "--resume fetched the synced partial again (resumed $resumed bytes)"
pass "--resume takes the whole of the partial a failed rename left ($resumed bytes)"

# A tree: its files are renamed by the batch, after one syncfs.
"${no_rename[@]}" "$xftp" -q -r get "$url/tree" "$work/got/tree" >/dev/null 2>"$work/tree.err" &&
	fail "a tree whose renames fail exited 0"
for f in a b; do
	[ ! -e "$work/got/tree/$f" ] || fail "a tree's file whose rename failed has its final name"
	kept_marked "$work/got/tree/.$f.xftp-part"
done
pass "a tree's files whose renames fail keep their partials marked"
"$xftp" -q -r get "$url/tree" "$work/got/tree" 2>"$work/tree.err" ||
	fail "a plain tree get refused the partials failed renames left: $(cat "$work/tree.err")"
diff -r "$root/tree" "$work/got/tree" >/dev/null || fail "the tree differs after a plain get"
for f in a b; do
	[ -z "$(marks "$work/got/tree/$f")" ] || fail "a tree's file keeps marks: $(marks "$work/got/tree/$f")"
done
pass "a plain tree get starts over the partials failed renames left, and leaves no marks"
