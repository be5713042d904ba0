#!/usr/bin/env bash
# The whole test suite: install missing packages, build with tests, run CTest.
# Extra arguments go to ctest (e.g. -L quick for the quick subset); --sanitize first: see below.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# --sanitize: the same suite built with clang + ASan/UBSan/LSan instead (scripts/test-sanitize.sh).
if [ "${1:-}" = --sanitize ]; then shift; exec bash "$root/scripts/test-sanitize.sh" "$@"; fi
bash "$root/scripts/install-deps.sh"
bash "$root/scripts/build.sh" -DQNUM_BUILD_TESTS=ON -DQNUM_BUILD_EXAMPLES=ON
cd "${QNUM_BUILD_DIR:-$root/build}"
ctest --output-on-failure --timeout 900 "$@"
