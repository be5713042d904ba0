#!/usr/bin/env python3
"""PyTorch baselines for qnum's benchmarks, measured on the same machine and shapes.

Development tool only (qnum never needs Python). Install PyTorch from PyPI
(`pip install torch numpy`): its CPU path uses MKL/oneDNN as users run it; Debian's
python3-torch uses a generic BLAS and is no fair baseline.

Prints one JSON object per line:
  {"bench": "quantize", "format": ..., "gbps": ..., "memcpy_gbps": ...}   MASE's fake-quantize code as torch ops
      (integer, minifloat_ieee, log, block_fp, mxint8, block_minifloat, block_log, scale_integer, ternary,
       mxfp8_e4m3, mxfp4_e2m1; 4M floats by default, GB/s counts 4 bytes read + 4 written per element);
      block_fp and mxint8 also as "... (minimal ops)": the same bits in fewer ops than MASE's code
  {"bench": "gemm", "m": .., "n": .., "k": .., "gflops": ...}               torch.matmul fp32
  {"bench": "attention", "seq": .., "fused_ms": .., "naive_ms": ..}        SDPA vs explicit softmax(QK^T)V

Usage: python3 bench/torch_baseline.py [--threads 1] [--size 4194304] [--quick]
                                      [--only quantize,gemm,attention] [--sigma 1] [--formats block_log,...]
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


def minimal_block_fp(x, width=8, exponent_width=8, block=16):
    """block_fp in the fewest torch ops that give MASE's bits on the bench data (no zero-block fill,
    no near-zero pass-through): a harder baseline than MASE's own code (mase_block_fp)."""
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


def minimal_mxint(x, element_bits=8, block=32):
    """mxint in the fewest torch ops (amax instead of MASE's quantile(|x|, 1.0)): a harder
    baseline than MASE's own code (mase_mxint)."""
    rows = x.reshape(-1, block)
    amax = torch.clamp(rows.abs().amax(dim=1, keepdim=True), min=torch.finfo(torch.float32).tiny)
    s = torch.ceil(torch.log2(amax))
    half = 2.0 ** (element_bits - 1)
    m = torch.clamp(torch.round(rows / 2.0 ** s * half), -half, half - 1)
    return (m / half * 2.0 ** s).reshape(x.shape)


# The following follow MASE's code op for op (snapshot described in shared/spec/formats.md), since the
# point is to time what MASE's implementation costs: the same tensor ops, temporaries and dtype casts.

