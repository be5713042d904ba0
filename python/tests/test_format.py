"""qnum.Format on NumPy: the exact oracle for integer and minifloat, codes, facts, in-place
(zero-copy) calls, layouts, and the errors users get."""
import numpy as np
import pytest

import qnum
from conftest import assert_same_bits

RNG = np.random.default_rng(20261127)


def sample(n=20000):
    """Normal values at several scales, exact ties of small grids, signed zeros, huge values."""
    x = np.concatenate([
        RNG.standard_normal(n) * 10.0 ** RNG.uniform(-4, 3, n),
        (RNG.integers(-600, 600, 2000) + 0.5) / 16.0,       # ties of 2^-4 grids
        (RNG.integers(-600, 600, 2000) + 0.5) / 64.0,
        [0.0, -0.0, 1e30, -1e30, 3e38, -3e38, 1e-40, -1e-40],
    ])
    return x.astype(np.float32)


# ---- integer: round half to even on the 2^-F grid, saturate to the W-bit range ----------------

def integer_oracle(x, width, frac_width, signed=True):
    lo, hi = (-(2 ** (width - 1)), 2 ** (width - 1) - 1) if signed else (0, 2 ** width - 1)
    k = np.clip(np.round(x.astype(np.float64) * 2.0 ** frac_width), lo, hi)  # np.round: half to even
    return (k / 2.0 ** frac_width).astype(np.float32)


@pytest.mark.parametrize("width,frac,signed", [(8, 4, True), (4, 0, True), (12, 8, True), (6, 2, False),
                                               (16, -2, True)])
def test_integer_matches_exact_oracle(width, frac, signed):
    f = qnum.Format(f"integer:width={width},frac_width={frac},is_signed={'true' if signed else 'false'}")
    x = sample()
    got = f.quantize(x)
    unsigned_zero = lambda a: np.where(a == 0, np.float32(0), a)  # the oracle's zero sign is not the point
    assert_same_bits(unsigned_zero(got), unsigned_zero(integer_oracle(x, width, frac, signed)), str(f))
    codes = f.encode(x)
    assert codes.dtype == np.uint32 and codes.shape == x.shape
    assert_same_bits(f.decode(codes), unsigned_zero(got), str(f) + " decode(encode)")


# ---- minifloat_ieee: nearest of the format's value set, ties to the even code, saturating -----

def minifloat_values(width, exponent_width):
    """Every non-negative value of an IEEE-like minifloat without Inf/NaN codes, by code."""
    m = width - 1 - exponent_width
    bias = 2 ** (exponent_width - 1) - 1
    vals = []
    for code in range(2 ** (width - 1)):
        e, frac = code >> m, code & ((1 << m) - 1)
        vals.append(frac / 2 ** m * 2.0 ** (1 - bias) if e == 0 else (1 + frac / 2 ** m) * 2.0 ** (e - bias))
    return np.array(vals)


def minifloat_oracle(x, width, exponent_width):
    grid = minifloat_values(width, exponent_width)  # ascending
    a = np.abs(x.astype(np.float64))
    i = np.clip(np.searchsorted(grid, a), 1, len(grid) - 1)
    lo, hi = grid[i - 1], grid[i]
    pick_hi = (a - lo > hi - a) | ((a - lo == hi - a) & (i % 2 == 0))  # tie: the even code
    q = np.where(pick_hi, hi, lo)
    q = np.where(a >= grid[-1], grid[-1], q)
    return np.copysign(q, x.astype(np.float64)).astype(np.float32)


@pytest.mark.parametrize("width,ew", [(8, 4), (8, 5), (6, 3), (12, 4)])
def test_minifloat_ieee_matches_exact_oracle(width, ew):
    f = qnum.Format(f"minifloat_ieee:width={width},exponent_width={ew}")
    x = sample()
    got, want = f.quantize(x), minifloat_oracle(x, width, ew)
    # compare magnitudes bitwise and signs separately (the oracle's zero sign is not the point)
    assert_same_bits(np.abs(got), np.abs(want), str(f))
    nz = got != 0
    assert (np.signbit(got[nz]) == np.signbit(x[nz])).all()
    assert_same_bits(f.decode(f.encode(x)), got, str(f) + " decode(encode)")


