"""Shared code of the qnum.torch labs (lab1_ptq_qat.py, lab3_mixed_precision.py): command line,
data (IMDb from a qnum data directory, or an offline synthetic sentiment set), BERT tokenisation,
the BertForSequenceClassification to compress, and the train / evaluate loops.

Data: `--data imdb` reads $QNUM_DATA_DIR (or --data-dir) as qnum's C++ side does
(include/qnum/data/imdb.hpp): <dir>/imdb/{train,test}.tsv[.gz] (label<TAB>rating<TAB>id<TAB>text)
or an extracted aclImdb/ tree, tokenised with bert-base-uncased's WordPiece vocab at
<dir>/bert/vocab.txt. `--data synthetic` builds seeded reviews from positive / negative / neutral
word lists (label = which sentiment has the majority) with its own small vocab: no files needed.
`--data auto` (default) takes IMDb when the data directory has it, else the synthetic set.

Model: `--model DIR` loads a BertForSequenceClassification with from_pretrained (a folder with a
config.json but no weights gives that architecture with random weights); without it a small
BERT config, random init. Either way the model is fine-tuned briefly before the lab compresses it.
"""
import copy
import csv
import gzip
import os
import random
import time
from pathlib import Path

import numpy as np
import torch

BUDGETS = {
    # train / val / test examples, sequence length, fine-tune steps, batch, QAT / post-prune steps
    "tiny": dict(train=1024, val=256, test=512, seq=32, steps=150, batch=32, qat_steps=20, prune_ft_steps=20),
    "small": dict(train=4000, val=1000, test=2000, seq=128, steps=600, batch=32, qat_steps=100, prune_ft_steps=100),
    "full": dict(train=23000, val=2000, test=25000, seq=256, steps=3000, batch=32, qat_steps=500,
                 prune_ft_steps=500),
}

# A small config for `--model` absent: BERT's architecture, scaled to fit a CPU minute.
SMALL_BERT = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=128)

POSITIVE = ("good great excellent wonderful amazing brilliant superb enjoyable delightful fantastic beautiful "
            "touching charming funny moving perfect lovely best masterpiece fun").split()
NEGATIVE = ("bad awful terrible boring horrible dull poor worst weak stupid annoying ugly mediocre pointless "
            "disappointing painful silly waste mess lame").split()
NEUTRAL = ("the a movie film story plot actor actress scene director script music camera character ending "
           "this that it was is and but with of in on for to very quite really rather somewhat just also "
           "cast role part time year people watch saw seen show screen picture performance dialogue "
           "action drama comedy sequel book version minutes hour first second last").split()


def add_common_args(ap):
    ap.add_argument("--model", default=None, help="a local BertForSequenceClassification folder (from_pretrained); "
                    "default: a small BERT config, random init")
    ap.add_argument("--data", choices=["auto", "imdb", "synthetic"], default="auto",
                    help="auto: IMDb if the data directory has it, else the synthetic set")
    ap.add_argument("--data-dir", default=os.environ.get("QNUM_DATA_DIR"),
                    help="qnum data directory (default $QNUM_DATA_DIR): imdb/ and bert/vocab.txt")
    ap.add_argument("--budget", choices=sorted(BUDGETS), default="tiny")
    ap.add_argument("--output-dir", default="lab_output")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1, help="torch / qnum threads (default 1: the small default model "
                    "runs fastest on one thread; 0: torch's default)")
    ap.add_argument("--lr", type=float, default=None, help="fine-tune learning rate (default 1e-3 from a config, "
                    "5e-5 from pretrained weights)")
    return ap


def setup(args):
    """Seeds, threads, the output folder; returns the budget dict."""
    import qnum
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    if args.threads:
        torch.set_num_threads(args.threads)
        qnum.set_num_threads(args.threads)
    Path(args.output_dir).mkdir(parents=True, exist_ok=True)
    return dict(BUDGETS[args.budget])


# ---- data --------------------------------------------------------------------------------------

