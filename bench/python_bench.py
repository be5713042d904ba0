#!/usr/bin/env python3
"""qnum.mase.X beside MASE's formula written in torch ops (bench/torch_baseline.py), on the
same float32 tensor in the same process, and the Python call overhead on 1-element inputs.

Needs the qnum package (`pip install ./python`) and torch + numpy (`pip install torch numpy`).
Prints one JSON object per line, or a Markdown table with --markdown:
  {"bench": "python_quantize", "format": ..., "qnum_ms": ..., "torch_ms": ..., "ratio": ..., "same_bits": ...}
      best process CPU time of one call each, calls interleaved, on a torch tensor (MASE's input)
  {"bench": "python_overhead", "call": ..., "us": ...}
      best wall time per call over 300 rounds of 200 calls
  {"bench": "python_qat_step", "format": ..., "qnum_ms": ..., "mase_ms": ..., "ratio": ..., "float_ms": ...}
      one QAT step (forward + backward + AdamW step) of a bert-base-sized transformers
      BertForSequenceClassification (hidden 768, 12 heads, intermediate 3072; --layers N, --seq,
      --batch), every Linear's input and weight quantized (mxint8; integer 8-bit with the bias
      too): qnum.torch.quantize_transform_pass against the same model with MASE's quantized
      Linear (torch_baseline's formulas with MASE's straight-through x + (q(x) - x).detach()),
      best of --qat-repeats steps each, steps interleaved; float_ms: the same step unquantized
  {"bench": "python_op_overhead", "call": ..., "us": ...}
      torch.ops.qnum.quantize on a tiny tensor, eagerly and inside a torch.compile'd function
      (the per-op cost there: a compiled chain of 10 ops less the compiled function without them);
      torch.add on the same tensor for scale
`same_bits` is the fraction of elements where both give the same float32 bits. The torch side is
MASE's code op for op (torch_baseline.QUANTIZERS); block_fp and mxint8 are also timed against
the same bits in fewer torch ops (torch_baseline.MINIMAL: "torch_minimal_ms", "ratio_minimal").

Usage: python3 bench/python_bench.py [--threads 1] [--size 4194304] [--sigma 1] [--malloc retain|default] [--markdown]
                                     [--only quantize,overhead,qat,op_overhead] [--layers 12] [--seq 128] [--batch 8]
                                     [--qat-repeats 5]
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


# ---- QAT step of a bert-base-sized model: qnum.torch against MASE's quantized Linear ----------

QAT_CASES = {
    # name: (qnum.torch config of every Linear, MASE's quantizers {operand: fn})
    "mxint8": ({"name": "mxint", "mode": "mase", "data_in_block_size": [32], "data_in_element_bits": 8,
                "weight_block_size": [32], "weight_element_bits": 8},
               {"data_in": lambda t: tb.mase_mxint(t, 8, 32), "weight": lambda t: tb.mase_mxint(t, 8, 32)}),
    "integer8": ({"name": "integer", "data_in_width": 8, "data_in_frac_width": 4, "weight_width": 8,
                  "weight_frac_width": 7, "bias_width": 8, "bias_frac_width": 5},
                 {"data_in": lambda t: tb.mase_integer(t, 8, 4), "weight": lambda t: tb.mase_integer(t, 8, 7),
                  "bias": lambda t: tb.mase_integer(t, 8, 5)}),
}


class MaseQuantLinear(torch.nn.Linear):
    """MASE's quantized Linear (chop.nn.quantized.modules.linear._LinearBase) as MASE writes it:
    x, W, b each through its quantizer with MASE's straight-through trick, then F.linear."""

    quantizers = {}

    @staticmethod
    def _ste(t, q):
        return t + (q(t) - t).detach()

    def forward(self, x):
        q = self.quantizers
        x = self._ste(x, q["data_in"]) if "data_in" in q else x
        w = self._ste(self.weight, q["weight"]) if "weight" in q else self.weight
        b = self._ste(self.bias, q["bias"]) if "bias" in q and self.bias is not None else self.bias
        return torch.nn.functional.linear(x, w, b)


def mase_quantize(model, quantizers):
    """A copy of `model` with every nn.Linear a MaseQuantLinear (same parameters' values)."""
    import copy
    m = copy.deepcopy(model)
    cls = type("MaseQuantLinearCase", (MaseQuantLinear,), {"quantizers": quantizers})
    for mod in m.modules():
        if type(mod) is torch.nn.Linear:
            mod.__class__ = cls
    return m


