#!/usr/bin/env bash
# The Python environment of the tests: a venv (QNUM_PYTHON_VENV, default build/python-venv)
# with the package's build tools and the test clients from PyPI — torch, torchvision,
# transformers (the torch suite), optuna and psycopg2-binary (Optuna reading qnum's studies:
# search.optuna_load, search.postgres), matplotlib (the Python labs). About 6 GB and a few
# minutes the first time; later calls only check. QNUM_PYTHON_TORCH=0 leaves the clients out
# (refused in CI, where every claim's test must run). Prints the venv's python as its last line.
# Exit 3 where no Python >= 3.9 with venv support is found (callers skip their Python steps).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
py=${PYTHON:-python3}
if ! command -v "$py" >/dev/null 2>&1 || ! "$py" -c 'import sys; sys.exit(sys.version_info < (3, 9))' 2>/dev/null; then
  echo "python env: no Python >= 3.9 found as '$py'" >&2
  exit 3
fi
venv=${QNUM_PYTHON_VENV:-$root/build/python-venv}
if [ ! -x "$venv/bin/python" ]; then
  mkdir -p "$(dirname "$venv")"
  "$py" -m venv "$venv" >&2 || { echo "python env: '$py -m venv' failed: install python3-venv" >&2; exit 3; }
fi
vpy="$venv/bin/python"
start=$(date +%s)
pkgs=("scikit-build-core>=0.10" "nanobind>=2.0" numpy pytest tensorboard)
if [ "${QNUM_PYTHON_TORCH:-1}" = 1 ]; then
  pkgs+=(torch torchvision transformers optuna psycopg2-binary matplotlib)
elif [ "${CI:-}" = true ]; then
  echo "python env: QNUM_PYTHON_TORCH=0 in CI would skip the torch and Optuna tests: refusing" >&2
  exit 1
fi
"$vpy" -m pip install -q --disable-pip-version-check "${pkgs[@]}" >&2
echo "python env: $venv ready (${pkgs[*]}) in $(($(date +%s) - start)) s" >&2
echo "$vpy"
