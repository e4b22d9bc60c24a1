"""Make tests/reference/optim_refs.json: PyTorch's AdamW, SGD and clip_grad_norm_ on
late, skipped and tied parameters, and the clipping of a non-finite norm.

Run it with PyTorch installed (the test suite does not import torch):

    python -m venv /tmp/torchvenv && /tmp/torchvenv/bin/pip install torch==2.13.0 numpy
    /tmp/torchvenv/bin/python tests/reference/make_optim_refs.py

Every case stores its inputs (initial weights, the gradient of each step, None meaning
"no gradient this step") and PyTorch's weights after every step, in float64.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch

OUT = Path(__file__).with_name("optim_refs.json")
STEPS = 6
# Which steps (0-based) each of the 3 parameters has a gradient: p0 always but step 3,
# p1 only from step 3 (a layer unfrozen late), p2 never (frozen: must not move at all).
HAS_GRAD = [[s != 3 for s in range(STEPS)], [s >= 3 for s in range(STEPS)], [False] * STEPS]
SHAPES = [(2, 3), (4,), (3,)]


def schedule(seed: int):
    rng = np.random.default_rng(seed)
    init = [rng.normal(size=s) for s in SHAPES]
    grads = [
        [rng.normal(size=SHAPES[i]) if HAS_GRAD[i][s] else None for i in range(len(SHAPES))]
        for s in range(STEPS)
    ]
    return init, grads


def run(make_opt, init, grads):
    params = [torch.tensor(w, dtype=torch.float64, requires_grad=True) for w in init]
    opt = make_opt(params)
    history = []
    for step_grads in grads:
        for p, g in zip(params, step_grads, strict=True):
            p.grad = None if g is None else torch.tensor(g, dtype=torch.float64)
        opt.step()
        history.append([p.detach().numpy().tolist() for p in params])
    return history, opt


def as_list(grads):
    return [[None if g is None else g.tolist() for g in step] for step in grads]


def optimizer_cases():
    cases = []
    settings = [
        ("AdamW", {"lr": 0.05, "betas": [0.9, 0.99], "eps": 1e-8, "weight_decay": 0.1}),
        ("AdamW", {"lr": 0.01, "betas": [0.8, 0.999], "eps": 1e-6, "weight_decay": 0.0}),
        ("SGD", {"lr": 0.1, "momentum": 0.9, "dampening": 0.0, "weight_decay": 0.05}),
        ("SGD", {"lr": 0.1, "momentum": 0.5, "dampening": 0.3, "weight_decay": 0.0}),
        (
            "SGD",
            {"lr": 0.05, "momentum": 0.9, "dampening": 0.0, "weight_decay": 0.01, "nesterov": True},
        ),
        ("SGD", {"lr": 0.1, "momentum": 0.0, "dampening": 0.0, "weight_decay": 0.2}),
    ]
    for seed, (name, kwargs) in enumerate(settings):
        init, grads = schedule(seed)
        torch_kwargs = {**kwargs, "betas": tuple(kwargs["betas"])} if "betas" in kwargs else kwargs
        cls = getattr(torch.optim, name)
        history, opt = run(lambda ps, cls=cls, kw=torch_kwargs: cls(ps, **kw), init, grads)
        steps = {
            str(i): int(s["step"]) for i, s in opt.state_dict()["state"].items() if "step" in s
        }
        cases.append(
            {
                "optimizer": name,
                "kwargs": kwargs,
                "init": [w.tolist() for w in init],
                "grads": as_list(grads),
                "after_each_step": history,
                "final_steps": steps,
            }
        )
    return cases


def tied_cases():
    """The same Tensor listed twice is one parameter: torch run on the deduplicated list."""
    cases = []
    for name, kwargs in [
        ("AdamW", {"lr": 0.05, "betas": [0.9, 0.999], "eps": 1e-8, "weight_decay": 0.1}),
        ("SGD", {"lr": 0.1, "momentum": 0.9, "dampening": 0.0, "weight_decay": 0.0}),
    ]:
        rng = np.random.default_rng(100)
        init = [rng.normal(size=(3, 2)), rng.normal(size=(2,))]
        grads = [[rng.normal(size=(3, 2)), rng.normal(size=(2,))] for _ in range(3)]
        torch_kwargs = {**kwargs, "betas": tuple(kwargs["betas"])} if "betas" in kwargs else kwargs
        cls = getattr(torch.optim, name)
        history, _ = run(lambda ps, cls=cls, kw=torch_kwargs: cls(ps, **kw), init, grads)
        cases.append(
            {
                "optimizer": name,
                "kwargs": kwargs,
                "init": [w.tolist() for w in init],
                "grads": as_list(grads),
                "after_each_step": history,
            }
        )
    return cases


def clip_cases():
    cases = []
    rng = np.random.default_rng(7)
    base = [rng.normal(size=(2, 2)), rng.normal(size=(3,))]
    variants = {
        "finite_clipped": (base, 0.5),
        "finite_untouched": (base, 100.0),
        "inf_gradient": ([base[0], np.array([1.0, np.inf, -2.0])], 1.0),
        "nan_gradient": ([base[0], np.array([1.0, np.nan, -2.0])], 1.0),
        "max_norm_zero": (base, 0.0),
    }
    for label, (grads, max_norm) in variants.items():
        params = [torch.zeros(g.shape, dtype=torch.float64, requires_grad=True) for g in grads]
        for p, g in zip(params, grads, strict=True):
            p.grad = torch.tensor(g, dtype=torch.float64)
        norm = torch.nn.utils.clip_grad_norm_(params, max_norm)
        raises = False
        try:
            check = [torch.zeros(g.shape, dtype=torch.float64) for g in grads]
            for c, g in zip(check, grads, strict=True):
                c.grad = torch.tensor(g, dtype=torch.float64)
            torch.nn.utils.clip_grad_norm_(check, max_norm, error_if_nonfinite=True)
        except RuntimeError:
            raises = True
        cases.append(
            {
                "label": label,
                "max_norm": max_norm,
                "grads": [json_floats(g) for g in grads],
                "norm": json_float(float(norm)),
                "clipped": [json_floats(p.grad.numpy()) for p in params],
                "error_if_nonfinite_raises": raises,
            }
        )
    return cases


def json_float(x: float):
    return x if np.isfinite(x) else repr(x)  # 'nan', 'inf', '-inf': JSON has no NaN


def json_floats(a: np.ndarray):
    return np.vectorize(json_float, otypes=[object])(a).tolist()


def main() -> None:
    refs = {
        "torch_version": torch.__version__,
        "has_grad": HAS_GRAD,
        "optimizers": optimizer_cases(),
        "tied": tied_cases(),
        "clip_grad_norm": clip_cases(),
    }
    OUT.write_text(json.dumps(refs, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
