"""Quantized PyTorch modules with MASE's semantics: each computes its op on fake-quantized
operands, y = q_out(op(q_in(x), q_w(W), q_b(b))), with the formats a MASE config gives
(`config` keys as docs/python.md documents: `name`, `<operand>_<key>`, `mode`, `ste`, ...).

`QuantLinear` is a `torch.nn.Linear`; the passes (qnum.torch.quantize_transform_pass) turn
any supported module into its quantized kind by giving it a subclass of its own class (so
`isinstance`, parameter names and `state_dict` keys stay the same): Linear and its
subclasses, transformers' GPT-2 `Conv1D`, Conv1d, Conv2d, Embedding, and activation / norm
modules (ReLU, GELU, LayerNorm, Softmax, RMSNorm, ...: data_in and data_out)."""
import json
import sys

import torch
import torch.nn.functional as F

from .. import _core
from ._ops import ROLES, check_tensor, format_of, quantize_op

_WEIGHT, _ACT, _BIAS = ROLES["weight"], ROLES["activation"], ROLES["bias"]
OPERANDS_WEIGHTED = ["data_in", "weight", "bias", "data_out"]
OPERANDS_ACTIVATION = ["data_in", "data_out"]


def resolve(config, operands=OPERANDS_WEIGHTED, where="QuantLinear"):
    """A MASE quantize config dict resolved by the C++ pass's rules (passes::resolve_quant_config):
    dict of operand -> canonical spec text or None, data_in_role, text."""
    if not isinstance(config, dict):
        raise TypeError(f"qnum.torch.{where}: config is a {type(config).__name__}; expected a dict")
    r = _core.resolve_quant_config(json.dumps(config), where)
    return _specs_of(r, operands, where)


def _specs_of(resolved, operands, where):
    out = {"data_in_role": resolved["data_in_role"], "text": resolved["text"]}
    for operand in OPERANDS_WEIGHTED:
        f = resolved[operand]
        if f is not None and operand not in operands:
            f = None  # keys for operands the op does not have are ignored (MASE's per-op filter)
        out[operand] = None if f is None else str(f)
        if f is not None:
            format_of(out[operand])
    return out


class QuantMixin:
    """The operand formats of a quantized module (spec texts; None = float) and `_q`."""

    qnum_op = None  # MASE op name, set by each kind
    qnum_operands = OPERANDS_WEIGHTED

    def qnum_configure(self, config, resolved=None):
        """Installs MASE config `config` (or its already-resolved form from the pass)."""
        specs = resolved if resolved is not None else resolve(config, self.qnum_operands, type(self).__name__)
        self.config = dict(config)
        self.q_data_in, self.q_weight = specs["data_in"], specs["weight"]
        self.q_bias, self.q_data_out = specs["bias"], specs["data_out"]
        self.data_in_role = specs["data_in_role"]
        self.qnum_text = specs["text"]
        return self

    def qnum_formats(self):
        return {n: getattr(self, "q_" + n) for n in OPERANDS_WEIGHTED if getattr(self, "q_" + n, None) is not None}

    def extra_repr(self):
        ops = " ".join(f"{n}={f}" for n, f in self.qnum_formats().items())
        base = super().extra_repr()
        return base + (", " if base else "") + (ops or "float")


def _q(t, spec, role):
    return t if spec is None or t is None else quantize_op(t, spec, role)


class _LinearForward(QuantMixin):
    qnum_op = "linear"

    def forward(self, x):
        check_tensor(x)
        y = F.linear(_q(x, self.q_data_in, self.data_in_role), _q(self.weight, self.q_weight, _WEIGHT),
                     _q(self.bias, self.q_bias, _BIAS))
        return _q(y, self.q_data_out, _ACT)


class QuantLinear(_LinearForward, torch.nn.Linear):
    """torch.nn.Linear with MASE's quantized-linear semantics: y = linear(q_in(x), q_w(W), q_b(b)),
    then q_out(y) if the config names data_out. Operands without keys stay float."""

    def __init__(self, in_features, out_features, bias=True, config=None, device=None, dtype=None):
        super().__init__(in_features, out_features, bias=bias, device=device, dtype=dtype)
        self.qnum_configure(config or {"name": None})

    @classmethod
    def from_linear(cls, linear, config):
        """A QuantLinear with `linear`'s parameters (shared, not copied) and `config`."""
        q = cls(linear.in_features, linear.out_features, bias=linear.bias is not None, config=config,
                device=linear.weight.device, dtype=linear.weight.dtype)
        q.weight = linear.weight
        if linear.bias is not None:
            q.bias = linear.bias
        return q


class _Conv1DForward(QuantMixin):
    """transformers' GPT-2 Conv1D (a Linear whose weight is stored [in, out]): the weight is
    quantized as the Linear weight it is ([out, in], blocks along in), so a block format
    means the same as on nn.Linear."""

    qnum_op = "linear"

    def forward(self, x):
        check_tensor(x)
        w = self.weight if self.q_weight is None else quantize_op(self.weight.t(), self.q_weight, _WEIGHT).t()
        size_out = x.size()[:-1] + (self.nf,)
        xq = _q(x, self.q_data_in, self.data_in_role)
        y = torch.addmm(_q(self.bias, self.q_bias, _BIAS), xq.view(-1, xq.size(-1)), w).view(size_out)
        return _q(y, self.q_data_out, _ACT)