def test_facts_and_text():
    f = qnum.Format("integer:width=8,frac_width=4")
    assert str(f) == "integer:width=8,frac_width=4"
    assert f.bits_per_value == 8
    d = f.describe()
    assert d["max"] == 7.9375 and d["min_positive"] == 0.0625 and d["family"] == "integer"
    assert d["ste_range"] == (-8.0, 7.9375)
    assert qnum.Format("mxint8").bits_per_value == 8.25
    assert qnum.Format(str(qnum.Format("block_fp:width=8,block_size=16"))) == qnum.Format("block_fp:width=8,block_size=16")
    m = qnum.Format("integer:width=8,frac_width=4", mode="mase")
    assert m.mode == "mase" and "mode=mase" in str(m)
    listing = qnum.formats()
    names = {fam["name"] for fam in listing["families"]}
    assert {"integer", "minifloat_ieee", "block_fp", "mxint", "mxfp", "ternary"} <= names
    assert any(p["name"] == "fp8_e4m3" for p in listing["presets"])
    assert any(k["key"] == "rounding" for k in listing["policy_keys"])
    integer = next(fam for fam in listing["families"] if fam["name"] == "integer")
    assert {"key", "default", "help"} <= set(integer["keys"][0])


def test_block_format_any_shape_and_roles():
    f = qnum.Format("mxfp4_e2m1")
    x = RNG.standard_normal((3, 5, 64)).astype(np.float32)
    y = f.quantize(x)
    assert y.shape == x.shape and y.dtype == np.float32
    assert_same_bits(y.reshape(15, 64), f.quantize(x.reshape(15, 64)), "rows are independent")
    assert np.unique(np.abs(y[0, 0, :32] / np.abs(y[0, 0, :32]).max())).size <= 8  # FP4: 8 magnitudes
    s = qnum.Format("block_fp:width=8,exponent_width=8,block_size=16", mode="mase")
    a = s.quantize(x.reshape(15, 64), role="activation")
    w = s.quantize(x.reshape(15, 64), role="weight")
    assert a.shape == w.shape == (15, 64)
    # MASE's roles block differently: an activation's blocks stay inside a row (skip_first_dim),
    # so each row quantizes alone to the same bits; a weight's do not
    assert (a != w).sum() > 0
    for i in range(15):
        assert_same_bits(s.quantize(x.reshape(15, 64)[i:i + 1], role="activation"), a[i:i + 1], f"row {i}")


def test_in_place_shares_memory():
    for spec in ["integer:width=8,frac_width=4", "minifloat_ieee:width=8,exponent_width=4", "mxint8",
                 "block_fp:width=8,block_size=16", "log:width=6", "scale_integer:width=4"]:
        f = qnum.Format(spec)
        x = RNG.standard_normal((8, 64)).astype(np.float32)
        want = f.quantize(x)
        out = f.quantize(x, out=x)
        assert out is x and np.shares_memory(out, x)
        assert_same_bits(x, want, spec + " in place")


def test_non_contiguous_and_read_only_inputs():
    f = qnum.Format("integer:width=8,frac_width=4")
    base = RNG.standard_normal((16, 32)).astype(np.float32)
    t = base.T  # Fortran order: copied once, same values
    assert_same_bits(f.quantize(t), f.quantize(np.ascontiguousarray(t)), "transposed")
    ro = base.copy()
    ro.flags.writeable = False
    assert_same_bits(f.quantize(ro), f.quantize(base), "read-only")
    assert f.quantize(np.array(1.3, np.float32)).shape == ()
    assert f.quantize(np.empty((0, 4), np.float32)).shape == (0, 4)


@pytest.mark.parametrize("spec", ["mxint8", "integer:width=8,frac_width=4,rounding=stochastic,seed=3",
                                  "block_fp:width=8,block_size=16", "minifloat_ieee:width=8,exponent_width=4"])
