#!/usr/bin/env bash
# The Lab 3 searches and `qnum search --config` end to end on jsc-synthetic with tiny settings
# (jsc-tiny or jsc-s, 1 epoch, a few trials, one thread): exit codes, CSV headers and rows,
# accuracies in [0, 1], best-so-far columns never decreasing, the plot, same-seed reruns
# giving the same CSV, the search outputs and stored study, and bad input exiting 2 with one
# line naming the problem. Mode bert: both programs on a one-layer BERT on text-synthetic
# (trained, and from a checkpoint trained here), best.safetensors loaded by `qnum test` and
# by the next lab3 step, and `qnum search --config` on the BERT checkpoint.
# Usage: test_lab3.sh labs|bert|config   (LAB3_MP, LAB3_FORMATS, QNUM: the binaries)
set -uo pipefail

mode=${1:?usage: test_lab3.sh labs|bert|config}
source "$(dirname "$0")/lib.sh"

tiny=(--model jsc-tiny --epochs 1 --threads 1 --no-progress)

case "$mode" in
  labs)
    : "${LAB3_MP:?set LAB3_MP}" "${LAB3_FORMATS:?set LAB3_FORMATS}"
    run mp 0 "$LAB3_MP" "${tiny[@]}" --trials 4 --samplers tpe,random --output-dir "$tmp/mp"
    check_best mp "$tmp/mp/results.csv" "trial,random,tpe" 4
    [ "$(head -n 1 "$tmp/mp/trials.csv")" = "curve,sampler,trial,accuracy,bits,bitops,state,params" ] ||
      fail "mp: trials.csv header"
    [ "$(grep -c ',COMPLETE,' "$tmp/mp/trials.csv")" -eq 8 ] || fail "mp: not 8 completed trials"
    grep -q '"2/frac_width=[248] 2/width=\(8\|16\|32\)"' "$tmp/mp/trials.csv" || fail "mp: params not recorded"
    [ -s "$tmp/mp/plot.gp" ] || fail "mp: no plot.gp"
    if command -v gnuplot >/dev/null 2>&1; then
      [ "$(head -c 4 "$tmp/mp/plot.png" | od -An -c | tr -d ' ')" = "211PNG" ] || fail "mp: plot.png is not a PNG"
    fi
    grep -Eq "^tpe +tpe" "$tmp/mp.out" || fail "mp: no table on stdout"
    run mp2 0 "$LAB3_MP" "${tiny[@]}" --trials 4 --samplers random,tpe --output-dir "$tmp/mp2"
    cmp -s "$tmp/mp/results.csv" "$tmp/mp2/results.csv" || fail "mp: a rerun with the same seed differs"
    # QAT per trial: fine-tuning runs are written per trial.
    run qat 0 "$LAB3_MP" "${tiny[@]}" --trials 2 --finetune-epochs 1 --output-dir "$tmp/qat"
    check_best qat "$tmp/qat/results.csv" "trial,tpe" 2
    [ -d "$tmp/qat/trials/tpe-1" ] || fail "qat: no fine-tuning run of trial 1"
    # A search killed at random moments (SIGKILL) continues from its study database with
    # --resume: finished trials kept, killed ones failed, each curve completed to --trials
    # finished trials, no trial number used twice, the best model written.
    kill_args=("${tiny[@]}" --load "$tmp/mp/best" --trials 10 --samplers random,tpe --finetune-epochs 2
      --output-dir "$tmp/kill" --storage "sqlite:///$tmp/kill/studies.db")
    mkdir -p "$tmp/kill"
    for attempt in 1 2 3 4; do
      resume=()
      [ "$attempt" = 1 ] || resume=(--resume)
      "$LAB3_MP" "${kill_args[@]}" "${resume[@]}" >"$tmp/kill-$attempt.out" 2>&1 &
      pid=$!
      sleep "0.$((RANDOM % 6 + 1))"  # the whole run takes about a second here
      kill -9 "$pid" 2>/dev/null
      wait "$pid" 2>/dev/null
    done
    if grep -q 'without SQLite' "$tmp/kill-1.out"; then
      echo "kill: skipped (qnum built without SQLite)"
    else
      run kill_resume 0 "$LAB3_MP" "${kill_args[@]}" --resume
      for curve in random tpe; do
        [ "$(grep -cE "^$curve,$curve,[0-9]+,[0-9.]+,.*,(COMPLETE|PRUNED)," "$tmp/kill/trials.csv")" -eq 10 ] ||
          fail "kill: curve $curve has not 10 finished trials: $(grep "^$curve," "$tmp/kill/trials.csv")"
        [ -z "$(grep "^$curve," "$tmp/kill/trials.csv" | cut -d, -f3 | sort | uniq -d)" ] ||
          fail "kill: curve $curve uses a trial number twice"
        ! grep -q "^$curve,.*,RUNNING," "$tmp/kill/trials.csv" || fail "kill: a RUNNING trial was left"
      done
      [ -s "$tmp/kill/best.safetensors" ] || fail "kill: no best.safetensors"
      expect_one_line_error resume_memory "--resume continues studies kept in a database" "$LAB3_MP" --resume \
        --output-dir "$tmp/x6"
      run study_exists 2 "$LAB3_MP" "${kill_args[@]}"  # the lab's notes, then the error
      tail -n 1 "$tmp/study_exists.err" | grep -q "already exists in .*pass --resume" ||
        fail "study_exists: $(tail -n 1 "$tmp/study_exists.err")"
    fi
    # Format search: one curve per family plus mixed, on jsc-s (five Linears).
    run fmt 0 "$LAB3_FORMATS" --model jsc-s --epochs 1 --threads 1 --no-progress --trials 3 \
      --families integer,log,binary --output-dir "$tmp/fmt"
    check_best fmt "$tmp/fmt/results.csv" "trial,integer,log,binary,mixed" 3
    grep -q '^mixed,tpe,0,.*"11/format=' "$tmp/fmt/trials.csv" || fail "fmt: mixed trial params not recorded"
    grep -q '^binary,tpe,0,.* 2/format=binary:bipolar ' "$tmp/fmt/trials.csv" || fail "fmt: binary curve params"
    [ -s "$tmp/fmt/best.safetensors" ] || fail "fmt: no best.safetensors"
    # Bad arguments.
    expect_one_line_error sampler "unknown sampler 'cmaes'" "$LAB3_MP" --samplers tpe,cmaes --output-dir "$tmp/x1"
    expect_one_line_error width "--widths: 40 must be in \[2, 32\]" "$LAB3_MP" --widths 8,40 --output-dir "$tmp/x2"
    expect_one_line_error trials "--trials must be >= 1" "$LAB3_MP" --trials 0 --output-dir "$tmp/x3"
    expect_one_line_error layers "match no layer with op linear" "$LAB3_MP" --layers nothing --output-dir "$tmp/x4"
    expect_one_line_error family "family 'posit' has no variants" "$LAB3_FORMATS" --families integer,posit --output-dir "$tmp/x5"
    [ ! -e "$tmp/x5" ] || fail "family: output directory created for a bad argument"
    ;;
  bert)
    : "${LAB3_MP:?set LAB3_MP}" "${LAB3_FORMATS:?set LAB3_FORMATS}" "${QNUM:?set QNUM}"
    model=bert:1-64-2-128
    bert=(--model $model --limit 48 --max-length 16 --threads 1 --no-progress)
    # Task 1 on BERT, trained here (1 epoch): the eight Linears searched, best model saved.
    run bmp 0 "$LAB3_MP" "${bert[@]}" --trials 3 --output-dir "$tmp/bmp"
    check_best bmp "$tmp/bmp/results.csv" "trial,tpe" 3
    grep -q "on text-synthetic, 1 epoch fp32" "$tmp/bmp.out" || fail "bmp: not BERT's defaults (text-synthetic, 1 epoch)"
    grep -q "8 layers" "$tmp/bmp.out" || fail "bmp: not the eight Linears of a one-layer BERT"
    grep -q 'bert.encoder.layer.0.attention.self.query/width=' "$tmp/bmp/trials.csv" || fail "bmp: BERT params not recorded"
    # BitOPs per sample of a token model: positive, and no more than the float32 model's.
    awk -F, 'NR > 1 && $7 == "COMPLETE" && !($6 > 0) { bad = 1 } END { exit bad }' "$tmp/bmp/trials.csv" ||
      fail "bmp: a trial without BitOPs"
    [ -s "$tmp/bmp/best.safetensors" ] && [ -s "$tmp/bmp/config.json" ] || fail "bmp: no best.safetensors/config.json"
    run btest 0 "$QNUM" test $model text-synthetic --load "$tmp/bmp/best" --limit 48 --threads 1 --json
    grep -q '"accuracy"' "$tmp/btest.out" || fail "btest: qnum test did not load the best model: $(cat "$tmp/btest.out")"
    grep -q '"max_length":16' "$tmp/btest.out" || fail "btest: qnum test did not tokenize as the lab run: $(cat "$tmp/btest.out")"
    # Task 2 from a checkpoint trained by qnum train: every lab3 family plus mixed, best saved.
    run btrain 0 "$QNUM" train $model text-synthetic --max-epochs 1 --limit 48 --max-length 16 --threads 1 \
      --no-progress --output-dir "$tmp/brun"
    run bfmt 0 "$LAB3_FORMATS" "${bert[@]}" --trials 1 --load "$tmp/brun/best" --layers '.*(query|classifier)' \
      --output-dir "$tmp/bfmt"
    check_best bfmt "$tmp/bfmt/results.csv" \
      "trial,integer,minifloat_denorm,minifloat_ieee,log,block_fp,block_minifloat,block_log,binary,binary_scaling,residual_sign,mixed" 1
    grep -q "loaded $tmp/brun/best" "$tmp/bfmt.out" || fail "bfmt: did not start from the checkpoint"
    grep -q '^residual_sign,tpe,0,[0-9.]\+,' "$tmp/bfmt/trials.csv" || fail "bfmt: residual_sign trial did not complete"
    grep -q '^binary_scaling,tpe,0,[0-9.]\+,' "$tmp/bfmt/trials.csv" || fail "bfmt: binary_scaling trial did not complete"
    # The chain goes on: task 1 from task 2's best (its quantized layers restored), same accuracy when loaded.
    run bchain 0 "$LAB3_MP" "${bert[@]}" --trials 1 --load "$tmp/bfmt/best" --layers '.*classifier' \
      --output-dir "$tmp/bchain"
    grep -q "loaded $tmp/bfmt/best" "$tmp/bchain.out" || fail "bchain: did not start from lab3-format-search's best"
    # A checkpoint of another model family: one line naming both.
    run jtrain 0 "$QNUM" train jsc-tiny jsc-synthetic --max-epochs 1 --threads 1 --no-progress --output-dir "$tmp/jrun"
    expect_one_line_error bwrong "holds model 'jsc-tiny'.*not '$model'" "$LAB3_MP" "${bert[@]}" --load "$tmp/jrun/best" \
      --output-dir "$tmp/bwrong"
    [ ! -e "$tmp/bwrong" ] || fail "bwrong: output directory created for a wrong checkpoint"
    # qnum search --config on the BERT checkpoint (the model and max length from the config).
    cat >"$tmp/bert.toml" <<TOML
