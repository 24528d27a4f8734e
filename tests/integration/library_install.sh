# Another program can use the installed libraries: install to a temporary prefix, move
# it (nothing may remember where it was installed), check that the libraries export only
# ds_ symbols, then build docs/library.md's example with find_package and with
# pkg-config --static, and run both.
source "$(dirname "$0")/lib.sh"
build=$(dirname "$DS_BIN")
cmake --install "$build" --prefix "$work/staged" >/dev/null || fail "cmake --install"
mv "$work/staged" "$work/prefix"
prefix=$work/prefix
pcdir=$(dirname "$(find "$prefix" -name dragstrip.pc)")
libdir=$(dirname "$pcdir")

# Only ds_ names: defined global symbols of the archives and dynamic symbols of the .so.
for lib in libdragstrip.a libdsstripe.a libdragstrip.so libdsstripe.so; do
	[ -e "$libdir/$lib" ] || fail "$lib is not installed"
	case $lib in
	*.a) nm -g --defined-only "$libdir/$lib" ;;
	*.so) nm -D --defined-only "$libdir/$lib" ;;
	esac | awk 'NF == 3 { print $3 }' >"$work/symbols"
	foreign=$(grep -v '^ds_' "$work/symbols" | head -5 | paste -sd' ' || true)
	[ -z "$foreign" ] || fail "$lib exports non-ds_ symbols: $foreign"
	[ "$(wc -l <"$work/symbols")" -gt 10 ] || fail "$lib exports almost nothing"
	pass "$lib exports only ds_ symbols ($(wc -l <"$work/symbols"))"
done
grep -qx ds_link_tcp <(nm -g --defined-only "$libdir/libdragstrip.a" | awk 'NF == 3 { print $3 }') ||
	fail "libdragstrip.a lacks ds_link_tcp"
nm -g --defined-only "$libdir/libdragstrip.a" | grep -q ds_cli_ && fail "the tools' cli helpers are installed"
[ -e "$prefix/include/dragstrip/cli.h" ] && fail "cli.h is installed"
[ -e "$prefix/include/dragstrip/stripe.h" ] || fail "the stripe component's headers are missing"

# An outside CMake project: the example through ds::dragstrip, a CRC through the shared
# stripe component.
mkdir -p "$work/outside"
sed -n '/^```c$/,/^```$/p' "$DS_SRC/docs/library.md" | sed '1d;$d' >"$work/outside/send.c"
[ "$(wc -l <"$work/outside/send.c")" -gt 20 ] || fail "no C example found in docs/library.md"
cat >"$work/outside/crc.c" <<'C'
#include <dragstrip/stripe_header.h>
#include <stdio.h>
int main(void)
{
        unsigned crc = ds_crc32c(0, "123456789", 9);
        printf("%08x\n", crc);
        return crc != 0xe3069283u;
}
C
cat >"$work/outside/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.16)
project(outside C)
find_package(dragstrip 0.1 REQUIRED COMPONENTS stripe)
add_executable(send send.c)
target_link_libraries(send PRIVATE ds::dragstrip)
add_executable(crc crc.c)
target_link_libraries(crc PRIVATE ds::dsstripe_shared)
CMAKE
cmake -S "$work/outside" -B "$work/outside/build" -DCMAKE_PREFIX_PATH="$prefix" >"$work/cmake.log" 2>&1 ||
	fail "configuring an outside project: $(tail -5 "$work/cmake.log")"
cmake --build "$work/outside/build" >"$work/build.log" 2>&1 || fail "building it: $(tail -20 "$work/build.log")"
unshare -n sh -c "ip link set lo up; '$work/outside/build/send'" >"$work/send.out" ||
	fail "the example built with find_package: $(cat "$work/send.out")"
grep -qx 'received 1000 messages' "$work/send.out" || fail "the example said: $(cat "$work/send.out")"
pass "find_package(dragstrip) and ds::dragstrip: the example ran, $(cat "$work/send.out")"
[ "$("$work/outside/build/crc")" = e3069283 ] || fail "ds_crc32c through ds::dsstripe_shared"
pass "find_package(dragstrip COMPONENTS stripe) and ds::dsstripe_shared: CRC-32C right"

# pkg-config --static, from the moved prefix; the .pc carries DS_HAVE_VERBS when built so.
export PKG_CONFIG_PATH=$pcdir
flags=$(pkg-config --cflags --libs --static dragstrip) || fail "pkg-config dragstrip"
case $flags in *"-I$prefix/"*) ;; *) fail "pkg-config points elsewhere than the moved prefix: $flags" ;; esac
if grep -q '^DS_WITH_VERBS:BOOL=ON' "$build/CMakeCache.txt"; then
	case $flags in *-DDS_HAVE_VERBS*) ;; *) fail "the .pc lacks -DDS_HAVE_VERBS: $flags" ;; esac
fi
# shellcheck disable=SC2086 # the flags are words
cc -o "$work/send-pc" "$work/outside/send.c" $flags || fail "cc with pkg-config --static: $flags"
LD_LIBRARY_PATH=$libdir unshare -n sh -c "ip link set lo up; '$work/send-pc'" >"$work/send-pc.out" ||
	fail "the example built with pkg-config: $(cat "$work/send-pc.out")"
grep -qx 'received 1000 messages' "$work/send-pc.out" || fail "pkg-config build said: $(cat "$work/send-pc.out")"
pass "cc \$(pkg-config --cflags --libs --static dragstrip): the example ran"
echo "$checks passed, 0 failed"
