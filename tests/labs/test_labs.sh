#!/usr/bin/env bash
# The Lab 1 programs end to end on jsc-synthetic with tiny settings (jsc-tiny, 1 epoch, two
# widths or sparsities, one thread; mode bert: a one-layer BERT on text-synthetic): exit codes, the exact CSV header and rows, accuracies in
# [0, 1], the plot (when gnuplot is installed) and the message without it, a same-seed rerun
# giving the same CSV, and bad arguments exiting 2 with one line naming the problem.
# Usage: test_labs.sh ptq-qat|prune|bert|bad-arguments   (LAB_PTQ_QAT, LAB_PRUNE: the binaries)
set -uo pipefail

mode=${1:?usage: test_labs.sh ptq-qat|prune|bert|bad-arguments}
: "${LAB_PTQ_QAT:?set LAB_PTQ_QAT}" "${LAB_PRUNE:?set LAB_PRUNE}"
source "$(dirname "$0")/lib.sh"


# check_csv NAME FILE HEADER ROWS ACC_COLUMNS: header line, row count, accuracies in [0, 1].
check_csv() {
  local name=$1 file=$2 header=$3 rows=$4 cols=$5
  [ -f "$file" ] || { fail "$name: no $file"; return; }
  [ "$(head -n 1 "$file")" = "$header" ] || fail "$name: header '$(head -n 1 "$file")', expected '$header'"
  local n
  n=$(($(wc -l <"$file") - 1))
  [ "$n" -eq "$rows" ] || fail "$name: $n data rows, expected $rows"
  awk -F, -v cols="$cols" 'NR > 1 {
      split(cols, c, " ")
      for (i in c) { v = $(c[i]); if (v !~ /^[0-9.]+$/ || v + 0 < 0 || v + 0 > 1) { print "bad accuracy " v " in row " NR; bad = 1 } }
    } END { exit bad }' "$file" || fail "$name: accuracies not in [0, 1]"
}

# check_plot NAME DIR: plot.gp always; plot.png (a PNG) when gnuplot is installed.
check_plot() {
  local name=$1 dir=$2
  [ -s "$dir/plot.gp" ] || fail "$name: no plot.gp"
  if command -v gnuplot >/dev/null 2>&1; then
    [ -s "$dir/plot.png" ] || fail "$name: gnuplot is installed but there is no plot.png"
    [ "$(head -c 4 "$dir/plot.png" | od -An -c | tr -d ' ')" = "211PNG" ] || fail "$name: plot.png is not a PNG"
  else
    echo "note: gnuplot not installed; plot.png not checked"
  fi
}

tiny=(--model jsc-tiny --epochs 1 --threads 1 --no-progress)

