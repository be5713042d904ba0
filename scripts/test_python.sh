#!/usr/bin/env bash
# The Python package's tests (python/tests, pytest): builds qnum for Python into a venv and runs
# the suite. Called by scripts/test.sh. Skips (exit 0) without Python >= 3.9 with venv support.
# The venv gets the test clients from PyPI: torch, transformers, torchvision, optuna and
# matplotlib (the torch suite, the Python labs; ~6 GB, a few minutes the first time, then
# pip's cache). QNUM_PYTHON_TORCH=0 leaves them out (NumPy tests only; refused in CI, where
# every claim's test must run). QNUM_PYTHON_VENV picks the venv folder.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
py=${PYTHON:-python3}
if ! command -v "$py" >/dev/null 2>&1 || ! "$py" -c 'import sys; sys.exit(sys.version_info < (3, 9))' 2>/dev/null; then
  echo "python tests: skipped (no Python >= 3.9 found as '$py')"
  exit 0
fi
venv=${QNUM_PYTHON_VENV:-$root/build/python-venv}
if [ ! -x "$venv/bin/python" ]; then
  if ! "$py" -m venv "$venv"; then
    echo "python tests: skipped ('$py -m venv' failed: install python3-venv)"
    exit 0
  fi
fi
vpy="$venv/bin/python"
"$vpy" -m pip install -q --disable-pip-version-check "scikit-build-core>=0.10" "nanobind>=2.0" numpy pytest
if [ "${QNUM_PYTHON_TORCH:-1}" = 1 ]; then
  start=$(date +%s)
  # Before the package build: with torch importable, qnum's C++ torch operator is built too.
  "$vpy" -m pip install -q --disable-pip-version-check torch torchvision transformers optuna matplotlib
  echo "python tests: torch, torchvision, transformers, optuna, matplotlib installed in $(($(date +%s) - start)) s"
elif [ "${CI:-}" = true ]; then
  echo "python tests: QNUM_PYTHON_TORCH=0 in CI would skip the torch suite: refusing"
  exit 1
fi
# ccache (scripts/build.sh's launcher, used by python/CMakeLists.txt too) keyed on paths
# relative to the checkout, so another clone on the same machine hits the same cache.
export CCACHE_BASEDIR="$root"
start=$(date +%s)
# The build tools are in the venv already: no isolated build env to download each run.
CMAKE_BUILD_PARALLEL_LEVEL=${QNUM_JOBS:-$(nproc)} \
  "$vpy" -m pip install -q --disable-pip-version-check --no-build-isolation "$root/python"
echo "python tests: package built and installed in $(($(date +%s) - start)) s"
cd "$root/python/tests"  # not python/: its qnum/ source folder would shadow the installed package
set +e
"$vpy" -m pytest -q .
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
  echo "python tests: pytest collected no tests in $root/python/tests: failing, a suite that runs nothing proves nothing"
  exit 1
fi
exit "$rc"
