#!/usr/bin/env bash
# Configures and builds qnum (CLI, tests, benchmarks) into build/ (override with QNUM_BUILD_DIR);
# QNUM_TARGETS="qnum lab1-ptq-qat" builds only those targets.
# The programs are built for this machine (QNUM_NATIVE=ON: AVX-512/VNNI kernels where the
# CPU has them); the installed library itself stays portable unless asked otherwise.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${QNUM_BUILD_DIR:-$root/build}
jobs=${QNUM_JOBS:-$(nproc)}
generator=()
command -v ninja >/dev/null 2>&1 && generator=(-G Ninja)
# ccache (when installed) makes rebuilds and clean clones on the same machine cheap.
launcher=()
command -v ccache >/dev/null 2>&1 && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
# Paths relative to the checkout in ccache's keys: another clone on this machine (CI's) hits.
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$root}"
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DQNUM_NATIVE=ON -DQNUM_BUILD_BENCH=ON "${launcher[@]}" "$@"
elif [ $# -gt 0 ]; then
  cmake "$build" "$@"
fi
targets=()
[ -n "${QNUM_TARGETS:-}" ] && read -r -a targets <<< "--target $QNUM_TARGETS"
cmake --build "$build" --parallel "$jobs" "${targets[@]}"
