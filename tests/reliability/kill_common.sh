# Sourced by the kill tests, with their arguments: $QNUM checked, KILLS ($1, default 6), $RANDOM
# seeded with SEED ($2, default 29), a scratch directory as the working directory (removed,
# and any child still running killed, on exit), and bad() counting failures in $failed.
QNUM=${QNUM:?set QNUM to the qnum binary}
kills=${1:-6}
RANDOM=${2:-29}
work=$(mktemp -d)
trap 'kill -9 $(jobs -p) 2>/dev/null; rm -rf "$work"' EXIT
cd "$work" || exit 1
failed=0
bad() { failed=$((failed + 1)); echo "FAIL: $*"; }
