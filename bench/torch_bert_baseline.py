#!/usr/bin/env python3
"""PyTorch baseline for qnum's BERT training step (docs/perf.md, BERT section).

bert-tiny (2 layers, hidden 128, 2 heads, intermediate 512, vocab 30522) as transformers'
BertForSequenceClassification (eager attention), fp32 on the CPU, one training step =
forward + cross-entropy + backward + grad-norm clipping (1.0) + AdamW, on random token ids
of batch x seq with no padding. Prints the median step time over --steps after --warmup,
wall and CPU (process time: on a shared machine the CPU time is the comparable figure).
    python3 bench/torch_bert_baseline.py --batch 32 --seq 128 --threads 1
"""
import argparse
import json
import statistics
import time

import torch
from transformers import BertConfig, BertForSequenceClassification


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=30522, hidden_size=128, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=512, num_labels=2, attn_implementation="eager")
    model = BertForSequenceClassification(cfg).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.0)
    ids = torch.randint(1000, 30000, (a.batch, a.seq))
    mask = torch.ones_like(ids)
    labels = torch.randint(0, 2, (a.batch,))
    times, cpu = [], []
    for i in range(a.warmup + a.steps):
        t0, c0 = time.perf_counter(), time.process_time()
        opt.zero_grad()
        out = model(input_ids=ids, attention_mask=mask, labels=labels)
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if i >= a.warmup:
            times.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
    # Inference (eval, no grad) for the same batch.
    model.eval()
    inf, inf_cpu = [], []
    with torch.no_grad():
        for i in range(a.warmup + a.steps):
            t0, c0 = time.perf_counter(), time.process_time()
            model(input_ids=ids, attention_mask=mask)
            if i >= a.warmup:
                inf.append(time.perf_counter() - t0)
                inf_cpu.append(time.process_time() - c0)
    print(json.dumps({"framework": "torch " + torch.__version__, "batch": a.batch, "seq": a.seq,
                      "threads": a.threads, "train_step_ms": 1e3 * statistics.median(times),
                      "train_step_cpu_ms": 1e3 * statistics.median(cpu),
                      "inference_ms": 1e3 * statistics.median(inf),
                      "inference_cpu_ms": 1e3 * statistics.median(inf_cpu)}))


if __name__ == "__main__":
    main()
