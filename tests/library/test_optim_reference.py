"""SGD and AdamW against an independent reference, ``torch.optim``.

The values come from tests/reference/optim_torch_refs.json, written by
tests/reference/make_optim_torch_refs.py with PyTorch 2.13 in float64; these tests never
import torch. Gradients span 1e-9 to 1e3, so where AdamW adds ``eps`` (outside the square
root, after bias correction) and how weight decay is coupled (SGD: into the gradient;
AdamW: decoupled, scaled by lr) both change the trajectory by far more than the tolerance.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from paths import REFERENCE
from rounding import assert_rounding_close

from glassllm import Tensor
from glassllm.optim import SGD, AdamW, clip_grad_norm

REFS = json.loads((REFERENCE / "optim_torch_refs.json").read_text())
CASES = {case["name"]: case for case in REFS["cases"]}
OPTIMIZERS = {"SGD": SGD, "AdamW": AdamW}


def trajectory(case: dict) -> list[np.ndarray]:
    p = Tensor(np.array(case["p0"]), requires_grad=True)
    kwargs = {k: tuple(v) if k == "betas" else v for k, v in case["kwargs"].items()}
    if case["optimizer"] == "AdamW":
        kwargs.setdefault("weight_decay", 0.01)   # torch.optim.AdamW's default too
    opt = OPTIMIZERS[case["optimizer"]]([p], **kwargs)
    out = []
    for g in case["grads"]:
        p.grad = np.array(g)
        opt.step()
        out.append(p.data.copy())
    return out


def test_the_reference_spans_the_gradient_magnitudes_it_claims():
    mags = np.abs(np.concatenate([np.ravel(c["grads"]) for c in REFS["cases"]]))
    mags = mags[mags > 0]
    assert mags.min() < 1e-8 and mags.max() > 1e3
    assert REFS["dtype"] == "float64" and len(REFS["cases"]) == 9
    assert {c["optimizer"] for c in REFS["cases"]} == {"SGD", "AdamW"}


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_step_matches_torch_optim(name):
    case = CASES[name]
    ours = trajectory(case)
    assert len(ours) == len(case["expected"]) >= 5
    for step, (got, want) in enumerate(zip(ours, case["expected"], strict=True), 1):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15,
                                   err_msg=f"{name}, step {step}")


def test_eps_inside_the_square_root_would_be_caught():
    """The reference tells eps placement apart: the tolerance is far below the difference."""
    case = CASES["adamw_large_eps"]
    p = np.array(case["p0"])
    g = np.array(case["grads"][0])
    kw = case["kwargs"]
    lr, eps, wd = kw["lr"], kw["eps"], kw["weight_decay"]
    m, v = 0.1 * g, 0.001 * g * g
    inside = p * (1 - lr * wd) - lr * (m / 0.1) / np.sqrt(v / 0.001 + eps)
    assert np.max(np.abs(inside - case["expected"][0])) > 1e-6
    np.testing.assert_allclose(trajectory(case)[0], case["expected"][0], rtol=1e-12)


@pytest.mark.parametrize("lr", [1e-310, 1e-200, 1e-120, 1e-99])
def test_a_tiny_learning_rate_steps_in_pytorchs_order_without_nan(lr):
    """QA: the folded update (m / (denom / step_size)) overflowed 1 / step_size to inf for a
    subnormal lr, and 0 · inf gave NaN where v = 0; torch.optim.AdamW answers [1.0, 1.0].
    Below the fold's range the update is PyTorch's: step_size · m / (sqrt(v)/√bc2 + eps)."""
    import warnings

    from glassllm import Tensor
    from glassllm.optim import AdamW
    p = Tensor(np.array([1.0, 1.0, -3.0]), requires_grad=True)
    opt = AdamW([p], lr=lr, weight_decay=0.0)
    g = np.array([0.0, 1.0, 1e-3])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(3):
            p.grad = g.copy()
            opt.step()
    m = v = np.zeros(3)
    x = np.array([1.0, 1.0, -3.0])
    for t in (1, 2, 3):                       # PyTorch's AdamW, written out
        m = 0.9 * m + 0.1 * g
        v = 0.999 * v + 0.001 * g * g
        denom = np.sqrt(v) / np.sqrt(1 - 0.999**t) + 1e-8
        x = x - lr / (1 - 0.9**t) * (m / denom)
    assert np.all(np.isfinite(p.data))
    np.testing.assert_allclose(p.data, x, rtol=1e-15, atol=0)


# -- parameters of any shape, 0-d included ------------------------------------------------------

SHAPED = {case["name"]: case for case in REFS["shaped"]}


@pytest.mark.parametrize("name", sorted(SHAPED))
def test_every_shape_in_one_optimizer_matches_torch_optim(name):
    """A 0-d scalar (PyTorch's optimizers take one: SGD and AdamW failed on it here), (1,),
    (3, 1, 2) and an empty (0,) parameter in one optimizer, the scalar with no gradient at
    step 3 (skipped: no step count, no moment update, no decay).

    Tolerance: each step is at most 16 elementwise roundings per entry (AdamW: the moments,
    the square root, the bias corrections, eps, the division, the decay), compounded over
    the steps, on terms no larger than |p| + lr·(1 + 10³) (a gradient of 10³ through SGD's
    momentum; AdamW's update is at most lr/(1 − β1ᵗ)·√(1 − β2ᵗ)-scaled, smaller)."""
    case = SHAPED[name]
    params = [Tensor(np.array(p0), requires_grad=True) for p0 in case["p0"]]
    assert [list(p.shape) for p in params] == case["shapes"] and params[0].shape == ()
    kwargs = {k: tuple(v) if k == "betas" else v for k, v in case["kwargs"].items()}
    if case["optimizer"] == "AdamW":
        kwargs.setdefault("weight_decay", 0.01)
    opt = OPTIMIZERS[case["optimizer"]](params, **kwargs)
    lr = kwargs.get("lr", 1e-3)
    for step, (grads, want) in enumerate(zip(case["grads"], case["expected"], strict=True), 1):
        for p, g in zip(params, grads, strict=True):
            p.grad = None if g is None else np.array(g)
        opt.step()
        for k, (p, w) in enumerate(zip(params, want, strict=True)):
            assert isinstance(p.data, np.ndarray) and p.data.shape == np.shape(w)
            scale = np.max(np.abs(w), initial=0.0) + lr * 1001 * step
            assert_rounding_close(p.data, w, n=16 * step, scale=scale,
                                  err_msg=f"{name}, step {step}, parameter {k}")
    for name_ in opt._arrays:  # the scalar's state is 0-d too, and round-trips
        assert np.shape(opt.state_dict()["state"][0][name_]) == ()


@pytest.mark.parametrize("case", REFS["clip"], ids=lambda c: f"max_norm={c['max_norm']}")
def test_clip_grad_norm_over_every_shape_matches_torch(case):
    """Tolerance: the norm sums the squares of every entry (n roundings for n entries, plus
    the square root), the clipped gradients one product more."""
    params = [Tensor(np.zeros(s), requires_grad=True) for s in case["shapes"]]
    for p, g in zip(params, case["grads"], strict=True):
        p.grad = np.array(g)
    count = sum(p.data.size for p in params)
    norm = clip_grad_norm(params, case["max_norm"])
    assert_rounding_close(norm, case["norm"], n=count + 2, scale=case["norm"])
    for p, want in zip(params, case["clipped"], strict=True):
        assert p.grad.shape == np.shape(want)
        assert_rounding_close(p.grad, want, n=count + 4, scale=np.abs(want) + 1e-300)
