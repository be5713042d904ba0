#!/usr/bin/env bash
# The test suite built with clang and AddressSanitizer + UndefinedBehaviorSanitizer (+ LeakSanitizer,
# part of ASan on Linux), every report fatal. Reached as `scripts/test.sh --sanitize [ctest args]`;
# e.g. `scripts/test.sh --sanitize -L quick`. Builds into build-sanitize (QNUM_BUILD_DIR), with
# QNUM_SANITIZE_CXX (default clang++-19) and QNUM_JOBS jobs; only the programs CTest runs
# (no benchmarks), or only QNUM_SANITIZE_TARGETS.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${QNUM_BUILD_DIR:-$root/build-sanitize}
cxx=${QNUM_SANITIZE_CXX:-clang++-19}
bash "$root/scripts/install-deps.sh"
command -v "$cxx" >/dev/null 2>&1 || { echo "test.sh --sanitize: $cxx not found (set QNUM_SANITIZE_CXX)" >&2; exit 2; }

flags="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
generator=()
command -v ninja >/dev/null 2>&1 && generator=(-G Ninja)
launcher=()
command -v ccache >/dev/null 2>&1 && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
# Paths relative to the checkout in ccache's keys: another clone on this machine (CI's) hits.
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$root}"
# Line tables only (-gline-tables-only): symbolized stack traces in reports, 15% less compile
# time than full debug info (docs/reliability.md).
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S "$root" -B "$build" "${generator[@]}" "${launcher[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -gline-tables-only -DNDEBUG" \
        -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="$flags" \
        -DQNUM_NATIVE=ON -DQNUM_BUILD_TESTS=ON -DQNUM_BUILD_APPS=ON -DQNUM_BUILD_BENCH=OFF -DQNUM_WITH_CUDA=OFF \
        -DQNUM_TEST_OTHER_ISA=OFF
fi
# QNUM_SANITIZE_TARGETS="a b": build only these (then pick their tests with ctest -R/-L).
targets=()
[ -n "${QNUM_SANITIZE_TARGETS:-}" ] && read -ra targets <<< "--target $QNUM_SANITIZE_TARGETS"
cmake --build "$build" --parallel "${QNUM_JOBS:-$(nproc)}" "${targets[@]}"

# The Optuna tests' python: the test venv where scripts/python_env.sh made it.
if [ -z "${QNUM_PYTHON:-}" ] && [ -x "$root/build/python-venv/bin/python" ]; then
  export QNUM_PYTHON="$root/build/python-venv/bin/python"
fi
cd "$build"
source "$root/scripts/sanitizer-env.sh"
sym=$sanitizer_symbolizer
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:strict_string_checks=1:detect_stack_use_after_return=1$sym}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1$sym}
# Not built or run here (the plain build runs them): the dispatch probe under QEMU user mode
# (ASan's large shadow mappings in an emulator), the ISA isolation symbol checks, the kernel
# tests for the other ISA choice (the native ones already run every compiled-in ISA),
# install.consumer (CMake packaging, nothing for the sanitizers to see) and labs.chain_text
# (the lab steps on BERT, each already run under the sanitizers by labs.lab0, labs.bert,
# labs.lab2 and labs.lab3.bert, and the chain's own logic by labs.chain_features: 23 s in
# the plain build, 443 s under ASan).
ctest --output-on-failure --timeout 1800 \
  -E '^(kernel\.dispatch\.cpu_.*|kernel\.isa_isolation|install\.consumer|labs\.chain_text)$' "$@"
