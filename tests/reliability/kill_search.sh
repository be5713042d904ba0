#!/usr/bin/env bash
# Crash safety of `qnum search` on a study in SQLite (or PostgreSQL: STORAGE=postgresql://...):
# a grid search worker SIGKILLed at random points and restarted with --resume, KILLS times,
# then run until the grid is exhausted. Checked after every kill and at the end: no completed
# trial lost or changed, trial numbers never duplicated, no grid point run twice, every killed
# trial failed by the next --resume (also one killed before its heartbeat thread started: a
# worker's trials are created with their first heartbeat), and in the end every grid point
# visited (a killed trial stays FAIL).
# Usage: QNUM=path/to/qnum bash kill_search.sh [KILLS] [SEED]
set -u
source "$(dirname "$0")/kill_common.sh"
storage=${STORAGE:-sqlite:///$work/k.db}
study=kill-grid-$$
csv_col() { # csv_col FILE COLUMN-NAME: the column's cells (no header)
  awk -F, -v want="$2" 'NR == 1 { for (i = 1; i <= NF; ++i) if ($i == want) c = i; next } { print $c }' "$1"
}
show() { "$QNUM" study show --storage "$storage" --study-name "$study" --csv "$1" > /dev/null 2>&1; }
# The COMPLETE rows (number, value, times, params), sorted for comm.
completed() { grep ',COMPLETE$' "$1" | cut -d, -f1-9 | sort; }
search=("$QNUM" search --objective mixed-precision --sampler grid --storage "$storage" --study-name "$study"
        --heartbeat-interval 0.05 --grace-period 0.2 --resume --seed 1)

# A study of a few trials first, so that every later run resumes one.
"${search[@]}" --trials 3 > first.log 2>&1 || { bad "first run failed: $(tail -1 first.log)"; exit 1; }
show before.csv || { bad "study show failed"; exit 1; }
killed=0
for ((i = 0; i < kills; i++)); do
  "${search[@]}" --trials 60 --trial-delay 0.02 > "run$i.log" 2>&1 &
  pid=$!
  delay_ms=$((RANDOM % 1500))
  sleep "$(printf '%d.%03d' $((delay_ms / 1000)) $((delay_ms % 1000)))"
  kill -9 "$pid" 2>/dev/null && killed=$((killed + 1))
  wait "$pid" 2>/dev/null
  sleep 0.3 # past the grace period: the dead worker's trial is stale
  show after.csv || { bad "study show after kill $i failed"; break; }
  # Completed rows before the kill are all still there, unchanged.
  missing=$(comm -23 <(completed before.csv) <(completed after.csv) | wc -l)
  [ "$missing" -eq 0 ] || bad "kill $i: $missing completed trial(s) lost or changed"
  mv after.csv before.csv
done

# Run to the end of the grid (stale RUNNING trials of the last kill become FAIL).
"${search[@]}" --trials 1000 > last.log 2>&1 || bad "final run failed: $(tail -1 last.log)"
show final.csv || { bad "study show failed"; exit 1; }
missing=$(comm -23 <(completed before.csv) <(completed final.csv) | wc -l)
[ "$missing" -eq 0 ] || bad "final: $missing completed trial(s) lost or changed"
total=$(csv_col final.csv number | wc -l)
[ "$(csv_col final.csv number | sort -u | wc -l)" -eq "$total" ] || bad "duplicate trial numbers"
[ "$(csv_col final.csv number | sort -n | tail -1)" -eq $((total - 1)) ] || bad "trial numbers are not 0..$((total - 1))"
# Nothing left RUNNING: the last run failed every killed worker's trial, also one killed
# between creating its trial and starting its heartbeat thread (created with a heartbeat).
running=$(grep -c ',RUNNING$' final.csv)
[ "$running" -eq 0 ] || bad "$running trial(s) left RUNNING after $killed kills: $(grep ',RUNNING$' final.csv | tr '\n' ' ')"
# Every grid point visited exactly once: completed, or failed because its worker was killed
# (as in Optuna, a finished trial's point, FAIL included, is not handed out again).
[ "$(tail -n +2 final.csv | cut -d, -f6-9 | grep -v '^,,,$' | sort | uniq -d | wc -l)" -eq 0 ] || bad "a grid point ran twice"
# A worker killed after taking its grid point but before storing the parameters leaves a FAIL
# trial without them: it still used up one point.
unnamed=$(tail -n +2 final.csv | cut -d, -f6-9 | grep -c '^,,,$')
[ "$(grep -c ',,,,,[^,]*,FAIL$' final.csv)" -ge "$unnamed" ] || bad "a trial without parameters that is not FAIL"
named=$(tail -n +2 final.csv | cut -d, -f6-9 | grep -v '^,,,$' | sort -u | wc -l)
[ $((named + unnamed)) -ge 256 ] || bad "not every grid point was visited ($named run, $unnamed killed before their parameters)"
complete=$(csv_col final.csv state | grep -c COMPLETE)
fail=$(csv_col final.csv state | grep -c FAIL)
[ "$((complete + fail))" -eq "$total" ] || bad "trials neither COMPLETE nor FAIL"
[ "$(grep ',FAIL$' final.csv | grep -vc 'heartbeat stale')" -eq 0 ] || bad "a FAIL trial that no kill explains"
[ "$fail" -le "$killed" ] || bad "$fail FAIL trials from $killed kills"
[ "$killed" -ge 1 ] || bad "no worker was killed (each finished before its kill time): the test proved nothing"
echo "kill_search: $killed SIGKILLs; $total trials, $complete COMPLETE, $fail FAIL (killed mid-trial)"
[ "$failed" -eq 0 ]
