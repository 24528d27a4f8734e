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

# bench_test_start PORT: the usual start of these tests: a private network namespace,
# DS_BIN and DS_SRC as bin and src, a scratch folder work removed at exit, and the
# bench tools' first port.
bench_test_start() {
	bin=${DS_BIN:?DS_BIN must name the folder of the built tools}
	src=${DS_SRC:?DS_SRC must name the source tree}
	work=$(mktemp -d)
	trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null; rm -rf "$work"' EXIT
	export DS_BIN=$bin DS_BENCH_PORT=$1 PYTHONDONTWRITEBYTECODE=1
}
