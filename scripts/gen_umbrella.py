#!/usr/bin/env python3
"""Writes include/qnum/qnum.hpp, the umbrella header, from the folders of include/qnum/.

Every public header is included once: the files directly in a layer folder
(include/qnum/<layer>/*.hpp), the layers in docs/architecture.md's order (the order
tests/layers/check_layers.py checks), the files of a layer by name. A subfolder is the inside
of the header of its name (kernel/gemm/ of kernel/gemm.hpp), which includes what it needs. A
header that needs an optional library says so in its opening comment ("the build defines
QNUM_HAVE_SQLITE"), and is included under that macro.

usage: gen_umbrella.py [--check]   (--check: exit 1, saying what differs, if the committed
                                    header is not what this script writes; CTest layers.umbrella)
"""
import pathlib
import re
import sys

root = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(root / "tests" / "layers"))
import check_layers  # noqa: E402  (the layer order, read from docs/architecture.md)

include = root / "include" / "qnum"
umbrella = include / "qnum.hpp"


def public_headers():
    """[(layer, [header paths relative to include/])] in layer order; exits on a folder problem."""
    layers, _ = check_layers.layer_order()
    problems, out = [], []
    folders = sorted(p.name for p in include.iterdir() if p.is_dir())
    for f in folders:
        if f not in layers:
            problems.append(f"include/qnum/{f}/ is not a layer of docs/architecture.md")
    for layer in layers:
        d = include / layer
        if not d.is_dir():
            continue  # a layer the document names ahead of its folder
        for sub in sorted(p for p in d.iterdir() if p.is_dir()):
            if not (d / (sub.name + ".hpp")).exists():
                problems.append(f"include/qnum/{layer}/{sub.name}/ has no header of its name "
                                f"(include/qnum/{layer}/{sub.name}.hpp) to include it")
        out.append((layer, sorted(p.relative_to(root / "include").as_posix() for p in d.glob("*.hpp"))))
    if problems:
        sys.exit("\n".join(problems))
    return out


def guard_of(path):
    head = "\n".join((root / "include" / path).read_text(encoding="utf-8").splitlines()[:30])
    m = re.search(r"the build defines (QNUM_HAVE_[A-Z0-9_]+)", head)
    return m.group(1) if m else None


def render():
    lines = [
        "// Umbrella header: every public header of qnum, once (written by scripts/gen_umbrella.py",
        "// from the folders of include/qnum/, in docs/architecture.md's layer order; CTest",
        "// layers.umbrella checks that it is current). Headers that need an optional library are",
        "// included when the build found it.",
        "#pragma once",
    ]
    for layer, headers in public_headers():
        if not headers:
            continue
        lines.append("")
        lines.append(f"// {layer}")
        for h in headers:
            g = guard_of(h)
            if g:
                lines += [f"#if defined({g})", f'#include "{h}"', "#endif"]
            else:
                lines.append(f'#include "{h}"')
    return "\n".join(lines) + "\n"


def main():
    text = render()
    if len(sys.argv) > 1 and sys.argv[1] == "--check":
        have = umbrella.read_text(encoding="utf-8") if umbrella.exists() else ""
        if have == text:
            n = sum(1 for l in text.splitlines() if l.startswith("#include"))
            print(f"include/qnum/qnum.hpp includes each of the {n} public headers once")
            return 0
        want = set(l for l in text.splitlines() if l.startswith("#include"))
        got = [l for l in have.splitlines() if l.startswith("#include")]
        for l in sorted(want - set(got)):
            print("missing:", l)
        for l in sorted(set(got) - want):
            print("not a public header:", l)
        for l in sorted(set(l for l in got if got.count(l) > 1)):
            print("included more than once:", l)
        print("include/qnum/qnum.hpp is not what scripts/gen_umbrella.py writes: run it and commit the result")
        return 1
    umbrella.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
