#!/usr/bin/env python3
"""Lab 3 with qnum.torch: per-layer mixed-precision search with Optuna. Each trial picks an
integer width for every Linear of a fine-tuned BERT classifier, by name, quantizes the model with
qnum.torch.quantize_transform_pass ({"by": "name", "<linear name>": {"config": ...}}), and scores

    objective = validation accuracy - cost_weight * (mean bits of the Linear parameters) / 32

where the bits come from qnum.torch.summarize (its `bits` of the quantized model, less those of
everything that is not a Linear). TPE sampler, seeded. The best trial and uniform widths are then
evaluated on the test split.

    python examples/python/lab3_mixed_precision.py --data synthetic --budget tiny --output-dir out/
    QNUM_DATA_DIR=/path/to/data python examples/python/lab3_mixed_precision.py --budget small --output-dir out/

Writes lab3.csv (one row per trial, then the uniform baselines and the best trial on test) and
lab3.png (accuracy against mean Linear bits) in --output-dir, prints a table.
"""
import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

import optuna  # noqa: E402
import qnum.torch as qt  # noqa: E402

CHOICES = [4, 6, 8, 12, 16, 32]
TRIALS = {"tiny": 40, "small": 60, "full": 200}
COLUMNS = ["kind", "trial", "split", "accuracy", "linear_bits", "bits_per_parameter", "bitops_ratio", "objective",
           "widths"]


class Scorer:
    """Quantizes the fine-tuned model by a {linear name: width} map and scores it."""

    def __init__(self, model, splits, cost_weight):
        self.model, self.splits, self.cost_weight = model, splits, cost_weight
        self.names = common.linear_names(model)
        self.linear_params = sum(p.numel() for n in self.names for p in model.get_submodule(n).parameters())
        s = qt.summarize(model)
        self.other_bits = s["bits"] - 32.0 * self.linear_params  # float32, unchanged by the search
        example = {k: v[:8] for k, v in splits["val"].items() if k != "labels"}
        self.example = example
        self.fp32_bitops = qt.summarize(model, **example)["bitops_forward"]

    def __call__(self, widths, split):
        q, info = qt.quantize_transform_pass(self.model, common.linear_pass_args(widths))
        assert sorted(info.changed()) == sorted(n for n, w in widths.items() if w), info
        s = qt.summarize(q, **self.example)
        linear_bits = (s["bits"] - self.other_bits) / self.linear_params
        acc = common.evaluate(q, self.splits[split])
        return {"accuracy": acc, "linear_bits": linear_bits, "bits_per_parameter": s["bits_per_parameter"],
                "bitops_ratio": s["bitops_forward"] / self.fp32_bitops,
                "objective": acc - self.cost_weight * linear_bits / 32.0,
                "widths": " ".join(str(widths[n] or "f") for n in self.names)}


def main(argv=None):
    ap = common.add_common_args(argparse.ArgumentParser(description=__doc__,
                                                        formatter_class=argparse.RawDescriptionHelpFormatter))
    ap.add_argument("--trials", type=int, default=None, help="Optuna trials (default by budget: "
                    + ", ".join(f"{k} {v}" for k, v in TRIALS.items()) + ")")
    ap.add_argument("--cost-weight", type=float, default=0.2,
                    help="weight of the mean Linear bits / 32 in the objective (default 0.2)")
    args = ap.parse_args(argv)
    budget, start, (model, fp32_acc, splits), title = common.prepare(args)
    score = Scorer(model, splits, args.cost_weight)
    rows = []

    def objective(trial):
        widths = {n: trial.suggest_categorical(n, CHOICES) for n in score.names}
        r = score(widths, "val")
        rows.append({"kind": "trial", "trial": trial.number, "split": "val", **r})
        for k in ("accuracy", "linear_bits", "bitops_ratio"):
            trial.set_user_attr(k, r[k])
        return r["objective"]

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(direction="maximize", sampler=optuna.samplers.TPESampler(seed=args.seed))
    n_trials = args.trials or TRIALS[args.budget]
    t = time.perf_counter()
    study.optimize(objective, n_trials=n_trials)
    search_s = time.perf_counter() - t
    best = study.best_trial
    print(f"search: {n_trials} trials in {search_s:.1f} s; best trial {best.number}: objective {best.value:.4f}, "
          f"val accuracy {best.user_attrs['accuracy']:.4f}, mean Linear bits {best.user_attrs['linear_bits']:.2f}",
          flush=True)

    fp32_widths = {n: None for n in score.names}
    rows.append({"kind": "fp32", "split": "test", **score(fp32_widths, "test")})
    for w in CHOICES:
        rows.append({"kind": f"uniform{w}", "split": "test", **score({n: w for n in score.names}, "test")})
    rows.append({"kind": "best", "trial": best.number, "split": "test", **score(dict(best.params), "test")})

    out = Path(args.output_dir)
    common.write_csv(out / "lab3.csv", rows, COLUMNS)
    plot(rows, out / "lab3.png", title=title)
    print()
    common.print_table([r for r in rows if r["kind"] != "trial"], COLUMNS)
    print(f"\nwrote {out / 'lab3.csv'} and {out / 'lab3.png'} ({time.perf_counter() - start:.1f} s)")
    return rows


def plot(rows, path, title):
    plt = common.pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    trials = [r for r in rows if r["kind"] == "trial"]
    ax.scatter([r["linear_bits"] for r in trials], [r["accuracy"] for r in trials], c=[r["trial"] for r in trials],
               cmap="viridis", s=25, label="trials (validation)")
    uni = [r for r in rows if r["kind"].startswith("uniform")]
    ax.plot([r["linear_bits"] for r in uni], [r["accuracy"] for r in uni], "k^--", label="uniform width (test)")
    for r in rows:
        if r["kind"] == "best":
            ax.plot(r["linear_bits"], r["accuracy"], "r*", ms=14, label="best trial (test)")
        if r["kind"] == "fp32":
            ax.axhline(r["accuracy"], color="gray", ls=":", label="float32 (test)")
    ax.set_xlabel("mean bits per Linear parameter (qnum.torch.summarize)")
    ax.set_ylabel("accuracy")
    ax.set_title(f"Lab 3: per-layer widths, Optuna TPE, {title}", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


if __name__ == "__main__":
    main()
