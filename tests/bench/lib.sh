# shellcheck shell=bash
# Helpers for the tests of bench/'s tools; sourced, not run.

# Runs the calling test again inside a private network namespace (root), so that its fixed
# loopback ports never meet another test's.
bench_test_private_net() {
	if [ -z "${DS_TEST_IN_NETNS:-}" ] && [ "$(id -u)" = 0 ]; then
		DS_TEST_IN_NETNS=1 exec unshare -n bash -c 'ip link set lo up && exec bash "$0" "$@"' "$0" "$@"
	fi
}

fail() {
	echo "FAIL: $*" >&2
	exit 1
}

# check_png FILE: a whole PNG (signature, IHDR, IEND) of some width and height.
check_png() {
	python3 - "$1" <<'PY' || fail "$1 is not a valid PNG"
import struct, sys
data = open(sys.argv[1], "rb").read()
assert data[:8] == b"\x89PNG\r\n\x1a\n", "signature"
assert data[12:16] == b"IHDR", "IHDR first"
width, height = struct.unpack(">II", data[16:24])
assert width >= 200 and height >= 200, (width, height)
assert data[-8:-4] == b"IEND", "IEND last"
PY
}

# check_svg FILE: well-formed XML whose root is an svg element.
check_svg() {
	python3 - "$1" <<'PY' || fail "$1 is not a valid SVG"
import sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
assert root.tag.endswith("svg"), root.tag
PY
}
