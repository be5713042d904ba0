"""MASE's quantizer functions (`chop.nn.quantizers`) by their own names, arguments and
defaults, computed by qnum's `mase` mode: the same float32 outputs bit for bit, on NumPy
arrays and PyTorch CPU tensors. On torch tensors that require grad they are differentiable
with MASE's backward: the straight-through estimator (gradient passed unchanged) except where
MASE's own differs (binary_quantizer's stochastic path: 0.5, through its hard sigmoid;
binarize and residual_sign_quantizer: hard-tanh; mxint_hardware: detached output).

Each call is a qnum.Format with MASE's keyword names (`integer:width=8,frac_width=4`) in mode
mase; MASE's `skip_first_dim` is qnum's role (True: activation; False: weight, or bias for 1-D).
The Formats are cached per argument set, so a call costs a dictionary look-up plus the kernel.
"""
import functools

import numpy as np

from ._arrays import _F32, as_input, is_tensor, new_output, role_code

__all__ = [
    "integer_quantizer", "integer_floor_quantizer", "minifloat_denorm_quantizer", "minifloat_ieee_quantizer",
    "log_quantizer", "block_fp_quantizer", "block_minifloat_quantizer", "block_log_quantizer", "binary_quantizer",
    "binarize", "residual_sign_quantizer", "ternary_quantizer", "scale_integer_quantizer", "mxint_quantizer",
    "mxfp_quantizer", "mxint_hardware", "spec_text",
]

_WEIGHT, _ACTIVATION, _BIAS = role_code("weight"), role_code("activation"), role_code("bias")


def _value_text(v):
    """A Python argument in qnum's text form: None -> none, bools, numbers, lists joined by x."""
    if v is None:
        return "none"
    if isinstance(v, (bool, np.bool_)):
        return "true" if v else "false"
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    if isinstance(v, (float, np.floating)):
        return repr(float(v))
    if isinstance(v, (list, tuple)):
        return "x".join(_value_text(e) for e in v)
    if isinstance(v, str):
        return v
    if is_tensor(v) or isinstance(v, np.ndarray):
        return _value_text(np.asarray(v.detach() if is_tensor(v) else v, np.float64).ravel().tolist())
    raise TypeError(f"qnum.mase: argument {v!r} of type {type(v).__name__} has no text form")


def spec_text(family, **kwargs):
    """qnum's spec text for a MASE call: `spec_text("integer", width=8, frac_width=4)`."""
    return family + "".join((":" if i == 0 else ",") + f"{k}={_value_text(v)}" for i, (k, v) in enumerate(kwargs.items()))


@functools.lru_cache(maxsize=256)
def _format(text):
    from . import Format
    return Format(text, "mase")._f


_BY_ARGS = {}  # (family, argument values...) -> Format: skips building the text per call


def _format_for(family, **kwargs):
    """The mode-mase Format of a MASE call, cached by its argument values (each call site passes
    the same keywords in the same order, so the values alone identify the call)."""
    try:
        return _BY_ARGS[(family, *kwargs.values())]
    except KeyError:
        f = _format(spec_text(family, **kwargs))
        if len(_BY_ARGS) >= 4096:
            _BY_ARGS.clear()
        _BY_ARGS[(family, *kwargs.values())] = f
        return f
    except TypeError:  # a list argument (block_size=[16]): cache under its tuple
        key = (family, *(tuple(v) if isinstance(v, list) else v for v in kwargs.values()))
        try:
            return _BY_ARGS[key]
        except (KeyError, TypeError):
            f = _format(spec_text(family, **kwargs))
            try:
                _BY_ARGS[key] = f
            except TypeError:
                pass
            return f


def _plain(v):
    """A statistic passed as a 0-d tensor or array, as a Python float (a tensor would hash by
    identity in the Format cache)."""
    return float(v) if is_tensor(v) or isinstance(v, (np.ndarray, np.generic)) else v


