#!/usr/bin/env bash
# One device call (docs/cuda.md): the CUDA tests, the benchmark and the memory study, built on
# the development machine and carried in $1 (default .devbin). Writes logs and JSON under
# $OUT (or ./device-out) and prints a short summary last.
set -u
BIN=${1:-.devbin}
OUT=${OUT:-device-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda/lib:${LD_LIBRARY_PATH:-}
if ! ldd "$BIN/qnum-cuda-tests" | grep -q 'libcublas.so.13 => /'; then  # fall back to pip's cuBLAS
  d=$(dirname "$(find / -name 'libcublas.so.13' -not -path '/proc/*' 2>/dev/null | head -1)")
  export LD_LIBRARY_PATH=$d:$LD_LIBRARY_PATH
fi
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv; nvcc --version | tail -1;
  lscpu | grep -E 'Model name|Flags' | cut -c1-200; } > "$OUT/machine.txt" 2>&1
ldd "$BIN/qnum-cuda-tests" > "$OUT/ldd.txt" 2>&1
timeout 240 "$BIN/qnum-cuda-tests" > "$OUT/tests.log" 2>&1; echo "tests rc=$?" >> "$OUT/summary.txt"
timeout 120 "$BIN/qnum-cuda-bench" --json > "$OUT/bench.json" 2> "$OUT/bench.err"; echo "bench rc=$?" >> "$OUT/summary.txt"
timeout 60 "$BIN/qnum-cuda-memory-study" --json > "$OUT/memory.json" 2>&1; echo "memory rc=$?" >> "$OUT/summary.txt"
timeout 60 "$BIN/qnum-cuda-memory-study" >> "$OUT/memory.json" 2>&1
if command -v compute-sanitizer > /dev/null; then  # memcheck on the GEMM, attention and MX-block kernels (not the
  # bad-arguments case: its deliberate impossible cudaMalloc is an API error memcheck reports)
  timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 "$BIN/qnum-cuda-tests" \
    -tc='*GEMM*,*attention*,*OCP MX*' > "$OUT/memcheck.log" 2>&1
  echo "memcheck rc=$?" >> "$OUT/summary.txt"
  timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 "$BIN/qnum-cuda-tests" \
    -tc="${MEMCHECK_FAMILIES:-cuda: block*,cuda: bin*,cuda: ternary*,cuda: residual*,cuda: scale_integer*,cuda: MASE mx*,cuda: OCP MX tensors*,cuda: mxint_hardware*}" \
    > "$OUT/memcheck_families.log" 2>&1
  echo "memcheck families rc=$?" >> "$OUT/summary.txt"
fi
cat "$OUT/machine.txt"; tail -25 "$OUT/tests.log"; cat "$OUT/bench.json" "$OUT/bench.err" "$OUT/memory.json"
tail -5 "$OUT/memcheck.log" "$OUT/memcheck_families.log" 2>/dev/null
grep -B2 -A14 "ERROR:\|FAILED" "$OUT/tests.log" | head -120; cat "$OUT/summary.txt"
