#!/usr/bin/env bash
# MASE's own example configs (tests/fixtures/mase_configs/, copied unchanged) driving `qnum
# train`, `qnum transform` and `qnum search` with what MASE's files leave out given on the
# command line (--dataset jsc-synthetic, --load, --output-dir), MASE's top-level keys each
# noted in one line; every search file runs a few trials and its best.json (Pareto front,
# MASE's metric columns) is checked against trials.csv; `ch` spellings on the command line
# (noted, or an error naming qnum's spelling); `qnum download` offline. Several seconds.
# Usage: QNUM=path/to/qnum MASE_CONFIGS=tests/fixtures/mase_configs bash test_mase_files.sh
set -u
QNUM=${QNUM:?set QNUM to the qnum binary}
DIR=${MASE_CONFIGS:?set MASE_CONFIGS to tests/fixtures/mase_configs}
CFG=$DIR/jsc_toy_by_type.toml
source "$(dirname "$0")/../labs/lib.sh"
cd "$tmp" || exit 1

# has NAME TEXT FILE: FILE contains TEXT (fixed string).
has() { grep -qF -- "$2" "$3" || fail "$1: $3 lacks '$2': $(head -c 600 "$3")"; }

# error_after_notes NAME PATTERN CMD...: exit 2, the MASE file's notes, then one error line
# matching PATTERN, last.
error_after_notes() {
  local name=$1 pattern=$2
  shift 2
  run "$name" 2 "$@"
  tail -n 1 "$tmp/$name.err" | grep -Eq -- "^qnum: error: .*$pattern" || fail "$name: last line of stderr: $(tail -n 1 "$tmp/$name.err")"
  [ "$(grep -vc '^note: ' "$tmp/$name.err")" -eq 1 ] || fail "$name: more than one line besides the notes"
}

# check_front NAME OUT_DIR TRIALS PARAM_PREFIXES: best.json of a two-metric search (accuracy
# maximized, average_bitwidth at scale 0.2 minimized, compare_to 32) holds exactly the
# non-dominated complete trials of trials.csv, each with MASE's metric columns consistent,
# and params only for the layers/ops named.
check_front() {
  python3 - "$2" "$3" "$4" 2>"$tmp/front.err" <<'PY' || fail "$1: best.json: $(tail -1 "$tmp/front.err")"
import csv, json, sys
out, trials, prefixes = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(",")
best = json.load(open(out + "/best.json"))
rows = [r for r in csv.DictReader(open(out + "/trials.csv")) if r["state"] == "COMPLETE"]
assert len(rows) == trials, ("complete trials", len(rows))
pts = {int(r["number"]): (float(r["values_0"]), float(r["values_1"])) for r in rows}
dom = lambda a, b: a[0] >= b[0] and a[1] <= b[1] and a != b
want = {n for n, v in pts.items() if not any(dom(w, v) for w in pts.values())}
front = best["best_trials"]
assert {t["number"] for t in front} == want, ({t["number"] for t in front}, want, pts)
for t in front:
    sw, hw, sc = t["software_metrics"], t["hardware_metrics"], t["scaled_metrics"]
    assert t["values"] == [sc["accuracy"], sc["average_bitwidth"]], t
    assert abs(sc["average_bitwidth"] - 0.2 * hw["average_bitwidth"]) < 1e-9, t
    assert abs(hw["memory_density"] - 32 / hw["average_bitwidth"]) < 1e-9, t
    assert sc["accuracy"] == sw["accuracy"] and 0 <= sw["accuracy"] <= 1 and hw["average_bitwidth"] < 32, t
    assert t["params"] and all(k.split("/")[0] in prefixes for k in t["params"]), t["params"]
    assert t["quantize"]["by"] == "name", t["quantize"]
PY
}

run base 0 "$QNUM" train jsc-tiny jsc-synthetic --max-epochs 1 --output-dir run --no-progress

