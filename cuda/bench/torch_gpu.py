#!/usr/bin/env python3
"""PyTorch baselines for issue 31 (lab 4 on a real checkpoint, bert-tiny training step).

Run on the device machine with its python3 (torch + transformers, CUDA; no internet: every
model is built from a config with random weights from a fixed seed).

  infer  writes a random-weight BERT-base BertForSequenceClassification (num_labels 2) as a
         Hugging Face folder (config.json + model.safetensors) that qnum-cuda-memory-study
         then loads, so both sides run the same weights; and classifies the batch of token
         ids qnum wrote (qnum-cuda-memory-study --tokenize-only --ids-out ids.json), so both
         sides see the same ids: peak memory (torch.cuda.max_memory_allocated), latency
         (median of --iters synchronised forwards after --warmup), labels and logits.
  train  times a bert-tiny training step (2 layers, hidden 128, 2 heads, intermediate 512,
         vocab 30522) in PyTorch eager fp32: AdamW, batch 32 x seq 128, dropout on,
         cross-entropy on 2 labels, grad-norm clipping 1.0 (qnum-cuda-bert-step's step); median over --steps steps after warm-up, each step
         synchronised.

fp32 means fp32: TF32 is switched off for matmuls and cuDNN. Output: one JSON object (--out),
with the fp32 labels and logits at the top level for qnum-cuda-memory-study --torch-json.

  python3 cuda/bench/torch_gpu.py --ids ids.json --model-out /tmp/bert-base-random --out torch.json
"""
import argparse
import json
import statistics
import sys
import time


def bert_base_config(BertConfig, attn):
    return BertConfig(attn_implementation=attn, vocab_size=30522, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                      intermediate_size=3072, hidden_act="gelu", hidden_dropout_prob=0.1,
                      attention_probs_dropout_prob=0.1, max_position_embeddings=512, type_vocab_size=2,
                      layer_norm_eps=1e-12, initializer_range=0.02, num_labels=2)


def bert_tiny_config(BertConfig, attn):
    return BertConfig(attn_implementation=attn, vocab_size=30522, hidden_size=128, num_hidden_layers=2, num_attention_heads=2,
                      intermediate_size=512, hidden_act="gelu", hidden_dropout_prob=0.1,
                      attention_probs_dropout_prob=0.1, max_position_embeddings=512, type_vocab_size=2,
                      layer_norm_eps=1e-12, initializer_range=0.02, num_labels=2)


def read_ids(path):
    """The batch qnum tokenised: input_ids and attention_mask [batch][seq], padded."""
    with open(path) as f:
        j = json.load(f)
    ids, mask = j["input_ids"], j["attention_mask"]
    if len(ids) != j["batch"] or any(len(r) != j["seq"] for r in ids) or len(mask) != len(ids):
        raise SystemExit(f"torch_gpu.py: {path}: input_ids/attention_mask do not match batch {j['batch']} x seq {j['seq']}")
    return j


def timed(torch, fn, warmup, iters):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    ms = []
    for _ in range(iters):
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        ms.append((time.perf_counter() - t0) * 1e3)
    return ms


def infer(torch, transformers, args, out):
    batch = read_ids(args.ids)
    dev = torch.device(args.device)
    torch.manual_seed(args.seed)
    model = transformers.BertForSequenceClassification(bert_base_config(transformers.BertConfig, args.attn)).eval()
    if args.model_out:
        model.save_pretrained(args.model_out, safe_serialization=True)
    params = sum(p.numel() for p in model.parameters())
    weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    model.to(dev)
    torch.cuda.synchronize()
    resident = torch.cuda.memory_allocated() - base
    ids = torch.tensor(batch["input_ids"], dtype=torch.long, device=dev)
    mask = torch.tensor(batch["attention_mask"], dtype=torch.long, device=dev)
    torch.cuda.reset_peak_memory_stats()
    logits = None

    def forward():
        nonlocal logits
        with torch.no_grad():
            logits = model(input_ids=ids, attention_mask=mask).logits

    ms = timed(torch, forward, args.warmup, args.iters)
    peak = torch.cuda.max_memory_allocated() - base
    free, total = torch.cuda.mem_get_info()
    host = logits.float().cpu()
    out["labels"] = host.argmax(dim=1).tolist()
    out["logits"] = host.tolist()
    out["infer"] = {
        "model": "bert-base (random, seed %d)" % args.seed, "model_dir": args.model_out, "params": params,
        "attn_implementation": args.attn, "batch": batch["batch"], "seq": batch["seq"],
        "weight_bytes": weight_bytes, "device_resident_bytes": resident,
        "peak_allocated_bytes": peak, "reserved_bytes": torch.cuda.memory_reserved(),
        "device_used_bytes": total - free,
        "latency_ms": {"median": statistics.median(ms), "iters": len(ms), "all": ms},
    }
    del model, ids, mask, logits
    torch.cuda.empty_cache()


