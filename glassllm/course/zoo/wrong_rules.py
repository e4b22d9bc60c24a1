"""Wrong backward rules: classic mistakes, each a function shaped like the registry op it
spoils (the same inputs, the same forward values) whose backward is wrong in one way.

Each wraps the real op and never edits it: the forward is the real op's, and the wrong
backward is written from the real node's own closure (`_rewire`) or, for a composite op,
from the real lines with one of them changed. They reach an evaluation only through the
evaluator's explicit ``rules`` mapping (`glassllm.course.zoo.rules_for`); no real rule
imports this module (docs/architecture.json holds that as a "never").
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from glassllm import autograd as A
from glassllm import layers
from glassllm.tensor import Tensor, unbroadcast

Backward = Callable[[np.ndarray], tuple]


def _rewire(real: Tensor, wrong: Callable[[np.ndarray, Backward], tuple]) -> Tensor:
    """`real`'s value and inputs with another backward: ``wrong(g, real_backward)``.
    A result that built no graph (nothing requires grad) is returned as it is."""
    if real._backward is None:
        return real
    right = real._backward
    return Tensor._make(real.data, real._parents, real._op, lambda g: wrong(g, right))


def cross_entropy_without_mean(logits: Any, targets: Any) -> Tensor:
    """(softmax − one-hot), without the 1/N of the mean over the N rows."""
    real = A.cross_entropy(logits, targets)
    n = np.shape(targets)[0] if np.ndim(targets) else 1
    return _rewire(real, lambda g, right: (right(g)[0] * n,))


def softmax_diagonal(a: Any, axis: int = -1) -> Tensor:
    """Softmax's Jacobian taken as its diagonal: g · s(1 − s), the cross terms dropped."""
    real = A.softmax(a, axis)
    s = real.data
    return _rewire(real, lambda g, right: (g * s * (1.0 - s),))


def matmul_not_transposed(a: Any, b: Any) -> Tensor:
    """∂a = g @ b instead of g @ bᵀ (∂b stays right). The shapes only line up when b is
    square, so a rule tested on square matrices never fails to run."""
    real = A.matmul(a, b)
    b_data = real._parents[1].data if real._parents else None

    def wrong(g: np.ndarray, right: Backward) -> tuple:
        ga, gb = right(g)
        if ga is not None and b_data.ndim == 2 and b_data.shape[0] == b_data.shape[1] \
                and np.ndim(g) >= 1:
            ga = unbroadcast(g @ b_data, real._parents[0].shape)
        return ga, gb

    return _rewire(real, wrong)


def rope_sign_flipped(x: Any, cos: Any, sin: Any) -> Tensor:
    """The backward rotates g by +θ (the forward's rotation) instead of −θ (its transpose):
    the sign of each pair's sine flipped."""
    real = A.rope(x, cos, sin)
    return _rewire(real, lambda g, right: (A.rope(Tensor(g), cos, sin).data,))


def repeat_kv_first_only(x: Any, repeats: int) -> Tensor:
    """Each K/V head takes the gradient of the first query head of its group only, not
    the sum over the `repeats` heads that read it."""
    real = A.repeat_kv(x, repeats)
    return _rewire(real, lambda g, right: (np.ascontiguousarray(g[:, ::repeats]),))


def rms_norm_without_mean_term(x: Any, weight: Any, eps: float = 1e-6) -> Tensor:
    """∂x = g · w / rms: the term through the mean square, −x · mean(g · w · x) / rms³,
    left out (as if rms were a constant). ∂weight stays right."""
    x, weight = (t if isinstance(t, Tensor) else Tensor(t) for t in (x, weight))
    real = layers.rms_norm(x, weight, eps)
    if not real.requires_grad:
        return real
    xd, wd = x.data, weight.data
    rms = np.sqrt(np.mean(xd * xd, axis=-1, keepdims=True) + eps)

    def backward(g: np.ndarray) -> tuple:
        gx = g * wd / rms if x.requires_grad else None
        gw = unbroadcast(g * xd / rms, wd.shape) if weight.requires_grad else None
        return gx, gw

    return Tensor._make(real.data, (x, weight), "rms_norm", backward)


