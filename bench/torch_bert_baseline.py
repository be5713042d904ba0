#!/usr/bin/env python3
"""PyTorch baseline for qnum's BERT training step (docs/perf.md, BERT section).

bert-tiny (2 layers, hidden 128, 2 heads, intermediate 512, vocab 30522) as transformers'
BertForSequenceClassification (eager attention), fp32 on the CPU, one training step =
forward + cross-entropy + backward + grad-norm clipping (1.0) + AdamW, on random token ids
of batch x seq with no padding. Prints the median step time over --steps after --warmup,
wall and CPU (process time: on a shared machine the CPU time is the comparable figure),
and the same for inference (eval, no grad).

--qat times MASE-style quantization-aware training instead: every nn.Linear of the model
(query/key/value/attention output/intermediate/output dense of each layer, the pooler dense
and the classifier) is replaced by a LinearInteger written as MASE writes it
(src/chop/nn/quantized/modules/linear.py, quantizers/integer.py; spec formats.md §2.1 and §4.1):
the forward fake-quantizes data_in, weight and bias with integer_quantizer,
q = my_clamp(my_round(x * 2^F), -2^(W-1), 2^(W-1)-1) / 2^F, where my_round/my_clamp are
autograd.Functions with straight-through backward (separate tensor ops, not fused), then
runs F.linear(x_q, w_q, b_q). Widths are those of examples/configs/bert_int8_qat.toml:
data_in 8/4, weight 8/7, bias 8/5. Everything else is the fp32 step unchanged; QAT inference
(eval, no grad, quantized forward) is timed too. The JSON carries "qat": true/false.
    python3 bench/torch_bert_baseline.py --batch 32 --seq 128 --threads 1
    python3 bench/torch_bert_baseline.py --batch 32 --seq 128 --threads 1 --qat
    python3 bench/torch_bert_baseline.py --model bert:4-256-4-1024 --autocast bf16 --threads 1
--model takes qnum's BERT names; --autocast bf16 runs the forward and loss under PyTorch's CPU
autocast to bfloat16 (its products on oneDNN's bf16 kernels; backward follows the casts), the
peer of `qnum bench train-step --precision bf16`.
"""
import argparse
import contextlib
import json
import statistics
import time
from functools import partial

import torch
import torch.nn.functional as F
from torch import nn
from torch.autograd.function import InplaceFunction
from transformers import BertConfig, BertForSequenceClassification

# Widths of examples/configs/bert_int8_qat.toml (MASE `integer` on every Linear).
QAT_CONFIG = {"name": "integer", "data_in_width": 8, "data_in_frac_width": 4,
              "weight_width": 8, "weight_frac_width": 7, "bias_width": 8, "bias_frac_width": 5}


# MASE's straight-through round and clamp (quantizers/utils.py).
class MyClamp(InplaceFunction):
    @staticmethod
    def forward(ctx, input, min, max):
        return input.clamp(min=min, max=max)

    @staticmethod
    def backward(ctx, grad_output):
        grad_input = grad_output.clone()
        return grad_input, None, None


class MyRound(InplaceFunction):
    @staticmethod
    def forward(ctx, input):
        ctx.input = input
        return input.round()

    @staticmethod
    def backward(ctx, grad_output):
        grad_input = grad_output.clone()
        return grad_input


my_clamp = MyClamp.apply
my_round = MyRound.apply


def integer_quantizer(x, width, frac_width, is_signed=True):
    """MASE's integer_quantizer: clamp(round(x * 2^F), qmin, qmax) / 2^F, STE backward."""
    if is_signed:
        int_min, int_max = -(2 ** (width - 1)), 2 ** (width - 1) - 1
    else:
        int_min, int_max = 0, 2 ** width - 1
    scale = 2 ** frac_width
    if isinstance(x, (float, int)):
        return my_clamp(my_round(x * scale), int_min, int_max) / scale
    return my_clamp(my_round(x.mul(scale)), int_min, int_max).div(scale)


class LinearInteger(nn.Linear):
    """MASE's LinearInteger (config keys data_in_/weight_/bias_ width and frac_width)."""

    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None, config=None):
        super().__init__(in_features, out_features, bias, device, dtype)
        self.config = config
        self.bypass = config.get("bypass", False)
        self.x_quantizer = partial(integer_quantizer, width=config["data_in_width"],
                                   frac_width=config["data_in_frac_width"])
        self.w_quantizer = partial(integer_quantizer, width=config["weight_width"],
                                   frac_width=config["weight_frac_width"])
        self.b_quantizer = partial(integer_quantizer, width=config["bias_width"],
                                   frac_width=config["bias_frac_width"])

    def forward(self, x):
        if self.bypass:
            return F.linear(x, self.weight, self.bias)
        x = self.x_quantizer(x)
        w = self.w_quantizer(self.weight)
        bias = self.b_quantizer(self.bias) if self.bias is not None else None
        return F.linear(x, w, bias)


