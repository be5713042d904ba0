"""The qnum.torch labs (examples/python/) run end to end at --budget tiny on the offline synthetic
set, write their CSV and plot, and show what each lab is about: the fine-tuned model learns,
16-bit PTQ keeps its accuracy and 4-bit does not (QAT recovers some), l1-norm pruning beats
random pruning at high sparsity, and the mixed-precision search finds a config far below 32 bits
that keeps the accuracy. The thresholds hold with margin for seeds 0, 1 and 2 (checked offline);
the test runs seed 0. About a minute on 2 cores."""
import csv
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("matplotlib")

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "python"


def run_lab(script, out, *extra):
    env = {k: v for k, v in os.environ.items() if k != "QNUM_DATA_DIR"}
    env["MPLBACKEND"] = "Agg"
    cmd = [sys.executable, str(EXAMPLES / script), "--data", "synthetic", "--budget", "tiny", "--seed", "0",
           "--output-dir", str(out), *extra]
    r = subprocess.run(cmd, cwd=out, env=env, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, f"{' '.join(cmd)} failed:\n{r.stdout[-4000:]}\n{r.stderr[-4000:]}"
    return r.stdout


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def lab1(tmp_path_factory):
    out = tmp_path_factory.mktemp("lab1")
    stdout = run_lab("lab1_ptq_qat.py", out)
    return out, read_csv(out / "lab1.csv"), stdout


@pytest.fixture(scope="module")
def lab3(tmp_path_factory):
    pytest.importorskip("optuna")
    out = tmp_path_factory.mktemp("lab3")
    stdout = run_lab("lab3_mixed_precision.py", out)
    return out, read_csv(out / "lab3.csv"), stdout


def test_lab1_writes_csv_plot_and_table(lab1):
    out, rows, stdout = lab1
    assert list(rows[0]) == ["experiment", "method", "width", "sparsity", "accuracy", "bits_per_parameter", "seconds"]
    widths, sparsities = [4, 6, 8, 12, 16, 32], [0.1, 0.3, 0.5, 0.7, 0.9]
    assert len(rows) == 1 + 2 * len(widths) + 4 * len(sparsities)
    for exp in ("ptq", "qat"):
        assert sorted(int(r["width"]) for r in rows if r["experiment"] == exp) == widths
    for exp in ("prune", "prune_ft"):
        for method in ("random", "l1-norm"):
            got = [float(r["sparsity"]) for r in rows if r["experiment"] == exp and r["method"] == method]
            assert got == sparsities, (exp, method)
    assert all(0.0 <= float(r["accuracy"]) <= 1.0 for r in rows)
    assert (out / "lab1.png").stat().st_size > 10_000
    assert "fp32 test accuracy" in stdout and "experiment" in stdout


def test_lab1_orderings(lab1):
    _, rows, _ = lab1
    acc = {(r["experiment"], r["method"], r["width"] or r["sparsity"]): float(r["accuracy"]) for r in rows}
    fp32 = acc[("fp32", "float32", "32")]
    assert fp32 > 0.8  # learned (chance is 0.5); 0.96-0.99 over seeds 0-2
    ptq = {w: acc[("ptq", "integer", str(w))] for w in (4, 16, 32)}
    assert abs(ptq[16] - fp32) <= 0.05 and abs(ptq[32] - fp32) <= 0.02
    assert ptq[4] < ptq[16] - 0.03  # 4-bit fixed point hurts (by 0.13-0.33 over seeds 0-2)
    assert acc[("qat", "integer", "4")] >= ptq[4]  # QAT recovers part of it (+0.07-0.23)
    bits = {r["width"]: float(r["bits_per_parameter"]) for r in rows if r["experiment"] == "ptq"}
    assert float(bits["4"]) < float(bits["16"]) < 32.0
    for s in ("0.7", "0.9"):
        assert acc[("prune", "l1-norm", s)] >= acc[("prune", "random", s)], s
    assert acc[("prune", "random", "0.9")] < 0.65  # 90 % random pruning destroys the model


def test_lab3_writes_csv_plot_and_table(lab3):
    out, rows, stdout = lab3
    assert list(rows[0]) == ["kind", "trial", "split", "accuracy", "linear_bits", "bits_per_parameter",
                             "bitops_ratio", "objective", "widths"]
    trials = [r for r in rows if r["kind"] == "trial"]
    assert len(trials) == 40 and [int(r["trial"]) for r in trials] == list(range(40))
    for r in trials:
        widths = r["widths"].split()
        assert len(widths) == 14 and set(widths) <= {"4", "6", "8", "12", "16", "32"}
        assert 4.0 <= float(r["linear_bits"]) <= 32.0
    kinds = [r["kind"] for r in rows if r["kind"] != "trial"]
    assert kinds == ["fp32", "uniform4", "uniform6", "uniform8", "uniform12", "uniform16", "uniform32", "best"]
    assert (out / "lab3.png").stat().st_size > 10_000
    assert "best trial" in stdout


def test_lab3_orderings(lab3):
    _, rows, _ = lab3
    by = {r["kind"]: r for r in rows if r["kind"] != "trial"}
    fp32 = float(by["fp32"]["accuracy"])
    assert fp32 > 0.8
    assert float(by["uniform32"]["linear_bits"]) == 32.0 and float(by["uniform4"]["linear_bits"]) == 4.0
    assert abs(float(by["uniform16"]["accuracy"]) - fp32) <= 0.05
    best = by["best"]
    assert float(best["linear_bits"]) < 16.0  # 7.3-8.8 over seeds 0-2
    assert float(best["accuracy"]) >= fp32 - 0.05
    assert float(best["objective"]) > float(by["fp32"]["objective"]) + 0.05
    assert float(best["bitops_ratio"]) < 0.25
