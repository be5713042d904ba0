"""qnum's quantizers as PyTorch custom operators (torch.library): `qnum::fake_quantize`
with a fake (meta) kernel for torch.compile and a registered straight-through backward, so
`torch.compile(model, fullgraph=True)` traces quantized models without graph breaks and
gives eager's bits.

The op takes the format as its canonical text (formats are cached by text): a string is a
constant to the compiler, a Format object would not be. Values are computed in float32 by
qnum's kernels (the CPU's widest SIMD copy, chosen at import); a bfloat16 or float16 input
is widened exactly to float32, quantized, and rounded back to its dtype (round to nearest
even) — the result is the float32 result whenever the format's values are representable in
that dtype (8-bit integer and FP8 values are, in bfloat16), otherwise one more rounding."""
import torch

from .. import Format

_FORMATS = {}  # canonical text -> Format
_ALIASES = {}  # any text a caller gave -> canonical text
_FLOAT_DTYPES = (torch.float32, torch.bfloat16, torch.float16)
ROLES = {"weight": 0, "activation": 1, "bias": 2}


def format_of(spec):
    """The cached qnum.Format of canonical text `spec`."""
    f = _FORMATS.get(spec)
    if f is None:
        f = _FORMATS[spec] = Format(spec)
    return f


def spec_text(fmt):
    """Canonical text of a qnum.Format or spec text (it names the mode: mase_compat too)."""
    if isinstance(fmt, str):
        return _canonical(fmt)
    if isinstance(fmt, Format):
        text = str(fmt)
    else:
        raise TypeError(f"qnum.torch: format is a {type(fmt).__name__}; expected a qnum.Format or its text")
    if text not in _FORMATS:
        _FORMATS[text] = fmt if isinstance(fmt, Format) else Format(text)
    return text


@torch._dynamo.assume_constant_result
def _canonical(text):
    """The canonical text of a spec text, parsed once (under torch.compile: at trace time, the
    result a constant, no guard on the caches)."""
    canonical = _ALIASES.get(text)
    if canonical is None:
        f = Format(text)
        canonical = _ALIASES[text] = str(f)
        _FORMATS.setdefault(canonical, f)
    return canonical


def check_tensor(x, what="x"):
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"qnum.torch: {what} is a {type(x).__name__}; expected a torch.Tensor")
    if x.dtype not in _FLOAT_DTYPES:
        raise TypeError(f"qnum.torch: {what} has dtype {x.dtype}; qnum quantizes float32, bfloat16 and float16 "
                        f"tensors (convert with x.float())")
    if x.device.type not in ("cpu", "meta"):
        raise TypeError(f"qnum.torch: {what} is on device {x.device}; this qnum package quantizes CPU tensors "
                        f"(its CUDA kernels are not built into the Python package yet): move it with .cpu()")


def _quantize(x, spec, role):
    f = format_of(spec)._f
    src = x.detach()
    if src.dtype != torch.float32:
        src = src.to(torch.float32)
    if not src.is_contiguous():
        src = src.contiguous()
    if tuple(f.output_shape(list(src.shape))) != tuple(src.shape):
        raise ValueError(f"qnum.torch.fake_quantize: format '{spec}' changes the tensor's shape; "
                         f"only shape-preserving formats can be fake-quantized")
    out = torch.empty(src.shape, dtype=torch.float32, device=src.device)
    if src.numel():
        f.quantize_into(src.numpy(), out.numpy(), role)
    return out if x.dtype == torch.float32 else out.to(x.dtype)


def _load_cpp_op():
    """Loads libqnum_torch_ops.so (the C++ operator, built where torch was importable at build
    time); False where it is absent or was built against another torch."""
    import os
    path = os.path.join(os.path.dirname(os.path.dirname(__file__)), "libqnum_torch_ops.so")
    if not os.path.exists(path) or os.environ.get("QNUM_TORCH_OPS") == "python":
        return False
    try:
        torch.ops.load_library(path)
    except OSError as e:
        import warnings
        warnings.warn(f"qnum.torch: {path} does not load with this torch ({e}); using the Python operator "
                      f"(rebuild qnum: pip install --no-build-isolation ./python)", stacklevel=3)
        return False
    return True


CPP_OP = _load_cpp_op()

if CPP_OP:
    quantize_op = torch.ops.qnum.quantize.default
else:
    @torch.library.custom_op("qnum::quantize", mutates_args=())
    def quantize_op(x: torch.Tensor, spec: str, role: int) -> torch.Tensor:
        """The values of `x` on format `spec` (canonical text); no gradient of its own."""
        check_tensor(x)
        return _quantize(x, spec, role)

    @quantize_op.register_fake
    def _(x, spec, role):
        return torch.empty(x.shape, dtype=x.dtype, device=x.device)

    def _setup_context(ctx, inputs, output):
        x, spec, role = inputs
        clipped, (lo, hi) = format_of(spec)._ste_info()
        ctx.clipped, ctx.lo, ctx.hi = clipped, lo, hi
        if clipped:
            ctx.save_for_backward(x)

    def _backward(ctx, g):
        if not ctx.clipped:
            return g, None, None
        (x,) = ctx.saved_tensors
        keep = (x >= ctx.lo) & (x <= ctx.hi)  # False for NaN
        return torch.where(keep, g, torch.zeros_like(g)), None, None

    quantize_op.register_autograd(_backward, setup_context=_setup_context)


def fake_quantize(x, fmt, role="activation"):
    """`x` fake-quantized onto `fmt` (qnum.Format or spec text): forward the format's values,
    backward straight-through (identity, or clipped to the format's range with `ste=clipped`).
    float32/bfloat16/float16 tensors of any layout, on the CPU (or CUDA in a CUDA build)."""
    check_tensor(x)
    try:
        r = ROLES[role] if isinstance(role, str) else int(role)
    except KeyError:
        raise ValueError(f"role {role!r} is not one of weight, activation, bias") from None
    return quantize_op(x, spec_text(fmt), r)
