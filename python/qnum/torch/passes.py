"""MASE's transform passes on any PyTorch module (transformers models included), with the
rules of qnum's C++ passes: the binding's matcher and config resolution (quantize), weight
selection and activation masks (prune), LoRA config and semantics, and the cost model
(summarize). Python only walks the torch model and applies what C++ decided.

    model, info = quantize_transform_pass(model, {"by": "type", "default": {"config": {"name": None}},
                                                  "linear": {"config": {"name": "integer", ...}}})
    print(info)            # MASE's summary table

Every pass checks the whole config against the whole model before it changes anything, and
works on a deep copy unless `inplace=True` (the copy's parameters are new tensors; the
input model is untouched)."""
import copy
import json
import re
import warnings

import numpy as np
import torch
from torch.nn.utils import parametrize

from .. import _core
from . import modules as qm
from ._ops import format_of
from .functional import FunctionalQuantMixin

_FUNCTIONAL_OPS = ("matmul", "bmm")


def _json(obj, what):
    if not isinstance(obj, dict):
        raise TypeError(f"qnum.torch.{what}: pass_args is a {type(obj).__name__}; expected a dict")
    try:
        return json.dumps(obj)
    except TypeError as e:
        raise TypeError(f"qnum.torch.{what}: pass_args must hold JSON-like values (dicts, lists, str, numbers, "
                        f"None): {e}") from None


class QuantizeInfo:
    """What quantize_transform_pass did: `rows` (one per leaf module, then per functional op:
    name, op, original_type, new_type, changed, config), `warnings`, `notes`; str() is MASE's table."""

    def __init__(self, rows, warnings_, notes):
        self.rows, self.warnings, self.notes = rows, warnings_, notes

    def summary(self):
        return _core.quantize_summary([(r["original_type"], r["op"], r["changed"]) for r in self.rows])

    def changed(self):
        return [r["name"] for r in self.rows if r["changed"]]

    def __str__(self):
        text = self.summary()
        for n in self.notes:
            text += f"note: {n}\n"
        return text

    __repr__ = __str__


def _snake(name):
    """An op name for a module qnum does not quantize, as MASE's table shows one (Dropout -> dropout)."""
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()


def _leaves(model):
    """(name, module) of every module that computes something itself: no children, or a kind
    qnum quantizes (a Linear subclass with children, say)."""
    for name, m in model.named_modules():
        if name == "" and list(m.children()):
            continue
        if not list(m.children()) or qm.op_of(m)[0] is not None:
            yield name, m


def _check_shape_kept(name, module, specs):
    """A format that changes the tensor's shape (residual_sign) cannot stand in a module's operand."""
    shapes = {"weight": list(module.weight.shape) if isinstance(getattr(module, "weight", None), torch.Tensor)
              else [2, 8], "data_in": [2, 8], "bias": [8], "data_out": [2, 8]}
    for operand in qm.OPERANDS_WEIGHTED:
        spec = specs.get(operand)
        if spec is not None and tuple(format_of(spec)._f.output_shape(shapes[operand])) != tuple(shapes[operand]):
            raise ValueError(f"quantize_transform_pass: layer '{name}', operand {operand}: format '{spec}' changes "
                             f"the tensor's shape; the module needs it kept")


