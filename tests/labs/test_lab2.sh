#!/usr/bin/env bash
# The Lab 2 searches end to end on text-synthetic with tiny settings (a NAS-BERT space of
# 1-2 layers and hidden sizes 16/32, 96 rows per split, 32 tokens, 2-3 trials, one thread):
# exit codes, CSV headers and rows, accuracies in [0, 1], best-so-far columns never
# decreasing, the plot, same-seed reruns giving the same CSVs, pruned trials for hidden sizes
# the heads do not divide, the stored study, the compression curves and their runs, the best
# model lab2-nas keeps (best.safetensors: `qnum test` rebuilds it, identities included, with
# the test accuracy the search reported), lab2-compression --load on it (results, its own
# best, `qnum test` again), and bad input exiting 2 with one line naming the problem.
# Usage: test_lab2.sh   (LAB2_NAS, LAB2_COMPRESSION, QNUM: the binaries)
set -uo pipefail

: "${LAB2_NAS:?set LAB2_NAS}" "${LAB2_COMPRESSION:?set LAB2_COMPRESSION}" "${QNUM:?set QNUM}"
source "$(dirname "$0")/lib.sh"
check_plot() {
  local name=$1 dir=$2
  [ -s "$dir/plot.gp" ] || fail "$name: no plot.gp"
  if command -v gnuplot >/dev/null 2>&1; then
    [ "$(head -c 4 "$dir/plot.png" | od -An -c | tr -d ' ')" = "211PNG" ] || fail "$name: plot.png is not a PNG"
  fi
}

data=(--dataset text-synthetic --limit 96 --max-length 32 --threads 1 --no-progress)
tiny=("${data[@]}" --layers 1,2 --heads 2,4 --hidden-sizes 16,32 --intermediate-sizes 32,64)
header="curve,sampler,trial,accuracy,parameters,layers,heads,hidden,intermediate,identity,square_linears,state,params"

# NAS: one curve per sampler, a stored study.
run nas 0 "$LAB2_NAS" "${tiny[@]}" --trials 3 --samplers tpe,grid,random --storage "sqlite:///$tmp/nas.db" \
  --output-dir "$tmp/nas"
check_best nas "$tmp/nas/results.csv" "trial,grid,random,tpe" 3
[ "$(head -n 1 "$tmp/nas/trials.csv")" = "$header" ] || fail "nas: trials.csv header"
[ "$(grep -c ',COMPLETE,' "$tmp/nas/trials.csv")" -eq 9 ] || fail "nas: not 9 completed trials"
grep -Eq '^tpe,tpe,0,0\.[0-9]+,[0-9]+,[12],[24],(16|32),(32|64),[0-9],(5|9),COMPLETE,"bert\.encoder\.layer\.0\.attention\.output\.dense_type=(linear|identity) .* num_hidden_layers=[01]"$' \
  "$tmp/nas/trials.csv" || fail "nas: trial row $(grep '^tpe,tpe,0,' "$tmp/nas/trials.csv")"
check_plot nas "$tmp/nas"
grep -Eq "^grid +grid +3 +0 +0 " "$tmp/nas.out" || fail "nas: no table on stdout"
[ -f "$tmp/nas/trials/grid-2/metrics.jsonl" ] || fail "nas: no training run of grid trial 2"
[ -z "$(find "$tmp/nas/trials" -name '*.safetensors')" ] || fail "nas: trial checkpoints left behind"
run show 0 "$QNUM" study show --storage "sqlite:///$tmp/nas.db" --study-name lab2-nas-grid
grep -q "best trial" "$tmp/show.out" || fail "show: no best trial: $(cat "$tmp/show.out")"

# The best trial over all curves is kept, and `qnum test` rebuilds it (sizes from its config,
# identity Linears from its structure, max_length from its recipe) with the reported accuracy.
# reported_test OUT: the test accuracy on the "best" line of a lab's stdout.
reported_test() { sed -n 's/^best .*test accuracy \([0-9.]*\).*/\1/p' "$1"; }
for f in best.safetensors best.json config.json; do [ -s "$tmp/nas/$f" ] || fail "nas: no $f"; done
for key in '"model_config"' '"tokenizer_fingerprint"' '"identity": true' '"max_length": 32' '"curve": "' \
  '"learning_rate": 0.001' '"warmup_ratio": 0.06' '"weight_decay": 0.01' '"max_grad_norm": 1.0'; do
  grep -q "$key" "$tmp/nas/best.json" || fail "nas: best.json lacks $key"
done
best_val=$(tail -n 1 "$tmp/nas/results.csv" | tr ',' '\n' | tail -n +2 | sort -g | tail -n 1 | awk '{printf "%.4f", $1}')
grep -Eq "^best +$tmp/nas/best.safetensors \([a-z]+ trial [0-9]+, validation accuracy $best_val," "$tmp/nas.out" ||
  fail "nas: best line '$(grep '^best' "$tmp/nas.out")' (best validation accuracy $best_val)"
