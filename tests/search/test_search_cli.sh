#!/usr/bin/env bash
# qnum search / qnum study show through the binary: concurrent worker processes on one
# SQLite study (distinct trial numbers; each grid point once), a SIGKILLed worker's trial
# failed on --resume with completed trials intact, and bad input (exit 2, one line, nothing
# changed). Needs $QNUM (the qnum binary).
set -u
QNUM=${QNUM:?set QNUM to the qnum binary}
work=$(mktemp -d)
trap 'kill -9 $(jobs -p) 2>/dev/null; rm -rf "$work"' EXIT
cd "$work"
fails=0
check() { # check NAME CONDITION-COMMAND...
  local name=$1; shift
  if "$@"; then echo "ok   $name"; else echo "FAIL $name"; fails=$((fails + 1)); fi
}
csv_col() { # csv_col FILE COLUMN-NAME: the column's cells (no header)
  awk -F, -v want="$2" 'NR == 1 { for (i = 1; i <= NF; ++i) if ($i == want) c = i; next } { print $c }' "$1"
}
expect_error() { # expect_error NAME PATTERN ARGS...: exit 2 and a one-line error matching PATTERN
  local name=$1 pattern=$2; shift 2
  "$QNUM" "$@" >out.txt 2>err.txt
  local rc=$?
  check "$name: exit 2" test "$rc" -eq 2
  check "$name: message" grep -q -- "$pattern" err.txt
  check "$name: one line" test "$(wc -l <err.txt)" -eq 1
}

# --- two workers at once on one random study: 2 x 30 trials, numbers 0..59 once each
"$QNUM" search --objective branin --sampler random --trials 30 --seed 1 --storage sqlite:///w.db --study-name par --resume >w1.txt 2>&1 &
p1=$!
"$QNUM" search --objective branin --sampler random --trials 30 --seed 2 --storage sqlite:///w.db --study-name par --resume >w2.txt 2>&1 &
p2=$!
wait $p1; r1=$?
wait $p2; r2=$?
check "parallel workers exit 0" test "$r1$r2" = "00"
"$QNUM" study show --storage sqlite:///w.db --study-name par --csv par.csv >/dev/null
check "parallel: 60 trials" test "$(csv_col par.csv number | wc -l)" -eq 60
check "parallel: 60 distinct numbers" test "$(csv_col par.csv number | sort -un | wc -l)" -eq 60
check "parallel: numbers 0..59" test "$(csv_col par.csv number | sort -n | tail -1)" -eq 59
check "parallel: all COMPLETE" test "$(csv_col par.csv state | grep -c COMPLETE)" -eq 60

# --- two grid workers at once: the 256-point mixed-precision grid runs each point once
"$QNUM" search --objective mixed-precision --sampler grid --trials 200 --storage sqlite:///g.db --resume >g1.txt 2>&1 &
p1=$!
"$QNUM" search --objective mixed-precision --sampler grid --trials 200 --storage sqlite:///g.db --resume >g2.txt 2>&1 &
p2=$!
wait $p1; r1=$?
wait $p2; r2=$?
check "grid workers exit 0" test "$r1$r2" = "00"
"$QNUM" study show --storage sqlite:///g.db --study-name mixed-precision-grid --csv g.csv --plot g.svg >show.txt
points=$(grep COMPLETE g.csv | awk -F, '{ print $6 "," $7 "," $8 "," $9 }' | sort -u | wc -l)
total=$(csv_col g.csv number | wc -l)
check "grid: 256 COMPLETE trials" test "$(csv_col g.csv state | grep -c COMPLETE)" -eq 256
check "grid: 256 distinct points" test "$points" -eq 256
# A worker that asks in the instant the last free point is taken records one FAIL trial
# ("no free grid point") instead of running a point twice.
check "grid: any other trial is a no-free-point FAIL" test "$(grep -c 'no free grid point' g.csv)" -eq $((total - 256))
check "grid: best is the known optimum" grep -q "best trial [0-9]*: value 9.664267578, layer0_width=16, layer1_width=8, layer2_width=8, layer3_width=4" show.txt
check "grid: plot written" grep -q "</svg>" g.svg
"$QNUM" search --objective mixed-precision --sampler grid --trials 5 --storage sqlite:///g.db --resume >again.txt
check "grid: exhausted grid runs nothing" grep -q "exhausted" again.txt

