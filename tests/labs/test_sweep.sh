#!/usr/bin/env bash
# lab1-sweep end to end on jsc-synthetic with small sweeps (one thread): one folder per sweep
# with the exact CSV header, one row per value in order, accuracies in [0, 1], the plot; a
# larger batch at the same epochs learns less (fewer steps); a same-seed rerun gives the same
# CSV; a model of the user's own ($QNUM_MODELS) sweeps the same way; bad input exits 2 with
# one line. Usage: LAB_SWEEP=path/to/lab1-sweep test_sweep.sh
set -uo pipefail
: "${LAB_SWEEP:?set LAB_SWEEP}"
source "$(dirname "$0")/lib.sh"

small=(--threads 1 --no-progress --epochs 3 --batch-sizes 64,2048 --epoch-counts 1,3 --learning-rates 1e-4,1e-2)
run sweep 0 "$LAB_SWEEP" "${small[@]}" --output-dir "$tmp/s"
for s in batch-size epochs learning-rate; do
  f=$tmp/s/$s/results.csv
  [ "$(head -n 1 "$f" 2>/dev/null)" = "value,val_accuracy,test_accuracy,train_loss,seconds" ] || fail "$s: header"
  [ "$(($(wc -l <"$f") - 1))" -eq 2 ] || fail "$s: not 2 rows"
  awk -F, 'NR > 1 { if ($2 < 0 || $2 > 1 || $3 < 0 || $3 > 1 || $2 !~ /^[0-9.]+$/) bad = 1 } END { exit bad }' "$f" ||
    fail "$s: accuracies not in [0, 1]"
  [ -s "$tmp/s/$s/plot.gp" ] || fail "$s: no plot.gp"
  check_png "$tmp/s/$s/plot.png"
done
[ "$(cut -d, -f1 "$tmp/s/batch-size/results.csv" | tail -n +2 | tr '\n' ' ')" = "64 2048 " ] || fail "batch sizes"
# 3 epochs of batch 64 are 32x the steps of batch 2048: it must learn more.
awk -F, 'NR == 2 { a = $2 } NR == 3 { b = $2 } END { exit !(a > b) }' "$tmp/s/batch-size/results.csv" ||
  fail "batch 64 did not beat batch 2048: $(cat "$tmp/s/batch-size/results.csv")"
grep -q "^batch-size sweep (jsc-tiny" "$tmp/sweep.out" || fail "no table on stdout"
run again 0 "$LAB_SWEEP" "${small[@]}" --sweeps epochs --output-dir "$tmp/again"
cmp -s <(cut -d, -f1-4 "$tmp/s/epochs/results.csv") <(cut -d, -f1-4 "$tmp/again/epochs/results.csv") ||
  fail "a same-seed rerun differs"

# The user's own network: the lab reports' jsc-custom, registered by name.
printf '[models.jsc-custom]\narchitecture = "jsc-seq:bn,relu,linear32,bn,relu,dropout0.2,linear16,bn,relu,dropout0.2,linear5,bn,relu"\n' \
  >"$tmp/models.toml"
QNUM_MODELS=$tmp/models.toml run custom 0 "$LAB_SWEEP" "${small[@]}" --model jsc-custom --sweeps epochs \
  --output-dir "$tmp/custom"
[ "$(($(wc -l <"$tmp/custom/epochs/results.csv") - 1))" -eq 2 ] || fail "custom: not 2 rows"

expect_one_line_error bert "lab1-sweep trains feature-table models; 'bert-tiny'" "$LAB_SWEEP" --model bert-tiny
expect_one_line_error sweep "unknown sweep 'momentum'" "$LAB_SWEEP" --sweeps epochs,momentum
expect_one_line_error lr "--learning-rates: 0 must be > 0" "$LAB_SWEEP" --learning-rates 0,1e-3
expect_one_line_error dup "--batch-sizes: 64 appears twice" "$LAB_SWEEP" --batch-sizes 64,64
expect_one_line_error data "unknown dataset 'mnist'" "$LAB_SWEEP" --dataset mnist
finish "lab1-sweep"
