"""Mistakes of the engine and the optimizer: a wrong walk or a wrong step, not a wrong
rule. No single op's gradient check sees them; each is caught by comparing with the
reference — `Tensor.backward`'s accumulation, `glassllm.optim.AdamW`'s step — on a case
that exposes it.

Each entry's ``run(case)`` gives (wrong, reference) arrays for its case; they differ by
far more than rounding. The wrong forms are written out here, beside the real ones,
never in them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from glassllm import autograd as A
from glassllm.optim import AdamW
from glassllm.tensor import Tensor, _topological_order

__all__ = ["ENGINE_BUGS", "EngineBug", "adamw_step", "backward_overwriting"]


def backward_overwriting(root: Tensor) -> dict[Tensor, np.ndarray]:
    """The engine's walk with one line wrong: a tensor's gradient is *set* by each
    consumer (``grads[parent] = g``) instead of added to (``+=``), so a tensor used twice
    keeps only the last use's part. Returns each leaf's gradient (nothing is written to
    ``.grad``)."""
    grads: dict[Tensor, np.ndarray] = {root: np.ones(root.shape)}
    leaves: dict[Tensor, np.ndarray] = {}
    for node in reversed(_topological_order(root)):
        g = grads.pop(node, None)
        if g is None:
            continue
        if node._backward is None:
            leaves[node] = g
            continue
        for parent, pg in zip(node._parents, node._backward(g), strict=True):
            if pg is not None and parent.requires_grad:
                grads[parent] = pg                     # the mistake: = where += belongs
    return leaves


def adamw_step(p: np.ndarray, grads: list[np.ndarray], *, lr: float = 1e-3,
               betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
               weight_decay: float = 1e-2, eps_inside_sqrt: bool = False,
               decay_in_gradient: bool = False) -> np.ndarray:
    """AdamW written out in NumPy over a list of gradients, one step each; the two
    classic slips as switches. Right: p ← p(1 − lr·λ) − lr·m̂ / (√v̂ + eps).
    ``eps_inside_sqrt``: / √(v̂ + eps) (for small gradients eps then dominates);
    ``decay_in_gradient``: λ·p added to the gradient (Adam with L2, not AdamW's decoupled
    decay, Loshchilov & Hutter 2019)."""
    b1, b2 = betas
    m, v, p = np.zeros_like(p), np.zeros_like(p), np.array(p, dtype=np.float64)
    for t, g in enumerate(grads, start=1):
        if decay_in_gradient:
            g = g + weight_decay * p
        else:
            p = p * (1.0 - lr * weight_decay)
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        m_hat, v_hat = m / (1 - b1 ** t), v / (1 - b2 ** t)
        denom = np.sqrt(v_hat + eps) if eps_inside_sqrt else np.sqrt(v_hat) + eps
        p = p - lr * m_hat / denom
    return p


def _reference_adamw(p: np.ndarray, grads: list[np.ndarray], **hyper: Any) -> np.ndarray:
    """glassllm.optim.AdamW's steps on a copy of p, the same gradients."""
    t = Tensor(np.array(p), requires_grad=True)
    opt = AdamW([t], **hyper)
    for g in grads:
        t.grad = g
        opt.step()
    return t.data.copy()


@dataclass(frozen=True)
class EngineBug:
    """One engine or optimizer mistake, with why people make it and its exposing case;
    ``run()`` gives (wrong, reference)."""

    id: str
    title: str
    why: str
    exposes: str
    run: Callable[[], tuple[np.ndarray, np.ndarray]]


def _overwrite_case() -> tuple[np.ndarray, np.ndarray]:
    x = Tensor([0.3, -1.2, 0.8], requires_grad=True)
    out = A.tsum(A.mul(x, A.tanh(x)))                 # x read twice: by mul and by tanh
    wrong = backward_overwriting(out)[x]
    out.backward()
    return wrong, x.grad


_SMALL = [np.array([2e-5, -1e-5, 3e-5]) * (k + 1) for k in range(5)]
_P = np.array([0.5, -0.3, 0.8])
_HYPER = {"lr": 1e-2, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.1}
_BIG = [np.array([0.5, -1.5, 2.0]) * (k + 1) for k in range(5)]

ENGINE_BUGS: tuple[EngineBug, ...] = (
    EngineBug("overwrite-not-accumulate", "a reused tensor's gradient overwritten, not"
              " accumulated",
              "A tree-shaped graph never needs +=: each tensor has one consumer. The first"
              " tensor used twice (a residual, tied weights, x · tanh(x)) loses a path.",
              "x · tanh(x): x reaches the output by two paths",
              _overwrite_case),
    EngineBug("adamw-eps-inside-sqrt", "AdamW's eps inside the square root",
              "√(v̂ + eps) and √v̂ + eps look alike and agree for large gradients; with"
              " gradients near √eps the step shrinks by orders of magnitude.",
              "gradients of order 1e-5, where √eps = 1e-4 dominates √v̂",
              lambda: (adamw_step(_P, _SMALL, eps_inside_sqrt=True, **_HYPER),
                       _reference_adamw(_P, _SMALL, **_HYPER))),
    EngineBug("adamw-coupled-decay", "AdamW's weight decay added to the gradient",
              "Adam with L2 regularisation adds λ·p to the gradient; AdamW decays the"
              " weights apart from it, so the decay is not divided by √v̂.",
              "weights with gradients far from 1: the decay is rescaled per element",
              lambda: (adamw_step(_P, _BIG, decay_in_gradient=True, **_HYPER),
                       _reference_adamw(_P, _BIG, **_HYPER))),
)