# --- a worker killed inside a trial: its trial becomes FAIL on --resume, completed ones stay
"$QNUM" search --objective branin --sampler random --trials 1000 --trial-delay 0.2 --heartbeat-interval 0.1 \
  --storage sqlite:///k.db --study-name killed >k.txt 2>&1 &
pk=$!
for _ in $(seq 1 600); do # up to 60 s for 3 completed trials (no timing asserted)
  "$QNUM" study show --storage sqlite:///k.db --study-name killed --csv k.csv >/dev/null 2>&1 &&
    [ "$(csv_col k.csv state | grep -c COMPLETE)" -ge 3 ] && break
  sleep 0.1
done
kill -9 $pk
wait $pk 2>/dev/null
"$QNUM" study show --storage sqlite:///k.db --study-name killed --csv before.csv >/dev/null
completed_before=$(csv_col before.csv state | grep -c COMPLETE)
check "killed: one RUNNING trial left" test "$(csv_col before.csv state | grep -c RUNNING)" -eq 1
sleep 0.5 # the dead worker's last heartbeat ages past the grace period
"$QNUM" search --objective branin --sampler random --trials 2 --seed 5 --heartbeat-interval 0.1 --grace-period 0.3 \
  --storage sqlite:///k.db --study-name killed --resume --json >resume.json
check "resume: one stale trial failed" grep -q '"failed_stale":\[[0-9]*\]' resume.json
"$QNUM" study show --storage sqlite:///k.db --study-name killed --csv after.csv >/dev/null
check "resume: no RUNNING trial" test "$(csv_col after.csv state | grep -c RUNNING)" -eq 0
check "resume: the killed trial is FAIL" test "$(csv_col after.csv state | grep -c FAIL)" -eq 1
check "resume: completed trials kept, 2 more" test "$(csv_col after.csv state | grep -c COMPLETE)" -eq $((completed_before + 2))
check "resume: completed rows unchanged" bash -c "diff <(grep COMPLETE before.csv | cut -d, -f1-7) <(grep COMPLETE after.csv | head -n $completed_before | cut -d, -f1-7)"

# --- bad input: exit 2, one line, nothing changed
cp w.db w_copy.db
expect_error "unknown sampler" "unknown sampler 'annealing' (allowed: random, grid" search --objective branin --sampler annealing --trials 1
expect_error "unknown objective" "unknown objective 'ackley' (allowed: branin, rastrigin, mixed-precision)" search --objective ackley --trials 1
expect_error "unopenable storage" "cannot open sqlite:////nonexistent-dir/x.db" search --objective branin --trials 1 --storage sqlite:////nonexistent-dir/x.db
expect_error "postgresql: no server" "cannot open postgresql://qnum:\*\*\*@127.0.0.1:1/db" search --objective branin --trials 1 --storage postgresql://qnum:pw@127.0.0.1:1/db
expect_error "existing study without --resume" "study 'par' already exists in sqlite:///w.db; pass --resume" search --objective branin --trials 1 --storage sqlite:///w.db --study-name par
check "existing study unchanged" cmp -s w.db w_copy.db
expect_error "show: missing file" "no such database file" study show --storage sqlite:///missing.db --study-name x
check "show: missing file not created" test ! -e missing.db
expect_error "show: missing study" "study 'nope' not found in sqlite:///w.db (studies: par)" study show --storage sqlite:///w.db --study-name nope
echo "not a database" >notes.db
expect_error "not a database" "sqlite:///notes.db" study show --storage sqlite:///notes.db --study-name x
check "not a database: unchanged" test "$(cat notes.db)" = "not a database"

if [ $fails -ne 0 ]; then
  echo "$fails check(s) failed"
  exit 1
fi
echo "all search CLI checks passed"
