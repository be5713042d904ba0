#!/usr/bin/env bash
# `qnum transform` and `qnum report` end to end on jsc-synthetic: train a small model, apply
# MASE's tutorial-3 quantize config and l1-norm pruning with fine-tuning, check the files,
# reload the transformed checkpoint with `qnum test`, and reject bad configs (exit 2, one
# line, input checkpoint untouched). Then the same commands on bert-tiny / text-synthetic
# (a briefly trained checkpoint, quantized and pruned, reloaded by `qnum test`; report; a
# config naming no layer warns with the layer names). A few seconds.
# Usage: QNUM=path/to/qnum bash test_transform.sh
set -u
QNUM=${QNUM:?set QNUM to the qnum binary}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
passed=0
failed=0
ok() { passed=$((passed + 1)); }
bad() { failed=$((failed + 1)); echo "FAIL: $*"; }
check() { local name=$1; shift; if "$@"; then ok; else bad "$name"; fi; }

# expect_error NAME PATTERN CMD...: exit code 2, one printable line on stderr containing PATTERN.
expect_error() {
  local name=$1 pattern=$2; shift 2
  "$@" > stdout 2> stderr
  local rc=$?
  if [ "$rc" -ne 2 ]; then bad "$name: exit code $rc, want 2 ($(cat stderr))"; return; fi
  if [ "$(wc -l < stderr)" -ne 1 ]; then bad "$name: $(wc -l < stderr) lines on stderr, want 1"; return; fi
  if tr -d '\n' < stderr | LC_ALL=C grep -q '[[:cntrl:]]'; then bad "$name: control bytes on stderr"; return; fi
  if ! grep -qF -- "$pattern" stderr; then bad "$name: stderr lacks '$pattern': $(cat stderr)"; return; fi
  ok
}

"$QNUM" train jsc-s jsc-synthetic --max-epochs 2 --output-dir run --no-progress > /dev/null 2>&1 ||
  { echo "FAIL: training the base model"; exit 1; }
sum_before=$(sha256sum run/best.safetensors)

cat > t.toml <<'TOML'
model = "jsc-s"
dataset = "jsc-synthetic"
load_name = "run/best.safetensors"
output_dir = "out"

[passes.quantize]
by = "type"
[passes.quantize.default.config]
name = "NA"
[passes.quantize.linear.config]
name = "integer"
data_in_width = 8
data_in_frac_width = 4
weight_width = 8
weight_frac_width = 4
bias_width = 8
bias_frac_width = 4

[passes.prune]
weight = { sparsity = 0.5, method = "l1-norm", scope = "local" }

[transform]
finetune_epochs = 1
TOML
"$QNUM" transform --config t.toml --json > summary.out 2> transform.err
check "transform exits 0" test $? -eq 0
for f in transformed.safetensors transformed.json quantize_table.csv quantize_histogram.csv prune.csv report.txt \
  graph.dot summary.json; do
  check "transform wrote $f" test -s "out/$f"
done
check "5 linears quantized" grep -q '"quantized_layers":5' summary.out
check "weight sparsity 0.5" grep -q '"weight_sparsity":0.5' summary.out
check "histogram row" grep -q '^Linear,linear,5,5,0$' out/quantize_histogram.csv
check "dot graph" grep -q '^digraph' out/graph.dot
check "report has BitOPs" grep -q 'BitOPs' out/report.txt
check "input checkpoint untouched" test "$(sha256sum run/best.safetensors)" = "$sum_before"

# The transformed checkpoint loads again (structure rebuilt) and evaluates to the same accuracy.
acc=$(sed -n 's/.*"finetuned":{[^}]*"accuracy":\([0-9.e-]*\).*/\1/p' summary.out)
"$QNUM" test jsc-s jsc-synthetic --load out/transformed.safetensors --json > test.out 2>&1
check "qnum test loads the transformed checkpoint" grep -q "\"accuracy\":$acc" test.out
"$QNUM" report jsc-s --load out/transformed.safetensors --dataset jsc-synthetic --batches 2 --dot g.dot > report.out
check "report exits 0" test $? -eq 0
check "report lists a quantized, pruned layer" grep -q 'QuantLinear(in_features=16, out_features=64.*pruned' report.out
check "report statistics" grep -q '2.data_in_0' report.out
check "report dot" grep -q 'n3 -> n4' g.dot

