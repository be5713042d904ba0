#!/usr/bin/env bash
# Builds the libFuzzer harnesses (fuzz/, clang + ASan + UBSan) and runs each for SECONDS
# (default 60) on its seed corpus and dictionary, as many at once as there are cores.
# Usage: scripts/fuzz.sh [SECONDS] [HARNESS...]   (harness names: fuzz/fuzz_<name>.cpp)
# Inputs that crash, leak, time out or break an invariant land in $build/findings/ and make
# the script fail. The corpus grows in $build/corpus/<name> across runs (seeds: fuzz/corpus/).
# Environment: QNUM_FUZZ_BUILD_DIR (default build-fuzz), QNUM_FUZZ_CXX (default: the newest
# clang++-19..16 found), QNUM_JOBS (build jobs, default 2), QNUM_FUZZ_PARALLEL (harnesses run
# at once, default one per core), QNUM_FUZZ_JOBS (fuzz processes per harness, default 1),
# QNUM_FUZZ_RUNS (stop a harness after this many executions, within SECONDS; the off-CI
# campaign: QNUM_FUZZ_RUNS=10000000 scripts/fuzz.sh 7200 <name>).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
seconds=${1:-60}
[ $# -gt 0 ] && shift
build=${QNUM_FUZZ_BUILD_DIR:-$root/build-fuzz}
cxx=${QNUM_FUZZ_CXX:-}
if [ -z "$cxx" ]; then
  for v in 19 18 17 16; do command -v "clang++-$v" >/dev/null 2>&1 && { cxx=clang++-$v; break; }; done
fi
[ -n "$cxx" ] || { echo "fuzz.sh: no clang++ (>= 16) found; set QNUM_FUZZ_CXX" >&2; exit 2; }

# The harnesses and the dictionary each uses (- = none: the input is free text).
declare -A dict=([npy]=npy [safetensors]=json [format_spec]=format_spec [imdb]=imdb [jsc]=jsc [vocab]=-
                 [checkpoint_meta]=json [bert_config]=json [run_config]=toml [pass_config]=toml
                 [aclimdb]=aclimdb [torch_state_dict]=torch [archive]=archive [study_rows]=study_rows)
names=("$@")
[ ${#names[@]} -gt 0 ] || names=(npy safetensors format_spec imdb jsc vocab checkpoint_meta bert_config run_config pass_config
                                 aclimdb torch_state_dict archive study_rows)

launcher=()
command -v ccache >/dev/null 2>&1 && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
# Paths relative to the checkout in ccache's keys: another clone on this machine (CI's) hits.
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$root}"
generator=()
command -v ninja >/dev/null 2>&1 && generator=(-G Ninja)
# Line tables only (-gline-tables-only): symbolized stack traces in reports, 15% less compile
# time than full debug info (docs/reliability.md).
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER="$cxx" \
        -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -gline-tables-only -DNDEBUG" \
        -DQNUM_BUILD_FUZZ=ON -DQNUM_BUILD_TESTS=OFF -DQNUM_BUILD_APPS=OFF "${launcher[@]}" > /dev/null
fi
# study_rows exists only where SQLite was found: dropped from the default list otherwise.
if [ $# -eq 0 ] && ! cmake --build "$build" --target help 2>/dev/null | grep -q 'fuzz_study_rows'; then
  names=("${names[@]/study_rows/}")
  names=(${names[@]})
fi
cmake --build "$build" --parallel "${QNUM_JOBS:-2}" --target "${names[@]/#/fuzz_}"

mkdir -p "$build/findings"
source "$root/scripts/sanitizer-env.sh"
export ASAN_OPTIONS=${ASAN_OPTIONS:-${sanitizer_symbolizer#:}}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-${sanitizer_symbolizer#:}}
# One harness: its run, then one table row in findings/<name>.row (exit status 1 on findings).
fuzz_one() {
  local name=$1 corpus=$build/corpus/$1 log=$build/findings/$1.log rc=0
  mkdir -p "$corpus"
  local args=(-max_total_time="$seconds" -timeout=20 -rss_limit_mb=2048 -print_final_stats=1
              -artifact_prefix="$build/findings/$name-")
  [ -z "${QNUM_FUZZ_RUNS:-}" ] || args+=(-runs="$QNUM_FUZZ_RUNS")
  [ "${dict[$name]}" = - ] || args+=(-dict="$root/fuzz/dict/${dict[$name]}.dict")
  [ "${QNUM_FUZZ_JOBS:-1}" -gt 1 ] && args+=(-fork="${QNUM_FUZZ_JOBS}" -ignore_crashes=0)
  "$build/fuzz/fuzz_$name" "${args[@]}" "$corpus" "$root/fuzz/corpus/$name" > "$log" 2>&1 || rc=$?
  local execs speed files result
  execs=$(grep -ao 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
  speed=$(grep -ao 'stat::average_exec_per_sec: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
  files=$(find "$corpus" -type f | wc -l)
  if [ "$rc" -eq 0 ]; then result=clean; else result="FAILED (exit $rc; see $log)"; fi
  printf '%-16s %12s %8s %10s  %s\n' "$name" "${execs:-?}" "${speed:-?}" "$files" "$result" > "$build/findings/$name.row"
  [ "$rc" -eq 0 ]
}
for name in "${names[@]}"; do
  [ -n "${dict[$name]:-}" ] || { echo "fuzz.sh: unknown harness '$name'" >&2; exit 2; }
  rm -f "$build/findings/$name.row"
done
# QNUM_FUZZ_PARALLEL harnesses at a time (default: one per core), each on one core.
parallel=${QNUM_FUZZ_PARALLEL:-$(nproc)}
running=0
for name in "${names[@]}"; do
  if [ "$running" -ge "$parallel" ]; then wait -n || true; running=$((running - 1)); fi
  fuzz_one "$name" &
  running=$((running + 1))
done
wait || true
failed=()
printf '%-16s %12s %8s %10s  %s\n' harness executions exec/s "corpus" result
for name in "${names[@]}"; do
  row=$build/findings/$name.row
  [ -f "$row" ] || printf '%-16s  FAILED (no result; see %s)\n' "$name" "$build/findings/$name.log" > "$row"
  cat "$row"
  grep -q ' clean$' "$row" || failed+=("$name")
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz.sh: findings in ${failed[*]}:" >&2
  for name in "${failed[@]}"; do grep -a -m3 -E 'ERROR|runtime error|invariant|not one line|terminate' "$build/findings/$name.log" >&2 || true; done
  exit 1
fi
