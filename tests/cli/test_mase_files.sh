#!/usr/bin/env bash
# MASE's own example config (tests/data/mase_configs/jsc_toy_by_type.toml, copied unchanged)
# driving `qnum train`, `qnum transform` and `qnum search` with what MASE's file leaves out
# given on the command line (--dataset jsc-synthetic, --load, --output-dir), MASE's
# top-level keys each noted in one line; `ch` spellings on the command line (noted, or an
# error naming qnum's spelling); `qnum download` offline. A few seconds.
# Usage: QNUM=path/to/qnum MASE_CONFIGS=tests/data/mase_configs bash test_mase_files.sh
set -u
QNUM=${QNUM:?set QNUM to the qnum binary}
CFG=${MASE_CONFIGS:?set MASE_CONFIGS to tests/data/mase_configs}/jsc_toy_by_type.toml
source "$(dirname "$0")/../labs/lib.sh"
cd "$tmp" || exit 1

# has NAME TEXT FILE: FILE contains TEXT (fixed string).
has() { grep -qF -- "$2" "$3" || fail "$1: $3 lacks '$2': $(head -c 600 "$3")"; }

run base 0 "$QNUM" train jsc-tiny jsc-synthetic --max-epochs 1 --output-dir run --no-progress

# MASE's lab-2 file, unchanged, with the data and checkpoint given as flags.
run transform 0 "$QNUM" transform --config "$CFG" --dataset jsc-synthetic --load run/best --output-dir t
has transform 'accelerator = "gpu": ignored by qnum transform: qnum trains on the CPU' transform.err
has transform 'search: ignored by qnum transform: used by qnum search' transform.err
has transform "layer(s) changed" transform.out
ls t/*.csv > /dev/null 2>&1 || fail "transform wrote no CSV"

# The same file drives a search (2 trials here; its model is qnum's jsc-tiny).
run search 0 "$QNUM" search --config "$CFG" --dataset jsc-synthetic --load run/best --output-dir s --trials 2
has search 'log_every_n_steps = 5: ignored by qnum search' search.err
has search 'hw_runner.average_bitwidth: qnum measures average_bitwidth' search.err
[ -f s/best.json ] || fail "search wrote no best.json"

# And trains (flags over the file: 1 epoch, not its 5; MODEL DATASET given).
run train 0 "$QNUM" train jsc-tiny jsc-synthetic --config "$CFG" --max-epochs 1 --output-dir r3 --no-progress
has train 'accelerator = "gpu": ignored by qnum train' train.err
has train 'passes: ignored by qnum train: used by qnum transform' train.err
[ "$(wc -l < r3/metrics.jsonl)" -eq 1 ] || fail "train ran $(wc -l < r3/metrics.jsonl) epochs, want 1"

# ch spellings: explained in one line, or an error naming qnum's spelling.
run ch_flags 0 "$QNUM" train jsc-tiny jsc-synthetic --max-epochs 1 --output-dir r2 --no-progress \
  --accelerator gpu --cpu=0 --load-type pl --task cls
has ch_flags "note: --accelerator gpu: ignored by qnum train: qnum trains on the CPU" ch_flags.err
has ch_flags "note: --cpu 0: ignored by qnum train" ch_flags.err
has ch_flags "note: --load-type pl: ignored by qnum train" ch_flags.err
expect_one_line_error project_dir "--project-dir x: qnum transform spells this --output-dir" \
  "$QNUM" transform --config "$CFG" --project-dir x
expect_one_line_error task "does classification only" "$QNUM" train jsc-tiny jsc-synthetic --task lm

# Downloads offline: one line saying what to fetch and where to put it.
expect_one_line_error download_offline "into $tmp/cache/hf/prajjwal1/bert-tiny" \
  env HF_ENDPOINT=http://127.0.0.1:9 QNUM_CACHE_DIR="$tmp/cache" "$QNUM" download bert-tiny
expect_one_line_error download_unknown "download: unknown name 'nope'" "$QNUM" download nope

finish mase_files