# Bad configs: named errors, nothing written over the input.
sed 's/^data_in_width = 8/data_in_widht = 8/' t.toml > typo.toml
expect_error "typo in a format key" "operand data_in: integer: unknown key 'widht'" "$QNUM" transform --config typo.toml
sed 's/^name = "integer"/name = "integr"/' t.toml > fmt.toml
expect_error "unknown format" "unknown format 'integr'" "$QNUM" transform --config fmt.toml
sed 's/^output_dir = "out"/output_dir = "run"/' t.toml > same.toml
expect_error "output over the input" "holds the input checkpoint" "$QNUM" transform --config same.toml
sed 's/sparsity = 0.5/sparsity = 1.5/' t.toml > sp.toml
expect_error "sparsity out of range" "must be in [0, 1)" "$QNUM" transform --config sp.toml
printf 'model = "jsc-s"\ndataset = "jsc-synthetic"\nload_name = "run/best.safetensors"\noutput_dir = "o2"\nlearning_rat = 1\n' > key.toml
expect_error "unknown top-level key" "unknown key 'learning_rat'" "$QNUM" transform --config key.toml
# Keys holding a newline and a control byte (TOML escapes in quoted keys, JSON \u0001) are
# quoted by the pass readers as they are; qnum::Error escapes them, so the error stays one line.
sed 's/^data_in_width = 8/"data_in\\nwid\\u0001th" = 8/' t.toml > ctl-quant.toml
expect_error "quantize key with control bytes" "unknown key 'data_in\\nwid\\x01th'" "$QNUM" transform --config ctl-quant.toml
sed 's/scope = "local" }/scope = "local", "x\\ny\\u0001" = 1 }/' t.toml > ctl-prune.toml
expect_error "prune key with control bytes" "unknown key 'weight.x\\ny\\x01'" "$QNUM" transform --config ctl-prune.toml
printf '{"model": "jsc-s", "dataset": "jsc-synthetic", "load_name": "run/best.safetensors", "output_dir": "o2",
 "passes": {"lora": {"rank": 2, "a\\n\\u0001b": 1}}}' > ctl-lora.json
expect_error "LoRA key with control bytes" "lora config: unknown key 'a\\n\\x01b'" "$QNUM" transform --config ctl-lora.json
printf '{"model": "jsc-s", "dataset": "jsc-synthetic", "load_name": "run/best.safetensors", "output_dir": "o2",
 "passes\\n\\u0001": {}}' > ctl-top.json
expect_error "top-level key with control bytes" "unknown key 'passes\\n\\x01'" "$QNUM" transform --config ctl-top.json
check "failed transforms wrote nothing" test ! -e o2 -a "$(ls out | wc -l)" -eq 9

# The same config as MASE's pass_args JSON.
cat > j.json <<'JSON'
{"model": "jsc-s", "dataset": "jsc-synthetic", "load_name": "run/best.safetensors", "output_dir": "out-json",
 "passes": {"quantize": {"by": "regex_name", "default": {"config": {"name": null}},
                         "^(2|5)$": {"config": {"name": "integer", "weight_width": 4, "weight_frac_width": 2}}},
            "lora": {"rank": 2, "alpha": 4.0}}}
JSON
"$QNUM" transform --config j.json --json > json.out 2>&1
check "JSON config" grep -q '"quantized_layers":2' json.out
check "JSON config: LoRA report" test -s out-json/trainable_parameters.txt
check "input checkpoint still untouched" test "$(sha256sum run/best.safetensors)" = "$sum_before"

# BERT through the same commands: bert-tiny trained briefly on text-synthetic, quantized and
# pruned from a config with the model given as MODEL, reloaded by `qnum test`.
bopts=(--limit 48 --max-length 24 --batch-size 16 --threads 1 --no-progress)
"$QNUM" train bert-tiny text-synthetic --max-epochs 1 --output-dir brun "${bopts[@]}" > btrain.out 2>&1 ||
  bad "bert-tiny training: $(tail -n 1 btrain.out)"