model = "$model"
dataset = "text-synthetic"
load_name = "$tmp/brun/best"
output_dir = "$tmp/bout"
threads = 1
limit = 48
[search.search_space]
name = "mixed_precision_families"
layers = ".*(query|value)"
families = ["integer", "minifloat_ieee"]
[search.strategy]
sampler = "tpe"
n_trials = 3
TOML
    run bcfg 0 "$QNUM" search --config "$tmp/bert.toml" --json
    python3 - "$tmp/bcfg.out" <<'PY' || fail "bcfg: $(cat "$tmp/bcfg.out")"
import json, sys
d = json.loads(open(sys.argv[1]).read())
assert d["layers"] == 2 and d["completed"] == 3, d
b = d["best_trial"]
assert set(b["params"]) == {"bert.encoder.layer.0.attention.self.query/format",
                            "bert.encoder.layer.0.attention.self.value/format"}, b
assert 0 <= b["metrics"]["accuracy"] <= 1 and b["metrics"]["bitops"] > 0, b
PY
    run btx 0 "$QNUM" transform --config "$tmp/bout/best_transform.json" --output-dir "$tmp/btx" --limit 48
    grep -q "quantize: 2 layer(s) changed" "$tmp/btx.out" || fail "btx: the best config did not quantize 2 layers"
    # A seed table naming no layer: a warning listing the layers.
    cat >"$tmp/bseed.toml" <<TOML
