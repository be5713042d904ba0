"""Shared helpers of qnum's Python tests: where the MASE reference cases are, and bitwise
comparison of float32 arrays (all NaNs equal; -0 and +0 distinct)."""
import json
import os
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]
MASE_REF = Path(os.environ.get("QNUM_MASE_REF_DIR", REPO / "tests" / "fixtures" / "mase_ref"))


def load_cases():
    manifest = MASE_REF / "manifest.json"
    if not manifest.exists():
        return []
    return json.loads(manifest.read_text())["cases"]


def bits(a):
    a = np.ascontiguousarray(np.asarray(a, np.float32))
    u = a.view(np.uint32).copy()
    u[np.isnan(a)] = 0x7FC00000  # every NaN is the same NaN
    return u


def assert_same_bits(got, want, what="", max_ulp=0):
    got = np.asarray(got, np.float32)
    want = np.asarray(want, np.float32)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    g, w = bits(got).astype(np.int64), bits(want).astype(np.int64)
    bad = g != w
    if max_ulp:
        # ordered integer keys: distance in units in the last place for same-sign floats
        key = lambda u: np.where(u & 0x80000000, -(u & 0x7FFFFFFF), u)
        bad &= np.abs(key(g) - key(w)) > max_ulp
    if bad.any():
        i = int(np.flatnonzero(bad.ravel())[0])
        pytest.fail(f"{what}: {int(bad.sum())} of {bad.size} elements differ; first at flat index {i}: "
                    f"got {got.ravel()[i]!r} (0x{int(g.ravel()[i]):08x}) want {want.ravel()[i]!r} "
                    f"(0x{int(w.ravel()[i]):08x})")


def torch_or_skip():
    return pytest.importorskip("torch")


# In CI (CI=true) a test skipped for a missing tool is a claim left unproven: the run fails.
_SKIPPED = []


def pytest_runtest_logreport(report):
    if report.skipped:
        _SKIPPED.append(report.nodeid)


def pytest_collectreport(report):
    if report.skipped:
        _SKIPPED.append(report.nodeid)


def pytest_sessionfinish(session, exitstatus):
    if os.environ.get("CI") == "true" and _SKIPPED and exitstatus == 0:
        print(f"\nCI: {len(_SKIPPED)} test(s) skipped (first: {_SKIPPED[0]}); in CI every test must run")
        session.exitstatus = 1