nas_test=$(reported_test "$tmp/nas.out")
run test_nas 0 "$QNUM" test bert-tiny text-synthetic --load "$tmp/nas/best" --limit 96 --threads 1
grep -q "^accuracy  $nas_test\$" "$tmp/test_nas.out" ||
  fail "qnum test of nas/best: $(grep accuracy "$tmp/test_nas.out"), lab2-nas reported '$nas_test'"
expect_one_line_error exists "study 'lab2-nas-grid' already exists" "$LAB2_NAS" "${tiny[@]}" --trials 1 --samplers grid \
  --storage "sqlite:///$tmp/nas.db" --output-dir "$tmp/nas-again"
run nas2 0 "$LAB2_NAS" "${tiny[@]}" --trials 3 --samplers random,grid,tpe --output-dir "$tmp/nas2"
cmp -s "$tmp/nas/results.csv" "$tmp/nas2/results.csv" || fail "nas: a rerun with the same seed differs (results)"
cmp -s "$tmp/nas/trials.csv" "$tmp/nas2/trials.csv" || fail "nas: a rerun with the same seed differs (trials)"

# Hidden 16 is not a multiple of 3 heads: those trials end PRUNED with the reason.
run pruned 0 "$LAB2_NAS" --dataset text-synthetic --limit 96 --max-length 32 --layers 1,2 --heads 2,3 --hidden-sizes 16 \
  --intermediate-sizes 32 --threads 1 --no-progress --trials 4 --samplers random --output-dir "$tmp/pr"
grep -q ',,,,,,,PRUNED,"hidden_size=0 intermediate_size=0 num_attention_heads=1 num_hidden_layers=[01]"' \
  "$tmp/pr/trials.csv" || fail "pruned: no pruned trial: $(cat "$tmp/pr/trials.csv")"

# Compression-aware: three curves; the post-compression runs are written.
run comp 0 "$LAB2_COMPRESSION" "${tiny[@]}" --trials 2 --output-dir "$tmp/comp"
check_best comp "$tmp/comp/results.csv" "trial,nas,compress,compress-post" 2
[ "$(grep -c ',COMPLETE,' "$tmp/comp/trials.csv")" -eq 6 ] || fail "comp: not 6 completed trials"
[ -f "$tmp/comp/trials/compress-post-1/post/metrics.jsonl" ] || fail "comp: no post-compression run of trial 1"
[ ! -e "$tmp/comp/trials/compress-1/post" ] || fail "comp: the compress curve trained after compression"
check_plot comp "$tmp/comp"
grep -q '"curve": "compress' "$tmp/comp/best.json" || fail "comp: best.json is not a compressed curve's model"
grep -q '"weight_mask": true' "$tmp/comp/best.json" || fail "comp: the kept best model has no masks"
# Same seed: the nas curve equals lab2-nas's tpe curve.
[ "$(cut -d, -f2 "$tmp/comp/results.csv" | tail -n +2)" = "$(cut -d, -f4 "$tmp/nas/results.csv" | head -n 3 | tail -n +2)" ] ||
  fail "comp: nas curve differs from lab2-nas's tpe curve"
cat >"$tmp/prune.toml" <<'TOML'
[passes.prune]
weight = { sparsity = 0.9, method = "random", scope = "local" }
TOML
run comp2 0 "$LAB2_COMPRESSION" "${tiny[@]}" --trials 2 --samplers grid,tpe --compress-config "$tmp/prune.toml" \
  --post-epochs 2 --warmup-ratio 0.1 --weight-decay 0.01 --output-dir "$tmp/comp2"
check_best comp2 "$tmp/comp2/results.csv" \
  "trial,nas-grid,compress-grid,compress-post-grid,nas-tpe,compress-tpe,compress-post-tpe" 2
[ "$(wc -l <"$tmp/comp2/trials/compress-post-tpe-0/post/metrics.jsonl")" -eq 2 ] || fail "comp2: not 2 post epochs"

# Lab 2 task 2: compress lab2-nas's best (default config), with and without post-training.
run load 0 "$LAB2_COMPRESSION" "${data[@]}" --load "$tmp/nas/best.safetensors" --output-dir "$tmp/load"
[ "$(head -n 1 "$tmp/load/results.csv")" = "model,val_accuracy,test_accuracy,parameters,weight_sparsity" ] ||
  fail "load: results.csv header $(head -n 1 "$tmp/load/results.csv")"
[ "$(cut -d, -f1 "$tmp/load/results.csv" | tail -n +2 | tr '\n' ' ')" = "loaded compressed compressed+post " ] ||
  fail "load: results.csv rows $(cat "$tmp/load/results.csv")"
[ "$(grep '^loaded,' "$tmp/load/results.csv" | awk -F, '{printf "%.4f", $3}')" = "$nas_test" ] ||
  fail "load: the loaded model's test accuracy differs from lab2-nas's ($nas_test): $(cat "$tmp/load/results.csv")"
