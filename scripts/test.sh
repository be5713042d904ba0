#!/usr/bin/env bash
# The whole test suite: install missing packages, build with tests, run CTest, then the
# Python package's pytest suite (scripts/test_python.sh; QNUM_SKIP_PYTHON=1 skips it).
# Extra arguments go to ctest (e.g. -L quick for the quick subset); --sanitize first:
# the same suite built with clang + ASan/UBSan/LSan instead (scripts/test-sanitize.sh).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
if [ "${1:-}" = --sanitize ]; then shift; exec bash "$root/scripts/test-sanitize.sh" "$@"; fi
bash "$root/scripts/install-deps.sh"
# The Python test clients first (scripts/python_env.sh): CTest's Optuna tests run with that
# python (QNUM_PYTHON), then the package's pytest suite uses the same venv.
if [ "${QNUM_SKIP_PYTHON:-0}" != 1 ]; then
  set +e
  QNUM_PYTHON=$(bash "$root/scripts/python_env.sh")
  rc=$?
  set -e
  if [ "$rc" -eq 0 ]; then export QNUM_PYTHON; elif [ "$rc" -ne 3 ]; then exit "$rc"; fi
fi
# Only what CTest runs (qnum-test-programs: the test programs, qnum, the labs), not the
# benchmarks a plain scripts/build.sh also builds.
QNUM_TARGETS=qnum-test-programs bash "$root/scripts/build.sh" -DQNUM_BUILD_TESTS=ON -DQNUM_BUILD_APPS=ON
cd "${QNUM_BUILD_DIR:-$root/build}"
ctest --output-on-failure --timeout 900 "$@"
# The Python package (python/): built in a venv and tested with pytest (docs/python.md).
if [ "${QNUM_SKIP_PYTHON:-0}" != 1 ]; then bash "$root/scripts/test_python.sh"; fi
