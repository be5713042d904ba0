#!/usr/bin/env python3
"""PyTorch baseline for `qnum bench train`: one training epoch of a JSC model.

Development tool only (qnum never needs Python); PyTorch from PyPI (`pip install torch`).
The same work as apps/common/bench_train.hpp: `--rows` JSC-like rows (16 standardised
features, 5 classes), a fresh shuffled order, batches of `--batch-size` (the last one
short), and per batch zero_grad, forward, cross_entropy, loss.item(), backward and an
Adam step (lr 1e-3, torch's defaults). Batches are taken by indexing the feature tensor
with a slice of a random permutation (the fastest plain-PyTorch loop; a DataLoader adds
per-row Python overhead: `--dataloader` measures that variant). Only the epoch is timed:
wall seconds, and the process's CPU seconds (time.process_time, all threads), which other
programs sharing the core do not inflate.

Peak memory as qnum measures it: the resident-set high-water mark (VmHWM) is reset by
writing "5" to /proc/self/clear_refs right before the epoch and read right after.

Models (torch.nn.Sequential with MASE's layer order, as include/qnum/models/jsc.hpp):
  jsc-tiny              BN(16) ReLU Linear(16,5) ReLU                      117 parameters
  jsc-mlp:W0-...-Wn     BN(W0) ReLU [Linear BN ReLU]* Linear(W(n-1), Wn)

Usage: python3 bench/torch_train_baseline.py --model jsc-tiny --rows 600000
           --batch-size 256 --threads 1 [--dataloader]
Prints one JSON object: {"model", "rows", "batch_size", "batches", "params", "threads",
"seconds", "cpu_seconds", "rows_per_s", "peak_rss_mb", "rss_before_mb", "epoch_extra_mb", "mean_loss",
"torch"}.
"""
import argparse
import json
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


def make_model(name):
    if name == "jsc-tiny":
        return nn.Sequential(nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 5), nn.ReLU())
    if name.startswith("jsc-mlp:"):
        w = [int(v) for v in name[len("jsc-mlp:"):].split("-")]
        layers = [nn.BatchNorm1d(w[0]), nn.ReLU()]
        for i in range(1, len(w) - 1):
            layers += [nn.Linear(w[i - 1], w[i]), nn.BatchNorm1d(w[i]), nn.ReLU()]
        layers.append(nn.Linear(w[-2], w[-1]))
        return nn.Sequential(*layers)
    raise SystemExit(f"unknown model '{name}' (known: jsc-tiny, jsc-mlp:W0-...-Wn)")


def status_mb(key):
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(key):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return None


def reset_peak_rss():
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def jsc_like(rows, gen):
    """Standardised JSC-like features: a class-dependent mean shift plus noise (the values
    do not change the cost of an epoch; they keep the loss finite and falling)."""
    y = torch.arange(rows) % 5
    centres = torch.randn(5, 16, generator=gen)
    x = centres[y] + torch.randn(rows, 16, generator=gen)
    x = (x - x.mean(0)) / x.std(0)
    return x.contiguous(), y


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="jsc-tiny")
    ap.add_argument("--rows", type=int, default=600000)
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dataloader", action="store_true", help="batches from a shuffling DataLoader")
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    gen = torch.Generator().manual_seed(args.seed)
    x, y = jsc_like(args.rows, gen)
    model = make_model(args.model)
    model.train()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    params = sum(p.numel() for p in model.parameters())

    if args.dataloader:
        ds = torch.utils.data.TensorDataset(x, y)
        loader = torch.utils.data.DataLoader(ds, batch_size=args.batch_size, shuffle=True, generator=gen)
        batches = len(loader)
    else:
        batches = (args.rows + args.batch_size - 1) // args.batch_size

    hwm = reset_peak_rss()
    before = status_mb("VmRSS:")
    loss_sum = 0.0
    c0 = time.process_time()
    t0 = time.perf_counter()
    if args.dataloader:
        it = iter(loader)
    else:
        order = torch.randperm(args.rows, generator=gen)
    for i in range(batches):
        if args.dataloader:
            xb, yb = next(it)
        else:
            idx = order[i * args.batch_size:(i + 1) * args.batch_size]
            xb, yb = x[idx], y[idx]
        opt.zero_grad()
        loss = F.cross_entropy(model(xb), yb)
        lv = loss.item()
        loss.backward()
        opt.step()
        loss_sum += lv * yb.shape[0]
    seconds = time.perf_counter() - t0
    cpu_seconds = time.process_time() - c0
    peak = status_mb("VmHWM:") if hwm else None
    out = {
        "model": args.model, "rows": args.rows, "batch_size": args.batch_size, "batches": batches,
        "params": params, "threads": args.threads, "seconds": seconds, "cpu_seconds": cpu_seconds, "rows_per_s": args.rows / seconds,
        "peak_rss_mb": peak, "rss_before_mb": before if hwm else None,
        "epoch_extra_mb": (peak - before) if (peak is not None and before is not None) else None,
        "mean_loss": loss_sum / args.rows, "torch": torch.__version__,
        "loader": "dataloader" if args.dataloader else "index",
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
