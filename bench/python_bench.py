#!/usr/bin/env python3
"""qnum.mase.X beside MASE's formula written in torch ops (bench/torch_baseline.py), on the
same float32 tensor in the same process, and the Python call overhead on 1-element inputs.

Needs the qnum package (`pip install ./python`) and torch + numpy (`pip install torch numpy`).
Prints one JSON object per line, or a Markdown table with --markdown:
  {"bench": "python_quantize", "format": ..., "qnum_ms": ..., "torch_ms": ..., "ratio": ..., "same_bits": ...}
      best process CPU time of one call each, calls interleaved, on a torch tensor (MASE's input)
  {"bench": "python_overhead", "call": ..., "us": ...}
      best wall time per call over 300 rounds of 200 calls
`same_bits` is the fraction of elements where both give the same float32 bits. The torch side is
MASE's code op for op (torch_baseline.QUANTIZERS); block_fp and mxint8 are also timed against
the same bits in fewer torch ops (torch_baseline.MINIMAL: "torch_minimal_ms", "ratio_minimal").

Usage: python3 bench/python_bench.py [--threads 1] [--size 4194304] [--sigma 1] [--malloc retain|default] [--markdown]
"""
import argparse
import json
import os
import sys
import time
import timeit

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_baseline as tb  # noqa: E402

import qnum  # noqa: E402

M = qnum.mase

# (torch_baseline's name, family kind, qnum.mase call on the bench tensor)
CASES = [
    ("integer:width=8,frac_width=4", "elementwise", lambda x: M.integer_quantizer(x, 8, 4)),
    ("minifloat_ieee:width=8,exponent_width=4", "elementwise", lambda x: M.minifloat_ieee_quantizer(x, 8, 4)),
    ("log:width=8", "elementwise", lambda x: M.log_quantizer(x, 8, None)),
    ("scale_integer:width=8", "elementwise", lambda x: M.scale_integer_quantizer(x, 8)),
    ("ternary", "elementwise", lambda x: M.ternary_quantizer(x)),
    ("block_fp:width=8,exponent_width=8,block_size=16", "block",
     lambda x: M.block_fp_quantizer(x, 8, 8, None, [16], skip_first_dim=False)),
    ("block_minifloat:width=8,exponent_width=4,exponent_bias_width=8,block_size=16", "block",
     lambda x: M.block_minifloat_quantizer(x, 8, 4, 8, [16], skip_first_dim=False)),
    ("block_log:width=8,exponent_bias_width=8,block_size=16", "block",
     lambda x: M.block_log_quantizer(x, 8, 8, [16], skip_first_dim=False)),
    ("mxint8", "block", lambda x: M.mxint_quantizer(x, 32, 8)),
    ("mxfp8_e4m3", "block", lambda x: M.mxfp_quantizer(x, 32, 4, 3)),
    ("mxfp4_e2m1", "block", lambda x: M.mxfp_quantizer(x, 32, 2, 1)),
]


def best_cpu_seconds_pair(fa, fb, calls=15):
    """Best process CPU time of one call of fa and of fb, calls interleaved (a, b, a, b, ...).
    CPU time, not wall time: on a shared machine a 100 ms torch call is preempted more often
    than a 3 ms qnum call, which would inflate the ratio; both run on this thread (one thread)."""
    fa(), fb()
    best_a = best_b = float("inf")
    for _ in range(calls):
        t = time.process_time()
        fa()
        best_a = min(best_a, time.process_time() - t)
        t = time.process_time()
        fb()
        best_b = min(best_b, time.process_time() - t)
    return best_a, best_b


def best_seconds(fn, number=200, repeat=300):
    """Best wall time per call over `repeat` short rounds of `number` calls (short rounds are
    the ones that run without being preempted on a busy machine)."""
    fn()
    return min(timeit.repeat(fn, number=number, repeat=repeat)) / number


def same_bits_fraction(a, b):
    a = np.ascontiguousarray(a.numpy() if isinstance(a, torch.Tensor) else a).view(np.uint32)
    b = np.ascontiguousarray(b.numpy() if isinstance(b, torch.Tensor) else b).view(np.uint32)
    return float(np.mean(a.ravel() == b.ravel()))


