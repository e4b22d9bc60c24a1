"""Fused nodes: a layer of `glassllm.layers` as one node with a hand-written backward.

`glassllm.layers.rms_norm`, `attention` and `swiglu` are composed from the ops of
`glassllm.autograd`, and that is what runs by default: the lines a student reads. Each
takes ``fused=True`` too, the training loop's choice (`glassllm.training.stream.train_steps`),
which runs the function of the same name here: the same math as one node, with its
backward written out, so the graph records one node per layer instead of six to
fourteen, and the backward reuses what the forward computed. `tests/library/test_fused.py`
checks every node against its layer's composed lines (the value and every gradient, at
several shapes and with GQA, to a tolerance of float64 rounding: the sums run in
another order) and runs the gradient checker on each; docs/performance.md has the
timings and what each shortcut saves.

Shape letters (STYLE.md): B batch · n sequence length · H query heads · Hkv key/value
heads · dk head dimension; r = H / Hkv query heads per key/value head; d model width ·
F feed-forward width · N rows (every leading axis of x flattened).
"""

from __future__ import annotations

import functools
import math

import numpy as np

from glassllm.autograd import (
    _as_complex_pairs,
    _rotation,
    _scale_rows,
    _sigmoid_data,
    softmax_np,
)
from glassllm.tensor import Tensor

__all__ = ["attention", "rms_norm", "swiglu"]


