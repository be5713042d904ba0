#!/usr/bin/env python3
"""PyTorch baselines for qnum's benchmarks, measured on the same machine and shapes.

Development tool only (qnum never needs Python). Install PyTorch from PyPI
(`pip install torch numpy`): its CPU path uses MKL/oneDNN as users run it; Debian's
python3-torch uses a generic BLAS and is no fair baseline.

Prints one JSON object per line:
  {"bench": "quantize", "format": ..., "gbps": ..., "memcpy_gbps": ...}   MASE-style fake-quantize as torch ops
  {"bench": "gemm", "m": .., "n": .., "k": .., "gflops": ...}               torch.matmul fp32
  {"bench": "attention", "seq": .., "fused_ms": .., "naive_ms": ..}        SDPA vs explicit softmax(QK^T)V

Usage: python3 bench/torch_baseline.py [--threads 1] [--size 4194304] [--quick]
                                      [--only quantize,gemm,attention]
"""
import argparse
import json
import math
import time

import torch
import torch.nn.functional as F


def best_time(fn, repeat=7, min_seconds=0.2):
    fn()  # warm-up
    best = float("inf")
    for _ in range(repeat):
        n, start = 0, time.perf_counter()
        while True:
            fn()
            n += 1
            elapsed = time.perf_counter() - start
            if elapsed >= min_seconds / repeat:
                break
        best = min(best, elapsed / n)
    return best


# ---- MASE's fake quantizers written as torch ops (forward only, as in MASE) --------------

def mase_integer(x, width=8, frac_width=4):
    scale = 2.0 ** frac_width
    lo, hi = -(2 ** (width - 1)), 2 ** (width - 1) - 1
    return torch.clamp(torch.round(x * scale), lo, hi) / scale


def mase_minifloat_ieee(x, width=8, exponent_width=4):
    mantissa_bits = width - exponent_width - 1
    bias = 2 ** (exponent_width - 1) - 1
    emin, emax = -bias, 2 ** exponent_width - 1 - bias
    shift = 2.0 ** mantissa_bits
    sign = torch.sign(x + 1e-9)
    value = torch.abs(x)
    e = torch.clamp(torch.floor(torch.log2(value + 1e-9)), emin, emax)
    m = value / 2.0 ** e
    normal = (e != emin).float()
    k = normal * torch.clamp(torch.round(m * shift - shift), 0, shift - 1) + (1 - normal) * torch.clamp(
        torch.round(m * shift / 2), 0, shift - 1)
    mant = normal * (1 + k / shift) + (1 - normal) * (k / shift * 2)
    q = sign * 2.0 ** e * mant
    close = torch.isclose(value, torch.zeros_like(value)).float()
    return (1 - close) * q + close * x


def mase_log(x, width=8):
    bias = 2 ** (width - 2) - 1
    emin, emax = -bias, 2 ** (width - 1) - 1 - bias
    eps = 0.1 * 2.0 ** emin
    sign = torch.sign(x + eps)
    e = torch.clamp(torch.round(torch.log2(torch.abs(x) + eps)), emin, emax)
    return sign * 2.0 ** e


def mase_block_fp(x, width=8, exponent_width=8, block=16):
    mantissa_bits = width - 1
    bias = 2 ** (exponent_width - 1) - 1
    rows = x.reshape(-1, block)
    bmax = rows.abs().amax(dim=1, keepdim=True)
    bmax = torch.where(bmax == 0, torch.ones_like(bmax), bmax)
    e = torch.clamp(torch.ceil(torch.log2(bmax)), -bias, 2 ** exponent_width - 1 - bias)
    sign = torch.sign(rows + 1e-9)
    v = rows.abs() + 1e-9
    k = torch.clamp(torch.round(v / 2.0 ** e * 2.0 ** mantissa_bits), 0, 2.0 ** mantissa_bits - 1)
    return (sign * 2.0 ** e * k / 2.0 ** mantissa_bits).reshape(x.shape)


def mase_mxint(x, element_bits=8, block=32):
    rows = x.reshape(-1, block)
    amax = torch.clamp(rows.abs().amax(dim=1, keepdim=True), min=torch.finfo(torch.float32).tiny)
    s = torch.ceil(torch.log2(amax))
    half = 2.0 ** (element_bits - 1)
    m = torch.clamp(torch.round(rows / 2.0 ** s * half), -half, half - 1)
    return (m / half * 2.0 ** s).reshape(x.shape)


QUANTIZERS = {
    "integer:width=8,frac_width=4": mase_integer,
    "minifloat_ieee:width=8,exponent_width=4": mase_minifloat_ieee,
    "log:width=8": mase_log,
    "block_fp:width=8,exponent_width=8,block_size=16": mase_block_fp,
    "mxint8": mase_mxint,
}


def bench_quantize(size):
    x = torch.randn(size, dtype=torch.float32)
    memcpy = best_time(lambda: x.clone())
    for name, fn in QUANTIZERS.items():
        t = best_time(lambda: fn(x))
        print(json.dumps({"bench": "quantize", "format": name, "size": size, "threads": torch.get_num_threads(),
                          "gbps": 8 * size / t / 1e9, "memcpy_gbps": 8 * size / memcpy / 1e9}), flush=True)


def bench_gemm(shapes):
    for m, n, k in shapes:
        a = torch.randn(m, k)
        b = torch.randn(k, n)
        t = best_time(lambda: torch.matmul(a, b))
        print(json.dumps({"bench": "gemm", "kind": "fp32", "m": m, "n": n, "k": k,
                          "threads": torch.get_num_threads(), "gflops": 2 * m * n * k / t / 1e9}), flush=True)


def bench_attention(seqs, heads=2, head_dim=64):
    for seq in seqs:
        q, k, v = (torch.randn(1, heads, seq, head_dim) for _ in range(3))

        def naive():
            s = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(head_dim)
            return torch.matmul(torch.softmax(s, dim=-1), v)

        fused = best_time(lambda: F.scaled_dot_product_attention(q, k, v))
        plain = best_time(naive)
        print(json.dumps({"bench": "attention", "seq": seq, "heads": heads, "head_dim": head_dim,
                          "threads": torch.get_num_threads(), "fused_ms": fused * 1e3, "naive_ms": plain * 1e3}),
              flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--size", type=int, default=4 * 1024 * 1024)
    ap.add_argument("--quick", action="store_true", help="fewer shapes")
    ap.add_argument("--only", default="quantize,gemm,attention", help="comma-separated subset of the benchmarks")
    args = ap.parse_args()
    only = set(args.only.split(","))
    torch.set_num_threads(args.threads)
    print(json.dumps({"bench": "info", "torch": torch.__version__, "threads": args.threads,
                      "mkldnn": torch.backends.mkldnn.is_available()}), flush=True)
    if "quantize" in only:
        bench_quantize(args.size)
    if "gemm" in only:
        bench_gemm([(1024, 1024, 1024)] if args.quick else [(256, 256, 256), (1024, 1024, 1024), (512, 768, 3072)])
    if "attention" in only:
        bench_attention([512] if args.quick else [128, 512, 1024])


if __name__ == "__main__":
    main()
