# The installed libraries export exactly what the installed headers declare: install to a
# temporary prefix, list the functions and variables its headers declare (preprocessed
# with the flags a user gets from pkg-config, so #ifdef DS_HAVE_VERBS counts as built),
# and compare with the defined dynamic symbols of every installed shared library and the
# defined global symbols of every installed archive. Any extra or missing name fails.
source "$(dirname "$0")/lib.sh"
build=$(dirname "$DS_BIN")
command -v ctags >/dev/null || fail "ctags (universal-ctags) is needed to read the headers"
cmake --install "$build" --prefix "$work/prefix" >/dev/null || fail "cmake --install"
prefix=$work/prefix
include=$prefix/include/dragstrip
pcdir=$(dirname "$(find "$prefix" -name dragstrip.pc)")
libdir=$(dirname "$pcdir")

headers=$(cd "$include" && ls -- *.h)
[ -n "$headers" ] || fail "no headers installed in $include"
for h in $headers; do echo "#include <dragstrip/$h>"; done >"$work/all.c"
cflags=$(PKG_CONFIG_PATH=$pcdir pkg-config --cflags dragstrip dsstripe) || fail "pkg-config"
# -I first, so that the line markers name $include as it is spelled below
# shellcheck disable=SC2086 # the flags are words
cc -E -I"$prefix/include" $cflags "$work/all.c" >"$work/all.i" 2>"$work/cc.err" ||
	fail "the installed headers do not compile alone: $(head -5 "$work/cc.err")"
# Keep only the lines that came from the installed headers (line markers say whence), then
# let ctags find prototypes and extern variables: static inline functions are neither.
awk -v dir="\"$include/" '/^# [0-9]+ "/ { keep = index($3, dir) == 1; print ""; next }
	{ print keep ? $0 : "" }' "$work/all.i" >"$work/ours.c"
ctags -x --language-force=C --kinds-C=px "$work/ours.c" | awk '{ print $1 }' | sort -u >"$work/declared"
[ "$(wc -l <"$work/declared")" -gt 50 ] || fail "found almost no declarations: $(cat "$work/declared")"

libs=$(cd "$libdir" && ls -- *.so *.a)
: >"$work/exported"
for lib in $libs; do
	case $lib in
	*.a) nm -g --defined-only "$libdir/$lib" ;;
	*.so) nm -D --defined-only "$libdir/$lib" ;;
	esac | awk 'NF == 3 { print $3 }' | sort -u >"$work/$lib.syms"
	extra=$(comm -23 "$work/$lib.syms" "$work/declared" | paste -sd' ')
	[ -z "$extra" ] || fail "$lib exports what no installed header declares: $extra"
	pass "$lib: its $(wc -l <"$work/$lib.syms") symbols are all declared"
	case $lib in *.so) cat "$work/$lib.syms" >>"$work/exported" ;; esac
done
dups=$(sort "$work/exported" | uniq -d | paste -sd' ')
[ -z "$dups" ] || fail "more than one shared library exports: $dups"
missing=$(comm -13 <(sort -u "$work/exported") "$work/declared" | paste -sd' ')
[ -z "$missing" ] || fail "declared in the installed headers but exported by no shared library: $missing"
pass "the shared libraries export every one of the $(wc -l <"$work/declared") declared names"
# The static archives: each carries its own library's half of the same set.
comm -3 <(sort -u "$work/exported") <(cat "$work"/*.a.syms | sort -u) >"$work/diff"
[ ! -s "$work/diff" ] || fail "the archives and the shared libraries differ: $(paste -sd' ' "$work/diff")"
pass "the archives export what the shared libraries do"
echo "$checks passed, 0 failed"
