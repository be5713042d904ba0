#!/usr/bin/env python3
"""Hugging Face baseline for bench/bench_tokenize.cpp: BertTokenizer (transformers >= 5, the
Rust tokenizers library) on the IMDb train split, same texts as the C++ benchmark.

  RAYON_NUM_THREADS=1 python3 bench/tokenize_baseline.py --data /work/shared/data --threads 1

Prints reviews/s and the time (real and CPU) for the whole split (best of --rounds), batch-encoded without
special tokens (the C++ TokenizeWordPiece row) and, separately, the gzip read + parse.
"""
import argparse
import gzip
import os
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=os.environ.get("QNUM_DATA_DIR", "/work/shared/data"))
    ap.add_argument("--threads", type=int, default=1, help="tokenizers' Rayon threads (set before import)")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    os.environ["RAYON_NUM_THREADS"] = str(args.threads)
    os.environ["TOKENIZERS_PARALLELISM"] = "true" if args.threads > 1 else "false"
    from transformers import BertTokenizer

    t0 = time.perf_counter()
    with gzip.open(os.path.join(args.data, "imdb", "train.tsv.gz"), "rt", encoding="utf-8", newline="\n") as f:
        texts = [line.split("\t", 3)[3] for line in f.read().split("\n")[1:-1]]
    read_s = time.perf_counter() - t0
    tok = BertTokenizer(vocab=os.path.join(args.data, "bert", "vocab.txt"), do_lower_case=True)
    best = best_cpu = float("inf")
    for _ in range(args.rounds):
        t0, c0 = time.perf_counter(), time.process_time()
        ids = tok(texts, add_special_tokens=False)["input_ids"]
        best = min(best, time.perf_counter() - t0)
        best_cpu = min(best_cpu, time.process_time() - c0)
    tokens = sum(map(len, ids))
    mb = sum(len(t.encode()) for t in texts) / 1e6
    print(f"hf BertTokenizer threads={args.threads}: {len(texts)} reviews, {tokens} tokens, "
          f"{best:.3f} s real, {best_cpu:.3f} s CPU ({len(texts) / best:.0f} reviews/s real, "
          f"{len(texts) / best_cpu:.0f} per CPU second, {mb / best:.1f} MB/s); gunzip+split {read_s:.3f} s")


if __name__ == "__main__":
    main()
