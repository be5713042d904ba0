"""Quantized functional matmuls: `torch.matmul` / `@` / `bmm` calls inside a model, and
`F.scaled_dot_product_attention` (as its two products), quantized by op type.

transformers 5 has no torch.fx tracer any more, and most models do not trace with
torch.fx's own; so the products are found where they run: the quantize pass gives the
model's root a forward that runs under `QuantizedMatmulMode`, a TorchFunctionMode that
replaces each product call by the quantized product (data_in = left operand, weight = right
operand, data_out = product, as MASE's matmul_<format> and qnum's C++ Matmul). This works
on every model, eager and under torch.compile, and selects by type only (a call site has no
module name)."""
import math

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

from .. import _core
from ._ops import ROLES, format_of, quantize_op

_MATMUL = {torch.matmul, torch.Tensor.matmul, torch.Tensor.__matmul__}
_BMM = {torch.bmm, torch.Tensor.bmm}


def _right(b, spec):
    if spec is None:
        return b
    if _core.matmul_right_groups_along_k(format_of(spec)._f, b.dim()):
        return quantize_op(b.transpose(-2, -1), spec, ROLES["activation"]).transpose(-2, -1)
    return quantize_op(b, spec, ROLES["activation"])


def quantized_matmul(a, b, specs, product=torch.matmul):
    """q_out(product(q_in(a), q_w(b))) with `specs` the resolved operand formats."""
    if specs["data_in"] is not None:
        a = quantize_op(a, specs["data_in"], specs["data_in_role"])
    y = product(a, _right(b, specs["weight"]))
    return y if specs["data_out"] is None else quantize_op(y, specs["data_out"], ROLES["activation"])


def quantized_sdpa(specs, query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                   enable_gqa=False):
    """scaled_dot_product_attention as torch's reference computes it, with both products
    (Q·Kᵀ and P·V) quantized as matmuls."""
    L, S = query.size(-2), key.size(-2)
    scale = 1.0 / math.sqrt(query.size(-1)) if scale is None else scale
    if enable_gqa:
        key = key.repeat_interleave(query.size(-3) // key.size(-3), -3)
        value = value.repeat_interleave(query.size(-3) // value.size(-3), -3)
    scores = quantized_matmul(query, key.transpose(-2, -1), specs) * scale
    if is_causal:
        causal = torch.ones(L, S, dtype=torch.bool, device=query.device).tril()
        scores = scores.masked_fill(~causal, float("-inf"))
    if attn_mask is not None:
        scores = scores.masked_fill(~attn_mask, float("-inf")) if attn_mask.dtype == torch.bool else scores + attn_mask
    p = torch.softmax(scores, dim=-1)
    if dropout_p > 0.0:
        p = F.dropout(p, dropout_p, training=True)
    return quantized_matmul(p, value, specs)


class QuantizedMatmulMode(TorchFunctionMode):
    """Routes product calls to their quantized form: `ops` maps "matmul" / "bmm" to resolved
    operand formats (F.scaled_dot_product_attention counts as two matmuls)."""

    def __init__(self, ops):
        super().__init__()
        self.ops = ops

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in _MATMUL and "matmul" in self.ops:
            return quantized_matmul(args[0], args[1], self.ops["matmul"])
        if func in _BMM and "bmm" in self.ops:
            return quantized_matmul(args[0], args[1], self.ops["bmm"], torch.bmm)
        if func is F.scaled_dot_product_attention and "matmul" in self.ops:
            return quantized_sdpa(self.ops["matmul"], *args, **kwargs)
        return func(*args, **kwargs)


class FunctionalQuantMixin:
    """A model root whose forward runs under QuantizedMatmulMode (set by the quantize pass)."""

    def forward(self, *args, **kwargs):
        with QuantizedMatmulMode(self.qnum_functional):
            return super().forward(*args, **kwargs)