def bench_quantize(size, sigma):
    x = torch.randn(size, dtype=torch.float32, generator=torch.Generator().manual_seed(1)) * sigma
    rows = []
    for name, kind, call in CASES:
        torch_fn = tb.QUANTIZERS[name]
        xin = x.view(tb.ternary_shape(size)) if torch_fn is tb.mase_ternary else x
        t_qnum, t_torch = best_cpu_seconds_pair(lambda: call(xin), lambda: torch_fn(xin))
        row = {"bench": "python_quantize", "format": name, "kind": kind, "size": size, "sigma": sigma,
               "threads": torch.get_num_threads(), "qnum_ms": t_qnum * 1e3, "torch_ms": t_torch * 1e3,
               "ratio": t_torch / t_qnum, "same_bits": same_bits_fraction(call(xin), torch_fn(xin))}
        if name in tb.MINIMAL:  # the same bits in fewer torch ops than MASE's code
            minimal = tb.MINIMAL[name]
            t_qnum2, t_min = best_cpu_seconds_pair(lambda: call(xin), lambda: minimal(xin))
            row.update(torch_minimal_ms=t_min * 1e3, ratio_minimal=t_min / min(t_qnum, t_qnum2),
                       same_bits_minimal=same_bits_fraction(call(xin), minimal(xin)))
        rows.append(row)
    return rows


def bench_overhead():
    a = np.ones(1, np.float32)
    t = torch.ones(1)
    f = qnum.Format("integer:width=8,frac_width=4")
    calls = [
        ("qnum.mase.integer_quantizer(numpy[1], 8, 4)", lambda: M.integer_quantizer(a, 8, 4)),
        ("Format.quantize(numpy[1])", lambda: f.quantize(a)),
        ("Format.quantize(numpy[1], out=x)", lambda: f.quantize(a, out=a)),
        ("qnum.mase.integer_quantizer(tensor[1], 8, 4)", lambda: M.integer_quantizer(t, 8, 4)),
        ("torch formula mase_integer(tensor[1])", lambda: tb.mase_integer(t)),
    ]
    return [{"bench": "python_overhead", "call": name, "us": best_seconds(fn) * 1e6} for name, fn in calls]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--size", type=int, default=4 * 1024 * 1024)
    ap.add_argument("--sigma", type=float, default=1.0)
    ap.add_argument("--markdown", action="store_true", help="a table for docs/perf.md instead of JSON lines")
    ap.add_argument("--malloc", choices=["retain", "default"], default="retain",
                    help="retain: glibc keeps freed memory (qnum.retain_freed_memory(), as qnum's C++ benchmarks; "
                         "steady state for both sides); default: glibc's adaptive thresholds, whose page faults "
                         "depend on the allocation history and mostly slow torch's temporaries")
    args = ap.parse_args()
    if args.malloc == "retain":
        qnum.retain_freed_memory()
    torch.set_num_threads(args.threads)
    qnum.set_num_threads(args.threads)
    info = {"bench": "info", "torch": torch.__version__, "numpy": np.__version__, "threads": args.threads,
            "qnum_isa": qnum.isa(), "malloc": args.malloc}
    rows = bench_quantize(args.size, args.sigma)
    overhead = bench_overhead()
    if not args.markdown:
        for r in [info] + rows + overhead:
            print(json.dumps(r), flush=True)
        return
    print(f"torch {info['torch']}, numpy {info['numpy']}, {args.threads} thread(s), qnum kernels: {info['qnum_isa']}, "
          f"{args.size} floats N(0, {args.sigma}^2), malloc {args.malloc}\n")
    print("| MASE function (bench format) | kind | qnum.mase ms | MASE's torch ops ms | ratio | target | same bits "
          "| minimal torch ops ms (ratio) |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        target = 20 if r["kind"] == "block" else 5
        minimal = (f"{r['torch_minimal_ms']:.2f} ({r['ratio_minimal']:.1f}x, same bits {100 * r['same_bits_minimal']:.2f}%)"
                   if "torch_minimal_ms" in r else "")
        print(f"| {r['format']} | {r['kind']} | {r['qnum_ms']:.2f} | {r['torch_ms']:.2f} | {r['ratio']:.1f}x | "
              f">= {target}x | {100 * r['same_bits']:.2f}% | {minimal} |")
    print("\n| call (1 element) | us |")
    print("|---|---:|")
    for r in overhead:
        print(f"| {r['call']} | {r['us']:.2f} |")


if __name__ == "__main__":
    main()