def synthetic_reviews(n, seed):
    """n seeded reviews: 10-24 words, 3 or 5 of them sentiment words; label 1 when positive words
    are the majority (learnable from the words alone, not from any one position)."""
    rng = random.Random(seed)
    texts, labels = [], []
    for _ in range(n):
        label = rng.randrange(2)
        k = rng.choice((3, 5))
        m = rng.randint(k // 2 + 1, k)  # words of the label's sentiment, a majority
        own, other = (POSITIVE, NEGATIVE) if label else (NEGATIVE, POSITIVE)
        words = [rng.choice(own) for _ in range(m)] + [rng.choice(other) for _ in range(k - m)]
        words += [rng.choice(NEUTRAL) for _ in range(rng.randint(10, 24) - k)]
        rng.shuffle(words)
        texts.append(" ".join(words))
        labels.append(label)
    return texts, labels


def synthetic_vocab(path):
    """A WordPiece vocab file of the synthetic set's words (BERT's special tokens first)."""
    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + sorted(set(POSITIVE + NEGATIVE + NEUTRAL))
    Path(path).write_text("\n".join(words) + "\n")
    return str(path)


def _read_tsv(path):
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8", newline="\n") as f:
        header = f.readline().rstrip("\r\n").split("\t")
        if "label" not in header or header[-1] != "text":
            raise ValueError(f"{path}: expected a header 'label<TAB>...<TAB>text', got {header}")
        li, nt = header.index("label"), len(header) - 1
        rows = []
        for line in f:
            parts = line.rstrip("\r\n").split("\t", nt)
            if len(parts) == nt + 1:
                rows.append((int(parts[li]), parts[nt]))
    return rows


def _read_aclimdb(root, split):
    rows = []
    for label, sub in ((0, "neg"), (1, "pos")):
        for p in sorted((Path(root) / split / sub).glob("*.txt")):
            rows.append((label, p.read_text(encoding="utf-8")))
    return rows


def find_imdb(data_dir):
    """(train, test) readers of the IMDb files under a qnum data directory, or None."""
    if not data_dir:
        return None
    d = Path(data_dir)
    for base in (d / "imdb", d):
        for ext in (".tsv.gz", ".tsv"):
            if (base / f"train{ext}").is_file() and (base / f"test{ext}").is_file():
                return lambda: _read_tsv(base / f"train{ext}"), lambda: _read_tsv(base / f"test{ext}")
    for root in (d / "imdb" / "aclImdb", d / "aclImdb", d / "imdb"):
        if (root / "train" / "pos").is_dir():
            return lambda: _read_aclimdb(root, "train"), lambda: _read_aclimdb(root, "test")
    return None


def _sample(rows, k, rng):
    idx = list(range(len(rows)))
    rng.shuffle(idx)
    return [rows[i] for i in idx[:k]]


def make_tokenizer(vocab_path):
    """transformers' BertTokenizer over a WordPiece vocab file (lower-cased, as bert-base-uncased).
    transformers >= 5 takes the file as `vocab` (a `vocab_file` keyword is silently ignored there:
    every word would be [UNK]); older versions as `vocab_file`."""
    from transformers import BertTokenizer
    import transformers
    if int(transformers.__version__.split(".")[0]) >= 5:
        tok = BertTokenizer(vocab=str(vocab_path), do_lower_case=True)
    else:
        tok = BertTokenizer(vocab_file=str(vocab_path), do_lower_case=True)
    lines = sum(1 for _ in open(vocab_path, encoding="utf-8"))
    if len(tok) < lines:
        raise RuntimeError(f"BertTokenizer read {len(tok)} tokens of {vocab_path}'s {lines}")
    return tok


def encode(tokenizer, rows, seq):
    texts = [t.replace("<br />", " ") for _, t in rows]
    enc = tokenizer(texts, padding="max_length", truncation=True, max_length=seq, return_tensors="pt")
    return {"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"],
            "labels": torch.tensor([lab for lab, _ in rows], dtype=torch.long)}