# MASE's lab-2 file, unchanged, with the data and checkpoint given as flags.
run transform 0 "$QNUM" transform --config "$CFG" --dataset jsc-synthetic --load run/best --output-dir t
has transform 'accelerator = "gpu": ignored by qnum transform: used by qnum train' transform.err
has transform 'search: ignored by qnum transform: used by qnum search' transform.err
has transform "layer(s) changed" transform.out
ls t/*.csv > /dev/null 2>&1 || fail "transform wrote no CSV"

# The same file drives a search (3 trials here; its model is qnum's jsc-tiny): by = "name",
# so only seq_blocks_2 (qnum's layer "2") is searched, the others' default being "NA".
run search 0 "$QNUM" search --config "$CFG" --dataset jsc-synthetic --load run/best --output-dir s --trials 3
has search 'log_every_n_steps = 5: ignored by qnum search' search.err
has search 'seed.linear is an op: it applies when setup.by = "type"' search.err
has search 'Best trials (Pareto front):' search.out
check_front search s 3 2

# A checkpoint trained in bf16 is searched in bf16 (its trials scored and fine-tuned so).
run base16 0 "$QNUM" train jsc-tiny jsc-synthetic --max-epochs 1 --precision bf16 --output-dir run16 --no-progress
run search16 0 "$QNUM" search --config "$CFG" --dataset jsc-synthetic --load run16/best --output-dir s16 --trials 2
has search16 'trials run in precision bf16' search16.err

# MASE's toy model and its search file (by name, every layer and ReLU from the default
# seed; 20 trials in the file, 4 here) and transform file (by type, frac width 9 > width 8).
run toy_train 0 "$QNUM" train toy jsc-synthetic --max-epochs 1 --output-dir toyrun --no-progress
run toy_search 0 "$QNUM" search --config "$DIR/search_toy_tpe.toml" --dataset jsc-synthetic --load toyrun/best \
  --output-dir ts --trials 4
has toy_search 'over 5 layer(s) of toy' toy_search.out
check_front toy_search ts 4 0,1,2,3,4
run toy_transform 0 "$QNUM" transform --config "$DIR/toy_uniform.toml" --dataset jsc-synthetic --load toyrun/best \
  --output-dir tt
has toy_transform "5 layer(s) changed" toy_transform.out

# setup.by = "type" (the same file with the one line changed): one config per op, applied to
# every linear layer (MASE's own run of this evaluates the unquantized model).
sed 's/^by = "name"$/by = "type"/' "$CFG" > by_type.toml
run by_type 0 "$QNUM" search --config by_type.toml --dataset jsc-synthetic --load run/best --output-dir bt --trials 3
check_front by_type bt 3 linear

# And trains (flags over the file: 1 epoch, not its 5; MODEL DATASET given).
run train 0 "$QNUM" train jsc-tiny jsc-synthetic --config "$CFG" --max-epochs 1 --output-dir r3 --no-progress
# accelerator = "gpu": cuda where there is a device, else the CPU with one line saying so.
command -v nvidia-smi >/dev/null 2>&1 ||
  has train 'accelerator gpu: no CUDA device in this build or on this machine: training on the CPU' train.err
has train 'passes: ignored by qnum train: used by qnum transform' train.err
[ "$(grep -c '^{"epoch"' r3/metrics.jsonl)" -eq 1 ] || fail "train ran $(grep -c '^{"epoch"' r3/metrics.jsonl) epochs, want 1"
# MASE's log_every_n_steps = 5: a step row every 5 optimizer steps, before the epoch's row.
grep -q '^{"step":5,"epoch":1,"loss":' r3/metrics.jsonl || fail "log_every_n_steps = 5: no row for step 5"
! grep '^{"step"' r3/metrics.jsonl | grep -qv '^{"step":[0-9]*[05],' || fail "log_every_n_steps = 5: a row off the interval"
grep -q '^{"epoch"' <(tail -n 1 r3/metrics.jsonl) || fail "the epoch row is not last"

# eval_mode = false with MASE's basic_train: each trial's quantized model trains 512 rows first.
sed 's/^eval_mode = true$/eval_mode = false/' "$CFG" > train_runner.toml
printf '%s\n' '[search.strategy.sw_runner.basic_train]' 'num_samples = 512' 'max_epochs = 1' 'optimizer = "adam"' \
  'learning_rate = 1e-3' >> train_runner.toml
run basic_train 0 "$QNUM" search --config train_runner.toml --dataset jsc-synthetic --load run/best --output-dir bt2 \
  --trials 2
[ "$(wc -l < bt2/trials/1/metrics.jsonl 2>/dev/null)" = 1 ] || fail "basic_train: trial 1 trained no epoch"
check_front basic_train bt2 2 2
sed 's/^eval_mode = true$/eval_mode = false/' "$CFG" > no_runner.toml
error_after_notes no_runner "eval_mode = false trains each trial: add \[sw_runner.basic_train\]" \
  "$QNUM" search --config no_runner.toml --dataset jsc-synthetic --load run/best --output-dir x
# n_jobs > 1 (a MASE file for a bigger machine): the trials run one at a time, said in a note.
sed 's/^n_jobs = 1$/n_jobs = 4/' "$CFG" > n_jobs.toml
grep -q '^n_jobs = 4$' n_jobs.toml || fail "n_jobs: the test's edit of the MASE file did not apply"
run n_jobs 0 "$QNUM" search --config n_jobs.toml --dataset jsc-synthetic --load run/best --output-dir nj --trials 2
has n_jobs "n_jobs 4: trials run one at a time here" n_jobs.err
sed 's/^sampler = "tpe"$/sampler = "qmc"/' "$CFG" > qmc.toml
error_after_notes sampler "unknown sampler 'qmc' \(allowed: tpe, random, grid, nsgaii\)" \
  "$QNUM" search --config qmc.toml --dataset jsc-synthetic --load run/best --output-dir x

# MASE's project: no --output-dir, so the run goes where MASE's would
# (mase_output/<project>/software/training_ckpts, then .../search_ckpts).
run project_train 0 "$QNUM" train jsc-tiny jsc-synthetic --config "$CFG" --max-epochs 1 --no-progress
[ -f mase_output/jsc-tiny/software/training_ckpts/best.safetensors ] || fail "project: no training_ckpts/best"
run project_search 0 "$QNUM" search --config "$CFG" --dataset jsc-synthetic --load run/best --trials 1
[ -f mase_output/jsc-tiny/software/search_ckpts/best.json ] || fail "project: no search_ckpts/best.json"

# max_steps (Lightning's), t_max and eta_min (the cosine schedule) from a MASE-style file.
printf '%s\n' 'model = "jsc-tiny"' 'dataset = "jsc-synthetic"' 'max_epochs = 3' 'max_steps = 5' 't_max = 2' \
  'eta_min = 1e-4' > steps.toml
run steps 0 "$QNUM" train --config steps.toml --output-dir st --no-progress
has steps "(t_max 2, eta_min 0.0001), max_steps 5" steps.out
[ "$(wc -l < st/metrics.jsonl)" -eq 1 ] || fail "max_steps 5: $(wc -l < st/metrics.jsonl) epochs recorded, want 1"

# ch spellings: explained in one line, or an error naming qnum's spelling.
run ch_flags 0 "$QNUM" train jsc-tiny jsc-synthetic --max-epochs 1 --output-dir r2 --no-progress \
  --accelerator gpu --cpu=0 --load-type pl --task cls
command -v nvidia-smi >/dev/null 2>&1 ||
  has ch_flags "note: --accelerator gpu: no CUDA device in this build or on this machine: training on the CPU" ch_flags.err
expect_one_line_error accelerator "accelerator 'tpu' is not one qnum trains on" \
  "$QNUM" train jsc-tiny jsc-synthetic --max-epochs 1 --output-dir r4 --no-progress --accelerator tpu
has ch_flags "note: --cpu 0: ignored by qnum train" ch_flags.err
has ch_flags "note: --load-type pl: ignored by qnum train" ch_flags.err
expect_one_line_error project_dir "--project-dir x: qnum transform spells this --output-dir" \
  "$QNUM" transform --config "$CFG" --project-dir x
expect_one_line_error task "does classification only" "$QNUM" train jsc-tiny jsc-synthetic --task lm

# Downloads offline: one line saying what to fetch and where to put it.
expect_one_line_error download_offline "into $tmp/cache/hf/prajjwal1/bert-tiny" \
  env HF_ENDPOINT=http://127.0.0.1:9 QNUM_CACHE_DIR="$tmp/cache" "$QNUM" download bert-tiny
expect_one_line_error download_unknown "download: unknown name 'nope'" "$QNUM" download nope

finish mase_files
