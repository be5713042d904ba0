#!/usr/bin/env bash
# The Lab 0 programs end to end on a one-layer BERT and the offline text set: lab0-graph's
# graphs per input variant (placeholders, the mask op, the loss), the dropout nodes counted,
# removed from the graph and from the model; lab0-lora's full vs LoRA runs (trainable counts,
# fused model equal to the adapted one), CSVs and plots, bad arguments exiting 2 with one line.
# Usage: test_lab0.sh   (LAB0_GRAPH, LAB0_LORA: the binaries)
set -uo pipefail

: "${LAB0_GRAPH:?set LAB0_GRAPH}" "${LAB0_LORA:?set LAB0_LORA}"
source "$(dirname "$0")/lib.sh"
# expect_error NAME PATTERN CMD...: exit 2; the last stderr line is the error matching PATTERN
# (an error found after the data loaded follows the data's summary line).
expect_error() {
  local name=$1 pattern=$2
  shift 2
  run "$name" 2 "$@" --output-dir "$tmp/$name"
  tail -n 1 "$tmp/$name.err" | grep -Eq -- "error: .*($pattern)" ||
    fail "$name: stderr '$(cat "$tmp/$name.err")' does not end in an error matching /$pattern/"
  [ "$(grep -c 'error:' "$tmp/$name.err")" -eq 1 ] || fail "$name: not exactly one error line"
}
model=(--model bert:1-32-2-64)

# lab0-graph: four graphs, one placeholder per input, the loss only with labels.
run graph 0 "$LAB0_GRAPH" "${model[@]}" --max-length 16 --batch 2 --output-dir "$tmp/graph"
g=$tmp/graph
[ "$(head -n 1 "$g/results.csv")" = "graph,nodes,placeholder,call_module,call_function,output,dropout" ] ||
  fail "graph: results.csv header"
[ "$(cut -d, -f1,3,6 "$g/results.csv" | tail -n +2 | tr '\n' ' ')" = \
  "input_ids,1,1 input_ids-attention_mask,2,1 input_ids-attention_mask-labels,3,1 no-dropout,3,1 " ] ||
  fail "graph: graphs or placeholder counts: $(cat "$g/results.csv")"
# One layer: embeddings, attention probabilities, attention output, FFN output, classifier.
[ "$(awk -F, '$1 == "input_ids-attention_mask-labels" { print $7 }' "$g/results.csv")" -eq 5 ] ||
  fail "graph: not 5 dropout nodes"
[ "$(awk -F, '$1 == "no-dropout" { print $7 }' "$g/results.csv")" -eq 0 ] || fail "graph: dropout left"
n_labels=$(awk -F, '$1 == "input_ids-attention_mask-labels" { print $2 }' "$g/results.csv")
n_free=$(awk -F, '$1 == "no-dropout" { print $2 }' "$g/results.csv")
[ $((n_labels - n_free)) -eq 5 ] || fail "graph: removing 5 dropout nodes left $n_free of $n_labels nodes"
grep -q "additive_attention_mask" "$g/graph-input_ids-attention_mask.txt" || fail "graph: no mask op with the mask"
grep -q "additive_attention_mask" "$g/graph-input_ids.txt" && fail "graph: a mask op without the mask input"
grep -q "cross_entropy" "$g/graph-input_ids-attention_mask-labels.txt" || fail "graph: no loss with labels"
grep -q "cross_entropy" "$g/graph-input_ids-attention_mask.txt" && fail "graph: a loss without labels"
# Edges: the labels placeholder feeds the loss; the removed dropout's consumer reads its input.
grep -Eq '^ *[0-9]+ +call_function +cross_entropy +cross_entropy +classifier,labels ' \
  "$g/graph-input_ids-attention_mask-labels.txt" || fail "graph: the loss does not read classifier and labels"
grep -Eq '^ *[0-9]+ +call_module +classifier +classifier +bert_pooler_activation ' "$g/graph-no-dropout.txt" ||
  fail "graph: after removal the classifier does not read the pooler"
for f in input_ids input_ids-attention_mask input_ids-attention_mask-labels no-dropout; do
  grep -q "^digraph" "$g/graph-$f.dot" || fail "graph: graph-$f.dot is not DOT"
done
[ "$(tail -n 1 "$g/dropout.csv" | cut -d, -f1,2,5)" = "after,0,0.000000000" ] ||
  fail "graph: dropout.csv after-row: $(tail -n 1 "$g/dropout.csv")"
awk -F, '$1 == "before" && $5 + 0 > 0 { ok = 1 } END { exit !ok }' "$g/dropout.csv" ||
  fail "graph: training-mode logits equal eval-mode ones before removal"
check_png "$g/plot.png"

# lab0-lora: full vs LoRA on a trained start; the fused model computes the adapted one's logits.
run lora 0 "$LAB0_LORA" "${model[@]}" --limit 48 --max-length 16 --rank 2 --threads 1 --no-progress \
  --output-dir "$tmp/lora"
l=$tmp/lora
[ "$(head -n 1 "$l/results.csv")" = "method,epoch,trainable_parameters,val_accuracy" ] || fail "lora: results header"
[ "$(cut -d, -f1,2 "$l/results.csv" | tail -n +2 | tr '\n' ' ')" = "full,0 full,1 lora,0 lora,1 " ] ||
  fail "lora: rows $(cat "$l/results.csv")"
full=$(awk -F, '$1 == "full" { print $2 }' "$l/summary.csv")
lora=$(awk -F, '$1 == "lora" { print $2 }' "$l/summary.csv")
total=$(awk -F, '$1 == "lora" { print $3 }' "$l/summary.csv")
[ -n "$lora" ] && [ "$lora" -gt 0 ] && [ "$lora" -lt "$full" ] || fail "lora: trainable $lora vs full $full"
[ "$full" -lt "$total" ] || fail "lora: adapters did not add parameters ($full vs $total)"
fused_total=$(awk -F, '$1 == "lora-fused" { print $3 }' "$l/summary.csv")
[ "$fused_total" -eq "$full" ] || fail "lora: the fused model has $fused_total parameters, not $full"
awk '/max \|diff\|/ { gap = $NF + 0; found = 1 } END { exit !(found && gap < 1e-4) }' "$tmp/lora.out" ||
  fail "lora: fused logits differ: $(grep 'max |diff|' "$tmp/lora.out")"
grep -q "lora_A" "$l/trainable-lora.txt" || fail "lora: the report lists no adapter"
check_png "$l/plot.png"

# Bad arguments.
expect_error g_model "unknown BERT model|unknown model" "$LAB0_GRAPH" --model bert-huge
expect_error g_len "--max-length must be >= 2" "$LAB0_GRAPH" --max-length 1
expect_error l_jsc "lab0-lora runs BERT models" "$LAB0_LORA" --model jsc-tiny
expect_error l_rank "--rank must be >= 1" "$LAB0_LORA" --rank 0
expect_error l_big "rank 64 is larger than layer" "$LAB0_LORA" "${model[@]}" --limit 16 --max-length 8 --rank 64 \
  --no-progress
expect_error l_target "matches no Linear" "$LAB0_LORA" "${model[@]}" --limit 16 --max-length 8 --target nothing \
  --no-progress

finish "lab0"
