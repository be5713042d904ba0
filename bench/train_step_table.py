#!/usr/bin/env python3
"""qnum's BERT training step in fp32 and bf16 beside PyTorch's fp32 and autocast bf16, one
model after another in one sitting, and the docs/perf.md table ("bf16 training").

    python3 bench/train_step_table.py [--qnum build/bin/qnum] [--threads T] [--cpu C]
        [--models bert-tiny,bert:4-256-4-1024,bert:8-512-8-2048] [--steps N]

Each row runs `qnum bench train-step --precision fp32|bf16 --json`, then
bench/torch_bert_baseline.py without and with `--autocast bf16` (sdpa attention, the same
batch 32 x 128, AdamW, clipping 1.0), right after each other; --cpu pins every call to one
core with taskset (1-thread rows). Needs torch and transformers in this Python.
"""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def run_json(cmd):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip().splitlines()
    return json.loads(out[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--qnum", default=os.path.join(HERE, "..", "build", "bin", "qnum"))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--cpu", type=int, default=None, help="pin every call to this core (taskset -c)")
    ap.add_argument("--models", default="bert-tiny,bert:4-256-4-1024,bert:8-512-8-2048")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seq", type=int, default=128)
    a = ap.parse_args()
    pin = ["taskset", "-c", str(a.cpu)] if a.cpu is not None else []
    common = ["--batch", str(a.batch), "--seq", str(a.seq), "--threads", str(a.threads), "--steps", str(a.steps)]
    print("| model | qnum fp32 | qnum bf16 | PyTorch fp32 | PyTorch autocast bf16 | bf16 / autocast "
          "| qnum fp32 / PyTorch fp32 |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for model in a.models.split(","):
        q = {p: run_json(pin + [a.qnum, "bench", "train-step", "--model", model, "--precision", p, "--json"] + common)
             for p in ("fp32", "bf16")}
        t = {m: run_json(pin + [sys.executable, os.path.join(HERE, "torch_bert_baseline.py"), "--model", model,
                                "--attn", "sdpa", "--warmup", "1", "--autocast", m] + common)
             for m in ("none", "bf16")}
        q32, q16 = q["fp32"]["median_ms"], q["bf16"]["median_ms"]
        t32, t16 = t["none"]["train_step_ms"], t["bf16"]["train_step_ms"]
        print(f"| {model} | {q32:,.0f} ms | {q16:,.0f} ms | {t32:,.0f} ms | {t16:,.0f} ms | {t16 / q16:.2f}x "
              f"| {t32 / q32:.2f}x |", flush=True)
    print(f"\nqnum bf16 engine: {q['bf16']['engine']}; {t['none']['framework']}; threads {a.threads}")


if __name__ == "__main__":
    main()
