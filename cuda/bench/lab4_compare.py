#!/usr/bin/env python3
"""Issue 31's targets from one device run, side by side (cuda/device_check.sh calls this last).

Reads qnum-cuda-memory-study --json (lab 4 on the torch-written BERT-base), torch_gpu.py's JSON
(PyTorch fp32 on the same weights and ids, and its bert-tiny training step) and the output of
qnum's bert-tiny training-step command (QNUM_BERT_STEP_CMD: a JSON line with "step_ms" or
{"step_ms": {"median": ...}}, or a "step_ms=<float>" text line), any of them possibly missing;
writes them combined with the comparison to --out and prints a compact summary. Standard
library only.
"""
import argparse
import json
import re
import sys

MB = float(1 << 20)


def load_json(path):
    """The last line of `path` that parses as a JSON object (programs may log before it)."""
    if not path:
        return None
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                continue
    return None


def step_ms(path):
    """qnum's bert-tiny training step (median ms) from the hook's output, or None."""
    j = load_json(path)
    if j is not None:
        v = j.get("step_ms", j.get("median_ms"))
        if isinstance(v, dict):
            v = v.get("median")
        if isinstance(v, (int, float)):
            return float(v)
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            m = re.findall(r"step_ms\s*[=:]\s*([0-9.]+)", f.read())
        return float(m[-1]) if m else None
    except (OSError, TypeError):
        return None


def fmt(x, spec=".1f", none="n/a"):
    return none if x is None else format(x, spec)


def mb(x):
    return None if x is None else x / MB


