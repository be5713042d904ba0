#!/usr/bin/env bash
# The lab chain (apps/labs/chain.sh) end to end on the offline sets with its quick budget:
# a one-layer BERT on text-synthetic and jsc-tiny on jsc-synthetic, every step from the last
# step's checkpoint. Checks: every step finished (DONE) and wrote its checkpoint, the trained
# model learned, the final model's test accuracy is printed; a rerun skips every finished
# step and changes nothing; a step killed half-way is run again and its partial output kept
# aside; bad input exits 2 with one line.
# Usage: test_chain.sh text|features   (QNUM_BIN_DIR: the folder of qnum and the lab programs)
set -uo pipefail

mode=${1:?usage: test_chain.sh text|features}
source "$(dirname "$0")/lib.sh"
: "${QNUM_BIN_DIR:?set QNUM_BIN_DIR}"
chain=$(cd "$(dirname "$0")/../../apps/labs" && pwd)/chain.sh

case "$mode" in
  text)
    args=(--model bert:1-64-2-128 --dataset text-synthetic)
    steps="train lora ptq-qat prune nas compress mixed formats test"
    checkpoints="train/best ptq-qat/best prune/best nas/best compress/best mixed/best formats/best"
    learned=0.6 ;;
  features)
    args=(--model jsc-tiny --dataset jsc-synthetic)
    steps="train ptq-qat prune compress mixed formats test"
    checkpoints="train/best ptq-qat/best prune/best compress/transformed mixed/best formats/best"
    learned=0.4 ;;
  *) echo "unknown mode '$mode'"; exit 2 ;;
esac
out=$tmp/chain
run chain 0 bash "$chain" "${args[@]}" --budget quick --threads 1 --output-dir "$out"

for s in $steps; do [ -f "$out/$s/DONE" ] || fail "step $s did not finish"; done
for c in $checkpoints; do [ -s "$out/$c.safetensors" ] || fail "no checkpoint $c.safetensors"; done
# The first step learned (the later ones start from it).
acc=$(sed -n 's/^test .*accuracy \([0-9.]*\).*/\1/p' "$out/train/log.txt" | head -n 1)
awk -v a="${acc:-0}" -v m="$learned" 'BEGIN { exit !(a > m) }' || fail "train: test accuracy ${acc:-none} <= $learned"
grep -Eq '^accuracy +[0-9.]+' "$out/test/log.txt" || fail "test: no test accuracy: $(head -3 "$out/test/log.txt")"
if [ "$mode" = text ]; then
  [ "$(grep -c 'wonderful\|lifeless' "$out/test/log.txt")" -ge 2 ] || fail "test: no predictions"
fi

# A rerun skips every finished step and rewrites nothing.
sum() { find "$out" -type f \( -name '*.safetensors' -o -name DONE \) | sort | xargs sha256sum; }
before=$(sum)
run rerun 0 bash "$chain" "${args[@]}" --budget quick --threads 1 --output-dir "$out"
[ "$(grep -c 'done earlier' "$tmp/rerun.err")" -eq "$(wc -w <<<"$steps")" ] || fail "rerun: not every step skipped"
[ "$before" = "$(sum)" ] || fail "rerun: outputs changed"

# A step killed half-way (its folder without DONE) is run again; its partial output is kept aside.
rm "$out/prune/DONE"
run resume 0 bash "$chain" "${args[@]}" --budget quick --threads 1 --output-dir "$out"
[ -f "$out/prune/DONE" ] || fail "resume: prune not rerun"
ls -d "$out"/prune.killed-* >/dev/null 2>&1 || fail "resume: the killed prune output was not kept"
grep -q 'prune: done in' "$tmp/resume.err" || fail "resume: prune did not run"
[ "$(grep -c 'done earlier' "$tmp/resume.err")" -eq "$(($(wc -w <<<"$steps") - 1))" ] ||
  fail "resume: other steps rerun"
# A killed Lab 3 step continues its studies (<step>/studies.db) instead of starting again.
rm "$out/mixed/DONE"
run resume_mixed 0 bash "$chain" "${args[@]}" --budget quick --threads 1 --output-dir "$out"
grep -q 'mixed: an unfinished run is in .*; continuing it' "$tmp/resume_mixed.err" || fail "resume: mixed not continued"
grep -q 'resumed with [0-9]* finished trial' "$out/mixed/log.txt" "$tmp/resume_mixed.err" ||
  fail "resume: mixed did not resume its study"
[ -f "$out/mixed/DONE" ] && ! ls -d "$out"/mixed.killed-* >/dev/null 2>&1 || fail "resume: mixed moved aside or not done"

# The whole chain killed (SIGKILL, its process group) at random moments, then run again
# each time: it finishes with every step done and the same final checkpoints' kinds, and
# nothing finished before a kill is redone (features: a few seconds per run).
if [ "$mode" = features ] && command -v setsid >/dev/null 2>&1; then
  kout=$tmp/killed
  for attempt in 1 2; do
    setsid bash "$chain" "${args[@]}" --budget quick --threads 1 --output-dir "$kout" >/dev/null 2>&1 &
    pid=$!
    sleep "$((RANDOM % 5)).$((RANDOM % 10))"
    kill -9 -- "-$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    done_before=$(cd "$kout" 2>/dev/null && ls -d */DONE 2>/dev/null | sort)
    run "killed_rerun$attempt" 0 bash "$chain" "${args[@]}" --budget quick --threads 1 --output-dir "$kout"
    for s in $steps; do [ -f "$kout/$s/DONE" ] || fail "kill $attempt: step $s did not finish"; done
    for d in $done_before; do
      grep -q "${d%/DONE}: done earlier" "$tmp/killed_rerun$attempt.err" || fail "kill $attempt: ${d%/DONE} redone"
    done
    grep -Eq '^accuracy +[0-9.]+' "$kout/test/log.txt" || fail "kill $attempt: no final test accuracy"
    rm -rf "$kout"
  done
fi

# Bad input: one line, exit 2.
expect_one_line_error bad-dataset "unknown dataset 'cifar'" bash "$chain" --model jsc-tiny --dataset cifar
expect_one_line_error bad-budget "--budget must be quick or full" bash "$chain" "${args[@]}" --budget huge
expect_one_line_error bad-step "unknown step 'lab9'" bash "$chain" "${args[@]}" --steps "train lab9"
expect_one_line_error missing-start "ptq-qat needs .*/train/best.safetensors, written by step 'train'" \
  bash "$chain" "${args[@]}" --output-dir "$tmp/empty" --steps ptq-qat
expect_one_line_error bad-bin "not found: build the programs" bash "$chain" "${args[@]}" --bin "$tmp/nothing"

finish "chain ($mode)"
