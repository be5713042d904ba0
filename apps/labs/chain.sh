#!/usr/bin/env bash
# The labs in order on one model, each step starting from the last step's checkpoint:
#
#   train        qnum train MODEL DATASET                         -> train/best
#   lora         lab0-lora --load train/best          (side step: full fine-tuning vs LoRA)
#   ptq-qat      lab1-ptq-qat --load train/best                   -> ptq-qat/best (best QAT model)
#   prune        lab1-prune --load ptq-qat/best                   -> prune/best   (pruned + fine-tuned)
#   nas          lab2-nas                             (text models) -> nas/best    (best architecture, trained)
#   compress     lab2-compression --load nas/best     (text models) -> compress/best
#                qnum transform --config CONFIG --load prune/best (feature models) -> compress/transformed
#   mixed        lab3-mixed-precision --load <compressed>          -> mixed/best
#   formats      lab3-format-search --load <compressed>            -> formats/best
#   test         qnum test (and, for text, qnum predict) on mixed/best
#
# The same command for every model: the dataset says whether it is a text chain (imdb,
# text-synthetic) or a feature-table chain (jsc, jsc-synthetic). --budget quick runs every
# step with tiny settings (minutes on the offline sets; the chain test uses it); --budget full
# uses the labs' own defaults. Any budget value can be overridden (--limit, --epochs, --trials).
#
# Resuming: a step that finished has <step>/DONE and is skipped when the chain is rerun; a
# step that was killed is started again in a fresh folder (its partial output is moved to
# <step>.killed-<time>, never deleted), but `qnum train` continues from its `last` checkpoint
# and the Lab 3 searches (mixed, formats) from their study databases (<step>/studies.db:
# finished trials kept, the killed trial failed, the curves completed).
#
# Usage: chain.sh --model bert-tiny --dataset imdb --output-dir runs/chain [--budget quick|full]
#                 [--limit N] [--epochs N] [--trials N] [--max-length N] [--threads N] [--seed N]
#                 [--nas-space mase|small] [--bin DIR] [--steps "train ptq-qat ..."]
# --nas-space small searches 1-2 layers, 2/4 heads, hidden 64/128, intermediate 256/512 (what a
# CPU trains in minutes); mase (the full budget's default) is MASE's space.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
configs=$(cd "$here/../../examples/configs" && pwd)
model=bert-tiny dataset=text-synthetic out="" budget=full threads="" seed=0
limit="" epochs="" trials="" max_length="" steps="" nas=""
bin=${QNUM_BIN_DIR:-$(cd "$here/../.." && pwd)/build/bin}

die() {
  echo "chain: error: $*" >&2
  exit 2
}
value() { [ $# -ge 2 ] && [ -n "$2" ] || die "$1 needs a value"; }

while [ $# -gt 0 ]; do
  case "$1" in
    --model) value "$@"; model=$2; shift 2 ;;
    --dataset) value "$@"; dataset=$2; shift 2 ;;
    --output-dir) value "$@"; out=$2; shift 2 ;;
    --budget) value "$@"; budget=$2; shift 2 ;;
    --limit) value "$@"; limit=$2; shift 2 ;;
    --epochs) value "$@"; epochs=$2; shift 2 ;;
    --trials) value "$@"; trials=$2; shift 2 ;;
    --max-length) value "$@"; max_length=$2; shift 2 ;;
    --threads) value "$@"; threads=$2; shift 2 ;;
    --seed) value "$@"; seed=$2; shift 2 ;;
    --bin) value "$@"; bin=$2; shift 2 ;;
    --steps) value "$@"; steps=$2; shift 2 ;;
    --nas-space) value "$@"; nas=$2; shift 2 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
case "$budget" in quick | full) ;; *) die "--budget must be quick or full, got '$budget'" ;; esac
case "$nas" in "" | mase | small) ;; *) die "--nas-space must be mase or small, got '$nas'" ;; esac
for n in limit epochs trials max_length threads seed; do
  v=${!n}
  [ -z "$v" ] || [[ "$v" =~ ^[0-9]+$ ]] || die "--${n//_/-} must be a non-negative integer, got '$v'"
