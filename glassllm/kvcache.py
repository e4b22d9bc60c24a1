"""A key/value cache for ``GlassLM.generate``: each new token runs only its own position.

Without a cache, sampling token t reruns the whole context (n positions) through every
layer, although the keys and values of positions < t have not changed: position s only
ever attends to positions ≤ s (the causal mask), so its k and v are fixed once computed.
The cache keeps, per layer, the RoPE-rotated keys and the values of the positions seen
so far, and a step computes q, k, v for the new position only:

    scores = q_t · [K_cache; k_t]ᵀ / √dk      (1 query row against t+1 keys, no mask)

This is inference only (under ``no_grad``): nothing here is differentiated.

Context window: ``generate`` crops the context to the last ``max_seq_len`` tokens, and
once it slides, every earlier position's hidden state changes (it no longer sees the
dropped tokens), so a cache of the old window is wrong. Past ``max_seq_len`` the cache is
rebuilt from the cropped window each step: the same tokens as without a cache, with the
speed-up only while the text fits in the window.

Shapes (STYLE.md letters): per layer the cache holds k, v of shape (1, Hkv, t, dk).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from glassllm import Tensor, no_grad
from glassllm.autograd import repeat_kv, reshape, rope, softmax_np, transpose
from glassllm.layers import linear, rms_norm, rope_angles, swiglu
from glassllm.modules import GlassLM

__all__ = ["KVCache", "next_logits_cached"]


class KVCache:
    """Per-layer keys (RoPE applied) and values of the first ``length`` positions."""

    def __init__(self, model: GlassLM):
        self.model = model
        self.tokens: list[int] = []  # the positions cached, in order
        self.k: list[np.ndarray | None] = [None] * len(model.blocks)  # (1, Hkv, t, dk)
        self.v: list[np.ndarray | None] = [None] * len(model.blocks)  # (1, Hkv, t, dk)

    def extend(self, new: list[int]) -> np.ndarray:
        """Run the positions ``new`` after the cached ones; return the last one's logits (V,).

        ids (1, m) at positions t .. t+m-1; each query i attends to keys 0 .. t+i.
        """
        cfg = self.model.config
        t, m = len(self.tokens), len(new)
        H, Hkv = cfg.n_heads, cfg.n_kv_heads
        dk = cfg.d_model // H
        cos, sin = rope_angles(m, dk, cfg.rope_theta, offset=t)  # (m, dk/2)
        keys = np.arange(t + m)  # (t+m,)
        future = keys[None, :] > (t + np.arange(m))[:, None]  # (m, t+m)
        with no_grad():
            x = self.model.tok_emb(np.array([new]))  # (1, m, d)
            for layer, block in enumerate(self.model.blocks):
                a = block.attn
                h = rms_norm(x, block.attn_norm.weight, cfg.norm_eps)  # (1, m, d)
                q = transpose(reshape(linear(h, a.wq), (1, m, H, dk)), (0, 2, 1, 3))
                k = transpose(reshape(linear(h, a.wk), (1, m, Hkv, dk)), (0, 2, 1, 3))
                v = transpose(reshape(linear(h, a.wv), (1, m, Hkv, dk)), (0, 2, 1, 3))
                q = rope(q, cos, sin).data  # (1, H, m, dk)
                k = rope(k, cos, sin).data  # (1, Hkv, m, dk)
                if self.k[layer] is not None:
                    k = np.concatenate([self.k[layer], k], axis=2)  # (1, Hkv, t+m, dk)
                    v = np.concatenate([self.v[layer], v.data], axis=2)
                else:
                    v = v.data
                self.k[layer], self.v[layer] = k, v
                kr = repeat_kv(Tensor(k), H // Hkv).data  # (1, H, t+m, dk)
                vr = repeat_kv(Tensor(v), H // Hkv).data  # (1, H, t+m, dk)
                scores = q @ kr.transpose(0, 1, 3, 2) / math.sqrt(dk)  # (1, H, m, t+m)
                scores = np.where(future, -np.inf, scores)
                heads = softmax_np(scores, axis=-1) @ vr  # (1, H, m, dk)
                merged = heads.transpose(0, 2, 1, 3).reshape(1, m, H * dk)  # (1, m, d)
                x = x + linear(Tensor(merged), a.wo)  # (1, m, d): residual 1
                f = block.ffn
                x = x + swiglu(rms_norm(x, block.ffn_norm.weight, cfg.norm_eps),
                               f.w1, f.w2, f.w3)  # (1, m, d): residual 2
            logits = self.model.head(self.model.norm(x))  # (1, m, V)
        self.tokens.extend(new)
        return logits.data[0, -1]  # (V,)


def next_logits_cached(model: GlassLM) -> Callable[[list[int]], np.ndarray]:
    """A ``tokens → next-token logits (V,)`` function for ``generate`` that keeps a cache.

    Each call must pass the previous call's tokens plus what was appended (as
    ``generate`` does); anything else (or a context past ``max_seq_len``) rebuilds the
    cache from the cropped window, so the answer always equals ``model(window)[0, -1]``
    up to float rounding.
    """
    cache = KVCache(model)
    window = model.config.max_seq_len

    def next_logits(tokens: list[int]) -> np.ndarray:
        nonlocal cache
        t = len(cache.tokens)
        if len(tokens) > window or t == 0 or tokens[:t] != cache.tokens or len(tokens) == t:
            cache = KVCache(model)
            return cache.extend(tokens[-window:])
        return cache.extend(tokens[t:])

    return next_logits