def _block_key(block_size):
    """block_size as a hashable cache key (MASE passes lists)."""
    return tuple(block_size) if isinstance(block_size, list) else block_size


def _block_role(x, skip_first_dim):
    if skip_first_dim:
        return _ACTIVATION
    return _BIAS if len(x.shape) == 1 else _WEIGHT


# ---- autograd (torch only; imported lazily) -----------------------------------------------

def _needs_grad(x):
    if not is_tensor(x) or not x.requires_grad:
        return False
    import torch
    return torch.is_grad_enabled()


@functools.lru_cache(maxsize=1)
def _functions():
    """MASE's backward rules as torch.autograd.Functions around qnum's forward."""
    import torch

    class MaseSTE(torch.autograd.Function):
        """Forward: qnum's values; backward: the gradient unchanged (MASE's STE) times `scale`."""

        @staticmethod
        def forward(ctx, x, run, scale):
            ctx.scale = scale
            return run(x.detach())

        @staticmethod
        def backward(ctx, g):
            return (g.clone() if ctx.scale == 1.0 else g * ctx.scale), None, None

    class HardTanhSTE(torch.autograd.Function):
        """MASE's binarize: sign(clamp(x, -1, 1)) forward, gradient where |x| <= 1."""

        @staticmethod
        def forward(ctx, x, run):
            ctx.save_for_backward(x)
            return run(x.detach())

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * (x.abs() <= 1).to(g.dtype), None

    class ResidualSign(torch.autograd.Function):
        """Forward: qnum's values. Backward: MASE's graph differentiated by hand, so that the
        bits do not depend on the torch version: level l outputs o_l = v_l * |mean_l| with
        v_l = binarize(r_{l-1}) (gradient m_l = [|r_{l-1}| <= 1]: torch 1.13's clamp, which
        MASE's reference gradients come from; torch >= 2 gives 0 at |r| = 1), r_l = r_{l-1} - o_l."""

        @staticmethod
        def forward(ctx, x, means, levels, run):
            out = run(x.detach())
            ctx.save_for_backward(x, means, out)
            ctx.levels = levels
            return out

        @staticmethod
        def backward(ctx, g):
            x, means, out = ctx.saved_tensors
            levels = ctx.levels
            outs = [out[level] for level in range(levels)] if levels > 1 else [out]
            grads = [g[level] for level in range(levels)] if levels > 1 else [g]
            mags = torch.abs(means.detach())
            resid = [x.detach()]  # r_0 .. r_{L-1}, in MASE's order of float32 operations
            for level in range(levels - 1):
                resid.append(resid[-1] - outs[level])
            g_r = torch.zeros_like(x)  # gradient reaching r_l from the levels after l
            g_means = torch.zeros_like(means) if means.requires_grad else None
            for level in reversed(range(levels)):
                r = resid[level]
                g_o = grads[level] - g_r  # o_l feeds the output and r_l = r_{l-1} - o_l
                if g_means is not None:
                    v = torch.sign(torch.clamp(r, -1, 1))
                    g_means[level] = (g_o * v).sum() * torch.sign(means.detach()[level])
                g_r = g_r + torch.where(r.abs() <= 1, g_o * mags[level], torch.zeros_like(g_o))
            return g_r, g_means, None, None

    return MaseSTE, HardTanhSTE, ResidualSign


# ---- the shared call path -------------------------------------------------------------------

def _forward(f, role):
    """A function x -> qnum's output (same kind as x)."""
    def run(x):
        src = as_input(x)
        shape = x.shape
        out, dst = new_output(x, f.output_shape(list(shape)) if f.family == "residual_sign" else shape)
        f.quantize_into(src, dst, role)
        return out
    return run


