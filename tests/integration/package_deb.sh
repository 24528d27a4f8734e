# The Debian package: `cpack -G DEB` from the build tree gives a dragstrip .deb with the
# tools, man pages, libraries with their CMake and pkg-config files, xftpd's systemd unit,
# /etc/xftpd.conf as a conffile and a logrotate snippet; systemd-analyze accepts the
# unit; and dpkg installs it, removes it (keeping only the conffiles) and purges it.
# This installs into the machine's own /: it skips (77) unless it runs as root with dpkg
# and cpack, and never touches a dragstrip package or file it did not put there.
source "$(dirname "$0")/lib.sh"
build=$(dirname "$DS_BIN")
skip() {
	echo "SKIP: $*"
	exit 77
}
for tool in cpack dpkg dpkg-deb dpkg-shlibdeps; do
	command -v "$tool" >/dev/null || skip "$tool is not installed"
done

cpack -G DEB -B "$work/pkg" --config "$build/CPackConfig.cmake" >"$work/cpack.log" 2>&1 ||
	fail "cpack: $(tail -20 "$work/cpack.log")"
deb=$(ls "$work"/pkg/dragstrip_*.deb)
dpkg-deb -I "$deb" >"$work/info"
dpkg-deb -c "$deb" | awk '{ sub(/^\./, "", $6); print $6 }' >"$work/contents"
grep -q '^ Package: dragstrip$' "$work/info" || fail "not the dragstrip package: $(cat "$work/info")"
grep -Eq '^ Depends: .*libc6' "$work/info" || fail "no Depends from the binaries"
for path in /usr/bin/ttcp /usr/bin/blast /usr/bin/sink /usr/bin/stripe /usr/bin/xftp \
	/usr/bin/tach /usr/sbin/xftpd /usr/share/man/man1/ttcp.1 /usr/share/man/man8/xftpd.8 \
	/usr/include/dragstrip/link.h /usr/lib/libdragstrip.a /usr/lib/libdragstrip.so \
	/usr/lib/libdsstripe.so /usr/lib/pkgconfig/dragstrip.pc \
	/usr/lib/cmake/dragstrip/dragstripConfig.cmake /lib/systemd/system/xftpd.service \
	/etc/xftpd.conf /etc/logrotate.d/xftpd; do
	grep -qx "$path" "$work/contents" || fail "$path is not in the package"
done
pass "the package holds the tools, man pages, library files, unit, config and logrotate snippet"
dpkg-deb --ctrl-tarfile "$deb" | tar -xO ./conffiles >"$work/conffiles"
grep -qx /etc/xftpd.conf "$work/conffiles" || fail "/etc/xftpd.conf is not a conffile"
pass "conffiles: $(paste -sd' ' "$work/conffiles")"

[ "$(id -u)" -eq 0 ] || skip "installing needs root"
# One installer at a time on this machine, and never over somebody's dragstrip.
exec 9>/run/lock/dragstrip-package-test
flock -w 120 9 || fail "another package test holds the lock"
if dpkg-query -W -f '${Status}' dragstrip 2>/dev/null | grep -q 'installed\|config-files'; then
	skip "a dragstrip package is already installed here"
fi
while read -r path; do
	case $path in */) continue ;; esac
	[ ! -e "$path" ] || skip "$path already exists outside any package test"
done <"$work/contents"

installed=0
remove_package() {
	[ "$installed" -eq 1 ] && dpkg -P dragstrip >/dev/null 2>&1 || true
	installed=0
}
trap 'remove_package; cleanup' EXIT
installed=1
dpkg -i "$deb" >"$work/dpkg.log" 2>&1 || fail "dpkg -i: $(tail -20 "$work/dpkg.log")"
/usr/bin/ttcp --version >/dev/null || fail "the installed ttcp does not run"
/usr/sbin/xftpd --help | grep -q -- --pasv-ports || fail "the installed xftpd does not run"
if command -v pkg-config >/dev/null; then
	inc=$(PKG_CONFIG_PATH=/usr/lib/pkgconfig pkg-config --variable=includedir dragstrip) ||
		fail "pkg-config does not find the installed library"
	[ -e "$inc/dragstrip/link.h" ] || fail "pkg-config's includedir $inc lacks dragstrip/link.h"
fi
pass "dpkg -i installs it; the installed tools run"

if command -v systemd-analyze >/dev/null; then
	systemd-analyze verify /lib/systemd/system/xftpd.service >"$work/verify" 2>&1 ||
		fail "systemd-analyze verify: $(cat "$work/verify")"
	[ ! -s "$work/verify" ] || fail "systemd-analyze verify warns: $(cat "$work/verify")"
	pass "systemd-analyze verify accepts xftpd.service"
else
	echo "note: systemd-analyze is not installed; the unit is not verified"
fi

dpkg -r dragstrip >"$work/dpkg.log" 2>&1 || fail "dpkg -r: $(tail -20 "$work/dpkg.log")"
while read -r path; do
	case $path in */) continue ;; esac
	if grep -qx "$path" "$work/conffiles"; then
		[ -e "$path" ] || fail "dpkg -r removed the conffile $path (only a purge should)"
	else
		[ ! -e "$path" ] && [ ! -L "$path" ] || fail "$path is left after dpkg -r"
	fi
done <"$work/contents"
for dir in /usr/include/dragstrip /usr/lib/cmake/dragstrip; do
	[ ! -e "$dir" ] || fail "$dir is left after dpkg -r"
done
pass "dpkg -r removes everything but the conffiles"
dpkg -P dragstrip >"$work/dpkg.log" 2>&1 || fail "dpkg -P: $(tail -20 "$work/dpkg.log")"
installed=0
while read -r path; do
	case $path in */) continue ;; esac
	[ ! -e "$path" ] || fail "$path is left after dpkg -P"
done <"$work/contents"
! dpkg-query -W dragstrip >/dev/null 2>&1 || fail "dpkg still knows dragstrip after the purge"
pass "dpkg -P removes the conffiles too"