def quantize_transform_pass(model, pass_args, inplace=False):
    """MASE's quantize pass: returns (model, QuantizeInfo). See the module's doc and docs/python.md."""
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"qnum.torch.quantize_transform_pass: model is a {type(model).__name__}; expected a torch.nn.Module")
    config_json = _json(pass_args, "quantize_transform_pass")
    by = pass_args.get("by")
    leaves = list(_leaves(model))
    layers, where, notes = [], [], []
    for i, (name, m) in enumerate(leaves):
        op, mixin_or_reason = qm.op_of(m)
        if op is None:
            if isinstance(mixin_or_reason, str):
                notes.append(f"'{name}' ({type(m).__name__}) left float: {mixin_or_reason}")
            continue
        layers.append((name, op, qm.operands_of(m)))
        where.append(i)
    functional = []
    if by == "type":
        functional = [op for op in _FUNCTIONAL_OPS if op in pass_args]
        for op in functional:
            layers.append((f"<{op} calls>", op, ["data_in", "weight", "data_out"]))
    choices, warns = _core.match_quantize(config_json, layers)  # raises before anything changes

    rows = [{"name": n, "op": _snake(type(m).__name__), "original_type": type(m).__name__, "new_type": type(m).__name__,
             "changed": False, "config": "float"} for n, m in leaves]
    plan = []
    for k, (name, op, operands) in enumerate(layers[:len(where)]):
        key, resolved, new_type = choices[k]
        row = rows[where[k]]
        row["op"] = op
        if resolved is None:
            continue
        specs = qm._specs_of(resolved, operands, name)
        if not any(specs[o] for o in qm.OPERANDS_WEIGHTED):
            continue
        _check_shape_kept(name, leaves[where[k]][1], specs)
        entry = pass_args.get(key, {}) if key else {}
        plan.append((where[k], op, entry.get("config", entry), specs))
        row.update(changed=True, new_type=new_type, config=resolved["text"])
    functional_specs = {}
    for j, op in enumerate(functional):
        key, resolved, new_type = choices[len(where) + j]
        row = {"name": f"{op} (functional)", "op": op, "original_type": f"torch.{op}", "new_type": f"torch.{op}",
               "changed": False, "config": "float"}
        if resolved is not None:
            functional_specs[op] = qm._specs_of(resolved, ["data_in", "weight", "data_out"], op)
            row.update(changed=True, new_type=new_type, config=resolved["text"])
            notes.append(f"every {op} call inside {type(model).__name__}.forward (and each "
                         f"scaled_dot_product_attention's two products, for matmul) is quantized as {resolved['text']}")
        rows.append(row)
    for w in warns:
        warnings.warn(w, stacklevel=2)

    target = model if inplace else copy.deepcopy(model)
    modules = dict(target.named_modules())
    for index, op, config, specs in plan:
        name = leaves[index][0]
        m = modules[name]
        qm.make_quantized(m, op, qm.op_of(m)[1], config, specs)
    if functional_specs:
        if not isinstance(target, FunctionalQuantMixin):
            target.__class__ = _functional_class(type(target))
        target.qnum_functional = functional_specs
    return target, QuantizeInfo(rows, warns, notes)


_FUNCTIONAL_CLASSES = {}


def _functional_class(cls):
    q = _FUNCTIONAL_CLASSES.get(cls)
    if q is None:
        q = _FUNCTIONAL_CLASSES[cls] = type(f"QuantMatmul{cls.__name__}", (FunctionalQuantMixin, cls),
                                            {"__module__": qm.__name__})
        q.__qualname__ = q.__name__
        setattr(qm, q.__name__, q)
    return q


# ---- prune ---------------------------------------------------------------------------------

def _weighted_layers(model):
    """(name, module) of every Linear-like module (Linear, Conv1D, Conv1d/2d): MASE prunes these."""
    return [(n, m) for n, m in model.named_modules() if qm.op_of(m)[0] in ("linear", "conv1d", "conv2d")]


class _ActivationPruneHook:
    """A forward pre-hook that masks the module's input by the C++ pass's rule (per sample
    l1-norm / random, or the global threshold)."""

    def __init__(self, side, seed, threshold):
        self.side, self.seed, self.threshold, self.calls = side, seed, threshold, 0

    def __call__(self, module, args):
        x = args[0]
        if x.numel() == 0:
            return None
        xs = x.detach().to(torch.float32).contiguous().cpu()
        mask = torch.empty_like(xs)
        samples = x.shape[0] if x.dim() >= 2 else 1
        _core.activation_prune_mask_into(self.side["sparsity"], self.side["method"], self.side["scope"], self.seed,
                                         self.calls, self.threshold, xs.numpy(), samples, mask.numpy())
        self.calls += 1
        return (x * mask.to(device=x.device, dtype=x.dtype),) + tuple(args[1:])