def embedding_assigned(weight: Any, ids: Any) -> Tensor:
    """Rows of g written into the table with assignment (``grad[ids] = g``), not added:
    an id that appears twice keeps one of its rows' gradients."""
    real = A.embedding(weight, ids)
    flat = np.asarray(ids).reshape(-1)

    def wrong(g: np.ndarray, right: Backward) -> tuple:
        out = np.zeros(real._parents[0].shape)
        out[flat] = g.reshape(flat.size, -1)
        return (out,)

    return _rewire(real, wrong)


def masked_fill_leaks(a: Any, mask: Any, value: Any) -> Tensor:
    """The gradient passes through masked positions as if nothing were replaced. Hidden
    when the mask fills scores with −∞ before a softmax (whose gradient there is 0
    anyway), exposed when the mask is applied to values."""
    real = A.masked_fill(a, mask, value)
    return _rewire(real, lambda g, right: (unbroadcast(g, real._parents[0].shape),))


def sigmoid_as_s(a: Any) -> Tensor:
    """sigmoid'(a) taken as s instead of s(1 − s)."""
    real = A.sigmoid(a)
    s = real.data
    return _rewire(real, lambda g, right: (g * s,))


def silu_without_second_term(a: Any) -> Tensor:
    """silu'(a) taken as sigmoid(a), dropping a · s(1 − s): silu = a · s is a product."""
    real = A.silu(a)
    if real._backward is None:
        return real
    s = A.sigmoid(Tensor(real._parents[0].data)).data
    return _rewire(real, lambda g, right: (g * s,))


def where_to_both(condition: Any, a: Any, b: Any) -> Tensor:
    """The gradient of where sent whole to both branches, not split by the condition."""
    real = A.where(condition, a, b)
    if real._backward is None:
        return real
    pa, pb = real._parents
    return _rewire(real, lambda g, right: (
        unbroadcast(g, pa.shape) if pa.requires_grad else None,
        unbroadcast(g, pb.shape) if pb.requires_grad else None))


def tanh_without_square(a: Any) -> Tensor:
    """tanh'(a) taken as 1 − t instead of 1 − t²."""
    real = A.tanh(a)
    t = real.data
    return _rewire(real, lambda g, right: (g * (1.0 - t),))


def _forgotten_scale(s: Tensor, c: float) -> Tensor:
    """s · c on the way forward, g on the way back: a scale the backward forgot."""
    return Tensor._make(s.data * c, (s,), "mul", lambda g: (g,))


def attention_without_scale(x: Any, wq: Any, wk: Any, wv: Any, wo: Any, n_heads: int,
                            n_kv_heads: int, cos: Any, sin: Any) -> Tensor:
    """`glassllm.layers.attention`'s lines, with the scores' 1/√dk applied on the way
    forward but not on the way back (a hand-written backward that forgot it)."""
    x, wq, wk, wv, wo = (t if isinstance(t, Tensor) else Tensor(t) for t in (x, wq, wk, wv, wo))
    real = layers.attention(x, wq, wk, wv, wo, n_heads, n_kv_heads, cos, sin)
    if not real.requires_grad:
        return real
    b, n, d = x.shape
    dk = d // n_heads
    q = A.transpose(A.reshape(layers.linear(x, wq), (b, n, n_heads, dk)), (0, 2, 1, 3))
    k = A.transpose(A.reshape(layers.linear(x, wk), (b, n, n_kv_heads, dk)), (0, 2, 1, 3))
    v = A.transpose(A.reshape(layers.linear(x, wv), (b, n, n_kv_heads, dk)), (0, 2, 1, 3))
    q, k = A.rope(q, cos, sin), A.rope(k, cos, sin)
    k, v = (A.repeat_kv(t, n_heads // n_kv_heads) for t in (k, v))
    scores = _forgotten_scale(A.matmul(q, A.transpose(k, (0, 1, 3, 2))), 1.0 / math.sqrt(dk))
    future = np.triu(np.ones((n, n), dtype=bool), k=1)
    weights = A.softmax(A.masked_fill(scores, future, -np.inf), axis=-1)
    heads = A.matmul(weights, v)
    out = layers.linear(A.reshape(A.transpose(heads, (0, 2, 1, 3)), (b, n, n_heads * dk)), wo)
    return Tensor._make(real.data, out._parents, out._op, out._backward)