def bert_base(layers):
    from transformers import BertConfig, BertForSequenceClassification
    torch.manual_seed(0)
    cfg = BertConfig(hidden_size=768, num_hidden_layers=layers, num_attention_heads=12, intermediate_size=3072,
                     hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, num_labels=2)
    return BertForSequenceClassification(cfg)


def bench_qat(layers, seq, batch, repeats):
    import qnum.torch as qt
    base = bert_base(layers)
    g = torch.Generator().manual_seed(2)
    inputs = {"input_ids": torch.randint(0, base.config.vocab_size, (batch, seq), generator=g),
              "labels": torch.randint(0, 2, (batch,), generator=g)}
    cpu = torch.get_num_threads() == 1  # one thread: process CPU time (robust to preemption); else wall

    def stepper(model):
        model.train()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-5)

        def step():
            loss = model(**inputs).loss
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            return float(loss.detach())
        return step

    def timed(step):
        clock = time.process_time if cpu else time.perf_counter
        t = clock()
        loss = step()
        return clock() - t, loss

    float_step = stepper(copy_model(base))
    float_step()
    rows = []
    for name, (config, quantizers) in QAT_CASES.items():
        qmodel, info = qt.quantize_transform_pass(base, {"by": "type", "default": {"config": {"name": None}},
                                                         "linear": {"config": config}})
        assert len(info.changed()) == 6 * layers + 2, info
        mmodel = mase_quantize(base, quantizers)
        steps = {"qnum": stepper(qmodel), "mase": stepper(mmodel), "float": float_step}
        first = {k: steps[k]() for k in ("qnum", "mase")}  # warm-up; the first losses are the same model's
        best = {k: float("inf") for k in steps}
        for _ in range(repeats):
            for k in steps:
                best[k] = min(best[k], timed(steps[k])[0])
        rows.append({"bench": "python_qat_step", "format": name, "layers": layers, "hidden": 768, "seq": seq,
                     "batch": batch, "threads": torch.get_num_threads(), "clock": "cpu" if cpu else "wall",
                     "qnum_ms": best["qnum"] * 1e3, "mase_ms": best["mase"] * 1e3, "ratio": best["mase"] / best["qnum"],
                     "float_ms": best["float"] * 1e3, "first_loss_qnum": first["qnum"],
                     "first_loss_mase": first["mase"]})
        del qmodel, mmodel, steps
    return rows


def copy_model(m):
    import copy
    return copy.deepcopy(m)