def load_data(args, budget):
    """(tokenizer, {"train", "val", "test"} tensor dicts, description). val is held out of train."""
    rng = random.Random(args.seed)
    imdb = find_imdb(args.data_dir) if args.data in ("auto", "imdb") else None
    if args.data == "imdb" and imdb is None:
        raise SystemExit(f"--data imdb: no IMDb under --data-dir / $QNUM_DATA_DIR ({args.data_dir!r}): expected "
                         f"<dir>/imdb/train.tsv.gz and test.tsv.gz, or an extracted aclImdb/ folder")
    n_train, n_val, n_test = budget["train"], budget["val"], budget["test"]
    if imdb is not None:
        read_train, read_test = imdb
        train_rows = _sample(read_train(), n_train + n_val, rng)
        test_rows = _sample(read_test(), n_test, rng)
        what = f"IMDb from {args.data_dir}"
    else:
        texts, labels = synthetic_reviews(n_train + n_val + n_test, args.seed + 12345)
        rows = list(zip(labels, texts))
        train_rows, test_rows = rows[:n_train + n_val], rows[n_train + n_val:]
        what = "synthetic sentiment set"
    vocab = _vocab_path(args, synthetic=imdb is None)
    tok = make_tokenizer(vocab)
    seq = budget["seq"]
    data = {"train": encode(tok, train_rows[:n_train], seq), "val": encode(tok, train_rows[n_train:], seq),
            "test": encode(tok, test_rows, seq)}
    return tok, data, f"{what}: {n_train} train / {n_val} val / {len(test_rows)} test, seq {seq}, vocab {vocab}"


def _vocab_path(args, synthetic):
    if args.model and (Path(args.model) / "vocab.txt").is_file():
        return Path(args.model) / "vocab.txt"
    if args.data_dir and (Path(args.data_dir) / "bert" / "vocab.txt").is_file() and (not synthetic or args.model):
        return Path(args.data_dir) / "bert" / "vocab.txt"
    if not synthetic:
        raise SystemExit(f"no BERT vocab: put bert-base-uncased's vocab.txt in {args.data_dir}/bert/ "
                         f"(or in the --model folder)")
    return synthetic_vocab(Path(args.output_dir) / "synthetic_vocab.txt")


# ---- model ---------------------------------------------------------------------------------------

def build_model(args, tokenizer, seq):
    """(model, description): from_pretrained(--model), or a small BERT config with random init."""
    from transformers import BertConfig, BertForSequenceClassification
    torch.manual_seed(args.seed)
    if args.model:
        d = Path(args.model)
        has_weights = any(d.glob("*.safetensors")) or any(d.glob("pytorch_model*.bin"))
        if has_weights:
            model = BertForSequenceClassification.from_pretrained(d, num_labels=2)
            what = f"{d} (pretrained weights)"
        else:
            cfg = BertConfig.from_pretrained(d, num_labels=2)
            model = BertForSequenceClassification(cfg)
            what = f"{d} (config only: random weights)"
        if model.config.vocab_size < len(tokenizer):
            raise SystemExit(f"--model {d}: vocab_size {model.config.vocab_size} < the tokenizer's {len(tokenizer)}")
        if model.config.max_position_embeddings < seq:
            raise SystemExit(f"--model {d}: max_position_embeddings {model.config.max_position_embeddings} < seq {seq}")
        pretrained = has_weights
    else:
        cfg = BertConfig(vocab_size=len(tokenizer), max_position_embeddings=max(seq, 64), num_labels=2, **SMALL_BERT)
        model = BertForSequenceClassification(cfg)
        what = "small BERT config " + ", ".join(f"{k}={v}" for k, v in SMALL_BERT.items()) + " (random init)"
        pretrained = False
    if args.lr is None:
        args.lr = 5e-5 if pretrained else 1e-3
    return model, what


def linear_names(model):
    return [n for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)]


# ---- train / evaluate ----------------------------------------------------------------------------

def batches(split, batch, generator=None):
    n = split["labels"].shape[0]
    order = torch.randperm(n, generator=generator) if generator is not None else torch.arange(n)
    for i in range(0, n, batch):
        idx = order[i:i + batch]
        yield {k: v[idx] for k, v in split.items()}