done
case "$dataset" in
  imdb | text-synthetic | imdb-synthetic) text=1 ;;
  jsc | jsc-synthetic) text=0 ;;
  *) die "unknown dataset '$dataset' (text: imdb, text-synthetic; feature tables: jsc, jsc-synthetic)" ;;
esac
all_steps="train lora ptq-qat prune nas compress mixed formats test"
[ "$text" = 1 ] || all_steps="train ptq-qat prune compress mixed formats test"
steps=${steps:-$all_steps}
for s in $steps; do [[ " $all_steps " == *" $s "* ]] || die "unknown step '$s' for this dataset (steps: $all_steps)"; done
for p in qnum lab0-lora lab1-ptq-qat lab1-prune lab2-nas lab2-compression lab3-mixed-precision lab3-format-search; do
  [ -x "$bin/$p" ] || die "$bin/$p not found: build the programs (bash scripts/build.sh) or pass --bin DIR"
done
out=${out:-qnum-runs/chain_${model//[:\/]/-}_$dataset}
mkdir -p "$out"
out=$(cd "$out" && pwd)

# The budget: what each step is given. quick: small settings for the offline sets (seconds per
# step; enough epochs that the models learn).
if [ "$budget" = quick ]; then
  : "${epochs:=3}" "${trials:=2}" "${max_length:=64}"
  widths=8,16 sparsities=0.5 nas_space=(--layers 1,2 --heads 2 --hidden-sizes 64 --intermediate-sizes 128)
  families=integer,log,binary
else
  widths=4,8,16 sparsities=0.3,0.5,0.7 nas_space=() families=""
fi
[ "$nas" != small ] || nas_space=(--layers 1,2 --heads 2,4 --hidden-sizes 64,128 --intermediate-sizes 256,512)
[ "$nas" != mase ] || nas_space=()
common=(--seed "$seed")
[ -z "$threads" ] || common+=(--threads "$threads")
data=()
if [ "$text" = 1 ]; then
  [ -z "$limit" ] || data+=(--limit "$limit")
  [ -z "$max_length" ] || data+=(--max-length "$max_length")
fi
lab=(--model "$model" --dataset "$dataset" "${common[@]}" "${data[@]}" --no-progress)
ep=()
[ -z "$epochs" ] || ep=(--epochs "$epochs")
tr=()
[ -z "$trials" ] || tr=(--trials "$trials")

note() { echo "chain: $*" >&2; }

# Steps whose searches keep their trials in a study database: a killed one continues.
resumable="mixed formats"

# step NAME CMD...: runs CMD in $out/NAME unless NAME/DONE exists; stdout goes to NAME/log.txt.
step() {
  local name=$1 dir=$out/$1
  shift
  [[ " $steps " == *" $name "* ]] || return 0
  if [ -f "$dir/DONE" ]; then
    note "$name: done earlier ($dir), skipped"
    return 0
  fi
  if [ -d "$dir" ] && [[ " $resumable " == *" $name "* ]]; then
    note "$name: an unfinished run is in $dir (killed?); continuing it"
    set -- "$@" --resume
  elif [ -d "$dir" ] && [ "$name" != train ]; then
    local keep
    keep="$dir.killed-$(date +%Y%m%d-%H%M%S)"
    note "$name: an unfinished run is in $dir (killed?); moved to $keep, starting again"
    mv "$dir" "$keep"
  fi
  mkdir -p "$dir"
  note "$name: $*"
  local start=$SECONDS
  "$@" >"$dir/log.txt" || {
    local rc=$?
    note "$name failed (exit $rc); its output: $dir/log.txt"
    exit "$rc"
  }
  echo "$((SECONDS - start)) s: $*" >"$dir/DONE.tmp" && mv "$dir/DONE.tmp" "$dir/DONE"
  note "$name: done in $((SECONDS - start)) s"
}

# needs STEP FILE FROM: STEP, when it is to run, needs the checkpoint FILE that step FROM writes.
needs() {
  [[ " $steps " == *" $1 "* ]] && [ ! -f "$out/$1/DONE" ] || return 0
  [ -f "$2.safetensors" ] || die "$1 needs $2.safetensors, written by step '$3': run that step first"
}

train_args=("$model" "$dataset" "${common[@]}" "${data[@]}" --output-dir "$out/train" --no-progress)
[ -z "$epochs" ] || train_args+=(--max-epochs "$epochs")
if [[ " $steps " == *" train "* ]] && [ -f "$out/train/last.safetensors" ] && [ ! -f "$out/train/DONE" ]; then
  train_args+=(--resume)  # a killed training run continues from its last epoch
fi
step train "$bin/qnum" train "${train_args[@]}"

if [ "$text" = 1 ]; then
  needs lora "$out/train/best" train
  step lora "$bin/lab0-lora" "${lab[@]}" --load "$out/train/best" --output-dir "$out/lora"
fi

needs ptq-qat "$out/train/best" train
step ptq-qat "$bin/lab1-ptq-qat" "${lab[@]}" --load "$out/train/best" --widths "$widths" --output-dir "$out/ptq-qat"

needs prune "$out/ptq-qat/best" ptq-qat
step prune "$bin/lab1-prune" "${lab[@]}" --load "$out/ptq-qat/best" --sparsities "$sparsities" --methods l1-norm \
  --output-dir "$out/prune"

if [ "$text" = 1 ]; then
  step nas "$bin/lab2-nas" --dataset "$dataset" "${common[@]}" "${data[@]}" "${ep[@]}" "${tr[@]}" "${nas_space[@]}" \
    --samplers tpe --no-progress --output-dir "$out/nas"
  needs compress "$out/nas/best" nas
  # BERT's compression: 8-bit fixed point keeping 7 weight fraction bits (MASE's 8/4 rounds
  # BERT's small weights to zero), then 50% l1-norm pruning.
  step compress "$bin/lab2-compression" --dataset "$dataset" "${common[@]}" "${data[@]}" --load "$out/nas/best" \
    --compress-config "$configs/bert_compress.toml" --no-progress --output-dir "$out/compress"
  compressed=$out/compress/best
else
  needs compress "$out/prune/best" prune
  step compress "$bin/qnum" transform "$model" --config "$configs/jsc_s_quantize_prune.toml" \
    --dataset "$dataset" --load "$out/prune/best" --output-dir "$out/compress"
  compressed=$out/compress/transformed
fi
needs mixed "$compressed" compress
needs formats "$compressed" compress
# The model the compressed checkpoint holds (lab2-nas found its own architecture).
final=$(sed -n 's/^  "model": *"\([^"]*\)".*/\1/p' "$compressed.json" 2>/dev/null | head -n 1)
final=${final:-$model}
final_lab=(--model "$final" --dataset "$dataset" "${common[@]}" "${data[@]}" --no-progress)

step mixed "$bin/lab3-mixed-precision" "${final_lab[@]}" --load "$compressed" "${tr[@]}" --samplers tpe \
  --output-dir "$out/mixed" --storage "sqlite:///$out/mixed/studies.db"
fam=()
[ -z "$families" ] || fam=(--families "$families")
step formats "$bin/lab3-format-search" "${final_lab[@]}" --load "$compressed" "${tr[@]}" "${fam[@]}" \
  --output-dir "$out/formats" --storage "sqlite:///$out/formats/studies.db"

# The chain's result: the mixed-precision model on the test split (and on two sentences).
final_test() {
  "$bin/qnum" test "$final" "$dataset" --load "$out/mixed/best" "${data[@]}"
  if [ "$text" = 1 ]; then
    "$bin/qnum" predict "$final" --load "$out/mixed/best" "a wonderful film, moving and funny" "a dull, lifeless film"
  fi
}
needs test "$out/mixed/best" mixed
step test final_test
# The summary: each step's headline (train's test line, a lab's best model), then the result.
echo "chain: $model on $dataset ($budget budget), in $out"
for s in $steps; do
  [ -f "$out/$s/log.txt" ] || continue
  line=$({ grep -m 1 -E '^test +loss' "$out/$s/log.txt" || grep -m 1 -E '^best +/' "$out/$s/log.txt" ||
    grep -m 1 -E '^(test |lora +[0-9]|accuracy +before)' "$out/$s/log.txt"; } |
    tr -s ' ' | cut -c 1-160 || true)
  printf '  %-9s %s\n' "$s" "${line:-(see $out/$s/log.txt)}"
done
[ ! -f "$out/test/log.txt" ] || sed 's/^/  | /' "$out/test/log.txt"
note "finished: every step's output is in $out (logs: $out/*/log.txt)"
