"""transformers loads a folder `qnum export --to hf` wrote: AutoTokenizer gives the token ids
qnum gave, AutoModelForSequenceClassification the logits qnum gave (qnum predict --json, on
text-synthetic-like reviews), within float rounding; the weights hold what the case says
(quantized on the format's grid, pruned entries zero).

usage: check_hf_export.py QNUM MODEL CHECKPOINT HF_DIR CASE   (CASE: plain, qat, pruned, lora)
"""
import json
import random
import subprocess
import sys

import torch
from safetensors.torch import load_file
from transformers import AutoModelForSequenceClassification, AutoTokenizer


def reviews(vocab, n, seed=7):
    """Reviews of the vocabulary's words (some capitalised, some with a ## suffix glued on)."""
    rng = random.Random(seed)
    words = [w for w in vocab if w.isalpha()]
    suffixes = [w[2:] for w in vocab if w.startswith("##")]
    out = []
    for _ in range(n):
        parts = []
        for _ in range(rng.randint(3, 14)):
            w = rng.choice(words)
            if rng.random() < 0.2:
                w = w.capitalize()
            if suffixes and rng.random() < 0.1:
                w += rng.choice(suffixes)
            parts.append(w)
        out.append(" ".join(parts) + rng.choice([".", "!", " ."]))
    return out


def main():
    qnum, model, ckpt, folder, case = sys.argv[1:6]
    vocab = open(f"{folder}/vocab.txt", encoding="utf-8").read().splitlines()
    texts = reviews(vocab, 24)
    run = subprocess.run([qnum, "predict", model, "--load", ckpt, "--json"], input="\n".join(texts) + "\n",
                         capture_output=True, text=True, check=True)
    rows = [json.loads(line) for line in run.stdout.splitlines()]
    assert [r["input"] for r in rows] == texts, "qnum predict answered other inputs"

    tok = AutoTokenizer.from_pretrained(folder)
    hf = AutoModelForSequenceClassification.from_pretrained(folder).eval()
    failures = []
    for text, row in zip(texts, rows):
        ids = tok(text, truncation=True, max_length=24)["input_ids"]
        if ids != row["token_ids"]:
            failures.append(f"ids of {text!r}: transformers {ids}, qnum {row['token_ids']}")
    enc = tok(texts, padding=True, truncation=True, max_length=24, return_tensors="pt")
    with torch.no_grad():
        logits = hf(**enc).logits
    ours = torch.tensor([r["logits"] for r in rows])
    scale = max(1.0, float(ours.abs().max()))
    diff = float((logits - ours).abs().max())
    if not diff <= 2e-5 * scale:
        failures.append(f"logits differ by {diff} (scale {scale})")
    if hf.config.id2label[0] != "negative":
        failures.append(f"id2label {hf.config.id2label}")

    weights = load_file(f"{folder}/model.safetensors")
    linears = [k for k in weights if k.endswith(".weight") and (".attention." in k or "dense" in k) and weights[k].dim() == 2]
    qc = getattr(hf.config, "qnum_quantization", None)
    if case == "qat":
        for k in linears:
            w = weights[k] * 64  # integer width 8, frac 6: multiples of 2^-6 in [-2, 2)
            if not (torch.equal(w, w.round()) and w.abs().max() <= 128):
                failures.append(f"{k} is not on the 8-bit, 2^-6 grid")
        if not qc or qc["quant_method"] != "qnum" or not qc["layers"]:
            failures.append(f"qnum_quantization {qc}")
    if case == "pruned":
        zeros = sum(int((weights[k] == 0).sum()) for k in linears) / sum(weights[k].numel() for k in linears)
        if zeros < 0.5:
            failures.append(f"pruned: only {zeros:.3f} of the Linear weights are zero")
        if not qc or not qc["pruned"]:
            failures.append(f"pruned: qnum_quantization {qc}")
    if case == "lora":
        if any("lora" in k for k in weights) or not qc or not qc["lora_fused"]:
            failures.append(f"lora: adapters not fused ({qc})")
    for f in failures:
        print(f"FAIL ({case}): {f}")
    print(f"{case}: {len(texts)} texts, logits within {diff:.2e}, {len(failures)} failures")
    sys.exit(1 if failures else 0)


main()
