"""Writes adam_steps.txt (torch.optim.Adam and AdamW) or, with `sgd`, sgd_steps.txt
(torch.optim.SGD: plain, momentum with dampening, Nesterov; weight decay): CPU, float32,
single-tensor path, three steps on 37 parameters (two 16-lane vectors and a tail), as hex
floats. Development tool only (pip install torch); the test reads the committed text files.

    python3 tests/data/torch_optim/make_fixture.py > tests/data/torch_optim/adam_steps.txt
    python3 tests/data/torch_optim/make_fixture.py sgd > tests/data/torch_optim/sgd_steps.txt
"""
import sys

import torch

torch.manual_seed(2026)
N, STEPS = 37, 3
LR, BETAS, EPS, WD = 0.01, (0.9, 0.999), 1e-8, 0.1


def hexes(t):
    return " ".join(float(x).hex() for x in t.tolist())


p0 = torch.randn(N)
grads = [torch.randn(N) * 10.0 ** -k for k in range(STEPS)]
print(f"# torch {torch.__version__}, cpu capability {torch.backends.cpu.get_cpu_capability()}")
if sys.argv[1:] == ["sgd"]:
    SGD_CASES = {"plain": dict(lr=0.1), "momentum": dict(lr=0.1, momentum=0.9, dampening=0.1, weight_decay=0.01),
                 "nesterov": dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01)}
    print(f"# n {N} steps {STEPS} cases {SGD_CASES}")
    print("init", hexes(p0))
    for k, g in enumerate(grads):
        print(f"grad{k}", hexes(g))
    for name, kw in SGD_CASES.items():
        p = p0.clone().requires_grad_(True)
        opt = torch.optim.SGD([p], foreach=False, **kw)
        for k, g in enumerate(grads):
            p.grad = g.clone()
            opt.step()
            print(f"{name}{k}.param", hexes(p.detach()))
            if "momentum" in kw:
                print(f"{name}{k}.momentum_buffer", hexes(opt.state[p]["momentum_buffer"]))
    sys.exit()
print(f"# n {N} steps {STEPS} lr {LR} betas {BETAS[0]} {BETAS[1]} eps {EPS} weight_decay {WD}")
print("init", hexes(p0))
for k, g in enumerate(grads):
    print(f"grad{k}", hexes(g))
for name, cls in (("adam", torch.optim.Adam), ("adamw", torch.optim.AdamW)):
    p = p0.clone().requires_grad_(True)
    opt = cls([p], lr=LR, betas=BETAS, eps=EPS, weight_decay=WD, foreach=False)
    for k, g in enumerate(grads):
        p.grad = g.clone()
        opt.step()
        st = opt.state[p]
        print(f"{name}{k}.param", hexes(p.detach()))
        print(f"{name}{k}.exp_avg", hexes(st["exp_avg"]))
        print(f"{name}{k}.exp_avg_sq", hexes(st["exp_avg_sq"]))
