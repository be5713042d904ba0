"""qnum for Python: qnum's number formats and kernels on NumPy arrays and PyTorch CPU tensors.

    import qnum, numpy as np
    f = qnum.Format("integer:width=8,frac_width=4")          # exact semantics (default)
    y = f.quantize(np.random.randn(4, 16).astype(np.float32))
    qnum.mase.integer_quantizer(x, 8, 4)                       # MASE's function, MASE's bits

Values come from the C++ library (the same definitions and kernels as the `qnum` CLI); the
kernels are chosen at run time for the running CPU. Errors from the library arrive as
ValueError with qnum's one-line message; wrong array types and dtypes as TypeError.
See docs/python.md.
"""
import numpy as np

from . import _core
from ._arrays import as_input, check_out, new_output, role_code

__all__ = ["Format", "formats", "set_num_threads", "num_threads", "isa", "retain_freed_memory", "mase", "torch"]
__version__ = "0.1.0"

_CODE_DTYPE = np.uint32


class Format:
    """A qnum number format: `Format(spec, mode="exact" | "mase")`.

    `spec` is qnum's text form `name:key=value,...` with MASE's key names
    (`integer:width=8,frac_width=4`, `block_fp:width=8,exponent_width=8,block_size=16`, a preset
    such as `mxfp4_e2m1`); `mode="mase"` reproduces MASE's float32 outputs bit for bit.
    """

    __slots__ = ("_f", "_ste")

    def __init__(self, spec, mode="exact"):
        if isinstance(spec, Format):
            spec = str(spec)
        if not isinstance(spec, str):
            raise TypeError(f"qnum.Format: spec is a {type(spec).__name__}; expected the text form 'name:key=value,...'")
        self._f = _core.Format(spec, mode)

    # ---- facts ---------------------------------------------------------------------------
    def __str__(self):
        return str(self._f)

    def __repr__(self):
        return f"qnum.Format({str(self._f)!r})"

    def __eq__(self, other):
        return isinstance(other, Format) and self._f == other._f

    def __hash__(self):
        return hash(str(self._f))

    @property
    def family(self):
        return self._f.family

    @property
    def mode(self):
        return "mase" if self._f.is_mase else "exact"

    @property
    def bits_per_value(self):
        """Storage bits per element, shared scales amortised."""
        return self._f.bits_per_value

    def describe(self):
        """Dict: format, family, mode, bits_per_value, min_positive, max, distinct_values,
        value_set, rounding, overflow, ste and ste_range (the inputs a clipped STE passes)."""
        return self._f.describe()

    def kernel_path(self, shape, role="weight"):
        """Which implementation quantize runs on a tensor of `shape`: simd (vector loop),
        scalar (the reference per element or block, threaded) or reference (one thread)."""
        return self._f.kernel_path([int(d) for d in shape] or [1], role_code(role))

    def _ste_info(self):
        """(whether the straight-through estimator is clipped, its input range), cached."""
        try:
            return self._ste
        except AttributeError:
            d = self._f.describe()
            self._ste = (d["ste"] == "clipped", d["ste_range"])
            return self._ste

    def output_shape(self, shape):
        return tuple(self._f.output_shape(list(shape)))

    # ---- values --------------------------------------------------------------------------
    def quantize(self, x, role="weight", seed=None, out=None):
        """Quantizes x (float32 numpy array or CPU torch tensor, any shape) and returns the
        same kind of object. `role` (weight, activation, bias) picks MASE's blocking rules in
        mase mode. `seed` sets the seed of stochastic rounding. `out=x` quantizes in place:
        the result is then x itself (no copy for C-contiguous input)."""
        f = self._f if seed is None else self.with_seed(seed)._f
        src = as_input(x)
        shape = x.shape
        if out is None:
            res, dst = new_output(x, f.output_shape(list(shape)) if f.family == "residual_sign" else shape)
        else:
            res = out
            dst = check_out(out, x, f.output_shape(list(shape)))
        f.quantize_into(src, dst, role_code(role))
        return res

    def with_seed(self, seed):
        """The same format with stochastic rounding / binarization seeded by `seed` (>= 0)."""
        seed = int(seed)
        if seed < 0:
            raise ValueError(f"qnum: seed {seed} must be >= 0")
        g = Format.__new__(Format)
        g._f = self._f.with_seed(seed)
        return g

    def encode(self, x):
        """The per-element codes (uint32 numpy array) of x, for families with codes of their
        own (integer, minifloat_*, log, binary) in exact mode; ValueError otherwise."""
        src = as_input(x)
        codes = np.empty(src.shape, _CODE_DTYPE)
        self._f.encode_into(src, codes)
        return codes

    def decode(self, codes):
        """The float32 values of codes from encode (a numpy array of the same shape)."""
        c = np.ascontiguousarray(codes)
        if c.dtype.kind not in "ui":
            raise TypeError(f"qnum: codes have dtype {c.dtype}; expected an unsigned integer array")
        c = c.astype(_CODE_DTYPE, copy=False)
        out = np.empty(c.shape, np.float32)
        self._f.decode_into(c, out)
        return out


def formats():
    """qnum's families (name, keys with defaults and help), presets and policy keys."""
    return _core.formats()


def set_num_threads(n):
    """Threads the kernels may use (>= 1); results do not depend on it."""
    _core.set_num_threads(int(n))


def num_threads():
    return _core.num_threads()


def retain_freed_memory():
    """Makes the C library's malloc keep freed memory for reuse (glibc: blocks below 1 GiB
    from the heap, no trimming), so repeated large calls stop faulting fresh pages in. Process-
    wide: it affects NumPy's and PyTorch's CPU allocations too. False where unsupported."""
    return _core.retain_freed_memory()


def isa():
    """The instruction set the kernels run with on this CPU: baseline, avx2 or avx512."""
    return _core.isa()


from . import mase  # noqa: E402  (needs Format)


def __getattr__(name):  # qnum.torch is imported on first use, so numpy users never need torch
    if name == "torch":
        import importlib
        return importlib.import_module(".torch", __name__)
    raise AttributeError(f"module 'qnum' has no attribute {name!r}")
