#!/usr/bin/env python3
"""The layer order of docs/architecture.md, checked against every include.

The order is read from the document itself: the code block of its "## Layers" section, whose
rows start with a layer and its folder (`core      include/qnum/core/`, `          apps/cli/`).
A layer may include its own files and the layers above it; an include of a layer below it
fails the test, naming the file, the line and both layers. Checked: every file under
include/qnum/ (library layers, by `#include "qnum/<layer>/..."`) and under apps/ (the app
layers, by `#include "<folder>/..."`; the library is above all of them, and no library file
may include from apps/). A folder of include/qnum/ or apps/ the document does not name fails
too, so the order cannot lag behind the tree.

tests/layers/allowed.txt lists the includes against the order that are known and not yet
fixed, one `FILE -> INCLUDE` a line: they are reported, not failed. The list can only shrink:
an entry that no longer matches such an include fails the test (delete it).

usage: check_layers.py [ROOT]   (ROOT: the checkout, default: two folders up)
       check_layers.py --self-test   (the check fails on a tree with an include against the
                                      order, with a stale allow-list entry and with an unnamed
                                      layer folder, and passes on the same tree without them)
"""
import pathlib
import re
import sys

root = pathlib.Path(__file__).resolve().parents[2]


def layer_order():
    """(library layers, app folders), each in the document's order."""
    doc = root / "docs" / "architecture.md"
    text = doc.read_text(encoding="utf-8")
    section = text.split("\n## Layers\n", 1)
    if len(section) != 2:
        sys.exit(f"{doc}: no '## Layers' section")
    block = section[1].split("```", 2)
    if len(block) != 3:
        sys.exit(f"{doc}: the Layers section has no code block")
    lib, apps = [], []
    for line in block[1].splitlines():
        m = re.match(r"^(\w+)\s+include/qnum/(\w+)/(\s|$)", line)
        if m:
            if m.group(1) != m.group(2):
                sys.exit(f"{doc}: layer '{m.group(1)}' names the folder include/qnum/{m.group(2)}/")
            lib.append(m.group(2))
            continue
        m = re.match(r"^(?:\w+)?\s+apps/(\w+)/(\s|$)", line)
        if m:
            apps.append(m.group(1))
    if not lib or not apps:
        sys.exit(f"{doc}: the Layers block names no include/qnum/<layer>/ or no apps/<folder>/ rows")
    return lib, apps