bsum=$(sha256sum brun/best.safetensors)
cat > b.toml <<'TOML'
batch_size = 16
[passes.quantize]
by = "type"
[passes.quantize.default.config]
name = "NA"
[passes.quantize.linear.config]
name = "integer"
data_in_width = 8
data_in_frac_width = 4
weight_width = 8
weight_frac_width = 7
bias_width = 8
bias_frac_width = 5
[passes.prune]
weight = { sparsity = 0.5, method = "l1-norm", scope = "local" }
TOML
"$QNUM" transform bert-tiny --config b.toml --load brun/best --save bout --limit 48 --json > bsummary.out 2> btransform.err
check "bert transform exits 0 ($(cat btransform.err))" test $? -eq 0
check "bert: 14 linears quantized" grep -q '"quantized_layers":14' bsummary.out
check "bert: weight sparsity 0.5" grep -q '"weight_sparsity":0.5' bsummary.out
check "bert: dataset from the checkpoint" grep -q '"dataset":"text-synthetic"' bsummary.out
check "bert: no warning" test ! -s btransform.err
check "bert: input checkpoint untouched" test "$(sha256sum brun/best.safetensors)" = "$bsum"
bacc=$(sed -n 's/.*"after":{[^}]*"accuracy":\([0-9.e-]*\).*/\1/p' bsummary.out)
"$QNUM" test bert-tiny text-synthetic --load bout/transformed --limit 48 --json > btest.out 2>&1
check "qnum test loads the transformed bert-tiny ($bacc: $(cat btest.out))" grep -q "\"accuracy\":$bacc" btest.out
check "bert: max_length recorded" grep -q '"max_length":24' btest.out
"$QNUM" report bert-tiny --load bout/transformed --batch-size 2 --seq-len 8 --dot bg.dot > breport.out 2>&1
check "bert report exits 0" test $? -eq 0
check "bert report lists a quantized, pruned attention layer" \
  grep -q 'bert.encoder.layer.0.attention.self.query.*QuantLinear.*pruned' breport.out
check "bert report FLOPs for texts" grep -q 'batch of 2 texts of 8 tokens' breport.out
check "bert report dot" grep -q '^digraph' bg.dot
# Activation statistics of a text model: its own data through its Forward, at the run's length.
"$QNUM" report bert-tiny --load bout/transformed --dataset text-synthetic --batches 2 --batch-size 4 > bstats.out 2>&1
check "bert report --dataset exits 0 ($(tail -n 1 bstats.out))" test $? -eq 0
check "bert statistics over 2 batches at the run's 24 tokens" \
  grep -q "over 2 batch(es) of text-synthetic, 24 tokens per text" bstats.out
check "bert statistics: the classifier's input, 2 batches x 4 texts x 128 features" \
  grep -Eq '^classifier.data_in_0 +activation +1024 ' bstats.out

# A config naming no layer of the model warns on stderr with the model's layer names.
printf '[passes.quantize]\nby = "name"\n[passes.quantize.default.config]\nname = "NA"\n[passes.quantize.fc1.config]\nname = "integer"\n' > nomatch.toml
"$QNUM" transform bert-tiny --config nomatch.toml --load brun/best --save bout2 --limit 16 > /dev/null 2> nomatch.err
check "unmatched name: exit 0" test $? -eq 0
check "unmatched name: warning lists the layers" \
  grep -q "warning: quantize config: 'fc1' matches no quantizable layer (layers: .*bert.encoder.layer.0.attention.self.query" nomatch.err
printf '[passes.quantize]\nby = "type"\n[passes.quantize.conv2d.config]\nname = "integer"\n' > notype.toml
"$QNUM" transform jsc-s --config notype.toml --load run/best --save out3 --dataset jsc-synthetic > /dev/null 2> notype.err
check "unmatched type: exit 0" test $? -eq 0
check "unmatched type: warning lists the layers" grep -q "matched no layer of jsc-s (layers: .*2" notype.err

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