def quantize_linears(model, config):
    """Replace every nn.Linear by a LinearInteger carrying the same weight and bias."""
    rng = torch.get_rng_state()  # LinearInteger's init draws; keep ids/labels as in fp32 runs
    n = 0
    for name, mod in list(model.named_modules()):
        if type(mod) is not nn.Linear:
            continue
        q = LinearInteger(mod.in_features, mod.out_features, mod.bias is not None, config=config)
        q.load_state_dict(mod.state_dict())
        parent_name, _, attr = name.rpartition(".")
        setattr(model.get_submodule(parent_name) if parent_name else model, attr, q)
        n += 1
    torch.set_rng_state(rng)
    return n


# qnum's presets (models/bert.hpp): the Google BERT miniatures and bert-base.
PRESETS = {"bert-tiny": (2, 128, 2, 512), "bert-mini": (4, 256, 4, 1024), "bert-small": (4, 512, 8, 2048),
           "bert-medium": (8, 512, 8, 2048), "bert-base": (12, 768, 12, 3072)}


def bert_shape(name):
    if name in PRESETS:
        return PRESETS[name]
    if name.startswith("bert:"):
        parts = name[5:].split("-")
        if len(parts) in (3, 4) and all(p.isdigit() and int(p) > 0 for p in parts):
            v = [int(p) for p in parts]
            return tuple(v) if len(v) == 4 else (v[0], v[1], v[2], 4 * v[1])
    raise SystemExit(f"--model {name!r}: expected one of {', '.join(PRESETS)} or bert:L-H-A[-I]")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--attn", choices=["eager", "sdpa"], default="eager",
                    help="transformers' attention implementation (sdpa: torch's fused "
                         "scaled_dot_product_attention, transformers' default)")
    ap.add_argument("--qat", action="store_true",
                    help="MASE-style LinearInteger (int8 QAT) on every Linear")
    ap.add_argument("--model", default="bert-tiny",
                    help="bert-tiny, bert-mini, bert-small, bert-medium, bert-base or bert:L-H-A-I "
                         "(layers-hidden-heads-intermediate), as qnum's model names")
    ap.add_argument("--autocast", choices=["none", "bf16"], default="none",
                    help="bf16: forward and loss under torch.autocast('cpu', dtype=torch.bfloat16) "
                         "(the step and inference), as a PyTorch user turns on bf16 mixed precision")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    layers, hidden, heads, inter = bert_shape(a.model)
    cfg = BertConfig(vocab_size=30522, hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
                     intermediate_size=inter, num_labels=2, attn_implementation=a.attn)
    amp = (lambda: torch.autocast("cpu", dtype=torch.bfloat16)) if a.autocast == "bf16" else contextlib.nullcontext
    model = BertForSequenceClassification(cfg)
    n_quant = quantize_linears(model, QAT_CONFIG) if a.qat else 0
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.0)
    ids = torch.randint(1000, 30000, (a.batch, a.seq))
    mask = torch.ones_like(ids)
    labels = torch.randint(0, 2, (a.batch,))
    times, cpu = [], []
    for i in range(a.warmup + a.steps):
        t0, c0 = time.perf_counter(), time.process_time()
        opt.zero_grad()
        with amp():
            out = model(input_ids=ids, attention_mask=mask, labels=labels)
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if i >= a.warmup:
            times.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
    # Inference (eval, no grad) for the same batch.
    model.eval()
    inf, inf_cpu = [], []
    with torch.no_grad():
        for i in range(a.warmup + a.steps):
            t0, c0 = time.perf_counter(), time.process_time()
            with amp():
                model(input_ids=ids, attention_mask=mask)
            if i >= a.warmup:
                inf.append(time.perf_counter() - t0)
                inf_cpu.append(time.process_time() - c0)
    res = {"framework": "torch " + torch.__version__, "model": a.model, "autocast": a.autocast, "batch": a.batch,
           "seq": a.seq, "attn": a.attn, "threads": a.threads}
    if a.qat:
        res.update({"qat": True, "quantized_linears": n_quant,
                    "qat_config": {k: v for k, v in QAT_CONFIG.items() if k != "name"}})
    else:
        res["qat"] = False
    res.update({"train_step_ms": 1e3 * statistics.median(times),
                "train_step_cpu_ms": 1e3 * statistics.median(cpu),
                "inference_ms": 1e3 * statistics.median(inf),
                "inference_cpu_ms": 1e3 * statistics.median(inf_cpu)})
    print(json.dumps(res))


if __name__ == "__main__":
    main()
