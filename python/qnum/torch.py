"""qnum for PyTorch training: `fake_quantize(x, fmt)` (a torch.autograd.Function with the
straight-through estimator the format's policy names) and `QuantLinear`, a torch.nn.Linear
whose input, weight, bias and output are fake-quantized as a MASE quantize config says.

    import qnum.torch as qt
    layer = qt.QuantLinear(16, 8, config={"name": "integer", "data_in_width": 8, "data_in_frac_width": 4,
                                         "weight_width": 8, "weight_frac_width": 4,
                                         "bias_width": 8, "bias_frac_width": 4})
"""
import json

import torch

from . import Format, _core
from ._arrays import as_input, new_output, role_code

__all__ = ["fake_quantize", "FakeQuantize", "QuantLinear", "quant_config"]


def _as_format(fmt):
    if isinstance(fmt, Format):
        return fmt
    if isinstance(fmt, str):
        return Format(fmt)
    raise TypeError(f"qnum.torch: format is a {type(fmt).__name__}; expected a qnum.Format or its text")


class FakeQuantize(torch.autograd.Function):
    """Forward: the format's values (qnum's kernels). Backward: `ste=identity` passes the
    gradient unchanged; `ste=clipped` zeroes it where x lies outside the format's range
    (describe()["ste_range"]), as qnum's C++ fake_quantize does."""

    @staticmethod
    def forward(ctx, x, fmt, role):
        f = fmt._f
        if tuple(f.output_shape(list(x.shape))) != tuple(x.shape):
            raise ValueError(f"qnum.torch.fake_quantize: format '{fmt}' changes the tensor's shape; "
                             f"only shape-preserving formats can be fake-quantized")
        out, dst = new_output(x, x.shape)
        f.quantize_into(as_input(x), dst, role)
        ctx.clipped, ctx.range = fmt._ste_info()
        if ctx.clipped:
            ctx.save_for_backward(x)
        return out

    @staticmethod
    def backward(ctx, g):
        if not ctx.clipped:
            return g, None, None
        (x,) = ctx.saved_tensors
        lo, hi = ctx.range
        keep = (x >= lo) & (x <= hi)  # False for NaN
        return torch.where(keep, g, torch.zeros_like(g)), None, None


def fake_quantize(x, fmt, role="activation"):
    """Fake-quantizes a float32 CPU tensor onto `fmt` (qnum.Format or spec text) with a
    straight-through gradient (identity, or clipped with `ste=clipped` in the spec)."""
    return FakeQuantize.apply(x, _as_format(fmt), role_code(role))


def quant_config(config, where="QuantLinear"):
    """A MASE quantize config dict resolved by qnum's quantize pass rules: a dict with keys
    data_in, weight, bias, data_out (qnum.Format or None) and data_in_role."""
    if not isinstance(config, dict):
        raise TypeError(f"qnum.torch.{where}: config is a {type(config).__name__}; expected a dict")
    resolved = _core.resolve_quant_config(json.dumps(config), where)
    out = {"data_in_role": "weight" if resolved["data_in_role"] == role_code("weight") else "activation"}
    for operand in ("data_in", "weight", "bias", "data_out"):
        f = resolved[operand]
        if f is None:
            out[operand] = None
        else:
            wrapped = Format.__new__(Format)
            wrapped._f = f
            out[operand] = wrapped
    return out


class QuantLinear(torch.nn.Linear):
    """torch.nn.Linear with MASE's quantized-linear semantics: y = linear(q_in(x), q_w(W), q_b(b)),
    then q_out(y) if the config names data_out. `config` takes MASE's keys (`name`,
    `data_in_width`, `weight_frac_width`, `bias_*`, `data_out_*`, `bypass`, qnum's `mode`, `ste`,
    ...; see docs/passes.md); operands without keys stay float32."""

    def __init__(self, in_features, out_features, bias=True, config=None, device=None, dtype=None):
        super().__init__(in_features, out_features, bias=bias, device=device, dtype=dtype)
        self.config = dict(config or {"name": None})
        q = quant_config(self.config)
        self.q_data_in, self.q_weight, self.q_bias, self.q_data_out = (
            q["data_in"], q["weight"], q["bias"], q["data_out"])
        self.data_in_role = q["data_in_role"]

    @classmethod
    def from_linear(cls, linear, config):
        """A QuantLinear with `linear`'s parameters (shared, not copied) and `config`."""
        q = cls(linear.in_features, linear.out_features, bias=linear.bias is not None, config=config,
                device=linear.weight.device, dtype=linear.weight.dtype)
        q.weight = linear.weight
        if linear.bias is not None:
            q.bias = linear.bias
        return q

    def forward(self, x):
        if self.q_data_in is not None:
            x = fake_quantize(x, self.q_data_in, self.data_in_role)
        w = self.weight if self.q_weight is None else fake_quantize(self.weight, self.q_weight, "weight")
        b = self.bias
        if b is not None and self.q_bias is not None:
            b = fake_quantize(b, self.q_bias, "bias")
        y = torch.nn.functional.linear(x, w, b)
        if self.q_data_out is not None:
            y = fake_quantize(y, self.q_data_out, "activation")
        return y

    def extra_repr(self):
        ops = [f"{n}={f}" for n, f in (("data_in", self.q_data_in), ("weight", self.q_weight),
                                        ("bias", self.q_bias), ("data_out", self.q_data_out)) if f is not None]
        return super().extra_repr() + (", " + " ".join(ops) if ops else ", float")