case "$mode" in
  ptq-qat)
    run ptq 0 "$LAB_PTQ_QAT" "${tiny[@]}" --widths 8,4 --qat-epochs 1 --output-dir "$tmp/ptq"
    check_csv ptq "$tmp/ptq/results.csv" "width,ptq_accuracy,qat_accuracy" 2 "2 3"
    [ "$(cut -d, -f1 "$tmp/ptq/results.csv" | tail -n +2 | tr '\n' ' ')" = "4 8 " ] || fail "ptq: widths not 4, 8"
    check_plot ptq "$tmp/ptq"
    grep -q "ptq_accuracy" "$tmp/ptq.out" || fail "ptq: no table on stdout"
    grep -q "fp32 test accuracy" "$tmp/ptq.err" || fail "ptq: no progress on stderr"
    # Deterministic: the same seed gives the same CSV.
    # (with --tensorboard: a log per training run, named as the run's folder; no other change)
    run ptq2 0 "$LAB_PTQ_QAT" "${tiny[@]}" --widths 4,8 --qat-epochs 1 --output-dir "$tmp/ptq2" --tensorboard "$tmp/tb"
    cmp -s "$tmp/ptq/results.csv" "$tmp/ptq2/results.csv" || fail "ptq: a rerun with the same seed differs"
    for r in $(cd "$tmp/ptq2" && find . -name metrics.jsonl -printf '%h\n'); do
      ls "$tmp/tb/$r"/events.out.tfevents.* >/dev/null 2>&1 || fail "ptq --tensorboard: no event file for run $r"
    done
    [ "$(find "$tmp/tb" -name 'events.out.tfevents.*' | wc -l)" -ge 2 ] || fail "ptq --tensorboard: fewer than 2 logs"
    # Without gnuplot: exit 0, CSV and script written, a message saying how to install it.
    QNUM_GNUPLOT=/nonexistent/gnuplot run nognu 0 "$LAB_PTQ_QAT" "${tiny[@]}" --widths 4 --qat-epochs 1 \
      --output-dir "$tmp/nognu"
    check_csv nognu "$tmp/nognu/results.csv" "width,ptq_accuracy,qat_accuracy" 1 "2 3"
    [ -s "$tmp/nognu/plot.gp" ] || fail "nognu: no plot.gp"
    [ ! -e "$tmp/nognu/plot.png" ] || fail "nognu: plot.png without gnuplot"
    grep -q "gnuplot-nox" "$tmp/nognu.err" || fail "nognu: the message does not say how to install gnuplot"
    # A gnuplot that fails: exit 1 naming it, the CSV kept.
    QNUM_GNUPLOT=/bin/false run badgnu 1 "$LAB_PTQ_QAT" "${tiny[@]}" --widths 4 --qat-epochs 1 \
      --output-dir "$tmp/badgnu"
    grep -q "gnuplot (/bin/false) failed" "$tmp/badgnu.err" || fail "badgnu: no message naming gnuplot"
    [ -s "$tmp/badgnu/results.csv" ] || fail "badgnu: the CSV was not kept"
    ;;
  prune)
    run prune 0 "$LAB_PRUNE" "${tiny[@]}" --sparsities 0.5,0.1 --finetune-epochs 1 --output-dir "$tmp/prune"
    check_csv prune "$tmp/prune/results.csv" "sparsity,method,accuracy" 4 "3"
    [ "$(cut -d, -f1,2 "$tmp/prune/results.csv" | tail -n +2 | tr '\n' ' ')" = \
      "0.1,random 0.5,random 0.1,l1-norm 0.5,l1-norm " ] || fail "prune: rows not (0.1, 0.5) x (random, l1-norm)"
    check_plot prune "$tmp/prune"
    grep -q "weights pruned" "$tmp/prune.out" || fail "prune: no table on stdout"
    # The achieved weight sparsity on stdout is the requested one (jsc-tiny: 80 weights).
    grep -Eq "0\.5 +l1-norm +[0-9.]+ +0\.5000" "$tmp/prune.out" || fail "prune: achieved sparsity not 0.5"
    # Global scope with activation pruning (calibrated threshold) and one method.
    run global 0 "$LAB_PRUNE" "${tiny[@]}" --sparsities 0.3 --methods l1-norm --scope global --activations \
      --finetune-epochs 1 --output-dir "$tmp/global"
    check_csv global "$tmp/global/results.csv" "sparsity,method,accuracy" 1 "3"
    # --dataset jsc reads the real file layout (here the data tests' 50-row ARFF fixture).
    mkdir -p "$tmp/data/jsc"
    cp "$(dirname "$0")/../fixtures/datasets/jsc_small.arff" "$tmp/data/jsc/hls4ml_lhc_jets_hlf.arff"
    QNUM_DATA_DIR="$tmp/data" run jsc 0 "$LAB_PRUNE" "${tiny[@]}" --dataset jsc --sparsities 0.5 \
      --finetune-epochs 1 --output-dir "$tmp/jsc"
    check_csv jsc "$tmp/jsc/results.csv" "sparsity,method,accuracy" 2 "3"
    grep -q "jsc_small\|hls4ml_lhc_jets_hlf.arff" "$tmp/jsc.err" || fail "jsc: the real-file reader was not used"
    # The lab chain: lab1-prune starts from the best QAT model lab1-ptq-qat saved (its
    # quantized layers rebuilt) and saves its own best; a checkpoint of another model is refused.
    run chainq 0 "$LAB_PTQ_QAT" "${tiny[@]}" --widths 8 --qat-epochs 1 --output-dir "$tmp/chainq"
    [ -s "$tmp/chainq/best.safetensors" ] || fail "chain: lab1-ptq-qat saved no best.safetensors"
    run chainp 0 "$LAB_PRUNE" "${tiny[@]}" --load "$tmp/chainq/best" --sparsities 0.5 --methods l1-norm \
      --finetune-epochs 1 --output-dir "$tmp/chainp"
    grep -q "loaded $tmp/chainq/best" "$tmp/chainp.err" || fail "chain: lab1-prune did not load the QAT model"
    [ -s "$tmp/chainp/best.safetensors" ] || fail "chain: lab1-prune saved no best.safetensors"
    run chainbad 2 "$LAB_PRUNE" --model jsc-s --epochs 1 --threads 1 --no-progress --load "$tmp/chainq/best" \
      --sparsities 0.5 --output-dir "$tmp/chainbad"
    grep -q "holds model 'jsc-tiny'" "$tmp/chainbad.err" || fail "chainbad: the error does not name the model held"
    ;;
  bert)
    # The same sweeps on a small BERT and the offline text set (TextLab: the one Trainer with the text recipe).
    bert=(--model bert:1-32-2-64 --limit 48 --max-length 16 --threads 1 --no-progress)
    run bptq 0 "$LAB_PTQ_QAT" "${bert[@]}" --widths 16,8 --weight-frac-width -1 --output-dir "$tmp/bptq"
    check_csv bptq "$tmp/bptq/results.csv" "width,ptq_accuracy,qat_accuracy" 2 "2 3"
    check_plot bptq "$tmp/bptq"
    grep -q "on text-synthetic, 1 epoch fp32" "$tmp/bptq.out" || fail "bptq: not BERT's defaults (text-synthetic, 1 epoch)"
    grep -q "weights and biases frac width-1" "$tmp/bptq.out" || fail "bptq: --weight-frac-width not applied"
    [ -s "$tmp/bptq/qat-w8/best.safetensors" ] || fail "bptq: no QAT run folder"
    run bptq2 0 "$LAB_PTQ_QAT" "${bert[@]}" --widths 8,16 --weight-frac-width -1 --output-dir "$tmp/bptq2"
    cmp -s "$tmp/bptq/results.csv" "$tmp/bptq2/results.csv" || fail "bptq: a rerun with the same seed differs"
    # Pruning with global activation pruning: BERT's own calibration loop.
    run bprune 0 "$LAB_PRUNE" "${bert[@]}" --sparsities 0.5 --scope global --activations --output-dir "$tmp/bprune"
    check_csv bprune "$tmp/bprune/results.csv" "sparsity,method,accuracy" 2 "3"
    grep -Eq "0\.5 +l1-norm +[0-9.]+ +0\.5000" "$tmp/bprune.out" || fail "bprune: achieved sparsity not 0.5"
    # A BERT of the user's own name ($QNUM_MODELS) is a text lab like the preset it stands for,
    # with the same results as the architecture string itself.
    printf '[models.my-bert]\narchitecture = "bert:1-32-2-64"\n' >"$tmp/models.toml"
    QNUM_MODELS="$tmp/models.toml" run bptq_user 0 "$LAB_PTQ_QAT" "${bert[@]/bert:1-32-2-64/my-bert}" --widths 16,8 \
      --weight-frac-width -1 --output-dir "$tmp/bptq_user"
    grep -q "on text-synthetic, 1 epoch fp32" "$tmp/bptq_user.out" || fail "bptq_user: my-bert not run as BERT"
    cmp -s "$tmp/bptq/results.csv" "$tmp/bptq_user/results.csv" || fail "bptq_user: results differ from bert:1-32-2-64"
    ;;
  bad-arguments)
    # expect_error NAME PATTERN CMD...: exit 2, exactly one line on stderr matching PATTERN.
    expect_error() {
      local name=$1 pattern=$2
      shift 2
      run "$name" 2 "$@" --output-dir "$tmp/$name"
      [ "$(wc -l <"$tmp/$name.err")" -eq 1 ] || fail "$name: stderr is not one line: $(cat "$tmp/$name.err")"
      grep -Eq -- "$pattern" "$tmp/$name.err" || fail "$name: stderr '$(cat "$tmp/$name.err")' lacks /$pattern/"
    }
    expect_error width_range "--widths: 40 must be in \[2, 32\]" "$LAB_PTQ_QAT" --widths 4,40
    expect_error width_text "widths" "$LAB_PTQ_QAT" --widths 4,x
    expect_error width_dup "--widths: 8 appears twice" "$LAB_PTQ_QAT" --widths 8,8
    expect_error qat_epochs "--qat-epochs must be >= 1" "$LAB_PTQ_QAT" --qat-epochs 0
    expect_error epochs "--epochs must be >= 1" "$LAB_PTQ_QAT" --epochs 0
    expect_error model "unknown model 'jsc-huge'" "$LAB_PTQ_QAT" --model jsc-huge
    expect_error dataset "unknown dataset 'mnist'" "$LAB_PTQ_QAT" --dataset mnist
    expect_error option "bogus" "$LAB_PTQ_QAT" --bogus
    expect_error sparsity "--sparsities: 1 must be in \[0, 1\)" "$LAB_PRUNE" --sparsities 0.5,1
    expect_error method "unknown method 'magnitude'" "$LAB_PRUNE" --methods random,magnitude
    expect_error scope "unknown scope 'layer'" "$LAB_PRUNE" --scope layer
    expect_error finetune "--finetune-epochs must be >= 0" "$LAB_PRUNE" --finetune-epochs -1
    expect_error lr "--learning-rate must be > 0" "$LAB_PRUNE" --learning-rate 0
    expect_error text_opt "--max-length applies to BERT models only" "$LAB_PRUNE" --max-length 64
    expect_error bert_len "--max-length must be >= 2" "$LAB_PTQ_QAT" --model bert-tiny --max-length 1
    expect_error bert_data "unknown text dataset 'jsc-synthetic'|jsc-synthetic" "$LAB_PTQ_QAT" --model bert-tiny \
      --dataset jsc-synthetic
    # The labs are links to qnum (apps/labs/labs.hpp): `qnum lab --help` lists them, `qnum lab
    # <lab>` runs one, `qnum lab` alone lists them on stderr, an unknown lab is refused.
    qnum_program=$(dirname "$LAB_PTQ_QAT")/qnum
    run labs_list 0 "$qnum_program" lab --help
    for lab in lab0-graph lab0-lora lab1-ptq-qat lab1-prune lab1-sweep lab2-nas lab2-compression \
      lab3-mixed-precision lab3-format-search; do
      grep -q "^  $lab " "$tmp/labs_list.out" || fail "qnum lab --help does not list $lab"
    done
    run labs_none 2 "$qnum_program" lab
    grep -q "lab1-prune" "$tmp/labs_none.err" || fail "qnum lab without a lab: no list on stderr"
    run labs_named 0 "$qnum_program" lab lab1-prune --help
    grep -q "sparsities" "$tmp/labs_named.out" || fail "qnum lab lab1-prune --help: not lab1-prune's help"
    run qnum_help 0 "$qnum_program" --help
    grep -q "^  lab " "$tmp/qnum_help.out" || fail "qnum --help does not list the lab command"
    expect_error labs_unknown "unknown lab 'lab9-x'" "$qnum_program" lab lab9-x
    ;;
  *)
    echo "unknown mode '$mode'"
    exit 2
    ;;
esac

finish "lab1 $mode"
