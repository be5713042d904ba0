#!/usr/bin/env python3
"""Lab 1 with qnum.torch: post-training quantization (PTQ) and quantization-aware training (QAT)
of every Linear of a BERT classifier over integer widths 4..32 bits, and weight pruning at
sparsity 0.1..0.9, random vs l1-norm (with and without a short fine-tune after pruning).

    python examples/python/lab1_ptq_qat.py --data synthetic --budget tiny --output-dir out/
    QNUM_DATA_DIR=/path/to/data python examples/python/lab1_ptq_qat.py --budget small --output-dir out/

Quantization: qnum.torch.quantize_transform_pass(model, {"by": "type", "linear": {"config":
integer_config(w)}}) (fixed point, MASE's keys; common.integer_config says which frac widths).
Pruning: qnum.torch.prune_transform_pass(model, {"weight": {"sparsity": s, "method": m,
"scope": "local"}}) on every Linear. Writes lab1.csv and lab1.png in --output-dir, prints a table.
"""
import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

import qnum.torch as qt  # noqa: E402

WIDTHS = {"tiny": [4, 6, 8, 12, 16, 32], "small": [4, 5, 6, 8, 10, 12, 16, 24, 32],
          "full": [4, 5, 6, 7, 8, 10, 12, 16, 20, 24, 32]}
SPARSITIES = {"tiny": [0.1, 0.3, 0.5, 0.7, 0.9], "small": [0.1 * k for k in range(1, 10)],
              "full": [0.1 * k for k in range(1, 10)]}
COLUMNS = ["experiment", "method", "width", "sparsity", "accuracy", "bits_per_parameter", "seconds"]


def quantize(model, width):
    q, info = qt.quantize_transform_pass(model, {"by": "type", "default": {"config": {"name": None}},
                                                 "linear": {"config": common.integer_config(width)}})
    assert len(info.changed()) == len(common.linear_names(model)), info
    return q, info


def main(argv=None):
    ap = common.add_common_args(argparse.ArgumentParser(description=__doc__,
                                                        formatter_class=argparse.RawDescriptionHelpFormatter))
    args = ap.parse_args(argv)
    budget, start, (model, fp32_acc, splits), title = common.prepare(args)
    rows = [{"experiment": "fp32", "method": "float32", "accuracy": fp32_acc, "width": 32,
             "bits_per_parameter": qt.summarize(model)["bits_per_parameter"], "seconds": 0.0}]
    qat_lr = args.lr / 4
    for w in WIDTHS[args.budget]:
        t = time.perf_counter()
        q, _ = quantize(model, w)
        bpp = qt.summarize(q)["bits_per_parameter"]
        rows.append({"experiment": "ptq", "method": "integer", "width": w,
                     "accuracy": common.evaluate(q, splits["test"]), "bits_per_parameter": bpp,
                     "seconds": time.perf_counter() - t})
        t = time.perf_counter()
        common.train(q, splits["train"], budget["qat_steps"], budget["batch"], qat_lr, seed=args.seed + w)
        rows.append({"experiment": "qat", "method": "integer", "width": w,
                     "accuracy": common.evaluate(q, splits["test"]), "bits_per_parameter": bpp,
                     "seconds": time.perf_counter() - t})
        print(f"width {w:2d}: PTQ {rows[-2]['accuracy']:.4f}  QAT {rows[-1]['accuracy']:.4f}", flush=True)
    for s in SPARSITIES[args.budget]:
        s = round(s, 2)
        for method in ("random", "l1-norm"):
            t = time.perf_counter()
            p, _ = qt.prune_transform_pass(model, {"weight": {"sparsity": s, "method": method, "scope": "local"},
                                                   "seed": args.seed})
            rows.append({"experiment": "prune", "method": method, "sparsity": s,
                         "accuracy": common.evaluate(p, splits["test"]), "seconds": time.perf_counter() - t})
            t = time.perf_counter()
            common.train(p, splits["train"], budget["prune_ft_steps"], budget["batch"], qat_lr, seed=args.seed + 1)
            rows.append({"experiment": "prune_ft", "method": method, "sparsity": s,
                         "accuracy": common.evaluate(p, splits["test"]), "seconds": time.perf_counter() - t})
        print(f"sparsity {s:.1f}: " + "  ".join(f"{r['experiment']}/{r['method']} {r['accuracy']:.4f}"
                                               for r in rows[-4:]), flush=True)

    out = Path(args.output_dir)
    common.write_csv(out / "lab1.csv", rows, COLUMNS)
    plot(rows, fp32_acc, out / "lab1.png", title=title)
    print()
    common.print_table(rows, COLUMNS[:5])
    print(f"\nwrote {out / 'lab1.csv'} and {out / 'lab1.png'} ({time.perf_counter() - start:.1f} s)")
    return rows


def plot(rows, fp32_acc, path, title):
    plt = common.pyplot()
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4))
    for exp, style in (("ptq", "o-"), ("qat", "s-")):
        r = [x for x in rows if x["experiment"] == exp]
        a.plot([x["width"] for x in r], [x["accuracy"] for x in r], style, label=exp.upper())
    a.axhline(fp32_acc, color="gray", ls="--", label="float32")
    a.set_xscale("log", base=2)
    a.set_xlabel("integer width of every Linear's data_in / weight / bias (bits)")
    a.set_ylabel("test accuracy")
    a.set_title("quantize_transform_pass")
    a.legend()
    for exp, ls in (("prune", "-"), ("prune_ft", ":")):
        for method, marker in (("random", "o"), ("l1-norm", "s")):
            r = [x for x in rows if x["experiment"] == exp and x["method"] == method]
            b.plot([x["sparsity"] for x in r], [x["accuracy"] for x in r], marker=marker, ls=ls,
                   label=f"{method}{' + fine-tune' if exp == 'prune_ft' else ''}")
    b.axhline(fp32_acc, color="gray", ls="--", label="float32")
    b.set_xlabel("weight sparsity of every Linear (local)")
    b.set_title("prune_transform_pass")
    b.legend(fontsize=8)
    fig.suptitle(f"Lab 1: BERT classifier, {title}")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


if __name__ == "__main__":
    main()
