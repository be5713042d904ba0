#!/usr/bin/env bash
# `qnum export --to hf` end to end: a plain, a QAT-trained (weights quantized), a pruned and a
# LoRA-trained BERT on text-synthetic, each exported and loaded by transformers
# (check_hf_export.py: tokenizer ids and logits equal qnum predict's); bad input refused with
# one line. Runs with QNUM_PYTHON (the test venv); exit 77 (skipped) when it or transformers is
# absent — a failure under CI=true, where it must run.
set -u
source "$(dirname "$0")/../client_test_lib.sh" "transformers, torch"

model=bert:2-32-2-64
opts=(--limit 48 --max-length 24 --batch-size 16 --threads 1 --no-progress)
"$QNUM" train $model text-synthetic --max-epochs 1 --output-dir plain "${opts[@]}" > plain.out 2>&1 ||
  { echo "FAIL: training: $(tail -n 1 plain.out)"; exit 1; }
cat > wq.toml <<'TOML'
[passes.quantize]
by = "type"
[passes.quantize.default.config]
name = "NA"
[passes.quantize.linear.config]
name = "integer"
weight_width = 8
weight_frac_width = 6
bias_width = 8
bias_frac_width = 5
TOML
"$QNUM" train $model text-synthetic --max-epochs 1 --output-dir qat --quantize wq.toml "${opts[@]}" > qat.out 2>&1 ||
  bad "QAT training: $(tail -n 1 qat.out)"
printf '[passes.prune]\nweight = { sparsity = 0.5, method = "l1-norm", scope = "local" }\n' > prune.toml
"$QNUM" transform $model --config prune.toml --load plain/best --save pruned --limit 48 > prune.out 2>&1 ||
  bad "pruning: $(tail -n 1 prune.out)"
"$QNUM" train $model text-synthetic --max-epochs 1 --output-dir lora --load plain/best --lora-rank 4 "${opts[@]}" \
  > lora.out 2>&1 || bad "LoRA training: $(tail -n 1 lora.out)"

for case in plain:plain/best qat:qat/best pruned:pruned/transformed lora:lora/best; do
  name=${case%%:*} ckpt=${case#*:}
  "$QNUM" export $model --load "$ckpt" --to hf --output-dir "hf-$name" > "export-$name.out" 2>&1
  check "export $name exits 0 ($(tail -n 1 "export-$name.out"))" test $? -eq 0
  "$py" "$here/check_hf_export.py" "$QNUM" $model "$ckpt" "hf-$name" "$name" || bad "transformers check: $name"
done
check "LoRA export reports the fusion" grep -q "12 LoRA fused\|4 LoRA fused" export-lora.out

# An activation-quantized model: exported with its weights quantized and its activation
# formats recorded (transformers runs them in float), said in one note.
sed 's/^name = "integer"$/name = "integer"\ndata_in_width = 8\ndata_in_frac_width = 4/' wq.toml > aq.toml
"$QNUM" transform $model --config aq.toml --load plain/best --save aq --limit 48 > aq.out 2>&1 || bad "aq: $(tail -n 1 aq.out)"
"$QNUM" export $model --load aq/transformed --output-dir hf-aq > export-aq.out 2>&1
check "activation formats noted" grep -q "quantize activations" export-aq.out
check "activation formats recorded" grep -q '"activations_not_applied"' hf-aq/config.json

# Bad input, and nothing half-written.
expect_error "existing folder" "exists (pass --force to replace it)" "$QNUM" export $model --load plain/best --output-dir hf-plain
"$QNUM" export $model --load qat/best --output-dir hf-plain --force > /dev/null 2>&1
check "--force replaces the folder" cmp -s hf-plain/model.safetensors hf-qat/model.safetensors
check "no temporary folder left" test -z "$(ls -A | grep '^\.tmp\.')"
"$QNUM" train jsc-tiny jsc-synthetic --max-epochs 1 --output-dir jsc --no-progress > /dev/null 2>&1
expect_error "not a BERT" "is not a BERT" "$QNUM" export jsc-tiny --load jsc/best --output-dir hf-jsc
expect_error "HF weights without a vocabulary" "pass --vocab FILE" "$QNUM" export $model --load hf-qat/model.safetensors --output-dir again
"$QNUM" export $model --load qat/best --vocab hf-qat/vocab.txt --output-dir again > /dev/null 2>&1
check "the exported vocab.txt is the training vocabulary (--vocab)" cmp -s again/model.safetensors hf-qat/model.safetensors
head -n 20 hf-qat/vocab.txt > small-vocab.txt
expect_error "another vocabulary" "is not the one checkpoint" "$QNUM" export $model --load plain/best --vocab small-vocab.txt --output-dir x
check "failed exports wrote nothing" test ! -e hf-jsc -a ! -e x
echo "export.hf: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