def train(torch, transformers, args, out):
    dev = torch.device(args.device)
    torch.manual_seed(args.seed)
    model = transformers.BertForSequenceClassification(bert_tiny_config(transformers.BertConfig, args.attn))
    model = model.to(dev).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01)
    g = torch.Generator(device="cpu").manual_seed(args.seed + 1)
    B, T = args.train_batch, args.train_seq
    ids = torch.randint(1000, 30522, (B, T), generator=g).to(dev)
    mask = torch.ones(B, T, dtype=torch.long, device=dev)
    labels = torch.randint(0, 2, (B,), generator=g).to(dev)
    losses = []

    def step():
        opt.zero_grad(set_to_none=True)
        logits = model(input_ids=ids, attention_mask=mask).logits
        loss = torch.nn.functional.cross_entropy(logits, labels)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)  # as qnum's step (and the HF Trainer)
        opt.step()
        losses.append(loss)

    ms = timed(torch, step, args.train_warmup, args.steps)
    out["train"] = {
        "model": "bert-tiny (random, seed %d)" % args.seed, "attn_implementation": args.attn,
        "batch": B, "seq": T, "optimizer": "AdamW(lr=1e-4, weight_decay=0.01)", "dropout": 0.1,
        "step_ms": {"median": statistics.median(ms), "min": min(ms), "steps": len(ms)},
        "first_loss": float(losses[0]), "last_loss": float(losses[-1]),
    }


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ids", help="ids.json written by qnum-cuda-memory-study --ids-out (needed by infer)")
    p.add_argument("--model-out", help="folder to write the random BERT-base checkpoint to (config.json + model.safetensors)")
    p.add_argument("--out", required=True, help="JSON results file")
    p.add_argument("--only", choices=["infer", "train"], help="run one part (default: both)")
    p.add_argument("--device", default="cuda")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--attn", default="sdpa", choices=["sdpa", "eager"], help="transformers attn_implementation")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--train-batch", type=int, default=32)
    p.add_argument("--train-seq", type=int, default=128)
    p.add_argument("--train-warmup", type=int, default=10)
    p.add_argument("--steps", type=int, default=50)
    args = p.parse_args(argv)
    if args.only != "train" and not args.ids:
        p.error("--ids is required for the inference part")

    import torch
    import transformers

    if not torch.cuda.is_available():
        raise SystemExit("torch_gpu.py: torch sees no CUDA device (torch %s)" % torch.__version__)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    out = {"torch": torch.__version__, "transformers": transformers.__version__,
           "cuda": torch.version.cuda, "device": torch.cuda.get_device_name(0), "tf32": False}
    status = 0
    for name, part in (("infer", infer), ("train", train)):
        if args.only in (None, name):
            try:
                part(torch, transformers, args, out)
            except Exception as e:  # one part failing still reports the other
                out[name + "_error"] = "%s: %s" % (type(e).__name__, e)
                print("torch_gpu.py: %s failed: %s" % (name, out[name + "_error"]), file=sys.stderr)
                status = 1
    with open(args.out, "w") as f:
        json.dump(out, f)
    infer_r, train_r = out.get("infer", {}), out.get("train", {})
    print("torch %s on %s: infer peak %s B, %s ms median; train step %s ms median; errors: %s" % (
        out["torch"], out["device"], infer_r.get("peak_allocated_bytes"),
        infer_r.get("latency_ms", {}).get("median"), train_r.get("step_ms", {}).get("median"),
        [out[k] for k in out if k.endswith("_error")] or "none"))
    return status


if __name__ == "__main__":
    sys.exit(main())
