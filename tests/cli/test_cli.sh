#!/usr/bin/env bash
# Behaviour of the qnum command line: listings, exit codes, one-line errors, atomic output.
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

# expect_error NAME CMD...: exit code 2, exactly one line on stderr, nothing on stdout, no OUT.
expect_error() {
  local name=$1; shift
  rm -f "$work/out.npy"
  "$@" > "$work/stdout" 2> "$work/stderr"
  local rc=$?
  local lines
  lines=$(wc -l < "$work/stderr")
  if [ "$rc" -ne 2 ]; then bad "$name: exit code $rc, want 2 ($(cat "$work/stderr"))"; return; fi
  if [ "$lines" -ne 1 ]; then bad "$name: $lines lines on stderr, want 1"; return; fi
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

echo "cli: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
