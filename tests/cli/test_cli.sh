#!/usr/bin/env bash
# Behaviour of the qnum command line: listings, exit codes, one-line errors, atomic output,
# and train/test of jsc-tiny on jsc-synthetic (a few seconds).
# Usage: QNUM=path/to/qnum bash test_cli.sh
set -u
QNUM=${QNUM:?set QNUM to the qnum binary}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
passed=0
failed=0

ok() { passed=$((passed + 1)); }
bad() { failed=$((failed + 1)); echo "FAIL: $*"; }

# npy FILE DESCR FORTRAN SHAPE NBYTES: writes a v1.0 .npy header followed by NBYTES zero bytes.
npy() {
  local file=$1 descr=$2 fortran=$3 shape=$4 nbytes=$5
  local dict="{'descr': '$descr', 'fortran_order': $fortran, 'shape': $shape, }"
  local total=$((10 + ${#dict} + 1))
  local pad=$(((64 - total % 64) % 64))
  dict="$dict$(printf '%*s' "$pad" '')"
  local len=$((${#dict} + 1))
  { printf '\x93NUMPY\x01\x00'; printf "\\x$(printf %02x $((len & 255)))\\x$(printf %02x $((len >> 8)))";
    printf '%s\n' "$dict"; head -c "$nbytes" /dev/zero; } > "$file"
}

# expect_error NAME CMD...: exit code 2, exactly one printable line on stderr, nothing on stdout, no OUT.
expect_error() {
  local name=$1; shift
  rm -f "$work/out.npy"
  "$@" > "$work/stdout" 2> "$work/stderr"
  local rc=$?
  local lines
  lines=$(wc -l < "$work/stderr")
  if [ "$rc" -ne 2 ]; then bad "$name: exit code $rc, want 2 ($(cat "$work/stderr"))"; return; fi
  if [ "$lines" -ne 1 ]; then bad "$name: $lines lines on stderr, want 1"; return; fi
  if tr -d '\n' < "$work/stderr" | LC_ALL=C grep -q '[[:cntrl:]]'; then bad "$name: control bytes on stderr"; return; fi
  if [ -e "$work/out.npy" ]; then bad "$name: OUT was created"; return; fi
  if ls -a "$work" | grep -q '^\.tmp\.'; then bad "$name: temporary file left behind"; return; fi
  ok
}

# ---- listings ------------------------------------------------------------------------------
out=$("$QNUM" formats) || bad "formats exit code"
for fam in integer minifloat_denorm minifloat_ieee log block_fp block_minifloat block_log binary ternary \
           scale_integer mxint mxfp fp8_e4m3 fp8_e5m2 mxint8 mxfp4_e2m1; do
  if grep -q "$fam" <<< "$out"; then ok; else bad "formats does not list $fam"; fi
done
d=$("$QNUM" formats --describe fp8_e4m3)
grep -q "max *448$" <<< "$d" && ok || bad "fp8_e4m3 max: $d"
grep -q "bits per value *8$" <<< "$d" && ok || bad "fp8_e4m3 bits: $d"
d=$("$QNUM" formats --describe mxint8)
grep -q "bits per value *8.25$" <<< "$d" && ok || bad "mxint8 bits: $d"
d=$("$QNUM" formats --describe integer:width=8,frac_width=4)
grep -q "distinct values *256$" <<< "$d" && ok || bad "integer distinct: $d"
grep -q "min positive *0.0625$" <<< "$d" && ok || bad "integer min positive: $d"

# ---- quantize round trip -------------------------------------------------------------------
npy "$work/zeros.npy" '<f4' False '(4, 8)' 128
"$QNUM" quantize --format integer:width=8,frac_width=4 "$work/zeros.npy" "$work/q.npy" && ok || bad "quantize zeros"
cmp -s "$work/zeros.npy" "$work/q.npy" && ok || bad "zeros quantize to an identical .npy"

# ---- bad specs -----------------------------------------------------------------------------
in="$work/zeros.npy"
for spec in "nosuch:width=8" "integer:widht=8" "integer:width=0" "integer:width=99" \
            "minifloat_ieee:width=8,exponent_width=8" "minifloat_ieee:width=8,exponent_width=9" \
            "block_fp:block_size=0" "mxint:block_size=0" "integer:width=8,frac_width=1000" "integer:width=abc" \
            "integer:width" "integer:" ":width=8" "integer:width=8,width=8" "log:width=1" \
            "mxfp:exponent_width=4,frac_width=3,scale_exp_bits=5"; do
  expect_error "spec '$spec'" "$QNUM" quantize --format "$spec" "$in" "$work/out.npy"
done
expect_error "bad mode" "$QNUM" quantize --format integer --mode fast "$in" "$work/out.npy"
expect_error "bad role" "$QNUM" quantize --format integer --role bogus "$in" "$work/out.npy"

# ---- bad files -----------------------------------------------------------------------------
npy "$work/trunc.npy" '<f4' False '(4, 8)' 100
expect_error "truncated npy" "$QNUM" quantize --format integer "$work/trunc.npy" "$work/out.npy"
npy "$work/f64.npy" '<f8' False '(4,)' 32
expect_error "float64 npy" "$QNUM" quantize --format integer "$work/f64.npy" "$work/out.npy"
npy "$work/fortran.npy" '<f4' True '(4, 8)' 128
expect_error "fortran npy" "$QNUM" quantize --format integer "$work/fortran.npy" "$work/out.npy"
# Found by fuzzing (fuzz/fuzz_npy.cpp): a shape whose element count overflows 64 bits.
npy "$work/overflow.npy" '<f4' False '(4, 1615, 20000, 2056353930, 205635393)' 0
expect_error "overflowing npy shape" "$QNUM" quantize --format integer "$work/overflow.npy" "$work/out.npy"
grep -q "overflows 64 bits at dimension 4, of size 205635393" "$work/stderr" && ok || bad "overflow message: $(cat "$work/stderr")"
# Found by fuzzing (fuzz/fuzz_pass_config.cpp): toml++ quotes the bad character, here a newline.
printf 'max_epochs = t\n\n' > "$work/newline.toml"
expect_error "TOML error quoting a newline" "$QNUM" train --config "$work/newline.toml"
# toml++ 3.3.0 has undefined behaviour on non-ASCII where it tests for whitespace
# (io/toml_guard.hpp refuses it first); non-ASCII in strings and comments still reads.
printf 'max_epochs = 1\xc2\xa7\n' > "$work/nonascii.toml"
expect_error "TOML non-ASCII outside a string" "$QNUM" train --config "$work/nonascii.toml"
printf 'model = "jsc-tiny" # caf\xc3\xa9\nmax_epochs = "\xc3\xa9"\n' > "$work/nonascii.toml"
expect_error "TOML non-ASCII in a string reaches the type check" "$QNUM" train --config "$work/nonascii.toml"
# fuzz_pass_config: a JSON number past double's range is a one-line error, not an exception.
printf '99e998999999999' > "$work/overflow.json"
expect_error "JSON number overflow" "$QNUM" transform --config "$work/overflow.json"
printf '{"data_i\\n_}": 1}' > "$work/keynewline.json"
expect_error "JSON key with an escaped newline" "$QNUM" transform --config "$work/keynewline.json"
# fuzz_pass_config: JSON nested a million deep parsed, then overflowed the stack where it was
# copied; nesting past 128 levels is refused as it is read (io/json.hpp).
{ printf '{"model": "jsc-tiny", "passes": {"quantize": '; head -c 1000000 /dev/zero | tr '\0' '['
  head -c 1000000 /dev/zero | tr '\0' ']'; printf '}}'; } > "$work/deep.json"
expect_error "JSON nested a million deep" "$QNUM" transform --config "$work/deep.json"
grep -q "deep.json: nests deeper than 128 levels" "$work/stderr" && ok || bad "deep JSON message: $(cat "$work/stderr")"
# TOML nested 200 deep: toml++ reads it (its own bound is 256), the same bound refuses it.
{ printf 'model = "jsc-tiny"\nx = '; printf '[%.0s' {1..200}; printf '1'; printf ']%.0s' {1..200}; echo; } \
  > "$work/deep.toml"
expect_error "TOML nested 200 deep" "$QNUM" transform --config "$work/deep.toml"
grep -q "deep.toml: nests deeper than 128 levels" "$work/stderr" && ok || bad "deep TOML message: $(cat "$work/stderr")"
echo "hello, world" > "$work/text.npy"
expect_error "not npy" "$QNUM" quantize --format integer "$work/text.npy" "$work/out.npy"
expect_error "missing input" "$QNUM" quantize --format integer "$work/nope.npy" "$work/out.npy"
expect_error "missing operand" "$QNUM" quantize --format integer "$work/zeros.npy"

# A failing run leaves an existing OUT untouched.
echo "precious" > "$work/keep.npy"
"$QNUM" quantize --format integer:width=0 "$in" "$work/keep.npy" 2>/dev/null
[ "$(cat "$work/keep.npy")" = "precious" ] && ok || bad "existing OUT was modified on failure"
"$QNUM" quantize --format integer "$work/trunc.npy" "$work/keep.npy" 2>/dev/null
[ "$(cat "$work/keep.npy")" = "precious" ] && ok || bad "existing OUT was modified on bad input"

# ---- bench: bad arguments exit 2 with one line; a small run prints JSON -----------------------
expect_error "bench gemm kind" "$QNUM" bench gemm --kind foo
expect_error "bench gemm m=0" "$QNUM" bench gemm --m 0
expect_error "bench attention seq=0" "$QNUM" bench attention --seq 0
expect_error "bench attention head-dim=0" "$QNUM" bench attention --head-dim 0
expect_error "bench quantize bad spec" "$QNUM" bench quantize --format nosuch
expect_error "bench quantize size=0" "$QNUM" bench quantize --format integer --size 0
expect_error "bench threads=0" "$QNUM" bench gemm --threads 0
out=$("$QNUM" bench quantize --format fp8_e4m3 --size 4096 --json) && ok || bad "bench quantize exit code"
grep -q '"ratio"' <<< "$out" && ok || bad "bench quantize JSON: $out"
# residual_sign writes two levels per input: the bench sizes its output buffer by output_shape.
expect_error "bench quantize sigma=0" "$QNUM" bench quantize --format integer --size 64 --sigma 0
out=$("$QNUM" bench quantize --format block_log --mode mase --size 4096 --sigma 0.02 --json) && ok || bad "bench sigma: $out"
grep -q '"sigma": 0.02' <<< "$out" && ok || bad "bench quantize JSON sigma: $out"
out=$("$QNUM" bench quantize --format residual_sign --size 4096 --json) && ok || bad "bench residual_sign: $out"
grep -q '"format": "residual_sign' <<< "$out" && ok || bad "bench residual_sign JSON: $out"
# a BERT training step in each precision: the same model and batch, losses close, engines named
for p in fp32 bf16; do
  out=$("$QNUM" bench train-step --model bert:1-32-2-64 --batch 2 --seq 8 --steps 1 --precision $p --json) && ok ||
    bad "bench train-step $p: $out"
  grep -q "\"precision\":\"$p\"" <<< "$out" && grep -q '"median_ms":' <<< "$out" && grep -q '"engine":' <<< "$out" &&
    ok || bad "bench train-step $p JSON: $out"
done
expect_error "bench train-step precision" "$QNUM" bench train-step --precision fp16
expect_error "bench train-step model" "$QNUM" bench train-step --model jsc-tiny
# inference per format: the packed int8 (W8A8) and MXINT8 models run, their logits near fp32's
out=$("$QNUM" bench infer --model bert:1-64-2-128 --batch 2 --seq 8 --steps 1 --json) && ok || bad "bench infer: $out"
for f in fp32 int8 mxint8; do grep -q "\"format\":\"$f\"" <<< "$out" && ok || bad "bench infer $f: $out"; done
grep -q '"format":"fp32","linear_weight_bytes":[0-9]*,"max_abs_logit_diff":null' <<< "$out" &&
  grep -Eq '"format":"int8","linear_weight_bytes":[0-9]+,"max_abs_logit_diff":[0-9.e-]+,' <<< "$out" && ok ||
  bad "bench infer JSON: $out"
out=$("$QNUM" bench infer --model bert:1-64-2-128 --batch 1 --seq 4 --steps 1) && grep -q "max |dlogit|" <<< "$out" &&
  ok || bad "bench infer table: $out"
expect_error "bench infer format" "$QNUM" bench infer --formats fp32,nvfp4
expect_error "bench infer model" "$QNUM" bench infer --model jsc-tiny
out=$("$QNUM" bench gemm --kind bf16 --m 64 --n 48 --k 33 --json) && grep -q '"kind": "bf16"' <<< "$out" && ok ||
  bad "bench gemm --kind bf16: $out"
# run-time ISA dispatch: QNUM_MAX_ISA caps the level; an unknown level is a one-line error
out=$(QNUM_MAX_ISA=baseline "$QNUM" bench quantize --format fp8_e4m3 --size 4096 --json) && ok || bad "bench capped"
grep -q '"isa": "baseline"' <<< "$out" && ok || bad "QNUM_MAX_ISA=baseline not honoured: $out"
expect_error "QNUM_MAX_ISA unknown" env QNUM_MAX_ISA=avx9 "$QNUM" bench quantize --format fp8_e4m3 --size 64
grep -q "QNUM_MAX_ISA=avx9" "$work/stderr" && ok || bad "QNUM_MAX_ISA message: $(cat "$work/stderr")"
out=$("$QNUM" bench gemm --m 16 --n 16 --k 64 --kind mxint8 --json) && ok || bad "bench gemm exit code"
grep -q '"fp32_gflops"' <<< "$out" && ok || bad "bench gemm JSON: $out"
out=$("$QNUM" bench attention --seq 16 --heads 1 --head-dim 16 --json) && ok || bad "bench attention exit code"
grep -q '"naive_ms"' <<< "$out" && ok || bad "bench attention JSON: $out"

# ---- demo ----------------------------------------------------------------------------------
out=$("$QNUM" demo --size 4096) && ok || bad "demo exit code"
grep -q "fp8_e4m3" <<< "$out" && ok || bad "demo table lacks fp8_e4m3"
# A format MASE lacks says why in its row (issue 49: "n/a" alone hid every error).
! grep "n/a" <<< "$out" | grep -qv "n/a  (" && grep -qi "n/a  (.*mase" <<< "$out" && ok ||
  bad "demo: an n/a row without its reason: $(grep "n/a" <<< "$out" | head -n 2)"

# ---- train / test (jsc-tiny on jsc-synthetic: ~1 s an epoch) ---------------------------------
# stderr_has NAME TEXT: the last expect_error's message contains TEXT.
stderr_has() { grep -qF -- "$2" "$work/stderr" && ok || bad "$1: message lacks '$2': $(cat "$work/stderr")"; }
# An argument CLI11 rejects is quoted by CLI11 itself; main escapes it the same way.
expect_error "unexpected argument with a newline" "$QNUM" formats $'x\ny\x01'
stderr_has "unexpected argument with a newline" 'not expected: x\ny\x01'
run="$work/run"
out=$("$QNUM" train jsc-tiny jsc-synthetic --max-epochs 2 --output-dir "$run" --no-progress) && ok ||
  bad "train exit code: $out"
[ "$(wc -l < "$run/metrics.jsonl" 2>/dev/null)" = 2 ] && ok || bad "metrics.jsonl does not have 2 lines"
for key in epoch train_loss val_loss val_accuracy seconds; do
  [ "$(grep -c "\"$key\":" "$run/metrics.jsonl" 2>/dev/null)" = 2 ] && ok || bad "metrics.jsonl lacks $key"
done
for f in best.safetensors best.json last.safetensors last.json; do
  [ -s "$run/$f" ] && ok || bad "train did not write $f"
done
grep -q "^test .*accuracy 0\.[0-9]*" <<< "$out" && ok || bad "train prints no test accuracy: $out"
grep -qF "$run/best.safetensors" <<< "$out" && ok || bad "train does not say where the checkpoints are: $out"
out=$("$QNUM" test jsc-tiny jsc-synthetic --load "$run/best.safetensors") && ok || bad "test exit code: $out"
grep -q "^accuracy *0\.[0-9]*$" <<< "$out" && ok || bad "test prints no accuracy: $out"
out=$("$QNUM" test jsc-tiny jsc-synthetic --load "$run/best" --json) && ok || bad "test --json exit code"
grep -q '"accuracy":0\.[0-9]*' <<< "$out" && ok || bad "test --json: $out"
# --resume continues the saved run: a 3rd epoch appended to the two
"$QNUM" train jsc-tiny jsc-synthetic --max-epochs 3 --output-dir "$run" --resume --no-progress > /dev/null &&
  ok || bad "train --resume exit code"
[ "$(wc -l < "$run/metrics.jsonl")" = 3 ] && ok || bad "resume: metrics.jsonl does not have 3 lines"
grep -q '^{"epoch":3,' <<< "$(tail -n 1 "$run/metrics.jsonl")" && ok || bad "resume: last record is not epoch 3"
# the same run from a TOML file (MASE's keys and spellings) gives the same losses
printf '%s\n' '# MASE lab 1, offline' 'model = "jsc-tiny"' 'dataset = "jsc-synthetic"' 'max_epochs = 2' \
  'batch_size = 256' 'learning_rate = 1e-3' 'seed = 0' 'training_optimizer = "adam"' \
  "project_dir = \"$work/run-toml\"" > "$work/run.toml"
"$QNUM" train --config "$work/run.toml" --no-progress > /dev/null && ok || bad "train --config exit code"
[ "$(cut -d, -f1-4 "$work/run-toml/metrics.jsonl" 2>/dev/null)" = "$(head -n 2 "$run/metrics.jsonl" | cut -d, -f1-4)" ] &&
  ok || bad "train --config: metrics differ from the command-line run"
# --precision bf16 (bf16 products, fp32 weights): the run records it, qnum test evaluates in it by
# default and in fp32 when asked; the TOML key takes Lightning's spelling; the same run by both.
run16="$work/run-bf16"
out=$("$QNUM" train jsc-tiny jsc-synthetic --max-epochs 2 --precision bf16 --output-dir "$run16" --no-progress) &&
  ok || bad "train --precision bf16 exit code: $out"
grep -q "precision bf16" <<< "$out" && ok || bad "train --precision bf16 does not say so: $out"
grep -q '"precision": *"bf16"' "$run16/last.json" && ok || bad "the bf16 run's checkpoint does not record it"
[ "$(cut -d, -f1-4 "$run16/metrics.jsonl")" != "$(head -n 2 "$run/metrics.jsonl" | cut -d, -f1-4)" ] &&
  ok || bad "train --precision bf16 gave fp32's losses (the products were not rounded)"
t16=$("$QNUM" test jsc-tiny jsc-synthetic --load "$run16/best" --json) && ok || bad "test of a bf16 run"
grep -q '"precision":"bf16"' <<< "$t16" && ok || bad "test does not evaluate a bf16 run in bf16: $t16"
t32=$("$QNUM" test jsc-tiny jsc-synthetic --load "$run16/best" --json --precision fp32) && ok ||
  bad "test --precision fp32 of a bf16 run"
! grep -q '"precision"' <<< "$t32" && [ "$t32" != "$t16" ] && ok || bad "test --precision fp32: $t32 vs $t16"
printf '%s\n' 'model = "jsc-tiny"' 'dataset = "jsc-synthetic"' 'max_epochs = 2' 'precision = "bf16-mixed"' \
  "output_dir = \"$work/run-bf16-toml\"" > "$work/bf16.toml"
"$QNUM" train --config "$work/bf16.toml" --no-progress > /dev/null && ok || bad "TOML precision exit code"
[ "$(cut -d, -f1-4 "$work/run-bf16-toml/metrics.jsonl" 2>/dev/null)" = "$(cut -d, -f1-4 "$run16/metrics.jsonl")" ] &&
  ok || bad "TOML precision = bf16-mixed: metrics differ from --precision bf16"
expect_error "unknown precision" "$QNUM" train jsc-tiny jsc-synthetic --precision fp16
stderr_has "unknown precision" "precision 'fp16' is unknown (known: fp32, bf16"
printf 'precision = "half"\n' > "$work/bad.toml"
expect_error "unknown TOML precision" "$QNUM" train jsc-tiny jsc-synthetic --config "$work/bad.toml"
stderr_has "unknown TOML precision" "bad.toml:1:"
# bad input: one line, exit 2
printf 'model = "jsc-tiny"\nbatchsize = 256\n' > "$work/bad.toml"
expect_error "unknown TOML key" "$QNUM" train --config "$work/bad.toml"
stderr_has "unknown TOML key" "'batchsize'"
stderr_has "unknown TOML key" "batch_size"
printf 'max_epochs = "2"\n' > "$work/bad.toml"
expect_error "TOML type" "$QNUM" train jsc-tiny jsc-synthetic --config "$work/bad.toml"
stderr_has "TOML type" "'max_epochs' must be an integer"
printf 'max_epochs = \n' > "$work/bad.toml"
expect_error "TOML syntax" "$QNUM" train jsc-tiny jsc-synthetic --config "$work/bad.toml"
stderr_has "TOML syntax" "bad.toml:1:"
expect_error "unknown model" "$QNUM" train jsc-huge jsc-synthetic
stderr_has "unknown model" "jsc-tiny"
stderr_has "unknown model" "BERT: bert-tiny"
expect_error "unknown dataset" "$QNUM" train jsc-tiny mnist
stderr_has "unknown dataset" "jsc-synthetic"
stderr_has "unknown dataset" "imdb and text-synthetic are for BERT"
expect_error "unknown optimizer" "$QNUM" train jsc-tiny jsc-synthetic --optimizer lion
expect_error "no dataset" "$QNUM" train jsc-tiny
expect_error "resume without run" "$QNUM" train jsc-tiny jsc-synthetic --output-dir "$work/none" --resume
expect_error "test other model" "$QNUM" test jsc-s jsc-synthetic --load "$run/best"
stderr_has "test other model" "holds model 'jsc-tiny' (feature rows), not 'jsc-s'"
expect_error "test missing checkpoint" "$QNUM" test jsc-tiny jsc-synthetic --load "$work/none/best"
mkdir -p "$work/data" "$work/home" "$work/cache"
expect_error "jsc without data" env QNUM_DATA_DIR="$work/data" HOME="$work/home" XDG_CACHE_HOME="$work/cache" \
  "$QNUM" train jsc-tiny jsc --output-dir "$work/run-jsc"
stderr_has "jsc without data" "put hls4ml_lhc_jets_hlf.arff"
stderr_has "jsc without data" "$work/data/jsc/"
[ ! -e "$work/run-jsc" ] && ok || bad "jsc without data created the output directory"

# BERT through the same commands on text-synthetic: the text recipe by default, --resume
# extending a run (bit-identity of resume: tests/bert), predict on the user's own texts, bad
# input.
bert=bert:1-32-2-64
bopts=(--limit 48 --max-length 24 --batch-size 16 --threads 1 --no-progress)
"$QNUM" train $bert text-synthetic --max-epochs 1 --output-dir "$work/bert" "${bopts[@]}" > "$work/bert.out" 2>&1 &&
  ok || bad "bert train exit code ($(tail -n 1 "$work/bert.out"))"
grep -q "optimizer adamw, schedule linear per step (warmup_ratio 0.06), weight_decay 0.01, max_grad_norm 1" \
  "$work/bert.out" && ok || bad "bert: the text recipe is not the default"
"$QNUM" train $bert text-synthetic --max-epochs 2 --output-dir "$work/bert" --resume "${bopts[@]}" > /dev/null 2>&1 &&
  ok || bad "bert train --resume exit code"
[ "$(wc -l < "$work/bert/metrics.jsonl")" = 2 ] && grep -q '^{"epoch":2,' <<< "$(tail -n 1 "$work/bert/metrics.jsonl")" &&
  ok || bad "bert --resume: metrics.jsonl lacks epoch 2"
"$QNUM" predict $bert --load "$work/bert/best" "a good film" "not a good film" > "$work/pred.out" 2>&1 && ok ||
  bad "predict exit code ($(cat "$work/pred.out"))"
[ "$(grep -cE $'^(positive|negative)\t[01][.][0-9]{4} [01][.][0-9]{4}\t' "$work/pred.out")" = 2 ] && ok ||
  bad "predict: want 2 lines 'label<TAB>p0 p1<TAB>text', got $(cat "$work/pred.out")"
printf 'a good film\n\nthe plot is bad\n' | "$QNUM" predict $bert --load "$work/bert/best" --json > "$work/pred.json" &&
  ok || bad "predict --json from stdin exit code"
[ "$(grep -c '"probabilities":\[' "$work/pred.json")" = 2 ] && ok || bad "predict --json: want 2 objects"
expect_error "predict no input" "$QNUM" predict $bert --load "$work/bert/best" --input /dev/null
stderr_has "predict no input" "nothing to classify"
expect_error "predict jsc checkpoint" "$QNUM" predict $bert --load "$run/best" "a film"
stderr_has "predict jsc checkpoint" "holds model 'jsc-tiny' (feature rows), not '$bert'"
# A feature model on raw rows (standardised with the statistics its checkpoint records); a
# header line naming the features is skipped; the same rows from arguments, a file and stdin
# give the same lines.
names=$(tr -d ' \n' < "$run/best.json" | grep -o '"names":\[[^]]*\]' | head -n 1 | sed 's/.*\[//; s/\]//; s/"//g')
row=1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16 row2=0.5,-1,0,2,0,0,1,1,1,-3,0,0,0,0.25,0,9
"$QNUM" predict jsc-tiny --load "$run/best" "$row" "$row2" > "$work/fpred.out" 2>&1 && ok ||
  bad "predict jsc-tiny exit code ($(cat "$work/fpred.out"))"
[ "$(grep -cE $'^[gqwzt]\t([01][.][0-9]{4} ){4}[01][.][0-9]{4}\t' "$work/fpred.out")" = 2 ] && ok ||
  bad "predict jsc-tiny: want 2 lines 'label<TAB>p0 .. p4<TAB>row', got $(cat "$work/fpred.out")"
[ "$(echo "$names" | tr ',' '\n' | wc -l)" = 16 ] && ok || bad "best.json: want 16 feature names, got '$names'"
printf '%s\n%s\n%s\n' "$names" "$row" "$row2" > "$work/rows.csv"
"$QNUM" predict jsc-tiny --load "$run/best" --input "$work/rows.csv" > "$work/fpred2.out" 2>&1 &&
  cmp -s "$work/fpred.out" "$work/fpred2.out" && ok || bad "predict --input with a header differs from arguments"
"$QNUM" predict jsc-tiny --load "$run/best" --json < "$work/rows.csv" > "$work/fpred.json" 2>&1 &&
  [ "$(grep -c '"probabilities":\[' "$work/fpred.json")" = 2 ] && ok || bad "predict jsc-tiny --json from stdin"
expect_error "predict row width" "$QNUM" predict jsc-tiny --load "$run/best" "a film"
stderr_has "predict row width" "row 1 has 1 values, the model takes 16"
expect_error "predict row number" "$QNUM" predict jsc-tiny --load "$run/best" "${row/7/x}"
stderr_has "predict row number" "'x' is not a finite float32 number"
expect_error "predict row overflow" "$QNUM" predict jsc-tiny --load "$run/best" "${row/7/1e39}"
stderr_has "predict row overflow" "'1e39' is not a finite float32 number"
# A checkpoint of an older qnum: the metadata key renamed in place (same length, same header size).
LC_ALL=C sed 's/\\"features\\"/\\"featurez\\"/' "$run/best.safetensors" > "$work/old.safetensors"
expect_error "predict no statistics" "$QNUM" predict jsc-tiny --load "$work/old" "$row"
stderr_has "predict no statistics" "records no feature statistics"
# qnum test: the options of text data refused for feature rows; another tokenizer refused.
expect_error "test --limit on a feature model" "$QNUM" test jsc-tiny jsc-synthetic --load "$run/best" --limit 5
stderr_has "test --limit on a feature model" "--limit applies to BERT models only, not to jsc-tiny"
expect_error "test --max-length on a feature model" "$QNUM" test jsc-tiny jsc-synthetic --load "$run/best" --max-length 5
"$QNUM" test $bert text-synthetic --load "$work/bert/best" --limit 16 --json > "$work/btest.json" 2>&1 && ok ||
  bad "test bert exit code ($(cat "$work/btest.json"))"
# Packed checkpoints: a QAT run with 8-bit integer Linears exported W8A8 tests with the same
# accuracy and loss as the fake-quantized model (bits equal: every in_features <= 1024); an
# MXINT8 export of the float run tests close to it; a float model cannot be packed int8.
"$QNUM" train $bert text-synthetic --max-epochs 1 --output-dir "$work/bertq" "${bopts[@]}" \
  --quantize "$(dirname "$0")/../../examples/configs/bert_int8_qat.toml" > /dev/null 2>&1 && ok || bad "bert QAT train"
"$QNUM" export $bert --load "$work/bertq/best" --to packed-int8 --output-dir "$work/packed8" > "$work/pk.out" 2>&1 &&
  grep -q "Linears packed int8 (W8A8)" "$work/pk.out" && ok || bad "export packed-int8: $(cat "$work/pk.out")"
grep -q '"kind": "int8"' "$work/packed8/model.json" && ok || bad "packed-int8: no packed metadata"
tq=$("$QNUM" test $bert text-synthetic --load "$work/bertq/best" --limit 16 --json 2>&1) &&
  tp=$("$QNUM" test $bert text-synthetic --load "$work/packed8/model" --limit 16 --json 2>&1) && ok ||
  bad "test of the packed model: $tp"
al() { grep -oE '"(accuracy|loss)":[^,}]*' <<< "$1"; }
[ "$(al "$tq")" = "$(al "$tp")" ] && [ "$(al "$tp" | wc -l)" = 2 ] && ok || bad "packed int8 tests otherwise: $tq vs $tp"
"$QNUM" export $bert --load "$work/bert/best" --to packed-mxint8 --pack-embeddings --output-dir "$work/packedmx" \
  > /dev/null 2>&1 && grep -q '"kind": "mxint8_embedding"' "$work/packedmx/model.json" &&
  "$QNUM" test $bert text-synthetic --load "$work/packedmx/model" --limit 16 --json > /dev/null 2>&1 && ok ||
  bad "export and test packed-mxint8"
expect_error "export packed-int8 of a float model" "$QNUM" export $bert --load "$work/bert/best" --to packed-int8 \
  --output-dir "$work/packedf"
stderr_has "export packed-int8 of a float model" "needs data_in and weight on signed fixed point"
expect_error "export packed into an existing folder" "$QNUM" export $bert --load "$work/bertq/best" --to packed-int8 \
  --output-dir "$work/packed8"
for f in safetensors json; do  # the fingerprint's first digit changed in place (same length)
  LC_ALL=C sed 's/\(tokenizer_fingerprint\\*":\\*"\)[0-9a-f]/\1z/' "$work/bert/best.$f" > "$work/otherfp.$f"
done
cp "$work/bert/config.json" "$work/config.json" 2>/dev/null
expect_error "test other tokenizer" "$QNUM" test $bert text-synthetic --load "$work/otherfp" --limit 16
stderr_has "test other tokenizer" "is not the one checkpoint"
expect_error "test bert with jsc checkpoint" "$QNUM" test $bert text-synthetic --load "$run/best"
stderr_has "test bert with jsc checkpoint" "holds model 'jsc-tiny'"
expect_error "bert on feature rows" "$QNUM" train bert-tiny jsc-synthetic
stderr_has "bert on feature rows" "takes tokenized text but dataset 'jsc-synthetic' holds feature rows"
expect_error "resume other model" "$QNUM" train bert:1-32-2-128 text-synthetic --output-dir "$work/bert" --resume
stderr_has "resume other model" "holds model '$bert'"

# Your own model by name ($QNUM_MODELS): the lab reports' jsc-custom through train, test,
# transform and report; without the file its name is unknown and the error says how to
# register it; bad files are one-line errors.
cat > "$work/models.toml" <<'TOML'
[models.jsc-custom]
architecture = "jsc-seq:bn,relu,linear32,bn,relu,dropout0.2,linear16,bn,relu,dropout0.2,linear5,bn,relu"
description = "lab 1's jsc-custom"
TOML
custom=(env QNUM_MODELS="$work/models.toml" "$QNUM")
"${custom[@]}" train jsc-custom jsc-synthetic --max-epochs 2 --output-dir "$work/custom" --no-progress \
  > "$work/custom.out" 2>&1 && ok || bad "custom model: train exit code"
grep -q '1295 parameters' "$work/custom.out" && ok || bad "custom model: not the 1,295-parameter jsc-custom"
"${custom[@]}" test jsc-custom jsc-synthetic --load "$work/custom/best" --json > "$work/custom.json" &&
  grep -q '"model":"jsc-custom"' "$work/custom.json" && ok || bad "custom model: test"
"${custom[@]}" transform jsc-custom --config "$(dirname "$0")/../../examples/configs/jsc_s_quantize_prune.toml" \
  --load "$work/custom/best" --output-dir "$work/custom-t" > /dev/null 2>&1 && ok || bad "custom model: transform"
"${custom[@]}" report jsc-custom --load "$work/custom-t/transformed" | grep -q '1295 parameters' && ok ||
  bad "custom model: report"
expect_error "custom model unregistered" "$QNUM" test jsc-custom jsc-synthetic --load "$work/custom/best"
stderr_has "custom model unregistered" "QNUM_MODELS"
expect_error "models file missing" env QNUM_MODELS="$work/none.toml" "$QNUM" formats
stderr_has "models file missing" "none.toml': no such file"
printf '[models.jsc-tiny]\narchitecture = "jsc-mlp:16-5"\n' > "$work/builtin.toml"
expect_error "models file built-in name" env QNUM_MODELS="$work/builtin.toml" "$QNUM" formats
stderr_has "models file built-in name" "'jsc-tiny' is a built-in model name"
printf '[models.mine]\narchitecture = "jsc-seq:bn,linear4"\n' > "$work/arch.toml"
expect_error "models file bad architecture" env QNUM_MODELS="$work/arch.toml" "$QNUM" formats
stderr_has "models file bad architecture" "[models.mine]: model 'jsc-seq:bn,linear4': the last linear layer must give 5"
printf '[models.mine]\narch = "jsc-tiny"\n' > "$work/key.toml"
expect_error "models file bad key" env QNUM_MODELS="$work/key.toml" "$QNUM" formats
stderr_has "models file bad key" "arch"

echo "cli: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