model = "$model"
load_name = "$tmp/brun/best"
output_dir = "$tmp/bseed"
threads = 1
limit = 48
[search.search_space]
name = "graph/quantize/mixed_precision_ptq"
seed.default.config = { name = ["integer"], data_in_width = [8], weight_width = [4, 8] }
seed.encoder_layer_9_query.config = { name = ["integer"], weight_width = [2] }
[search.strategy]
n_trials = 1
TOML
    run bseed 0 "$QNUM" search --config "$tmp/bseed.toml"
    grep -q "seed.encoder_layer_9_query names no layer of the model (layers: .*classifier" "$tmp/bseed.err" ||
      fail "bseed: no warning listing the layers: $(cat "$tmp/bseed.err")"
    expect_one_line_error bcfgwrong "holds model 'jsc-tiny'" "$QNUM" search --config "$tmp/bert.toml" \
      --load "$tmp/jrun/best" --output-dir "$tmp/bx"
    ;;
  config)
    : "${QNUM:?set QNUM}"
    run train 0 "$QNUM" train jsc-s jsc-synthetic --max-epochs 1 --threads 1 --output-dir "$tmp/run"
    cat >"$tmp/mp.toml" <<TOML
model = "jsc-s"
dataset = "jsc-synthetic"
load_name = "$tmp/run/best"
output_dir = "$tmp/out"
threads = 1
[search.search_space]
name = "mixed_precision"
layers = "2|5"
[search.strategy]
sampler = "tpe"
n_trials = 6
storage = "sqlite:///$tmp/s.db"
study_name = "mp"
TOML
    run cfg 0 "$QNUM" search --config "$tmp/mp.toml"
    for f in trials.csv best.json best_transform.json plot.svg; do [ -s "$tmp/out/$f" ] || fail "cfg: no $f"; done
    [ "$(($(wc -l <"$tmp/out/trials.csv") - 1))" -eq 6 ] || fail "cfg: trials.csv has not 6 rows"
    head -n 1 "$tmp/out/trials.csv" | grep -q "params_2/width,params_5/frac_width,params_5/width,user_attrs_accuracy" ||
      fail "cfg: trials.csv columns: $(head -n 1 "$tmp/out/trials.csv")"
    grep -q '"by": "name"' "$tmp/out/best.json" || fail "cfg: best config not keyed by name"
    run show 0 "$QNUM" study show --storage "sqlite:///$tmp/s.db" --study-name mp
    grep -q "best trial" "$tmp/show.out" || fail "show: no best trial"
    # Resuming adds trials; the best config transforms.
    run resume 0 "$QNUM" search --config "$tmp/mp.toml" --trials 2 --resume
    grep -q "trials run 2, in study 8" "$tmp/resume.out" || fail "resume: $(cat "$tmp/resume.out")"
    run tx 0 "$QNUM" transform --config "$tmp/out/best_transform.json" --output-dir "$tmp/tx"
    grep -q "quantize: 2 layer(s) changed" "$tmp/tx.out" || fail "tx: best config did not quantize 2 layers"
    # Multi-objective MASE-style config with NSGA-II: a Pareto set.
    cat >"$tmp/mase.toml" <<TOML