def prune_transform_pass(model, pass_args, calibration=None, inplace=False):
    """MASE's prune pass: {"weight": {"sparsity", "method": random | l1-norm, "scope": local | global},
    "activation": {...}, "seed": n}. Weights: exactly round(s·n) entries, selected by the C++
    pass's rule, set to zero and kept at zero while training (a torch.nn.utils.parametrize
    mask, `weight = original · mask`, as MASE's FakeSparseWeight; `weight_mask(module)` reads
    it). Activations: a forward pre-hook per layer.
    Global l1-norm activation pruning needs `calibration`: a callable that runs the model.
    Returns (model, info dict with per-layer counts)."""
    config = _core.parse_prune_config(_json(pass_args, "prune_transform_pass"))
    w, a, seed = config["weight"], config["activation"], config["seed"]
    target = model if inplace else copy.deepcopy(model)
    layers = _weighted_layers(target)
    if not layers and (w["sparsity"] > 0 or a["sparsity"] > 0):
        raise ValueError("prune_transform_pass: the model has no Linear or Conv layer to prune")
    threshold = 0.0
    if a["sparsity"] > 0 and a["scope"] == "global" and a["method"] == "l1-norm":
        if calibration is None:
            raise ValueError("prune_transform_pass: global l1-norm activation pruning needs calibration (a callable "
                             "running the model on calibration batches): the threshold is the sparsity quantile "
                             "of every layer's inputs")
        seen = []
        def record(mod, args):
            seen.append(args[0].detach().abs().float().cpu().reshape(-1))

        hooks = [m.register_forward_pre_hook(record) for _, m in layers]
        was_training = target.training
        target.eval()
        try:
            with torch.no_grad():
                calibration(target)
        finally:
            for h in hooks:
                h.remove()
            target.train(was_training)
        threshold = _core.activation_prune_threshold(a["sparsity"], torch.cat(seen).numpy() if seen else
                                                     np.zeros(0, np.float32))
    rows = []
    if w["sparsity"] > 0:
        live = [_weight_matrix(m).detach().to(torch.float32).contiguous().cpu().numpy() for _, m in layers]
        drops = _core.select_weight_prune(w["sparsity"], w["method"], w["scope"], seed, live)
        for (name, m), drop, values in zip(layers, drops, live):
            mask = torch.ones(values.size, dtype=torch.float32)
            mask[torch.as_tensor(np.asarray(drop, dtype=np.int64))] = 0.0
            mask = mask.view(values.shape)
            if _is_conv1d_gpt2(m):
                mask = mask.t()  # scores were taken on the [out, in] view
            mask = mask.to(device=m.weight.device, dtype=m.weight.dtype)
            old = weight_mask(m)
            if old is not None:
                old.mul_(mask)
            else:
                parametrize.register_parametrization(m, "weight", WeightMask(mask))
            with torch.no_grad():  # the pruned master weights are zero too, as the C++ pass sets them
                m.parametrizations.weight.original.mul_(weight_mask(m))
    if a["sparsity"] > 0:
        for k, (name, m) in enumerate(layers):
            m.register_forward_pre_hook(_ActivationPruneHook(a, _derive_seed(seed, 1000 + k), threshold))
    for name, m in layers:
        mask = weight_mask(m)
        rows.append({"name": name, "weights": int(m.weight.numel()),
                     "pruned": int((mask == 0).sum()) if mask is not None else 0,
                     "activation": a["text"] if a["sparsity"] > 0 else ""})
    return target, {"rows": rows, "weight": w, "activation": a, "threshold": threshold}


class WeightMask(torch.nn.Module):
    """weight = original · mask (a parametrization; MASE's FakeSparseWeight): pruned entries
    stay zero and get no gradient."""

    def __init__(self, mask):
        super().__init__()
        self.register_buffer("mask", mask)

    def forward(self, w):
        return w * self.mask


def weight_mask(m):
    """The prune mask of module `m`'s weight (a tensor of its shape, 0 = pruned), or None."""
    if not parametrize.is_parametrized(m, "weight"):
        return None
    for p in m.parametrizations.weight:
        if isinstance(p, WeightMask):
            return p.mask
    return None


def _weight_matrix(m):
    """A layer's weight as the C++ pass ranks it: [out, in] for Linear and Conv1D, as stored for convs."""
    return m.weight.t() if _is_conv1d_gpt2(m) else m.weight


def _is_conv1d_gpt2(m):
    return qm.op_of(m)[1] is qm._Conv1DForward or isinstance(m, qm._Conv1DForward)


