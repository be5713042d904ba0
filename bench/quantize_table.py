#!/usr/bin/env python3
"""Runs `qnum bench quantize` for every format family and mode and prints the perf.md table.

    python3 bench/quantize_table.py [--qnum build/bin/qnum] [--size N] [--threads T] [--cpu C]

Each row is one `qnum bench quantize --json` call: the kernel and memcpy of the same buffer
alternate inside it, so the ratio column is a same-run ratio (GB/s count 4 bytes read and 4
written per element). --cpu pins every call to one core with taskset.
"""
import argparse
import json
import subprocess

ROWS = [
    ("integer", "exact"), ("integer", "mase"),
    ("minifloat_ieee", "exact"), ("minifloat_ieee", "mase"),
    ("fp8_e4m3", "exact"), ("minifloat_denorm", "exact"), ("minifloat_denorm", "mase"),
    ("log", "exact"), ("log", "mase"),
    ("binary", "exact"), ("ternary", "exact"), ("residual_sign", "exact"),
    ("block_fp", "exact"), ("block_fp", "mase"),
    ("block_minifloat", "exact"), ("block_minifloat", "mase"),
    ("block_log", "exact"), ("block_log", "mase"),
    ("scale_integer", "exact"), ("scale_integer", "mase"),
    ("mxint8", "exact"), ("mxint8", "mase"),
    ("mxfp8_e4m3", "exact"), ("mxfp8_e4m3", "mase"), ("mxfp4_e2m1", "exact"), ("mxfp4_e2m1", "mase"),
    ("nvfp4", "exact"),
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--qnum", default="build/bin/qnum")
    ap.add_argument("--size", type=int, default=4 * 1024 * 1024)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--cpu", type=int, default=None)
    ap.add_argument("--only", default="", help="comma-separated format names")
    a = ap.parse_args()
    only = set(filter(None, a.only.split(",")))
    print("| format | mode | path | isa | qnum GB/s | memcpy GB/s | ratio |")
    print("| --- | --- | --- | --- | ---: | ---: | ---: |")
    for fmt, mode in ROWS:
        if only and fmt not in only:
            continue
        cmd = [a.qnum, "bench", "quantize", "--format", fmt, "--mode", mode, "--size", str(a.size),
               "--threads", str(a.threads), "--json"]
        if a.cpu is not None:
            cmd = ["taskset", "-c", str(a.cpu)] + cmd
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            print(f"| {fmt} | {mode} | error | | | | {p.stderr.strip().splitlines()[-1] if p.stderr else p.returncode} |")
            continue
        j = json.loads(p.stdout)
        print(f"| {j['format']} | {mode} | {j['path']} | {j['isa']} | {j['gbps']:.2f} | {j['memcpy_gbps']:.2f} | "
              f"{j['ratio']:.2f} |", flush=True)


if __name__ == "__main__":
    main()
