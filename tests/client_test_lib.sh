# Shared start of the shell tests that check qnum's files with a real client from the test
# venv (export.hf: transformers; train.tensorboard: tensorboard). Source it after `set -u`
# with the Python modules the test needs: `source tests/client_test_lib.sh "transformers, torch"`.
# It exits 77 (skipped) when QNUM_PYTHON or a module is missing — 1 under CI=true, where the
# test must run — then works in a temporary folder removed on exit and defines the counters
# and checks: ok, bad MESSAGE, check NAME CMD..., expect_error NAME PATTERN CMD... (exit 2 and
# one line on stderr containing PATTERN).
QNUM=${QNUM:?set QNUM to the qnum binary}
py=${QNUM_PYTHON:-python3}
skip=77
[ "${CI:-}" = true ] && skip=1
command -v "$py" >/dev/null 2>&1 || { echo "$py not found: skipped"; exit $skip; }
"$py" -c "import $1" >/dev/null 2>&1 || { echo "$1 not installed for $py: skipped"; exit $skip; }
here=$(cd "$(dirname "${BASH_SOURCE[1]}")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
passed=0
failed=0
ok() { passed=$((passed + 1)); }
bad() { failed=$((failed + 1)); echo "FAIL: $*"; }
check() { local name=$1; shift; if "$@"; then ok; else bad "$name"; fi; }
expect_error() {
  local name=$1 pattern=$2; shift 2
  "$@" > stdout 2> stderr
  local rc=$?
  if [ "$rc" -ne 2 ]; then bad "$name: exit code $rc, want 2 ($(cat stderr))"; return; fi
  if [ "$(wc -l < stderr)" -ne 1 ]; then bad "$name: $(wc -l < stderr) lines on stderr, want 1"; return; fi
  if ! grep -qF -- "$pattern" stderr; then bad "$name: stderr lacks '$pattern': $(cat stderr)"; return; fi
  ok
}
