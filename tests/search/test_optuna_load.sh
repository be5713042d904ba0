#!/usr/bin/env bash
# Runs check_optuna_load.py; exit 77 (skipped) when python3 or optuna is absent.
command -v python3 >/dev/null 2>&1 || { echo "python3 not found: skipped"; exit 77; }
python3 -c "import optuna" >/dev/null 2>&1 || { echo "optuna not installed: skipped"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 "$(dirname "$0")/check_optuna_load.py" "${QNUM:?set QNUM}" "$work"
