#!/usr/bin/env bash
# `qnum train --tensorboard DIR --log-every-n-steps N` read by TensorBoard's own reader
# (check_tensorboard.py, the tensorboard package of the test venv): a JSC run killed and
# resumed, and the issue's BERT line (train with --tensorboard, then export the best
# checkpoint for transformers). Every scalar equals metrics.jsonl's, each step once; bad input
# refused with one line. Exit 77 (skipped) without tensorboard — a failure under CI=true.
set -u
source "$(dirname "$0")/../client_test_lib.sh" "tensorboard"

# JSC: 3 epochs of jsc-synthetic at batch 1000, a row every step.
jsc=(jsc-tiny jsc-synthetic --batch-size 1000 --threads 1 --no-progress --log-every-n-steps 1)
"$QNUM" train "${jsc[@]}" --max-epochs 3 --output-dir jsc --tensorboard jsc/tb > jsc.out 2>&1 ||
  { echo "FAIL: training: $(tail -n 1 jsc.out)"; exit 1; }
grep -q '^tensorboard jsc/tb$' jsc.out && ok || bad "train does not print the TensorBoard folder"
per_epoch=$(( $(grep -c '^{"step"' jsc/metrics.jsonl) / 3 ))  # a row every step
[ "$per_epoch" -ge 2 ] && ok || bad "metrics.jsonl has $per_epoch step rows per epoch"
check "jsc: TensorBoard reads metrics.jsonl's scalars" "$py" "$here/check_tensorboard.py" jsc/tb jsc/metrics.jsonl "$per_epoch"

# The same run stopped after epoch 1 (--max-epochs 1), resumed to 3 (the schedule is constant,
# so the stop changes nothing): the same log, each step once.
"$QNUM" train "${jsc[@]}" --schedule constant --max-epochs 3 --output-dir ref --tensorboard ref/tb > ref.out 2>&1 ||
  bad "reference run: $(tail -n 1 ref.out)"
"$QNUM" train "${jsc[@]}" --schedule constant --max-epochs 1 --output-dir res --tensorboard res/tb > res.out 2>&1 ||
  bad "first part: $(tail -n 1 res.out)"
"$QNUM" train jsc-tiny jsc-synthetic --output-dir res --resume --max-epochs 3 --no-progress > res2.out 2>&1 ||
  bad "resume: $(tail -n 1 res2.out)"
check "resume: TensorBoard reads the resumed log" "$py" "$here/check_tensorboard.py" res/tb res/metrics.jsonl "$per_epoch"
strip() { "$py" -c "import json,sys; [print(json.dumps({k: v for k, v in json.loads(l).items() if k != 'seconds'})) for l in open(sys.argv[1])]" "$1"; }
check "resume: the same metrics.jsonl as a run never stopped" diff <(strip ref/metrics.jsonl) <(strip res/metrics.jsonl)

# BERT: the issue's line, on a small BERT and a few rows of text-synthetic.
bert=(--limit 48 --max-length 24 --batch-size 8 --threads 1 --no-progress --log-every-n-steps 1)
if "$QNUM" train bert:2-32-2-64 text-synthetic --max-epochs 1 --tensorboard tb --output-dir r "${bert[@]}" > bert.out 2>&1; then
  check "bert: TensorBoard reads the scalars" "$py" "$here/check_tensorboard.py" tb r/metrics.jsonl \
    "$(grep -c '^{"step"' r/metrics.jsonl)"
  if "$py" -c "import transformers" >/dev/null 2>&1; then
    "$QNUM" export bert:2-32-2-64 --load r/best --to hf --output-dir hf > export.out 2>&1 || bad "export: $(tail -n 1 export.out)"
    check "bert: transformers loads the export" "$py" -c \
      "from transformers import AutoModelForSequenceClassification as M; M.from_pretrained('hf')"
  elif [ "${CI:-}" = true ]; then bad "transformers missing under CI=true"; fi
else
  bad "bert training: $(tail -n 1 bert.out)"
fi

# qnum search --tensorboard: a scalar per trial (step = trial number), the whole study after
# a resume, each trial once, equal to the values the study's SQLite file holds.
"$QNUM" search --objective branin --trials 5 --storage sqlite:///s.db --tensorboard st > s1.out 2>&1 || bad "search: $(tail -n 1 s1.out)"
"$QNUM" search --objective branin --trials 3 --storage sqlite:///s.db --resume --tensorboard st > s2.out 2>&1 || bad "search --resume: $(tail -n 1 s2.out)"
check "search: TensorBoard reads a scalar per trial" "$py" - <<'PY'
import sqlite3
import numpy as np
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
acc = EventAccumulator("st", size_guidance={"scalars": 0})
acc.Reload()
assert acc.Tags()["scalars"] == ["trial/value"], acc.Tags()["scalars"]
got = {e.step: e.value for e in acc.Scalars("trial/value")}
assert len(got) == len(acc.Scalars("trial/value")), "a trial logged twice"
db = sqlite3.connect("s.db")
want = dict(db.execute("select t.number, v.value from trials t join trial_values v on t.trial_id = v.trial_id "
                       "where t.state = 'COMPLETE'"))
assert sorted(got) == list(range(8)) == sorted(want), (sorted(got), sorted(want))
for n, v in want.items():
    assert got[n] == np.float32(v), (n, got[n], v)
PY

# A MASE search config on the JSC run's checkpoint: its objective per trial.
"$QNUM" search --config "$here/../fixtures/mase_configs/jsc_toy_by_type.toml" --dataset jsc-synthetic --load jsc/best \
  --output-dir cs --trials 2 --tensorboard cs/tb > cs.out 2>&1 || bad "config search: $(tail -n 1 cs.out)"
check "config search: a scalar per trial" "$py" - <<'PY'
import csv
import numpy as np
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
acc = EventAccumulator("cs/tb", size_guidance={"scalars": 0})
acc.Reload()
tags = ["trial/accuracy", "trial/average_bitwidth"]  # the config's metrics, in order
assert sorted(acc.Tags()["scalars"]) == tags, acc.Tags()["scalars"]
rows = list(csv.DictReader(open("cs/trials.csv")))
for i, tag in enumerate(tags):
    got = {e.step: e.value for e in acc.Scalars(tag)}
    want = {int(r["number"]): float(r[f"values_{i}"]) for r in rows}
    assert sorted(got) == sorted(want) == [0, 1], (tag, got, want)
    for n, v in want.items():
        assert got[n] == np.float32(v), (tag, n, got[n], v)
PY

# Bad input.
touch afile
expect_error "a TensorBoard folder that is a file" "is a file" "$QNUM" train "${jsc[@]}" --max-epochs 1 --output-dir x --tensorboard afile
expect_error "search: a TensorBoard folder that is a file" "is a file" "$QNUM" search --objective branin --trials 1 --tensorboard afile
expect_error "a negative interval" "log_every_n_steps must be >= 0" "$QNUM" train jsc-tiny jsc-synthetic --max-epochs 1 --output-dir x --log-every-n-steps -1

echo "train.tensorboard: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
