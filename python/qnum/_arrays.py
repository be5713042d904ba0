"""Input/output handling shared by qnum.Format and qnum.mase: NumPy arrays and PyTorch CPU
tensors of float32, any shape. C-contiguous inputs are passed to the C++ kernels without a
copy; other layouts are copied once. The output is the same kind of object as the input.
The kernels always receive NumPy arrays: a CPU tensor's `.numpy()` is a view of its memory
and crosses into C++ several times faster than the tensor itself (DLPack)."""
import sys

import numpy as np

_ROLES = {"weight": 0, "activation": 1, "bias": 2}
_F32 = np.dtype(np.float32)


def role_code(role):
    try:
        return _ROLES[role]
    except (KeyError, TypeError):
        raise ValueError(f"role {role!r} is not one of weight, activation, bias") from None


def _torch():
    """The torch module if the caller could have passed a tensor (torch already imported)."""
    return sys.modules.get("torch")


def is_tensor(x):
    t = _torch()
    return t is not None and isinstance(x, t.Tensor)


def as_input(x, what="x"):
    """A C-contiguous float32 NumPy array over x's memory (or over a copy where x's layout is
    not C order). TypeError for anything but a float32 NumPy array or CPU torch tensor."""
    if type(x) is np.ndarray:
        if x.dtype is _F32 and x.flags.c_contiguous:  # the common case, checked first
            return x
        if x.dtype != _F32:
            raise TypeError(f"qnum: {what} has dtype {x.dtype}; qnum quantizes float32 arrays only "
                            f"(convert with x.astype(np.float32))")
        return x if x.flags.c_contiguous else np.ascontiguousarray(x)
    if isinstance(x, np.ndarray):  # subclasses (np.matrix, memmap): view as a plain array
        return as_input(np.asarray(x).view(np.ndarray), what)
    if is_tensor(x):
        t = _torch()
        if x.dtype != t.float32:
            raise TypeError(f"qnum: {what} has dtype {x.dtype}; qnum quantizes float32 tensors only "
                            f"(convert with x.float())")
        if not x.is_cpu:
            raise TypeError(f"qnum: {what} is on device {x.device}; qnum runs on CPU tensors only")
        if x.requires_grad:
            x = x.detach()
        return (x if x.is_contiguous() else x.contiguous()).numpy()
    raise TypeError(f"qnum: {what} is a {type(x).__name__}; expected a float32 numpy.ndarray or torch.Tensor")


def new_output(x, shape):
    """(an uninitialised float32 array/tensor of `shape` of the same kind as x, the NumPy
    array over its memory that the kernels write)."""
    if type(x) is np.ndarray or not is_tensor(x):
        out = np.empty(shape, _F32)
        return out, out
    t = _torch()
    out = t.empty_like(x, memory_format=t.contiguous_format) if shape == x.shape else t.empty(shape, dtype=x.dtype)
    return out, out.numpy()


def check_out(out, x, shape):
    """The NumPy array over a caller-supplied output's memory, after checking that `out` is of
    x's kind, float32, C-contiguous, writable and of `shape`."""
    if type(out) is np.ndarray and type(x) is np.ndarray and out.dtype is _F32 and out.flags.c_contiguous \
            and out.flags.writeable and out.shape == tuple(shape):
        return out
    if is_tensor(x) != is_tensor(out) or not (is_tensor(out) or isinstance(out, np.ndarray)):
        raise TypeError(f"qnum: out is a {type(out).__name__}; it must be the same kind as the input "
                        f"({type(x).__name__})")
    if is_tensor(out):
        ok = out.dtype == _torch().float32 and out.is_contiguous() and out.device.type == "cpu"
    else:
        ok = out.dtype == np.float32 and out.flags.c_contiguous and out.flags.writeable
    if not ok:
        raise TypeError(f"qnum: out must be a writable C-contiguous float32 array on the CPU "
                        f"(got dtype {out.dtype})")
    if tuple(out.shape) != tuple(shape):
        raise ValueError(f"qnum: out has shape {tuple(out.shape)}, expected {tuple(shape)}")
    return out.detach().numpy() if is_tensor(out) else out