model = "jsc-s"
dataset = "jsc-synthetic"
load_name = "$tmp/run/best"
project_dir = "$tmp/mase"
[search.search_space]
name = "graph/quantize/mixed_precision_ptq"
setup.by = "name"
seed.default.config.name = ["NA"]
seed.seq_blocks_2.config = { name = ["integer"], data_in_width = [4, 8], weight_width = [2, 4, 8], weight_frac_width = ["NA"] }
[search.strategy]
name = "optuna"
sw_runner.basic_evaluation = { data_loader = "val_dataloader", num_samples = 512 }
setup = { n_jobs = 1, n_trials = 6, sampler = "nsgaii", sum_scaled_metrics = false }
population_size = 4
metrics.accuracy = { scale = 1.0, direction = "maximize" }
metrics.average_bitwidth = { scale = 0.2, direction = "minimize" }
TOML
    run mase 0 "$QNUM" search --config "$tmp/mase.toml" --json
    python3 -c 'import json,sys; d=json.loads(open(sys.argv[1]).read()); assert d["layers"] == 1 and len(d["best_trials"]) >= 1 and d["best_trials"][0]["params"].keys() == {"2/data_in_width", "2/weight_width"}, d' \
      "$tmp/mase.out" 2>/dev/null || grep -q '"best_trials":\[{' "$tmp/mase.out" || fail "mase: no Pareto set: $(cat "$tmp/mase.out")"
    # Bad input: one line naming the problem.
    sed 's/^sampler = "tpe"/samplr = "tpe"/' "$tmp/mp.toml" >"$tmp/bad1.toml"
    expect_one_line_error badkey "unknown key 'samplr'" "$QNUM" search --config "$tmp/bad1.toml"
    sed 's/name = "mixed_precision"/name = "nas"/' "$tmp/mp.toml" >"$tmp/bad2.toml"
    expect_one_line_error badspace "unknown name 'nas'" "$QNUM" search --config "$tmp/bad2.toml"
    sed '/^load_name/d' "$tmp/mp.toml" >"$tmp/bad3.toml"
    expect_one_line_error noload "'load_name' .* is required" "$QNUM" search --config "$tmp/bad3.toml"
    expect_one_line_error exists "study 'mp' already exists" "$QNUM" search --config "$tmp/mp.toml"
    expect_one_line_error both "exactly one of --config FILE and --objective NAME" "$QNUM" search --config "$tmp/mp.toml" \
      --objective branin --trials 1
    sed 's/layers = "2|5"/layers = "2|5"\nwidth = [8, 40]/' "$tmp/mp.toml" | sed 's/study_name = "mp"/study_name = "w"/' >"$tmp/bad4.toml"
    expect_one_line_error width "choice 2/width = 40 is invalid" "$QNUM" search --config "$tmp/bad4.toml"
    ;;
  *)
    echo "unknown mode '$mode'"
    exit 2
    ;;
esac

finish "lab3 $mode"