def compare(study, torch, qnum_step):
    c = {}
    lines = []
    if study:
        v = study["variants"]
        a, b = v["fp32"], v["mxint8"]
        c["labels_identical_fp32_mxint8"] = study["labels_identical"]
        c["label_agreement"] = "%d/%d" % (study["label_agreement"], study["batch"]["batch"])
        c["mxint8_weight_ratio"] = study["mxint8_weight_ratio"]
        c["mxint8_linear_weight_ratio"] = study["mxint8_linear_weight_ratio"]
        c["weight_ratio_target_met"] = study["mxint8_weight_ratio"] <= 0.35
        c["peak_mb"] = {"qnum_fp32": mb(a.get("peak_allocated_bytes")), "qnum_mxint8": mb(b.get("peak_allocated_bytes"))}
        c["latency_ms"] = {"qnum_fp32": a["latency_ms"]["median"], "qnum_mxint8": b["latency_ms"]["median"]}
        used = lambda x: mb((x.get("device_used_bytes") or {}).get("after_inference"))
        c["device_used_mb"] = {"qnum_fp32": used(a), "qnum_mxint8": used(b)}
        lines.append("lab4 %s, batch %dx%d: labels fp32 vs MXINT8 identical: %s (%s agree, max |logit diff| %.3g)" % (
            study["device"], study["batch"]["batch"], study["batch"]["seq"], "yes" if study["labels_identical"] else "NO",
            c["label_agreement"], study["max_abs_logit_diff"]))
        g = study["gap"]
        lines.append("lab4 weights MB: fp32 %.1f, MXINT8 %.1f -> ratio %.3f (target <= 0.35: %s); Linear weights only %.3f "
                     "(8.25/32 = 0.258); embeddings %.1f + LayerNorms %.2f + biases %.2f MB stay fp32" % (
                         mb(a["weight_bytes"]["total"]), mb(b["weight_bytes"]["total"]), study["mxint8_weight_ratio"],
                         "met" if c["weight_ratio_target_met"] else "NOT met", study["mxint8_linear_weight_ratio"],
                         mb(b["weight_bytes"]["embeddings"]), mb(b["weight_bytes"]["layer_norms"]),
                         mb(b["weight_bytes"]["linear_biases"])))
        if "peak_allocated" in g:
            e = g["explained"]
            lines.append("lab4 saving: theory %.1f%%, weights %.1f%%, peak allocated %.1f%%, device used %.1f%%; "
                         "activations+workspace MB fp32 %.1f / MXINT8 %.1f (bf16 workspace <= %.1f); context+other %.1f MB" % (
                             100 * g["theory"], 100 * g["all_weights"], 100 * g["peak_allocated"], 100 * g["device_used"],
                             mb(e["activations_and_workspace_fp32_bytes"]), mb(e["activations_and_workspace_mxint8_bytes"]),
                             mb(e["workspace_estimate_bytes"]), mb(e["context_and_other_bytes"])))
    if torch:
        inf, tr = torch.get("infer", {}), torch.get("train", {})
        c["peak_mb"] = dict(c.get("peak_mb", {}), torch_fp32=mb(inf.get("peak_allocated_bytes")))
        c["latency_ms"] = dict(c.get("latency_ms", {}), torch_fp32=(inf.get("latency_ms") or {}).get("median"))
        c["device_used_mb"] = dict(c.get("device_used_mb", {}), torch_fp32=mb(inf.get("device_used_bytes")))
        c["torch_step_ms"] = (tr.get("step_ms") or {}).get("median")
        for k in ("infer_error", "train_error"):
            if k in torch:
                lines.append("torch %s: %s" % (k, torch[k]))
    if study and torch and "labels" in torch:
        t = torch["labels"]
        c["labels_identical_qnum_torch_fp32"] = t == study["variants"]["fp32"]["labels"]
        c["labels_identical_qnum_mxint8_torch_fp32"] = t == study["variants"]["mxint8"]["labels"]
        tl = torch.get("logits")
        ql = study["variants"]["fp32"]["logits"]
        flat = [x for row in tl for x in row] if tl else []
        c["max_abs_logit_diff_qnum_torch_fp32"] = max((abs(x - y) for x, y in zip(flat, ql)), default=None) \
            if len(flat) == len(ql) else None
        lines.append("lab4 vs PyTorch fp32 (same weights, same ids): labels identical qnum fp32 %s, qnum MXINT8 %s; "
                     "max |logit diff| fp32 %s" % (
                         "yes" if c["labels_identical_qnum_torch_fp32"] else "NO",
                         "yes" if c["labels_identical_qnum_mxint8_torch_fp32"] else "NO",
                         fmt(c["max_abs_logit_diff_qnum_torch_fp32"], ".3g")))
    if "peak_mb" in c:
        p, l, u = c["peak_mb"], c.get("latency_ms", {}), c.get("device_used_mb", {})
        lines.append("lab4 peak allocated MB: qnum fp32 %s, qnum MXINT8 %s, torch fp32 %s | device used MB: %s / %s / %s | "
                     "latency ms: %s / %s / %s" % (
                         fmt(p.get("qnum_fp32")), fmt(p.get("qnum_mxint8")), fmt(p.get("torch_fp32")),
                         fmt(u.get("qnum_fp32")), fmt(u.get("qnum_mxint8")), fmt(u.get("torch_fp32")),
                         fmt(l.get("qnum_fp32"), ".2f"), fmt(l.get("qnum_mxint8"), ".2f"), fmt(l.get("torch_fp32"), ".2f")))
    c["qnum_step_ms"] = qnum_step
    ts = c.get("torch_step_ms")
    c["step_target_met"] = None if qnum_step is None or ts is None else qnum_step <= ts
    lines.append("bert-tiny train step (B32 x T128, AdamW, fp32) ms: qnum %s, torch eager %s -> target qnum <= torch: %s" % (
        fmt(qnum_step, ".2f", "not measured"), fmt(ts, ".2f", "not measured"),
        {None: "n/a", True: "met", False: "NOT met"}[c["step_target_met"]]))
    return c, lines


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--study", help="qnum-cuda-memory-study --json output")
    p.add_argument("--torch", help="torch_gpu.py --out file")
    p.add_argument("--qnum-step", help="output of QNUM_BERT_STEP_CMD")
    p.add_argument("--bench", help="qnum-cuda-bench --json output (copied into --out)")
    p.add_argument("--out", required=True, help="combined results JSON")
    args = p.parse_args(argv)
    study, torch = load_json(args.study), load_json(args.torch)
    c, lines = compare(study, torch, step_ms(args.qnum_step) if args.qnum_step else None)
    result = {"compare": c, "lab4_study": study, "torch": torch, "bench": load_json(args.bench)}
    with open(args.out, "w") as f:
        json.dump(result, f)
    if not study:
        lines.insert(0, "lab4: no qnum study result (%s)" % args.study)
    if not torch:
        lines.insert(0, "lab4: no PyTorch result (%s)" % args.torch)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