grep -Eq '^compressed,.*,0\.5[0-9]*$' "$tmp/load/results.csv" || fail "load: compressed model not 50% sparse"
[ "$(wc -l <"$tmp/load/post/metrics.jsonl")" -eq 1 ] || fail "load: no post-compression epoch"
for key in '"identity": true' '"weight_mask": true' '"integer:width=8,frac_width=4"' '"stage": "compressed'; do
  grep -q "$key" "$tmp/load/best.json" || fail "load: best.json lacks $key"
done
run test_load 0 "$QNUM" test bert-tiny text-synthetic --load "$tmp/load/best" --limit 96 --threads 1
grep -q "^accuracy  $(reported_test "$tmp/load.out")\$" "$tmp/test_load.out" ||
  fail "qnum test of load/best: $(grep accuracy "$tmp/test_load.out"), lab2-compression reported $(reported_test "$tmp/load.out")"

# Bad input: one line naming the problem, exit 2, no output folder.
run jsc 0 "$QNUM" train jsc-tiny jsc-synthetic --max-epochs 1 --threads 1 --output-dir "$tmp/jsc"
expect_one_line_error family "holds model 'jsc-tiny' \(feature rows\), not 'bert-tiny'" "$LAB2_COMPRESSION" "${data[@]}" \
  --load "$tmp/jsc/best.safetensors" --output-dir "$tmp/x14"
expect_one_line_error missing "checkpoint '$tmp/none.safetensors' not found" "$LAB2_COMPRESSION" "${data[@]}" \
  --load "$tmp/none" --output-dir "$tmp/x15"
expect_one_line_error search_option "--trials applies to the search" "$LAB2_COMPRESSION" "${data[@]}" --trials 3 \
  --load "$tmp/nas/best" --output-dir "$tmp/x16"
expect_one_line_error jsc_model "--model: 'jsc-tiny' is not a text model" "$LAB2_NAS" --model jsc-tiny --output-dir "$tmp/x17"
expect_one_line_error sampler "unknown sampler 'cmaes' \(allowed: grid, random, tpe\)" "$LAB2_NAS" --samplers tpe,cmaes \
  --output-dir "$tmp/x1"
expect_one_line_error trials "--trials must be >= 1" "$LAB2_NAS" --trials 0 --output-dir "$tmp/x2"
expect_one_line_error heads "num_attention_heads value 0 must be > 0" "$LAB2_NAS" "${tiny[@]}" --heads 0,2 --output-dir "$tmp/x3"
expect_one_line_error dup "hidden_size value 16 appears twice" "$LAB2_NAS" "${tiny[@]}" --hidden-sizes 16,16 \
  --output-dir "$tmp/x4"
expect_one_line_error choice "unknown linear layer choice 'conv'" "$LAB2_NAS" "${tiny[@]}" --linear-choices linear,conv \
  --output-dir "$tmp/x5"
expect_one_line_error dataset "unknown text dataset 'nope'" "$LAB2_NAS" --dataset nope --output-dir "$tmp/x6"
expect_one_line_error length "--max-length must be >= 2" "$LAB2_NAS" --max-length 1 --output-dir "$tmp/x7"
expect_one_line_error storage "storage" "$LAB2_NAS" --storage "bogus://x" --output-dir "$tmp/x8"
expect_one_line_error post "--post-epochs must be >= 1" "$LAB2_COMPRESSION" --post-epochs 0 --output-dir "$tmp/x9"
echo '{"quantize": {"by": "type"}, "lora": {}}' >"$tmp/bad.json"
expect_one_line_error section "unknown section 'lora'" "$LAB2_COMPRESSION" --compress-config "$tmp/bad.json" \
  --output-dir "$tmp/x10"
echo '{"prune": {"weight": {"sparsity": 1.5}}}' >"$tmp/bad2.json"
expect_one_line_error sparsity "weight.sparsity = 1.5 must be in \[0, 1\)" "$LAB2_COMPRESSION" --compress-config "$tmp/bad2.json" \
  --output-dir "$tmp/x11"
expect_one_line_error warmup "--warmup-ratio must be in \[0, 1\], got 1.5" "$LAB2_NAS" --warmup-ratio 1.5 \
  --output-dir "$tmp/x12"
expect_one_line_error decay "--weight-decay must be >= 0, got -1" "$LAB2_COMPRESSION" --weight-decay=-1 \
  --output-dir "$tmp/x13"
expect_one_line_error option "--unknown" "$LAB2_NAS" --unknown 3
for d in x1 x2 x3 x4 x5 x6 x7 x8 x9 x10 x11 x12 x13 x14 x15 x16 x17; do [ ! -e "$tmp/$d" ] || fail "$d: output directory created for bad input"; done

finish "labs.lab2"