def _row_dot(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Σ_j a·b over the last axis, keepdims: (..., m) · (..., m) → (..., 1).

    One pass with no (..., m) temporary, which np.sum(a * b) would make; the sum runs in
    another order than np.sum's, so the last bits may differ from the composed ops'.
    """
    return np.einsum("...j,...j->...", a, b)[..., None]


def _divide_by_root(a: np.ndarray, root: float) -> None:
    """a /= root, in place. When root is a power of two (√dk for dk = 4, 16, 64, …),
    multiplying by 1/root is exact, so it gives the division's bits with a product."""
    if math.frexp(root)[0] == 0.5:  # root = 2^k: 1/root is exact, and so is a·(1/root)
        a *= 1.0 / root
    else:
        a /= root


@functools.lru_cache(maxsize=8)
def _future_mask(n: int, r: int) -> tuple[np.ndarray, np.ndarray]:
    """(future, visible) for r stacked heads of n queries: (r·n, n) booleans, read-only.
    future[i, j] is True when key j comes after query i mod n. Made once per (n, r)."""
    future = np.tile(np.triu(np.ones((n, n), dtype=bool), k=1), (r, 1))  # (r·n, n)
    visible = ~future
    future.flags.writeable = visible.flags.writeable = False
    return future, visible


def _causal_softmax(scores: np.ndarray, future: np.ndarray, visible: np.ndarray) -> np.ndarray:
    """softmax_np(masked_fill(scores, future, −inf), axis=-1), computed in scores' own buffer
    (the caller's array, overwritten and returned).

    The same operations on the visible entries, so the same bits: subtract the row's
    maximum, exponentiate, divide by the row's sum; the future's probabilities are written
    as the exact 0 that exp(−inf) gives. The −inf is never written: the maximum and exp
    skip the future with ``where=`` instead (exp(−inf) takes NumPy's slow path for
    special values).
    """
    if scores.size == 0:
        return softmax_np(scores, axis=-1)
    scores -= np.max(scores, axis=-1, keepdims=True, where=visible, initial=-np.inf)
    np.exp(scores, out=scores, where=visible)  # the largest visible entry is exp(0) = 1
    np.copyto(scores, 0.0, where=future)  # exp(−inf) = 0, written
    scores /= np.sum(scores, axis=-1, keepdims=True)
    return scores


def _grouped_attention(
    qg: np.ndarray, k: np.ndarray, v: np.ndarray, r: int
) -> tuple[np.ndarray, np.ndarray]:
    """The core of the attention on arrays, the query heads of a group stacked so that
    no key or value head is copied: (out, p), both new arrays.

    qg (B, Hkv, r·n, dk): the r query heads of each key/value head stacked;
    k, v (B, Hkv, n, dk) → out (B, Hkv, r·n, dk) and p (B, Hkv, r·n, n) (the
    probabilities, kept for the backward).
    """
    n, dk = k.shape[-2:]
    future, visible = _future_mask(n, r)  # (r·n, n) each
    scores = np.matmul(qg, np.swapaxes(k, -1, -2))  # (B, Hkv, r·n, n)
    _divide_by_root(scores, math.sqrt(dk))  # divided, as the composed form does
    p = _causal_softmax(scores, future, visible)  # in scores' buffer
    return np.matmul(p, v), p


def _grouped_attention_grads(
    gg: np.ndarray, p: np.ndarray, qg: np.ndarray, k: np.ndarray, v: np.ndarray,
    need_qk: bool = True,
) -> tuple[np.ndarray | None, np.ndarray | None, np.ndarray]:
    """The backward of `_grouped_attention` on arrays: (gq·√dk, gk·√dk, gv), grouped.

    With dp = g·vᵀ and ds = p * (dp − Σ_j dp·p) (softmax's backward): gv = pᵀ·g,
    gq = ds·k/√dk, gk = dsᵀ·qg/√dk.

    gg (B, Hkv, r·n, dk) is the gradient of out; gq is (B, Hkv, r·n, dk), gk and gv
    (B, Hkv, n, dk). gq and gk are None when not `need_qk`. The caller divides gq and gk
    by √dk (the scores' scale), where it is cheapest: they are smaller than ds.
    """
    gv = np.matmul(np.swapaxes(p, -1, -2), gg)  # pᵀ·g, summed over the group's heads
    if not need_qk:
        return None, None, gv
    ds = np.matmul(gg, np.swapaxes(v, -1, -2))  # dp (B, Hkv, r·n, n)
    ds -= _row_dot(ds, p)  # Σ_j dp·p, (B, Hkv, r·n, 1)
    ds *= p  # masked entries have p = 0, so ds = 0 there
    return np.matmul(ds, k), np.matmul(np.swapaxes(ds, -1, -2), qg), gv


def attention(
    x: Tensor,
    wq: Tensor,
    wk: Tensor,
    wv: Tensor,
    wo: Tensor,
    n_heads: int,
    n_kv_heads: int,
    cos: np.ndarray,
    sin: np.ndarray,
) -> Tensor:
    """Causal grouped-query self-attention with rotary positions as one node: the math of
    the composed lines of `glassllm.layers.attention`, which calls this with ``fused=True``.

    Shapes: x (B, n, d); wq (d, H·dk); wk, wv (d, Hkv·dk); wo (H·dk, d); cos, sin
    (n, dk/2); out (B, n, d). The caller (`layers.attention`) has checked them.

    Forward, on x2 = x as (B·n, d), each projection split into heads (B, heads, n, dk):
        q = rope(x2·wq), k = rope(x2·wk), v = x2·wv   (rope: each (even, odd) pair · e^{iθ})
        heads = the causal core, grouped (B, H, n, dk)  (`_grouped_attention`)
        merged = heads as (B·n, H·dk);  out = merged·wo

    Backward, with gm = g·woᵀ split into heads and the core's backward giving gq, gk,
    gv from it (`_grouped_attention_grads`):
        wo: mergedᵀ·g
        G = [gq·e^{−iθ} | gk·e^{−iθ} | gv] as (B·n, (H + 2·Hkv)·dk): rope's transposed
            rotation, each gradient written in the column block of its projection
        x: G·[wq | wk | wv]ᵀ   (one product for the three projections)
        wq, wk, wv: the column blocks of x2ᵀ·G
        n_heads, n_kv_heads, cos, sin: not differentiable

    One node instead of fourteen (three projections, their reshapes and transposes, two
    ropes, repeat_kv twice, the scores, mask, softmax and weighted sum, the merge and the
    output projection): the query heads that share a key/value head are stacked, so no
    key or value is copied; the forward's operations are the composed lines', on other
    shapes (x as one (B·n, d) product, a group's query heads stacked), so BLAS may sum in
    another order: the same numbers up to rounding; the backward writes each head's
    gradient where the one product for x and the weights reads it.

    Example:
        >>> from glassllm import layers
        >>> rng = np.random.default_rng(0)
        >>> x = Tensor(rng.normal(size=(1, 3, 8)))
        >>> w = [Tensor(rng.normal(size=s)) for s in [(8, 8), (8, 4), (8, 4), (8, 8)]]
        >>> cos, sin = layers.rope_angles(3, 4)
        >>> composed = layers.attention(x, *w, 2, 1, cos, sin).data
        >>> bool(np.allclose(attention(x, *w, 2, 1, cos, sin).data, composed, rtol=1e-12))
        True

    SPEC L6, L7. Vaswani et al. 2017; Su et al. 2021 (RoPE); Ainslie et al. 2023 (GQA).
    """
    B, n, d = x.shape
    H, hkv = n_heads, n_kv_heads
    dk, r = d // H, H // hkv
    x2 = x.data.reshape(B * n, d)  # (B·n, d)
    turn = _rotation(np.asarray(cos, dtype=np.float64), np.asarray(sin, dtype=np.float64))

    def heads(a2: np.ndarray, count: int) -> np.ndarray:
        """(B·n, count·dk) → (B, count, n, dk), a transposed view."""
        return a2.reshape(B, n, count, dk).transpose(0, 2, 1, 3)

    q = (_as_complex_pairs(heads(x2 @ wq.data, H)) * turn).view(np.float64)  # (B, H, n, dk)
    k = (_as_complex_pairs(heads(x2 @ wk.data, hkv)) * turn).view(np.float64)  # (B, Hkv, n, dk)
    v = heads(x2 @ wv.data, hkv)  # (B, Hkv, n, dk), a view
    qg = q.reshape(B, hkv, r * n, dk)  # the r query heads of a group stacked
    att, p = _grouped_attention(qg, k, v, r)  # (B, Hkv, r·n, dk), (B, Hkv, r·n, n)
    merged = att.reshape(B, H, n, dk).transpose(0, 2, 1, 3).reshape(B * n, H * dk)  # a copy
    out = (merged @ wo.data).reshape(B, n, d)

    def backward(g: np.ndarray):
        g2 = g.reshape(B * n, d)
        gwo = merged.T @ g2 if wo.requires_grad else None  # (H·dk, d)
        if not (x.requires_grad or wq.requires_grad or wk.requires_grad or wv.requires_grad):
            return None, None, None, None, gwo
        gm = heads(g2 @ wo.data.T, H)  # (B, H, n, dk), a view
        gg = gm.reshape(B, hkv, r * n, dk)  # grouped (a copy: gm is transposed)
        gq, gk, gv = _grouped_attention_grads(gg, p, qg, k, v)
        # G: the gradients of x2·wq, x2·wk, x2·wv side by side, in their (B, n, heads, dk)
        # layout, so that G as (B·n, (H + 2·Hkv)·dk) is the gradient of x2·[wq | wk | wv]
        G = np.empty((B, n, H + 2 * hkv, dk))
        unturn = np.conj(turn) / math.sqrt(dk)  # e^{−iθ}: rope's transposed rotation, and
        # the scores' 1/√dk that gq and gk still lack
        np.multiply(_as_complex_pairs(gq.reshape(B, H, n, dk)), unturn,
                    out=_as_complex_pairs(G[:, :, :H].transpose(0, 2, 1, 3)))
        np.multiply(_as_complex_pairs(gk), unturn,
                    out=_as_complex_pairs(G[:, :, H:H + hkv].transpose(0, 2, 1, 3)))
        G[:, :, H + hkv:] = gv.transpose(0, 2, 1, 3)
        G2 = G.reshape(B * n, (H + 2 * hkv) * dk)
        gx = None
        if x.requires_grad:
            w_all = np.concatenate([wq.data, wk.data, wv.data], axis=1)  # (d, (H+2·Hkv)·dk)
            gx = (G2 @ w_all.T).reshape(B, n, d)
        gw = x2.T @ G2  # (d, (H + 2·Hkv)·dk): the three weights' gradients side by side
        q_end, k_end = H * dk, (H + hkv) * dk
        return gx, gw[:, :q_end], gw[:, q_end:k_end], gw[:, k_end:], gwo

    return Tensor._make(out, (x, wq, wk, wv, wo), "attention", backward)


def rms_norm(x: Tensor, weight: Tensor, eps: float = 1e-6) -> Tensor:
    """RMSNorm as one node: out = x · r · weight, with r = 1/sqrt(mean(x², last axis) + eps).

    Shapes: x (..., d); weight (d,); out (..., d). The caller (`layers.rms_norm`) has
    checked the shapes and eps (a finite number >= 0).

    Backward, with y = x·r (the normalised x) and gy = g·weight:
        x: r · (gy − y · mean(gy·y, last axis))
        weight: sum over leading axes of g·y
        eps: not differentiable (L0.6)

    Example:
        >>> from glassllm import layers
        >>> x, w = Tensor([[3.0, 4.0]]), Tensor([1.0, 2.0])
        >>> bool(np.allclose(rms_norm(x, w).data, layers.rms_norm(x, w).data, rtol=1e-15))
        True

    SPEC L7. Zhang & Sennrich 2019, "Root Mean Square Layer Normalization".
    """
    x_data, w_data = x.data, weight.data
    d = x_data.shape[-1]
    # the composed form's operations in its order
    out = np.multiply(x_data, x_data)  # x², in the output's buffer until the last line
    inv_rms = 1.0 / np.sqrt(np.sum(out, axis=-1, keepdims=True) / d + eps)  # (..., 1)
    y = _scale_rows(x_data, inv_rms)  # x · r, (..., d)
    np.multiply(y, w_data, out=out)  # (..., d)

    def backward(g: np.ndarray):
        gw = None
        if weight.requires_grad:  # Σ over the leading axes of g·y, in one pass
            gw = np.einsum("ij,ij->j", g.reshape(-1, d), y.reshape(-1, d))
        gx = None
        if x.requires_grad:
            gx = np.multiply(g, w_data)  # gy, (..., d)
            mean = _row_dot(gx, y)  # Σ gy·y, (..., 1)
            mean /= d
            gx -= _scale_rows(y, mean)  # gy − y·mean(gy·y)
            gx *= inv_rms
        return gx, gw

    return Tensor._make(out, (x, weight), "rms_norm", backward)


# swiglu works on blocks of this many rows (of x as (N, d)): a block's temporaries stay
# in the CPU's cache, and its products are small enough for OpenBLAS's small-matrix
# kernel, which skips packing (docs/performance.md, "Fused SwiGLU", has the timings).
_ROWS = 64
# ... and at least this many elements per block (rows × the wider of its two widths): the
# number of blocks follows the caller's N, so with narrow widths (d = F = 1) blocks of 64
# rows would spend most of their time in the loop's Python calls, not in NumPy's work.
_BLOCK_ELEMENTS = 512


def _block_rows(width: int) -> int:
    """Rows per block for arrays `width` wide: `_ROWS`, more when they are narrow."""
    return max(_ROWS, _BLOCK_ELEMENTS // max(width, 1))


def _sum_of_row_block_products(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """aᵀ·b for a (N, m), b (N, k) → (m, k), as the sum over blocks of `_block_rows` rows
    of a_blockᵀ·b_block: the same sum in another order (the last bits may differ), in the
    forward's blocks."""
    rows = _block_rows(max(a.shape[1], b.shape[1]))
    out = a[:rows].T @ b[:rows]
    for i in range(rows, a.shape[0], rows):
        out += a[i : i + rows].T @ b[i : i + rows]
    return out


def swiglu(x: Tensor, w1: Tensor, w2: Tensor, w3: Tensor) -> Tensor:
    """The SwiGLU feed-forward as one node: out = (silu(x·w1) * (x·w3))·w2.

    Shapes: x (..., d); w1, w3 (d, F); w2 (F, d); out (..., d). The caller
    (`layers.swiglu`) has checked the shapes.

    Forward, on x2 = x as (N, d): a = x2·w1, b = x2·w3, s = sigmoid(a), u = a·s = silu(a),
    h = u·b, out = h·w2 (row by row: computed on blocks of `_block_rows` rows, the same
    numbers).

    Backward, with gh = g·w2ᵀ (the gradient of h):
        w2: hᵀ·g
        b:  gb = gh·u
        a:  ga = (gh·b)·(s + u·(1 − s))        (silu'(a) = s + a·s·(1 − s))
        w1: x2ᵀ·ga;  w3: x2ᵀ·gb      (these three summed over blocks of rows)
        x: ga·w1ᵀ + gb·w3ᵀ

    Example:
        >>> from glassllm import layers
        >>> one, x = Tensor(np.eye(2)), Tensor([[0.0, 2.0]])
        >>> bool(np.allclose(swiglu(x, one, one, one).data,
        ...                  layers.swiglu(x, one, one, one).data, rtol=1e-15))
        True

    SPEC L7. Shazeer 2020, "GLU Variants Improve Transformer"; silu: Elfwing et al. 2018.
    """
    x_data, w1_data, w2_data, w3_data = x.data, w1.data, w2.data, w3.data
    (d, F), d_out = w1_data.shape, w2_data.shape[1]
    x2 = x_data.reshape(-1, d)  # (N, d)
    N = x2.shape[0]
    s, u, b, h = (np.empty((N, F)) for _ in range(4))  # kept for the backward
    out = np.empty((N, d_out))
    block = _block_rows(max(d, F))
    for i in range(0, N, block):  # a block of rows at a time: its temporaries stay in cache
        rows = slice(i, i + block)
        a = np.matmul(x2[rows], w1_data, out=u[rows])  # a, then silu(a) in its place
        np.matmul(x2[rows], w3_data, out=b[rows])
        _sigmoid_data(a, out=s[rows])
        np.multiply(a, s[rows], out=a)  # u = silu(a): the backward needs no a
        np.multiply(a, b[rows], out=h[rows])
        np.matmul(h[rows], w2_data, out=out[rows])
    out = out.reshape(*x_data.shape[:-1], d_out)  # (..., d)

    def backward(g: np.ndarray):
        g2 = g.reshape(-1, g.shape[-1])  # (N, d)
        gw2 = _sum_of_row_block_products(h, g2) if w2.requires_grad else None  # (F, d)
        if not (x.requires_grad or w1.requires_grad or w3.requires_grad):
            return None, None, gw2, None
        gh = g2 @ w2_data.T  # (N, F)
        gb = gh * u  # (N, F)
        silu_grad = 1.0 - s
        silu_grad *= u
        silu_grad += s  # s + u·(1 − s), silu's derivative
        ga = gh  # gh is not needed after this: ga is computed in its buffer
        ga *= b
        ga *= silu_grad  # ga = (gh·b)·silu'(a)
        gw1 = _sum_of_row_block_products(x2, ga) if w1.requires_grad else None  # (d, F)
        gw3 = _sum_of_row_block_products(x2, gb) if w3.requires_grad else None  # (d, F)
        gx = None
        if x.requires_grad:
            gx = ga @ w1_data.T
            gx += gb @ w3_data.T
            gx = gx.reshape(x_data.shape)  # (..., d)
        return gx, gw1, gw2, gw3

    return Tensor._make(out, (x, w1, w2, w3), "swiglu", backward)