def _derive_seed(seed, stream):
    return int(_core.derive_seed(seed, stream))


# ---- LoRA ----------------------------------------------------------------------------------

class LoRALinear(torch.nn.Module):
    """y = base(x) + scaling · B(A(dropout(x))), A initialised as torch.nn.Linear, B = 0 (qnum's
    LoRA, as PEFT's): the base layer (any Linear-like module qnum knows) is frozen."""

    def __init__(self, base, rank, scaling, dropout, generator):
        super().__init__()
        in_f, out_f = _features(base)
        self.base = base
        self.lora_A = torch.nn.Linear(in_f, rank, bias=False, device=base.weight.device, dtype=base.weight.dtype)
        self.lora_B = torch.nn.Linear(rank, out_f, bias=False, device=base.weight.device, dtype=base.weight.dtype)
        with torch.no_grad():
            bound = 1.0 / (in_f ** 0.5)  # kaiming_uniform(a=sqrt(5)) of torch.nn.Linear
            self.lora_A.weight.copy_(torch.empty(rank, in_f).uniform_(-bound, bound, generator=generator))
            self.lora_B.weight.zero_()
        self.lora_dropout = torch.nn.Dropout(dropout) if dropout > 0 else torch.nn.Identity()
        self.scaling = scaling

    def forward(self, x):
        return self.base(x) + self.lora_B(self.lora_A(self.lora_dropout(x))) * self.scaling

    def delta_weight(self):
        """scaling · B·A in the base weight's layout."""
        d = (self.lora_B.weight.float() @ self.lora_A.weight.float()) * self.scaling
        return d.t() if _is_conv1d_gpt2(self.base) else d


def _features(m):
    if _is_conv1d_gpt2(m):
        return m.weight.shape[0], m.weight.shape[1]
    return m.in_features, m.out_features


def insert_lora_adapter_transform_pass(model, rank=8, alpha=None, dropout=0.0, target=".*", trainable=(), seed=0,
                                       inplace=False):
    """Wraps every Linear (and GPT-2 Conv1D) whose path matches regex `target` in a LoRALinear
    (rank, alpha / rank scaling, adapter dropout), freezes everything else except modules
    matching a `trainable` regex; returns (model, {"trainable": n, "total": n, "adapted": [...]})."""
    cfg = {"rank": rank, "dropout": dropout, "target": target, "trainable": list(trainable), "seed": seed}
    if alpha is not None:
        cfg["alpha"] = alpha
    c = _core.parse_lora_config(json.dumps(cfg))
    try:
        pattern = re.compile(c["target"])
        keep = [re.compile(t) for t in c["trainable"]]
    except re.error as e:
        raise ValueError(f"insert_lora_adapter_transform_pass: bad regex: {e}") from None
    candidates = [(n, m) for n, m in model.named_modules()
                  if qm.op_of(m)[0] == "linear" and ".lora_" not in f".{n}" and not isinstance(m, LoRALinear)]
    chosen = [(n, m) for n, m in candidates if pattern.fullmatch(n)]
    if not chosen:
        raise ValueError(f"insert_lora_adapter_transform_pass: target '{c['target']}' matches no Linear "
                         f"(layers: {', '.join(n for n, _ in candidates)})")
    for n, m in chosen:
        if c["rank"] > min(_features(m)):
            raise ValueError(f"insert_lora_adapter_transform_pass: rank {c['rank']} is larger than layer '{n}' "
                             f"allows (in, out = {_features(m)})")
    out = model if inplace else copy.deepcopy(model)
    for p in out.parameters():
        p.requires_grad_(False)
    for n, m in out.named_modules():
        if any(k.fullmatch(n) for k in keep):
            for p in m.parameters():
                p.requires_grad_(True)
    g = torch.Generator().manual_seed(int(c["seed"]))
    for n, _ in chosen:
        parent, _, leaf = n.rpartition(".")
        holder = out.get_submodule(parent) if parent else out
        setattr(holder, leaf, LoRALinear(getattr(holder, leaf), c["rank"], c["scaling"], c["dropout"], g))
    total = sum(p.numel() for p in out.parameters())
    trainable_n = sum(p.numel() for p in out.parameters() if p.requires_grad)
    return out, {"trainable": trainable_n, "total": total, "adapted": [n for n, _ in chosen]}


