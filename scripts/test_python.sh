#!/usr/bin/env bash
# The Python package's tests (python/tests, pytest): builds qnum for Python into a venv and runs
# the suite. Called by scripts/test.sh. Skips (exit 0) without Python >= 3.9 with venv support.
# The venv and its test clients (torch, transformers, ...) come from scripts/python_env.sh;
# with torch there before the package build, qnum's C++ torch operator is built too.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
set +e
vpy=$(bash "$root/scripts/python_env.sh")  # its progress goes to stderr, the python to stdout
rc=$?
set -e
if [ "$rc" -eq 3 ]; then echo "python tests: skipped (no Python >= 3.9 with venv support)"; exit 0; fi
[ "$rc" -eq 0 ] || exit "$rc"
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