def main():
    lib, apps = layer_order()
    rank = {name: i for i, name in enumerate(lib)}
    app_rank = {name: i for i, name in enumerate(apps)}
    problems = []  # (file, include or None, message)
    for folder in sorted(p.name for p in (root / "include" / "qnum").iterdir() if p.is_dir()):
        if folder not in rank:
            problems.append((None, None, f"include/qnum/{folder}/: a layer docs/architecture.md's Layers block does not name"))
    for folder in sorted(p.name for p in (root / "apps").iterdir() if p.is_dir()):
        if folder not in app_rank:
            problems.append((None, None, f"apps/{folder}/: a folder docs/architecture.md's Layers block does not name"))
    include = re.compile(r'^\s*#\s*include\s*"([^"]+)"')
    for path in sorted((root / "include" / "qnum").rglob("*.hpp")):
        rel = path.relative_to(root)
        parts = rel.parts  # include, qnum, <layer>, ...
        if len(parts) < 4:
            continue  # qnum.hpp, the umbrella, is above everything
        own = parts[2]
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            m = include.match(line)
            if not m:
                continue
            target = m.group(1).split("/")
            if target[0] == "qnum" and len(target) == 2:
                problems.append((rel, m.group(1), f"{rel}:{n}: includes the umbrella header {m.group(1)} (layer {own})"))
            elif target[0] == "qnum" and target[1] in rank and own in rank and rank[target[1]] > rank[own]:
                problems.append((rel, m.group(1), f"{rel}:{n}: layer {own} includes {m.group(1)} of layer "
                                 f"{target[1]}, which docs/architecture.md puts below it"))
            elif target[0] in app_rank:
                problems.append((rel, m.group(1), f"{rel}:{n}: the library (layer {own}) includes {m.group(1)} from apps/"))
    for path in sorted((root / "apps").rglob("*")):
        if path.suffix not in (".hpp", ".cpp"):
            continue
        rel = path.relative_to(root)
        own = rel.parts[1]
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            m = include.match(line)
            if not m:
                continue
            target = m.group(1).split("/")
            if len(target) > 1 and target[0] in app_rank and own in app_rank and app_rank[target[0]] > app_rank[own]:
                problems.append((rel, m.group(1), f"{rel}:{n}: apps/{own} includes {m.group(1)} of apps/{target[0]}, "
                                 f"which docs/architecture.md puts below it"))
    allowed_file = root / "tests" / "layers" / "allowed.txt"
    allowed = set()
    if allowed_file.exists():
        for n, line in enumerate(allowed_file.read_text(encoding="utf-8").splitlines(), 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            left, sep, right = line.partition(" -> ")
            if not sep:
                sys.exit(f"{allowed_file}:{n}: not 'FILE -> INCLUDE': {line}")
            allowed.add((left.strip(), right.strip()))
    failed, known = [], []
    for file, inc, message in problems:
        (known if file is not None and (str(file), inc) in allowed else failed).append(message)
    seen = {(str(f), i) for f, i, _ in problems if f is not None}
    for file, inc in sorted(allowed - seen):
        failed.append(f"tests/layers/allowed.txt: '{file} -> {inc}' is no longer against the order: delete the entry")
    for message in known:
        print("known (tests/layers/allowed.txt):", message)
    problems = failed
    for p in problems:
        print(p)
    order = " < ".join(lib) + " < apps: " + " < ".join(apps)
    if problems:
        print(f"{len(problems)} include(s) against the layer order ({order})")
        return 1
    note = f" but the {len(known)} known one(s) of tests/layers/allowed.txt" if known else ""
    print(f"every include follows the layer order{note}: {order}")
    return 0


def self_test():
    import contextlib
    import io
    import tempfile
    global root
    saved = root
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        t = pathlib.Path(tmp)
        (t / "docs").mkdir()
        (t / "docs" / "architecture.md").write_text(
            "# x\n\n## Layers\n\n```\ncore      include/qnum/core/  a\n"
            "tensor    include/qnum/tensor/  b\napps      apps/\n          apps/common/  c\n"
            "          apps/cli/  d\n```\n", encoding="utf-8")
        for d in ("include/qnum/core", "include/qnum/tensor", "apps/common", "apps/cli", "tests/layers"):
            (t / d).mkdir(parents=True)
        (t / "include/qnum/core/a.hpp").write_text("#pragma once\n", encoding="utf-8")
        (t / "include/qnum/tensor/b.hpp").write_text('#include "qnum/core/a.hpp"\n', encoding="utf-8")
        (t / "apps/common/c.hpp").write_text('#include "qnum/tensor/b.hpp"\n', encoding="utf-8")
        (t / "apps/cli/d.cpp").write_text('#include "common/c.hpp"\n', encoding="utf-8")

        def run():
            global root
            root = t
            with contextlib.redirect_stdout(io.StringIO()):
                return main()

        results.append(("a tree in order passes", run() == 0))
        bad = t / "include/qnum/core/a.hpp"
        bad.write_text('#include "qnum/tensor/b.hpp"\n', encoding="utf-8")
        results.append(("core including tensor fails", run() == 1))
        allowed = t / "tests/layers/allowed.txt"
        allowed.write_text("include/qnum/core/a.hpp -> qnum/tensor/b.hpp\n", encoding="utf-8")
        results.append(("an allowed include passes", run() == 0))
        bad.write_text("#pragma once\n", encoding="utf-8")
        results.append(("a stale allow-list entry fails", run() == 1))
        allowed.unlink()
        (t / "apps/common/c.hpp").write_text('#include "cli/d.hpp"\n', encoding="utf-8")
        results.append(("apps/common including apps/cli fails", run() == 1))
        (t / "apps/common/c.hpp").write_text("#pragma once\n", encoding="utf-8")
        (t / "include/qnum/nn").mkdir()
        results.append(("a layer folder the document does not name fails", run() == 1))
    root = saved
    for name, ok in results:
        print(("ok:     " if ok else "FAILED: ") + name)
    return 0 if all(ok for _, ok in results) else 1


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--self-test":
        sys.exit(self_test())
    if len(sys.argv) > 1:
        root = pathlib.Path(sys.argv[1])
    sys.exit(main())
