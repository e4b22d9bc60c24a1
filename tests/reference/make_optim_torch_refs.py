"""Generate tests/reference/optim_torch_refs.json: torch.optim's SGD and AdamW trajectories,
the independent reference of tests/library/test_optim_reference.py.

The tests never import torch (its wheel is large, and a skipped test checks nothing); they
read the values written here. Regenerate with a throw-away venv:

    python3 -m venv /tmp/torchvenv && /tmp/torchvenv/bin/pip install torch==2.13.0 numpy
    /tmp/torchvenv/bin/python tests/reference/make_optim_torch_refs.py

Every case: float64 parameters, a fixed gradient sequence spanning 1e-9 to 1e3 in magnitude
(both signs, and 0), several steps; the file records the parameters after every step.
Gradients that small make ``eps`` dominate sqrt(v̂) in AdamW, so where eps is added (outside
the square root, after bias correction) is pinned; gradients of 1e3 pin the rest.

``shaped``: the same optimizers over parameters of every shape together — a 0-d scalar
(PyTorch's optimizers take one), (1,), (3, 1, 2) and an empty (0,) — in one optimizer, the
scalar's gradient left out (None) at one step. ``clip``: ``clip_grad_norm_`` over the same
shapes. A 0-d value is written as a bare JSON number.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch

OUT = Path(__file__).with_name("optim_torch_refs.json")
STEPS = 6
MAGNITUDES = [1e-9, 3e-7, 1e-5, 2e-3, 0.1, 1.0, 7.0, 1e3]


def gradients(seed: int, n: int) -> list[list[float]]:
    """STEPS gradients of n elements, magnitudes drawn from MAGNITUDES, random signs."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(STEPS):
        mags = rng.choice(MAGNITUDES, size=n) * rng.uniform(0.5, 2.0, size=n)
        signs = rng.choice([-1.0, 1.0], size=n)
        g = mags * signs
        g[rng.integers(0, n)] = 0.0 if rng.uniform() < 0.3 else g[0]
        out.append(g.tolist())
    return out


def run(make, p0: list[float], grads: list[list[float]]) -> list[list[float]]:
    p = torch.tensor(p0, dtype=torch.float64, requires_grad=True)
    opt = make([p])
    trajectory = []
    for g in grads:
        p.grad = torch.tensor(g, dtype=torch.float64)
        opt.step()
        trajectory.append(p.detach().clone().tolist())
    return trajectory


TORCH = {"SGD": torch.optim.SGD, "AdamW": torch.optim.AdamW}
CASES = [
    ("sgd_plain", "SGD", {"lr": 0.1}),
    ("sgd_momentum", "SGD", {"lr": 0.05, "momentum": 0.9}),
    ("sgd_weight_decay", "SGD", {"lr": 0.1, "weight_decay": 0.01}),
    ("sgd_momentum_weight_decay", "SGD", {"lr": 0.01, "momentum": 0.8, "weight_decay": 0.1}),
    ("adamw_defaults", "AdamW", {}),
    ("adamw_lr_wd", "AdamW", {"lr": 0.01, "weight_decay": 0.1}),
    ("adamw_betas", "AdamW", {"lr": 0.003, "betas": [0.5, 0.9], "weight_decay": 0.0}),
    ("adamw_large_eps", "AdamW", {"lr": 0.1, "eps": 1e-3, "weight_decay": 0.05}),
    ("adamw_tiny_eps", "AdamW", {"lr": 0.1, "eps": 1e-12, "weight_decay": 0.0}),
]


SHAPES = [(), (1,), (3, 1, 2), (0,)]
SHAPED = [
    ("sgd_plain", "SGD", {"lr": 0.1}),
    ("sgd_momentum_weight_decay", "SGD", {"lr": 0.01, "momentum": 0.8, "weight_decay": 0.1}),
    ("sgd_nesterov", "SGD", {"lr": 0.05, "momentum": 0.9, "nesterov": True}),
    ("adamw_defaults", "AdamW", {}),
    ("adamw_lr_wd", "AdamW", {"lr": 0.01, "weight_decay": 0.1}),
]
SKIP = (0, 2)  # (parameter, step): the 0-d parameter has no gradient at step 3


def shaped_case(i: int, name: str, cls: str, kwargs: dict) -> dict:
    """One optimizer over a parameter of each shape in SHAPES."""
    rng = np.random.default_rng(200 + i)
    p0 = [rng.normal(size=s) for s in SHAPES]
    grads = [[None if (k, step) == SKIP else
              rng.choice(MAGNITUDES, size=s) * rng.choice([-1.0, 1.0], size=s)
              for k, s in enumerate(SHAPES)] for step in range(STEPS)]
    params = [torch.tensor(p, dtype=torch.float64, requires_grad=True) for p in p0]
    torch_kwargs = {k: tuple(v) if k == "betas" else v for k, v in kwargs.items()}
    opt = TORCH[cls](params, **torch_kwargs, foreach=False)
    expected = []
    for step_grads in grads:
        for p, g in zip(params, step_grads, strict=True):
            p.grad = None if g is None else torch.tensor(g, dtype=torch.float64)
        opt.step()
        expected.append([p.detach().clone().tolist() for p in params])
    as_json = [[None if g is None else g.tolist() for g in step] for step in grads]
    return {"name": name, "optimizer": cls, "kwargs": kwargs,
            "shapes": [list(s) for s in SHAPES], "p0": [p.tolist() for p in p0],
            "grads": as_json, "expected": expected}


def clip_case(max_norm: float) -> dict:
    """clip_grad_norm_ over a gradient of each shape in SHAPES."""
    rng = np.random.default_rng(300)
    grads = [rng.normal(size=s) * 3 for s in SHAPES]
    params = [torch.zeros(s, dtype=torch.float64, requires_grad=True) for s in SHAPES]
    for p, g in zip(params, grads, strict=True):
        p.grad = torch.tensor(g, dtype=torch.float64)
    norm = torch.nn.utils.clip_grad_norm_(params, max_norm, foreach=False)
    return {"max_norm": max_norm, "shapes": [list(s) for s in SHAPES],
            "grads": [g.tolist() for g in grads], "norm": float(norm),
            "clipped": [p.grad.tolist() for p in params]}


def main() -> None:
    cases = []
    for i, (name, cls, kwargs) in enumerate(CASES):
        rng = np.random.default_rng(100 + i)
        p0 = rng.normal(size=8).tolist()
        grads = gradients(i, 8)
        torch_kwargs = {k: tuple(v) if k == "betas" else v for k, v in kwargs.items()}

        def make(params, c=TORCH[cls], kw=torch_kwargs):
            return c(params, **kw, foreach=False)

        cases.append({"name": name, "optimizer": cls, "kwargs": kwargs, "p0": p0,
                      "grads": grads, "expected": run(make, p0, grads)})
    shaped = [shaped_case(i, *case) for i, case in enumerate(SHAPED)]
    clip = [clip_case(max_norm) for max_norm in (1.0, 1e3)]
    OUT.write_text(json.dumps({"generator": "tests/reference/make_optim_torch_refs.py",
                               "torch": torch.__version__, "dtype": "float64",
                               "cases": cases, "shaped": shaped, "clip": clip},
                              indent=1) + "\n")
    print(f"wrote {len(cases)} cases, {len(shaped)} shaped, {len(clip)} clip to {OUT}")


if __name__ == "__main__":
    main()
