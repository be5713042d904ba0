#!/usr/bin/env python3
"""qnum's BERT inference per weight format beside PyTorch's and ONNX Runtime's, one model and
batch after another in one sitting, and the docs/perf.md table ("Packed int8 inference").

    python3 bench/infer_table.py [--qnum build/bin/qnum] [--threads T] [--cpu C]
        [--models bert-tiny,bert-base] [--batches 1,8,32] [--steps N]

Each row runs `qnum bench infer --formats fp32,int8,mxint8 --json`, then
bench/infer_baseline.py (PyTorch fp32, quantize_dynamic on the x86 and onednn engines, ONNX
Runtime fp32 and dynamic int8) on the same batch x 128 random ids, right after each other; --cpu
pins every call to one core with taskset (1-thread rows). The ratios are the best int8 peer's
time over qnum's int8 and MXINT8 times (> 1: qnum is faster). Needs torch, transformers,
onnxruntime, onnx and onnxscript in this Python.
"""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
INT8_PEERS = ("torch-dynamic-x86", "torch-dynamic-onednn", "ort-dynamic-int8")


def run_lines(cmd):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--qnum", default=os.path.join(HERE, "..", "build", "bin", "qnum"))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--cpu", type=int, default=None, help="pin every call to this core (taskset -c)")
    ap.add_argument("--models", default="bert-tiny,bert-base")
    ap.add_argument("--batches", default="1,8,32")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--seq", type=int, default=128)
    a = ap.parse_args()
    pin = ["taskset", "-c", str(a.cpu)] if a.cpu is not None else []
    print("| model | batch | qnum fp32 | qnum int8 | qnum MXINT8 | PyTorch fp32 | best int8 peer "
          "| int8 / peer | MXINT8 / peer |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: |")
    for model in a.models.split(","):
        for batch in (int(b) for b in a.batches.split(",")):
            common = ["--model", model, "--batch", str(batch), "--seq", str(a.seq), "--threads", str(a.threads),
                      "--steps", str(a.steps)]
            q = run_lines(pin + [a.qnum, "bench", "infer", "--formats", "fp32,int8,mxint8", "--json"] + common)[0]
            qms = {r["format"]: r["median_ms"] for r in q["rows"]}
            peers = {r["engine"]: r["ms_per_batch"]
                     for r in run_lines(pin + [sys.executable, os.path.join(HERE, "infer_baseline.py"), "--json"]
                                        + common)}
            best = min((e for e in INT8_PEERS if e in peers), key=lambda e: peers[e])
            print(f"| {model} | {batch} | {qms['fp32']:,.1f} ms | {qms['int8']:,.1f} ms | {qms['mxint8']:,.1f} ms "
                  f"| {peers['torch-fp32']:,.1f} ms | {best} {peers[best]:,.1f} ms "
                  f"| {peers[best] / qms['int8']:.2f}x | {peers[best] / qms['mxint8']:.2f}x |", flush=True)
    print(f"\nthreads {a.threads}; qnum AMX: {q['amx']}; {os.path.basename(sys.executable)}")


if __name__ == "__main__":
    main()
