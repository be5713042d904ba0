#!/usr/bin/env bash
# The main job: install missing packages, build, list the formats, and quantize a generated
# tensor in several formats (exact and MASE-compatible), printing the error table.
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
