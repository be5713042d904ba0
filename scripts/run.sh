#!/usr/bin/env bash
# The main job: install missing packages, build the `qnum` program only (the command line and
# the labs; the test command builds the rest), list the formats, quantize a generated tensor in
# several formats (exact and MASE-compatible) printing the error table, train a small JSC
# model, quantize + prune another with `qnum transform`, and take a small BERT through train,
# resume, test and predict on the offline text set, with the same commands; then take one
# small BERT through every lab in order (apps/labs/chain.sh, a minute on the offline set).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/scripts/install-deps.sh"
QNUM_TARGETS=qnum bash "$root/scripts/build.sh"
qnum=${QNUM_BUILD_DIR:-$root/build}/bin/qnum
echo
"$qnum" formats
echo
"$qnum" formats --describe fp8_e4m3
echo
"$qnum" demo --size 65536
echo
# Train MASE's jsc-tiny on the seeded synthetic JSC set (real JSC data: `qnum train jsc-tiny
# jsc` with the file where its error message says), then evaluate the best checkpoint.
runs=$(mktemp -d)
"$qnum" train jsc-tiny jsc-synthetic --max-epochs 5 --output-dir "$runs/jsc-tiny" --no-progress
"$qnum" test jsc-tiny jsc-synthetic --load "$runs/jsc-tiny/best.safetensors"
echo
# MASE's lab 2 flow on jsc-s: train, then quantize (integer 8/4 on every Linear) and prune
# (50% l1-norm) with one epoch of fine-tuning, from a MASE-style TOML; report the result.
"$qnum" train jsc-s jsc-synthetic --max-epochs 5 --output-dir "$runs/jsc-s" --no-progress
"$qnum" transform --config "$root/examples/configs/jsc_s_quantize_prune.toml" --load "$runs/jsc-s/best" \
  --output-dir "$runs/jsc-s-transformed"
"$qnum" report jsc-s --load "$runs/jsc-s-transformed/transformed" | tail -4
echo
# The same commands on BERT (a one-layer bert:1-64-2-128 on text-synthetic, offline; ~30 s):
# the text recipe (at lr 3e-3 for this small model), two epochs, a third by --resume, the
# test split, then the user's own sentences.
bert=(bert:1-64-2-128 text-synthetic --max-length 64 --learning-rate 3e-3 --output-dir "$runs/bert" --no-progress)
"$qnum" train "${bert[@]}" --max-epochs 2
"$qnum" train "${bert[@]}" --max-epochs 3 --resume | tail -4
"$qnum" test bert:1-64-2-128 text-synthetic --load "$runs/bert/best"
"$qnum" predict bert:1-64-2-128 --load "$runs/bert/best" "a wonderful film" "not a wonderful film"
echo
# The labs in order on one model, each step from the last one's checkpoint: train, LoRA,
# PTQ/QAT, pruning, NAS, compression, both Lab 3 searches, test + predict (--budget quick:
# small settings for the offline set; the same command with --dataset imdb runs the real lab).
bash "$root/apps/labs/chain.sh" --model bert:1-64-2-128 --dataset text-synthetic --budget quick \
  --output-dir "$runs/chain" --bin "$(dirname "$qnum")"
rm -rf "$runs"
