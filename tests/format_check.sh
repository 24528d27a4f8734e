#!/usr/bin/env bash
# Every C file in the repository reads as the root .clang-format says; lists those that do not.
set -euo pipefail
cd "${DS_SRC:?DS_SRC must name the source tree}"
command -v clang-format >/dev/null || { echo "FAIL: clang-format is not installed" >&2; exit 1; }
c_files() {
	if git rev-parse --git-dir >/dev/null 2>&1; then
		git ls-files '*.c' '*.h'
	else # a tree without git (an unpacked tarball): everything outside the build folders
		find . -path './build*' -prune -o -name '*.[ch]' -print
	fi
}
bad=$(c_files | while read -r f; do
	clang-format --dry-run --Werror "$f" >/dev/null 2>&1 || echo "$f"
done)
[ -z "$bad" ] || { printf 'FAIL: not clang-formatted (run clang-format -i):\n%s\n' "$bad" >&2; exit 1; }
echo "PASS: $(c_files | wc -l) C files formatted"
