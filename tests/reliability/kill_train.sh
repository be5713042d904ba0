#!/usr/bin/env bash
# Crash safety of `qnum train`: a run SIGKILLed at random points (mid-epoch, and now and then
# mid-checkpoint-write) and continued with --resume until it finishes ends with the same model
# and optimizer tensors, byte for byte, and the same metrics as a run never interrupted. A
# half-written checkpoint would make --resume fail or differ, and a kill's temporary file
# must not be left behind.
# Usage: QNUM=path/to/qnum bash kill_train.sh [KILLS] [SEED] [EPOCHS MODEL DATASET [TRAIN ARGS...]]
# (bounded: at most KILLS kills; default: jsc-tiny on jsc-synthetic for 40 epochs)
set -u
source "$(dirname "$0")/kill_common.sh"
epochs=${3:-40}
if [ $# -ge 5 ]; then
  model=("${@:4}")
else
  model=(jsc-tiny jsc-synthetic --batch-size 32)
fi

# One thread by default (QNUM_KILL_THREADS: more): qnum's sums do not depend on the thread
# count, so two runs agree bit for bit either way.
train=("$QNUM" train "${model[@]}" --max-epochs "$epochs" --seed 3 --threads "${QNUM_KILL_THREADS:-1}" --no-progress)

# The data buffer of a safetensors file (everything after the JSON header): the tensors.
tensors() { local n; n=$(od -An -t u8 -N8 "$1" | tr -d ' '); tail -c +$((9 + n)) "$1"; }
# metrics.jsonl without the wall-clock seconds.
metrics() { sed 's/,"seconds":[^}]*//' "$1"; }

start=$(date +%s%N)
"${train[@]}" --output-dir ref > ref.log 2>&1 || { bad "uninterrupted run failed: $(tail -1 ref.log)"; exit 1; }
span_ms=$((($(date +%s%N) - start) / 1000000))
[ -f ref/last.safetensors ] || { bad "no ref/last.safetensors"; exit 1; }

# Kill at a uniformly random moment in the first half of a whole run's duration (a resumed run
# may finish first: it has less left to do); resume until a run completes.
done_run=0
killed=0
for ((i = 0; i <= kills; i++)); do
  args=("${train[@]}" --output-dir run)
  [ -f run/last.safetensors ] && args+=(--resume)
  "${args[@]}" > "run$i.log" 2>&1 &
  pid=$!
  if [ "$i" -lt "$kills" ]; then
    delay_ms=$((RANDOM % (span_ms / 2 + 1)))
    sleep "$(printf '%d.%03d' $((delay_ms / 1000)) $((delay_ms % 1000)))"
    if kill -9 "$pid" 2>/dev/null; then
      wait "$pid" 2>/dev/null
      killed=$((killed + 1))
      continue
    fi
  fi
  if wait "$pid"; then done_run=1; break; fi
  bad "run $i (after $killed kills) failed: $(tail -1 "run$i.log")"
  break
done
[ "$done_run" -eq 1 ] || { bad "the run never completed"; exit 1; }
[ "$killed" -ge 1 ] || bad "no run was killed (each finished before its kill time)"
echo "kill_train ${model[*]:0:2}: $killed SIGKILLs, then completed (uninterrupted run: ${span_ms} ms)"

cmp -s <(tensors ref/last.safetensors) <(tensors run/last.safetensors) || bad "last checkpoint tensors differ"
cmp -s <(tensors ref/best.safetensors) <(tensors run/best.safetensors) || bad "best checkpoint tensors differ"
diff <(metrics ref/metrics.jsonl) <(metrics run/metrics.jsonl) > /dev/null || bad "metrics.jsonl differs"
[ "$(wc -l < run/metrics.jsonl)" -eq "$epochs" ] || bad "metrics.jsonl has $(wc -l < run/metrics.jsonl) epochs, want $epochs"
# A killed writer's temporary file (.tmp.<name>.<host>.<pid>.<n>) is removed by the next write
# of its target: none may be left once the run has completed.
leftover=$(find run -name '.tmp.*' | tr '\n' ' ')
[ -z "$leftover" ] || bad "temporary files left behind: $leftover"
if [ "$failed" -ne 0 ]; then exit 1; fi
echo "kill_train: final checkpoint bit-identical to the uninterrupted run"
