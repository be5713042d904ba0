#!/usr/bin/env bash
# The main job: install missing packages, build, list the formats, quantize a generated
# tensor in several formats (exact and MASE-compatible) printing the error table, and train
# a small model.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/scripts/install-deps.sh"
bash "$root/scripts/build.sh"
qnum=${QNUM_BUILD_DIR:-$root/build}/examples/qnum
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
rm -rf "$runs"
