#!/usr/bin/env bash
# One device call (docs/cuda.md): the CUDA tests, the benchmark, lab 4 on a BERT-base checkpoint
# beside PyTorch (issue 31), and compute-sanitizer memcheck, with programs built on the
# development machine.
#
#   bash cuda/device_check.sh [BIN] [DATA]
#     BIN   folder with qnum-cuda-tests, qnum-cuda-bench, qnum-cuda-memory-study (default .devbin)
#     DATA  folder from cuda/prepare_device_data.sh: vocab.txt, reviews.tsv (default build-dev/data)
#   Both are ignored by git: the device call must carry them (carry: [".devbin", "build-dev/data"]).
#
# Environment:
#   OUT                 results folder (default ./device-out). At most 8 files come back from the
#                       device tool; this writes 6: summary.txt (printed last), results.json (bench,
#                       lab 4, PyTorch and the comparison), bench.json, tests.log, memcheck.log,
#                       logs.txt (everything else: ldd, stderr, the programs' own output)
#   QNUM_CHECK_STEPS    steps in order (default "tests lab4 cli bench memcheck"; cli needs BIN/qnum)
#   QNUM_CHECK_BUDGET   seconds for the whole script (default 540): each step's timeout is cut to
#                       what is left, a step with under 10 s left is skipped (and says so)
#   QNUM_BERT_STEP_CMD  >>> TO FILL (issue 31 item 4) <<< a command timing qnum's bert-tiny training
#                       step on cuda (2 layers, hidden 128, 2 heads, intermediate 512, vocab 30522;
#                       AdamW, batch 32 x seq 128, dropout 0.1, cross-entropy on 2 labels, fp32:
#                       what cuda/bench/torch_gpu.py times for PyTorch), printing a JSON line with
#                       "step_ms" (median ms over ~50 steps after warm-up, synchronised) or a line
#                       "step_ms=<ms>". Runs from the repository root; $BIN is exported. Unset: the
#                       summary says "not measured".
#   QNUM_TESTS_FILTER   doctest -tc filter for the tests step (e.g. "backend:*"; default: every case)
#   QNUM_DEVICE_LIBS    folder of shared libraries to use where the device lacks them (ldd "not found")
#   LAB4_BATCH, LAB4_MAX_LEN  the lab-4 batch (default 64 reviews, 128 tokens at most)
set -u
BIN=${1:-.devbin}
DATA=${2:-build-dev/data}
OUT=${OUT:-device-out}
STEPS=${QNUM_CHECK_STEPS:-tests lab4 cli bench memcheck}
BUDGET=${QNUM_CHECK_BUDGET:-540}
LAB4_BATCH=${LAB4_BATCH:-64}
LAB4_MAX_LEN=${LAB4_MAX_LEN:-128}
WORK=${TMPDIR:-/tmp}/qnum-device-check
export BIN
mkdir -p "$OUT" "$WORK"
START=$(date +%s)
LOG=$OUT/logs.txt
SUMMARY=$OUT/summary.txt
: > "$LOG"
: > "$SUMMARY"
ORIG_LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}  # PyTorch keeps its own CUDA libraries
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda/lib:${LD_LIBRARY_PATH:-}
# Libraries of the development machine the device image may lack (QNUM_DEVICE_LIBS: a folder
# of them, e.g. build-dev/libs): only those ldd reports missing are linked in, so the device's
# own copies win wherever it has them.
if [ -n "${QNUM_DEVICE_LIBS:-}" ] && [ -d "$QNUM_DEVICE_LIBS" ]; then
  mkdir -p "$WORK/libs"
  export LD_LIBRARY_PATH=$WORK/libs:$LD_LIBRARY_PATH
  for round in 1 2 3 4 5; do  # a carried library's own needs show only once it is found
    for b in "$BIN"/*; do ldd "$b" 2>/dev/null; done | awk '/not found/{print $1}' | sort -u | while read -r l; do
      [ -f "$QNUM_DEVICE_LIBS/$l" ] && ln -sf "$(cd "$QNUM_DEVICE_LIBS" && pwd)/$l" "$WORK/libs/$l"
    done
  done
fi
if ! ldd "$BIN/qnum-cuda-tests" | grep -q 'libcublas.so.13 => /'; then  # fall back to pip's cuBLAS
  d=$(dirname "$(find / -name 'libcublas.so.13' -not -path '/proc/*' 2>/dev/null | head -1)")
  export LD_LIBRARY_PATH=$d:$LD_LIBRARY_PATH
fi

# limit SECONDS: SECONDS, or what is left of the budget (10 s kept for the summary); 0 = skip.
limit() {
  local left=$((BUDGET - ($(date +%s) - START) - 10))
  if [ "$left" -lt 10 ]; then echo 0; elif [ "$left" -lt "$1" ]; then echo "$left"; else echo "$1"; fi
}
# note NAME RC: one line in the summary (rc 124 = cut by its timeout).
note() { echo "$1 rc=$2 ($(($(date +%s) - START)) s elapsed)" >> "$SUMMARY"; }
section() { echo "==== $* ($(($(date +%s) - START)) s)" >> "$LOG"; }

{ echo "== machine"; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv
  nvcc --version | tail -1; lscpu | grep -E 'Model name|Flags' | cut -c1-200
  python3 -c 'import torch, transformers; print("torch", torch.__version__, "cuda", torch.version.cuda, "transformers", transformers.__version__)'
  echo "lab4 data: $(cat "$DATA/SOURCE" 2>/dev/null || echo "missing: run cuda/prepare_device_data.sh and carry $DATA")"
  echo "== steps: $STEPS (budget $BUDGET s)"; } >> "$SUMMARY" 2>&1
section ldd; for b in "$BIN"/*; do echo "$b"; ldd "$b"; done >> "$LOG" 2>&1

step_tests() {
  local t; t=$(limit 240); [ "$t" = 0 ] && { note "tests skipped (budget)" -; return; }
  local filter=(); [ -n "${QNUM_TESTS_FILTER:-}" ] && filter=(-tc="$QNUM_TESTS_FILTER")
  timeout "$t" "$BIN/qnum-cuda-tests" "${filter[@]}" > "$OUT/tests.log" 2>&1; note tests $?
}

step_bench() {
  local t; t=$(limit 120); [ "$t" = 0 ] && { note "bench skipped (budget)" -; return; }
  section "qnum-cuda-bench stderr"
  timeout "$t" "$BIN/qnum-cuda-bench" --json > "$OUT/bench.json" 2>> "$LOG"; note bench $?
}

step_lab4() {
  local args=(--vocab "$DATA/vocab.txt" --texts "$DATA/reviews.tsv" --batch "$LAB4_BATCH" --max-len "$LAB4_MAX_LEN")
  local t rc model torch_json=()
  rm -rf "$WORK/ids.json" "$WORK/torch.json" "$WORK/study.json" "$WORK/step.log" "$WORK/bert-base-random"
  # 1. qnum tokenises the batch; PyTorch reads the same ids.
  t=$(limit 30); [ "$t" = 0 ] && { note "lab4 skipped (budget)" -; return; }
  section "lab4: tokenize"
  timeout "$t" "$BIN/qnum-cuda-memory-study" --tokenize-only "${args[@]}" --ids-out "$WORK/ids.json" >> "$LOG" 2>&1
  note "lab4 tokenize" $?
  # 2. PyTorch: writes the random BERT-base folder, fp32 inference on the ids, bert-tiny train step.
  t=$(limit 150)
  if [ "$t" != 0 ]; then
    section "lab4: torch_gpu.py"
    LD_LIBRARY_PATH=$ORIG_LD_LIBRARY_PATH timeout "$t" python3 cuda/bench/torch_gpu.py --ids "$WORK/ids.json" \
      --model-out "$WORK/bert-base-random" --out "$WORK/torch.json" >> "$LOG" 2>&1
    note "lab4 torch" $?
  else
    note "lab4 torch skipped (budget)" -
  fi
  # 3. qnum: the same folder, fp32 then MXINT8-packed Linears (its own seeded weights if torch failed).
  if [ -f "$WORK/bert-base-random/model.safetensors" ]; then
    model=(--model "$WORK/bert-base-random")
  else
    model=(--config bert-base --seed 0)
    echo "lab4: no PyTorch checkpoint, qnum uses its own random bert-base" >> "$SUMMARY"
  fi
  [ -f "$WORK/torch.json" ] && torch_json=(--torch-json "$WORK/torch.json")
  t=$(limit 150)
  if [ "$t" != 0 ]; then
    section "lab4: qnum-cuda-memory-study stderr"
    timeout "$t" "$BIN/qnum-cuda-memory-study" "${model[@]}" "${args[@]}" "${torch_json[@]}" --json \
      > "$WORK/study.json" 2>> "$LOG"
    rc=$?; note "lab4 study" $rc
    cat "$WORK/study.json" >> "$LOG"
  else
    note "lab4 study skipped (budget)" -
  fi
  # 4. qnum's bert-tiny training step (the hook above).
  if [ -n "${QNUM_BERT_STEP_CMD:-}" ]; then
    t=$(limit 90)
    if [ "$t" != 0 ]; then
      section "lab4: QNUM_BERT_STEP_CMD: $QNUM_BERT_STEP_CMD"
      timeout "$t" bash -c "$QNUM_BERT_STEP_CMD" > "$WORK/step.log" 2>&1; note "bert-tiny step (qnum)" $?
      cat "$WORK/step.log" >> "$LOG"
    else
      note "bert-tiny step (qnum) skipped (budget)" -
    fi
  else
    echo "bert-tiny step (qnum): QNUM_BERT_STEP_CMD not set, not measured" >> "$SUMMARY"
  fi
}

# The command line on the GPU: qnum train / test / predict --device cuda on text-synthetic.
step_cli() {
  local t d="$WORK/cli-run"; rm -rf "$d"
  t=$(limit 120); [ "$t" = 0 ] && { note "cli skipped (budget)" -; return; }
  section "cli: qnum train bert-tiny text-synthetic --device cuda"
  timeout "$t" "$BIN/qnum" train bert-tiny text-synthetic --device cuda --max-epochs 2 --no-progress \
    --output-dir "$d" >> "$LOG" 2>&1; note "cli train --device cuda" $?
  grep -h "^test\|val_acc\|accuracy" "$LOG" | tail -3 >> "$SUMMARY"
  t=$(limit 60); [ "$t" = 0 ] && return
  section "cli: qnum test / predict --device cuda"
  timeout "$t" "$BIN/qnum" test bert-tiny text-synthetic --load "$d/best.safetensors" --device cuda --json \
    >> "$SUMMARY" 2>> "$LOG"; note "cli test --device cuda" $?
  timeout "$t" "$BIN/qnum" predict bert-tiny --load "$d/best.safetensors" --device cuda "a wonderful film" \
    "a dull, tedious mess" >> "$SUMMARY" 2>> "$LOG"; note "cli predict --device cuda" $?
}

step_memcheck() {
  command -v compute-sanitizer > /dev/null || { echo "memcheck: no compute-sanitizer" >> "$SUMMARY"; return; }
  # memcheck on the GEMM, attention and MX-block kernels (not the bad-arguments case: its
  # deliberate impossible cudaMalloc is an API error memcheck reports)
  local t; t=$(limit 150); [ "$t" = 0 ] && { note "memcheck skipped (budget)" -; return; }
  timeout "$t" compute-sanitizer --tool memcheck --error-exitcode 9 "$BIN/qnum-cuda-tests" \
    -tc='*GEMM*,*attention*,*OCP MX*' > "$OUT/memcheck.log" 2>&1
  note memcheck $?
  t=$(limit 150); [ "$t" = 0 ] && { note "memcheck families skipped (budget)" -; return; }
  echo "==== memcheck families" >> "$OUT/memcheck.log"
  timeout "$t" compute-sanitizer --tool memcheck --error-exitcode 9 "$BIN/qnum-cuda-tests" \
    -tc="${MEMCHECK_FAMILIES:-cuda: block*,cuda: bin*,cuda: ternary*,cuda: residual*,cuda: scale_integer*,cuda: MASE mx*,cuda: OCP MX tensors*,cuda: mxint_hardware*}" \
    >> "$OUT/memcheck.log" 2>&1
  note "memcheck families" $?
}

for s in $STEPS; do
  case $s in
    tests | bench | lab4 | cli | memcheck) "step_$s" ;;
    *) echo "unknown step '$s' (tests, lab4, cli, bench, memcheck)" >> "$SUMMARY" ;;
  esac
done

# The comparison (results.json) and the summary, printed last.
{ echo "== issue 31 targets"
  python3 cuda/bench/lab4_compare.py --study "$WORK/study.json" --torch "$WORK/torch.json" \
    --qnum-step "$WORK/step.log" --bench "$OUT/bench.json" --out "$OUT/results.json" 2>&1; } >> "$SUMMARY"
echo "total $(($(date +%s) - START)) s" >> "$SUMMARY"
tail -25 "$OUT/tests.log" 2>/dev/null; cat "$OUT/bench.json" 2>/dev/null
grep -h "rror\|Traceback" "$LOG" | head -20
grep -h -A3 "ERROR SUMMARY" "$OUT/memcheck.log" 2>/dev/null | head -10
grep -B2 -A14 "ERROR:\|FAILED" "$OUT/tests.log" 2>/dev/null | head -120
cat "$SUMMARY"