def _apply(x, f, role=_WEIGHT, grad_scale=1.0):
    if type(x) is np.ndarray and x.dtype is _F32 and x.flags.c_contiguous:  # the common case first
        out = np.empty(x.shape, _F32)
        f.quantize_into(x, out, role)
        return out
    if _needs_grad(x):
        return _functions()[0].apply(x, _forward(f, role), grad_scale)
    src = as_input(x)
    out, dst = new_output(x, x.shape)
    f.quantize_into(src, dst, role)
    return out


# ---- MASE's functions -----------------------------------------------------------------------

def integer_quantizer(x, width, frac_width, is_signed=True):
    """Fixed point: clamp(round(x * 2^frac_width)) / 2^frac_width, round half to even."""
    return _apply(x, _format_for("integer", width=width, frac_width=frac_width, is_signed=is_signed))


def integer_floor_quantizer(x, width, frac_width, is_signed=True):
    """Fixed point rounding down (floor)."""
    return _apply(x, _format_for("integer_floor", width=width, frac_width=frac_width, is_signed=is_signed))


def minifloat_denorm_quantizer(x, width, exponent_width, exponent_bias=None):
    """Minifloat without implicit bit (MASE's ceil-exponent rule, powers of two one step down)."""
    return _apply(x, _format_for("minifloat_denorm", width=width, exponent_width=exponent_width,
                                 exponent_bias=exponent_bias))


def minifloat_ieee_quantizer(x, width, exponent_width, exponent_bias=None):
    """IEEE-like minifloat with subnormals, saturating (MASE's clamped mantissa carry)."""
    return _apply(x, _format_for("minifloat_ieee", width=width, exponent_width=exponent_width,
                                 exponent_bias=exponent_bias))


def log_quantizer(x, width, exponent_bias):
    """Sign and power of two; exponent_bias None = 2^(width-2) - 1."""
    return _apply(x, _format_for("log", width=width, exponent_bias=exponent_bias))


def block_fp_quantizer(x, width=12, exponent_width=8, exponent_bias=None, block_size=[16], skip_first_dim=True):
    """Block floating point: one shared exponent per block of `block_size`."""
    return _apply(x, _format_for("block_fp", width=width, exponent_width=exponent_width, exponent_bias=exponent_bias,
                                 block_size=_block_key(block_size)), _block_role(x, skip_first_dim))


def block_minifloat_quantizer(x, width, exponent_width, exponent_bias_width, block_size=16, skip_first_dim=False):
    """Block minifloat: minifloat elements with a shared bias per block. (MASE raises TypeError
    for an int block_size and in backward; qnum reads an int as [n] and passes gradients: STE.)"""
    return _apply(x, _format_for("block_minifloat", width=width, exponent_width=exponent_width,
                                 exponent_bias_width=exponent_bias_width, block_size=_block_key(block_size)),
                  _block_role(x, skip_first_dim))


def block_log_quantizer(x, width, exponent_bias_width=None, block_size=16, skip_first_dim=False):
    """Block log: log elements with a shared bias per block."""
    return _apply(x, _format_for("block_log", width=width, exponent_bias_width=exponent_bias_width,
                                 block_size=_block_key(block_size)), _block_role(x, skip_first_dim))


def binary_quantizer(x, stochastic=False, bipolar=False, seed=None):
    """Binarization: {-1, +1} (bipolar) or {0, alpha per sample} (needs 4-D input, as MASE).
    The stochastic path draws its uniforms like MASE: torch.rand_like(x) for tensors (torch's
    global generator), numpy.random.rand for arrays; `seed=s` (qnum's addition) instead replays
    torch.manual_seed(s) followed by torch.rand_like(x)."""
    f = _format_for("binary", stochastic=stochastic, bipolar=bipolar)
    # MASE's stochastic path goes through hard_sigmoid(x) = clamp((x + 1) / 2) whose clamp is an STE.
    scale = 0.5 if stochastic else 1.0
    if not stochastic or not bipolar:  # the non-bipolar stochastic path ignores its draws (MASE)
        return _apply(x, f, grad_scale=scale)
    if seed is not None:
        return _apply(x, f.with_seed(int(seed)), grad_scale=scale)
    if is_tensor(x):
        import torch
        u = torch.rand_like(x.detach())
    else:
        u = np.random.rand(*x.shape).astype(np.float32)

    def run(v):
        out, dst = new_output(v, v.shape)
        f.binary_with_draws_into(as_input(v), as_input(u, "uniforms"), dst)
        return out

    if _needs_grad(x):
        return _functions()[0].apply(x, run, scale)
    return run(x)


