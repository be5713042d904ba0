#!/usr/bin/env bash
# PostgreSQL study storage against a real server started here: initdb in a temp directory
# (tests/search/postgres_server.sh: as an unprivileged user when run as root, the server
# listening only on a unix socket in that directory), then the search suite's search.postgres* cases, two
# `qnum search` workers at once (random and grid), and Optuna loading the qnum study (when
# python3 has optuna and psycopg2). Stops the server and removes everything on exit.
# Exit 77 (skipped) when the PostgreSQL server binaries are not installed (Debian: postgresql).
# Needs $SEARCH_TESTS (qnum-search-tests) and $QNUM (the qnum binary).
set -u
SEARCH_TESTS=${SEARCH_TESTS:?set SEARCH_TESTS to qnum-search-tests}
QNUM=${QNUM:?set QNUM to the qnum binary}

source "$(dirname "$0")/postgres_server.sh" # $pg_url, $pg_work, ...; stopped on exit
work=$pg_work
port=$pg_port
url=$pg_url

fails=0
check() { # check NAME CONDITION-COMMAND...
  local name=$1; shift
  if "$@"; then echo "ok   $name"; else echo "FAIL $name"; fails=$((fails + 1)); fi
}
csv_col() { # csv_col FILE COLUMN-NAME: the column's cells (no header)
  awk -F, -v want="$2" 'NR == 1 { for (i = 1; i <= NF; ++i) if ($i == want) c = i; next } { print $c }' "$1"
}

# --- the C++ cases (round trip, processes, grid, SIGKILL + resume, shared finished trials)
QNUM_TEST_POSTGRES_URL="$url" "$SEARCH_TESTS" --test-case='search.postgres*' >"$work/suite.txt" 2>&1
rc=$?
tail -n 4 "$work/suite.txt"
[ $rc -eq 0 ] || cat "$work/suite.txt"
check "search.postgres* cases" test $rc -eq 0

cd "$work"
# --- two qnum workers at once on one random study: 2 x 30 trials, numbers 0..59 once each
"$QNUM" search --objective branin --sampler random --trials 30 --seed 1 --storage "$url" --study-name par --resume >w1.txt 2>&1 &
p1=$!
"$QNUM" search --objective branin --sampler random --trials 30 --seed 2 --storage "$url" --study-name par --resume >w2.txt 2>&1 &
p2=$!
wait $p1; r1=$?
wait $p2; r2=$?
[ "$r1$r2" = "00" ] || cat w1.txt w2.txt
check "cli workers exit 0" test "$r1$r2" = "00"
"$QNUM" study show --storage "$url" --study-name par --csv par.csv >/dev/null
check "cli: 60 trials" test "$(csv_col par.csv number | wc -l)" -eq 60
check "cli: 60 distinct numbers 0..59" test "$(csv_col par.csv number | sort -un | wc -l)$(csv_col par.csv number | sort -n | tail -1)" = "6059"
check "cli: all COMPLETE" test "$(csv_col par.csv state | grep -c COMPLETE)" -eq 60

# --- two grid workers at once: the 256-point mixed-precision grid runs each point once
"$QNUM" search --objective mixed-precision --sampler grid --trials 200 --storage "$url" --resume >g1.txt 2>&1 &
p1=$!
"$QNUM" search --objective mixed-precision --sampler grid --trials 200 --storage "$url" --resume >g2.txt 2>&1 &
p2=$!
wait $p1; r1=$?
wait $p2; r2=$?
check "grid workers exit 0" test "$r1$r2" = "00"
"$QNUM" study show --storage "$url" --study-name mixed-precision-grid --csv g.csv >/dev/null
points=$(grep COMPLETE g.csv | awk -F, '{ print $6 "," $7 "," $8 "," $9 }' | sort -u | wc -l)
check "grid: 256 COMPLETE trials" test "$(csv_col g.csv state | grep -c COMPLETE)" -eq 256
check "grid: 256 distinct points" test "$points" -eq 256

# --- Optuna reads the qnum study from PostgreSQL and adds a trial that qnum then reads
# (QNUM_PYTHON: scripts/test.sh's test venv, which has optuna and psycopg2-binary)
py=${QNUM_PYTHON:-python3}
if "$py" -c "import optuna, psycopg2" >/dev/null 2>&1; then
  "$py" - "postgresql+psycopg2://qnum@/studies?host=$work&port=$port" >optuna.txt 2>&1 <<'PY'
import sys, csv, optuna
optuna.logging.set_verbosity(optuna.logging.WARNING)
study = optuna.load_study(study_name="par", storage=sys.argv[1])
trials = study.get_trials()
assert len(trials) == 60, len(trials)
assert sorted(t.number for t in trials) == list(range(60))
assert all(t.state == optuna.trial.TrialState.COMPLETE for t in trials)
assert set(trials[0].params) == {"x0", "x1"}, trials[0].params
study.optimize(lambda t: (t.suggest_float("x0", -5, 10) - 3) ** 2 + t.suggest_float("x1", 0, 15), n_trials=1)
print("optuna read", len(trials), "trials; best", study.best_value)
PY
  orc=$?
  cat optuna.txt
  check "optuna: loads the qnum study" test $orc -eq 0
  "$QNUM" study show --storage "$url" --study-name par --csv par2.csv >/dev/null
  check "optuna: its trial 60 is read by qnum" test "$(csv_col par2.csv number | sort -n | tail -1)" -eq 60
  # and the other way: a database whose tables Optuna created, read and continued by qnum
  "${pg_as_user[@]}" "$pg_bindir/createdb" -h "$work" -p $port -U qnum fromoptuna
  "$py" - "postgresql+psycopg2://qnum@/fromoptuna?host=$work&port=$port" >optuna2.txt 2>&1 <<'PY'
import sys, optuna
optuna.logging.set_verbosity(optuna.logging.WARNING)
s = optuna.create_study(study_name="o", storage=sys.argv[1], sampler=optuna.samplers.RandomSampler(seed=0))
s.optimize(lambda t: (t.suggest_float("x0", -5, 10) - 3) ** 2 + t.suggest_float("x1", 0, 15), n_trials=3)
PY
  check "optuna: creates a study" test $? -eq 0
  ourl="postgresql://qnum@/fromoptuna?host=$work&port=$port"
  "$QNUM" search --objective branin --sampler random --trials 2 --storage "$ourl" --study-name o --resume >o.txt 2>&1
  check "qnum continues Optuna's study" test $? -eq 0
  "$QNUM" study show --storage "$ourl" --study-name o --csv o.csv >/dev/null
  check "qnum: Optuna's 3 trials and its own 2" test "$(csv_col o.csv state | grep -c COMPLETE)" -eq 5
elif [ "${CI:-}" = true ]; then
  check "optuna: $py has optuna and psycopg2 (CI runs every test)" false
else
  echo "skip optuna load ($py with optuna and psycopg2-binary not found)"
fi

if [ $fails -ne 0 ]; then
  echo "$fails check(s) failed"
  exit 1
fi
echo "all PostgreSQL checks passed"