def _mase_block_1d(x, block):
    """MASE utils.block for a 1-D tensor (the bias path): zero-pad to a multiple of the block, reshape
    to [num_blocks, block], per-block max |x|, then MASE's zero-block fill."""
    n = x.shape[0]
    padded = F.pad(x, [0, math.ceil(n / block) * block - n])
    padded_shape = torch.tensor(padded.shape, dtype=torch.int)
    blocked = padded.reshape(int(padded_shape[0]) // block, block)
    per_block_max = torch.abs(blocked).max(dim=1, keepdim=True)[0]
    if torch.all(per_block_max == 0):
        per_block_max = torch.ones_like(per_block_max)
    else:
        per_block_max[per_block_max == 0] = per_block_max[per_block_max != 0].min()
    return blocked, per_block_max


def _mase_unblock_1d(blocked, n):
    return blocked.flatten()[:n]


def mase_block_fp(x, width=8, exponent_width=8, block=16):
    """MASE _block_fp_quantize op for op (1-D input: utils.block's bias path; my_clamp/my_round are
    clamp/round under an STE), with its zero-block fill and near-zero pass-through."""
    blocked, per_block_max = _mase_block_1d(x, block)
    mantissa_bits = width - 1
    exponent_bias = 2 ** (exponent_width - 1) - 1
    exponent_max = 2 ** exponent_width - 1 - exponent_bias
    exponent_min = -exponent_bias
    mantissa_integer_max = 2 ** mantissa_bits - 1
    per_block_sign = torch.sign(blocked + 1e-9)
    per_block_value = torch.abs(blocked) + 1e-9
    per_block_exponent = torch.clamp(torch.ceil(torch.log2(per_block_max)), exponent_min, exponent_max)
    per_block_mantissa = per_block_value / 2 ** per_block_exponent
    shift = 2 ** mantissa_bits
    per_block_mantissa_integer = torch.clamp(torch.round(per_block_mantissa * shift), 0, mantissa_integer_max)
    per_block_mantissa = per_block_mantissa_integer / shift
    per_block_msfp = per_block_sign * (2 ** per_block_exponent) * per_block_mantissa
    msfp_x = _mase_unblock_1d(per_block_msfp, x.shape[0])
    is_close_to_0 = torch.isclose(x, torch.tensor([0.0], dtype=x.dtype, device=x.device))
    return (~is_close_to_0) * msfp_x + is_close_to_0 * x


def mase_mxint(x, element_bits=8, block=32, scale_bits=8):
    """MASE mxint_quantizer (quantile_search off) op for op: flatten_for_quantize (block_dim -1),
    extract_mxint_components (block max as quantile(|x|, 1.0) in float32), compose_mxint_tensor,
    permute_for_dequantize."""
    rows = x.flatten().reshape(x.numel() // block, block)
    x_max = rows.abs().to(torch.float32).quantile(1.0, dim=1, keepdim=True).to(rows.dtype)
    x_max = x_max.clamp(min=torch.finfo(x_max.dtype).tiny)
    scale = x_max.log2().ceil()
    scale_bias = 2 ** (scale_bits - 1) - 1
    r = rows / 2 ** scale
    mant = r * 2 ** (element_bits - 1)
    scale = (scale + scale_bias).clamp(min=0, max=2 ** scale_bits - 1)
    mant = mant.round().clamp(min=-(2 ** (element_bits - 1)), max=2 ** (element_bits - 1) - 1)
    out = mant / 2 ** (element_bits - 1) * 2 ** (scale - scale_bias)
    return out.reshape(x.shape)


def _mase_minifloat_ieee_tensor_bias(x, width, exponent_width, exponent_bias):
    """MASE _minifloat_ieee_quantize with a per-block bias tensor (as block_minifloat calls it)."""
    mantissa_bits = width - exponent_width - 1
    exponent_max = 2 ** exponent_width - 1 - exponent_bias
    exponent_min = -exponent_bias
    shift = 2 ** mantissa_bits
    sign = torch.sign(x + 1e-9)
    value = torch.abs(x)
    exponent = torch.floor(torch.log2(value + 1e-9))
    exponent = exponent.clamp(min=exponent_min, max=exponent_max)
    mantissa = value / 2 ** exponent
    is_normal = ~torch.isclose(exponent, -exponent_bias)
    shifted = is_normal * torch.clamp(torch.round(mantissa * shift - shift), 0, shift - 1) + \
        (~is_normal) * torch.clamp(torch.round(mantissa * shift / 2), 0, shift - 1)
    mantissa = is_normal * (1.0 + shifted / shift) + (~is_normal) * (shifted / shift * 2)
    is_close_to_0 = torch.isclose(value, torch.tensor([0.0], dtype=value.dtype))
    return (~is_close_to_0) * (sign * (2 ** exponent) * mantissa) + is_close_to_0 * x


def mase_block_minifloat(x, width=8, exponent_width=4, exponent_bias_width=8, block=16):
    # 1-D input: MASE's bias-path blocking, 16 consecutive elements per block.
    blocked, per_block_max = _mase_block_1d(x, block)
    bias = torch.clamp(torch.floor(torch.log2(per_block_max)), 0, 2 ** exponent_bias_width - 1)
    q = _mase_minifloat_ieee_tensor_bias(blocked, width, exponent_width, bias)
    return _mase_unblock_1d(q, x.shape[0])


def mase_block_log(x, width=8, exponent_bias_width=8, block=16):
    exponent_bits = width - 1
    blocked, per_block_max = _mase_block_1d(x, block)
    per_block_max_exponent = torch.ceil(torch.log2(per_block_max))
    bias = torch.clamp(2 ** exponent_bits - 1 - per_block_max_exponent, 0, 2 ** exponent_bias_width - 1)
    # MASE _log_quantize with a bias tensor
    exponent_max = 2 ** exponent_bits - 1 - bias
    exponent_min = -bias
    min_pos = 2 ** exponent_min
    sign = torch.sign(blocked + min_pos * 0.1)
    value = torch.abs(blocked) + min_pos * 0.1
    exponent = torch.round(torch.log2(value)).clamp(min=exponent_min, max=exponent_max)
    return _mase_unblock_1d(sign * (2 ** exponent), x.shape[0])


def mase_scale_integer(x, width=8):
    # MASE's row = the last dim; for the 1-D bench tensor that is the whole tensor (as in qnum's row).
    x_max = x.abs().max(dim=-1, keepdim=True).values + 1e-9
    int_min, int_max = -(2 ** (width - 1)), 2 ** (width - 1) - 1
    scale = 2 ** (width - 1) / x_max
    return torch.clamp(torch.round(x.mul(scale)), int_min, int_max).div(scale)


def mase_ternary(x):
    """MASE ternary_quantizer defaults (scaling_factor=False, no statistics): the threshold argument is
    ignored; per index i of dim 0, delta_i = 0.75 * mean|x_i|; out = +1 / -1 / 0. MASE's unscaled
    Ternary.forward still computes the (unused) alpha, so that cost is kept. MASE's delta/alpha
    expand over dims 1..3, so the input must be 4-D: the bench passes the same 4M floats viewed as
    [64, 64, 32, 32] (a conv feature map: 64 slices of 65536 elements)."""
    n = x[0].nelement()
    delta = 0.75 * torch.sum(x.flatten(1).abs(), dim=(1,)) / n
    delta = delta.unsqueeze(1).unsqueeze(1).unsqueeze(1).expand(-1, x.size()[1], x.size()[2], x.size()[3])
    absvalue = x.abs()
    truth_value = (absvalue > delta).to(torch.float32)
    truth_num = truth_value.sum(dim=(1, 2, 3))
    alpha = (truth_value.view(1, -1) * absvalue.view(1, -1)).view(x.size()).sum(dim=(1, 2, 3)) / truth_num
    alpha = alpha.view(-1, 1)  # unused by the unscaled op, computed by MASE anyway
    pos_one = torch.where(x > delta, 1.0, 0.0)
    neg_one = torch.where(x < -delta, -1.0, 0.0)
    return pos_one + neg_one


def ternary_shape(size):
    return (size // (64 * 32 * 32), 64, 32, 32) if size % (64 * 32 * 32) == 0 else (size, 1, 1, 1)


def _mase_mx_minifloat_encode(x, exp_bits, frac_bits):
    """MASE _minifloat_mx extract_minifloat_component, finite mode, round 'rn' (frexp, top 15 fraction
    bits RNE'd, exponent OR carry, one subnormal binade)."""
    y_exp_bias = (1 << (exp_bits - 1)) - 1
    y_exp_max = (1 << exp_bits) - 1
    y_exp_max_biased = y_exp_max - y_exp_bias
    y_exp_min = 0
    y_exp_min_biased = y_exp_min - y_exp_bias
    y_frac_max = (1 << frac_bits) - 1
    x = x.to(torch.float32)
    y_sign = x < 0
    x_int32 = x.abs().view(torch.int32)
    flush_to_zero = (x_int32 & 0x7F800000) == 0
    x_normal = torch.where(flush_to_zero, 0.0, x)
    x_frac, x_exp = x_normal.abs().frexp()
    x_frac = x_frac * 2
    x_exp = x_exp - 1
    y_exp = x_exp
    underflow = y_exp < y_exp_min_biased
    overflow = y_exp > y_exp_max_biased
    y_exp = y_exp + y_exp_bias
    y_frac = x_frac.view(torch.int32) & 0x7FFFFF
    y_frac = (y_frac >> 8).float()
    y_frac = y_frac / (1 << (15 - frac_bits))
    y_frac = y_frac.round().to(torch.int32)
    y_is_subnormal = (y_exp == y_exp_min) & (y_frac != 0)
    y_frac = torch.where(y_is_subnormal, (y_frac | (1 << frac_bits)) >> 1, y_frac)
    y_frac = torch.where(underflow, 0, y_frac)
    y_exp = torch.where(underflow, 0, y_exp)
    y_frac = torch.where(overflow, y_frac_max, y_frac)
    y_exp = torch.where(overflow, y_exp_max, y_exp)
    y_frac = torch.where(flush_to_zero, 0, y_frac)
    y_exp = torch.where(flush_to_zero, 0, y_exp)
    y = (y_exp << frac_bits) | y_frac
    y = torch.where(y_sign, y + (1 << (exp_bits + frac_bits)), y)
    return y.to(torch.uint16)


def _mase_mx_minifloat_decode(elements, exp_bits, frac_bits):
    """MASE compose_minifloat_component, finite mode."""
    x_sign_mask = 1 << (exp_bits + frac_bits)
    x_frac_mask = (1 << frac_bits) - 1
    x_exp_bias = (1 << (exp_bits - 1)) - 1
    elements = elements.to(torch.int32)
    y_sign = (elements & x_sign_mask) << (31 - (exp_bits + frac_bits))
    elements = elements & 0x7FFF
    x_exp = (elements >> frac_bits) & ((1 << exp_bits) - 1)
    x_frac = elements & x_frac_mask
    is_subnormal = (x_exp == 0) & (x_frac != 0)
    is_zero = (x_exp == 0) & (x_frac == 0)
    y_exp = x_exp - x_exp_bias
    y_exp = torch.where(is_subnormal, y_exp + 1, y_exp)
    y_exp = torch.exp2(y_exp)
    y_frac = x_frac.to(torch.float32) / (1 << frac_bits)
    y_frac = torch.where(is_subnormal, y_frac, y_frac + 1.0)
    y = y_exp * y_frac
    y = torch.where(is_zero, 0.0, y)
    y = torch.where(y_sign != 0, -y, y)
    return y.to(torch.float32)


def mase_mxfp(x, exp_bits, frac_bits, block=32, scale_exp_bits=8):
    """MASE mxfp_quantizer (block_dim=-1, no quantile search): mxfp_quantizer_sim ->
    extract_mxfp_components (flush subnormals, amax via quantile(1.0), shared = floor(log2 amax) -
    emax_el, uint8 scale, uint8 element codes) -> compose_mxfp_tensor -> permute back."""
    out_dq = torch.zeros_like(x)  # allocated (and discarded) by mxfp_quantizer_sim
    shape = tuple(x.shape)
    t = x.flatten().float()  # flatten_for_quantize (block dim already last)
    n_blocks = t.numel() // block
    sc_exp_max, sc_exp_min = (1 << scale_exp_bits) - 1, 0
    sc_exp_bias = (1 << (scale_exp_bits - 1)) - 1
    el_exp_max = (1 << exp_bits) - 1
    el_exp_bias = (1 << (exp_bits - 1)) - 1
    el_exp_max_biased = el_exp_max - el_exp_bias
    t = t.flatten().reshape(n_blocks, block)
    flush_to_zero = (t.view(torch.int32) & 0x7F800000) == 0
    t = torch.where(flush_to_zero, 0.0, t)
    shared_exp = t.abs().quantile(1.0, dim=1, keepdim=True)
    shared_exp = shared_exp.log2().floor().to(torch.int32)
    shared_exp -= el_exp_max_biased
    shared_exp = shared_exp.clamp(sc_exp_min - sc_exp_bias, sc_exp_max - sc_exp_bias)
    scales = shared_exp + sc_exp_bias
    scales = torch.where(flush_to_zero.all(dim=1, keepdim=True), 0, scales).to(torch.uint8)
    scales_fp = torch.exp2(shared_exp)
    minifloats = torch.where(flush_to_zero, 0.0, t / scales_fp)
    elements = _mase_mx_minifloat_encode(minifloats, exp_bits, frac_bits)
    elements = elements.view(torch.uint16).to(torch.uint8)
    # compose_mxfp_tensor
    scales_fp = torch.exp2(scales.to(torch.int32) - sc_exp_bias)
    minifloats = _mase_mx_minifloat_decode(elements.to(torch.uint16), exp_bits, frac_bits)
    out_dq = (minifloats * scales_fp).flatten().to(x.dtype)
    return out_dq.reshape(shape)  # permute_for_dequantize (identity permutation for block_dim=-1)


QUANTIZERS = {
    "integer:width=8,frac_width=4": mase_integer,
    "minifloat_ieee:width=8,exponent_width=4": mase_minifloat_ieee,
    "log:width=8": mase_log,
    "block_fp:width=8,exponent_width=8,block_size=16": mase_block_fp,
    "mxint8": mase_mxint,
    "block_minifloat:width=8,exponent_width=4,exponent_bias_width=8,block_size=16": mase_block_minifloat,
    "block_log:width=8,exponent_bias_width=8,block_size=16": mase_block_log,
    "scale_integer:width=8": mase_scale_integer,
    "ternary": mase_ternary,  # input viewed 4-D, see ternary_shape
    "mxfp8_e4m3": lambda x: mase_mxfp(x, 4, 3, block=32),
    "mxfp4_e2m1": lambda x: mase_mxfp(x, 2, 1, block=32),
}

# The same bits in fewer torch ops than MASE's code: a second, harder baseline for two formats.
MINIMAL = {
    "block_fp:width=8,exponent_width=8,block_size=16": minimal_block_fp,
    "mxint8": minimal_mxint,
}


def bench_quantize(size, sigma, formats):
    x = torch.randn(size, dtype=torch.float32) * sigma
    memcpy = best_time(lambda: x.clone())
    for name, fn in QUANTIZERS.items():
        if formats and not any(name.startswith(f) for f in formats):
            continue
        xin = x.view(ternary_shape(size)) if fn is mase_ternary else x
        for label, f in [(name, fn)] + ([(name + " (minimal ops)", MINIMAL[name])] if name in MINIMAL else []):
            t = best_time(lambda: f(xin))
            print(json.dumps({"bench": "quantize", "format": label, "size": size, "threads": torch.get_num_threads(),
                              "sigma": sigma, "gbps": 8 * size / t / 1e9,
                              "memcpy_gbps": 8 * size / memcpy / 1e9}), flush=True)


def bench_gemm(shapes):
    """fp32 torch.matmul and int8 torch._int_mm (int8 x int8 -> int32, oneDNN / AMX where the
    CPU has it) per shape: the peers of `qnum bench gemm --kind fp32|int8`."""
    for m, n, k in shapes:
        a = torch.randn(m, k)
        b = torch.randn(k, n)
        t = best_time(lambda: torch.matmul(a, b))
        print(json.dumps({"bench": "gemm", "kind": "fp32", "m": m, "n": n, "k": k,
                          "threads": torch.get_num_threads(), "gflops": 2 * m * n * k / t / 1e9}), flush=True)
        a8 = torch.randint(-128, 128, (m, k), dtype=torch.int8)
        b8 = torch.randint(-128, 128, (k, n), dtype=torch.int8)
        t = best_time(lambda: torch._int_mm(a8, b8))
        print(json.dumps({"bench": "gemm", "kind": "int8 (torch._int_mm)", "m": m, "n": n, "k": k,
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
    ap.add_argument("--sigma", type=float, default=1.0,
                    help="quantize input: N(0, sigma^2) (0.02: BERT's weight scale; qnum bench quantize --sigma)")
    ap.add_argument("--formats", default="", help="quantize: comma-separated format name prefixes (default all)")
    ap.add_argument("--only", default="quantize,gemm,attention", help="comma-separated subset of the benchmarks")
    ap.add_argument("--gemm-shapes", default="", help="gemm: 'M,N,K;M,N,K...' instead of the default shapes")
    args = ap.parse_args()
    only = set(args.only.split(","))
    torch.set_num_threads(args.threads)
    print(json.dumps({"bench": "info", "torch": torch.__version__, "threads": args.threads,
                      "mkldnn": torch.backends.mkldnn.is_available()}), flush=True)
    if "quantize" in only:
        bench_quantize(args.size, args.sigma, [f for f in args.formats.split(",") if f])
    if "gemm" in only:
        shapes = [tuple(int(v) for v in sh.split(",")) for sh in args.gemm_shapes.split(";") if sh]
        bench_gemm(shapes or ([(1024, 1024, 1024)] if args.quick else
                              [(256, 256, 256), (1024, 1024, 1024), (512, 768, 3072)]))
    if "attention" in only:
        bench_attention([512] if args.quick else [128, 512, 1024])


if __name__ == "__main__":
    main()