def train(model, split, steps, batch, lr, seed=0):
    """`steps` AdamW steps (linear warm-up over the first 10%, then linear decay) on shuffled
    batches of `split`; returns the mean loss of the last 20 steps. Quantized and pruned models
    train the same way: QAT through qnum.torch's straight-through gradients, masks kept."""
    if steps <= 0:
        return float("nan")
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.01)
    warm = max(1, steps // 10)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min((s + 1) / warm, max(0.0, (steps - s) / (steps - warm + 1))))
    g = torch.Generator().manual_seed(seed)
    losses, step = [], 0
    while step < steps:
        for b in batches(split, batch, g):
            loss = model(**b).loss
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            sched.step()
            losses.append(loss.detach().item())
            step += 1
            if step == steps:
                break
    model.eval()
    return float(np.mean(losses[-20:]))


@torch.no_grad()
def evaluate(model, split, batch=128):
    model.eval()
    correct = 0
    for b in batches(split, batch):
        logits = model(input_ids=b["input_ids"], attention_mask=b["attention_mask"]).logits
        correct += int((logits.argmax(-1) == b["labels"]).sum())
    return correct / split["labels"].shape[0]


def fine_tune(args, budget, data):
    """Builds the model for load_data's result `data` (tokenizer, splits, description) and
    fine-tunes it in float32; returns (model, fp32 test accuracy, description lines)."""
    tok, data_, what_data = data
    model, what_model = build_model(args, tok, budget["seq"])
    t = time.perf_counter()
    loss = train(model, data_["train"], budget["steps"], budget["batch"], args.lr, seed=args.seed)
    seconds = time.perf_counter() - t
    acc = evaluate(model, data_["test"])
    lines = [f"data: {what_data}", f"model: {what_model}",
             f"fine-tune: {budget['steps']} steps, batch {budget['batch']}, lr {args.lr:g}: loss {loss:.3f}, "
             f"fp32 test accuracy {acc:.4f} ({seconds:.1f} s)"]
    return model, acc, lines


# ---- configs, output ----------------------------------------------------------------------------

def prepare(args):
    """The labs' common start: settings, data, the fine-tuned fp32 model (its log printed).
    Returns (budget, start time, (model, fp32 accuracy, splits), plot title)."""
    budget = setup(args)
    start = time.perf_counter()
    data = load_data(args, budget)
    model, fp32_acc, lines = fine_tune(args, budget, data)
    for line in lines:
        print(line, flush=True)
    return budget, start, (model, fp32_acc, data[1]), lines[0].split(":")[1].strip()


def integer_config(width):
    """MASE's integer config for a `width`-bit Linear: fixed point with frac_width = width // 2 for
    data_in (activations up to ±2^(w/2-1)), width - 1 for the weight (|W| < 1) and width // 2 for
    the bias: MASE's Lab 1 keys (data_in_width / _frac_width, weight_..., bias_...)."""
    return {"name": "integer", "data_in_width": width, "data_in_frac_width": width // 2,
            "weight_width": width, "weight_frac_width": width - 1,
            "bias_width": width, "bias_frac_width": width // 2}


def linear_pass_args(width_of):
    """A by-name quantize config: each Linear name -> its width's integer config (None: float)."""
    cfg = {"by": "name", "default": {"config": {"name": None}}}
    for name, w in width_of.items():
        cfg[name] = {"config": integer_config(w) if w else {"name": None}}
    return cfg


def write_csv(path, rows, columns):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=columns, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow({k: ("" if r.get(k) is None else (f"{r[k]:.6g}" if isinstance(r[k], float) else r[k]))
                        for k in columns})


def print_table(rows, columns):
    cells = [[("" if r.get(c) is None else (f"{r[c]:.4f}" if isinstance(r[c], float) else str(r[c])))
              for c in columns] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) if cells else len(c) for i, c in enumerate(columns)]
    print("  ".join(c.ljust(w) for c, w in zip(columns, widths)))
    print("  ".join("-" * w for w in widths))
    for row in cells:
        print("  ".join(v.ljust(w) for v, w in zip(row, widths)))


def pyplot():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def clone(model):
    return copy.deepcopy(model)


__all__ = ["BUDGETS", "add_common_args", "setup", "load_data", "fine_tune", "train", "evaluate", "integer_config",
           "linear_pass_args", "linear_names", "write_csv", "print_table", "pyplot", "clone"]