def bench_op_overhead():
    import qnum.torch as qt  # noqa: F401  (registers torch.ops.qnum)
    op = torch.ops.qnum.quantize
    t1 = torch.ones(1)
    t32 = torch.ones(32)
    int_spec = str(qnum.Format("integer:width=8,frac_width=4"))
    mx_spec = str(qnum.Format("mxint8"))

    def chain(n, spec):
        def f(x):
            for _ in range(n):
                x = op(x, spec, 1)
            return x + 1.0
        return torch.compile(f, fullgraph=True)

    c0, c1, c10 = chain(0, int_spec), chain(1, int_spec), chain(10, int_spec)
    m10 = chain(10, mx_spec)
    rows = [
        ("torch.ops.qnum.quantize(tensor[1], integer8) eager", lambda: op(t1, int_spec, 1)),
        ("torch.ops.qnum.quantize(tensor[32], mxint8) eager", lambda: op(t32, mx_spec, 1)),
        ("qnum.torch.fake_quantize(tensor[1], integer8) eager", lambda: qt.fake_quantize(t1, int_spec)),
        ("torch.add(tensor[1], 1.0) eager (a native op, for scale)", lambda: torch.add(t1, 1.0)),
        ("compiled f(x) = x + 1 (no qnum op)", lambda: c0(t1)),
        ("compiled f(x) = q(x) + 1", lambda: c1(t1)),
        ("compiled f(x) = q^10(x) + 1, tensor[1], integer8", lambda: c10(t1)),
        ("compiled f(x) = q^10(x) + 1, tensor[32], mxint8", lambda: m10(t32)),
    ]
    out = [{"bench": "python_op_overhead", "call": name, "us": best_seconds(fn, number=100, repeat=100) * 1e6}
           for name, fn in rows]
    us = {r["call"]: r["us"] for r in out}
    base = us["compiled f(x) = x + 1 (no qnum op)"]
    out.append({"bench": "python_op_overhead", "call": "per op inside a compiled function (integer8, tensor[1]): "
                "(q^10 - none) / 10", "us": (us["compiled f(x) = q^10(x) + 1, tensor[1], integer8"] - base) / 10})
    out.append({"bench": "python_op_overhead", "call": "per op inside a compiled function (mxint8, tensor[32]): "
                "(q^10 - none) / 10", "us": (us["compiled f(x) = q^10(x) + 1, tensor[32], mxint8"] - base) / 10})
    return out


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
    ap.add_argument("--only", default="quantize,overhead,qat,op_overhead",
                    help="comma-separated subset of quantize, overhead, qat, op_overhead")
    ap.add_argument("--layers", type=int, default=12, help="qat: BERT layers (bert-base: 12)")
    ap.add_argument("--seq", type=int, default=128, help="qat: sequence length")
    ap.add_argument("--batch", type=int, default=8, help="qat: batch size")
    ap.add_argument("--qat-repeats", type=int, default=5, help="qat: timed steps per model (best is kept)")
    args = ap.parse_args()
    only = set(args.only.split(","))
    if args.malloc == "retain":
        qnum.retain_freed_memory()
    torch.set_num_threads(args.threads)
    qnum.set_num_threads(args.threads)
    info = {"bench": "info", "torch": torch.__version__, "numpy": np.__version__, "threads": args.threads,
            "qnum_isa": qnum.isa(), "malloc": args.malloc}
    rows = bench_quantize(args.size, args.sigma) if "quantize" in only else []
    overhead = bench_overhead() if "overhead" in only else []
    qat = bench_qat(args.layers, args.seq, args.batch, args.qat_repeats) if "qat" in only else []
    op_overhead = bench_op_overhead() if "op_overhead" in only else []
    if not args.markdown:
        for r in [info] + rows + overhead + qat + op_overhead:
            print(json.dumps(r), flush=True)
        return
    shape = f", {args.size} floats N(0, {args.sigma}^2)" if rows else ""
    print(f"torch {info['torch']}, numpy {info['numpy']}, {args.threads} thread(s), qnum kernels: {info['qnum_isa']}"
          f"{shape}, malloc {args.malloc}\n")
    if rows:
        print("| MASE function (bench format) | kind | qnum.mase ms | MASE's torch ops ms | ratio | target | same bits "
              "| minimal torch ops ms (ratio) |")
        print("|---|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        target = 20 if r["kind"] == "block" else 5
        minimal = (f"{r['torch_minimal_ms']:.2f} ({r['ratio_minimal']:.1f}x, same bits {100 * r['same_bits_minimal']:.2f}%)"
                   if "torch_minimal_ms" in r else "")
        print(f"| {r['format']} | {r['kind']} | {r['qnum_ms']:.2f} | {r['torch_ms']:.2f} | {r['ratio']:.1f}x | "
              f">= {target}x | {100 * r['same_bits']:.2f}% | {minimal} |")
    if rows:
        print()
    if overhead:
        print("| call (1 element) | us |")
        print("|---|---:|")
        for r in overhead:
            print(f"| {r['call']} | {r['us']:.2f} |")
        print()
    if qat:
        r0 = qat[0]
        print(f"QAT step (forward + backward + AdamW) of BertForSequenceClassification, hidden 768, 12 heads, "
              f"intermediate 3072, {r0['layers']} layer(s), batch {r0['batch']} x seq {r0['seq']}, "
              f"{r0['threads']} thread(s), best of {args.qat_repeats} ({r0['clock']} time)\n")
        print("| every Linear quantized | qnum.torch ms | MASE's modules ms | ratio | target | float step ms |")
        print("|---|---:|---:|---:|---:|---:|")
        for r in qat:
            target = 2.0 if r["format"] == "mxint8" else 1.2
            what = "mxint8 (input, weight)" if r["format"] == "mxint8" else "integer 8-bit (input, weight, bias)"
            print(f"| {what} | {r['qnum_ms']:.1f} | {r['mase_ms']:.1f} | {r['ratio']:.2f}x | >= {target}x | "
                  f"{r['float_ms']:.1f} |")
        print()
    if op_overhead:
        print("| torch.ops.qnum.quantize | us |")
        print("|---|---:|")
        for r in op_overhead:
            print(f"| {r['call']} | {r['us']:.2f} |")


if __name__ == "__main__":
    main()