def binarize(x):
    """MASE's binary.binarize: sign(clamp(x, -1, 1)) in {-1, 0, +1}, hard-tanh STE."""
    f = _format_for("binarize")
    run = _forward(f, _WEIGHT)
    if _needs_grad(x):
        return _functions()[1].apply(x, run)
    return run(x)


def residual_sign_quantizer(levels, x_quantizer, means, x):
    """MASE's residual binarization: `levels` outputs stacked on a new first axis (levels >= 2).
    `x_quantizer` is ignored, as in MASE. `means` (list, array or tensor) may require grad."""
    mean_values = [float(m) for m in np.asarray(means.detach() if is_tensor(means) else means, np.float32).ravel()]
    f = _format_for("residual_sign", levels=levels, means=mean_values)
    run = _forward(f, _WEIGHT)
    if _needs_grad(x) or (is_tensor(means) and means.requires_grad and is_tensor(x)):
        import torch
        m = means if is_tensor(means) else torch.tensor(np.asarray(means, np.float32))
        return _functions()[2].apply(x, m, int(levels), run)
    return run(x)


def ternary_quantizer(x, threshold=None, maximum=None, median=None, mean=None, scaling_factor=False):
    """Ternary {-1, 0, +1} (or scaled by alpha per sample) with MASE's rule: the threshold is
    0.75 * mean|x| per sample (dim 0); threshold/maximum/median/mean are accepted and unused,
    as in MASE. Needs 4-D input, as MASE."""
    return _apply(x, _format_for("ternary", threshold=_plain(threshold), maximum=_plain(maximum),
                                 median=_plain(median), mean=_plain(mean),
                                 scaling_factor=scaling_factor))


def scale_integer_quantizer(x, width, is_signed=True, quantile=1.0):
    """Integer with a per-row (last axis) scale from the row's max |x|."""
    return _apply(x, _format_for("scale_integer", width=width, is_signed=is_signed, quantile=_plain(quantile)))


def mxint_quantizer(x, block_size, element_bits, block_dim=-1, scale_bits=8, quantile_search=False):
    """MASE's MX integer: blocks of `block_size` along block_dim, shared power-of-two scale."""
    return _apply(x, _format_for("mxint", block_size=block_size, element_bits=element_bits, block_dim=block_dim,
                                 scale_bits=scale_bits, quantile_search=quantile_search))


def mxfp_quantizer(x, block_size, element_exp_bits, element_frac_bits, block_dim=-1, scale_exp_bits=8,
                   quantile_search=False):
    """MASE's MX float: minifloat elements with a shared E8M0 scale per block."""
    return _apply(x, _format_for("mxfp", block_size=block_size, element_exp_bits=element_exp_bits,
                                 element_frac_bits=element_frac_bits, block_dim=block_dim,
                                 scale_exp_bits=scale_exp_bits, quantile_search=quantile_search))


def mxint_hardware(tensor, q_config, parallelism):
    """MASE's hardware MX integer: q_config = {"width": W, "exponent_width": E}, blocks tiled by
    `parallelism` over the last two dims. The output is detached, as MASE's."""
    if not isinstance(q_config, dict):
        raise TypeError(f"qnum.mase.mxint_hardware: q_config is a {type(q_config).__name__}; expected a dict")
    f = _format_for("mxint_hardware", **q_config, parallelism=list(parallelism))
    return _forward(f, _WEIGHT)(tensor.detach() if is_tensor(tensor) else tensor)