def test_threads_do_not_change_bits(spec):
    # 2^22 + 37 values: many chunks at any thread count, and a ragged last one
    f = qnum.Format(spec)
    x = RNG.standard_normal((1 << 22) + 37).astype(np.float32)
    qnum.set_num_threads(1)
    one = f.quantize(x)
    for n in (2, 3):
        qnum.set_num_threads(n)
        assert qnum.num_threads() == n
        assert_same_bits(f.quantize(x), one, f"{spec}: {n} threads")
    qnum.set_num_threads(1)
    with pytest.raises(ValueError, match="must be >= 1"):
        qnum.set_num_threads(0)
    assert qnum.isa() in ("baseline", "avx2", "avx512")


@pytest.mark.parametrize("dtype", [np.float64, np.float16, np.int32, np.uint8])
def test_other_dtypes_are_type_errors(dtype):
    with pytest.raises(TypeError, match=np.dtype(dtype).name):
        qnum.Format("integer:width=8,frac_width=4").quantize(np.zeros(4, dtype))
    with pytest.raises(TypeError, match=np.dtype(dtype).name):
        qnum.mase.integer_quantizer(np.zeros(4, dtype), 8, 4)


def test_errors_are_named():
    with pytest.raises(TypeError, match="list"):
        qnum.Format("integer:width=8").quantize([1.0, 2.0])
    with pytest.raises(ValueError, match="unknown format 'integr'"):
        qnum.Format("integr:width=8")
    with pytest.raises(ValueError, match="exponent_width"):
        qnum.Format("minifloat_ieee:width=8,exponent_width=9")
    with pytest.raises(ValueError, match="mode 'fast'"):
        qnum.Format("integer:width=8", mode="fast")
    with pytest.raises(ValueError, match="role 'input'"):
        qnum.Format("integer:width=8").quantize(np.ones(4, np.float32), role="input")
    with pytest.raises(ValueError, match="out has shape"):
        qnum.Format("integer:width=8").quantize(np.ones(4, np.float32), out=np.ones(5, np.float32))
    with pytest.raises(TypeError, match="out must be"):
        qnum.Format("integer:width=8").quantize(np.ones(4, np.float32), out=np.ones(4, np.float64))
    with pytest.raises(ValueError, match="no per-element codes"):
        qnum.Format("mxint8").encode(np.ones(32, np.float32))
    with pytest.raises(ValueError, match="mode exact"):
        qnum.Format("integer:width=8", mode="mase").encode(np.ones(4, np.float32))
    with pytest.raises(ValueError, match="NaN"):
        qnum.Format("integer:width=8").encode(np.array([np.nan], np.float32))
    with pytest.raises(ValueError, match="4-D"):  # MASE's zero-scaled binary needs 4-D input
        qnum.mase.binary_quantizer(np.ones((4, 8), np.float32), bipolar=False)
    with pytest.raises(ValueError, match="block"):  # 40 elements are not whole blocks of 16
        qnum.mase.mxint_quantizer(np.ones((40,), np.float32), 16, 8)
    with pytest.raises(ValueError, match="3d weight|3-D|rank"):
        qnum.mase.block_fp_quantizer(np.ones((2, 3, 16), np.float32), 8, 8, None, [16], skip_first_dim=False)


def test_done_when_example():
    y = qnum.mase.block_fp_quantizer(np.ones((2, 16), np.float32), width=8, exponent_width=8, exponent_bias=None,
                                     block_size=[16], skip_first_dim=False)
    assert y.shape == (2, 16) and y.dtype == np.float32
    assert np.all(y == y[0, 0]) and 0.99 <= y[0, 0] <= 1.0


@pytest.mark.parametrize("spec", ["log:width=6", "minifloat_denorm:width=8,exponent_width=4", "binary:bipolar=true",
                                  "fp8_e4m3", "integer:width=4,frac_width=1,is_signed=false"])
def test_codes_round_trip_to_quantize(spec):
    f = qnum.Format(spec)
    x = sample(4000)
    codes = f.encode(x)
    assert codes.max() < 2 ** 16
    assert_same_bits(f.decode(codes), f.quantize(x), spec + " decode(encode(x)) == quantize(x)")


def test_kernel_path():
    assert qnum.Format("integer:width=8,frac_width=4").kernel_path((4, 64)) == "simd"
    assert qnum.Format("mxfp4_e2m1", mode="mase").kernel_path((4, 64)) == "simd"
