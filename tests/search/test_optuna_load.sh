#!/usr/bin/env bash
# Runs check_optuna_load.py with QNUM_PYTHON (scripts/test.sh: the test venv; default python3);
# exit 77 (skipped) when it or optuna is absent — a failure under CI=true, where it must run.
py=${QNUM_PYTHON:-python3}
skip=77
[ "${CI:-}" = true ] && skip=1
command -v "$py" >/dev/null 2>&1 || { echo "$py not found: skipped"; exit $skip; }
"$py" -c "import optuna" >/dev/null 2>&1 || { echo "optuna not installed for $py: skipped"; exit $skip; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$py" "$(dirname "$0")/check_optuna_load.py" "${QNUM:?set QNUM}" "$work"
