#!/usr/bin/env bash
# Copies what the lab-4 study needs on the device machine (which reaches nothing outside, and
# to which ../shared does not travel) into a folder inside the repository that the device call
# carries (default build-dev/data, ignored by git):
#   vocab.txt     bert-base-uncased's WordPiece vocabulary, from $QNUM_DATA_DIR/bert/
#   reviews.tsv   64 IMDb test reviews (label, rating, id, text; 32 negative, 32 positive,
#                 alternating) from $QNUM_DATA_DIR/imdb/test.tsv.gz
#   SOURCE        where both came from ("imdb" or "synthetic")
# Without those files it writes a synthetic stand-in (a small vocabulary and made-up reviews)
# and says so in SOURCE, so the device script still runs end to end. Well under 1 MiB.
# Usage: bash cuda/prepare_device_data.sh [DEST] [N]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dest=${1:-$root/build-dev/data}
n=${2:-64}
data=${QNUM_DATA_DIR:-$root/../shared/data}
mkdir -p "$dest"
python3 - "$data" "$dest" "$n" <<'PY'
import gzip, os, random, sys
data, dest, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
vocab, tsv = os.path.join(data, "bert", "vocab.txt"), os.path.join(data, "imdb", "test.tsv.gz")
MAX_CHARS = 4000  # a review longer than this is cut (the study keeps 128 tokens, ~600 characters)
if os.path.isfile(vocab) and os.path.isfile(tsv):
    with open(vocab, "rb") as f, open(os.path.join(dest, "vocab.txt"), "wb") as g:
        g.write(f.read())
    rows = {0: [], 1: []}
    with gzip.open(tsv, "rt", encoding="utf-8") as f:
        header = f.readline().rstrip("\n").split("\t")
        assert header[0] == "label" and header[-1] == "text", f"{tsv}: unexpected header {header}"
        for line in f:
            parts = line.rstrip("\n").split("\t", len(header) - 1)
            label = int(parts[0])
            if len(rows[label]) < n // 2 + 1:
                rows[label].append(parts)
            if all(len(r) > n // 2 for r in rows.values()):
                break
    picked = [rows[i % 2][i // 2] for i in range(n)]
    source = f"imdb: {tsv} (first {n // 2} negative and {n - n // 2} positive test reviews, alternating)"
else:
    rng = random.Random(0)
    good = "great wonderful superb moving brilliant funny charming".split()
    bad = "awful boring dull terrible weak tedious clumsy".split()
    common = "the film movie plot acting story was and a very with this is but its cast".split()
    words = sorted(set(good + bad + common))
    with open(os.path.join(dest, "vocab.txt"), "w") as g:
        g.write("\n".join(["[PAD]"] + [f"[unused{i}]" for i in range(99)] + ["[UNK]", "[CLS]", "[SEP]", "[MASK]"]
                          + list(".,!") + words) + "\n")
    picked = []
    for i in range(n):
        label = i % 2
        text = " ".join(rng.choice((good if label else bad) + common * 2) for _ in range(rng.randint(40, 160)))
        picked.append([str(label), "0", str(i), text + "."])
    header = ["label", "rating", "id", "text"]
    source = f"synthetic: {vocab} or {tsv} missing; made-up reviews over a {len(words)}-word vocabulary"
with open(os.path.join(dest, "reviews.tsv"), "w", encoding="utf-8") as g:
    g.write("\t".join(header) + "\n")
    for p in picked:
        p[-1] = p[-1][:MAX_CHARS]
        g.write("\t".join(p) + "\n")
with open(os.path.join(dest, "SOURCE"), "w") as g:
    g.write(source + "\n")
print(f"prepare_device_data: {dest}: vocab.txt, reviews.tsv ({n} reviews); {source}")
PY