def fuse_lora_weights_transform_pass(model, inplace=False):
    """Folds every adapter into its base weight (W += scaling · B·A) and puts the base layer back
    in its place; returns (model, number fused). A pruned base is refused (fuse before pruning)."""
    out = model if inplace else copy.deepcopy(model)
    adapted = [n for n, m in out.named_modules() if isinstance(m, LoRALinear)]
    for n in adapted:
        lora = out.get_submodule(n)
        if weight_mask(lora.base) is not None:
            raise ValueError(f"fuse_lora_weights_transform_pass: layer '{n}' is pruned; fusing would put the "
                             f"adapter's update under its mask (fuse before pruning)")
        with torch.no_grad():
            lora.base.weight.add_(lora.delta_weight().to(lora.base.weight.dtype))
        parent, _, leaf = n.rpartition(".")
        setattr(out.get_submodule(parent) if parent else out, leaf, lora.base)
    return out, len(adapted)


# ---- summarize -----------------------------------------------------------------------------

def _bits(spec):
    return 32.0 if spec is None else float(format_of(spec).bits_per_value)


def summarize(model, example_inputs=None, **example_kwargs):
    """Trainable parameters, bits per parameter under the formats, model size, and (with an
    example input, run once without gradients) MACs, FLOPs and BitOPs of every Linear / Conv1D
    / Conv by the C++ cost model's rule. Returns a dict with `table` (the C++ report's text)."""
    params = total_bits = 0.0
    trainable = 0
    owner = {}  # a parametrized tensor's `original` -> (its module's formats, its name)
    for name, m in model.named_modules():
        formats = m.qnum_formats() if isinstance(m, qm.QuantMixin) else {}
        if parametrize.is_parametrized(m):
            for tname, plist in m.parametrizations.items():
                owner[id(plist.original)] = (formats, tname)
        for pname, p in m.named_parameters(recurse=False):
            formats_p, base = owner.get(id(p), (formats, pname))  # pruned weights: parametrizations.weight.original
            n = p.numel()
            params += n
            trainable += n if p.requires_grad else 0
            total_bits += n * (_bits(formats_p.get(base)) if base in ("weight", "bias") else 32.0)
    rows = []
    if example_inputs is not None or example_kwargs:
        shapes = {}
        hooks = []
        for name, m in model.named_modules():
            op = qm.op_of(m)[0]
            if op in ("linear", "conv1d", "conv2d"):
                def record(mod, args, out, name=name):
                    shapes.setdefault(name, (args[0].numel(), out.numel()))

                hooks.append(m.register_forward_hook(record))
        try:
            with torch.no_grad():
                args = example_inputs if isinstance(example_inputs, tuple) else (
                    () if example_inputs is None else (example_inputs,))
                model(*args, **example_kwargs)
        finally:
            for h in hooks:
                h.remove()
        for name, m in model.named_modules():
            if name not in shapes:
                continue
            n_in, n_out = shapes[name]
            op = qm.op_of(m)[0]
            formats = m.qnum_formats() if isinstance(m, qm.QuantMixin) else {}
            w = m.weight
            if op == "linear":
                in_f = _features(m)[0]
                macs = float(w.numel()) * (n_in / in_f)
            else:  # a convolution: each output element takes in_channels/groups · kernel MACs
                macs = float(n_out) * float(w[0].numel())
            rows.append((name, op, macs, float(n_out) if getattr(m, "bias", None) is not None else 0.0,
                         _bits(formats.get("weight")), _bits(formats.get("data_in")), 0.0))
    costs, table = _core.weighted_costs(rows)
    return {"parameters": int(params), "trainable": int(trainable), "bits": total_bits,
            "bits_per_parameter": total_bits / params if params else 0.0,
            "size_bytes": total_bits / 8.0, "float32_bytes": params * 4.0,
            "layers": costs, "table": table,
            "flops_forward": sum(r["flops_forward"] for r in costs),
            "bitops_forward": sum(r["bitops_forward"] for r in costs)}
