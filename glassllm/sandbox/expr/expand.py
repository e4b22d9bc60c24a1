"""Composite ops opened up: a node of cross_entropy, attention, rms_norm, swiglu or
transformer_block as the library's composition of primitive ops, evaluated with the
node's own inputs and incoming gradient, so every inner node shows its value and gradient.

Each composition is an expression of the expression language, the layer's own composed
lines (glassllm/layers.py, what the op runs) written as text with the node's shapes and
constants filled in; the inputs that can get a gradient are variables, the rest (tables,
masks, one-hot targets) are constants. tests/library/test_expansions.py checks that each runs the
same ops as the layer, as many of each, and gives its numbers. ``evaluate(...,
expand=True)`` adds ``expansion`` to each such node.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["COMPOSITIONS", "EXPANSION_FACTOR", "composition"]


def _f(x: float) -> str:
    return repr(float(x))


def _rms_norm(a: dict) -> tuple[str, dict]:
    d = np.shape(a["x"])[-1]
    return (f"x * pow(tsum(x * x, axis=-1, keepdims=True) / {d} + {_f(a['eps'])}, -0.5) * weight",
            {})


def _swiglu(a: dict) -> tuple[str, dict]:
    return "(silu(x @ w1) * (x @ w3)) @ w2", {}


def _cross_entropy(a: dict) -> tuple[str, dict]:
    n, v = np.shape(a["logits"])
    onehot = np.eye(v, dtype=np.float64)[np.asarray(a["targets"])]       # (N, V)
    return f"-tsum(log_softmax(logits) * onehot) / {n}", {"onehot": onehot}


def _attention(a: dict) -> tuple[str, dict]:
    b, n, _ = np.shape(a["x"])
    h, hkv = int(a["n_heads"]), int(a["n_kv_heads"])
    dk = np.shape(a["wq"])[-1] // h
    r = h // hkv

    def heads(w: str, count: int) -> str:          # (B, count, n, dk)
        return f"transpose(reshape(x @ {w}, [{b}, {n}, {count}, {dk}]), [0, 2, 1, 3])"

    q = f"rope({heads('wq', h)}, cos, sin)"
    k = f"repeat_kv(rope({heads('wk', hkv)}, cos, sin), {r})"
    v = f"repeat_kv({heads('wv', hkv)}, {r})"
    scores = f"{q} @ transpose({k}, [0, 1, 3, 2]) / {_f(math.sqrt(dk))}"
    weights = f"softmax(masked_fill({scores}, future, -inf), axis=-1)"
    merged = f"reshape(transpose({weights} @ {v}, [0, 2, 1, 3]), [{b}, {n}, {h * dk}])"
    return f"{merged} @ wo", {"future": np.triu(np.ones((n, n), dtype=bool), k=1)}


def _block(a: dict) -> tuple[str, dict]:
    h, hkv, eps = int(a["n_heads"]), int(a["n_kv_heads"]), _f(a["eps"])
    attn = f"attention(rms_norm(x, attn_norm, {eps}), wq, wk, wv, wo, {h}, {hkv}, cos, sin)"
    # the residual stream h = x + attention(...) is read twice; the language has no names
    # for intermediates, so it is written (and computed) twice: the sum of both paths'
    # gradients is the same
    return (f"(x + {attn}) + swiglu(rms_norm(x + {attn}, ffn_norm, {eps}), w1, w2, w3)", {})


COMPOSITIONS: dict[str, Callable[[dict], tuple[str, dict]]] = {
    "rms_norm": _rms_norm, "swiglu": _swiglu, "cross_entropy": _cross_entropy,
    "attention": _attention, "transformer_block": _block,
}

# What opening a node costs, planned before any work: elements per element of the node's
# own arrays (its output, its inputs, the arrays its plan builds). An expansion returns
# every inner node's value and gradient (nested expansions included: a block opens its
# attention) and holds them as arrays while it writes them out, so it counts twice what
# it returns. Measured over shapes down to widths of 1 (tests/service/test_answer_bounds.py checks
# that none returns more than half its planned count): rms_norm of width 1 returns 9x its
# node's arrays, a transformer block up to ~8x, attention ~3.6x, cross_entropy 4x,
# swiglu 2x.
EXPANSION_FACTOR: dict[str, int] = {
    "rms_norm": 20, "swiglu": 6, "cross_entropy": 10, "attention": 10, "transformer_block": 24,
}


def composition(op_name: str, args: dict[str, Any], differentiable: dict[str, bool]
                ) -> tuple[str, dict] | None:
    """The composition of `op_name` with these input values, as ``(expression, variables)``
    ready for ``evaluate``; None for an op that is not composite.

    `args` maps each of the op's inputs to its value (arrays as NumPy arrays);
    `differentiable` says, per tensor input, whether it requires grad.
    """
    build = COMPOSITIONS.get(op_name)
    if build is None:
        return None
    expression, extra = build(args)
    used = set(re.findall(r"[A-Za-z_]\w*", expression))
    variables: dict[str, Any] = {}
    for name, value in args.items():
        if isinstance(value, np.ndarray) and name in used:
            variables[name] = {"value": value, "requires_grad": differentiable.get(name, False)}
    for name, value in extra.items():
        variables[name] = {"value": value, "requires_grad": False}
    return expression, variables
