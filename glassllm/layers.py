"""The layers reference (SPEC L7): the pieces of a llama-style transformer, top-down.

Read in this order: the config → ``rope_angles`` → ``rms_norm`` → ``linear`` →
``attention`` → ``swiglu`` → ``transformer_block``; then the modules that hold the
weights (``Linear``, ``Embedding``, ``RMSNorm``, ``Attention``, ``SwiGLU``, ``Block``,
``GlassLM``), in ``glassllm/modules.py`` and importable from here too.

Every layer exists twice: as a *functional form* that takes its weights as explicit
arguments (so a gradient sandbox can show the gradient of each weight), and as a
*module* that owns those weights and calls the functional form. Everything is composed
from ``glassllm.autograd`` only; there is no hand-written backward in this file: the
lines you read are the lines that run. ``rms_norm``, ``attention`` and ``swiglu`` also
take ``fused=True``, the training loop's choice: the same math as one node each, with
its backward written out by hand (``glassllm.fast.fused``, nanoGPT's ``if self.flash:``),
tested equal to these lines (tests/library/test_fused.py).

Shape letters (STYLE.md): B batch · n sequence length · d model width · H query heads ·
Hkv key/value heads · dk head dimension · V vocabulary · F feed-forward width ·
N rows of a loss batch.

Names follow Meta's llama ``model.py``: ``wq wk wv wo`` (attention), ``w1 w2 w3``
(feed-forward), ``n_kv_heads``.

Shape contracts: each functional form first calls its ``*_shape`` function
(``rms_norm_shape`` … ``transformer_block_shape``, written in ``glassllm/shapes.py`` with
every other op's shape rule and importable from here too), which checks every weight
against the shapes written in the docstring and returns the output shape, from shapes
alone. A weight that NumPy would happily broadcast — a gain of shape (20000, 1, 1, d)
instead of (d,) — is refused with a `ShapeError` naming it and both shapes, before any
work. The sandbox's shape plans (`glassllm.sandbox.registry`) call the same functions, so
what it plans is what runs.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from glassllm.autograd import (
    masked_fill,
    matmul,
    pow,
    repeat_kv,
    reshape,
    rope,
    silu,
    softmax,
    transpose,
    tsum,
)
from glassllm.errors import check_int, check_real
from glassllm.fast import fused as _fused
from glassllm.shapes import (
    Shape,
    attention_shape,
    check_heads,
    linear_shape,
    rms_norm_shape,
    swiglu_shape,
    transformer_block_shape,
)
from glassllm.tensor import Tensor

__all__ = [  # the module classes too: given by __getattr__ below, from glassllm.modules
    "Attention",  # noqa: F822
    "Block",  # noqa: F822
    "Embedding",  # noqa: F822
    "GlassConfig",
    "GlassLM",  # noqa: F822
    "Linear",  # noqa: F822
    "Module",  # noqa: F822
    "RMSNorm",  # noqa: F822
    "SwiGLU",  # noqa: F822
    "attention",
    "attention_shape",
    "linear",
    "linear_shape",
    "rms_norm",
    "rms_norm_shape",
    "rope_angles",
    "swiglu",
    "swiglu_shape",
    "transformer_block",
    "transformer_block_shape",
]

# A hook on the attention probabilities (B, H, n, n) of every ``attention`` call: unset
# (None) in normal use. ``glassllm.training.stream.attention_maps`` sets it to record them (and
# keep their gradients); its tests set it to nudge them for finite differences. While it
# is set, ``fused=True`` runs the composed lines too: the probe needs the probabilities
# as a tensor of their own. A ContextVar, so one request's probe never sees another's (H6).
ATTENTION_PROBE: ContextVar[Callable[[Tensor], Tensor] | None] = ContextVar(
    "glassllm_attention_probe", default=None)


# ---------------------------------------------------------------------------------------
# Config
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GlassConfig:
    """Hyper-parameters of a ``GlassLM``. Frozen: a model never changes shape.

    The defaults are the *tiny* model: a byte-level (V=256) two-layer transformer with
    grouped-query attention (H=4 query heads share Hkv=2 key/value heads) that trains on
    the shipped corpus in seconds on a laptop CPU.
    """

    vocab: int = 256  # V: byte-level tokenizer
    d_model: int = 64  # d
    n_layers: int = 2
    n_heads: int = 4  # H
    n_kv_heads: int = 2  # Hkv (GQA); equal to n_heads gives plain multi-head attention
    ffn_hidden: int = 192  # F: SwiGLU width (llama uses ~8/3·d, rounded)
    rope_theta: float = 10000.0
    norm_eps: float = 1e-6
    max_seq_len: int = 64  # longest context the model is run on
    seed: int = 0  # seeds the weight initialisation

    def __post_init__(self) -> None:
        # Integers must be ints (64.0 or True would pass `%` and fail later, far away),
        # floats finite and positive: TypeError/ValueError naming the field.
        for name in ("vocab", "d_model", "n_layers", "n_heads", "n_kv_heads", "ffn_hidden",
                     "max_seq_len"):
            check_int(name, getattr(self, name), minimum=1)
        check_int("seed", self.seed, minimum=0)
        for name in ("rope_theta", "norm_eps"):
            check_real(name, getattr(self, name), 0.0, strict=True)
        check_heads(self.d_model, self.n_heads, self.n_kv_heads)
        if (self.d_model // self.n_heads) % 2:
            raise ValueError(
                f"head dimension d_model/n_heads = {self.d_model}/{self.n_heads} = "
                f"{self.d_model // self.n_heads} must be even for RoPE"
            )

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2)

    @classmethod
    def from_json(cls, text: str | bytes) -> GlassConfig:
        """The config of ``to_json``'s text, or of a file's bytes (JSON's UTF-8, UTF-16 or
        UTF-32, a BOM allowed: ``json.loads``)."""
        return cls(**json.loads(text))


def _shape_of(t: object) -> Shape:
    """The shape of a Tensor, array or nested list (L0.3), without copying it."""
    return t.shape if isinstance(t, Tensor) else np.shape(t)


# ---------------------------------------------------------------------------------------
# RoPE angles
# ---------------------------------------------------------------------------------------


def rope_angles(
    n: int, dk: int, theta: float = 10000.0, offset: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """Cosine and sine tables for rotary position embedding (the "precompute" half of RoPE).

    angle[p, i] = (p + offset) · theta^(-2i/dk), for positions p < n and pairs i < dk/2.
    ``autograd.rope`` then rotates pair i of a head vector at position p by angle[p, i]:
    (x0, x1) → (x0 cos − x1 sin, x0 sin + x1 cos), which is exactly the complex product
    (x0 + i·x1) · e^{i·angle} — llama's ``precompute_freqs_cis`` stores the same numbers
    as complex ``freqs_cis``. Because rotations compose, the dot product of a rotated
    query at position p and a rotated key at position s depends only on p − s.

    Shapes:
        cos, sin: (n, dk/2), plain float64 arrays (tables, not Tensors: L0.6).

    Backward:
        none: the tables are constants; ``rope`` never differentiates them (L0.6).

    Raises:
        ValueError: ``dk`` is odd (coordinates are rotated in pairs), or not positive.
        TypeError: ``n``, ``dk`` or ``offset`` is not an int (a float or a bool).

    Example:
        >>> cos, sin = rope_angles(2, 4)
        >>> cos.shape
        (2, 2)
        >>> np.allclose(sin[1], [np.sin(1.0), np.sin(0.01)])
        True

    SPEC L6.2, L7. Su et al. 2021, "RoFormer: Enhanced Transformer with Rotary Position
    Embedding".
    """
    check_int("n", n, minimum=0)
    check_int("dk", dk)
    check_int("offset", offset)
    if dk <= 0 or dk % 2:
        raise ValueError(f"dk must be a positive even number for RoPE pairs, got dk={dk}")
    inv_freq = theta ** (-np.arange(0, dk, 2, dtype=np.float64) / dk)  # (dk/2,): theta^(-2i/dk)
    positions = np.arange(offset, offset + n, dtype=np.float64)  # (n,)
    angles = np.outer(positions, inv_freq)  # (n, dk/2)
    return np.cos(angles), np.sin(angles)


# ---------------------------------------------------------------------------------------
# RMSNorm
# ---------------------------------------------------------------------------------------


def rms_norm(x: Tensor, weight: Tensor, eps: float = 1e-6, *, fused: bool = False) -> Tensor:
    """Root-mean-square normalisation of the last axis, then a learned per-feature gain.

    out = x / sqrt(mean(x², last axis) + eps) · weight. Unlike LayerNorm there is no
    mean subtraction and no bias: only the scale of each vector is fixed.

    Shapes:
        x: (..., d); weight: (d,); out: (..., d).

    Backward:
        x: weight * g / r - x * sum(x * weight * g, last axis) / (d * r**3),
           r = sqrt(mean(x**2, last axis) + eps)
        weight: sum over the leading axes of g * x / r
        eps: not differentiable (L0.6)

    The gradients come from the chain rule through the lines below. ``fused=True`` runs
    the same math as one node with this backward written out (``glassllm.fast.fused.rms_norm``,
    the training loop's choice; tests/library/test_fused.py checks both agree).

    Raises:
        ShapeError (a ValueError): weight is not (d,) for x's last axis d; x is 0-d.
        ValueError / TypeError: eps is not a finite real number >= 0 (a negative eps
            would take the square root of a negative mean square: NaN, silently).

    Example:
        >>> rms_norm(Tensor([[3.0, 4.0]]), Tensor([1.0, 2.0]), eps=0.0).data.round(4)
        array([[0.8485, 2.2627]])

    SPEC L7. Zhang & Sennrich 2019, "Root Mean Square Layer Normalization".
    """
    d = rms_norm_shape(_shape_of(x), _shape_of(weight))[-1]
    eps = check_real("eps", eps, 0.0)
    x, weight = (t if isinstance(t, Tensor) else Tensor(t) for t in (x, weight))
    if fused:
        return _fused.rms_norm(x, weight, eps)  # (..., d): one node, the same math
    mean_square = tsum(x * x, axis=-1, keepdims=True) / d  # (..., 1)
    inv_rms = pow(mean_square + eps, -0.5)  # (..., 1)
    return x * inv_rms * weight  # (..., d)


# ---------------------------------------------------------------------------------------
# Linear
# ---------------------------------------------------------------------------------------


def linear(x: Tensor, weight: Tensor) -> Tensor:
    """A bias-free linear layer: out = x @ weight.

    Convention: ``weight`` is stored (d_in, d_out), so the product reads left to right
    like the math. PyTorch's ``nn.Linear.weight`` is stored (out, in) and computes
    x @ W.T, so our weight equals ``torch_linear.weight.T``.

    Shapes:
        x: (..., d_in); weight: (d_in, d_out); out: (..., d_out).

    Backward:
        x: g @ weightᵀ
        weight: xᵀ @ g, summed over every leading (batch) axis

    Raises:
        ShapeError (a ValueError): weight is not 2-D, or its first axis is not x's last.

    Example:
        >>> linear(Tensor([[1.0, 2.0]]), Tensor([[1.0, 0.0, 1.0], [0.0, 1.0, 1.0]])).data
        array([[1., 2., 3.]])

    SPEC L7.
    """
    linear_shape(_shape_of(x), _shape_of(weight))
    return matmul(x, weight)  # (..., d_out)


# ---------------------------------------------------------------------------------------
# Attention
# ---------------------------------------------------------------------------------------


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
    *,
    fused: bool = False,
    cache: Any = None,
) -> Tensor:
    """Causal grouped-query self-attention with rotary positions.

    q, k, v = x@wq, x@wk, x@wv, split into heads; q and k rotated by RoPE; each of the
    Hkv key/value heads is shared by H/Hkv adjacent query heads (``repeat_kv``);
    weights = softmax(q·kᵀ/√dk with the future masked to −inf); out = (weights·v) @ wo.
    With Hkv == H this is ordinary multi-head attention; with Hkv == 1 it is multi-query
    attention.

    Shapes:
        x: (B, n, d); wq: (d, H·dk); wk, wv: (d, Hkv·dk); wo: (H·dk, d), with dk = d/H;
        cos, sin: (n, dk/2) from ``rope_angles`` (at x's positions); out: (B, n, d).

    Backward:
        x, wq, wk, wv, wo: the chain rule through its composed lines (linear, reshape,
            transpose, rope, repeat_kv, matmul, masked_fill, softmax), written below
        n_heads, n_kv_heads: not differentiable (integers, L2.4)
        cos, sin: not differentiable (trig tables, L0.6)

    ``fused=True`` runs the same math as one node with its backward written out
    (``glassllm.fast.fused.attention``): the training loop's choice, tested equal to these
    lines (tests/library/test_fused.py). While ``ATTENTION_PROBE`` is set these lines run anyway.

    ``cache`` (generation only, under ``no_grad``): the layer's keys and values of the t
    positions before x's (``glassllm.fast.kvcache``); x's keys and values are appended to it,
    and each query attends to the t cached positions and x's up to its own. Without a
    cache t = 0.

    Raises:
        ShapeError (a ValueError), before any product: d not divisible by H, or H not
            divisible by Hkv (names both numbers); odd dk; x not 3-D; a weight not shaped
            as above (names it and both shapes); cos/sin not shaped (n, dk/2).

    Example:
        >>> rng = np.random.default_rng(0)
        >>> w = [Tensor(rng.normal(size=s)) for s in [(8, 8), (8, 4), (8, 4), (8, 8)]]
        >>> cos, sin = rope_angles(3, 4)
        >>> attention(Tensor(rng.normal(size=(1, 3, 8))), *w, 2, 1, cos, sin).shape
        (1, 3, 8)

    SPEC L3.5, L6, L7. Vaswani et al. 2017 (attention); Su et al. 2021 (RoPE);
    Ainslie et al. 2023, "GQA: Training Generalized Multi-Query Transformer Models".
    """
    B, n, d = attention_shape(
        *(_shape_of(t) for t in (x, wq, wk, wv, wo)), n_heads, n_kv_heads,
        np.shape(cos), np.shape(sin),
    )
    probe = ATTENTION_PROBE.get()
    if fused and probe is None and cache is None:
        x, wq, wk, wv, wo = (t if isinstance(t, Tensor) else Tensor(t)
                             for t in (x, wq, wk, wv, wo))
        return _fused.attention(x, wq, wk, wv, wo, n_heads, n_kv_heads, cos, sin)  # (B, n, d)

    dk = d // n_heads
    q = reshape(linear(x, wq), (B, n, n_heads, dk))  # (B, n, H, dk)
    k = reshape(linear(x, wk), (B, n, n_kv_heads, dk))  # (B, n, Hkv, dk)
    v = reshape(linear(x, wv), (B, n, n_kv_heads, dk))  # (B, n, Hkv, dk)
    q = transpose(q, (0, 2, 1, 3))  # (B, H, n, dk)
    k = transpose(k, (0, 2, 1, 3))  # (B, Hkv, n, dk)
    v = transpose(v, (0, 2, 1, 3))  # (B, Hkv, n, dk)

    q = rope(q, cos, sin)  # (B, H, n, dk)
    k = rope(k, cos, sin)  # (B, Hkv, n, dk)
    if cache is not None:  # generation: the t earlier positions' keys and values first
        k, v = cache.append(k, v)  # (B, Hkv, t+n, dk) each
    t = k.shape[2] - n  # positions before x's
    k = repeat_kv(k, n_heads // n_kv_heads)  # (B, H, t+n, dk)
    v = repeat_kv(v, n_heads // n_kv_heads)  # (B, H, t+n, dk)
    scores = matmul(q, transpose(k, (0, 1, 3, 2))) / math.sqrt(dk)  # (B, H, n, t+n)
    future = np.triu(np.ones((n, t + n), dtype=bool), k=t + 1)  # (n, t+n): key after query
    weights = softmax(masked_fill(scores, future, -np.inf), axis=-1)  # (B, H, n, t+n)
    if probe is not None:
        weights = probe(weights)  # (B, H, n, t+n): recorded (or nudged) by the caller
    heads = matmul(weights, v)  # (B, H, n, dk)

    merged = reshape(transpose(heads, (0, 2, 1, 3)), (B, n, n_heads * dk))  # (B, n, d)
    return linear(merged, wo)  # (B, n, d)


# ---------------------------------------------------------------------------------------
# SwiGLU feed-forward
# ---------------------------------------------------------------------------------------


def swiglu(x: Tensor, w1: Tensor, w2: Tensor, w3: Tensor, *, fused: bool = False) -> Tensor:
    """The SwiGLU feed-forward: out = (silu(x @ w1) · (x @ w3)) @ w2.

    w1 is the *gate* projection, w3 the *up* projection, w2 the *down* projection (the
    names of Meta's llama). The gate, passed through silu(z) = z·sigmoid(z), multiplies
    the up projection element-wise before projecting back to width d.

    Shapes:
        x: (..., d); w1, w3: (d, F); w2: (F, d); out: (..., d).

    Backward:
        x: ga @ w1ᵀ + gb @ w3ᵀ, the two paths, with ga = (g @ w2ᵀ) * b * silu'(a),
           gb = (g @ w2ᵀ) * silu(a), a = x @ w1, b = x @ w3
        w1: xᵀ @ ((g @ w2ᵀ) * b * silu'(a)), a = x @ w1, b = x @ w3, summed over x's
            leading axes
        w2: hᵀ @ g, h = silu(x @ w1) * (x @ w3), summed over x's leading axes
        w3: xᵀ @ ((g @ w2ᵀ) * silu(x @ w1)), summed over x's leading axes

    The gradients come from the chain rule through the lines below. ``fused=True`` runs
    the same math as one node with this backward written out (``glassllm.fast.fused.swiglu``,
    the training loop's choice; tests/library/test_fused.py checks both agree).

    Raises:
        ShapeError (a ValueError): a weight is not shaped as above (names it, both shapes).

    Example:
        >>> one = Tensor(np.eye(2))
        >>> swiglu(Tensor([[0.0, 2.0]]), one, one, one).data.round(4)
        array([[0.    , 3.5232]])

    SPEC L7. Shazeer 2020, "GLU Variants Improve Transformer".
    """
    swiglu_shape(*(_shape_of(t) for t in (x, w1, w2, w3)))
    x, w1, w2, w3 = (t if isinstance(t, Tensor) else Tensor(t) for t in (x, w1, w2, w3))
    if fused:
        return _fused.swiglu(x, w1, w2, w3)  # (..., d): one node, the same math
    gate = silu(matmul(x, w1))  # (..., F)
    up = matmul(x, w3)  # (..., F)
    return matmul(gate * up, w2)  # (..., d)


# ---------------------------------------------------------------------------------------
# Transformer block
# ---------------------------------------------------------------------------------------


def transformer_block(
    x: Tensor,
    attn_norm: Tensor,
    wq: Tensor,
    wk: Tensor,
    wv: Tensor,
    wo: Tensor,
    ffn_norm: Tensor,
    w1: Tensor,
    w2: Tensor,
    w3: Tensor,
    n_heads: int,
    n_kv_heads: int,
    cos: np.ndarray,
    sin: np.ndarray,
    eps: float = 1e-6,
    *,
    fused: bool = False,
) -> Tensor:
    """One pre-norm transformer block: two residual additions onto the stream x.

    h = x + attention(rms_norm(x, attn_norm)); out = h + swiglu(rms_norm(h, ffn_norm)).

    Shapes:
        x: (B, n, d); attn_norm, ffn_norm: (d,); wq: (d, H·dk); wk, wv: (d, Hkv·dk);
        wo: (H·dk, d); w1, w3: (d, F); w2: (F, d); cos, sin: (n, dk/2); out: (B, n, d).

    Backward:
        x: g (the residuals' identity paths) plus the paths back through attention and
           swiglu, by the chain rule
        attn_norm, wq, wk, wv, wo, ffn_norm, w1, w2, w3: the chain rule back through
           the residual adds and the weight's layer (rms_norm, attention or swiglu)
        n_heads, n_kv_heads, cos, sin, eps: not differentiable (L0.6, L2.4)

    ``fused=True`` runs rms_norm, attention and swiglu as fused nodes (the training
    loop's choice, tested equal: tests/library/test_fused.py).

    Raises:
        ShapeError (a ValueError), before any work: a gain not (d,), or anything
            ``attention`` or ``swiglu`` refuses (head counts, weights, tables).

    Example:
        >>> rng = np.random.default_rng(0)
        >>> shapes = [(4,), (4, 4), (4, 2), (4, 2), (4, 4), (4,), (4, 6), (6, 4), (4, 6)]
        >>> w = [Tensor(rng.normal(size=s)) for s in shapes]
        >>> cos, sin = rope_angles(3, 2)
        >>> transformer_block(Tensor(rng.normal(size=(1, 3, 4))), *w, 2, 1, cos, sin).shape
        (1, 3, 4)

    SPEC L7. The pre-norm arrangement of llama (Touvron et al. 2023).
    """
    transformer_block_shape(
        *(_shape_of(t) for t in (x, attn_norm, wq, wk, wv, wo, ffn_norm, w1, w2, w3)),
        n_heads, n_kv_heads, np.shape(cos), np.shape(sin),
    )
    h = x + attention(rms_norm(x, attn_norm, eps, fused=fused), wq, wk, wv, wo, n_heads,
                      n_kv_heads, cos, sin, fused=fused)  # (B, n, d): residual 1
    return h + swiglu(rms_norm(h, ffn_norm, eps, fused=fused), w1, w2, w3, fused=fused)


# ---------------------------------------------------------------------------------------
# The modules (objects that own weights and call the functional forms above) live in
# glassllm/modules.py; they stay importable from here, as they always were.
# ---------------------------------------------------------------------------------------
_MODULES = frozenset({"Attention", "Block", "Embedding", "GlassLM", "Linear", "Module",
                      "RMSNorm", "SwiGLU"})


def __getattr__(name: str) -> object:
    """``glassllm.layers.GlassLM`` and the other modules, from glassllm.modules (imported
    on first use: it imports this file)."""
    if name in _MODULES:
        from glassllm import modules

        return getattr(modules, name)
    raise AttributeError(f"module 'glassllm.layers' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_MODULES})