class _ConvForward(QuantMixin):
    def forward(self, x):
        check_tensor(x)
        y = self._conv_forward(_q(x, self.q_data_in, self.data_in_role), _q(self.weight, self.q_weight, _WEIGHT),
                               _q(self.bias, self.q_bias, _BIAS))
        return _q(y, self.q_data_out, _ACT)


class _Conv1dForward(_ConvForward):
    qnum_op = "conv1d"


class _Conv2dForward(_ConvForward):
    qnum_op = "conv2d"


class _EmbeddingForward(QuantMixin):
    qnum_op = "embedding"
    qnum_operands = ["weight"]

    def forward(self, input):
        return F.embedding(input, _q(self.weight, self.q_weight, _WEIGHT), self.padding_idx, self.max_norm,
                           self.norm_type, self.scale_grad_by_freq, self.sparse)


class _ActivationForward(QuantMixin):
    """q_out(module(q_in(x))): the module's own computation between its input's and output's
    quantizers (MASE's quantized ReLU/GELU/LayerNorm/Softmax; weights of a norm stay float)."""

    qnum_operands = OPERANDS_ACTIVATION

    def forward(self, x, *args, **kwargs):
        check_tensor(x)
        y = super().forward(_q(x, self.q_data_in, self.data_in_role), *args, **kwargs)
        return _q(y, self.q_data_out, _ACT)


# Activation and norm modules by MASE op; transformers' own classes are matched by name
# (no import of transformers needed): GELUActivation & co. are GELU, *RMSNorm is rms_norm.
_ACTIVATION_OPS = [
    (torch.nn.ReLU, "relu"), (torch.nn.GELU, "gelu"), (torch.nn.LayerNorm, "layer_norm"),
    (torch.nn.Softmax, "softmax"), (torch.nn.Tanh, "tanh"), (torch.nn.SELU, "selu"),
    (torch.nn.Softplus, "softplus"), (torch.nn.Softsign, "softsign"), (torch.nn.GroupNorm, "group_norm"),
    (torch.nn.BatchNorm2d, "batch_norm2d"), (torch.nn.InstanceNorm2d, "instance_norm2d"),
]
if hasattr(torch.nn, "RMSNorm"):
    _ACTIVATION_OPS.append((torch.nn.RMSNorm, "rms_norm"))
_GELU_NAMES = ("GELUActivation", "NewGELUActivation", "GELUTanh", "FastGELUActivation", "QuickGELUActivation",
               "GELUPytorchTanh", "PytorchGELUTanh", "AccurateGELUActivation")


def op_of(module):
    """(MASE op name, forward mixin) of a module qnum can quantize, or (None, reason) for one it
    cannot, or (None, None) for anything else."""
    if isinstance(module, QuantMixin):
        return module.qnum_op, None
    name = type(module).__name__
    if isinstance(module, torch.nn.Linear):
        if name == "NonDynamicallyQuantizableLinear":
            return None, ("MultiheadAttention reads its out_proj weight directly, so a quantized forward "
                          "would never run; quantize the model's matmuls instead")
        return "linear", _LinearForward
    if name == "Conv1D" and hasattr(module, "nf") and isinstance(getattr(module, "weight", None), torch.Tensor):
        return "linear", _Conv1DForward
    if isinstance(module, torch.nn.Conv1d):
        return "conv1d", _Conv1dForward
    if isinstance(module, torch.nn.Conv2d):
        return "conv2d", _Conv2dForward
    if isinstance(module, torch.nn.Embedding):
        return "embedding", _EmbeddingForward
    for cls, op in _ACTIVATION_OPS:
        if isinstance(module, cls):
            return op, _ActivationForward
    if name in _GELU_NAMES:
        return "gelu", _ActivationForward
    if name.endswith("RMSNorm"):
        return "rms_norm", _ActivationForward
    return None, None


def operands_of(module):
    op, mixin = op_of(module)
    if op is None:
        return None
    if isinstance(module, QuantMixin):
        return list(module.qnum_operands)
    return list(mixin.qnum_operands)


_CLASSES = {}


def quantized_class(cls, mixin, op):
    """The quantized subclass of `cls` (cached; importable from this module, so models pickle)."""
    if cls is torch.nn.Linear and mixin is _LinearForward:
        return QuantLinear
    key = (cls, mixin, op)
    q = _CLASSES.get(key)
    if q is None:
        name = f"Quant{cls.__name__}"
        if getattr(sys.modules[__name__], name, None) is not None:
            name = f"Quant{cls.__name__}_{abs(hash((cls.__module__, cls.__qualname__))) % 10**8}"
        q = type(name, (mixin, cls), {"__module__": __name__, "qnum_op": op})
        q.__qualname__ = name
        setattr(sys.modules[__name__], name, q)
        _CLASSES[key] = q
    return q


def make_quantized(module, op, mixin, config, resolved):
    """Turns `module` into its quantized kind in place (its class becomes the quantized subclass)."""
    if not isinstance(module, QuantMixin):
        module.__class__ = quantized_class(type(module), mixin, op)
    return module.qnum_configure(config, resolved)
